/* runtime/rt_load.c — moving whole tensors in and out of the runtime:
 * load this rank's shard of a caller's full tensor, and gather a full
 * parameter / gradient from every rank's shard (zero-filled full buffers
 * summed over exactly the mesh dims the parameter is sharded on, which is
 * exact since each element is non-zero on one rank of each group).
 * Not the checkpoint reader (tpx/checkpoint.h). */
#include <stdlib.h>
#include <string.h>

#include "comm/box.h"
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
  if (!p) return err ? err->status : TPX_INVALID_ARGUMENT;
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
  size_t n = (size_t)(p->shard_rows * p->row_numel);
  if (n == 0) return TPX_OK;
  size_t es = tpx_dtype_size(dtype);
  void *tmp = malloc(n * es);
  if (!tmp)
    return tpx_error_set(err, TPX_NO_MEMORY,
                         "tpx_runtime_load_param: '%s': out of memory",
                         fqn_of(rt, p));
  tpx__box_copy(tmp, &p->global, full, &whole, &p->global, es);
  tpx__rt_convert((unsigned char *)u->flat + p->flat_off, p->storage, tmp,
                  dtype, n);
  if (p->master_off >= 0)
    tpx__rt_convert(u->master + p->master_off, TPX_DTYPE_F32, tmp, dtype, n);
  free(tmp);
  return TPX_OK;
}

static tpx_status gather_full(tpx_runtime *rt, int64_t param, void *full,
                              tpx_dtype dtype, int grad, const char *what,
                              tpx_error *err) {
  tpx__rt_param *p = tpx__rt_lookup(rt, param, what, err);
  if (!p) return err ? err->status : TPX_INVALID_ARGUMENT;
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
    if (st != TPX_OK) return st;
  }
  int64_t numel;
  tpx_slice whole = whole_of(rt, p, &numel);
  size_t es = tpx_dtype_size(dtype);
  memset(full, 0, (size_t)numel * es);
  size_t n = (size_t)(p->shard_rows * p->row_numel);
  if (n) {
    void *tmp = malloc(n * es);
    if (!tmp)
      return tpx_error_set(err, TPX_NO_MEMORY, "%s: '%s': out of memory",
                           what, fqn_of(rt, p));
    const float *src = grad ? rt->units[p->unit].grad + p->grad_off
                            : tpx__rt_master(rt, p);
    tpx__rt_convert(tmp, dtype, src, TPX_DTYPE_F32, n);
    tpx__box_copy(full, &whole, tmp, &p->global, &p->global, es);
    free(tmp);
  }
  for (int d = 0; d < rt->ndim; d++) {
    if (!(p->shard_mask & (1u << d))) continue;
    tpx_status st = tpx__rt_all_reduce_dim(rt, d, full, (size_t)numel, dtype,
                                           TPX_REDUCE_SUM, err);
    if (st != TPX_OK) return st;
  }
  return TPX_OK;
}

tpx_status tpx_runtime_gather_param(tpx_runtime *rt, int64_t param,
                                    void *full, tpx_dtype dtype,
                                    tpx_error *err) {
  return gather_full(rt, param, full, dtype, 0, "tpx_runtime_gather_param",
                     err);
}

tpx_status tpx_runtime_gather_grad(tpx_runtime *rt, int64_t param, void *full,
                                   tpx_dtype dtype, tpx_error *err) {
  return gather_full(rt, param, full, dtype, 1, "tpx_runtime_gather_grad",
                     err);
}
