/* shard/selection_opts.c — what tpx_sharding_create takes from the selection
 * handed to it whole (tpx_sharding_options.selection): the plan, the
 * plugin's FSDP units with their reshard flags, its fp32 parameters, the
 * ep and expert parameters, and the strategy's mixed-precision default. The one
 * place a selection becomes sharding options, so no caller copies them by hand
 * (and none can drop one).
 *
 * Not selection itself (core/src/select) and not FSDP (fsdp.c). */
#include <stdlib.h>

#include "shard/selection_opts.h"
#include "tpx/select.h"

void tpx__selection_opts_free(tpx__selection_opts *s) {
  free(s->units);
  free(s->reshard);
  free(s->fp32);
  free(s->experts);
  s->units = NULL;
  s->reshard = NULL;
  s->fp32 = NULL;
  s->experts = NULL;
}

tpx_status tpx__selection_opts_apply(tpx_sharding_options *o,
                                     const tpx_plan **plan,
                                     tpx__selection_opts *s, tpx_error *err) {
  const tpx_selection *sel = o->selection;
  if (!sel)
    return TPX_OK;
  if (!*plan)
    *plan = tpx_selection_plan(sel);
  /* The strategy's default over the options' (tpx's bf16 / f32 / f32, or
   * the caller's), field by field where the strategy gives one. */
  tpx_mp_policy mp = {o->param_dtype, o->reduce_dtype, o->output_dtype};
  tpx_status st = tpx_selection_strategy_mp(sel, &mp, err);
  if (st != TPX_OK)
    return st;
  o->param_dtype = mp.param_dtype;
  o->reduce_dtype = mp.reduce_dtype;
  o->output_dtype = mp.output_dtype;
  size_t nu = tpx_selection_num_fsdp_units(sel);
  if (o->num_fsdp_units == 0 && nu > 0) {
    s->units = calloc(nu, sizeof *s->units);
    s->reshard = calloc(nu, sizeof *s->reshard);
    if (!s->units || !s->reshard)
      return tpx_error_set(err, TPX_NO_MEMORY,
                           "out of memory (the selection's FSDP units)");
    for (size_t i = 0; i < nu; i++)
      s->units[i] = tpx_selection_fsdp_unit(sel, i, &s->reshard[i]);
    o->num_fsdp_units = nu;
    o->fsdp_units = s->units;
    o->fsdp_unit_reshard = s->reshard;
  }
  size_t nf = tpx_selection_num_fp32(sel);
  if (o->num_fp32_params == 0 && nf > 0) {
    s->fp32 = calloc(nf, sizeof *s->fp32);
    if (!s->fp32)
      return tpx_error_set(err, TPX_NO_MEMORY,
                           "out of memory (the selection's fp32 "
                           "parameters)");
    for (size_t i = 0; i < nf; i++) s->fp32[i] = tpx_selection_fp32(sel, i);
    o->num_fp32_params = nf;
    o->fp32_params = s->fp32;
  }
  if (o->ep == 0)
    o->ep = tpx_selection_ep(sel);
  size_t ne = tpx_selection_num_expert_params(sel);
  if (o->num_expert_params == 0 && ne > 0) {
    s->experts = calloc(ne, sizeof *s->experts);
    if (!s->experts)
      return tpx_error_set(err, TPX_NO_MEMORY,
                           "out of memory (the selection's expert "
                           "parameters)");
    for (size_t i = 0; i < ne; i++)
      s->experts[i] = tpx_selection_expert_param(sel, i);
    o->num_expert_params = ne;
    o->expert_params = s->experts;
  }
  return TPX_OK;
}
