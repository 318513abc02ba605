/* runtime/rt_hooks.c — FSDP2's module hooks on the runtime's units: which
 * unit a module name belongs to, the per-pass bookkeeping (a unit is
 * unsharded once per forward and once per backward, its gradients reduced
 * once per backward, whoever asks first) and the root units (those outside
 * every module list: the root, and the untied input / output embeddings'
 * own units), gathered when a pass begins and reduced and released when the
 * backward ends, as FSDP2's root hooks and final callback do; the hooks
 * of the model itself (module "") open and close the passes.
 * Not here: the collectives themselves (rt_fsdp.c); the order a trainer
 * runs its modules in (its forward). */
#include <stdlib.h>
#include <string.h>

#include "runtime/rt_internal.h"
#include "comm/comm_view.h"

enum { PASS_NONE = 0, PASS_FORWARD = 1, PASS_BACKWARD = 2 };

static const char *pass_name(int pass) {
  return pass == PASS_FORWARD    ? "forward"
         : pass == PASS_BACKWARD ? "backward"
                                 : "no";
}

tpx_status tpx__rt_hooks_init(tpx_runtime *rt, tpx_error *err) {
  const tpx_model *model = tpx_sharding_model(rt->sh);
  size_t nm = tpx_model_num_modules(model);
  rt->unit_at = malloc((nm ? nm : 1) * sizeof *rt->unit_at);
  rt->root_units = malloc(rt->num_units * sizeof *rt->root_units);
  if (!rt->unit_at || !rt->root_units)
    return tpx_error_set(err, TPX_NO_MEMORY,
                         "tpx_runtime_create: out of memory");
  rt->num_modules = nm;
  for (size_t m = 0; m < nm; m++) rt->unit_at[m] = -1;
  rt->num_root = 0;
  for (size_t u = 0; u < rt->num_units; u++) {
    tpx__rt_unit *un = &rt->units[u];
    un->root = 1; /* FSDP off: the one pseudo-unit is the root */
    if (rt->fsdp && u < rt->num_fsdp_units) {
      tpx_fsdp_unit fu;
      tpx_status st = tpx_sharding_fsdp_unit(rt->sh, u, &fu, err);
      if (st != TPX_OK)
        return st;
      /* an experts unit (over ep_shard) is outside every module list but
       * runs with its module, as upstream's fully_shard(experts) */
      un->root = fu.is_root || (fu.group < 0 && !un->moe);
      if (fu.module >= 0 && (size_t)fu.module < nm)
        rt->unit_at[fu.module] = (int64_t)u;
    } else if (rt->fsdp) { /* the runtime's own expert units (rt_ep.c) */
      un->root = 0;
      if (un->module >= 0 && (size_t)un->module < nm)
        rt->unit_at[un->module] = (int64_t)u;
    }
    if (!un->root)
      continue;
    /* forward order: by the first parameter each holds (model order) */
    int64_t first = un->count ? rt->params[un->first].index : -1;
    size_t k = rt->num_root++;
    while (k > 0) {
      const tpx__rt_unit *o = &rt->units[rt->root_units[k - 1]];
      if ((o->count ? rt->params[o->first].index : -1) <= first)
        break;
      rt->root_units[k] = rt->root_units[k - 1];
      k--;
    }
    rt->root_units[k] = u;
  }
  return TPX_OK;
}

void tpx__rt_hooks_free(tpx_runtime *rt) {
  free(rt->unit_at);
  free(rt->root_units);
  rt->unit_at = NULL;
  rt->root_units = NULL;
}

tpx_status tpx_runtime_module_unit(const tpx_runtime *rt, const char *module,
                                   size_t *unit, tpx_error *err) {
  if (!rt || !module || !unit)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_runtime_module_unit: NULL argument");
  const tpx_model *model = tpx_sharding_model(rt->sh);
  int64_t m = tpx_model_find_module(model, module);
  if (m < 0)
    return tpx_error_set(err, TPX_NOT_FOUND,
                         "module '%s' is not in the runtime's model (a "
                         "module's full dotted name, as "
                         "tpx_model_find_module takes it)",
                         module);
  *unit = rt->num_units - 1; /* the root's (FSDP off: the pseudo-unit) */
  for (int64_t a = m; rt->fsdp && a >= 0 && (size_t)a < rt->num_modules;
       a = tpx_model_module_parent(model, a))
    if (rt->unit_at[a] >= 0) {
      *unit = (size_t)rt->unit_at[a];
      break;
    }
  return TPX_OK;
}

