/* tp_kwarg.c — keyword inputs of prepare_module_input (input_kwarg_layouts /
 * desired_input_kwarg_layouts, tpx/runtime_tp.h): torch's with_kwargs
 * pre-hook runs, per keyword, what it runs for a positional input (wrap a
 * plain tensor in its layout, redistribute to the desired one when given
 * and different; a kwarg listed as None, or with no desired layout, passes
 * through). The description is shard/transitions.c (tpx__transition_kwarg);
 * the layouts per direction are tp_resolve.c's; the public kwarg_ calls
 * are wrappers over the resolved pair (tp_calls.c).
 * Not here: positional inputs (tp_transition.c). */
#include <stdio.h>
#include <string.h>

#include "tp/tp_internal.h"
#include "shard/sharding_view.h"

/* The kwarg's transition into *rec (*tr = &rec->view, NULL at tp == 1). */
static tpx_status kwarg_tr(const tpx_sharding *sh, int64_t module,
                           const char *kwarg, tpx__transition_rec *rec,
                           const tpx_transition **tr, tpx_error *err) {
  *tr = NULL;
  if (!sh || !kwarg)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tp kwarg transition: %s is NULL",
                         !sh ? "sharding" : "keyword name");
  const char *name;
  int64_t e;
  TPX__TRY(tpx__tp_module_in_range("tp kwarg transition", sh, module, err));
  TPX__TRY(
      tpx__tp_module_styled("tp kwarg transition", sh, module, &name, &e, err));
  const tpx_style *s = tpx__sv_entry_style(sh, e);
  if (s->kind != TPX_STYLE_PREPARE_MODULE_INPUT) {
    const char *k = tpx_style_kind_name(s->kind);
    return tpx_error_set(err, TPX_NOT_FOUND,
                         "tp kwarg transition: module '%s' (style %s, plan "
                         "key '%s') has no keyword-input layouts; only "
                         "prepare_module_input does",
                         name, k ? k : "?", tpx__sv_entry_key(sh, e));
  }
  if (!tpx__transition_kwarg(s, kwarg, rec)) {
    char have[200];
    size_t n = 0;
    have[0] = '\0';
    for (int32_t i = 0; i < s->input_kwarg_layouts.count && n < sizeof have;
         i++)
      n += (size_t)snprintf(have + n, sizeof have - n, "%s'%s'", i ? ", " : "",
                            s->input_kwarg_layouts.items[i].name);
    return tpx_error_set(err, TPX_NOT_FOUND,
                         "tp kwarg transition: module '%s' (plan key '%s') "
                         "has no layout for keyword input '%s' (torch passes "
                         "it through untouched); it has: %s",
                         name, tpx__sv_entry_key(sh, e), kwarg,
                         n ? have : "none");
  }
  if (tpx__sv_tp_applied(sh))
    *tr = &rec->view; /* tp == 1: no hooks */
  return TPX_OK;
}

tpx_status tpx__tp_kwarg_resolve(const tpx_sharding *sh, int64_t module,
                                 const char *kwarg, int backward,
                                 const tpx_placement *arrived, int ndim,
                                 tpx_placement *in, tpx_placement *out,
                                 int *copy, tpx_error *err) {
  tpx__transition_rec rec;
  const tpx_transition *tr;
  TPX__TRY(kwarg_tr(sh, module, kwarg, &rec, &tr, err));
  if (arrived)
    return tpx__tp_resolve_dt_tr(sh, module, tr, backward, arrived, ndim, in,
                                 out, copy, err);
  return tpx__tp_resolve_tr(sh, module, tr, backward, in, out, copy, err);
}
