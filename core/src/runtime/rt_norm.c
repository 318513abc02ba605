/* runtime/rt_norm.c — the total gradient norm over the whole mesh (each
 * global element once) and clipping by it, as torch's clip_grad_norm_ does
 * (docs/SEMANTICS.md "The training step").
 * Per parameter, the local sum of squares (or max |g|) goes into the slot
 * of the set of mesh dims it is sharded on; slot s is then reduced over
 * exactly the dims in s, so replicated copies are never counted twice.
 * The dims are reduced in mesh order, so the data-parallel and cp dims
 * (dp_shard_cp under context parallelism) come before tp, the order of
 * the upstream norm (docs/SEMANTICS.md "Context parallelism"), each
 * gradient only over the dims it is sharded on.
 * Expert parameters (ep > 1) have four slots of their own after those,
 * by the MoE mesh dims they are sharded on (ep_shard, ep), reduced over
 * those after the main mesh's: each expert element counts once.
 * Everything runs in the runtime's memory space (device/memspace.h); the
 * host reads back only the 2^ndim + 4 reduced slot values to form the
 * norm. */
#include <math.h>
#include <string.h>

#include "runtime/rt_internal.h"
#include "comm/comm_view.h"

static tpx_status clocked_runtime_grad_norm(tpx_runtime *rt, double norm_type,
                                            double *out, tpx_error *err) {
  if (!rt || !out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_runtime_grad_norm: %s is NULL",
                         !rt ? "runtime" : "out");
  int inf = isinf(norm_type) && norm_type > 0;
  if (!inf && norm_type != 2.0)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_runtime_grad_norm: norm_type %g is not "
                         "supported (2 or INFINITY)",
                         norm_type);
  tpx_status fst = tpx__rt_finish_reduces(rt, err);
  if (fst != TPX_OK)
    return fst;
  /* The partial sums live in the runtime's memory space: slot s at acc[s],
   * a packing area after them. Only the reduced slots come back to the
   * host, in one copy of 2^ndim doubles (documented in docs/RUNTIME.md):
   * the single host read of the norm. */
  const tpx__memspace *ms = rt->ms;
  size_t nmain = (size_t)1 << rt->ndim;
  size_t nslots = nmain + 4; /* + the expert slots */
  double host[(1u << TPX_MESH_MAX_DIMS) + 4];
  void *accv = NULL;
  tpx_status st = tpx__ms_alloc(ms, nslots * 2 * sizeof(double), 1, &accv, err);
  if (st != TPX_OK)
    return st;
  double *acc = accv;
  double *pack = acc + nslots;
  /* Offload: the gradients are host memory; the sums form there and go
   * to the device once. */
  double hacc[(1u << TPX_MESH_MAX_DIMS) + 4] = {0};
  double *sacc = rt->opts.offload ? hacc : acc;
  for (size_t i = 0; i < rt->num_rt_params && st == TPX_OK; i++) {
    const tpx__rt_param *p = &rt->params[i];
    const float *g = rt->units[p->unit].grad + p->grad_off;
    size_t n = (size_t)p->shard_numel;
    size_t slot = p->moe ? nmain + p->moe_mask : p->shard_mask;
    if (n)
      st = tpx__ms_norm_acc(tpx__rt_state_ms(rt), sacc + slot, g, n, inf, err);
  }
  if (st == TPX_OK && sacc != acc)
    st = tpx__ms_copy(ms, acc, sacc, nslots * sizeof(double), TPX__H2D, err);
  /* d < ndim: the main mesh's dims; then ep_shard and ep for the expert
   * slots. */
  for (int d = 0; d < rt->ndim + 2 && st == TPX_OK; d++) {
    int moe = d >= rt->ndim;
    size_t lo = moe ? nmain : 0, hi = moe ? nslots : nmain;
    unsigned bit = moe ? 1u << (d - rt->ndim) : 1u << d;
    size_t m = 0;
    for (size_t s = lo; s < hi && st == TPX_OK; s++)
      if ((s - lo) & bit)
        st = tpx__ms_copy(ms, pack + m++, acc + s, sizeof(double), TPX__D2D,
                          err);
    if (m == 0 || st != TPX_OK)
      continue;
    tpx_reduce_op op = inf ? TPX_REDUCE_MAX : TPX_REDUCE_SUM;
    st = moe ? tpx__rt_ep_reduce_mask(rt, bit, pack, m, TPX_DTYPE_F64, op, err)
             : tpx__rt_all_reduce_dim(rt, d, pack, m, TPX_DTYPE_F64, op, err);
    m = 0;
    for (size_t s = lo; s < hi && st == TPX_OK; s++)
      if ((s - lo) & bit)
        st = tpx__ms_copy(ms, acc + s, pack + m++, sizeof(double), TPX__D2D,
                          err);
  }
  if (st == TPX_OK)
    st = tpx__ms_copy(ms, host, acc, nslots * sizeof(double), TPX__D2H, err);
  tpx__ms_free(ms, accv);
  if (st != TPX_OK)
    return st;
  double total = 0.0;
  for (size_t s = 0; s < nslots; s++)
    total = inf ? (host[s] > total || isnan(host[s]) ? host[s] : total)
                : total + host[s];
  *out = inf ? total : sqrt(total);
  return TPX_OK;
}

