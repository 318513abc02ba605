/* ops.c — dense f32 kernels of the reference trainer: linear (cblas_sgemm),
 * RMSNorm, rotary embedding, SwiGLU, forward and backward, on local buffers.
 * No communication and no knowledge of the model here. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "glue.h"

double tr_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int64_t tr_act_numel(const tr_act *a) { return a->b * a->s * a->f; }

tpx_status tr_act_alloc(tr_arena *ar, tr_act *a, int64_t b, int64_t s,
                        int64_t f, tpx_error *err) {
  memset(a, 0, sizeof *a);
  a->b = b;
  a->s = s;
  a->f = f;
  a->S = s;
  a->F = f;
  a->d = tr_arena_floats(ar, b * s * f, err);
  return a->d ? TPX_OK : TPX_NO_MEMORY;
}

void tr_linear_fwd(const float *x, const float *w, const float *bias, float *y,
                   int64_t n, int64_t in, int64_t out) {
  if (n == 0 || out == 0)
    return;
  if (in == 0) {
    memset(y, 0, sizeof(float) * (size_t)(n * out));
  } else
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)out,
                (int)in, 1.0f, x, (int)in, w, (int)in, 0.0f, y, (int)out);
  if (bias)
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
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)in,
                  (int)out, 1.0f, dy, (int)out, w, (int)in,
                  accumulate_dx ? 1.0f : 0.0f, dx, (int)in);
    }
  }
  if (dw && out > 0)
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)out, (int)in,
                (int)n, 1.0f, dy, (int)out, x, (int)in, 1.0f, dw, (int)in);
  if (db)
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < out; j++) db[j] += dy[i * out + j];
}

void tr_rmsnorm_fwd(const float *x, const float *w, float *y, float *rstd,
                    int64_t n, int64_t f, double eps) {
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

void tr_rmsnorm_bwd(const float *x, const float *w, const float *rstd,
                    const float *dy, float *dx, float *dw, int64_t n,
                    int64_t f) {
  for (int64_t i = 0; i < n; i++) {
    const float *xr = x + i * f, *dyr = dy + i * f;
    float *dxr = dx + i * f;
    float r = rstd[i], dot = 0;
    for (int64_t j = 0; j < f; j++) {
      float xn = xr[j] * r;
      dw[j] += dyr[j] * xn;
      dot += dyr[j] * w[j] * xn;
    }
    dot /= (float)f;
    for (int64_t j = 0; j < f; j++)
      dxr[j] = r * (dyr[j] * w[j] - xr[j] * r * dot);
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
  for (int64_t bi = 0; bi < b; bi++)
    for (int64_t p = 0; p < t; p++)
      for (int64_t h = 0; h < nh; h++) {
        float *v = x + ((bi * t + p) * nh + h) * hd;
        const float *c = cosv + p * half, *s = sinv + p * half;
        for (int64_t i = 0; i < half; i++) {
          float a = v[i], bb = v[i + half];
          v[i] = a * c[i] - sg * bb * s[i];
          v[i + half] = bb * c[i] + sg * a * s[i];
        }
      }
}

void tr_swiglu_fwd(const float *g, const float *u, float *m, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    float s = 1.0f / (1.0f + expf(-g[i]));
    m[i] = g[i] * s * u[i];
  }
}

void tr_swiglu_bwd(const float *g, const float *u, const float *dm, float *dg,
                   float *du, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    float s = 1.0f / (1.0f + expf(-g[i]));
    float silu = g[i] * s;
    du[i] = dm[i] * silu;
    dg[i] = dm[i] * u[i] * s * (1.0f + g[i] * (1.0f - s));
  }
}
