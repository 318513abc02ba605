/* runtime/rt_runtime.c — tpx_runtime create / destroy, the per-parameter
 * layout of the flat unit buffers, queries and byte accounting.
 * Not here: the collectives that move the buffers (rt_fsdp.c, rt_load.c,
 * rt_norm.c) and the optimizer (rt_adamw.c). */
#include <stdlib.h>
#include <string.h>

#include "comm/comm_view.h"
#include "runtime/rt_internal.h"
#include "shard/sharding_view.h"

/* Offsets are aligned to the element size only, so a unit of one dtype has
 * no bytes beyond its padded numels. */
static size_t align_to(size_t n, size_t a) { return (n + a - 1) / a * a; }

float *tpx__rt_master(const tpx_runtime *rt, const tpx__rt_param *p) {
  const tpx__rt_unit *u = &rt->units[p->unit];
  if (p->master_off >= 0)
    return u->master + p->master_off;
  return (float *)(void *)((unsigned char *)u->flat + p->flat_off);
}

tpx__rt_param *tpx__rt_lookup(const tpx_runtime *rt, int64_t param,
                              const char *what, tpx_error *err) {
  if (!rt) {
    tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: runtime is NULL", what);
    return NULL;
  }
  if (param < 0 || (size_t)param >= rt->num_params) {
    tpx_error_set(err, TPX_OUT_OF_RANGE,
                  "%s: parameter index %lld is outside 0..%zu", what,
                  (long long)param, rt->num_params);
    return NULL;
  }
  return &rt->params[rt->param_slot[param]];
}

/* ---- create ---- */

/* A main-mesh parameter's shapes: its TP-local piece, and the dim-0 split
 * over dp_shard. */
static tpx_status describe_shape(tpx_runtime *rt, const tpx_param_info *info,
                                 const tpx_param_sharding *ps, tpx__rt_param *p,
                                 tpx_error *err) {
  const tpx_mesh *mesh = tpx_sharding_mesh(rt->sh);
  tpx_status st;
  /* The TP-local piece: the same placements with the dp dims replicated. */
  tpx_placement pl[TPX_MESH_MAX_DIMS];
  for (int d = 0; d < rt->ndim; d++) {
    pl[d] = ps->placements[d];
    if (tpx__rt_dim_is_dp(rt, d))
      pl[d] = tpx_placement_replicate();
  }
  st = tpx_layout_local_slice(info->shape, info->ndim, mesh, pl, rt->rank,
                              &p->tp_local, err);
  if (st != TPX_OK)
    return st;
  p->local_numel = 1;
  for (int i = 0; i < info->ndim; i++) {
    p->local_shape[i] = p->tp_local.length[i];
    p->local_numel *= p->local_shape[i];
  }
  p->rows = info->ndim ? p->local_shape[0] : 1;
  p->row_numel = p->rows ? p->local_numel / p->rows : 0;
  if (info->ndim && p->rows == 0) { /* empty TP piece: row size from shape */
    p->row_numel = 1;
    for (int i = 1; i < info->ndim; i++) p->row_numel *= p->local_shape[i];
  }
  for (int d = 0; d < rt->ndim; d++) {
    tpx_placement_kind k = ps->placements[d].kind;
    /* FSDP's dim splits over its whole view (dp_shard_cp: dp_shard 1 x
     * cp 2 still splits in two) */
    int64_t size = d == rt->dps_dim ? rt->dps : tpx_mesh_dim_size(mesh, d);
    if ((k == TPX_SHARD || k == TPX_STRIDED_SHARD) && size > 1)
      p->shard_mask |= 1u << d;
  }
  p->dp_split = 0;
  if (rt->fsdp && rt->dps_dim >= 0 && info->ndim > 0) {
    tpx_placement_kind k = ps->placements[rt->dps_dim].kind;
    p->dp_split = k == TPX_SHARD || k == TPX_STRIDED_SHARD;
  }
  p->shard_rows = p->dp_split ? p->global.length[0] : p->rows;
  /* The shard must be rows of the TP-local piece. */
  for (int i = p->dp_split ? 1 : 0; i < info->ndim; i++)
    if (p->global.length[i] != p->local_shape[i] ||
        p->global.offset[i] != p->tp_local.offset[i])
      return tpx_error_set(err, TPX_UNSUPPORTED,
                           "tpx_runtime_create: parameter '%s': the "
                           "data-parallel split is not along dim 0 of the "
                           "TP-local piece",
                           info->fqn);
  p->split_dim = 0;
  p->outer = 1;
  p->shard_numel = p->shard_rows * p->row_numel;
  if (rt->fsdp)
    return tpx_layout_fsdp_padded_numel(
        p->local_shape, info->ndim, p->dp_split ? rt->dps : 1, &p->padded, err);
  p->padded = p->local_numel;
  return TPX_OK;
}

