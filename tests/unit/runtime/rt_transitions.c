/* rt_transitions.c — case_transitions (rt_cases.h): every transition of
 * every styled module against the logical tensor sliced by the layout, and
 * the backward layouts against the dual of the forward. */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_util.h"

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
  tpx_dtype dt = rtu_dt_of(a);
  int64_t me = tpx_comm_rank(tpx_mesh_comm_world(mc));
  /* dp coordinates give every data-parallel rank its own data. */
  int64_t salt = (me - rtu_tp_coord(sh, mc)) * 3 + (int64_t)mod + bwd * 5;
  int64_t shape[3] = {2, a->T, a->D};
  int ndim = 3;
  const char *name = tpx_model_module_fqn(tpx_sharding_model(sh), mod);
  char where[256], ai[32] = "plain";
  if (arrived)
    pl_text(*arrived, ai, sizeof ai);
  snprintf(where, sizeof where, "module '%s' %s %d %s (arrived %s)", name,
           tr->side == TPX_TRANSITION_INPUT ? "input" : "output", tr->index,
           bwd ? "backward" : "forward", ai);
  tpx_error e = {0};
  tpx_placement in_pl, out_pl;
  int copy;
  if (tpx_tp_transition_layouts_dt(sh, mod, tr->side, tr->index, bwd, arrived,
                                   ndim, &in_pl, &out_pl, &copy,
                                   &e) != TPX_OK) {
    rtu_lib_failed(err, where, &e);
    return; /* every rank fails the same way: no collective skipped */
  }
  /* The dual: what each direction reads and writes. */
  tpx_placement from, to, arr;
  tpx_placement_normalize(in_pl, ndim, &in_pl, NULL);
  tpx_placement_normalize(out_pl, ndim, &out_pl, NULL);
  tpx_placement_normalize(tr->from, ndim, &from, NULL);
  tpx_placement_normalize(tr->to, ndim, &to, NULL);
  if (arrived)
    tpx_placement_normalize(*arrived, ndim, &arr, NULL);
  char x1[32], x2[32];
  pl_text(in_pl, x1, sizeof x1);
  pl_text(out_pl, x2, sizeof x2);
  if (tpx_sharding_tp_size(sh) > 1 && !tr->from_is_none) {
    if (!bwd && !arrived &&
        !(tpx_placement_equal(in_pl, from) &&
          (tpx_placement_equal(out_pl, to) || copy)))
      rtu_failed(err, "%s: forward reads %s writes %s", where, x1, x2);
    if (!bwd && arrived &&
        !(tpx_placement_equal(in_pl, arr) && tpx_placement_equal(out_pl, to)))
      rtu_failed(err, "%s: forward reads %s writes %s", where, x1, x2);
    if (bwd && !arrived) {
      /* The input's gradient in the layout it was annotated with. */
      if (!tpx_placement_equal(out_pl, grad_of(from)))
        rtu_failed(err, "%s: backward writes %s, not grad of from", where, x2);
      /* The incoming gradient: grad of `to`, or a Partial one where a
       * replicated activation feeds a sharded matmul. */
      if (!tpx_placement_equal(in_pl, grad_of(to)) &&
          !(in_pl.kind == TPX_PARTIAL && to.kind == TPX_REPLICATE))
        rtu_failed(err, "%s: backward reads %s", where, x1);
    }
    if (bwd && arrived) {
      int same = tpx_placement_equal(arr, to);
      if (same ? !tpx_placement_equal(in_pl, out_pl)
               : !tpx_placement_equal(out_pl, arr))
        rtu_failed(err, "%s: backward reads %s writes %s", where, x1, x2);
    }
  }
  int64_t n = rtu_numel(shape, ndim);
  double *full = malloc((size_t)n * sizeof *full);
  double *pin = malloc((size_t)n * sizeof *pin);
  double *pout = malloc((size_t)n * sizeof *pout);
  for (int64_t i = 0; i < n; i++) full[i] = rtu_ival(i, salt);
  int64_t lin[3], lout[3], sin_[3], sout[3];
  tpx_status st = rtu_piece_of(sh, mc, in_pl, full, shape, ndim, pin, lin, &e);
  if (st == TPX_OK)
    st = rtu_piece_of(sh, mc, out_pl, full, shape, ndim, pout, lout, &e);
  if (st == TPX_OK)
    st = tpx_tp_transition_shape_dt(sh, mod, tr->side, tr->index, bwd, arrived,
                                    me, shape, ndim, sin_, sout, &e);
  if (st != TPX_OK) {
    rtu_lib_failed(err, where, &e);
    free(full), free(pin), free(pout);
    return;
  }
  for (int d = 0; d < ndim; d++)
    if (sin_[d] != lin[d] || sout[d] != lout[d])
      rtu_failed(err, "%s: shape dim %d: in %lld/%lld out %lld/%lld", where, d,
                 (long long)sin_[d], (long long)lin[d], (long long)sout[d],
                 (long long)lout[d]);
  tpx_tensor tin = rtu_talloc(dt, ndim, lin), tout = rtu_talloc(dt, ndim, lout);
  for (int64_t i = 0; i < rtu_numel(lin, ndim); i++)
    rtu_put(tin.data, dt, i, pin[i]);
  rtu_sim sm;
  RTU_SIM(&sm, mc, &tin, &tout);
  st = tpx_tp_transition_run_dt(sh, mc, mod, tr->side, tr->index, bwd, arrived,
                                shape, &tin, &tout, &e);
  rtu_sim_end(&sm, me);
  if (st != TPX_OK)
    rtu_lib_failed(err, where, &e);
  else if (out_pl.kind == TPX_PARTIAL && !copy) {
    /* Replicate -> Partial keeps the value on tp index 0 (redistribute.h). */
    int64_t r = rtu_tp_coord(sh, mc);
    for (int64_t i = 0; i < rtu_numel(lout, ndim); i++) {
      double want = r == 0 ? full[i] : 0.0;
      if (rtu_get(tout.data, dt, i) != want) {
        rtu_failed(err, "%s: element %lld = %g, want %g", where, (long long)i,
                   rtu_get(tout.data, dt, i), want);
        break;
      }
    }
  } else {
    for (int64_t i = 0; i < rtu_numel(lout, ndim); i++)
      if (rtu_get(tout.data, dt, i) != pout[i]) {
        rtu_failed(err, "%s: %s -> %s element %lld = %g, want %g", where, x1,
                   x2, (long long)i, rtu_get(tout.data, dt, i), pout[i]);
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
  if (st != TPX_OK)
    return st;
  const tpx_model *m = tpx_sharding_model(sh);
  int runs = 0;
  for (size_t mod = 0; mod < tpx_model_num_modules(m); mod++) {
    const tpx_transition *trs;
    size_t cnt;
    tpx_error e = {0};
    if (tpx_sharding_module_transitions(sh, (int64_t)mod, &trs, &cnt, &e) !=
        TPX_OK) {
      rtu_lib_failed(err, "module transitions", &e);
      continue;
    }
    for (size_t i = 0; i < cnt; i++) {
      const tpx_transition *tr = &trs[i];
      for (int bwd = 0; bwd < 2; bwd++) {
        one_transition(a, mc, (int64_t)mod, tr, bwd, NULL, err);
        runs++;
        if (tr->side != TPX_TRANSITION_INPUT || tr->from_is_none)
          continue;
        tpx_placement arr[3] = {tpx_placement_replicate(),
                                tpx_placement_shard(1), tr->to};
        for (int k = 0; k < 3; k++) {
          one_transition(a, mc, (int64_t)mod, tr, bwd, &arr[k], err);
          runs++;
        }
      }
    }
  }
  if (tpx_comm_rank(world) == 0)
    a->cases_run = runs;
  tpx_mesh_comm_destroy(mc);
  return err->status;
}
