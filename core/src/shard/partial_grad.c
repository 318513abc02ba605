/* partial_grad.c — parameters replicated over tp whose gradient is partial
 * although no style says so: a per-head norm (`<x>_norm`, e.g. Qwen3's,
 * Gemma3's, Qwen3-MoE's self_attn.q_norm / k_norm) left unstyled next to a
 * colwise `<x>_proj` whose output stays sharded on the last dim. Each tp rank
 * then normalises only its own heads, so its weight gradient is a partial
 * sum (docs/SEMANTICS.md "Transitions", "The training step").
 * transformers' own tp plan and NeMo Automodel 0.7.0's Qwen plan style them
 * replicated_with_grad_allreduce, and 0.7.0's recipe sums their gradients
 * over tp before clipping; the Automodel plans tpx's golden plans follow
 * leave them unstyled (and Automodel's HF-string translation drops the
 * style: plan/hf_style.c). A plan may give the style itself (tpx-plan/1).
 *
 * The rule (tpx__param_partial_over_tp: unstyled per-head norms, and every
 * parameter a replicated_with_grad_allreduce key covers), used by the
 * runtime's tpx_tp_param_grad_needs_allreduce, and the
 * `partial-grad-replicated` warning for the unstyled ones only, one per
 * generalised module name (layer indices as '*') — or, where the
 * selection's strategy sums them itself (tpx_selection_tp_grad_sync, the
 * plugin's own plan for Qwen3), one info line for all of them.
 * Not here: styled SP norms (tp/tp_param.c), placements (apply.c). */
#include <stdio.h>
#include <string.h>

#include "base/fqn.h"
#include "model/model_view.h"
#include "shard/shard_internal.h"

int64_t tpx__norm_colwise_sibling(const tpx_sharding *sh, int64_t m) {
  const char *fqn = tpx_model_module_fqn(sh->model, m);
  if (!fqn)
    return -1;
  const char *atom = tpx__fqn_last_atom(fqn);
  size_t n = strlen(atom);
  if (n <= 5 || strcmp(atom + n - 5, "_norm") != 0)
    return -1;
  char sib[512];
  int w = snprintf(sib, sizeof sib, "%.*s%.*s_proj", (int)(atom - fqn), fqn,
                   (int)(n - 5), atom);
  if (w < 0 || (size_t)w >= sizeof sib)
    return -1;
  int64_t s = tpx_model_find_module(sh->model, sib);
  if (s < 0 || sh->module_entry[s] < 0)
    return -1;
  const tpx_style *st = &sh->entry_styles[sh->module_entry[s]];
  if (st->kind != TPX_STYLE_COLWISE)
    return -1;
  /* The output must stay sharded on the last dim (heads), not gathered. */
  tpx_placement out =
      st->output_layouts.count >= 1 && !st->output_layouts.is_none[0]
          ? st->output_layouts.items[0]
          : tpx_placement_shard(-1);
  if (out.kind != TPX_SHARD || out.dim != -1)
    return -1;
  return s;
}

int tpx__param_partial_over_tp(const tpx_sharding *sh, int64_t param,
                               int64_t *sibling) {
  if (sibling)
    *sibling = -1;
  if (!sh || param < 0 || (size_t)param >= sh->num_params)
    return 0;
  if (!sh->tp_applied || sh->tp_dim < 0 || sh->tp <= 1)
    return 0;
  tpx_param_info pi;
  if (tpx_model_param(sh->model, param, &pi, NULL) != TPX_OK)
    return 0;
  if (pi.tied_to >= 0) {
    param = pi.tied_to;
    if (tpx_model_param(sh->model, param, &pi, NULL) != TPX_OK)
      return 0;
  }
  if (sh->param_entry[param] >= 0) /* a style covers it: does it sum? */
    return tpx_style_kind_traits(sh->entry_styles[sh->param_entry[param]].kind)
        .sums_grad_over_tp;
  if (sh->placements[param * sh->ndim + sh->tp_dim].kind != TPX_REPLICATE)
    return 0;
  if (tpx_model_module_kind(sh->model, pi.module) != TPX_MODULE_NORM)
    return 0;
  int64_t s = tpx__norm_colwise_sibling(sh, pi.module);
  if (s < 0)
    return 0;
  /* A per-head weight: its size divides the sibling's out-features into
   * several heads (a norm over the whole projection, e.g. OLMo2's, is
   * another matter). */
  char wname[520];
  snprintf(wname, sizeof wname, "%s.weight",
           tpx_model_module_fqn(sh->model, s));
  int64_t wp = tpx_model_find_param(sh->model, wname);
  tpx_param_info wi;
  if (wp < 0 || tpx_model_param(sh->model, wp, &wi, NULL) != TPX_OK ||
      wi.ndim < 1)
    return 0;
  int64_t d = 1;
  for (int i = 0; i < pi.ndim; i++) d *= pi.shape[i];
  if (d <= 0 || wi.shape[0] <= d || wi.shape[0] % d != 0)
    return 0;
  if (sibling)
    *sibling = s;
  return 1;
}