/* Fill one parameter's shapes, dtypes and slices (offsets come later). */
static tpx_status describe_param(tpx_runtime *rt, int64_t index,
                                 tpx__rt_param *p, tpx_error *err) {
  const tpx_sharding *sh = rt->sh;
  tpx_param_info info;
  tpx_param_sharding ps;
  tpx_status st = tpx_model_param(tpx_sharding_model(sh), index, &info, err);
  if (st == TPX_OK)
    st = tpx_sharding_param(sh, index, &ps, err);
  if (st == TPX_OK)
    st = tpx_sharding_local_slice(sh, index, rt->rank, &p->global, err);
  if (st != TPX_OK)
    return st;
  p->index = index;
  p->unit = rt->fsdp ? (size_t)ps.fsdp_unit : 0;
  p->ndim = info.ndim;
  if (tpx_sharding_param_mesh(sh, index) != tpx_sharding_mesh(sh)) {
    st = tpx__rt_ep_describe(rt, index, &info, p, err);
    if (ps.fsdp_unit < 0) /* in no FSDP unit: the runtime's own */
      p->unit = (size_t)tpx__rt_ep_extra_unit(rt, index);
  } else {
    st = describe_shape(rt, &info, &ps, p, err);
  }
  if (st != TPX_OK)
    return st;

  /* Dtypes. */
  int keep32 = tpx_sharding_param_keeps_fp32(sh, index);
  p->storage = rt->opts.storage_dtype != TPX_DTYPE_INVALID
                   ? rt->opts.storage_dtype
                   : info.dtype;
  if (keep32)
    p->storage = TPX_DTYPE_F32;
  if (!tpx__rt_dtype_ok(p->storage))
    return tpx_error_set(err, TPX_UNSUPPORTED,
                         "tpx_runtime_create: parameter '%s' has dtype %s; "
                         "the runtime stores f32, bf16 or f16",
                         info.fqn, tpx_dtype_short_name(p->storage));
  if (!rt->fsdp) {
    if (p->storage != TPX_DTYPE_F32)
      return tpx_error_set(err, TPX_UNSUPPORTED,
                           "tpx_runtime_create: parameter '%s': without FSDP "
                           "the runtime computes in the storage dtype and "
                           "needs it to be f32 (got %s; set "
                           "tpx_runtime_options.storage_dtype)",
                           info.fqn, tpx_dtype_short_name(p->storage));
    p->compute = p->reduce = TPX_DTYPE_F32;
  } else if (keep32) {
    p->compute = ps.param_dtype;
    p->reduce = ps.reduce_dtype;
  } else {
    tpx_mp_policy mp = tpx_sharding_mp_policy(sh);
    tpx_fsdp_param_dtypes(&mp, p->storage, &p->compute, &p->reduce);
  }
  if (!tpx__rt_dtype_ok(p->compute) || !tpx__rt_dtype_ok(p->reduce))
    return tpx_error_set(err, TPX_UNSUPPORTED,
                         "tpx_runtime_create: parameter '%s': compute dtype "
                         "%s / reduce dtype %s; the runtime supports f32, "
                         "bf16 and f16",
                         info.fqn, tpx_dtype_short_name(p->compute),
                         tpx_dtype_short_name(p->reduce));
  p->grad_tp_allreduce =
      !p->moe && tpx_tp_param_grad_needs_allreduce(sh, index);
  return TPX_OK;
}

