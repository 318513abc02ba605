/* ops.c — dense f32 kernels of the reference trainer: linear (cblas_sgemm),
 * RMSNorm, rotary embedding, SwiGLU, forward and backward, on local buffers.
 * The rank's threads (tr_threads_init) run both the products (tr_sgemm) and
 * the element-wise loops, split so that every sum runs in the same order
 * as on one thread: the results do not depend on the thread count. No
 * communication and no knowledge of the model here. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "glue.h"

/* The rank's threads (tr_threads_init): written once by main before any
 * rank starts, read-only after. */
static int rank_threads = 0;

void tr_threads_init(void) {
  int n = openblas_get_num_threads();
  rank_threads = n < 1 ? 1 : n;
#if defined(_OPENMP)
  openblas_set_num_threads(1);
#endif
}

int tr_threads(int64_t work) {
  /* below this many elements a loop is done before the threads start */
  const int64_t grain = 1 << 14;
#if defined(_OPENMP)
  int n = rank_threads ? rank_threads : openblas_get_num_threads();
#else
  int n = 1;
#endif
  return work < grain || n < 1 ? 1 : n;
}

void tr_sgemm1(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
               float alpha, const float *a, int64_t lda, const float *b,
               int64_t ldb, float beta, float *c, int64_t ldc) {
  if (m > 0 && n > 0)
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k,
                alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
}

/* A product smaller than this many multiply-adds runs on one thread. */
#define SPLIT_MNK (1 << 21)

void tr_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
              float alpha, const float *a, int64_t lda, const float *b,
              int64_t ldb, float beta, float *c, int64_t ldc) {
  enum CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans,
                       tb = trans_b ? CblasTrans : CblasNoTrans;
  int nt = m * n * k < SPLIT_MNK ? 1 : tr_threads(m * n * k);
  if (nt < 2) {
    tr_sgemm1(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  /* the longer side of C in nt parts: rows take A's rows (columns when A
   * is transposed), columns take B's columns (rows when B is) */
  int by_rows = m >= n;
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) num_threads(nt)
#endif
  for (int t = 0; t < nt; t++) {
    int64_t len = by_rows ? m : n;
    int64_t i0 = len * t / nt, i1 = len * (t + 1) / nt;
    const float *ap = a, *bp = b;
    float *cp = c;
    if (by_rows) {
      ap += trans_a ? i0 : i0 * lda;
      cp += i0 * ldc;
    } else {
      bp += trans_b ? i0 * ldb : i0;
      cp += i0;
    }
    cblas_sgemm(CblasRowMajor, ta, tb, (int)(by_rows ? i1 - i0 : m),
                (int)(by_rows ? n : i1 - i0), (int)k, alpha, ap, (int)lda, bp,
                (int)ldb, beta, cp, (int)ldc);
  }
}

double tr_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int64_t tr_act_numel(const tr_act *a) { return a->b * a->s * a->f; }

tpx_status tr_act_alloc(tr_arena *ar, tr_act *a, int64_t b, int64_t s,
                        int64_t f, int zero, tpx_error *err) {
  memset(a, 0, sizeof *a);
  a->b = b;
  a->s = s;
  a->f = f;
  a->S = s;
  a->F = f;
  a->d = tr_arena_floats(ar, b * s * f, zero, err);
  return a->d ? TPX_OK : TPX_NO_MEMORY;
}

void tr_linear_fwd(const float *x, const float *w, const float *bias, float *y,
                   int64_t n, int64_t in, int64_t out) {
  if (n == 0 || out == 0)
    return;
  if (in == 0) {
    memset(y, 0, sizeof(float) * (size_t)(n * out));
  } else
    tr_sgemm(0, 1, n, out, in, 1.0f, x, in, w, in, 0.0f, y, out);
  if (!bias)
    return;
  TR_PARALLEL_FOR(n * out)
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < out; j++) y[i * out + j] += bias[j];
}

void tr_linear_bwd(const float *x, const float *w, const float *dy, float *dx,
                   float *dw, float *db, int64_t n, int64_t in, int64_t out,
                   int accumulate_dx) {
  if (n == 0 || in == 0)
    return;
  if (dx) {
    if (out == 0) {
      if (!accumulate_dx)
        memset(dx, 0, sizeof(float) * (size_t)(n * in));
    } else {
      tr_sgemm(0, 0, n, in, out, 1.0f, dy, out, w, in,
               accumulate_dx ? 1.0f : 0.0f, dx, in);
    }
  }
  if (dw && out > 0)
    tr_sgemm(1, 0, out, in, n, 1.0f, dy, out, x, in, 1.0f, dw, in);
  if (db)
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < out; j++) db[j] += dy[i * out + j];
}

