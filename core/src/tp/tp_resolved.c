/* tp/tp_resolved.c — one resolved transition (tpx/runtime_tp.h): the
 * lookup of a module's input / output / keyword-input transition done once
 * into a tpx_tp_resolved (present or not, copy or not, layouts, local
 * shapes, whether the output leaves as a DTensor), and the call that runs
 * it. The older layouts / shape / run calls (tp_transition.c, tp_kwarg.c)
 * are wrappers over tpx__tp_resolve_into and tpx__tp_run.
 *
 * Not here: the layout rules (tp_resolve.c), the DTensor-arrival check of
 * the plain calls (tp_arrival.c), the data movement (tp_transition.c). */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "shard/sharding_view.h"
#include "tp/tp_internal.h"
#include "comm/comm_view.h"

static tpx_placement grad_of(tpx_placement p) {
  return p.kind == TPX_PARTIAL ? tpx_placement_replicate() : p;
}

/* No hook runs: the activation passes through in the layout it has. */
static tpx_status absent(const tpx_sharding *sh, const tpx_placement *arrived,
                         int backward, int ndim, tpx_tp_resolved *r,
                         tpx_error *err) {
  tpx_placement p = tpx_placement_replicate();
  if (arrived && tpx__sv_tp_applied(sh)) {
    TPX__TRY(tpx_placement_normalize(*arrived, ndim, &p, err));
    if (backward)
      p = grad_of(p);
  }
  r->present = 0;
  r->is_copy = 1;
  r->keeps_dtensor = 0;
  r->in_layout = r->out_layout = p;
  return TPX_OK;
}

tpx_status tpx__tp_resolve_into(const tpx_sharding *sh, int64_t module,
                                tpx_transition_side side, int index,
                                const char *kwarg, int backward,
                                const tpx_placement *arrived, int ndim,
                                int strict, tpx_tp_resolved *r,
                                tpx_error *err) {
  r->module = module;
  r->side = kwarg ? TPX_TRANSITION_INPUT : side;
  r->index = kwarg ? 0 : index;
  r->kwarg = kwarg;
  r->backward = backward;
  r->arrived_set = arrived != NULL;
  r->arrived = arrived ? *arrived : tpx_placement_replicate();
  r->ndim = ndim;
  tpx_error e = {0};
  tpx_status st;
  if (kwarg)
    st = tpx__tp_kwarg_resolve(sh, module, kwarg, backward, arrived, ndim,
                               &r->in_layout, &r->out_layout, &r->is_copy, &e);
  else
    st = tpx__tp_resolve(sh, module, side, index, backward, arrived, ndim,
                         &r->in_layout, &r->out_layout, &r->is_copy, &e);
  if (st == TPX_NOT_FOUND && !strict)
    return absent(sh, arrived, backward, ndim, r, err);
  if (st)
    return tpx_error_set(err, st, "%s", e.message);
  r->present = tpx__sv_tp_applied(sh) ? 1 : 0;
  r->keeps_dtensor = !kwarg && side == TPX_TRANSITION_OUTPUT && r->present &&
                     tpx_tp_output_keeps_dtensor(sh, module, index);
  return TPX_OK;
}

/* The size of the first tpx_tp_resolved (up to out_local). */
#define RESOLVED_V1 offsetof(tpx_tp_resolved, flow)

static tpx_status resolve(const tpx_sharding *sh, int64_t module,
                          tpx_transition_side side, int index,
                          const char *kwarg, int backward,
                          const tpx_placement *arrived, const tpx_tp_flow *flow,
                          int64_t rank, const int64_t *shape, int ndim,
                          size_t need, const char *w, tpx_tp_resolved *out,
                          tpx_error *err);
static tpx_tp_flow flow_after(const tpx_tp_resolved *r, const tpx_tp_flow *in);

tpx_status tpx_tp_transition_resolve(const tpx_sharding *sh, int64_t module,
                                     tpx_transition_side side, int index,
                                     const char *kwarg, int backward,
                                     const tpx_placement *arrived, int64_t rank,
                                     const int64_t *shape, int ndim,
                                     tpx_tp_resolved *out, tpx_error *err) {
  return resolve(sh, module, side, index, kwarg, backward, arrived, NULL, rank,
                 shape, ndim, RESOLVED_V1, "tpx_tp_transition_resolve", out,
                 err);
}

tpx_status tpx_tp_transition_resolve_flow(
    const tpx_sharding *sh, int64_t module, tpx_transition_side side, int index,
    int backward, const tpx_tp_flow *flow, int64_t rank, const int64_t *shape,
    int ndim, tpx_tp_resolved *out, tpx_error *err) {
  tpx_tp_flow none;
  memset(&none, 0, sizeof none);
  const tpx_tp_flow *f = flow ? flow : &none;
  const tpx_placement *arrived = NULL;
  if (side == TPX_TRANSITION_INPUT && !backward && f->dtensor)
    arrived = &f->layout;
  if (side == TPX_TRANSITION_INPUT && backward && f->input_dtensor)
    arrived = &f->input_layout;
  return resolve(sh, module, side, index, NULL, backward, arrived, f, rank,
                 shape, ndim, sizeof(tpx_tp_resolved),
                 "tpx_tp_transition_resolve_flow", out, err);
}

/* What the result of r carries when its source carried `in`
 * (tpx_tp_transition_resolve_flow's rules). */
