/* runtime/rt_ep.c — expert parallelism in the runtime (docs/RUNTIME.md
 * "Expert parallelism"): the comms of the MoE mesh's dims ("ep_shard",
 * "ep"; tpx_sharding_moe_mesh), split from the world when the runtime is
 * created; the shapes of a routed-expert parameter (Shard(0) over ep,
 * Shard(1) over ep_shard when its experts module is an FSDP unit there);
 * the runtime's own units for expert parameters in no FSDP unit (ep =
 * world, or FSDP over one rank), one per module holding them; each unit's
 * group, replicas and gradient divisor; and the accessors a trainer hands
 * to the token dispatch (tpx/runtime_moe.h).
 * Not here: the collectives (rt_fsdp.c, rt_norm.c, rt_load.c run them on
 * the groups set here) and the dispatch itself (tpx/runtime_moe.h). */
#include <stdlib.h>
#include <string.h>

#include "comm/comm_view.h"
#include "runtime/rt_internal.h"

tpx_comm *tpx_runtime_ep_comm(const tpx_runtime *rt) {
  return rt ? rt->ep_comm : NULL;
}

tpx_comm *tpx_runtime_ep_shard_comm(const tpx_runtime *rt) {
  return rt ? rt->eps_comm : NULL;
}

double tpx_runtime_grad_divide_factor(const tpx_runtime *rt, int expert) {
  if (!rt)
    return 0.0;
  return expert ? rt->expert_divide : rt->divide;
}

/* The module holding expert parameter q when it is in no FSDP unit, else
 * -1. */
static int64_t loose_module(const tpx_runtime *rt, int64_t q) {
  tpx_param_info info;
  tpx_param_sharding ps;
  if (tpx_sharding_param_mesh(rt->sh, q) == tpx_sharding_mesh(rt->sh) ||
      tpx_model_param(tpx_sharding_model(rt->sh), q, &info, NULL) != TPX_OK ||
      info.tied_to >= 0 || tpx_sharding_param(rt->sh, q, &ps, NULL) != TPX_OK ||
      ps.fsdp_unit >= 0)
    return -1;
  return info.module;
}

/* The modules of loose expert parameters, in order of their first
 * parameter: one runtime unit each. */
static tpx_status loose_modules(tpx_runtime *rt, tpx_error *err) {
  size_t np = tpx_model_num_params(tpx_sharding_model(rt->sh));
  rt->ep_modules = malloc((np ? np : 1) * sizeof *rt->ep_modules);
  if (!rt->ep_modules)
    return tpx_error_set(err, TPX_NO_MEMORY,
                         "tpx_runtime_create: out of memory");
  rt->num_ep_modules = 0;
  for (size_t q = 0; q < np; q++) {
    int64_t m = loose_module(rt, (int64_t)q);
    size_t k = 0;
    while (m >= 0 && k < rt->num_ep_modules && rt->ep_modules[k] != m) k++;
    if (m >= 0 && k == rt->num_ep_modules)
      rt->ep_modules[rt->num_ep_modules++] = m;
  }
  return TPX_OK;
}