void tr_rmsnorm_fwd(const float *x, const float *w, float *y, float *rstd,
                    int64_t n, int64_t f, double eps) {
  TR_PARALLEL_FOR(n * f)
  for (int64_t i = 0; i < n; i++) {
    const float *xr = x + i * f;
    float *yr = y + i * f;
    float ss = 0;
    for (int64_t j = 0; j < f; j++) ss += xr[j] * xr[j];
    float r = 1.0f / sqrtf(ss / (float)f + (float)eps);
    rstd[i] = r;
    for (int64_t j = 0; j < f; j++) yr[j] = w[j] * (xr[j] * r);
  }
}

/* Columns per block of the weight gradient's loop: each block's sums run
 * over the rows in order, as a single thread would. */
#define COLS 64

void tr_rmsnorm_bwd(const float *x, const float *w, const float *rstd,
                    const float *dy, float *dx, float *dw, int64_t n,
                    int64_t f) {
  TR_PARALLEL_FOR(n * f)
  for (int64_t i = 0; i < n; i++) {
    const float *xr = x + i * f, *dyr = dy + i * f;
    float *dxr = dx + i * f;
    float r = rstd[i], dot = 0;
    for (int64_t j = 0; j < f; j++) dot += dyr[j] * w[j] * (xr[j] * r);
    dot /= (float)f;
    for (int64_t j = 0; j < f; j++)
      dxr[j] = r * (dyr[j] * w[j] - xr[j] * r * dot);
  }
  int64_t blocks = (f + COLS - 1) / COLS;
  TR_PARALLEL_FOR(n * f)
  for (int64_t blk = 0; blk < blocks; blk++) {
    int64_t j0 = blk * COLS, j1 = j0 + COLS < f ? j0 + COLS : f;
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = j0; j < j1; j++)
        dw[j] += dy[i * f + j] * (x[i * f + j] * rstd[i]);
  }
}

void tr_rope_tables(float *cosv, float *sinv, int64_t t, int64_t hd,
                    const double *inv_freq) {
  int64_t half = hd / 2;
  for (int64_t p = 0; p < t; p++)
    for (int64_t i = 0; i < half; i++) {
      double a = (double)p * inv_freq[i];
      cosv[p * half + i] = (float)cos(a);
      sinv[p * half + i] = (float)sin(a);
    }
}

void tr_rope(float *x, int64_t b, int64_t t, int64_t nh, int64_t hd,
             const float *cosv, const float *sinv, int inverse) {
  int64_t half = hd / 2;
  float sg = inverse ? -1.0f : 1.0f;
  int64_t rows = b * t * nh; /* one head of one position each */
  TR_PARALLEL_FOR(rows * hd)
  for (int64_t r = 0; r < rows; r++) {
    int64_t p = r / nh % t;
    float *v = x + r * hd;
    const float *c = cosv + p * half, *s = sinv + p * half;
    for (int64_t i = 0; i < half; i++) {
      float a = v[i], bb = v[i + half];
      v[i] = a * c[i] - sg * bb * s[i];
      v[i + half] = bb * c[i] + sg * a * s[i];
    }
  }
}

void tr_swiglu_fwd(const float *g, const float *u, float *m, int64_t n) {
  TR_PARALLEL_FOR(n)
  for (int64_t i = 0; i < n; i++) {
    float s = 1.0f / (1.0f + expf(-g[i]));
    m[i] = g[i] * s * u[i];
  }
}

void tr_swiglu_bwd(const float *g, const float *u, const float *dm, float *dg,
                   float *du, int64_t n) {
  TR_PARALLEL_FOR(n)
  for (int64_t i = 0; i < n; i++) {
    float s = 1.0f / (1.0f + expf(-g[i]));
    float silu = g[i] * s;
    du[i] = dm[i] * silu;
    dg[i] = dm[i] * u[i] * s * (1.0f + g[i] * (1.0f - s));
  }
}
