/* tp_calls.c — the nine transition calls of tpx/runtime_tp.h that came
 * before the resolved pair ({layouts, shape, run} x {plain, _dt, kwarg_}),
 * each a thin wrapper: resolve once (tp_resolved.c, in the strict mode that
 * keeps their TPX_NOT_FOUND for a missing transition), then answer or run.
 * They sit above tp_resolved.c, which sits above the primitives it uses
 * (tp_transition.c's shapes and moves, tp_kwarg.c's kwarg lookup).
 * Not here: resolving (tp_resolve.c, tp_resolved.c), moving data
 * (tp_transition.c). */
#include <stdio.h>
#include <string.h>

#include "tp/tp_internal.h"
#include "shard/sharding_view.h"
#include "comm/comm_view.h"

/* ---- positional inputs and outputs -------------------------------------- */

tpx_status tpx_tp_transition_layouts(const tpx_sharding *sh, int64_t module,
                                     tpx_transition_side side, int index,
                                     int backward, tpx_placement *in_layout,
                                     tpx_placement *out_layout, int *is_copy,
                                     tpx_error *err) {
  TPX__TRY(tpx__tp_check_plain(sh, module, side, index, 0,
                               "tpx_tp_transition_layouts", err));
  return tpx_tp_transition_layouts_dt(sh, module, side, index, backward, NULL,
                                      0, in_layout, out_layout, is_copy, err);
}

tpx_status tpx_tp_transition_layouts_dt(const tpx_sharding *sh, int64_t module,
                                        tpx_transition_side side, int index,
                                        int backward,
                                        const tpx_placement *arrived, int ndim,
                                        tpx_placement *in_layout,
                                        tpx_placement *out_layout, int *is_copy,
                                        tpx_error *err) {
  if (!in_layout || !out_layout)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_tp_transition_layouts: NULL argument");
  tpx_tp_resolved r = TPX_TP_RESOLVED_INIT;
  TPX__TRY(tpx__tp_resolve_into(sh, module, side, index, NULL, backward,
                                arrived, ndim, 1, &r, err));
  *in_layout = r.in_layout;
  *out_layout = r.out_layout;
  if (is_copy)
    *is_copy = r.is_copy;
  return TPX_OK;
}

tpx_status tpx_tp_transition_shape(const tpx_sharding *sh, int64_t module,
                                   tpx_transition_side side, int index,
                                   int backward, int64_t rank,
                                   const int64_t *shape, int ndim,
                                   int64_t *in_local, int64_t *out_local,
                                   tpx_error *err) {
  TPX__TRY(tpx__tp_check_plain(sh, module, side, index, ndim,
                               "tpx_tp_transition_shape", err));
  return tpx_tp_transition_shape_dt(sh, module, side, index, backward, NULL,
                                    rank, shape, ndim, in_local, out_local,
                                    err);
}

tpx_status tpx_tp_transition_shape_dt(const tpx_sharding *sh, int64_t module,
                                      tpx_transition_side side, int index,
                                      int backward,
                                      const tpx_placement *arrived,
                                      int64_t rank, const int64_t *shape,
                                      int ndim, int64_t *in_local,
                                      int64_t *out_local, tpx_error *err) {
  TPX__TRY(tpx__tp_check_shape_args("tpx_tp_transition_shape", sh, out_local,
                                    shape, ndim, err));
  if (rank < 0 || rank >= tpx__sv_world(sh))
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "tpx_tp_transition_shape: rank %lld outside 0..%lld",
                         (long long)rank, (long long)tpx__sv_world(sh) - 1);
  tpx_tp_resolved r = TPX_TP_RESOLVED_INIT;
  TPX__TRY(tpx__tp_resolve_into(sh, module, side, index, NULL, backward,
                                arrived, ndim, 1, &r, err));
  if (in_local)
    TPX__TRY(
        tpx__tp_local_shape(sh, rank, r.in_layout, shape, ndim, in_local, err));
  return tpx__tp_local_shape(sh, rank, r.out_layout, shape, ndim, out_local,
                             err);
}

static tpx_status clocked_tp_transition_run(const tpx_sharding *sh,
                                            tpx_mesh_comm *mc, int64_t module,
                                            tpx_transition_side side, int index,
                                            int backward, const int64_t *shape,
                                            const tpx_tensor *in,
                                            tpx_tensor *out, tpx_error *err) {
  TPX__TRY(tpx__tp_check_plain(sh, module, side, index, in ? in->ndim : 0,
                               "tpx_tp_transition_run", err));
  return tpx_tp_transition_run_dt(sh, mc, module, side, index, backward, NULL,
                                  shape, in, out, err);
}

static tpx_status clocked_tp_transition_run_dt(
    const tpx_sharding *sh, tpx_mesh_comm *mc, int64_t module,
    tpx_transition_side side, int index, int backward,
    const tpx_placement *arrived, const int64_t *shape, const tpx_tensor *in,
    tpx_tensor *out, tpx_error *err) {
  TPX__TRY(tpx__tp_check_comm(sh, mc, "tpx_tp_transition_run", err));
  if (!in || !out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_tp_transition_run: %s is NULL",
                         !in ? "input" : "output");
  TPX__TRY(tpx_tensor_check(in, "input", err));
  tpx_tp_resolved r = TPX_TP_RESOLVED_INIT;
  TPX__TRY(tpx__tp_resolve_into(sh, module, side, index, NULL, backward,
                                arrived, in->ndim, 1, &r, err));
  return tpx__tp_run(sh, mc, &r, shape, in, out, err);
}

