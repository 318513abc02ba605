/* tp/tp_resolve.c — a styled module's transition (tpx_tp_transition_get)
 * and the layouts one direction of it maps between: forward its from -> to,
 * backward the pair of gradient layouts its backward collective names; for
 * an input that arrives as a DTensor, torch's PrepareModuleInput rule that
 * keeps it as it arrived when the annotated and desired layouts are equal.
 *
 * Not here: whether a plain input can be trusted (tp_arrival.c), moving the
 * data (tp_transition.c), what the styles are (shard/transitions.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shard/sharding_view.h"
#include "tp/tp_internal.h"

int tpx__tp_prepare_keeps_arrival(const tpx_sharding *sh, int64_t module,
                                  const tpx_transition *tr, int ndim) {
  if (!tr || tr->from_is_none || tr->side != TPX_TRANSITION_INPUT)
    return 0;
  int64_t e = tpx__sv_module_entry(sh, module);
  if (e < 0 ||
      tpx__sv_entry_style(sh, e)->kind != TPX_STYLE_PREPARE_MODULE_INPUT)
    return 0;
  tpx_placement f, t;
  if (tpx_placement_normalize(tr->from, ndim, &f, NULL) != TPX_OK ||
      tpx_placement_normalize(tr->to, ndim, &t, NULL) != TPX_OK)
    return 0;
  return tpx_placement_equal(f, t);
}

tpx_status tpx_tp_transition_get(const tpx_sharding *sh, int64_t module,
                                 tpx_transition_side side, int index,
                                 const tpx_transition **out, tpx_error *err) {
  if (!sh || !out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_tp_transition_get: NULL argument");
  *out = NULL;
  TPX__TRY(tpx__tp_module_in_range("tp transition", sh, module, err));
  if (side != TPX_TRANSITION_INPUT && side != TPX_TRANSITION_OUTPUT)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tp transition: side %d is neither input nor output",
                         (int)side);
  const char *name;
  int64_t entry;
  TPX__TRY(
      tpx__tp_module_styled("tp transition", sh, module, &name, &entry, err));
  if (!tpx__sv_tp_applied(sh))
    return TPX_OK; /* tp == 1: no hooks */
  const tpx_transition *tr;
  size_t n;
  TPX__TRY(tpx_sharding_module_transitions(sh, module, &tr, &n, err));
  char have[128];
  size_t k = 0;
  have[0] = '\0';
  for (size_t i = 0; i < n; i++) {
    if (tr[i].side == side && tr[i].index == index) {
      *out = &tr[i];
      return TPX_OK;
    }
    if (k < sizeof have)
      k += (size_t)snprintf(have + k, sizeof have - k, "%s%s %d", k ? ", " : "",
                            tpx__tp_side_name(tr[i].side), tr[i].index);
  }
  const char *style = tpx_style_kind_name(tpx__sv_entry_style(sh, entry)->kind);
  return tpx_error_set(err, TPX_NOT_FOUND,
                       "tp transition: module '%s' (style %s, plan key '%s') "
                       "has no %s %d transition; it has: %s",
                       name, style ? style : "?", tpx__sv_entry_key(sh, entry),
                       tpx__tp_side_name(side), index, n ? have : "none");
}

/* "<name>(dim=<d>)" -> d. */
static int parse_dim(const char *s, const char *name, int32_t *d) {
  size_t n = strlen(name);
  if (strncmp(s, name, n) != 0 || strncmp(s + n, "(dim=", 5) != 0)
    return 0;
  char *end;
  long v = strtol(s + n + 5, &end, 10);
  if (*end != ')' || end[1] != '\0')
    return 0;
  *d = (int32_t)v;
  return 1;
}

static tpx_placement grad_of(tpx_placement p) {
  return p.kind == TPX_PARTIAL ? tpx_placement_replicate() : p;
}

/* In / out layouts of the buffers of one direction of a transition. */
static tpx_status resolve(const tpx_sharding *sh, int64_t module,
                          tpx_transition_side side, int index, int backward,
                          tpx_placement *in, tpx_placement *out, int *copy,
                          tpx_error *err) {
  const tpx_transition *tr;
  TPX__TRY(tpx_tp_transition_get(sh, module, side, index, &tr, err));
  return tpx__tp_resolve_tr(sh, module, tr, backward, in, out, copy, err);
}