static tpx_tp_flow flow_after(const tpx_tp_resolved *r, const tpx_tp_flow *in) {
  tpx_tp_flow f = *in;
  if (!r->present || r->backward)
    return f;
  if (r->side == TPX_TRANSITION_INPUT) {
    f.input_dtensor = in->dtensor;
    f.input_layout = in->layout;
    f.dtensor = 0;
  } else {
    f.dtensor = r->keeps_dtensor;
  }
  f.layout = f.dtensor ? r->out_layout : tpx_placement_replicate();
  if (!f.input_dtensor)
    f.input_layout = tpx_placement_replicate();
  return f;
}

static tpx_status resolve(const tpx_sharding *sh, int64_t module,
                          tpx_transition_side side, int index,
                          const char *kwarg, int backward,
                          const tpx_placement *arrived, const tpx_tp_flow *flow,
                          int64_t rank, const int64_t *shape, int ndim,
                          size_t need, const char *w, tpx_tp_resolved *out,
                          tpx_error *err) {
  if (!out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: out is NULL", w);
  if (out->struct_size < need)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: out->struct_size %zu is smaller than "
                         "tpx_tp_resolved (%zu); initialise it with "
                         "TPX_TP_RESOLVED_INIT",
                         w, out->struct_size, need);
  tpx_tp_resolved r = TPX_TP_RESOLVED_INIT;
  TPX__TRY(tpx__tp_check_shape_args(w, sh, r.out_local, shape, ndim, err));
  if (kwarg && side != TPX_TRANSITION_INPUT)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: keyword input '%s' needs side INPUT", w, kwarg);
  TPX__TRY(tpx__tp_module_in_range(w, sh, module, err));
  if (rank < 0 || rank >= tpx__sv_world(sh))
    return tpx_error_set(err, TPX_OUT_OF_RANGE, "%s: rank %lld outside 0..%lld",
                         w, (long long)rank, (long long)tpx__sv_world(sh) - 1);
  TPX__TRY(tpx__tp_resolve_into(sh, module, side, index, kwarg, backward,
                                arrived, ndim, 0, &r, err));
  r.rank = rank;
  for (int i = 0; i < ndim; i++) r.shape[i] = shape[i];
  TPX__TRY(
      tpx__tp_local_shape(sh, rank, r.in_layout, shape, ndim, r.in_local, err));
  TPX__TRY(tpx__tp_local_shape(sh, rank, r.out_layout, shape, ndim, r.out_local,
                               err));
  /* the plain call: a flow of what `arrived` states */
  tpx_tp_flow plain;
  memset(&plain, 0, sizeof plain);
  if (!flow && arrived) {
    *(backward ? &plain.input_dtensor : &plain.dtensor) = 1;
    *(backward ? &plain.input_layout : &plain.layout) = *arrived;
  }
  r.flow = flow_after(&r, flow ? flow : &plain);
  /* an older caller's struct ends sooner: its own size, its own fields */
  size_t n = out->struct_size < sizeof r ? out->struct_size : sizeof r;
  r.struct_size = out->struct_size;
  memcpy(out, &r, n);
  return TPX_OK;
}

tpx_status tpx__tp_run(const tpx_sharding *sh, tpx_mesh_comm *mc,
                       const tpx_tp_resolved *r, const int64_t *shape,
                       const tpx_tensor *in, tpx_tensor *out, tpx_error *err) {
  char ctx[256];
  const char *dir = r->backward ? "backward" : "forward";
  const char *name = tpx__tp_module_name(sh, r->module);
  if (r->kwarg)
    snprintf(ctx, sizeof ctx,
             "tp transition of module '%s' keyword input '%s' (%s)", name,
             r->kwarg, dir);
  else
    snprintf(ctx, sizeof ctx, "tp transition of module '%s' %s %d (%s)", name,
             tpx__tp_side_name(r->side), r->index, dir);
  return tpx__tp_move(sh, mc, shape, r->in_layout, r->out_layout, r->is_copy,
                      in, out, ctx, err);
}

static tpx_status clocked_tp_transition_run_resolved(
    const tpx_sharding *sh, tpx_mesh_comm *mc, const tpx_tp_resolved *r,
    const tpx_tensor *in, tpx_tensor *out, tpx_error *err) {
  const char *w = "tpx_tp_transition_run_resolved";
  TPX__TRY(tpx__tp_check_comm(sh, mc, w, err));
  if (!r || !in || !out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: %s is NULL", w,
                         !r    ? "resolved"
                         : !in ? "input"
                               : "output");
  if (r->struct_size < RESOLVED_V1)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: r->struct_size %zu is smaller than "
                         "tpx_tp_resolved (%zu)",
                         w, r->struct_size, (size_t)RESOLVED_V1);
  TPX__TRY(tpx__tp_module_in_range(w, sh, r->module, err));
  TPX__TRY(tpx_tensor_check(in, "input", err));
  int64_t me = tpx__tp_my_rank(mc);
  if (r->rank != me || in->ndim != r->ndim)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: module '%s' was resolved for rank %lld, ndim %d; "
                         "this is rank %lld with an input of ndim %d",
                         w, tpx__tp_module_name(sh, r->module),
                         (long long)r->rank, r->ndim, (long long)me, in->ndim);
  return tpx__tp_run(sh, mc, r, r->shape, in, out, err);
}

/* ---- the public calls, clocked (tpx_mesh_comm_time) ---- */

tpx_status tpx_tp_transition_run_resolved(const tpx_sharding *sh,
                                          tpx_mesh_comm *mc,
                                          const tpx_tp_resolved *r,
                                          const tpx_tensor *in, tpx_tensor *out,
                                          tpx_error *err) {
  TPX__CLOCKED(tpx__mesh_comm_clock(mc), TPX__CLOCK_TP,
               clocked_tp_transition_run_resolved(sh, mc, r, in, out, err));
}