/* Offsets of the unit's params in its buffers, and the buffers. */
static tpx_status layout_unit(tpx_runtime *rt, tpx__rt_unit *u,
                              tpx_error *err) {
  size_t flat = 0, cflat = 0, rflat = 0, unsh = 0;
  int64_t grad = 0, master = 0;
  u->reduce = u->count ? rt->params[u->first].reduce : TPX_DTYPE_F32;
  for (size_t i = 0; i < u->count; i++)
    if (rt->params[u->first + i].reduce != u->reduce)
      u->reduce = TPX_DTYPE_F32; /* mixed: reduce in f32 */
  size_t rsz = tpx_dtype_size(u->reduce);
  u->cast_send = 0;
  for (size_t i = 0; i < u->count; i++) {
    tpx__rt_param *p = &rt->params[u->first + i];
    size_t ssz = tpx_dtype_size(p->storage), csz = tpx_dtype_size(p->compute);
    flat = align_to(flat, ssz);
    cflat = align_to(cflat, csz);
    rflat = align_to(rflat, rsz);
    unsh = align_to(unsh, csz);
    p->flat_off = flat;
    p->cflat_off = cflat;
    p->rflat_off = rflat;
    p->grad_off = grad;
    p->unsh_off = unsh;
    p->master_off = -1;
    if (p->storage != TPX_DTYPE_F32) {
      p->master_off = master;
      master += p->padded;
    }
    if (p->compute != p->storage)
      u->cast_send = 1;
    flat += (size_t)p->padded * ssz;
    cflat += (size_t)p->padded * csz;
    rflat += (size_t)p->padded * rsz;
    grad += p->padded;
    unsh += (size_t)p->local_numel * csz;
  }
  u->flat_bytes = flat;
  u->cflat_bytes = cflat;
  u->rflat_bytes = rflat;
  u->grad_numel = grad;
  u->master_numel = master;
  u->unsh_bytes = unsh;
  u->flat = tpx__rt_alloc(rt, TPX_RUNTIME_MEM_PARAMS, flat);
  u->master = master ? tpx__rt_alloc(rt, TPX_RUNTIME_MEM_PARAMS,
                                     (size_t)master * sizeof(float))
                     : NULL;
  u->grad =
      tpx__rt_alloc(rt, TPX_RUNTIME_MEM_GRADS, (size_t)grad * sizeof(float));
  if (!u->flat || (master && !u->master) || !u->grad)
    return tpx_error_set(err, TPX_NO_MEMORY,
                         "tpx_runtime_create: out of memory for the unit "
                         "buffers (%zu bytes of parameters)",
                         flat);
  if (!rt->fsdp) { /* unsharded = the TP-local tensors themselves */
    u->unsh = u->flat;
    u->unsh_grad = u->grad;
    u->state = TPX__RT_UNSHARDED;
  }
  return TPX_OK;
}

