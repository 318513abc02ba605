/* nemotron_h.c — the NemotronHForCausalLM strategy's TP plan, FSDP units and
 * fp32 parameters (docs/SEMANTICS.md "Family plans").
 *
 * Upstream parallelizes the root with {lm_head: colwise, output Shard(-1),
 * DTensor output} and then every block whose block_type is "mlp" with
 * {mixer.up_proj: colwise, mixer.down_proj: rowwise}; Mamba, attention and
 * MoE blocks stay replicated. In a flat plan that is lm_head followed by two
 * concrete keys per MLP block, in block order. Sequence parallelism is an
 * assert upstream: refused here with the same message. A tp_shard_plan is
 * ignored upstream; named plans do not exist. Each block is one FSDP unit
 * (fully_shard_by_dtype with the caller's reshard_after_forward, which
 * defaults to torch's True), with no prefetch chains. */
#include "nemotron.h"

#include <stdio.h>
#include <string.h>

#include "tpxp_common.h"

static int type_char(const char *name, char *out) {
  static const struct {
    const char *name;
    char c;
  } map[] = {{"mamba", NEMOTRON_H_MAMBA},
             {"linear_attention", NEMOTRON_H_MAMBA},
             {"attention", NEMOTRON_H_ATTENTION},
             {"full_attention", NEMOTRON_H_ATTENTION},
             {"mlp", NEMOTRON_H_MLP},
             {"moe", NEMOTRON_H_MOE}};
  size_t i;
  for (i = 0; i < sizeof map / sizeof map[0]; i++)
    if (strcmp(name, map[i].name) == 0) {
      *out = map[i].c;
      return 1;
    }
  return 0;
}

int nemotron_h_block_types(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                           char *types, int64_t *n) {
  const char *pattern = NULL, *list_key = NULL;
  int64_t i, len = 0;
  *n = 0;
  types[0] = '\0';
  if (host->config_get_string(ctx, "hybrid_override_pattern", &pattern) ==
          TPX_PLUGIN_OK &&
      pattern != NULL) {
    len = (int64_t)strlen(pattern);
    if (len > NEMOTRON_H_MAX_BLOCKS)
      return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                       "nemotron_h: hybrid_override_pattern has %lld blocks; "
                       "at most %d are supported",
                       (long long)len, NEMOTRON_H_MAX_BLOCKS);
    for (i = 0; i < len; i++) {
      char c = pattern[i];
      if (c != NEMOTRON_H_MAMBA && c != NEMOTRON_H_ATTENTION &&
          c != NEMOTRON_H_MLP && c != NEMOTRON_H_MOE)
        return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                         "nemotron_h: hybrid_override_pattern[%lld] is '%c'; "
                         "expected one of M (mamba), * (attention), - (mlp), "
                         "E (moe)",
                         (long long)i, c);
      types[i] = c;
    }
    types[len] = '\0';
    *n = len;
    return TPX_PLUGIN_OK;
  }
  if (host->config_get_length(ctx, "layers_block_type", &len) == TPX_PLUGIN_OK)
    list_key = "layers_block_type";
  else if (host->config_get_length(ctx, "layer_types", &len) == TPX_PLUGIN_OK)
    list_key = "layer_types";
  if (list_key == NULL) {
    /* transformers' NemotronHConfig default layers_block_type */
    tpxp_log(host, ctx, TPX_PLUGIN_LOG_WARN,
             "nemotron_h: the config has neither hybrid_override_pattern nor "
             "layers_block_type; using transformers' default block types "
             "(mamba, moe, attention, mlp)");
    memcpy(types, "ME*-", 5);
    *n = 4;
    return TPX_PLUGIN_OK;
  }
  if (len > NEMOTRON_H_MAX_BLOCKS)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "nemotron_h: %s has %lld blocks; at most %d are supported",
                     list_key, (long long)len, NEMOTRON_H_MAX_BLOCKS);
  for (i = 0; i < len; i++) {
    char p[64];
    const char *name = NULL;
    snprintf(p, sizeof p, "%s[%lld]", list_key, (long long)i);
    if (host->config_get_string(ctx, p, &name) != TPX_PLUGIN_OK ||
        name == NULL || !type_char(name, &types[i]))
      return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                       "nemotron_h: config %s is not a block type (expected "
                       "mamba, attention, mlp or moe)",
                       p);
  }
  types[len] = '\0';
  *n = len;
  return TPX_PLUGIN_OK;
}

const char *nemotron_h_inner(const tpx_plugin_host *host, tpx_plugin_ctx *ctx) {
  if (host->model_has_module(ctx, "backbone"))
    return "backbone";
  if (host->model_has_module(ctx, "model"))
    return "model";
  return "backbone";
}