tpx_status tpx__rt_ep_init(tpx_runtime *rt, tpx_error *err) {
  rt->ep = rt->ep_shard = 1;
  /* Every rank's gradient sums into an expert's (the dispatch brings it
   * every token of its ep group, ep_shard the groups): divided by the
   * data-parallel divisor times the ranks that see the same tokens (tp),
   * it is what the other parameters get (docs/RUNTIME.md "Expert
   * parallelism": world by default, as Automodel's ep_shard x dp_cp /
   * ep_shard x tp). */
  int64_t world = tpx_mesh_world_size(tpx_sharding_mesh(rt->sh));
  int64_t distinct = rt->dps * rt->dpr;
  rt->expert_divide =
      rt->opts.expert_grad_divide_factor > 0
          ? rt->opts.expert_grad_divide_factor
          : rt->divide * (double)world / (double)(distinct > 0 ? distinct : 1);
  const tpx_mesh *moe = tpx_sharding_moe_mesh(rt->sh);
  int64_t ep = tpx_sharding_ep_size(rt->sh);
  if (ep <= 1 || !moe)
    return TPX_OK;
  if (!rt->fsdp)
    return tpx_error_set(err, TPX_UNSUPPORTED,
                         "tpx_runtime_create: the sharding has expert "
                         "parallelism (ep %lld) and FSDP off; the runtime "
                         "runs ep > 1 with FSDP units (turn "
                         "tpx_sharding_options.fsdp on)",
                         (long long)ep);
  rt->ep = ep;
  rt->ep_shard = tpx_mesh_world_size(moe) / ep;
  tpx_comm *world_comm = tpx_mesh_comm_world(rt->mc);
  tpx_status st = loose_modules(rt, err);
  if (st == TPX_OK)
    st = tpx_comm_split_mesh_dim(world_comm, moe, "ep", &rt->ep_comm, err);
  if (st == TPX_OK)
    st = tpx_comm_split_mesh_dim(world_comm, moe, "ep_shard", &rt->eps_comm,
                                 err);
  /* the trainer's MoE dispatch over ep counts on mc's clock
   * (tpx_mesh_comm_time's moe_seconds) */
  if (st == TPX_OK)
    tpx__comm_bind_clock(rt->ep_comm, tpx__mesh_comm_clock(rt->mc));
  return st;
}

tpx_status tpx__rt_ep_describe(tpx_runtime *rt, int64_t index,
                               const tpx_param_info *info, tpx__rt_param *p,
                               tpx_error *err) {
  const tpx_mesh *moe = tpx_sharding_moe_mesh(rt->sh);
  tpx_param_sharding ps;
  tpx_status st = tpx_sharding_param(rt->sh, index, &ps, err);
  if (st != TPX_OK)
    return st;
  int eps_dim = tpx_mesh_dim_index(moe, "ep_shard");
  int ep_dim = tpx_mesh_dim_index(moe, "ep");
  tpx_placement pl[TPX_MESH_MAX_DIMS];
  int nd = tpx_mesh_ndim(moe);
  for (int d = 0; d < nd; d++) pl[d] = ps.placements[d];
  tpx_placement es = ps.placements[eps_dim];
  pl[eps_dim] = tpx_placement_replicate(); /* the ep-local piece */
  st = tpx_layout_local_slice(info->shape, info->ndim, moe, pl, rt->rank,
                              &p->tp_local, err);
  if (st != TPX_OK)
    return st;
  p->moe = 1;
  p->moe_mask = 0;
  if ((es.kind == TPX_SHARD || es.kind == TPX_STRIDED_SHARD) &&
      rt->ep_shard > 1)
    p->moe_mask |= 1u;
  tpx_placement_kind ek = ps.placements[ep_dim].kind;
  if ((ek == TPX_SHARD || ek == TPX_STRIDED_SHARD) && rt->ep > 1)
    p->moe_mask |= 2u;
  p->local_numel = 1;
  for (int i = 0; i < info->ndim; i++) {
    p->local_shape[i] = p->tp_local.length[i];
    p->local_numel *= p->local_shape[i];
  }
  /* FSDP over ep_shard splits the dim its placement names (1, or 0 for a
   * 1-d parameter), in a unit over ep_shard only. */
  p->dp_split = ps.fsdp_unit >= 0 && (p->moe_mask & 1u) && info->ndim > 0;
  p->split_dim = p->dp_split ? (int)es.dim : 0;
  if (p->split_dim < 0)
    p->split_dim += info->ndim;
  if (info->ndim && (p->split_dim < 0 || p->split_dim >= info->ndim))
    return tpx_error_set(err, TPX_UNSUPPORTED,
                         "tpx_runtime_create: expert parameter '%s': "
                         "ep_shard splits dim %d of a %d-d tensor",
                         info->fqn, (int)es.dim, info->ndim);
  p->outer = 1;
  for (int i = 0; i < p->split_dim; i++) p->outer *= p->local_shape[i];
  p->rows = info->ndim ? p->local_shape[p->split_dim] : 1;
  p->row_numel = 1;
  for (int i = p->split_dim + 1; i < info->ndim; i++)
    p->row_numel *= p->local_shape[i];
  p->shard_rows = p->dp_split ? p->global.length[p->split_dim] : p->rows;
  p->shard_numel = p->outer * p->shard_rows * p->row_numel;
  for (int i = 0; i < info->ndim; i++)
    if (i != (p->dp_split ? p->split_dim : -1) &&
        (p->global.length[i] != p->local_shape[i] ||
         p->global.offset[i] != p->tp_local.offset[i]))
      return tpx_error_set(err, TPX_UNSUPPORTED,
                           "tpx_runtime_create: expert parameter '%s': the "
                           "ep_shard split is not along one dim of the "
                           "ep-local piece",
                           info->fqn);
  /* FSDP2 pads the split dim to the first chunk (torch.chunk). */
  int64_t chunk = p->rows;
  if (p->dp_split)
    chunk = rt->ep_shard ? (p->rows + rt->ep_shard - 1) / rt->ep_shard : 0;
  p->padded = p->outer * chunk * p->row_numel;
  if (p->padded < p->shard_numel)
    p->padded = p->shard_numel;
  p->grad_tp_allreduce = 0;
  return TPX_OK;
}

