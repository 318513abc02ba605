/* runtime/rt_load.c — moving whole tensors in and out of the runtime:
 * load this rank's shard of a caller's full tensor, and gather a full
 * parameter / gradient from every rank's shard (zero-filled full buffers
 * summed over exactly the mesh dims the parameter is sharded on, which is
 * exact since each element is non-zero on one rank of each group).
 * The caller's full tensors are host memory; the shards live in the
 * runtime's memory space, reached by one H2D / D2H copy per call.
 * Not the checkpoint reader (tpx/checkpoint.h). */
#include <stdlib.h>
#include <string.h>

#include "comm/box.h"
#include "comm/comm_view.h"
#include "runtime/rt_internal.h"

static tpx_slice whole_of(const tpx_runtime *rt, const tpx__rt_param *p,
                          int64_t *numel) {
  tpx_param_info info;
  tpx_slice w;
  memset(&w, 0, sizeof w);
  tpx_model_param(tpx_sharding_model(rt->sh), p->index, &info, NULL);
  w.ndim = info.ndim;
  *numel = 1;
  for (int i = 0; i < info.ndim; i++) {
    w.length[i] = info.shape[i];
    *numel *= info.shape[i];
  }
  return w;
}

static const char *fqn_of(const tpx_runtime *rt, const tpx__rt_param *p) {
  tpx_param_info info;
  if (tpx_model_param(tpx_sharding_model(rt->sh), p->index, &info, NULL) !=
      TPX_OK)
    return "?";
  return info.fqn;
}

tpx_status tpx_runtime_load_param(tpx_runtime *rt, int64_t param,
                                  const void *full, tpx_dtype dtype,
                                  tpx_error *err) {
  tpx__rt_param *p = tpx__rt_lookup(rt, param, "tpx_runtime_load_param", err);
  if (!p)
    return err ? err->status : TPX_INVALID_ARGUMENT;
  if (!full)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_runtime_load_param: '%s': the full tensor is "
                         "NULL",
                         fqn_of(rt, p));
  if (!tpx__rt_dtype_ok(dtype))
    return tpx_error_set(err, TPX_UNSUPPORTED,
                         "tpx_runtime_load_param: '%s': source dtype %s; "
                         "f32, bf16 or f16 expected",
                         fqn_of(rt, p), tpx_dtype_short_name(dtype));
  tpx__rt_unit *u = &rt->units[p->unit];
  if (rt->fsdp && u->state != TPX__RT_SHARDED)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_runtime_load_param: '%s': its unit %zu is "
                         "unsharded; reshard it before loading",
                         fqn_of(rt, p), p->unit);
  int64_t numel;
  tpx_slice whole = whole_of(rt, p, &numel);
  size_t n = (size_t)p->shard_numel;
  if (n == 0)
    return TPX_OK;
  size_t es = tpx_dtype_size(dtype);
  /* Pack the slice on the host (the caller's tensor is host memory), one
   * H2D copy into a staging buffer, then convert where the shards live
   * (host memory under offload). */
  const tpx__memspace *ms = tpx__rt_state_ms(rt);
  void *tmp = malloc(n * es), *dev = NULL;
  if (!tmp)
    return tpx_error_set(err, TPX_NO_MEMORY,
                         "tpx_runtime_load_param: '%s': out of memory",
                         fqn_of(rt, p));
  tpx_status st = tpx__box_copy(&tpx__ms_host, TPX__D2D, tmp, &p->global, full,
                                &whole, &p->global, es, err);
  if (st == TPX_OK)
    st = tpx__ms_alloc(ms, n * es, 0, &dev, err);
  if (st == TPX_OK)
    st = tpx__ms_copy(ms, dev, tmp, n * es, TPX__H2D, err);
  if (st == TPX_OK)
    st = tpx__ms_convert(ms, (unsigned char *)u->flat + p->flat_off, p->storage,
                         dev, dtype, n, err);
  if (st == TPX_OK && p->master_off >= 0)
    st = tpx__ms_convert(ms, u->master + p->master_off, TPX_DTYPE_F32, dev,
                         dtype, n, err);
  tpx__ms_free(ms, dev);
  free(tmp);
  return st;
}

