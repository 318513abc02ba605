/* moe.c — a test plugin ("tpxtest-ep") serving a made-up custom MoE
 * architecture the way NeMo Automodel 0.7.0 serves Qwen3-MoE with its own
 * implementation, so the expert-parallel tests do not depend on the family
 * plugins. Two architectures, both declared moe_custom with the fused
 * expert parameters as expert_param:
 *  - TpxMoeForCausalLM: no plan of its own (upstream registers none), so
 *    the default plan is selected and tp > 1 is refused as upstream
 *    refuses it;
 *  - TpxMoePlannedForCausalLM: a registered plan that leaves the experts
 *    and the router alone (attention and lm_head only), accepted at tp > 1;
 *    with "tpxtest_class_plan": true in the config the same plan given as
 *    the class's own _tp_plan (function get_hf_tp_shard_plan), which
 *    upstream uses at ep 1 only.
 * The skeleton is Automodel's Qwen3-MoE module tree (config keys as
 * tests/data/upstream_moe/qwen3_moe/config.json): per layer self_attn
 * q/k/v/o_proj and q_norm / k_norm, mlp.gate [E, H], mlp.experts with
 * gate_and_up_projs [E, H, 2*I] and down_projs [E, I, H], the two layer
 * norms; model.embed_tokens, model.norm, lm_head. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define TPX_PLUGIN_DECLARE_ENTRY_POINTS
#include "tpx/plugin.h"

#define MOE "TpxMoeForCausalLM"
#define PLANNED "TpxMoePlannedForCausalLM"

static const char *const architectures[] = {MOE, PLANNED, NULL};
static const char *const traits[] = {
    "moe_custom=" MOE,
    "expert_param=" MOE ":model.layers.*.mlp.experts.gate_and_up_projs",
    "expert_param=" MOE ":model.layers.*.mlp.experts.down_projs",
    "moe_custom=" PLANNED,
    "expert_param=" PLANNED ":model.layers.*.mlp.experts.*",
    NULL};

TPX_PLUGIN_EXPORT int register_parallel_strategy(const tpx_plugin_host *host,
                                                 tpx_plugin_info *info) {
  const uint32_t mine = TPX_PLUGIN_ABI_VERSION(1, 0);
  if (host->abi_min > mine || host->abi_max < mine)
    return TPX_PLUGIN_ABI_UNSUPPORTED;
  info->abi_version = mine;
  info->name = "tpxtest-ep";
  info->version = "1.0.0";
  info->description = "tpx test plugin (tests/unit/plugin/moe)";
  info->architectures = architectures;
  if (info->struct_size > offsetof(tpx_plugin_info, traits))
    info->traits = traits;
  return TPX_PLUGIN_OK;
}

static int add(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
               const char *module, const char *style, const char *out) {
  tpx_plugin_entry e;
  memset(&e, 0, sizeof e);
  e.struct_size = sizeof e;
  e.module = module;
  e.style = style;
  const char *outs[1] = {out};
  if (out) {
    e.output_layouts = outs;
    e.n_output_layouts = 1;
  }
  e.use_local_output = TPX_PLUGIN_DEFAULT;
  e.sequence_dim = TPX_PLUGIN_DEFAULT;
  return h->plan_add(ctx, &e);
}

TPX_PLUGIN_EXPORT int get_plan(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
                               const tpx_plugin_plan_request *req) {
  if (strcmp(req->architecture, PLANNED) != 0) {
    h->set_error(ctx, "upstream registers no tensor-parallel plan for " MOE);
    return TPX_PLUGIN_REFUSED;
  }
  int rc = add(h, ctx, "model.layers.*.self_attn.q_proj", "colwise", NULL);
  rc |= add(h, ctx, "model.layers.*.self_attn.k_proj", "colwise", NULL);
  rc |= add(h, ctx, "model.layers.*.self_attn.v_proj", "colwise", NULL);
  rc |= add(h, ctx, "model.layers.*.self_attn.o_proj", "rowwise", NULL);
  rc |= add(h, ctx, "lm_head", "colwise", "replicate");
  /* "tpxtest_class_plan": true gives the plan as the class's own _tp_plan
   * (upstream's get_hf_tp_shard_plan), as ERNIE-4.5-MoE's is. */
  int class_plan = 0;
  if (h->config_get_bool(ctx, "tpxtest_class_plan", &class_plan))
    class_plan = 0;
  h->plan_set_function(ctx, class_plan
                                ? "get_hf_tp_shard_plan (the class _tp_plan)"
                                : "tpxtest_moe_plan");
  return rc == TPX_PLUGIN_OK ? TPX_PLUGIN_OK : TPX_PLUGIN_ERROR;
}