static tpx_status build(tpx_runtime *rt, tpx_error *err) {
  const tpx_sharding *sh = rt->sh;
  const tpx_model *model = tpx_sharding_model(sh);
  rt->num_params = tpx_model_num_params(model);
  rt->param_slot =
      calloc(rt->num_params ? rt->num_params : 1, sizeof *rt->param_slot);
  rt->units = calloc(rt->num_units, sizeof *rt->units);
  if (!rt->param_slot || !rt->units)
    return tpx_error_set(err, TPX_NO_MEMORY,
                         "tpx_runtime_create: out of "
                         "memory");
  /* Describe every non-alias parameter, in index order. */
  size_t n = 0;
  for (size_t i = 0; i < rt->num_params; i++) {
    tpx_param_info info;
    tpx_status st = tpx_model_param(model, (int64_t)i, &info, err);
    if (st != TPX_OK)
      return st;
    if (info.tied_to < 0)
      n++;
  }
  tpx__rt_param *tmp = calloc(n ? n : 1, sizeof *tmp);
  rt->params = calloc(n ? n : 1, sizeof *rt->params);
  if (!tmp || !rt->params) {
    free(tmp);
    return tpx_error_set(err, TPX_NO_MEMORY,
                         "tpx_runtime_create: out of "
                         "memory");
  }
  size_t k = 0;
  for (size_t i = 0; i < rt->num_params; i++) {
    tpx_param_info info;
    tpx_model_param(model, (int64_t)i, &info, NULL);
    if (info.tied_to >= 0)
      continue;
    tpx_status st = describe_param(rt, (int64_t)i, &tmp[k], err);
    if (st == TPX_OK && tmp[k].unit >= rt->num_units)
      st = tpx_error_set(err, TPX_INTERNAL,
                         "tpx_runtime_create: parameter '%s' has FSDP unit "
                         "%zu of %zu",
                         info.fqn, tmp[k].unit, rt->num_units);
    if (st != TPX_OK) {
      free(tmp);
      return st;
    }
    k++;
  }
  /* Group by unit (stable: index order inside a unit). */
  size_t pos = 0;
  for (size_t u = 0; u < rt->num_units; u++) {
    rt->units[u].first = pos;
    for (size_t j = 0; j < n; j++)
      if (tmp[j].unit == u)
        rt->params[pos++] = tmp[j];
    rt->units[u].count = pos - rt->units[u].first;
  }
  free(tmp);
  rt->num_rt_params = n;
  for (size_t j = 0; j < n; j++)
    rt->param_slot[rt->params[j].index] = (int64_t)j;
  for (size_t i = 0; i < rt->num_params; i++) {
    tpx_param_info info;
    tpx_model_param(model, (int64_t)i, &info, NULL);
    if (info.tied_to >= 0) {
      int64_t t = info.tied_to;
      tpx_param_info ti;
      /* follow chains of aliases */
      while (tpx_model_param(model, t, &ti, NULL) == TPX_OK && ti.tied_to >= 0)
        t = ti.tied_to;
      rt->param_slot[i] = rt->param_slot[t];
    }
  }
  for (size_t u = 0; u < rt->num_units; u++) {
    tpx__rt_unit *un = &rt->units[u];
    un->rt = rt;
    tpx__rt_ep_unit_groups(rt, u);
    if (rt->fsdp && u < rt->num_fsdp_units) {
      tpx_fsdp_unit fu;
      tpx_status st = tpx_sharding_fsdp_unit(sh, u, &fu, err);
      if (st != TPX_OK)
        return st;
      un->reshard_after_forward = fu.reshard_after_forward;
      un->fwd = fu.fwd_prefetch;
      un->num_fwd = fu.num_fwd_prefetch;
      un->bwd = fu.bwd_prefetch;
      un->num_bwd = fu.num_bwd_prefetch;
    }
    tpx_status st = layout_unit(rt, un, err);
    if (st != TPX_OK)
      return st;
  }
  return TPX_OK;
}

/* This rank's index in FSDP's dim or view (row-major over the view's
 * dims: dp_shard_index * cp + cp_index), and the view's group when it
 * spans several dims (split from the world: collective, as creating the
 * runtime is on every rank). */
