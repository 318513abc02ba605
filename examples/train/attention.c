/* attention.c — eager causal self-attention with grouped-query heads on this
 * rank's local heads (the heads its q/k/v_proj shards produce), forward and
 * backward. The products go through cblas_sgemm, one per (batch, head) and
 * in that order; the softmax between them runs over every row at once, on
 * as many threads as the BLAS (tr_threads), each row on one thread, so the
 * result does not depend on the thread count. Positions and RoPE are
 * applied by the caller; softmax probabilities are kept for backward.
 * Under context parallelism the t local queries attend the tk = t·cp keys
 * of the whole sequence (K and V gathered over cp, in position order):
 * query i sees keys 0..qpos[i], its global position (the causal mask on
 * global positions, as torch's context_parallel computes it). */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train.h"

/* Keys per query row: the whole sequence under cp, else t. */
static int64_t keys(const tr_attn_shape *sh) { return sh->tk ? sh->tk : sh->t; }

/* The last key query row i (of t) may see: its global position. */
static int64_t last_key(const tr_attn_shape *sh, int64_t i) {
  return sh->qpos ? sh->qpos[i] : i;
}

/* Where head h of batch row b starts in q / o (ld nh*hd) and in k / v (ld
 * nkv*hd: the kv head its group shares), and its [t, tk] block of scores. */
typedef struct head {
  int64_t q, kv, p;
} head;

static head head_at(const tr_attn_shape *sh, int64_t b, int64_t h) {
  int64_t t = sh->t, tk = keys(sh), hd = sh->hd, grp = sh->nh / sh->nkv;
  head at = {b * t * sh->nh * hd + h * hd, b * tk * sh->nkv * hd + h / grp * hd,
             (b * sh->nh + h) * t * tk};
  return at;
}

/* Row i of a causal score block: softmax over columns 0..i, zero after. */
static void softmax_row(float *row, int64_t i, int64_t t) {
  float mx = row[0], sum = 0;
  for (int64_t j = 1; j <= i; j++) mx = row[j] > mx ? row[j] : mx;
  for (int64_t j = 0; j <= i; j++) {
    row[j] = expf(row[j] - mx);
    sum += row[j];
  }
  for (int64_t j = 0; j <= i; j++) row[j] /= sum;
  for (int64_t j = i + 1; j < t; j++) row[j] = 0;
}

/* Its backward: ds = p * (ds - sum(ds * p)) over columns 0..i. */
static void softmax_row_bwd(float *ds, const float *p, int64_t i, int64_t t) {
  float dot = 0;
  for (int64_t j = 0; j <= i; j++) dot += ds[j] * p[j];
  for (int64_t j = 0; j <= i; j++) ds[j] = p[j] * (ds[j] - dot);
  for (int64_t j = i + 1; j < t; j++) ds[j] = 0;
}

void tr_attn_fwd(const tr_attn_shape *sh, const float *q, const float *k,
                 const float *v, float *p, float *o) {
  int64_t t = sh->t, tk = keys(sh), hd = sh->hd, rows = sh->b * sh->nh * t;
  int ldq = (int)(sh->nh * hd), ldk = (int)(sh->nkv * hd), T = (int)t,
      K = (int)tk;
  float scale = 1.0f / sqrtf((float)hd);
  /* scores p = scale q k^T */
  for (int64_t b = 0; b < sh->b; b++)
    for (int64_t h = 0; h < sh->nh; h++) {
      head at = head_at(sh, b, h);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, K, (int)hd, scale,
                  q + at.q, ldq, k + at.kv, ldk, 0.0f, p + at.p, K);
    }
  TR_PARALLEL_FOR(rows * tk)
  for (int64_t r = 0; r < rows; r++)
    softmax_row(p + r * tk, last_key(sh, r % t), tk);
  /* o = p v */
  for (int64_t b = 0; b < sh->b; b++)
    for (int64_t h = 0; h < sh->nh; h++) {
      head at = head_at(sh, b, h);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, (int)hd, K,
                  1.0f, p + at.p, K, v + at.kv, ldk, 0.0f, o + at.q, ldq);
    }
}

void tr_attn_bwd(const tr_attn_shape *sh, const float *q, const float *k,
                 const float *v, const float *p, const float *dout, float *dq,
                 float *dk, float *dv, float *ds) {
  int64_t t = sh->t, tk = keys(sh), hd = sh->hd, rows = sh->b * sh->nh * t;
  int ldq = (int)(sh->nh * hd), ldk = (int)(sh->nkv * hd), T = (int)t,
      K = (int)tk;
  float scale = 1.0f / sqrtf((float)hd);
  memset(dk, 0, sizeof(float) * (size_t)(sh->b * tk * sh->nkv * hd));
  memset(dv, 0, sizeof(float) * (size_t)(sh->b * tk * sh->nkv * hd));
  /* dV += P^T dO ; dS = dO V^T */
  for (int64_t b = 0; b < sh->b; b++)
    for (int64_t h = 0; h < sh->nh; h++) {
      head at = head_at(sh, b, h);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, (int)hd, T, 1.0f,
                  p + at.p, K, dout + at.q, ldq, 1.0f, dv + at.kv, ldk);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, K, (int)hd, 1.0f,
                  dout + at.q, ldq, v + at.kv, ldk, 0.0f, ds + at.p, K);
    }
  TR_PARALLEL_FOR(rows * tk)
  for (int64_t r = 0; r < rows; r++)
    softmax_row_bwd(ds + r * tk, p + r * tk, last_key(sh, r % t), tk);
  /* dQ = scale dS K ; dK += scale dS^T Q */
  for (int64_t b = 0; b < sh->b; b++)
    for (int64_t h = 0; h < sh->nh; h++) {
      head at = head_at(sh, b, h);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, (int)hd, K,
                  scale, ds + at.p, K, k + at.kv, ldk, 0.0f, dq + at.q, ldq);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, (int)hd, T, scale,
                  ds + at.p, K, q + at.q, ldq, 1.0f, dk + at.kv, ldk);
    }
}
