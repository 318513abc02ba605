/* rt_util.c — helpers of the TP runtime test cases (see rt_util.h). */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/local_test.h"
#include "rt_util.h"

/* ---- failure recording: first one wins, ranks keep going --------------- */

tpx_status rtu_failed(tpx_error *err, const char *fmt, ...) {
  if (err && err->status == TPX_OK) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    err->status = TPX_VALIDATION;
  }
  return TPX_VALIDATION;
}

/* A library call failed: record its message (as a validation failure). */
void rtu_lib_failed(tpx_error *err, const char *what, const tpx_error *e) {
  rtu_failed(err, "%s: %s (%s)", what, e->message, tpx_status_name(e->status));
}

/* ---- values and boxes --------------------------------------------------- */

/* Small integers in [-8, 8]: exact in f32 and bf16, sums stay exact. */
double rtu_ival(int64_t i, int64_t salt) {
  return (double)(((i * 37 + salt * 11) % 17 + 17) % 17) - 8.0;
}

/* Smooth reals in [-0.5, 0.5) for the numeric cases. */
double rtu_rval(int64_t i, int64_t salt) {
  uint64_t h = (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ull ^
               (uint64_t)(salt + 7) * 0xC2B2AE3D27D4EB4Full;
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  return (double)(h % 100000) / 100000.0 - 0.5;
}

int64_t rtu_numel(const int64_t *shape, int ndim) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  return n;
}

/* out[local] = full[box] for the box s of a tensor of `shape`. */
void rtu_box_get(const double *full, const int64_t *shape, int ndim,
                 const tpx_slice *s, double *out) {
  int64_t idx[TPX_MAX_TENSOR_DIMS] = {0};
  int64_t n = tpx_slice_numel(s);
  for (int64_t k = 0; k < n; k++) {
    int64_t g = 0;
    for (int d = 0; d < ndim; d++) g = g * shape[d] + s->offset[d] + idx[d];
    out[k] = full[g];
    for (int d = ndim - 1; d >= 0; d--) {
      if (++idx[d] < s->length[d])
        break;
      idx[d] = 0;
    }
  }
}

tpx_dtype rtu_dt_of(const rt_arg *a) {
  return a->dtype == TPX_DTYPE_BF16 ? TPX_DTYPE_BF16 : TPX_DTYPE_F32;
}

/* bf16 <-> f32 by truncation-free rounding (values here are exact). */
uint16_t rtu_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
float rtu_from_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

void rtu_put(void *buf, tpx_dtype t, int64_t i, double v) {
  if (t == TPX_DTYPE_BF16)
    ((uint16_t *)buf)[i] = rtu_to_bf16((float)v);
  else
    ((float *)buf)[i] = (float)v;
}
double rtu_get(const void *buf, tpx_dtype t, int64_t i) {
  if (t == TPX_DTYPE_BF16)
    return rtu_from_bf16(((const uint16_t *)buf)[i]);
  return ((const float *)buf)[i];
}

/* A tensor with a fresh zeroed buffer of `shape`. */
tpx_tensor rtu_talloc(tpx_dtype t, int ndim, const int64_t *shape) {
  int64_t n = rtu_numel(shape, ndim);
  void *p = calloc((size_t)(n ? n : 1), tpx_dtype_size(t));
  return tpx_tensor_make(p, t, ndim, shape);
}

/* This rank's coordinate on the tp dim (0 when none). */
uint64_t rtu_digest[RT_MAX_RANKS];

void rtu_sim_begin(rtu_sim *s, tpx_mesh_comm *mc, tpx_tensor *const *ts,
                   int n) {
  int on = strcmp(tpx_comm_memspace(tpx_mesh_comm_world(mc)), "host") != 0;
  s->on = on;
  s->n = n;
  for (int i = 0; i < n; i++) {
    s->t[i] = ts[i];
    s->host[i] = ts[i]->data;
    if (!on || !ts[i]->data)
      continue;
    size_t bytes = (size_t)tpx_tensor_nbytes(ts[i]);
    ts[i]->data = tpx__test_dev_alloc(ts[i]->data, bytes);
  }
}

