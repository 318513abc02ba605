/* tp_arrival.c — how an input arrives at a styled module's hook
 * (tpx/runtime_tp.h): as a plain tensor, or as a DTensor some other hook
 * handed on. The plain transition calls assume a plain tensor; this file
 * decides when that assumption cannot be trusted, so they refuse instead of
 * computing a silently wrong gradient (e.g. q_proj after a
 * SequenceParallelAllGatherActivation norm: the plain backward all-reduces
 * a Partial gradient the norm's backward reduce-scatters again, tp times
 * too large).
 *
 * Not here: resolving a transition's layouts (tp_resolve.c), executing it
 * (tp_transition.c), what the styles are (shard/transitions.c). */
#include <stdio.h>
#include <string.h>

#include "tp/tp_internal.h"
#include "shard/sharding_view.h"

/* A layout some hook of the sharding hands on as a DTensor, and who. */
typedef struct dt_source {
  tpx_placement layout;
  int64_t module;
  tpx_transition_side side;
  int index;
} dt_source;

#define MAX_SOURCES 16

/* The distinct layouts in which styled modules hand DTensors on: outputs
 * of styles without use_local_output, and prepare_module_input inputs
 * without it (the module's body then passes them to its children). */
static int dt_sources(const tpx_sharding *sh, dt_source *out) {
  int n = 0;
  if (!tpx__sv_tp_applied(sh))
    return 0;
  for (size_t m = 0; m < tpx__sv_num_modules(sh) && n < MAX_SOURCES; m++) {
    int64_t e = tpx__sv_module_entry(sh, m);
    if (e < 0)
      continue;
    const tpx_style *s = tpx__sv_entry_style(sh, e);
    if (s->use_local_output)
      continue;
    const tpx_transition *tr;
    size_t nt;
    if (tpx_sharding_module_transitions(sh, (int64_t)m, &tr, &nt, NULL) !=
        TPX_OK)
      continue;
    for (size_t i = 0; i < nt && n < MAX_SOURCES; i++) {
      if (tr[i].from_is_none)
        continue;
      if (tr[i].side == TPX_TRANSITION_INPUT &&
          s->kind != TPX_STYLE_PREPARE_MODULE_INPUT)
        continue;
      int seen = 0;
      for (int k = 0; k < n && !seen; k++)
        seen = tpx_placement_equal(out[k].layout, tr[i].to);
      if (seen)
        continue;
      out[n].layout = tr[i].to;
      out[n].module = (int64_t)m;
      out[n].side = tr[i].side;
      out[n].index = tr[i].index;
      n++;
    }
  }
  return n;
}

static void pl_text(tpx_placement p, char *buf, size_t n) {
  if (tpx_placement_format(p, buf, n) < 0)
    snprintf(buf, n, "?");
}

/* 1 when the two resolutions differ (layouts normalised to ndim). */
static int differ(tpx_placement i1, tpx_placement o1, int c1, tpx_placement i2,
                  tpx_placement o2, int c2, int ndim) {
  tpx_placement a, b, x, y;
  if (tpx_placement_normalize(i1, ndim, &a, NULL) != TPX_OK ||
      tpx_placement_normalize(o1, ndim, &b, NULL) != TPX_OK ||
      tpx_placement_normalize(i2, ndim, &x, NULL) != TPX_OK ||
      tpx_placement_normalize(o2, ndim, &y, NULL) != TPX_OK)
    return 0;
  return c1 != c2 || !tpx_placement_equal(a, x) || !tpx_placement_equal(b, y);
}

tpx_status tpx__tp_check_plain(const tpx_sharding *sh, int64_t module,
                               tpx_transition_side side, int index, int ndim,
                               const char *call, tpx_error *err) {
  if (!sh || side != TPX_TRANSITION_INPUT)
    return TPX_OK;
  const tpx_transition *tr;
  /* A bad module / index is reported by the call itself. */
  if (tpx_tp_transition_get(sh, module, side, index, &tr, NULL) != TPX_OK ||
      !tr)
    return TPX_OK;
  dt_source src[MAX_SOURCES];
  int ns = dt_sources(sh, src);
  int lo = ndim > 0 ? ndim : 1, hi = ndim > 0 ? ndim : TPX_MAX_TENSOR_DIMS;
  for (int k = 0; k < ns; k++)
    for (int bwd = 0; bwd < 2; bwd++)
      for (int nd = lo; nd <= hi; nd++) {
        tpx_placement si, so, di, dO;
        int sc, dc;
        if (tpx__tp_resolve_tr(sh, module, tr, bwd, &si, &so, &sc, NULL) !=
                TPX_OK ||
            tpx__tp_resolve_dt_tr(sh, module, tr, bwd, &src[k].layout, nd, &di,
                                  &dO, &dc, NULL) != TPX_OK)
          continue; /* the layout does not fit this ndim */
        if (!differ(si, so, sc, di, dO, dc, nd))
          continue;
        char a[32], p1[32], p2[32], q1[32], q2[32];
        pl_text(src[k].layout, a, sizeof a);
        pl_text(si, p1, sizeof p1);
        pl_text(sc ? si : so, p2, sizeof p2);
        pl_text(di, q1, sizeof q1);
        pl_text(dc ? di : dO, q2, sizeof q2);
        return tpx_error_set(
            err, TPX_INVALID_ARGUMENT,
            "%s: module '%s' input %d may arrive as a DTensor ('%s' %s %d "
            "stays a %s one), and then its %s maps %s -> %s instead of %s "
            "-> %s: say how it arrives with the _dt call "
            "(tpx_tp_transition_run_dt; arrived = the producer's layout, "
            "NULL for a plain tensor)",
            call, tpx__tp_module_name(sh, module), index,
            tpx__tp_module_name(sh, src[k].module),
            src[k].side == TPX_TRANSITION_INPUT ? "input" : "output",
            src[k].index, a, bwd ? "backward" : "forward", q1, q2, p1, p2);
      }
  return TPX_OK;
}