static tpx_status fsdp_view(tpx_runtime *rt, tpx_error *err) {
  const tpx_mesh *mesh = tpx_sharding_mesh(rt->sh);
  int64_t coords[TPX_MESH_MAX_DIMS];
  tpx_status st = tpx_mesh_coords(mesh, rt->rank, coords, err);
  if (st != TPX_OK || rt->dps_dim < 0)
    return st;
  int n = rt->dps_ndims > 1 ? rt->dps_ndims : 1;
  rt->dps_index = 0;
  for (int d = rt->dps_dim; d < rt->dps_dim + n; d++)
    rt->dps_index = rt->dps_index * tpx_mesh_dim_size(mesh, d) + coords[d];
  if (n == 1)
    return TPX_OK;
  const char *view = tpx_sharding_fsdp_mesh_name(rt->sh, NULL);
  if (!view)
    return tpx_error_set(err, TPX_UNSUPPORTED,
                         "tpx_runtime_create: a data-parallel view over %d "
                         "mesh dims needs FSDP (the sharding has it off)",
                         n);
  return tpx_comm_split_mesh_dim(tpx_mesh_comm_world(rt->mc), mesh, view,
                                 &rt->dps_comm, err);
}

tpx_status tpx_runtime_create(const tpx_sharding *sh, tpx_mesh_comm *mc,
                              const tpx_runtime_options *opts,
                              tpx_runtime **out, tpx_error *err) {
  if (!out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_runtime_create: out is NULL");
  *out = NULL;
  if (!sh)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_runtime_create: sharding is NULL");
  tpx_status st = tpx__mesh_comm_check(mc, tpx_sharding_mesh(sh),
                                       "tpx_runtime_create", err);
  if (st != TPX_OK)
    return st;
  tpx_runtime_options o = TPX_RUNTIME_OPTIONS_INIT;
  if (opts) {
    if (opts->struct_size < sizeof(size_t) ||
        opts->struct_size > sizeof(tpx_runtime_options))
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "tpx_runtime_create: options struct_size %zu is "
                           "not a tpx_runtime_options size",
                           opts->struct_size);
    memcpy(&o, opts, opts->struct_size);
    o.struct_size = sizeof o;
  }
  if (o.storage_dtype != TPX_DTYPE_INVALID &&
      !tpx__rt_dtype_ok(o.storage_dtype))
    return tpx_error_set(err, TPX_UNSUPPORTED,
                         "tpx_runtime_create: storage_dtype %s; the runtime "
                         "stores f32, bf16 or f16",
                         tpx_dtype_short_name(o.storage_dtype));
  if (!(o.grad_divide_factor >= 0.0) || o.grad_divide_factor > 1e30)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_runtime_create: grad_divide_factor %g must be "
                         ">= 0 (0 = the data-parallel size)",
                         o.grad_divide_factor);
  if (!(o.expert_grad_divide_factor >= 0.0) ||
      o.expert_grad_divide_factor > 1e30)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_runtime_create: expert_grad_divide_factor %g "
                         "must be >= 0 (0 = its default, the world size)",
                         o.expert_grad_divide_factor);
  tpx_runtime *rt = calloc(1, sizeof *rt);
  if (!rt)
    return tpx_error_set(err, TPX_NO_MEMORY,
                         "tpx_runtime_create: out of "
                         "memory");
  rt->sh = sh;
  rt->mc = mc;
  rt->ms = tpx__comm_ms(tpx_mesh_comm_world(mc));
  rt->opts = o;
  rt->rank = tpx_comm_rank(tpx_mesh_comm_world(mc));
  const tpx__shard_dims dims = tpx__sv_dims(sh);
  rt->ndim = dims.ndim;
  rt->tp_dim = dims.tp_dim;
  rt->dps_dim = dims.dps_dim;
  rt->dpr_dim = dims.dpr_dim;
  rt->tp = dims.tp;
  rt->dps = dims.dps;
  rt->dpr = dims.dpr;
  rt->fsdp = tpx_sharding_num_fsdp_units(sh) > 0;
  rt->num_fsdp_units = rt->fsdp ? tpx_sharding_num_fsdp_units(sh) : 0;
  rt->num_units = rt->fsdp ? rt->num_fsdp_units : 1;
  if (o.offload && !rt->fsdp) { /* CPUOffloadPolicy is an FSDP2 policy */
    free(rt);
    return tpx_error_set(err, TPX_UNSUPPORTED,
                         "tpx_runtime_create: offload needs FSDP units (the "
                         "sharding has none: turn tpx_sharding_options.fsdp "
                         "on, as fully_shard with a CPUOffloadPolicy would)");
  }
  rt->divide = o.grad_divide_factor > 0 ? o.grad_divide_factor
                                        : (double)(rt->dps * rt->dpr);
  rt->dps_ndims = dims.dps_ndims;
  st = fsdp_view(rt, err);
  if (st == TPX_OK)
    st = tpx__rt_ep_init(rt, err);
  rt->num_units += rt->num_ep_modules; /* expert units of the runtime's own */
  if (st == TPX_OK)
    st = build(rt, err);
  if (st == TPX_OK)
    st = tpx__rt_hooks_init(rt, err);
  if (st == TPX_OK) {
    /* A comm thread for the dp collectives: local threads always; mpi
     * only under MPI_THREAD_MULTIPLE; nccl never (synchronous). */
    const char *be = tpx_comm_backend(tpx_mesh_comm_world(mc));
    int threaded = o.async && (rt->dps * rt->dpr > 1 || rt->ep_shard > 1) &&
                   (strcmp(be, "local") == 0 ||
                    (strcmp(be, "mpi") == 0 && tpx__mpi_thread_multiple()));
    st = tpx__rt_queue_start(&rt->queue, threaded, err);
  }
  if (st != TPX_OK) {
    tpx_runtime_destroy(rt);
    return st;
  }
  *out = rt;
  return TPX_OK;
}