int64_t tpx__rt_ep_extra_unit(const tpx_runtime *rt, int64_t param) {
  int64_t m = loose_module(rt, param);
  for (size_t k = 0; m >= 0 && k < rt->num_ep_modules; k++)
    if (rt->ep_modules[k] == m)
      return (int64_t)(rt->num_fsdp_units + k);
  return -1;
}

tpx_status tpx__rt_ep_unit_groups(tpx_runtime *rt, size_t u, tpx_error *err) {
  tpx__rt_unit *un = &rt->units[u];
  un->module = -1;
  un->moe = un->count && rt->params[un->first].moe;
  for (size_t i = 1; i < un->count; i++)
    if (rt->params[un->first + i].moe != un->moe) {
      tpx_param_info in;
      tpx_model_param(tpx_sharding_model(rt->sh),
                      rt->params[un->first + i].index, &in, NULL);
      return tpx_error_set(err, TPX_UNSUPPORTED,
                           "tpx_runtime_create: FSDP unit %zu holds expert "
                           "and other parameters ('%s' is %san expert "
                           "parameter); declare every parameter of the "
                           "experts module an expert parameter",
                           u, in.fqn, un->moe ? "not " : "");
    }
  if (rt->fsdp && u >= rt->num_fsdp_units) /* the runtime's own: one rank */
    un->module = rt->ep_modules[u - rt->num_fsdp_units];
  if (!un->moe) {
    un->ws = rt->fsdp ? rt->dps : 1;
    un->gcomm = tpx__rt_dim_comm(rt, rt->dps_dim);
    un->rcomm = rt->dpr > 1 ? tpx__rt_dim_comm(rt, rt->dpr_dim) : NULL;
    un->divide = rt->divide;
    return TPX_OK;
  }
  const char *dim =
      u < rt->num_fsdp_units ? tpx_sharding_fsdp_unit_dim(rt->sh, u) : NULL;
  int over_eps = dim && strcmp(dim, "ep_shard") == 0;
  un->ws = over_eps ? rt->ep_shard : 1;
  un->gcomm = over_eps ? rt->eps_comm : NULL;
  /* Replicated over ep_shard (FSDP over one data-parallel rank): the
   * replicas' gradients are summed as FSDP's would be. */
  un->rcomm = !over_eps && rt->ep_shard > 1 ? rt->eps_comm : NULL;
  un->divide = rt->expert_divide;
  return TPX_OK;
}

tpx_status tpx__rt_ep_reduce_mask(tpx_runtime *rt, unsigned mask, void *buf,
                                  size_t count, tpx_dtype dt, tpx_reduce_op op,
                                  tpx_error *err) {
  tpx_status st = TPX_OK;
  /* ep_shard carries the units' collectives: on the comm thread, in order
   * with them; ep is the dispatch's, on the calling thread. */
  if (mask & 1u)
    st = tpx__rt_all_reduce_comm(rt, rt->eps_comm, 1, buf, count, dt, op, err);
  if (st == TPX_OK && (mask & 2u))
    st = tpx__rt_all_reduce_comm(rt, rt->ep_comm, 0, buf, count, dt, op, err);
  return st;
}
