/* select/selection.c — the tpx_selection object: destruction and the
 * queries a caller (tpx_sharding_create, the reports, the CLI) asks of it:
 * the plan and where it came from, the trace, the plugin's FSDP units and
 * fp32 parameters, and the upstream strategy's properties with its
 * mixed-precision default.
 *
 * Not the selection steps (select.c). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "select/select_internal.h"

const char *tpx_plan_source_name(tpx_plan_source source) {
  switch (source) {
  case TPX_PLAN_SOURCE_CUSTOM: return "custom";
  case TPX_PLAN_SOURCE_PLUGIN: return "plugin";
  case TPX_PLAN_SOURCE_HF: return "hf";
  case TPX_PLAN_SOURCE_DEFAULT: return "default";
  }
  return "unknown";
}

void tpx_selection_destroy(tpx_selection *sel) {
  if (!sel)
    return;
  tpx_plan_destroy(sel->plan);
  free(sel->plugin_name);
  free(sel->plugin_path);
  free(sel->function);
  tpx__strvec_free(&sel->trace);
  tpx__strvec_free(&sel->fp32);
  tpx__strvec_free(&sel->units);
  tpx__strvec_free(&sel->strategy);
  tpx__strvec_free(&sel->experts);
  free(sel);
}

void tpx__sel_trace(tpx_selection *sel, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  (void)tpx__strvec_push(&sel->trace, buf, 0); /* a lost line is harmless */
}

/* ---- accessors ------------------------------------------------------------
 */

const tpx_plan *tpx_selection_plan(const tpx_selection *sel) {
  return sel ? sel->plan : NULL;
}
int64_t tpx_selection_tp_size(const tpx_selection *sel) {
  return sel ? sel->tp_size : 0;
}
int tpx_selection_tp_grad_sync(const tpx_selection *sel) {
  return sel ? sel->tp_grad_sync : 0;
}
int64_t tpx_selection_ep(const tpx_selection *sel) {
  return sel && sel->ep > 1 ? sel->ep : 1;
}
int tpx_selection_moe_custom(const tpx_selection *sel) {
  return sel ? sel->moe_custom : 0;
}
size_t tpx_selection_num_expert_params(const tpx_selection *sel) {
  return sel ? sel->experts.count : 0;
}
const char *tpx_selection_expert_param(const tpx_selection *sel, size_t i) {
  return sel && i < sel->experts.count ? sel->experts.items[i] : NULL;
}
tpx_plan_source tpx_selection_source(const tpx_selection *sel) {
  return sel ? sel->source : TPX_PLAN_SOURCE_DEFAULT;
}
const char *tpx_selection_plugin_name(const tpx_selection *sel) {
  return sel ? sel->plugin_name : NULL;
}
const char *tpx_selection_plugin_path(const tpx_selection *sel) {
  return sel ? sel->plugin_path : NULL;
}
const char *tpx_selection_function(const tpx_selection *sel) {
  return sel ? sel->function : NULL;
}
size_t tpx_selection_trace_size(const tpx_selection *sel) {
  return sel ? sel->trace.count : 0;
}
const char *tpx_selection_trace(const tpx_selection *sel, size_t i) {
  return sel && i < sel->trace.count ? sel->trace.items[i] : NULL;
}
const char *const *tpx_selection_trace_lines(const tpx_selection *sel) {
  return sel && sel->trace.count ? (const char *const *)sel->trace.items : NULL;
}
size_t tpx_selection_num_fp32(const tpx_selection *sel) {
  return sel ? sel->fp32.count : 0;
}
const char *tpx_selection_fp32(const tpx_selection *sel, size_t i) {
  return sel && i < sel->fp32.count ? sel->fp32.items[i] : NULL;
}
size_t tpx_selection_num_strategy(const tpx_selection *sel) {
  return sel ? sel->strategy.count : 0;
}
const char *tpx_selection_strategy(const tpx_selection *sel, size_t i) {
  return sel && i < sel->strategy.count ? sel->strategy.items[i] : NULL;
}
const char *const *tpx_selection_strategy_lines(const tpx_selection *sel) {
  return sel && sel->strategy.count ? (const char *const *)sel->strategy.items
                                    : NULL;
}
const char *tpx_selection_strategy_value(const tpx_selection *sel,
                                         const char *key) {
  size_t n = key ? strlen(key) : 0;
  for (size_t i = 0; sel && n && i < sel->strategy.count; i++)
    if (strncmp(sel->strategy.items[i], key, n) == 0 &&
        sel->strategy.items[i][n] == '=')
      return sel->strategy.items[i] + n + 1;
  return NULL;
}
tpx_status tpx_selection_strategy_mp(const tpx_selection *sel,
                                     tpx_mp_policy *mp, tpx_error *err) {
  static const char *const keys[3] = {"mp_param_dtype", "mp_reduce_dtype",
                                      "mp_output_dtype"};
  if (!mp)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_selection_strategy_mp: mp is NULL");
  tpx_dtype got[3] = {mp->param_dtype, mp->reduce_dtype, mp->output_dtype};
  for (int k = 0; k < 3; k++) {
    const char *v = tpx_selection_strategy_value(sel, keys[k]);
    if (!v)
      continue;
    if (strcmp(v, "none") == 0) {
      got[k] = TPX_DTYPE_INVALID;
      continue;
    }
    tpx_error e = {0};
    if (tpx_dtype_parse(v, &got[k], &e) != TPX_OK)
      return tpx_error_set(
          err, TPX_INVALID_ARGUMENT, "plugin '%s' gives strategy %s=%s: %s",
          sel->plugin_name ? sel->plugin_name : "?", keys[k], v, e.message);
  }
  mp->param_dtype = got[0];
  mp->reduce_dtype = got[1];
  mp->output_dtype = got[2];
  return TPX_OK;
}

size_t tpx_selection_num_fsdp_units(const tpx_selection *sel) {
  return sel ? sel->units.count : 0;
}
const char *tpx_selection_fsdp_unit(const tpx_selection *sel, size_t i,
                                    int *reshard_after_forward) {
  if (!sel || i >= sel->units.count)
    return NULL;
  if (reshard_after_forward)
    *reshard_after_forward = sel->units.ints[i];
  return sel->units.items[i];
}