void rtu_sim_end(rtu_sim *s, int64_t me) {
  uint64_t *digest = &rtu_digest[me % RT_MAX_RANKS];
  for (int i = 0; i < s->n; i++) {
    tpx_tensor *t = s->t[i];
    size_t bytes = (size_t)tpx_tensor_nbytes(t);
    if (s->on && t->data) {
      memcpy(s->host[i], tpx__test_dev_host(t->data), bytes);
      tpx__test_dev_free(t->data);
      t->data = s->host[i];
    }
    const unsigned char *b = t->data;
    uint64_t h = *digest;
    for (size_t k = 0; b && k < bytes; k++)
      h = (h ^ b[k]) * 1099511628211ULL; /* FNV-1a */
    *digest = h;
  }
}

int64_t rtu_tp_coord(const tpx_sharding *sh, tpx_mesh_comm *mc) {
  int d = tpx_tp_mesh_dim(sh);
  return d < 0 ? 0 : tpx_comm_rank(tpx_mesh_comm_dim(mc, d));
}

/* Slice of an activation in tp layout `pl` on this rank. */
tpx_status rtu_act_slice(const tpx_sharding *sh, int64_t me, tpx_placement pl,
                         const int64_t *shape, int ndim, tpx_slice *s,
                         tpx_error *e) {
  tpx_placement pls[TPX_MESH_MAX_DIMS];
  const tpx_mesh *mesh = tpx_sharding_mesh(sh);
  for (int m = 0; m < tpx_mesh_ndim(mesh); m++)
    pls[m] = tpx_placement_replicate();
  tpx_placement n;
  tpx_status st = tpx_placement_normalize(pl, ndim, &n, e);
  if (st != TPX_OK)
    return st;
  if (tpx_tp_mesh_dim(sh) >= 0)
    pls[tpx_tp_mesh_dim(sh)] = n;
  return tpx_layout_local_slice(shape, ndim, mesh, pls, me, s, e);
}

/* This rank's piece of logical `full` in layout `pl`: a slice, or for a
 * Partial a split of integer values that sums exactly to full over tp. */
tpx_status rtu_piece_of(const tpx_sharding *sh, tpx_mesh_comm *mc,
                        tpx_placement pl, const double *full,
                        const int64_t *shape, int ndim, double *out,
                        int64_t *local_shape, tpx_error *e) {
  tpx_slice s;
  tpx_status st = rtu_act_slice(sh, tpx_comm_rank(tpx_mesh_comm_world(mc)), pl,
                                shape, ndim, &s, e);
  if (st != TPX_OK)
    return st;
  for (int d = 0; d < ndim; d++) local_shape[d] = s.length[d];
  rtu_box_get(full, shape, ndim, &s, out);
  if (pl.kind == TPX_PARTIAL) {
    int64_t r = rtu_tp_coord(sh, mc), tp = tpx_sharding_tp_size(sh);
    int64_t n = tpx_slice_numel(&s);
    for (int64_t i = 0; i < n; i++) {
      double k = (double)(i % 5) - 2.0;
      out[i] = r == 0 ? out[i] - (double)(tp - 1) * k : k;
    }
  }
  return TPX_OK;
}

/* ---- the MLP block ------------------------------------------------------ */

/* Run a transition into a freshly allocated output (shape from the
 * library); an unstyled module (the plan leaves it plain) copies. On
 * failure out->data is a zeroed buffer of in's size so the rank can
 * continue. */
void rtu_xrun(blk *b, int64_t mod, tpx_transition_side side, int bwd,
              const tpx_placement *arrived, const int64_t *shape,
              const tpx_tensor *in, tpx_tensor *out) {
  tpx_error e = {0};
  if (tpx_sharding_module_entry(b->sh, mod) < 0) {
    *out = rtu_talloc(TPX_DTYPE_F32, in->ndim, in->shape);
    memcpy(out->data, in->data, (size_t)tpx_tensor_nbytes(in));
    return;
  }
  int64_t lo[TPX_MAX_TENSOR_DIMS];
  const char *name = tpx_model_module_fqn(tpx_sharding_model(b->sh), mod);
  char what[200];
  snprintf(what, sizeof what, "block: %s %s %s", name,
           side == TPX_TRANSITION_INPUT ? "input" : "output",
           bwd ? "backward" : "forward");
  if (tpx_tp_transition_shape_dt(b->sh, mod, side, 0, bwd, arrived, b->me,
                                 shape, in->ndim, NULL, lo, &e) != TPX_OK) {
    rtu_lib_failed(b->err, what, &e);
    b->ok = 0;
    *out = rtu_talloc(TPX_DTYPE_F32, in->ndim, in->shape);
    return;
  }
  *out = rtu_talloc(TPX_DTYPE_F32, in->ndim, lo);
  tpx_tensor din = *in;
  rtu_sim sm;
  RTU_SIM(&sm, b->mc, &din, out);
  tpx_status st = tpx_tp_transition_run_dt(b->sh, b->mc, mod, side, 0, bwd,
                                           arrived, shape, &din, out, &e);
  rtu_sim_end(&sm, b->me);
  if (st != TPX_OK) {
    rtu_lib_failed(b->err, what, &e);
    b->ok = 0;
  }
}