tpx_status tpx__tp_resolve_tr(const tpx_sharding *sh, int64_t module,
                              const tpx_transition *tr, int backward,
                              tpx_placement *in, tpx_placement *out, int *copy,
                              tpx_error *err) {
  *in = *out = tpx_placement_replicate();
  *copy = 1;
  if (!tr || tr->from_is_none)
    return TPX_OK; /* tp == 1, or pass-through */
  const char *c = backward ? tr->backward : tr->forward;
  if (strncmp(c, "mask + ", 7) == 0)
    c += 7; /* rows zeroed by the caller */
  *copy = strcmp(c, "none") == 0;
  if (!backward) {
    *in = tr->from;
    *out = *copy ? tr->from : tr->to;
    return TPX_OK;
  }
  int32_t a, b;
  tpx_placement partial = tpx_placement_partial(TPX_REDUCE_SUM);
  if (*copy) {
    *in = *out = grad_of(tr->to);
  } else if (strcmp(c, "all-reduce") == 0) {
    *in = partial;
  } else if (parse_dim(c, "reduce-scatter", &a)) {
    *in = partial;
    *out = tpx_placement_shard(a);
  } else if (parse_dim(c, "chunk", &a)) {
    *out = tpx_placement_shard(a);
  } else if (parse_dim(c, "all-gather", &a)) {
    *in = tpx_placement_shard(a);
  } else if (sscanf(c, "all-to-all(dim=%d->%d)", &a, &b) == 2) {
    *in = tpx_placement_shard(a);
    *out = tpx_placement_shard(b);
  } else if (strcmp(c, "redistribute") == 0) {
    *in = grad_of(tr->to);
    *out = grad_of(tr->from);
  } else {
    return tpx_error_set(err, TPX_INTERNAL,
                         "tp transition: module '%s' %s %d: unknown backward "
                         "collective '%s'",
                         tpx__tp_module_name(sh, module),
                         tpx__tp_side_name(tr->side), tr->index, c);
  }
  return TPX_OK;
}

tpx_status tpx__tp_resolve(const tpx_sharding *sh, int64_t module,
                           tpx_transition_side side, int index, int backward,
                           const tpx_placement *arrived, int ndim,
                           tpx_placement *in, tpx_placement *out, int *copy,
                           tpx_error *err) {
  if (!arrived)
    return resolve(sh, module, side, index, backward, in, out, copy, err);
  if (side != TPX_TRANSITION_INPUT)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tp transition: module '%s' output %d: an arrival "
                         "layout applies to inputs only",
                         sh && module >= 0 &&
                                 (size_t)module < tpx__sv_num_modules(sh)
                             ? tpx__tp_module_name(sh, module)
                             : "?",
                         index);
  const tpx_transition *tr;
  TPX__TRY(tpx_tp_transition_get(sh, module, side, index, &tr, err));
  return tpx__tp_resolve_dt_tr(sh, module, tr, backward, arrived, ndim, in, out,
                               copy, err);
}

tpx_status tpx__tp_resolve_dt_tr(const tpx_sharding *sh, int64_t module,
                                 const tpx_transition *tr, int backward,
                                 const tpx_placement *arrived, int ndim,
                                 tpx_placement *in, tpx_placement *out,
                                 int *copy, tpx_error *err) {
  tpx_placement a;
  TPX__TRY(tpx_placement_normalize(*arrived, ndim, &a, err));
  *copy = 1;
  if (!tr) { /* tp == 1 */
    *in = *out = tpx_placement_replicate();
    return TPX_OK;
  }
  if (tr->from_is_none) { /* prepare_module_input None: untouched */
    *in = *out = backward ? grad_of(a) : a;
    return TPX_OK;
  }
  tpx_placement want;
  TPX__TRY(tpx_placement_normalize(tr->to, ndim, &want, err));
  if (tpx__tp_prepare_keeps_arrival(sh, module, tr, ndim)) {
    *in = *out = backward ? grad_of(a) : a; /* kept as it arrived */
    return TPX_OK;
  }
  int same = tpx_placement_equal(a, want);
  if (!backward) {
    *in = a;
    *out = same ? a : want;
    *copy = same;
    return TPX_OK;
  }
  /* The gradient the module hands back: what the static backward reads. */
  tpx_placement g, unused;
  int c;
  TPX__TRY(tpx__tp_resolve_tr(sh, module, tr, 1, &g, &unused, &c, err));
  TPX__TRY(tpx_placement_normalize(g, ndim, &g, err));
  *in = g;
  *out = same ? g : a;
  if (!same && g.kind == TPX_REPLICATE && a.kind == TPX_PARTIAL)
    *out = g; /* DTensor keeps a replicated grad of a Partial source */
  *copy = tpx_placement_equal(*in, *out);
  return TPX_OK;
}
