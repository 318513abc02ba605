/* attention.c — eager causal self-attention with grouped-query heads on this
 * rank's local heads (the heads its q/k/v_proj shards produce), forward and
 * backward. Each (batch row, kv head) is one task: its heads' products go
 * through cblas_sgemm 64 query rows at a time, each block over only the
 * keys its rows may see (the causal mask skips the rest), with the softmax
 * between them. The tasks run on the rank's threads (tr_threads), each
 * task's products on one (the BLAS runs single-threaded: tr_threads_init;
 * a (b, head) product is too small to split). Each task's sums run in the
 * same order whatever the thread count. Positions and RoPE are applied by
 * the caller; softmax probabilities are kept for backward.
 * Under context parallelism the t local queries attend the tk = t·cp keys
 * of the whole sequence (K and V gathered over cp, in position order):
 * query i sees keys 0..qpos[i], its global position (the causal mask on
 * global positions, as torch's context_parallel computes it). */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train.h"

/* Query rows per block of products. */
#define ROWS 64

/* Keys per query row: the whole sequence under cp, else t. */
static int64_t keys(const tr_attn_shape *sh) { return sh->tk ? sh->tk : sh->t; }

/* The last key query row i (of t) may see: its global position. */
static int64_t last_key(const tr_attn_shape *sh, int64_t i) {
  return sh->qpos ? sh->qpos[i] : i;
}

/* Keys that query rows [i0, i1) may see between them. */
static int64_t seen_keys(const tr_attn_shape *sh, int64_t i0, int64_t i1) {
  int64_t m = 0;
  for (int64_t i = i0; i < i1; i++) {
    int64_t k = last_key(sh, i) + 1;
    m = k > m ? k : m;
  }
  return m;
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

/* Runs task(sh, b, g, ...) for every batch row b and kv head g on the
 * rank's threads. */
typedef struct attn_args {
  const float *q, *k, *v, *p, *dout;
  float *pw, *o, *dq, *dk, *dv, *ds;
} attn_args;
typedef void (*attn_task)(const tr_attn_shape *sh, int64_t b, int64_t g,
                          const attn_args *a);

static void run_tasks(const tr_attn_shape *sh, attn_task task,
                      const attn_args *a) {
  int64_t n = sh->b * sh->nkv;
  int threads = tr_threads(sh->b * sh->nh * sh->t * keys(sh));
  (void)threads; /* without OpenMP: one after the other */
#if defined(_OPENMP)
#pragma omp parallel for schedule(dynamic) num_threads(threads)
#endif
  for (int64_t i = 0; i < n; i++) task(sh, i / sh->nkv, i % sh->nkv, a);
}

static void fwd_task(const tr_attn_shape *sh, int64_t b, int64_t g,
                     const attn_args *a) {
  int64_t t = sh->t, tk = keys(sh), hd = sh->hd, grp = sh->nh / sh->nkv;
  int ldq = (int)(sh->nh * hd), ldk = (int)(sh->nkv * hd), K = (int)tk;
  float scale = 1.0f / sqrtf((float)hd);
  for (int64_t h = g * grp; h < (g + 1) * grp; h++) {
    head at = head_at(sh, b, h);
    for (int64_t i0 = 0; i0 < t; i0 += ROWS) {
      int64_t i1 = i0 + ROWS < t ? i0 + ROWS : t;
      int m = (int)(i1 - i0), n = (int)seen_keys(sh, i0, i1);
      float *p = a->pw + at.p + i0 * tk;
      /* scores p = scale q k^T over the keys seen */
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, (int)hd, scale,
                  a->q + at.q + i0 * ldq, ldq, a->k + at.kv, ldk, 0.0f, p, K);
      for (int64_t i = i0; i < i1; i++)
        softmax_row(p + (i - i0) * tk, last_key(sh, i), tk);
      /* o = p v */
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, (int)hd, n,
                  1.0f, p, K, a->v + at.kv, ldk, 0.0f, a->o + at.q + i0 * ldq,
                  ldq);
    }
  }
}

void tr_attn_fwd(const tr_attn_shape *sh, const float *q, const float *k,
                 const float *v, float *p, float *o) {
  attn_args a = {q, k, v, NULL, NULL, p, o, NULL, NULL, NULL, NULL};
  run_tasks(sh, fwd_task, &a);
}

static void bwd_task(const tr_attn_shape *sh, int64_t b, int64_t g,
                     const attn_args *a) {
  int64_t t = sh->t, tk = keys(sh), hd = sh->hd, grp = sh->nh / sh->nkv;
  int ldq = (int)(sh->nh * hd), ldk = (int)(sh->nkv * hd), K = (int)tk;
  float scale = 1.0f / sqrtf((float)hd);
  float *dk = a->dk + b * tk * ldk + g * hd,
        *dv = a->dv + b * tk * ldk + g * hd;
  for (int64_t j = 0; j < tk; j++) {
    memset(dk + j * ldk, 0, sizeof(float) * (size_t)hd);
    memset(dv + j * ldk, 0, sizeof(float) * (size_t)hd);
  }
  for (int64_t h = g * grp; h < (g + 1) * grp; h++) {
    head at = head_at(sh, b, h);
    for (int64_t i0 = 0; i0 < t; i0 += ROWS) {
      int64_t i1 = i0 + ROWS < t ? i0 + ROWS : t;
      int m = (int)(i1 - i0), n = (int)seen_keys(sh, i0, i1);
      const float *p = a->p + at.p + i0 * tk, *dout = a->dout + at.q + i0 * ldq;
      float *ds = a->ds + at.p + i0 * tk;
      /* dV += P^T dO ; dS = dO V^T */
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, (int)hd, m, 1.0f,
                  p, K, dout, ldq, 1.0f, dv, ldk);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, (int)hd, 1.0f,
                  dout, ldq, a->v + at.kv, ldk, 0.0f, ds, K);
      for (int64_t i = i0; i < i1; i++)
        softmax_row_bwd(ds + (i - i0) * tk, p + (i - i0) * tk, last_key(sh, i),
                        tk);
      /* dQ = scale dS K ; dK += scale dS^T Q */
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, (int)hd, n,
                  scale, ds, K, a->k + at.kv, ldk, 0.0f,
                  a->dq + at.q + i0 * ldq, ldq);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, (int)hd, m, scale,
                  ds, K, a->q + at.q + i0 * ldq, ldq, 1.0f, dk, ldk);
    }
  }
}

void tr_attn_bwd(const tr_attn_shape *sh, const float *q, const float *k,
                 const float *v, const float *p, const float *dout, float *dq,
                 float *dk, float *dv, float *ds) {
  attn_args a = {q, k, v, p, dout, NULL, NULL, dq, dk, dv, ds};
  run_tasks(sh, bwd_task, &a);
}