int64_t rtu_find_module(const tpx_sharding *sh, const char *fqn) {
  return tpx_model_find_module(tpx_sharding_model(sh), fqn);
}

/* Compare a local float buffer with `ref` (double) over n elements. */
void rtu_cmp(blk *b, const char *what, const float *got, const double *ref,
             int64_t n) {
  double scale = 1e-12;
  for (int64_t i = 0; i < n; i++)
    if (fabs(ref[i]) > scale)
      scale = fabs(ref[i]);
  for (int64_t i = 0; i < n; i++)
    if (!(fabs((double)got[i] - ref[i]) <= 2e-5 * scale)) {
      rtu_failed(b->err, "block: %s element %lld = %.9g, want %.9g (scale %g)",
                 what, (long long)i, (double)got[i], ref[i], scale);
      b->ok = 0;
      return;
    }
}

/* The box of parameter `fqn` on this rank and its global shape. */
int64_t rtu_param_box(blk *b, const char *fqn, tpx_slice *s, int64_t *gshape) {
  const tpx_model *m = tpx_sharding_model(b->sh);
  int64_t p = tpx_model_find_param(m, fqn);
  tpx_param_info pi;
  tpx_error e = {0};
  if (p < 0 || tpx_model_param(m, p, &pi, &e) != TPX_OK ||
      tpx_sharding_local_slice(b->sh, p, b->me, s, &e) != TPX_OK) {
    rtu_failed(b->err, "block: parameter %s: %s", fqn, e.message);
    b->ok = 0;
    memset(s, 0, sizeof *s);
    return -1;
  }
  for (int d = 0; d < pi.ndim; d++) gshape[d] = pi.shape[d];
  return p;
}

/* y[t, o] = sum_i x[t, i] W[o, i] (W row-major [O, In], f32 values held
 * in double), accumulated in double. */
void rtu_lin_fwd(const float *x, const double *W, int64_t rows, int64_t O,
                 int64_t In, float *y) {
  for (int64_t t = 0; t < rows; t++)
    for (int64_t o = 0; o < O; o++) {
      double s = 0;
      for (int64_t i = 0; i < In; i++)
        s += (double)x[t * In + i] * (double)(float)W[o * In + i];
      y[t * O + o] = (float)s;
    }
}

/* dx[t, i] = sum_o dy[t, o] W[o, i]; dW[o, i] += sum_t dy[t, o] x[t, i]. */
void rtu_lin_bwd(const float *dy, const float *x, const double *W, int64_t rows,
                 int64_t O, int64_t In, float *dx, float *dW) {
  for (int64_t t = 0; t < rows; t++) {
    for (int64_t i = 0; i < In; i++) {
      double s = 0;
      for (int64_t o = 0; o < O; o++)
        s += (double)dy[t * O + o] * (double)(float)W[o * In + i];
      dx[t * In + i] = (float)s;
    }
    for (int64_t o = 0; o < O; o++)
      for (int64_t i = 0; i < In; i++)
        dW[o * In + i] += dy[t * O + o] * x[t * In + i];
  }
}

/* ---- vocab-parallel loss ------------------------------------------------ */

void rtu_cmpd(tpx_error *err, const char *what, double got, double want,
              double tol) {
  if (!(fabs(got - want) <= tol * (1.0 + fabs(want))))
    rtu_failed(err, "loss: %s = %.12g, want %.12g", what, got, want);
}

/* grad[i, j] (this rank's columns [off, off + len)) against
 * scale * g_i * (softmax - onehot), g_i = gi[i] or 1; 0 on ignored rows. */
