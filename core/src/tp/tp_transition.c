/* tp_transition.c — executing a styled module's input / output transitions
 * (tpx/runtime_tp.h) on caller activation buffers, forward and backward.
 *
 * The description is tpx_sharding_module_transitions (shard/transitions.c):
 * forward runs its from -> to; backward maps its backward collective name
 * to the pair of gradient layouts and runs that. The data movement is
 * tpx_redistribute with Replicate on every mesh dim but tp.
 *
 * The positional _dt calls and their plain forms are wrappers over the
 * resolved pair (tp_calls.c).
 *
 * Not here: resolving the layouts (tp_resolve.c), the DTensor-arrival
 * check (tp_arrival.c), the shared helpers (tp_common.c), what the styles
 * are (plan, shard areas), the collectives (comm area), the embedding and
 * loss math (tp_embedding.c, tp_loss.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_view.h"
#include "tp/tp_internal.h"
#include "shard/sharding_view.h"
#include "tpx/redistribute.h"

/* ---- activations -------------------------------------------------------- */

static tpx_status local_shape(const tpx_sharding *sh, int64_t rank,
                              tpx_placement layout, const int64_t *shape,
                              int ndim, int64_t *local, tpx_error *err) {
  tpx_placement pl[TPX_MESH_MAX_DIMS];
  tpx_placement n;
  TPX__TRY(tpx_placement_normalize(layout, ndim, &n, err));
  tpx__tp_activation_placements(sh, n, pl);
  tpx_slice s;
  TPX__TRY(tpx_layout_local_slice(shape, ndim, tpx_sharding_mesh(sh), pl, rank,
                                  &s, err));
  for (int i = 0; i < ndim; i++) local[i] = s.length[i];
  return TPX_OK;
}

tpx_status tpx_tp_local_shape(const tpx_sharding *sh, int64_t rank,
                              tpx_placement layout, const int64_t *shape,
                              int ndim, int64_t *local, tpx_error *err) {
  if (!sh || !local || (!shape && ndim > 0))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_tp_local_shape: NULL argument");
  if (rank < 0 || rank >= tpx__sv_world(sh))
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "tpx_tp_local_shape: rank %lld outside 0..%lld",
                         (long long)rank, (long long)tpx__sv_world(sh) - 1);
  return local_shape(sh, rank, layout, shape, ndim, local, err);
}

/* Checked redistribution of this rank's piece; `ctx` names the caller. */
static tpx_status move(const tpx_sharding *sh, tpx_mesh_comm *mc,
                       const int64_t *shape, tpx_placement from,
                       tpx_placement to, int copy, const tpx_tensor *in,
                       tpx_tensor *out, const char *ctx, tpx_error *err) {
  TPX__TRY(tpx_tensor_check(in, "input", err));
  TPX__TRY(tpx_tensor_check(out, "output", err));
  if (in->dtype != out->dtype)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: input dtype %s differs from output dtype %s", ctx,
                         tpx_dtype_short_name(in->dtype),
                         tpx_dtype_short_name(out->dtype));
  if (!shape && in->ndim > 0)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: logical shape is NULL",
                         ctx);
  int ndim = in->ndim;
  int64_t me = tpx__tp_my_rank(mc);
  int64_t lin[TPX_MAX_TENSOR_DIMS], lout[TPX_MAX_TENSOR_DIMS];
  TPX__TRY(local_shape(sh, me, from, shape, ndim, lin, err));
  TPX__TRY(local_shape(sh, me, to, shape, ndim, lout, err));
  TPX__TRY(tpx__tp_check_shape(in, lin, ndim, "input", ctx, err));
  TPX__TRY(tpx__tp_check_shape(out, lout, ndim, "output", ctx, err));
  size_t bytes = (size_t)tpx_tensor_nbytes(out);
  const tpx__memspace *ms = tpx__comm_ms(tpx_mesh_comm_world(mc));
  if (copy)
    return tpx__ms_copy(ms, out->data, in->data, bytes, TPX__D2D, err);
  tpx_placement pf[TPX_MESH_MAX_DIMS], pt[TPX_MESH_MAX_DIMS];
  tpx__tp_activation_placements(sh, from, pf);
  tpx__tp_activation_placements(sh, to, pt);
  const char *ib = in->data, *ob = out->data;
  size_t ibytes = (size_t)tpx_tensor_nbytes(in);
  int overlap = ibytes && bytes && ib < ob + bytes && ob < ib + ibytes;
  if (!overlap)
    return tpx_redistribute(mc, shape, ndim, in->dtype, pf, in->data, pt,
                            out->data, err);
  void *tmp = NULL;
  TPX__TRY(tpx__ms_alloc(ms, bytes, 0, &tmp, err));
  tpx_status st =
      tpx_redistribute(mc, shape, ndim, in->dtype, pf, in->data, pt, tmp, err);
  if (st == TPX_OK)
    st = tpx__ms_copy(ms, out->data, tmp, bytes, TPX__D2D, err);
  tpx__ms_free(ms, tmp);
  return st;
}

static tpx_status clocked_tp_redistribute(const tpx_sharding *sh,
                                          tpx_mesh_comm *mc,
                                          const int64_t *shape,
                                          tpx_placement from, tpx_placement to,
                                          const tpx_tensor *in, tpx_tensor *out,
                                          tpx_error *err) {
  const char *w = "tpx_tp_redistribute";
  TPX__TRY(tpx__tp_check_comm(sh, mc, w, err));
  if (!in || !out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: %s is NULL", w,
                         !in ? "input" : "output");
  int copy = tpx__tp_size(sh) == 1;
  if (copy)
    from = to = tpx_placement_replicate();
  return move(sh, mc, shape, from, to, copy, in, out, w, err);
}

int tpx_tp_output_keeps_dtensor(const tpx_sharding *sh, int64_t module,
                                int index) {
  const tpx_transition *tr;
  if (tpx_tp_transition_get(sh, module, TPX_TRANSITION_OUTPUT, index, &tr,
                            NULL) != TPX_OK ||
      !tr)
    return 0;
  int64_t e = tpx__sv_module_entry(sh, module);
  return e >= 0 && !tpx__sv_entry_style(sh, e)->use_local_output;
}

tpx_status tpx__tp_local_shape(const tpx_sharding *sh, int64_t rank,
                               tpx_placement layout, const int64_t *shape,
                               int ndim, int64_t *local, tpx_error *err) {
  return local_shape(sh, rank, layout, shape, ndim, local, err);
}

tpx_status tpx__tp_move(const tpx_sharding *sh, tpx_mesh_comm *mc,
                        const int64_t *shape, tpx_placement from,
                        tpx_placement to, int copy, const tpx_tensor *in,
                        tpx_tensor *out, const char *ctx, tpx_error *err) {
  return move(sh, mc, shape, from, to, copy, in, out, ctx, err);
}

/* ---- the public calls, clocked (tpx_mesh_comm_time) ---- */

tpx_status tpx_tp_redistribute(const tpx_sharding *sh, tpx_mesh_comm *mc,
                               const int64_t *shape, tpx_placement from,
                               tpx_placement to, const tpx_tensor *in,
                               tpx_tensor *out, tpx_error *err) {
  TPX__CLOCKED(tpx__mesh_comm_clock(mc), TPX__CLOCK_TP,
               clocked_tp_redistribute(sh, mc, shape, from, to, in, out, err));
}
