/* moe.c — the tpx_moe family plugin: mixture-of-experts models served
 * through their Hugging Face classes, MixtralForCausalLM and
 * Qwen3MoeForCausalLM (transformers 5: the experts of a layer are one module
 * holding fused 3-D tensors, mlp.experts.gate_up_proj [E, 2*I, H] and
 * mlp.experts.down_proj [E, H, I], next to the top-k router mlp.gate).
 *
 * Plan: upstream has no plan function for these classes, so Automodel asks
 * get_hf_tp_shard_plan, cannot translate transformers-5's styles
 * (colwise_gather_output, packed_colwise, moe_tp_experts) and falls back to
 * the default base plan: attention colwise/rowwise, experts and router
 * replicated over tp, every parameter (experts on their expert dim 0)
 * FSDP-sharded. get_plan refuses with that explanation and the host takes
 * the same path. What this plugin adds is the config-only skeleton.
 * Not: Qwen3.5-MoE (the qwen plugin), expert parallelism. */
#include <stdio.h>
#include <string.h>

#include "tpxp_common.h"

static const char *const k_archs[] = {
    "transformers.models.mixtral.modeling_mixtral.MixtralForCausalLM",
    "transformers.models.qwen3_moe.modeling_qwen3_moe.Qwen3MoeForCausalLM",
    "MixtralForCausalLM",
    "Qwen3MoeForCausalLM",
    NULL};

int register_parallel_strategy(const tpx_plugin_host *host,
                               tpx_plugin_info *info) {
  static const tpxp_plugin_desc desc = {
      .name = "moe",
      .version = "1.0.0",
      .description =
          "Hugging Face MoE classes: MixtralForCausalLM, Qwen3MoeForCausalLM "
          "(config-only skeletons with transformers-5 fused experts "
          "mlp.experts.gate_up_proj [E, 2I, H] / down_proj [E, H, I]; "
          "per-expert checkpoint tensors fold onto them). No plan of its "
          "own: upstream's HF-plan path ends at the default base plan, so "
          "experts and router stay replicated over tp and FSDP shards the "
          "experts on dim 0",
      .architectures = k_archs,
      .plans = NULL,
  };
  return tpxp_register(host, info, &desc);
}

static int is_mixtral(const char *arch) {
  return tpxp_arch_is(arch, "MixtralForCausalLM");
}
static int is_qwen3_moe(const char *arch) {
  return tpxp_arch_is(arch, "Qwen3MoeForCausalLM");
}

int get_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
             const tpx_plugin_plan_request *req) {
  int st = tpxp_plain_plan_request(host, ctx, req, "moe");
  if (st != TPX_PLUGIN_OK)
    return st;
  if (!is_mixtral(req->architecture) && !is_qwen3_moe(req->architecture))
    return tpxp_not_served(host, ctx, "moe", req->architecture);
  return tpxp_refuse_to_hf_flow(
      host, ctx, "moe", req->architecture,
      "the class plan's lm_head 'colwise_gather_output', the experts' "
      "'packed_colwise' / 'moe_tp_experts'");
}

/* ---- skeletons ---- */

/* Is Qwen3-MoE layer i sparse? transformers: i not in mlp_only_layers,
 * num_experts > 0 and (i + 1) % decoder_sparse_step == 0. */
static int qwen3_moe_sparse(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                            int64_t i, int64_t experts, int64_t step,
                            int *sparse) {
  int64_t n = 0, j, v;
  char key[64];
  int st = host->config_get_length(ctx, "mlp_only_layers", &n);
  if (st == TPX_PLUGIN_NOT_FOUND)
    n = 0;
  else if (st != TPX_PLUGIN_OK)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "config mlp_only_layers must be a list of layer indices");
  for (j = 0; j < n; j++) {
    tpxp_fmt(key, sizeof key, "mlp_only_layers[%lld]", (long long)j);
    if ((st = tpxp_cfg_int_req(host, ctx, key, &v)) != TPX_PLUGIN_OK)
      return st;
    if (v == i) {
      *sparse = 0;
      return TPX_PLUGIN_OK;
    }
  }
  *sparse = experts > 0 && step > 0 && (i + 1) % step == 0;
  return TPX_PLUGIN_OK;
}

/* One MoE decoder stack in transformers' module order: embed_tokens,
 * layers.* {self_attn, mlp, input_layernorm, post_attention_layernorm},
 * norm, rotary_emb, lm_head. Mixtral's block holds gate then experts,
 * Qwen3-MoE's experts then gate; Qwen3-MoE's dense layers (mlp_only_layers,
 * decoder_sparse_step) are a plain gated MLP of intermediate_size. */