int tpx_runtime_unit_is_root(const tpx_runtime *rt, size_t unit) {
  return rt && unit < rt->num_units && rt->units[unit].root;
}

/* The unit of `module` for hook `what`, inside the pass it needs. */
static tpx_status hook_unit(tpx_runtime *rt, const char *module,
                            const char *what, size_t *unit, tpx_error *err) {
  if (!rt)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: runtime is NULL",
                         what);
  if (rt->pass == PASS_NONE)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s('%s'): no pass has begun (call "
                         "tpx_runtime_forward_begin or "
                         "tpx_runtime_backward_begin first)",
                         what, module ? module : "(null)");
  tpx_error e = {0};
  tpx_status st = tpx_runtime_module_unit(rt, module, unit, &e);
  if (st != TPX_OK)
    return tpx_error_set(err, st, "%s: %s", what, e.message);
  return TPX_OK;
}

static tpx_status unshard_fwd(tpx_runtime *rt, size_t u, tpx_error *err) {
  tpx__rt_unit *un = &rt->units[u];
  if (un->fwd_done && un->state == TPX__RT_UNSHARDED)
    return TPX_OK;
  un->fwd_done = 1;
  return tpx_runtime_unshard(rt, u, TPX_RUNTIME_FORWARD, err);
}

static tpx_status unshard_bwd(tpx_runtime *rt, size_t u, const char *what,
                              const char *module, tpx_error *err) {
  tpx__rt_unit *un = &rt->units[u];
  if (un->reduced)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s('%s'): unit %zu's "
                         "gradients were already reduced in this backward "
                         "pass (its modules' backward must run before "
                         "tpx_runtime_post_backward of any of them)",
                         what, module, u);
  if (un->bwd_done)
    return TPX_OK;
  un->bwd_done = 1;
  return tpx_runtime_unshard(rt, u, TPX_RUNTIME_BACKWARD, err);
}

/* Reduce the unit's gradients and free its unsharded state, once. */
static tpx_status release_bwd(tpx_runtime *rt, size_t u, tpx_error *err) {
  tpx__rt_unit *un = &rt->units[u];
  if (!un->bwd_done || un->reduced)
    return TPX_OK;
  un->reduced = 1;
  tpx_status st = tpx_runtime_reduce_grads(rt, u, err);
  if (st == TPX_OK)
    st = tpx_runtime_reshard(rt, u, TPX_RUNTIME_BACKWARD, err);
  return st;
}

static tpx_status clocked_runtime_forward_end(tpx_runtime *rt, tpx_error *err) {
  if (!rt)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_runtime_forward_end: runtime is NULL");
  if (rt->pass != PASS_FORWARD)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_runtime_forward_end: the runtime is in %s pass, "
                         "not a forward (call tpx_runtime_forward_begin)",
                         pass_name(rt->pass));
  rt->pass = PASS_NONE;
  for (size_t u = 0; u < rt->num_units; u++) {
    if (rt->units[u].root || !rt->units[u].fwd_done)
      continue;
    tpx_status st = tpx_runtime_reshard(rt, u, TPX_RUNTIME_FORWARD, err);
    if (st != TPX_OK)
      return st;
  }
  return TPX_OK;
}

static tpx_status clocked_runtime_forward_begin(tpx_runtime *rt,
                                                tpx_error *err) {
  if (!rt)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_runtime_forward_begin: runtime is NULL");
  if (rt->pass == PASS_BACKWARD)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_runtime_forward_begin: the backward pass has "
                         "not ended (call tpx_runtime_backward_end)");
  if (rt->pass == PASS_FORWARD) {
    tpx_status st = tpx_runtime_forward_end(rt, err);
    if (st != TPX_OK)
      return st;
  }
  for (size_t u = 0; u < rt->num_units; u++) rt->units[u].fwd_done = 0;
  rt->pass = PASS_FORWARD;
  for (size_t k = 0; k < rt->num_root; k++) {
    tpx_status st = unshard_fwd(rt, rt->root_units[k], err);
    if (st != TPX_OK)
      return st;
  }
  return TPX_OK;
}

