/* rt_cases.c — rank bodies of the TP runtime tests (see rt_cases.h).
 * References come from the full logical tensors, computed on every rank in
 * double precision from deterministic values; a rank's expected piece is
 * the box tpx_layout_local_slice (activations) or tpx_sharding_local_slice
 * (parameters) gives it. */
#include "rt_cases.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- failure recording: first one wins, ranks keep going --------------- */

static tpx_status failed(tpx_error *err, const char *fmt, ...) {
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
static void lib_failed(tpx_error *err, const char *what, const tpx_error *e) {
  failed(err, "%s: %s (%s)", what, e->message, tpx_status_name(e->status));
}

/* ---- values and boxes --------------------------------------------------- */

/* Small integers in [-8, 8]: exact in f32 and bf16, sums stay exact. */
static double ival(int64_t i, int64_t salt) {
  return (double)(((i * 37 + salt * 11) % 17 + 17) % 17) - 8.0;
}

/* Smooth reals in [-0.5, 0.5) for the numeric cases. */
static double rval(int64_t i, int64_t salt) {
  uint64_t h = (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ull ^
               (uint64_t)(salt + 7) * 0xC2B2AE3D27D4EB4Full;
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  return (double)(h % 100000) / 100000.0 - 0.5;
}

static int64_t numel(const int64_t *shape, int ndim) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  return n;
}

/* out[local] = full[box] for the box s of a tensor of `shape`. */
static void box_get(const double *full, const int64_t *shape, int ndim,
                    const tpx_slice *s, double *out) {
  int64_t idx[TPX_MAX_TENSOR_DIMS] = {0};
  int64_t n = tpx_slice_numel(s);
  for (int64_t k = 0; k < n; k++) {
    int64_t g = 0;
    for (int d = 0; d < ndim; d++) g = g * shape[d] + s->offset[d] + idx[d];
    out[k] = full[g];
    for (int d = ndim - 1; d >= 0; d--) {
      if (++idx[d] < s->length[d]) break;
      idx[d] = 0;
    }
  }
}

static tpx_dtype dt_of(const rt_arg *a) {
  return a->dtype == TPX_DTYPE_BF16 ? TPX_DTYPE_BF16 : TPX_DTYPE_F32;
}

/* bf16 <-> f32 by truncation-free rounding (values here are exact). */
static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
static float from_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static void put(void *buf, tpx_dtype t, int64_t i, double v) {
  if (t == TPX_DTYPE_BF16)
    ((uint16_t *)buf)[i] = to_bf16((float)v);
  else
    ((float *)buf)[i] = (float)v;
}
static double get(const void *buf, tpx_dtype t, int64_t i) {
  if (t == TPX_DTYPE_BF16) return from_bf16(((const uint16_t *)buf)[i]);
  return ((const float *)buf)[i];
}

/* A tensor with a fresh zeroed buffer of `shape`. */
static tpx_tensor talloc(tpx_dtype t, int ndim, const int64_t *shape) {
  int64_t n = numel(shape, ndim);
  void *p = calloc((size_t)(n ? n : 1), tpx_dtype_size(t));
  return tpx_tensor_make(p, t, ndim, shape);
}

/* This rank's coordinate on the tp dim (0 when none). */
static int64_t tp_coord(const tpx_sharding *sh, tpx_mesh_comm *mc) {
  int d = tpx_tp_mesh_dim(sh);
  return d < 0 ? 0 : tpx_comm_rank(tpx_mesh_comm_dim(mc, d));
}

/* Slice of an activation in tp layout `pl` on this rank. */
static tpx_status act_slice(const tpx_sharding *sh, int64_t me,
                            tpx_placement pl, const int64_t *shape, int ndim,
                            tpx_slice *s, tpx_error *e) {
  tpx_placement pls[TPX_MESH_MAX_DIMS];
  const tpx_mesh *mesh = tpx_sharding_mesh(sh);
  for (int m = 0; m < tpx_mesh_ndim(mesh); m++)
    pls[m] = tpx_placement_replicate();
  tpx_placement n;
  tpx_status st = tpx_placement_normalize(pl, ndim, &n, e);
  if (st != TPX_OK) return st;
  if (tpx_tp_mesh_dim(sh) >= 0) pls[tpx_tp_mesh_dim(sh)] = n;
  return tpx_layout_local_slice(shape, ndim, mesh, pls, me, s, e);
}

/* This rank's piece of logical `full` in layout `pl`: a slice, or for a
 * Partial a split of integer values that sums exactly to full over tp. */
static tpx_status piece_of(const tpx_sharding *sh, tpx_mesh_comm *mc,
                           tpx_placement pl, const double *full,
                           const int64_t *shape, int ndim, double *out,
                           int64_t *local_shape, tpx_error *e) {
  tpx_slice s;
  tpx_status st = act_slice(sh, tpx_comm_rank(tpx_mesh_comm_world(mc)), pl,
                            shape, ndim, &s, e);
  if (st != TPX_OK) return st;
  for (int d = 0; d < ndim; d++) local_shape[d] = s.length[d];
  box_get(full, shape, ndim, &s, out);
  if (pl.kind == TPX_PARTIAL) {
    int64_t r = tp_coord(sh, mc), tp = tpx_sharding_tp_size(sh);
    int64_t n = tpx_slice_numel(&s);
    for (int64_t i = 0; i < n; i++) {
      double k = (double)(i % 5) - 2.0;
      out[i] = r == 0 ? out[i] - (double)(tp - 1) * k : k;
    }
  }
  return TPX_OK;
}

/* ---- transitions -------------------------------------------------------- */

static tpx_placement grad_of(tpx_placement p) {
  return p.kind == TPX_PARTIAL ? tpx_placement_replicate() : p;
}

static void pl_text(tpx_placement p, char *buf, size_t n) {
  tpx_placement_format(p, buf, n);
}

/* One (transition, direction, arrival) on this rank. Returns a failure
 * only through err; collectives always run when the layouts resolve. */
static void one_transition(const rt_arg *a, tpx_mesh_comm *mc, int64_t mod,
                           const tpx_transition *tr, int bwd,
                           const tpx_placement *arrived, tpx_error *err) {
  const tpx_sharding *sh = a->sh;
  tpx_dtype dt = dt_of(a);
  int64_t me = tpx_comm_rank(tpx_mesh_comm_world(mc));
  /* dp coordinates give every data-parallel rank its own data. */
  int64_t salt = (me - tp_coord(sh, mc)) * 3 + (int64_t)mod + bwd * 5;
  int64_t shape[3] = {2, a->T, a->D};
  int ndim = 3;
  const char *name = tpx_model_module_fqn(tpx_sharding_model(sh), mod);
  char where[256], ai[32] = "plain";
  if (arrived) pl_text(*arrived, ai, sizeof ai);
  snprintf(where, sizeof where, "module '%s' %s %d %s (arrived %s)", name,
           tr->side == TPX_TRANSITION_INPUT ? "input" : "output", tr->index,
           bwd ? "backward" : "forward", ai);
  tpx_error e = {0};
  tpx_placement in_pl, out_pl;
  int copy;
  if (tpx_tp_transition_layouts_dt(sh, mod, tr->side, tr->index, bwd, arrived,
                                   ndim, &in_pl, &out_pl, &copy,
                                   &e) != TPX_OK) {
    lib_failed(err, where, &e);
    return; /* every rank fails the same way: no collective skipped */
  }
  /* The dual: what each direction reads and writes. */
  tpx_placement from, to, arr;
  tpx_placement_normalize(in_pl, ndim, &in_pl, NULL);
  tpx_placement_normalize(out_pl, ndim, &out_pl, NULL);
  tpx_placement_normalize(tr->from, ndim, &from, NULL);
  tpx_placement_normalize(tr->to, ndim, &to, NULL);
  if (arrived) tpx_placement_normalize(*arrived, ndim, &arr, NULL);
  char x1[32], x2[32];
  pl_text(in_pl, x1, sizeof x1);
  pl_text(out_pl, x2, sizeof x2);
  if (tpx_sharding_tp_size(sh) > 1 && !tr->from_is_none) {
    if (!bwd && !arrived &&
        !(tpx_placement_equal(in_pl, from) &&
          (tpx_placement_equal(out_pl, to) || copy)))
      failed(err, "%s: forward reads %s writes %s", where, x1, x2);
    if (!bwd && arrived &&
        !(tpx_placement_equal(in_pl, arr) &&
          tpx_placement_equal(out_pl, to)))
      failed(err, "%s: forward reads %s writes %s", where, x1, x2);
    if (bwd && !arrived) {
      /* The input's gradient in the layout it was annotated with. */
      if (!tpx_placement_equal(out_pl, grad_of(from)))
        failed(err, "%s: backward writes %s, not grad of from", where, x2);
      /* The incoming gradient: grad of `to`, or a Partial one where a
       * replicated activation feeds a sharded matmul. */
      if (!tpx_placement_equal(in_pl, grad_of(to)) &&
          !(in_pl.kind == TPX_PARTIAL && to.kind == TPX_REPLICATE))
        failed(err, "%s: backward reads %s", where, x1);
    }
    if (bwd && arrived) {
      int same = tpx_placement_equal(arr, to);
      if (same ? !tpx_placement_equal(in_pl, out_pl)
               : !tpx_placement_equal(out_pl, arr))
        failed(err, "%s: backward reads %s writes %s", where, x1, x2);
    }
  }
  int64_t n = numel(shape, ndim);
  double *full = malloc((size_t)n * sizeof *full);
  double *pin = malloc((size_t)n * sizeof *pin);
  double *pout = malloc((size_t)n * sizeof *pout);
  for (int64_t i = 0; i < n; i++) full[i] = ival(i, salt);
  int64_t lin[3], lout[3], sin_[3], sout[3];
  tpx_status st = piece_of(sh, mc, in_pl, full, shape, ndim, pin, lin, &e);
  if (st == TPX_OK)
    st = piece_of(sh, mc, out_pl, full, shape, ndim, pout, lout, &e);
  if (st == TPX_OK)
    st = tpx_tp_transition_shape_dt(sh, mod, tr->side, tr->index, bwd,
                                    arrived, me, shape, ndim, sin_, sout, &e);
  if (st != TPX_OK) {
    lib_failed(err, where, &e);
    free(full), free(pin), free(pout);
    return;
  }
  for (int d = 0; d < ndim; d++)
    if (sin_[d] != lin[d] || sout[d] != lout[d])
      failed(err, "%s: shape dim %d: in %lld/%lld out %lld/%lld", where, d,
             (long long)sin_[d], (long long)lin[d], (long long)sout[d],
             (long long)lout[d]);
  tpx_tensor tin = talloc(dt, ndim, lin), tout = talloc(dt, ndim, lout);
  for (int64_t i = 0; i < numel(lin, ndim); i++) put(tin.data, dt, i, pin[i]);
  if (tpx_tp_transition_run_dt(sh, mc, mod, tr->side, tr->index, bwd,
                               arrived, shape, &tin, &tout, &e) != TPX_OK)
    lib_failed(err, where, &e);
  else if (out_pl.kind == TPX_PARTIAL && !copy) {
    /* Replicate -> Partial keeps the value on tp index 0 (redistribute.h). */
    int64_t r = tp_coord(sh, mc);
    for (int64_t i = 0; i < numel(lout, ndim); i++) {
      double want = r == 0 ? full[i] : 0.0;
      if (get(tout.data, dt, i) != want) {
        failed(err, "%s: element %lld = %g, want %g", where, (long long)i,
               get(tout.data, dt, i), want);
        break;
      }
    }
  } else {
    for (int64_t i = 0; i < numel(lout, ndim); i++)
      if (get(tout.data, dt, i) != pout[i]) {
        failed(err, "%s: %s -> %s element %lld = %g, want %g", where, x1, x2,
               (long long)i, get(tout.data, dt, i), pout[i]);
        break;
      }
  }
  free(tin.data), free(tout.data), free(full), free(pin), free(pout);
}

tpx_status case_transitions(tpx_comm *world, void *arg, tpx_error *err) {
  rt_arg *a = arg;
  const tpx_sharding *sh = a->sh;
  tpx_mesh_comm *mc = NULL;
  tpx_status st = tpx_mesh_comm_create(world, tpx_sharding_mesh(sh), &mc, err);
  if (st != TPX_OK) return st;
  const tpx_model *m = tpx_sharding_model(sh);
  int runs = 0;
  for (size_t mod = 0; mod < tpx_model_num_modules(m); mod++) {
    const tpx_transition *trs;
    size_t cnt;
    tpx_error e = {0};
    if (tpx_sharding_module_transitions(sh, (int64_t)mod, &trs, &cnt, &e) !=
        TPX_OK) {
      lib_failed(err, "module transitions", &e);
      continue;
    }
    for (size_t i = 0; i < cnt; i++) {
      const tpx_transition *tr = &trs[i];
      for (int bwd = 0; bwd < 2; bwd++) {
        one_transition(a, mc, (int64_t)mod, tr, bwd, NULL, err);
        runs++;
        if (tr->side != TPX_TRANSITION_INPUT || tr->from_is_none) continue;
        tpx_placement arr[3] = {tpx_placement_replicate(),
                                tpx_placement_shard(1), tr->to};
        for (int k = 0; k < 3; k++) {
          one_transition(a, mc, (int64_t)mod, tr, bwd, &arr[k], err);
          runs++;
        }
      }
    }
  }
  if (tpx_comm_rank(world) == 0) a->cases_run = runs;
  tpx_mesh_comm_destroy(mc);
  return err->status;
}

/* ---- the MLP block ------------------------------------------------------ */

typedef struct blk {
  const tpx_sharding *sh;
  tpx_mesh_comm *mc;
  int64_t me;
  tpx_error *err;
  int ok;
} blk;

/* Run a transition into a freshly allocated output (shape from the
 * library). On failure out->data is a zeroed buffer of in's size so the
 * rank can continue. */
static void xrun(blk *b, int64_t mod, tpx_transition_side side, int bwd,
                 const tpx_placement *arrived, const int64_t *shape,
                 const tpx_tensor *in, tpx_tensor *out) {
  tpx_error e = {0};
  int64_t lo[TPX_MAX_TENSOR_DIMS];
  const char *name = tpx_model_module_fqn(tpx_sharding_model(b->sh), mod);
  char what[200];
  snprintf(what, sizeof what, "block: %s %s %s", name,
           side == TPX_TRANSITION_INPUT ? "input" : "output",
           bwd ? "backward" : "forward");
  if (tpx_tp_transition_shape_dt(b->sh, mod, side, 0, bwd, arrived, b->me,
                                 shape, in->ndim, NULL, lo, &e) != TPX_OK) {
    lib_failed(b->err, what, &e);
    b->ok = 0;
    *out = talloc(TPX_DTYPE_F32, in->ndim, in->shape);
    return;
  }
  *out = talloc(TPX_DTYPE_F32, in->ndim, lo);
  if (tpx_tp_transition_run_dt(b->sh, b->mc, mod, side, 0, bwd, arrived,
                               shape, in, out, &e) != TPX_OK) {
    lib_failed(b->err, what, &e);
    b->ok = 0;
  }
}

static int64_t find_module(const tpx_sharding *sh, const char *fqn) {
  return tpx_model_find_module(tpx_sharding_model(sh), fqn);
}

/* Compare a local float buffer with `ref` (double) over n elements. */
static void cmp(blk *b, const char *what, const float *got, const double *ref,
                int64_t n) {
  double scale = 1e-12;
  for (int64_t i = 0; i < n; i++)
    if (fabs(ref[i]) > scale) scale = fabs(ref[i]);
  for (int64_t i = 0; i < n; i++)
    if (!(fabs((double)got[i] - ref[i]) <= 2e-5 * scale)) {
      failed(b->err, "block: %s element %lld = %.9g, want %.9g (scale %g)",
             what, (long long)i, (double)got[i], ref[i], scale);
      b->ok = 0;
      return;
    }
}

/* The box of parameter `fqn` on this rank and its global shape. */
static int64_t param_box(blk *b, const char *fqn, tpx_slice *s,
                         int64_t *gshape) {
  const tpx_model *m = tpx_sharding_model(b->sh);
  int64_t p = tpx_model_find_param(m, fqn);
  tpx_param_info pi;
  tpx_error e = {0};
  if (p < 0 || tpx_model_param(m, p, &pi, &e) != TPX_OK ||
      tpx_sharding_local_slice(b->sh, p, b->me, s, &e) != TPX_OK) {
    failed(b->err, "block: parameter %s: %s", fqn, e.message);
    b->ok = 0;
    memset(s, 0, sizeof *s);
    return -1;
  }
  for (int d = 0; d < pi.ndim; d++) gshape[d] = pi.shape[d];
  return p;
}

tpx_status case_mlp_block(tpx_comm *world, void *arg, tpx_error *err) {
  rt_arg *a = arg;
  blk b = {a->sh, NULL, tpx_comm_rank(world), err, 1};
  tpx_status st =
      tpx_mesh_comm_create(world, tpx_sharding_mesh(a->sh), &b.mc, err);
  if (st != TPX_OK) return st;
  const tpx_sharding *sh = a->sh;
  int64_t m_norm = find_module(sh, "model.layers.0.post_attention_layernorm");
  int64_t m_up = find_module(sh, "model.layers.0.mlp.up_proj");
  int64_t m_down = find_module(sh, "model.layers.0.mlp.down_proj");
  tpx_slice s_w1, s_w2, s_g;
  int64_t g_w1[2], g_w2[2], g_g[1];
  param_box(&b, "model.layers.0.mlp.up_proj.weight", &s_w1, g_w1);
  param_box(&b, "model.layers.0.mlp.down_proj.weight", &s_w2, g_w2);
  int64_t p_g =
      param_box(&b, "model.layers.0.post_attention_layernorm.weight", &s_g,
                g_g);
  if (!b.ok || m_norm < 0 || m_up < 0 || m_down < 0) {
    tpx_mesh_comm_destroy(b.mc);
    return failed(err, "block: model lacks the layer-0 MLP modules");
  }
  const int64_t B = 2, T = a->T, H = g_w1[1], I = g_w1[0];
  const int64_t BT = B * T;
  /* ---- reference, full, double ---- */
  double *x = malloc((size_t)(BT * H) * sizeof *x);
  double *R = malloc((size_t)(BT * H) * sizeof *R);
  double *W1 = malloc((size_t)(I * H) * sizeof *W1);
  double *W2 = malloc((size_t)(H * I) * sizeof *W2);
  double *g = malloc((size_t)H * sizeof *g);
  double *n = calloc((size_t)(BT * H), sizeof *n);
  double *u = calloc((size_t)(BT * I), sizeof *u);
  double *y = calloc((size_t)(BT * H), sizeof *y);
  double *du = calloc((size_t)(BT * I), sizeof *du);
  double *dn = calloc((size_t)(BT * H), sizeof *dn);
  double *dx = calloc((size_t)(BT * H), sizeof *dx);
  double *dW1 = calloc((size_t)(I * H), sizeof *dW1);
  double *dW2 = calloc((size_t)(H * I), sizeof *dW2);
  double *dg = calloc((size_t)H, sizeof *dg);
  for (int64_t i = 0; i < BT * H; i++) x[i] = rval(i, 1), R[i] = rval(i, 2);
  for (int64_t i = 0; i < I * H; i++) W1[i] = rval(i, 3), W2[i] = rval(i, 4);
  for (int64_t i = 0; i < H; i++) g[i] = 1.0 + rval(i, 5);
  for (int64_t t = 0; t < BT; t++) {
    for (int64_t h = 0; h < H; h++) n[t * H + h] = x[t * H + h] * g[h];
    for (int64_t i = 0; i < I; i++) {
      double s = 0;
      for (int64_t h = 0; h < H; h++) s += n[t * H + h] * W1[i * H + h];
      u[t * I + i] = s;
    }
    for (int64_t h = 0; h < H; h++) {
      double s = x[t * H + h];
      for (int64_t i = 0; i < I; i++) s += u[t * I + i] * W2[h * I + i];
      y[t * H + h] = s;
    }
    /* backward: dy = R */
    for (int64_t i = 0; i < I; i++) {
      double s = 0;
      for (int64_t h = 0; h < H; h++) s += R[t * H + h] * W2[h * I + i];
      du[t * I + i] = s;
    }
    for (int64_t h = 0; h < H; h++) {
      double s = 0;
      for (int64_t i = 0; i < I; i++) s += du[t * I + i] * W1[i * H + h];
      dn[t * H + h] = s;
      dx[t * H + h] = R[t * H + h] + s * g[h];
      dg[h] += s * x[t * H + h];
    }
    for (int64_t h = 0; h < H; h++)
      for (int64_t i = 0; i < I; i++) {
        dW2[h * I + i] += R[t * H + h] * u[t * I + i];
        dW1[i * H + h] += du[t * I + i] * n[t * H + h];
      }
  }
  /* ---- the TP run ---- */
  int64_t shapeH[3] = {B, T, H}, shapeI[3] = {B, T, I};
  const tpx_transition *ntr = NULL;
  tpx_error e = {0};
  int norm_styled =
      tpx_sharding_module_entry(sh, m_norm) >= 0 &&
      tpx_tp_transition_get(sh, m_norm, TPX_TRANSITION_INPUT, 0, &ntr, &e) ==
          TPX_OK &&
      ntr != NULL;
  /* The residual stream: sequence-sharded DTensor under SP, else plain
   * replicated. */
  tpx_placement Lx = norm_styled ? ntr->from : tpx_placement_replicate();
  tpx_slice sx;
  act_slice(sh, b.me, Lx, shapeH, 3, &sx, &e);
  int64_t nx = tpx_slice_numel(&sx);
  double *xl = malloc((size_t)nx * sizeof *xl);
  box_get(x, shapeH, 3, &sx, xl);
  tpx_tensor tx = talloc(TPX_DTYPE_F32, 3, sx.length);
  float *fx = tx.data;
  for (int64_t i = 0; i < nx; i++) fx[i] = (float)xl[i];
  /* local params */
  int64_t nl1 = tpx_slice_numel(&s_w1), nl2 = tpx_slice_numel(&s_w2);
  double *w1l = malloc((size_t)(nl1 ? nl1 : 1) * sizeof *w1l);
  double *w2l = malloc((size_t)(nl2 ? nl2 : 1) * sizeof *w2l);
  box_get(W1, g_w1, 2, &s_w1, w1l);
  box_get(W2, g_w2, 2, &s_w2, w2l);
  int64_t Il = s_w1.length[0];
  if (s_w2.length[1] != Il || s_w1.length[1] != H || s_w2.length[0] != H)
    failed(err, "block: unexpected local weight boxes");
  (void)s_g;
  /* norm forward */
  tpx_tensor nin = tx, nloc, nout, upin, uout, dnin;
  if (norm_styled) xrun(&b, m_norm, TPX_TRANSITION_INPUT, 0, &Lx, shapeH, &tx,
                        &nin);
  nloc = talloc(TPX_DTYPE_F32, 3, nin.shape);
  for (int64_t i = 0; i < tpx_tensor_numel(&nloc); i++)
    ((float *)nloc.data)[i] = ((float *)nin.data)[i] * (float)g[i % H];
  tpx_placement n_to;
  int n_dt = 0;
  if (norm_styled) {
    xrun(&b, m_norm, TPX_TRANSITION_OUTPUT, 0, NULL, shapeH, &nloc, &nout);
    const tpx_transition *otr;
    tpx_tp_transition_get(sh, m_norm, TPX_TRANSITION_OUTPUT, 0, &otr, &e);
    n_to = otr->to;
    n_dt = tpx_tp_output_keeps_dtensor(sh, m_norm, 0);
  } else {
    nout = nloc;
  }
  /* up_proj: input transition, local matmul, output transition */
  const tpx_placement *up_arr = n_dt ? &n_to : NULL;
  xrun(&b, m_up, TPX_TRANSITION_INPUT, 0, up_arr, shapeH, &nout, &upin);
  int64_t ul_shape[3] = {B, T, Il};
  tpx_tensor ul = talloc(TPX_DTYPE_F32, 3, ul_shape);
  const float *fn = upin.data;
  if (tpx_tensor_numel(&upin) != BT * H) {
    failed(err, "block: up_proj input is not the full activation");
  } else {
    for (int64_t t = 0; t < BT; t++)
      for (int64_t i = 0; i < Il; i++) {
        double s = 0;
        for (int64_t h = 0; h < H; h++)
          s += (double)fn[t * H + h] * (double)(float)w1l[i * H + h];
        ((float *)ul.data)[t * Il + i] = (float)s;
      }
  }
  xrun(&b, m_up, TPX_TRANSITION_OUTPUT, 0, NULL, shapeI, &ul, &uout);
  /* down_proj */
  tpx_placement up_to;
  const tpx_transition *utr;
  tpx_tp_transition_get(sh, m_up, TPX_TRANSITION_OUTPUT, 0, &utr, &e);
  up_to = utr ? utr->to : tpx_placement_shard(-1);
  int u_dt = tpx_tp_output_keeps_dtensor(sh, m_up, 0);
  tpx_tensor din, pl, yo;
  xrun(&b, m_down, TPX_TRANSITION_INPUT, 0, u_dt ? &up_to : NULL, shapeI,
       &uout, &din);
  pl = talloc(TPX_DTYPE_F32, 3, shapeH);
  if (tpx_tensor_numel(&din) == BT * Il)
    for (int64_t t = 0; t < BT; t++)
      for (int64_t h = 0; h < H; h++) {
        double s = 0;
        for (int64_t i = 0; i < Il; i++)
          s += (double)((float *)din.data)[t * Il + i] *
               (double)(float)w2l[h * Il + i];
        ((float *)pl.data)[t * H + h] = (float)s;
      }
  xrun(&b, m_down, TPX_TRANSITION_OUTPUT, 0, NULL, shapeH, &pl, &yo);
  /* residual: y = x + out, both in Lx */
  double *yref = malloc((size_t)nx * sizeof *yref);
  box_get(y, shapeH, 3, &sx, yref);
  if (tpx_tensor_numel(&yo) != nx) {
    failed(err, "block: down_proj output has %lld elements, x has %lld",
           (long long)tpx_tensor_numel(&yo), (long long)nx);
  } else {
    float *yy = malloc((size_t)(nx ? nx : 1) * sizeof *yy);
    for (int64_t i = 0; i < nx; i++) yy[i] = fx[i] + ((float *)yo.data)[i];
    cmp(&b, "y", yy, yref, nx);
    free(yy);
  }
  /* ---- backward ---- */
  tpx_tensor tdy = talloc(TPX_DTYPE_F32, 3, sx.length);
  double *dyl = malloc((size_t)nx * sizeof *dyl);
  box_get(R, shapeH, 3, &sx, dyl);
  for (int64_t i = 0; i < nx; i++) ((float *)tdy.data)[i] = (float)dyl[i];
  tpx_tensor dp, du1, du2, du3;
  xrun(&b, m_down, TPX_TRANSITION_OUTPUT, 1, NULL, shapeH, &tdy, &dp);
  du1 = talloc(TPX_DTYPE_F32, 3, ul_shape);
  float *dw2 = calloc((size_t)(nl2 ? nl2 : 1), sizeof *dw2);
  if (tpx_tensor_numel(&dp) == BT * H)
    for (int64_t t = 0; t < BT; t++) {
      const float *dpt = (const float *)dp.data + t * H;
      for (int64_t i = 0; i < Il; i++) {
        double s = 0;
        for (int64_t h = 0; h < H; h++)
          s += (double)dpt[h] * (double)(float)w2l[h * Il + i];
        ((float *)du1.data)[t * Il + i] = (float)s;
      }
      for (int64_t h = 0; h < H; h++)
        for (int64_t i = 0; i < Il; i++)
          dw2[h * Il + i] += dpt[h] * ((float *)din.data)[t * Il + i];
    }
  else
    failed(err, "block: down_proj output grad is not the full activation");
  xrun(&b, m_down, TPX_TRANSITION_INPUT, 1, u_dt ? &up_to : NULL, shapeI,
       &du1, &du2);
  xrun(&b, m_up, TPX_TRANSITION_OUTPUT, 1, NULL, shapeI, &du2, &du3);
  tpx_tensor dnp = talloc(TPX_DTYPE_F32, 3, shapeH);
  float *dw1 = calloc((size_t)(nl1 ? nl1 : 1), sizeof *dw1);
  if (tpx_tensor_numel(&du3) == BT * Il)
    for (int64_t t = 0; t < BT; t++) {
      const float *d3 = (const float *)du3.data + t * Il;
      for (int64_t h = 0; h < H; h++) {
        double s = 0;
        for (int64_t i = 0; i < Il; i++)
          s += (double)d3[i] * (double)(float)w1l[i * H + h];
        ((float *)dnp.data)[t * H + h] = (float)s;
      }
      for (int64_t i = 0; i < Il; i++)
        for (int64_t h = 0; h < H; h++)
          dw1[i * H + h] += d3[i] * fn[t * H + h];
    }
  tpx_tensor dn1, dnl, dxn2;
  xrun(&b, m_up, TPX_TRANSITION_INPUT, 1, up_arr, shapeH, &dnp, &dn1);
  if (norm_styled)
    xrun(&b, m_norm, TPX_TRANSITION_OUTPUT, 1, NULL, shapeH, &dn1, &dnl);
  else
    dnl = dn1;
  /* norm backward: dg (partial under SP) and dx */
  int64_t H1[1] = {H};
  tpx_tensor tdg = talloc(TPX_DTYPE_F32, 1, H1);
  tpx_tensor dxn = talloc(TPX_DTYPE_F32, 3, dnl.shape);
  if (tpx_tensor_numel(&dnl) == nx) {
    for (int64_t i = 0; i < nx; i++) {
      float d = ((float *)dnl.data)[i];
      ((float *)tdg.data)[i % H] += d * ((float *)nin.data)[i];
      ((float *)dxn.data)[i] = d * (float)g[i % H];
    }
  } else {
    failed(err, "block: norm output grad has %lld elements, x has %lld",
           (long long)tpx_tensor_numel(&dnl), (long long)nx);
  }
  dnin = dxn;
  if (norm_styled)
    xrun(&b, m_norm, TPX_TRANSITION_INPUT, 1, &Lx, shapeH, &dxn, &dxn2);
  else
    dxn2 = dxn;
  if (tpx_tp_param_grad_allreduce(sh, b.mc, p_g, &tdg, &e) != TPX_OK)
    lib_failed(err, "block: norm grad all-reduce", &e);
  (void)dnin;
  /* ---- compare ---- */
  double *ref = malloc((size_t)(BT * H + I * H) * sizeof *ref);
  box_get(dx, shapeH, 3, &sx, ref);
  if (tpx_tensor_numel(&dxn2) == nx) {
    float *dxx = malloc((size_t)(nx ? nx : 1) * sizeof *dxx);
    for (int64_t i = 0; i < nx; i++)
      dxx[i] = ((float *)tdy.data)[i] + ((float *)dxn2.data)[i];
    cmp(&b, "dx", dxx, ref, nx);
    free(dxx);
  }
  cmp(&b, "d norm weight", tdg.data, dg, H);
  box_get(dW1, g_w1, 2, &s_w1, ref);
  cmp(&b, "d up_proj.weight", dw1, ref, nl1);
  box_get(dW2, g_w2, 2, &s_w2, ref);
  cmp(&b, "d down_proj.weight", dw2, ref, nl2);
  /* ---- free ---- */
  if (norm_styled) free(nin.data), free(nout.data), free(dnl.data),
      free(dxn2.data);
  free(nloc.data), free(upin.data), free(ul.data), free(uout.data);
  free(din.data), free(pl.data), free(yo.data), free(tdy.data);
  free(dp.data), free(du1.data), free(du2.data), free(du3.data);
  free(dnp.data), free(dn1.data), free(tdg.data), free(dxn.data);
  free(tx.data), free(dw1), free(dw2), free(ref), free(yref), free(dyl);
  free(xl), free(w1l), free(w2l), free(x), free(R), free(W1), free(W2);
  free(g), free(n), free(u), free(y), free(du), free(dn), free(dx);
  free(dW1), free(dW2), free(dg);
  tpx_mesh_comm_destroy(b.mc);
  return err->status;
}

/* ---- embedding ---------------------------------------------------------- */

tpx_status case_embedding(tpx_comm *world, void *arg, tpx_error *err) {
  rt_arg *a = arg;
  const tpx_sharding *sh = a->sh;
  tpx_mesh_comm *mc = NULL;
  tpx_status st = tpx_mesh_comm_create(world, tpx_sharding_mesh(sh), &mc, err);
  if (st != TPX_OK) return st;
  const tpx_model *m = tpx_sharding_model(sh);
  int64_t me = tpx_comm_rank(world);
  int64_t mod = tpx_model_find_module(m, "model.embed_tokens");
  int64_t p = tpx_model_find_param(m, "model.embed_tokens.weight");
  tpx_param_info pi;
  tpx_error e = {0};
  tpx_slice ws;
  if (mod < 0 || p < 0 || tpx_model_param(m, p, &pi, &e) != TPX_OK ||
      tpx_sharding_local_slice(sh, p, me, &ws, &e) != TPX_OK) {
    tpx_mesh_comm_destroy(mc);
    return failed(err, "embedding: no model.embed_tokens: %s", e.message);
  }
  const int64_t V = pi.shape[0], H = pi.shape[1], B = 2, T = a->T;
  int64_t ids_shape[2] = {B, T}, oshape[3] = {B, T, H};
  /* ids spread over the whole vocab (every rank's range), incl. 0, V-1 */
  int64_t *ids = malloc((size_t)(B * T) * sizeof *ids);
  for (int64_t i = 0; i < B * T; i++)
    ids[i] = i == 0 ? 0 : i == 1 ? V - 1 : (i * 977 + 13) % V;
  ids[B * T - 1] = ids[2]; /* a repeated id accumulates twice */
  tpx_tensor tids = tpx_tensor_make(ids, TPX_DTYPE_I64, 2, ids_shape);
  double *W = malloc((size_t)(V * H) * sizeof *W);
  for (int64_t i = 0; i < V * H; i++) W[i] = rval(i, 11);
  int64_t nw = tpx_slice_numel(&ws);
  double *wl = malloc((size_t)(nw ? nw : 1) * sizeof *wl);
  box_get(W, pi.shape, 2, &ws, wl);
  int64_t wloc[2], oloc[3];
  if (tpx_tp_embedding_shape(sh, mod, me, ids_shape, 2, oloc, wloc, &e) !=
      TPX_OK)
    lib_failed(err, "embedding shape", &e);
  if (wloc[0] != ws.length[0] || wloc[1] != ws.length[1])
    failed(err, "embedding: weight_local [%lld, %lld], slice [%lld, %lld]",
           (long long)wloc[0], (long long)wloc[1], (long long)ws.length[0],
           (long long)ws.length[1]);
  tpx_tensor tw = talloc(TPX_DTYPE_F32, 2, ws.length);
  for (int64_t i = 0; i < nw; i++) ((float *)tw.data)[i] = (float)wl[i];
  /* the layout of the output: the output transition's `to`, else full */
  const tpx_transition *tr = NULL;
  tpx_placement to = tpx_placement_replicate();
  if (tpx_sharding_module_entry(sh, mod) >= 0 &&
      tpx_tp_transition_get(sh, mod, TPX_TRANSITION_OUTPUT, 0, &tr, &e) ==
          TPX_OK &&
      tr)
    to = tr->to;
  tpx_slice os;
  act_slice(sh, me, to, oshape, 3, &os, &e);
  for (int d = 0; d < 3; d++)
    if (os.length[d] != oloc[d])
      failed(err, "embedding: output dim %d local %lld, layout says %lld", d,
             (long long)oloc[d], (long long)os.length[d]);
  double *E = malloc((size_t)(B * T * H) * sizeof *E);
  double *G = malloc((size_t)(B * T * H) * sizeof *G);
  double *dW = calloc((size_t)(V * H), sizeof *dW);
  for (int64_t t = 0; t < B * T; t++)
    for (int64_t h = 0; h < H; h++) {
      E[t * H + h] = (double)(float)W[ids[t] * H + h];
      G[t * H + h] = rval(t * H + h, 12);
      dW[ids[t] * H + h] += (double)(float)G[t * H + h];
    }
  int64_t no = tpx_slice_numel(&os);
  double *ref = malloc((size_t)(no > nw ? no : nw) * sizeof *ref + 8);
  tpx_tensor tout = talloc(TPX_DTYPE_F32, 3, os.length);
  if (tpx_tp_embedding_forward(sh, mc, mod, &tids, &tw, &tout, &e) != TPX_OK) {
    lib_failed(err, "embedding forward", &e);
  } else {
    box_get(E, oshape, 3, &os, ref);
    for (int64_t i = 0; i < no; i++)
      if (fabs(((float *)tout.data)[i] - ref[i]) > 1e-6) {
        failed(err, "embedding forward: element %lld = %g, want %g",
               (long long)i, ((float *)tout.data)[i], ref[i]);
        break;
      }
  }
  /* backward: grad_out in the output layout, accumulate onto 1.0 */
  tpx_tensor tg = talloc(TPX_DTYPE_F32, 3, os.length);
  box_get(G, oshape, 3, &os, ref);
  for (int64_t i = 0; i < no; i++) ((float *)tg.data)[i] = (float)ref[i];
  tpx_tensor twg = talloc(TPX_DTYPE_F32, 2, ws.length);
  for (int64_t i = 0; i < nw; i++) ((float *)twg.data)[i] = 1.0f;
  e = (tpx_error){0};
  if (tpx_tp_embedding_backward(sh, mc, mod, &tids, &tg, &twg, &e) !=
      TPX_OK) {
    lib_failed(err, "embedding backward", &e);
  } else {
    box_get(dW, pi.shape, 2, &ws, ref);
    for (int64_t i = 0; i < nw; i++)
      if (fabs(((float *)twg.data)[i] - (1.0 + ref[i])) > 1e-5) {
        failed(err, "embedding backward: element %lld = %g, want %g",
               (long long)i, ((float *)twg.data)[i], 1.0 + ref[i]);
        break;
      }
  }
  free(ids), free(W), free(wl), free(tw.data), free(E), free(G), free(dW);
  free(ref), free(tout.data), free(tg.data), free(twg.data);
  tpx_mesh_comm_destroy(mc);
  return err->status;
}

/* ---- vocab-parallel loss ------------------------------------------------ */

static void cmpd(tpx_error *err, const char *what, double got, double want,
                 double tol) {
  if (!(fabs(got - want) <= tol * (1.0 + fabs(want))))
    failed(err, "loss: %s = %.12g, want %.12g", what, got, want);
}

tpx_status case_loss(tpx_comm *world, void *arg, tpx_error *err) {
  rt_arg *a = arg;
  const tpx_sharding *sh = a->sh;
  tpx_mesh_comm *mc = NULL;
  tpx_status st = tpx_mesh_comm_create(world, tpx_sharding_mesh(sh), &mc, err);
  if (st != TPX_OK) return st;
  int64_t me = tpx_comm_rank(world);
  const int64_t V = a->vocab, N = a->rows;
  tpx_dtype dt = dt_of(a);
  double tol = dt == TPX_DTYPE_BF16 ? 1e-5 : 1e-5;
  tpx_tp_loss_options o = TPX_TP_LOSS_OPTIONS_INIT;
  o.vocab = V;
  int64_t off = 0, len = 0;
  tpx_error e = {0};
  if (tpx_tp_vocab_range(sh, me, &o, &off, &len, &e) != TPX_OK) {
    tpx_mesh_comm_destroy(mc);
    return failed(err, "vocab range: %s", e.message);
  }
  /* full logits, rounded to the dtype so the reference sees the same */
  double *Z = malloc((size_t)(N * V) * sizeof *Z);
  int64_t *tg = malloc((size_t)N * sizeof *tg);
  for (int64_t i = 0; i < N * V; i++) {
    double v = 8.0 * rval(i, 21);
    float f = (float)v;
    Z[i] = dt == TPX_DTYPE_BF16 ? (double)from_bf16(to_bf16(f)) : (double)f;
  }
  for (int64_t i = 0; i < N; i++)
    tg[i] = i == 3 ? -100 : i == 0 ? V - 1 : (i * 131 + 7) % V;
  /* reference */
  double *lse = malloc((size_t)N * sizeof *lse), *lp = malloc((size_t)N * 8);
  double sum = 0;
  int64_t cnt = 0;
  for (int64_t i = 0; i < N; i++) {
    double mx = -INFINITY, s = 0;
    for (int64_t j = 0; j < V; j++) mx = fmax(mx, Z[i * V + j]);
    for (int64_t j = 0; j < V; j++) s += exp(Z[i * V + j] - mx);
    lse[i] = mx + log(s);
    lp[i] = tg[i] < 0 ? 0.0 : Z[i * V + tg[i]] - lse[i];
    if (tg[i] >= 0) sum -= lp[i], cnt++;
  }
  int64_t lshape[2] = {N, len}, tshape[1] = {N};
  tpx_tensor tz = talloc(dt, 2, lshape);
  for (int64_t i = 0; i < N; i++)
    for (int64_t j = 0; j < len; j++)
      put(tz.data, dt, i * len + j, Z[i * V + off + j]);
  tpx_tensor tt = tpx_tensor_make(tg, TPX_DTYPE_I64, 1, tshape);
  tpx_tensor tlp = talloc(TPX_DTYPE_F32, 1, tshape);
  if (tpx_tp_logprobs(sh, mc, &o, &tz, &tt, &tlp, &e) != TPX_OK)
    lib_failed(err, "logprobs", &e);
  else
    for (int64_t i = 0; i < N; i++)
      cmpd(err, "logprob", ((float *)tlp.data)[i], lp[i], tol);
  /* log-prob backward with per-row upstream grads */
  tpx_tensor tgl = talloc(TPX_DTYPE_F32, 1, tshape);
  for (int64_t i = 0; i < N; i++) ((float *)tgl.data)[i] = (float)rval(i, 22);
  tpx_tensor tgz = talloc(dt, 2, lshape);
  e = (tpx_error){0};
  if (tpx_tp_logprobs_backward(sh, mc, &o, &tz, &tt, &tgl, &tgz, &e) !=
      TPX_OK)
    lib_failed(err, "logprobs backward", &e);
  else
    for (int64_t i = 0; i < N; i++)
      for (int64_t j = 0; j < len; j++) {
        int64_t gj = off + j;
        double p = exp(Z[i * V + gj] - lse[i]);
        double want = tg[i] < 0 ? 0.0
                                : (double)((float *)tgl.data)[i] *
                                      ((tg[i] == gj ? 1.0 : 0.0) - p);
        cmpd(err, "d logprob / d logit", get(tgz.data, dt, i * len + j),
             want, dt == TPX_DTYPE_BF16 ? 1e-2 : 1e-5);
      }
  /* cross-entropy: sums, then the mean and its gradient */
  double ls = 0, mean = 0;
  int64_t c = 0;
  e = (tpx_error){0};
  if (tpx_tp_cross_entropy(sh, mc, &o, &tz, &tt, 0.5, &tgz, &ls, &c, &e) !=
      TPX_OK) {
    lib_failed(err, "cross entropy", &e);
  } else {
    cmpd(err, "loss sum", ls, sum, tol);
    if (c != cnt) failed(err, "loss count %lld, want %lld", (long long)c,
                         (long long)cnt);
  }
  e = (tpx_error){0};
  if (tpx_tp_cross_entropy_mean(sh, mc, &o, &tz, &tt, &tgz, &mean, &e) !=
      TPX_OK) {
    lib_failed(err, "cross entropy mean", &e);
  } else {
    cmpd(err, "mean loss", mean, sum / (double)cnt, tol);
    for (int64_t i = 0; i < N; i++)
      for (int64_t j = 0; j < len; j++) {
        int64_t gj = off + j;
        double p = exp(Z[i * V + gj] - lse[i]);
        double want =
            tg[i] < 0 ? 0.0 : (p - (tg[i] == gj ? 1.0 : 0.0)) / (double)cnt;
        cmpd(err, "d mean loss / d logit", get(tgz.data, dt, i * len + j),
             want, dt == TPX_DTYPE_BF16 ? 1e-2 : 1e-5);
      }
  }
  /* finite differences of the mean loss, on small vocabularies (f32) */
  if (V <= 16 && dt == TPX_DTYPE_F32) {
    const float eps = 1e-2f;
    for (int64_t i = 0; i < N; i++)
      for (int64_t gj = 0; gj < V; gj++) {
        int mine = gj >= off && gj < off + len;
        float *zp = (float *)tz.data + i * len + (gj - off);
        float keep = mine ? *zp : 0.0f;
        double lpm[2] = {0, 0};
        for (int s = 0; s < 2; s++) {
          if (mine) *zp = keep + (s ? -eps : eps);
          e = (tpx_error){0};
          if (tpx_tp_cross_entropy_mean(sh, mc, &o, &tz, &tt, NULL, &lpm[s],
                                        &e) != TPX_OK)
            lib_failed(err, "finite difference", &e);
        }
        if (mine) *zp = keep;
        double fd = (lpm[0] - lpm[1]) / (2.0 * eps);
        double p = exp(Z[i * V + gj] - lse[i]);
        double an =
            tg[i] < 0 ? 0.0 : (p - (tg[i] == gj ? 1.0 : 0.0)) / (double)cnt;
        if (mine) {
          char what[64];
          snprintf(what, sizeof what, "finite difference [%lld, %lld]",
                   (long long)i, (long long)gj);
          /* f32 logits: the difference quotient carries ~1e-6/eps noise */
          if (!(fabs(fd - an) <= 2e-4 + 1e-3 * fabs(an)))
            failed(err, "loss: %s = %.9g, analytic %.9g", what, fd, an);
          /* and the analytic formula is the library's gradient */
          cmpd(err, what, get(tgz.data, dt, i * len + (gj - off)), an, 1e-5);
        }
      }
  }
  free(Z), free(tg), free(lse), free(lp), free(tz.data), free(tlp.data);
  free(tgl.data), free(tgz.data);
  tpx_mesh_comm_destroy(mc);
  return err->status;
}