static tpx_status gather_full(tpx_runtime *rt, int64_t param, void *full,
                              tpx_dtype dtype, int grad, const char *what,
                              tpx_error *err) {
  tpx__rt_param *p = tpx__rt_lookup(rt, param, what, err);
  if (!p)
    return err ? err->status : TPX_INVALID_ARGUMENT;
  if (!full)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: '%s': the output buffer is NULL", what,
                         fqn_of(rt, p));
  if (!tpx__rt_dtype_ok(dtype))
    return tpx_error_set(err, TPX_UNSUPPORTED,
                         "%s: '%s': output dtype %s; f32, bf16 or f16 "
                         "expected",
                         what, fqn_of(rt, p), tpx_dtype_short_name(dtype));
  if (grad) {
    tpx_status st = tpx__rt_finish_reduces(rt, err);
    if (st != TPX_OK)
      return st;
  }
  int64_t numel;
  tpx_slice whole = whole_of(rt, p, &numel);
  size_t es = tpx_dtype_size(dtype);
  /* The full tensor is assembled and summed in the runtime's memory space,
   * then copied once to the caller's host buffer. The shard is converted
   * where it lives (host memory under offload: then placed by H2D). */
  const tpx__memspace *ms = rt->ms, *sms = tpx__rt_state_ms(rt);
  size_t n = (size_t)p->shard_numel;
  void *dfull = NULL, *tmp = NULL;
  tpx_status st = tpx__ms_alloc(ms, (size_t)numel * es, 1, &dfull, err);
  if (st == TPX_OK)
    st = tpx__ms_alloc(sms, n * es, 0, &tmp, err);
  const float *src =
      grad ? rt->units[p->unit].grad + p->grad_off : tpx__rt_master(rt, p);
  if (st == TPX_OK)
    st = tpx__ms_convert(sms, tmp, dtype, src, TPX_DTYPE_F32, n, err);
  if (st == TPX_OK)
    st = tpx__box_copy(ms, tpx__rt_state_to_ms(rt), dfull, &whole, tmp,
                       &p->global, &p->global, es, err);
  if (st != TPX_OK) /* the peers are about to all-reduce with this rank */
    tpx__comm_fail_before(tpx_mesh_comm_world(rt->mc), what, st, err);
  for (int d = 0; d < rt->ndim && st == TPX_OK; d++) {
    if (!(p->shard_mask & (1u << d)))
      continue;
    st = tpx__rt_all_reduce_dim(rt, d, dfull, (size_t)numel, dtype,
                                TPX_REDUCE_SUM, err);
  }
  if (st == TPX_OK && p->moe) /* over the MoE mesh dims it is sharded on */
    st = tpx__rt_ep_reduce_mask(rt, p->moe_mask, dfull, (size_t)numel, dtype,
                                TPX_REDUCE_SUM, err);
  if (st == TPX_OK)
    st = tpx__ms_copy(ms, full, dfull, (size_t)numel * es, TPX__D2H, err);
  tpx__ms_free(sms, tmp);
  tpx__ms_free(ms, dfull);
  return st;
}

static tpx_status clocked_runtime_gather_param(tpx_runtime *rt, int64_t param,
                                               void *full, tpx_dtype dtype,
                                               tpx_error *err) {
  return gather_full(rt, param, full, dtype, 0, "tpx_runtime_gather_param",
                     err);
}

static tpx_status clocked_runtime_gather_grad(tpx_runtime *rt, int64_t param,
                                              void *full, tpx_dtype dtype,
                                              tpx_error *err) {
  return gather_full(rt, param, full, dtype, 1, "tpx_runtime_gather_grad", err);
}

/* ---- the public calls, clocked (tpx_mesh_comm_time) ---- */

tpx_status tpx_runtime_gather_param(tpx_runtime *rt, int64_t param, void *full,
                                    tpx_dtype dtype, tpx_error *err) {
  TPX__CLOCKED(tpx__mesh_comm_clock(rt ? rt->mc : NULL), TPX__CLOCK_RUNTIME,
               clocked_runtime_gather_param(rt, param, full, dtype, err));
}

tpx_status tpx_runtime_gather_grad(tpx_runtime *rt, int64_t param, void *full,
                                   tpx_dtype dtype, tpx_error *err) {
  TPX__CLOCKED(tpx__mesh_comm_clock(rt ? rt->mc : NULL), TPX__CLOCK_RUNTIME,
               clocked_runtime_gather_grad(rt, param, full, dtype, err));
}