void tpx_runtime_destroy(tpx_runtime *rt) {
  if (!rt)
    return;
  tpx__rt_queue_stop(&rt->queue);
  tpx_comm_destroy(rt->dps_comm);
  tpx_comm_destroy(rt->ep_comm);
  tpx_comm_destroy(rt->eps_comm);
  free(rt->ep_modules);
  for (size_t u = 0; rt->units && u < rt->num_units; u++) {
    tpx__rt_unit *un = &rt->units[u];
    if (rt->fsdp) {
      tpx__rt_free_unsharded(rt, un);
      tpx__rt_free(rt, TPX_RUNTIME_MEM_UNSHARDED_GRADS, un->unsh_grad,
                   un->unsh_bytes);
      tpx__rt_free(rt, TPX_RUNTIME_MEM_UNSHARDED_GRADS, un->rstage,
                   un->rflat_bytes * (size_t)un->ws);
      tpx__rt_free(rt, TPX_RUNTIME_MEM_UNSHARDED_GRADS, un->rout,
                   un->rflat_bytes);
    }
    tpx__rt_free(rt, TPX_RUNTIME_MEM_PARAMS, un->flat, un->flat_bytes);
    tpx__rt_free(rt, TPX_RUNTIME_MEM_PARAMS, un->master,
                 (size_t)un->master_numel * sizeof(float));
    tpx__rt_free(rt, TPX_RUNTIME_MEM_GRADS, un->grad,
                 (size_t)un->grad_numel * sizeof(float));
    tpx__rt_free(rt, TPX_RUNTIME_MEM_OPTIMIZER, un->exp_avg,
                 (size_t)un->grad_numel * sizeof(float));
    tpx__rt_free(rt, TPX_RUNTIME_MEM_OPTIMIZER, un->exp_avg_sq,
                 (size_t)un->grad_numel * sizeof(float));
  }
  tpx__rt_release_cache(rt);
  tpx__rt_hooks_free(rt);
  free(rt->units);
  free(rt->params);
  free(rt->param_slot);
  free(rt);
}

/* ---- queries ---- */