/* The selection's strategy sums these gradients itself (upstream's
 * replicated_with_grad_allreduce and its recipe's tp replica sync, declared
 * by the plugin: trait tp_grad_sync): one short info instead of a warning
 * per module name. */
static tpx_status synced_info(tpx_sharding *sh, const tpx__gen_names *seen,
                              size_t total, tpx_error *err) {
  char names[512];
  size_t n = 0;
  names[0] = '\0';
  for (size_t i = 0; i < seen->count && n < sizeof names; i++)
    n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", i ? ", " : "",
                          tpx__fqn_last_atom(seen->names[i]));
  if (tpx_diag_add(sh->diags, TPX_DIAG_INFO, "partial-grad-replicated",
                   seen->names[0], NULL,
                   "%s (%zu module%s): replicated over tp with partial "
                   "gradients, summed over tp by this plan's strategy as "
                   "upstream does (replicated_with_grad_allreduce), and by "
                   "tpx's runtime",
                   names, total, total == 1 ? "" : "s") != TPX_OK)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  return TPX_OK;
}

tpx_status tpx__partial_grad_diags(tpx_sharding *sh, tpx_error *err) {
  if (!sh->tp_applied)
    return TPX_OK;
  /* One warning per generalised module name, in parameter order. */
  tpx__gen_names seen = {0};
  size_t total = 0;
  tpx_status st = TPX_OK;
  for (size_t p = 0; p < sh->num_params && st == TPX_OK; p++) {
    int64_t s;
    tpx_param_info pi;
    if (!tpx__param_partial_over_tp(sh, (int64_t)p, &s) || s < 0 ||
        tpx_model_param(sh->model, (int64_t)p, &pi, NULL) != TPX_OK ||
        pi.tied_to >= 0)
      continue; /* s < 0: a replicated_with_grad_allreduce key covers it */
    char gen[TPX__GEN_NAME_MAX], sgen[256];
    int added = tpx__gen_names_add(&seen, sh, pi.module, gen);
    if (added < 0) {
      st = tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
      break;
    }
    if (added == 0)
      continue;
    size_t count = tpx__gen_names_count(sh, gen, NULL);
    total += count;
    if (sh->tp_grad_sync)
      continue; /* handled: one info for all below */
    /* One module: its own names; several: the generalised ones. */
    const char *mname = tpx_model_module_fqn(sh->model, pi.module);
    if (count > 1)
      tpx__fqn_generalize(tpx_model_module_fqn(sh->model, s), sgen,
                          sizeof sgen);
    else
      snprintf(sgen, sizeof sgen, "%s", tpx_model_module_fqn(sh->model, s));
    const char *key = sh->entry_keys[sh->module_entry[s]];
    char more[48] = "", via[300] = "";
    if (count > 1)
      snprintf(more, sizeof more, " (%zu modules)", count);
    if (strcmp(key, sgen) != 0)
      snprintf(via, sizeof via, " (key '%s')", key);
    if (tpx_diag_add(
            sh->diags, TPX_DIAG_WARNING, "partial-grad-replicated",
            count > 1 ? gen : mname,
            "sum its gradient over tp after backward, before clipping, as "
            "NeMo Automodel 0.7.0 does (its Qwen plan styles these "
            "replicated_with_grad_allreduce; a tpx-plan/1 plan may too); "
            "tpx's runtime does (tpx_tp_param_grad_needs_allreduce)",
            "'%s'%s is replicated over tp but normalises only this rank's "
            "heads of the colwise '%s'%s, so each tp rank holds a partial "
            "gradient of its %s; this plan (as the Automodel snapshot of "
            "tpx's golden plans) leaves it unstyled, so unless the trainer "
            "sums it over tp the replicas drift apart",
            count > 1 ? gen : mname, more, sgen, via, pi.name) != TPX_OK)
      st = tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  }
  if (st == TPX_OK && sh->tp_grad_sync && seen.count)
    st = synced_info(sh, &seen, total, err);
  tpx__gen_names_free(&seen);
  return st;
}