tpx_status tpx_runtime_clip_grads(tpx_runtime *rt, double max_norm,
                                  double total_norm, tpx_error *err) {
  if (!rt)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_runtime_clip_grads: runtime is NULL");
  if (!(max_norm > 0.0) || isinf(max_norm))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_runtime_clip_grads: max_norm %g must be a "
                         "positive finite number",
                         max_norm);
  /* torch: clip_coef = max_norm / (total_norm + 1e-6) on an f32 tensor
   * (a Python float over a tensor is reciprocal() * other), clamped to 1. */
  tpx_status st = tpx__rt_finish_reduces(rt, err);
  if (st != TPX_OK)
    return st;
  float denom = (float)total_norm + 1e-6f;
  float coef = (1.0f / denom) * (float)max_norm;
  /* clamp(coef, max=1) keeps a NaN, and torch multiplies by it: a NaN
   * norm makes every gradient NaN (a Python-float version of the clip would
   * skip scaling instead). coef == 1 changes nothing. */
  if (!(coef < 1.0f) && !isnan(coef))
    return TPX_OK;
  for (size_t u = 0; u < rt->num_units && st == TPX_OK; u++)
    if (rt->units[u].grad_numel)
      st = tpx__ms_scale_f32(tpx__rt_state_ms(rt), rt->units[u].grad,
                             (size_t)rt->units[u].grad_numel, coef, 0, err);
  return st;
}

static tpx_status clocked_runtime_clip_grad_norm(tpx_runtime *rt,
                                                 double max_norm,
                                                 double norm_type,
                                                 double *total_out,
                                                 tpx_error *err) {
  double total = 0.0;
  tpx_status st = tpx_runtime_grad_norm(rt, norm_type, &total, err);
  if (st != TPX_OK)
    return st;
  if (total_out)
    *total_out = total;
  return tpx_runtime_clip_grads(rt, max_norm, total, err);
}

/* ---- the public calls, clocked (tpx_mesh_comm_time) ---- */

tpx_status tpx_runtime_grad_norm(tpx_runtime *rt, double norm_type, double *out,
                                 tpx_error *err) {
  TPX__CLOCKED(tpx__mesh_comm_clock(rt ? rt->mc : NULL), TPX__CLOCK_RUNTIME,
               clocked_runtime_grad_norm(rt, norm_type, out, err));
}

tpx_status tpx_runtime_clip_grad_norm(tpx_runtime *rt, double max_norm,
                                      double norm_type, double *total_out,
                                      tpx_error *err) {
  TPX__CLOCKED(
      tpx__mesh_comm_clock(rt ? rt->mc : NULL), TPX__CLOCK_RUNTIME,
      clocked_runtime_clip_grad_norm(rt, max_norm, norm_type, total_out, err));
}