/* ---- keyword inputs ------------------------------------------------------ */

/* The kwarg's transition, one direction, as the old calls report it (a
 * missing style or kwarg is TPX_NOT_FOUND). */
static tpx_status resolve(const tpx_sharding *sh, int64_t module,
                          const char *kwarg, int backward,
                          const tpx_placement *arrived, int ndim,
                          tpx_tp_resolved *r, tpx_error *err) {
  if (!sh || !kwarg) /* the message names the kwarg call */
    return tpx__tp_kwarg_resolve(sh, module, kwarg, backward, arrived, ndim,
                                 &r->in_layout, &r->out_layout, &r->is_copy,
                                 err);
  return tpx__tp_resolve_into(sh, module, TPX_TRANSITION_INPUT, 0, kwarg,
                              backward, arrived, ndim, 1, r, err);
}

tpx_status tpx_tp_kwarg_transition_layouts(
    const tpx_sharding *sh, int64_t module, const char *kwarg, int backward,
    const tpx_placement *arrived, int ndim, tpx_placement *in_layout,
    tpx_placement *out_layout, int *is_copy, tpx_error *err) {
  if (!in_layout || !out_layout)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_tp_kwarg_transition_layouts: NULL argument");
  tpx_tp_resolved r = TPX_TP_RESOLVED_INIT;
  TPX__TRY(resolve(sh, module, kwarg, backward, arrived, ndim, &r, err));
  *in_layout = r.in_layout;
  *out_layout = r.out_layout;
  if (is_copy)
    *is_copy = r.is_copy;
  return TPX_OK;
}

tpx_status tpx_tp_kwarg_transition_shape(const tpx_sharding *sh, int64_t module,
                                         const char *kwarg, int backward,
                                         const tpx_placement *arrived,
                                         int64_t rank, const int64_t *shape,
                                         int ndim, int64_t *in_local,
                                         int64_t *out_local, tpx_error *err) {
  TPX__TRY(tpx__tp_check_shape_args("tpx_tp_kwarg_transition_shape", sh,
                                    out_local, shape, ndim, err));
  tpx_tp_resolved r = TPX_TP_RESOLVED_INIT;
  TPX__TRY(resolve(sh, module, kwarg, backward, arrived, ndim, &r, err));
  if (in_local)
    TPX__TRY(
        tpx_tp_local_shape(sh, rank, r.in_layout, shape, ndim, in_local, err));
  return tpx_tp_local_shape(sh, rank, r.out_layout, shape, ndim, out_local,
                            err);
}

static tpx_status
clocked_tp_kwarg_transition_run(const tpx_sharding *sh, tpx_mesh_comm *mc,
                                int64_t module, const char *kwarg, int backward,
                                const tpx_placement *arrived,
                                const int64_t *shape, const tpx_tensor *in,
                                tpx_tensor *out, tpx_error *err) {
  TPX__TRY(tpx__tp_check_comm(sh, mc, "tpx_tp_kwarg_transition_run", err));
  if (!in || !out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_tp_kwarg_transition_run: %s is NULL",
                         !in ? "input" : "output");
  TPX__TRY(tpx_tensor_check(in, "input", err));
  tpx_tp_resolved r = TPX_TP_RESOLVED_INIT;
  TPX__TRY(resolve(sh, module, kwarg, backward, arrived, in->ndim, &r, err));
  return tpx__tp_run(sh, mc, &r, shape, in, out, err);
}

/* ---- the public calls, clocked (tpx_mesh_comm_time) ---- */

tpx_status tpx_tp_transition_run(const tpx_sharding *sh, tpx_mesh_comm *mc,
                                 int64_t module, tpx_transition_side side,
                                 int index, int backward, const int64_t *shape,
                                 const tpx_tensor *in, tpx_tensor *out,
                                 tpx_error *err) {
  TPX__CLOCKED(tpx__mesh_comm_clock(mc), TPX__CLOCK_TP,
               clocked_tp_transition_run(sh, mc, module, side, index, backward,
                                         shape, in, out, err));
}

tpx_status tpx_tp_transition_run_dt(const tpx_sharding *sh, tpx_mesh_comm *mc,
                                    int64_t module, tpx_transition_side side,
                                    int index, int backward,
                                    const tpx_placement *arrived,
                                    const int64_t *shape, const tpx_tensor *in,
                                    tpx_tensor *out, tpx_error *err) {
  TPX__CLOCKED(tpx__mesh_comm_clock(mc), TPX__CLOCK_TP,
               clocked_tp_transition_run_dt(sh, mc, module, side, index,
                                            backward, arrived, shape, in, out,
                                            err));
}

tpx_status tpx_tp_kwarg_transition_run(const tpx_sharding *sh,
                                       tpx_mesh_comm *mc, int64_t module,
                                       const char *kwarg, int backward,
                                       const tpx_placement *arrived,
                                       const int64_t *shape,
                                       const tpx_tensor *in, tpx_tensor *out,
                                       tpx_error *err) {
  TPX__CLOCKED(tpx__mesh_comm_clock(mc), TPX__CLOCK_TP,
               clocked_tp_kwarg_transition_run(sh, mc, module, kwarg, backward,
                                               arrived, shape, in, out, err));
}