static int get(const tpx_plugin_host *h, tpx_plugin_ctx *ctx, const char *k,
               int64_t *v) {
  return h->config_get_int(ctx, k, v) == TPX_PLUGIN_OK;
}

static int linear(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
                  const char *fqn, int64_t out, int64_t in) {
  int64_t shape[2] = {out, in};
  return h->skeleton_add_module(ctx, fqn, "linear") |
         h->skeleton_add_param(ctx, fqn, "weight", shape, 2, NULL);
}

static int norm(const tpx_plugin_host *h, tpx_plugin_ctx *ctx, const char *fqn,
                int64_t n) {
  return h->skeleton_add_module(ctx, fqn, "norm") |
         h->skeleton_add_param(ctx, fqn, "weight", &n, 1, NULL);
}

TPX_PLUGIN_EXPORT int tpx_plugin_get_skeleton(const tpx_plugin_host *h,
                                              tpx_plugin_ctx *ctx,
                                              const char *architecture) {
  int64_t hidden, layers, vocab, heads, kv, hd, inter, experts;
  (void)architecture;
  if (!get(h, ctx, "hidden_size", &hidden) ||
      !get(h, ctx, "num_hidden_layers", &layers) ||
      !get(h, ctx, "vocab_size", &vocab) ||
      !get(h, ctx, "num_attention_heads", &heads) ||
      !get(h, ctx, "moe_intermediate_size", &inter) ||
      !get(h, ctx, "num_local_experts", &experts) || heads <= 0 || layers < 0 ||
      layers > 64) {
    h->set_error(ctx, "config lacks a size the MoE skeleton needs");
    return TPX_PLUGIN_REFUSED;
  }
  if (!get(h, ctx, "num_key_value_heads", &kv))
    kv = heads;
  if (!get(h, ctx, "head_dim", &hd))
    hd = hidden / heads;
  int tie = 0;
  if (h->config_get_bool(ctx, "tie_word_embeddings", &tie))
    tie = 0;
  int64_t emb[2] = {vocab, hidden};
  int rc = h->skeleton_add_module(ctx, "model.embed_tokens", "embedding");
  rc |=
      h->skeleton_add_param(ctx, "model.embed_tokens", "weight", emb, 2, NULL);
  char f[128], g[128];
  for (int64_t l = 0; l < layers; l++) {
    static const char *const qkvo[] = {"q_proj", "k_proj", "v_proj", "o_proj"};
    const int64_t outs[4] = {heads * hd, kv * hd, kv * hd, hidden};
    const int64_t ins[4] = {hidden, hidden, hidden, heads * hd};
    for (int k = 0; k < 4; k++) {
      snprintf(f, sizeof f, "model.layers.%lld.self_attn.%s", (long long)l,
               qkvo[k]);
      rc |= linear(h, ctx, f, outs[k], ins[k]);
    }
    snprintf(f, sizeof f, "model.layers.%lld.self_attn.q_norm", (long long)l);
    rc |= norm(h, ctx, f, hd);
    snprintf(f, sizeof f, "model.layers.%lld.self_attn.k_norm", (long long)l);
    rc |= norm(h, ctx, f, hd);
    snprintf(f, sizeof f, "model.layers.%lld.mlp.gate", (long long)l);
    rc |= linear(h, ctx, f, experts, hidden);
    snprintf(g, sizeof g, "model.layers.%lld.mlp.experts", (long long)l);
    int64_t gu[3] = {experts, hidden, 2 * inter},
            dn[3] = {experts, inter, hidden};
    rc |= h->skeleton_add_module(ctx, g, "other");
    rc |= h->skeleton_add_param(ctx, g, "gate_and_up_projs", gu, 3, NULL);
    rc |= h->skeleton_add_param(ctx, g, "down_projs", dn, 3, NULL);
    snprintf(f, sizeof f, "model.layers.%lld.input_layernorm", (long long)l);
    rc |= norm(h, ctx, f, hidden);
    snprintf(f, sizeof f, "model.layers.%lld.post_attention_layernorm",
             (long long)l);
    rc |= norm(h, ctx, f, hidden);
  }
  rc |= norm(h, ctx, "model.norm", hidden);
  rc |= h->skeleton_add_module(ctx, "lm_head", "linear");
  if (tie)
    rc |= h->skeleton_tie(ctx, "lm_head.weight", "model.embed_tokens.weight");
  else
    rc |= h->skeleton_add_param(ctx, "lm_head", "weight", emb, 2, NULL);
  if (rc != TPX_PLUGIN_OK) {
    h->set_error(ctx, "building the MoE skeleton failed");
    return TPX_PLUGIN_ERROR;
  }
  return TPX_PLUGIN_OK;
}