static tpx_status clocked_runtime_backward_begin(tpx_runtime *rt,
                                                 tpx_error *err) {
  if (!rt)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_runtime_backward_begin: runtime is NULL");
  if (rt->pass == PASS_BACKWARD)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_runtime_backward_begin: a backward pass is "
                         "already open (call tpx_runtime_backward_end)");
  if (rt->pass == PASS_FORWARD) {
    tpx_status st = tpx_runtime_forward_end(rt, err);
    if (st != TPX_OK)
      return st;
  }
  for (size_t u = 0; u < rt->num_units; u++)
    rt->units[u].bwd_done = rt->units[u].reduced = 0;
  rt->pass = PASS_BACKWARD;
  for (size_t k = rt->num_root; k-- > 0;) {
    tpx_status st = unshard_bwd(rt, rt->root_units[k],
                                "tpx_runtime_backward_begin", "", err);
    if (st != TPX_OK)
      return st;
  }
  return TPX_OK;
}

static tpx_status clocked_runtime_backward_end(tpx_runtime *rt,
                                               tpx_error *err) {
  if (!rt)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_runtime_backward_end: runtime is NULL");
  if (rt->pass != PASS_BACKWARD)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_runtime_backward_end: the runtime is in %s "
                         "pass, not a backward (call "
                         "tpx_runtime_backward_begin)",
                         pass_name(rt->pass));
  rt->pass = PASS_NONE;
  tpx_status st = TPX_OK;
  /* units whose post_backward never came, in backward order, then the
   * root units */
  for (size_t u = rt->num_units; u-- > 0 && st == TPX_OK;)
    if (!rt->units[u].root)
      st = release_bwd(rt, u, err);
  for (size_t k = rt->num_root; k-- > 0 && st == TPX_OK;)
    st = release_bwd(rt, rt->root_units[k], err);
  /* a unit prefetched for a backward that never reached it */
  for (size_t u = 0; u < rt->num_units && st == TPX_OK; u++)
    if (rt->fsdp && !rt->units[u].bwd_done &&
        rt->units[u].state != TPX__RT_SHARDED)
      st = tpx_runtime_reshard(rt, u, TPX_RUNTIME_BACKWARD, err);
  if (st == TPX_OK)
    st = tpx_runtime_wait(rt, err);
  return st;
}

static tpx_status clocked_runtime_pre_forward(tpx_runtime *rt,
                                              const char *module,
                                              tpx_error *err) {
  if (module && !module[0]) /* the model: FSDP2's root module */
    return tpx_runtime_forward_begin(rt, err);
  size_t u;
  tpx_status st = hook_unit(rt, module, "tpx_runtime_pre_forward", &u, err);
  if (st != TPX_OK)
    return st;
  /* a forward run again inside the backward (activation checkpointing's
   * recompute) needs the unit as the backward has it */
  if (rt->pass == PASS_BACKWARD)
    return unshard_bwd(rt, u, "tpx_runtime_pre_forward", module, err);
  return unshard_fwd(rt, u, err);
}

static tpx_status clocked_runtime_post_forward(tpx_runtime *rt,
                                               const char *module,
                                               tpx_error *err) {
  if (module && !module[0]) /* the model: FSDP2's root module */
    return tpx_runtime_forward_end(rt, err);
  size_t u;
  tpx_status st = hook_unit(rt, module, "tpx_runtime_post_forward", &u, err);
  if (st != TPX_OK || rt->pass == PASS_BACKWARD || rt->units[u].root)
    return st; /* the root units stay gathered until the backward ends */
  return tpx_runtime_reshard(rt, u, TPX_RUNTIME_FORWARD, err);
}