static int moe_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                        int qwen) {
  tpxp_decoder d;
  char f[TPXP_FQN_MAX], g[TPXP_FQN_MAX];
  int64_t experts, moe_inter, step = 1, i;
  int st;
  memset(&d, 0, sizeof d);
  if ((st = tpxp_decoder_read(host, ctx, "", 0, &d)))
    return st;
  d.prefix = "model";
  d.rotary = 1;
  d.qk_norm = qwen;
  if (qwen) {
    if ((st = tpxp_cfg_int_opt(host, ctx, "num_experts", 128, &experts)) ||
        (st = tpxp_cfg_int_opt(host, ctx, "moe_intermediate_size", 768,
                               &moe_inter)) ||
        (st = tpxp_cfg_int_opt(host, ctx, "decoder_sparse_step", 1, &step)))
      return st;
  } else {
    /* Mixtral: every layer is sparse; intermediate_size is per expert. */
    if ((st = tpxp_cfg_int_opt(host, ctx, "num_local_experts", 8, &experts)))
      return st;
    moe_inter = d.intermediate;
  }
  tpxp_fmt(f, sizeof f, "%s.embed_tokens", d.prefix);
  if ((st = tpxp_sk_embedding(host, ctx, f, d.vocab, d.hidden, d.dtype)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.layers", d.prefix);
  if ((st = tpxp_sk_module(host, ctx, f, "container")))
    return st;
  for (i = 0; i < d.layers; i++) {
    long long L = (long long)i;
    int sparse = 1;
    if (qwen && (st = qwen3_moe_sparse(host, ctx, i, experts, step, &sparse)))
      return st;
    if ((st = tpxp_sk_self_attn(host, ctx, &d, i, d.kv_heads)))
      return st;
    if (sparse) {
      tpxp_fmt(f, sizeof f, "%s.layers.%lld.mlp", d.prefix, L);
      if ((st = tpxp_sk_module(host, ctx, f, "other")))
        return st;
      tpxp_fmt(g, sizeof g, "%s.gate", f);
      if (!qwen && (st = tpxp_sk_router(host, ctx, g, experts, d.hidden,
                                         d.dtype)))
        return st;
      tpxp_fmt(f, sizeof f, "%s.layers.%lld.mlp.experts", d.prefix, L);
      if ((st = tpxp_sk_fused_experts(host, ctx, f, experts, d.hidden,
                                      moe_inter, d.dtype)))
        return st;
      if (qwen && (st = tpxp_sk_router(host, ctx, g, experts, d.hidden,
                                        d.dtype)))
        return st;
    } else {
      static const char *const part[] = {"gate_proj", "up_proj", "down_proj"};
      size_t k;
      for (k = 0; k < 3; k++) {
        tpxp_fmt(f, sizeof f, "%s.layers.%lld.mlp.%s", d.prefix, L, part[k]);
        st = k < 2 ? tpxp_sk_linear(host, ctx, f, d.hidden, d.intermediate,
                                    d.mlp_bias, d.dtype)
                   : tpxp_sk_linear(host, ctx, f, d.intermediate, d.hidden,
                                    d.mlp_bias, d.dtype);
        if (st)
          return st;
      }
    }
    tpxp_fmt(f, sizeof f, "%s.layers.%lld.input_layernorm", d.prefix, L);
    if ((st = tpxp_sk_norm(host, ctx, f, d.hidden, 0, d.dtype)))
      return st;
    tpxp_fmt(f, sizeof f, "%s.layers.%lld.post_attention_layernorm", d.prefix,
             L);
    if ((st = tpxp_sk_norm(host, ctx, f, d.hidden, 0, d.dtype)))
      return st;
  }
  tpxp_fmt(f, sizeof f, "%s.norm", d.prefix);
  if ((st = tpxp_sk_norm(host, ctx, f, d.hidden, 0, d.dtype)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.rotary_emb", d.prefix);
  if ((st = tpxp_sk_module(host, ctx, f, "rotary")))
    return st;
  return tpxp_sk_lm_head(host, ctx, "lm_head", d.hidden, d.vocab, 0, d.tie,
                         "model.embed_tokens.weight", d.dtype);
}

int tpx_plugin_get_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                            const char *architecture) {
  if (host == NULL)
    return TPX_PLUGIN_INVALID;
  if (is_mixtral(architecture))
    return moe_skeleton(host, ctx, 0);
  if (is_qwen3_moe(architecture))
    return moe_skeleton(host, ctx, 1);
  return tpxp_not_served(host, ctx, "moe", architecture);
}
