/* attention.c — eager causal self-attention with grouped-query heads on this
 * rank's local heads (the heads its q/k/v_proj shards produce), forward and
 * backward, through cblas_sgemm. Positions and RoPE are applied by the
 * caller; softmax probabilities are kept for backward. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train.h"

void tr_attn_fwd(const tr_attn_shape *sh, const float *q, const float *k,
                 const float *v, float *p, float *o) {
  int64_t t = sh->t, nh = sh->nh, nkv = sh->nkv, hd = sh->hd, grp = nh / nkv;
  int ldq = (int)(nh * hd), ldk = (int)(nkv * hd);
  float scale = 1.0f / sqrtf((float)hd);
  for (int64_t b = 0; b < sh->b; b++)
    for (int64_t h = 0; h < nh; h++) {
      const float *qb = q + b * t * nh * hd + h * hd;
      const float *kb = k + b * t * nkv * hd + (h / grp) * hd;
      const float *vb = v + b * t * nkv * hd + (h / grp) * hd;
      float *pb = p + (b * nh + h) * t * t;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)t, (int)t,
                  (int)hd, scale, qb, ldq, kb, ldk, 0.0f, pb, (int)t);
      for (int64_t i = 0; i < t; i++) {
        float *row = pb + i * t, mx = row[0], sum = 0;
        for (int64_t j = 1; j <= i; j++) mx = row[j] > mx ? row[j] : mx;
        for (int64_t j = 0; j <= i; j++) {
          row[j] = expf(row[j] - mx);
          sum += row[j];
        }
        for (int64_t j = 0; j <= i; j++) row[j] /= sum;
        for (int64_t j = i + 1; j < t; j++) row[j] = 0;
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)t, (int)hd,
                  (int)t, 1.0f, pb, (int)t, vb, ldk, 0.0f,
                  o + b * t * nh * hd + h * hd, ldq);
    }
}

void tr_attn_bwd(const tr_attn_shape *sh, const float *q, const float *k,
                 const float *v, const float *p, const float *dout, float *dq,
                 float *dk, float *dv, float *ds) {
  int64_t t = sh->t, nh = sh->nh, nkv = sh->nkv, hd = sh->hd, grp = nh / nkv;
  int ldq = (int)(nh * hd), ldk = (int)(nkv * hd);
  float scale = 1.0f / sqrtf((float)hd);
  memset(dk, 0, sizeof(float) * (size_t)(sh->b * t * nkv * hd));
  memset(dv, 0, sizeof(float) * (size_t)(sh->b * t * nkv * hd));
  for (int64_t b = 0; b < sh->b; b++)
    for (int64_t h = 0; h < nh; h++) {
      int64_t qo = b * t * nh * hd + h * hd,
              ko = b * t * nkv * hd + (h / grp) * hd;
      const float *pb = p + (b * nh + h) * t * t;
      /* dV += P^T dO ; dP = dO V^T */
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)t, (int)hd,
                  (int)t, 1.0f, pb, (int)t, dout + qo, ldq, 1.0f, dv + ko, ldk);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)t, (int)t,
                  (int)hd, 1.0f, dout + qo, ldq, v + ko, ldk, 0.0f, ds, (int)t);
      for (int64_t i = 0; i < t; i++) {
        float *row = ds + i * t, dot = 0;
        const float *pr = pb + i * t;
        for (int64_t j = 0; j <= i; j++) dot += row[j] * pr[j];
        for (int64_t j = 0; j <= i; j++) row[j] = pr[j] * (row[j] - dot);
        for (int64_t j = i + 1; j < t; j++) row[j] = 0;
      }
      /* dQ = scale dS K ; dK += scale dS^T Q */
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)t, (int)hd,
                  (int)t, scale, ds, (int)t, k + ko, ldk, 0.0f, dq + qo, ldq);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)t, (int)hd,
                  (int)t, scale, ds, (int)t, q + qo, ldq, 1.0f, dk + ko, ldk);
    }
}