int nemotron_h_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    const tpx_plugin_plan_request *req) {
  char types[NEMOTRON_H_MAX_BLOCKS + 1], fqn[TPXP_FQN_MAX];
  const char *inner;
  int64_t n = 0, i;
  int st;
  if (req->sequence_parallel)
    return tpxp_fail(host, ctx, TPX_PLUGIN_REFUSED,
                     "Sequence parallelism is not supported for "
                     "NemotronHForCausalLM (its strategy asserts "
                     "sequence_parallel is off); run without it");
  if ((st = nemotron_h_block_types(host, ctx, types, &n)) != TPX_PLUGIN_OK)
    return st;
  inner = nemotron_h_inner(host, ctx);
  if (host->plan_set_function != NULL &&
      (st = host->plan_set_function(ctx, "nemotron_h")) != TPX_PLUGIN_OK)
    return st;
  st = tpxp_add(host, ctx, "lm_head", "colwise", NULL, TPXP_SM1, 0, 0);
  for (i = 0; st == TPX_PLUGIN_OK && i < n; i++) {
    if (types[i] != NEMOTRON_H_MLP)
      continue;
    snprintf(fqn, sizeof fqn, "%s.layers.%lld.mixer.up_proj", inner,
             (long long)i);
    st = tpxp_add(host, ctx, fqn, "colwise", NULL, NULL, TPXP_DEF, 0);
    if (st != TPX_PLUGIN_OK)
      break;
    snprintf(fqn, sizeof fqn, "%s.layers.%lld.mixer.down_proj", inner,
             (long long)i);
    st = tpxp_add(host, ctx, fqn, "rowwise", NULL, NULL, TPXP_DEF, 0);
  }
  return st;
}

/* What upstream raises or silently mishandles, as diagnostics: they stay
 * visible when the host falls back to another plan source after get_plan
 * refused. */
int nemotron_h_validate(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                        const tpx_plugin_plan_request *req) {
  int st, tie = 0;
  if (host->diagnose == NULL)
    return TPX_PLUGIN_OK;
  if (req->sequence_parallel) {
    st = host->diagnose(ctx, TPX_PLUGIN_DIAG_ERROR,
                        "sequence-parallel-unsupported",
                        "Sequence parallelism is not supported for "
                        "NemotronHForCausalLM: its strategy asserts "
                        "sequence_parallel is off; run without it");
    if (st != TPX_PLUGIN_OK)
      return st;
  }
  st = tpxp_cfg_bool_opt(host, ctx, "tie_word_embeddings", 0, &tie);
  if (st == TPX_PLUGIN_OK && tie && req->tp_size > 1)
    st = host->diagnose(
        ctx, TPX_PLUGIN_DIAG_WARNING, "tied-lm-head-not-retied",
        "tie_word_embeddings is set but the NemotronH strategy shards lm_head "
        "colwise and never re-ties it to the replicated embedding: the one "
        "tensor gets two layouts (and two copies after parallelization)");
  return st;
}

int nemotron_h_fsdp_units(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                          const char *arch) {
  char types[NEMOTRON_H_MAX_BLOCKS + 1], fqn[TPXP_FQN_MAX];
  const char *inner;
  int64_t n = 0, i;
  int st = nemotron_h_block_types(host, ctx, types, &n);
  if (st != TPX_PLUGIN_OK)
    return st;
  if (host->fsdp_add_unit == NULL)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "nemotron_h: the host has no fsdp_add_unit");
  inner = nemotron_h_inner(host, ctx);
  for (i = 0; i < n; i++) {
    snprintf(fqn, sizeof fqn, "%s.layers.%lld", inner, (long long)i);
    /* the caller's reshard_after_forward, None by default = torch's True
     * for a non-root unit (no last-layer exception, unlike Default) */
    st = host->fsdp_add_unit(ctx, fqn, 1);
    if (st != TPX_PLUGIN_OK)
      return st;
  }
  return TPX_PLUGIN_OK;
}

/* _keep_in_fp32_modules_strict: the MoE router's e_score_correction_bias,
 * present only when the pattern has MoE blocks. */
int nemotron_h_fp32_params(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                           const char *arch) {
  char types[NEMOTRON_H_MAX_BLOCKS + 1], pat[TPXP_FQN_MAX];
  int64_t n = 0;
  int st = nemotron_h_block_types(host, ctx, types, &n);
  if (st != TPX_PLUGIN_OK)
    return st;
  if (strchr(types, NEMOTRON_H_MOE) == NULL || host->fp32_add == NULL)
    return TPX_PLUGIN_OK;
  snprintf(pat, sizeof pat, "%s.layers.*.mixer.gate.e_score_correction_bias",
           nemotron_h_inner(host, ctx));
  return host->fp32_add(ctx, pat);
}