static tpx_status clocked_runtime_pre_backward(tpx_runtime *rt,
                                               const char *module,
                                               tpx_error *err) {
  if (module && !module[0]) /* the model: FSDP2's root module */
    return tpx_runtime_backward_begin(rt, err);
  size_t u;
  tpx_status st = hook_unit(rt, module, "tpx_runtime_pre_backward", &u, err);
  if (st == TPX_OK && rt->pass != PASS_BACKWARD)
    st = tpx_error_set(err, TPX_INVALID_ARGUMENT,
                       "tpx_runtime_pre_backward('%s'): the runtime is in a "
                       "forward pass (call tpx_runtime_backward_begin first)",
                       module);
  return st != TPX_OK
             ? st
             : unshard_bwd(rt, u, "tpx_runtime_pre_backward", module, err);
}

static tpx_status clocked_runtime_post_backward(tpx_runtime *rt,
                                                const char *module,
                                                tpx_error *err) {
  if (module && !module[0]) /* the model: FSDP2's root module */
    return tpx_runtime_backward_end(rt, err);
  size_t u;
  tpx_status st = hook_unit(rt, module, "tpx_runtime_post_backward", &u, err);
  if (st != TPX_OK)
    return st;
  if (rt->pass != PASS_BACKWARD || !rt->units[u].bwd_done)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_runtime_post_backward('%s'): unit %zu was not "
                         "unsharded for this backward (call "
                         "tpx_runtime_pre_backward first)",
                         module, u);
  if (rt->units[u].root)
    return TPX_OK; /* with the root, at tpx_runtime_backward_end */
  return release_bwd(rt, u, err);
}

/* ---- the public calls, clocked (tpx_mesh_comm_time) ---- */

tpx_status tpx_runtime_forward_begin(tpx_runtime *rt, tpx_error *err) {
  TPX__CLOCKED(tpx__mesh_comm_clock(rt ? rt->mc : NULL), TPX__CLOCK_RUNTIME,
               clocked_runtime_forward_begin(rt, err));
}

tpx_status tpx_runtime_forward_end(tpx_runtime *rt, tpx_error *err) {
  TPX__CLOCKED(tpx__mesh_comm_clock(rt ? rt->mc : NULL), TPX__CLOCK_RUNTIME,
               clocked_runtime_forward_end(rt, err));
}

tpx_status tpx_runtime_backward_begin(tpx_runtime *rt, tpx_error *err) {
  TPX__CLOCKED(tpx__mesh_comm_clock(rt ? rt->mc : NULL), TPX__CLOCK_RUNTIME,
               clocked_runtime_backward_begin(rt, err));
}

tpx_status tpx_runtime_backward_end(tpx_runtime *rt, tpx_error *err) {
  TPX__CLOCKED(tpx__mesh_comm_clock(rt ? rt->mc : NULL), TPX__CLOCK_RUNTIME,
               clocked_runtime_backward_end(rt, err));
}

tpx_status tpx_runtime_pre_forward(tpx_runtime *rt, const char *module,
                                   tpx_error *err) {
  TPX__CLOCKED(tpx__mesh_comm_clock(rt ? rt->mc : NULL), TPX__CLOCK_RUNTIME,
               clocked_runtime_pre_forward(rt, module, err));
}

tpx_status tpx_runtime_post_forward(tpx_runtime *rt, const char *module,
                                    tpx_error *err) {
  TPX__CLOCKED(tpx__mesh_comm_clock(rt ? rt->mc : NULL), TPX__CLOCK_RUNTIME,
               clocked_runtime_post_forward(rt, module, err));
}

tpx_status tpx_runtime_pre_backward(tpx_runtime *rt, const char *module,
                                    tpx_error *err) {
  TPX__CLOCKED(tpx__mesh_comm_clock(rt ? rt->mc : NULL), TPX__CLOCK_RUNTIME,
               clocked_runtime_pre_backward(rt, module, err));
}

tpx_status tpx_runtime_post_backward(tpx_runtime *rt, const char *module,
                                     tpx_error *err) {
  TPX__CLOCKED(tpx__mesh_comm_clock(rt ? rt->mc : NULL), TPX__CLOCK_RUNTIME,
               clocked_runtime_post_backward(rt, module, err));
}
