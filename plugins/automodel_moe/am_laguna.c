/* am_laguna.c — Laguna (LagunaForCausalLM, Automodel's own LagunaConfig)
 * as NeMo Automodel 0.7.0 builds it: which layers are MoE (mlp_only_layers,
 * else mlp_layer_types' "dense" entries, else layer 0), each layer's query
 * heads (num_attention_heads_per_layer) and output gate g_proj (gating /
 * gating_types: per element, per head or none), and the configs its class
 * refuses to build. Not the rest of the tree (am_skeleton.c). */
#include <string.h>

#include "am.h"

/* What Automodel's Laguna class refuses to build (NotImplementedError). */
int am_laguna_refusals(const tpx_plugin_host *host, tpx_plugin_ctx *ctx) {
  static const char *const flags[] = {"swa_attention_sink_enabled",
                                      "moe_apply_router_weight_on_input"};
  double cap = 0;
  int on = 0;
  size_t i;
  for (i = 0; i < TPXP_N_OF(flags); i++) {
    TPXP_CHK(tpxp_cfg_bool_opt(host, ctx, flags[i], 0, &on));
    if (on)
      return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                       "automodel_moe: LagunaForCausalLM: config %s true is "
                       "not supported by NeMo Automodel 0.7.0's Laguna class",
                       flags[i]);
  }
  TPXP_CHK(
      tpxp_cfg_float_opt(host, ctx, "moe_router_logit_softcapping", 0, &cap));
  if (cap > 0)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "automodel_moe: LagunaForCausalLM: config "
                     "moe_router_logit_softcapping > 0 is not supported by "
                     "NeMo Automodel 0.7.0's Laguna class");
  return TPX_PLUGIN_OK;
}

/* Laguna: mlp_only_layers, or (absent) the "dense" entries of
 * mlp_layer_types, or (both absent) layer 0 alone; then every
 * decoder_sparse_step-th layer when there are experts. */
int am_laguna_sparse(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const am_cfg *c, int64_t i, int *sparse) {
  const char *s = NULL;
  int64_t step = 1;
  int only = 0;
  if (host->config_has(ctx, "mlp_only_layers")) {
    TPXP_CHK(am_list_has(host, ctx, "mlp_only_layers", i, &only));
  } else if (host->config_has(ctx, "mlp_layer_types")) {
    TPXP_CHK(am_list_str(host, ctx, "mlp_layer_types", i, &s));
    only = s != NULL && strcmp(s, "dense") == 0;
  } else {
    only = i == 0;
  }
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "decoder_sparse_step", 1, &step));
  *sparse = !only && c->experts > 0 && step > 0 && (i + 1) % step == 0;
  return TPX_PLUGIN_OK;
}

/* Laguna's gating value (a boolean, or a mode string as upstream
 * normalises it): 0 none, 1 per element, 2 per head. */
static int laguna_gate_mode(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                            const char *key, int *mode) {
  const char *s = NULL;
  char norm[32];
  size_t k;
  int on = 1, st = host->config_get_bool(ctx, key, &on);
  if (st == TPX_PLUGIN_OK || st == TPX_PLUGIN_NOT_FOUND) {
    *mode = on ? 1 : 0;
    return TPX_PLUGIN_OK;
  }
  TPXP_CHK(tpxp_cfg_str_opt(host, ctx, key, "true", &s));
  for (k = 0; s[k] != '\0' && k + 1 < sizeof norm; k++)
    norm[k] = s[k] == '_'
                  ? '-'
                  : (char)(s[k] | (s[k] >= 'A' && s[k] <= 'Z' ? 0x20 : 0));
  norm[k] = '\0';
  if (strcmp(norm, "false") == 0 || strcmp(norm, "none") == 0 ||
      strcmp(norm, "off") == 0)
    *mode = 0;
  else if (strcmp(norm, "per-head") == 0 || strcmp(norm, "head") == 0)
    *mode = 2;
  else if (strcmp(norm, "true") == 0 || strcmp(norm, "per-element") == 0 ||
           strcmp(norm, "element") == 0)
    *mode = 1;
  else
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "automodel_moe: LagunaForCausalLM: config %s: unsupported "
                     "attention gating mode '%s' (upstream raises too)",
                     key, s);
  return TPX_PLUGIN_OK;
}

int am_laguna_attn(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                   const am_cfg *c, int64_t i, int64_t *heads, int64_t *g_out) {
  char p[64];
  int mode = 0;
  *heads = c->heads;
  *g_out = 0;
  if (!c->a->laguna)
    return TPX_PLUGIN_OK;
  if (host->config_has(ctx, "num_attention_heads_per_layer")) {
    tpxp_fmt(p, sizeof p, "num_attention_heads_per_layer[%lld]", (long long)i);
    TPXP_CHK(tpxp_cfg_int_req(host, ctx, p, heads));
  }
  if (host->config_has(ctx, "gating_types"))
    tpxp_fmt(p, sizeof p, "gating_types[%lld]", (long long)i);
  else
    tpxp_fmt(p, sizeof p, "gating");
  TPXP_CHK(laguna_gate_mode(host, ctx, p, &mode));
  *g_out = mode == 2 ? *heads : mode == 1 ? *heads * c->head_dim : 0;
  return TPX_PLUGIN_OK;
}