const tpx_sharding *tpx_runtime_sharding(const tpx_runtime *rt) {
  return rt ? rt->sh : NULL;
}
tpx_mesh_comm *tpx_runtime_mesh_comm(const tpx_runtime *rt) {
  return rt ? rt->mc : NULL;
}
int64_t tpx_runtime_rank(const tpx_runtime *rt) { return rt ? rt->rank : -1; }
int tpx_runtime_fsdp_enabled(const tpx_runtime *rt) {
  return rt ? rt->fsdp : 0;
}
int tpx_runtime_is_async(const tpx_runtime *rt) {
  return rt ? rt->queue.threaded : 0;
}
size_t tpx_runtime_num_units(const tpx_runtime *rt) {
  return rt ? rt->num_units : 0;
}
int64_t tpx_runtime_param_unit(const tpx_runtime *rt, int64_t param) {
  if (!rt || param < 0 || (size_t)param >= rt->num_params)
    return -1;
  return (int64_t)rt->params[rt->param_slot[param]].unit;
}
int tpx_runtime_unit_is_unsharded(const tpx_runtime *rt, size_t unit) {
  if (!rt || unit >= rt->num_units)
    return 0;
  return rt->units[unit].state == TPX__RT_UNSHARDED;
}
int64_t tpx_runtime_optimizer_steps(const tpx_runtime *rt) {
  return rt ? rt->steps : -1;
}

tpx_status tpx_runtime_param(const tpx_runtime *rt, int64_t param,
                             tpx_runtime_param_info *out, tpx_error *err) {
  tpx__rt_param *p = tpx__rt_lookup(rt, param, "tpx_runtime_param", err);
  if (!p)
    return err ? err->status : TPX_INVALID_ARGUMENT;
  if (!out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_runtime_param: out is NULL");
  const tpx__rt_unit *u = &rt->units[p->unit];
  memset(out, 0, sizeof *out);
  out->param = p->index;
  out->unit = (int64_t)p->unit;
  out->storage_dtype = p->storage;
  out->compute_dtype = p->compute;
  out->reduce_dtype = p->reduce;
  out->ndim = p->ndim;
  out->sharded = (unsigned char *)u->flat + p->flat_off;
  out->master = tpx__rt_master(rt, p);
  out->sharded_grad = u->grad + p->grad_off;
  out->sharded_numel = p->shard_numel;
  for (int i = 0; i < p->ndim; i++) {
    out->sharded_shape[i] =
        i == p->split_dim ? p->shard_rows : p->local_shape[i];
    out->local_shape[i] = p->local_shape[i];
  }
  out->global = p->global;
  out->local_numel = p->local_numel;
  out->tp_local = p->tp_local;
  if (u->state == TPX__RT_UNSHARDED) {
    out->unsharded = (unsigned char *)u->unsh + p->unsh_off;
    if (u->unsh_grad)
      out->unsharded_grad =
          rt->fsdp ? (void *)((unsigned char *)u->unsh_grad + p->unsh_off)
                   : (void *)(u->grad + p->grad_off);
  }
  out->grad_tp_allreduce = p->grad_tp_allreduce;
  return TPX_OK;
}

int64_t tpx_runtime_allocated_bytes(const tpx_runtime *rt,
                                    tpx_runtime_mem_kind kind) {
  if (!rt || (int)kind < 0 || kind > TPX_RUNTIME_MEM_TOTAL)
    return -1;
  return rt->cur[kind];
}

int64_t tpx_runtime_peak_bytes(const tpx_runtime *rt,
                               tpx_runtime_mem_kind kind) {
  if (!rt || (int)kind < 0 || kind > TPX_RUNTIME_MEM_TOTAL)
    return -1;
  return rt->peak[kind];
}

int64_t tpx_runtime_cached_bytes(const tpx_runtime *rt) {
  return rt ? rt->cached_bytes : -1;
}
