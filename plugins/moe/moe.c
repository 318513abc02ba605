/* moe.c — the tpx_moe family plugin: mixture-of-experts models served
 * through their Hugging Face classes, MixtralForCausalLM (transformers 5:
 * the experts of a layer are one module holding fused 3-D tensors,
 * mlp.experts.gate_up_proj [E, 2*I, H] and mlp.experts.down_proj [E, H, I],
 * next to the top-k router mlp.gate). Qwen3MoeForCausalLM is not here: NeMo
 * Automodel 0.7.0 trains it with its own class (the automodel_moe plugin).
 *
 * Plan: upstream has no plan function for these classes, so Automodel asks
 * get_hf_tp_shard_plan, cannot translate transformers-5's styles
 * (colwise_gather_output, packed_colwise, moe_tp_experts) and falls back to
 * the default base plan: attention colwise/rowwise, experts and router
 * replicated over tp, every parameter (experts on their expert dim 0)
 * FSDP-sharded. get_plan refuses with that explanation and the host takes
 * the same path. What this plugin adds is the config-only skeleton.
 * Not: Qwen3.5-MoE (the qwen plugin), Qwen3-MoE (automodel_moe), expert
 * parallelism. */
#include <stdio.h>
#include <string.h>

#include "tpxp_common.h"

static const char *const k_archs[] = {
    "transformers.models.mixtral.modeling_mixtral.MixtralForCausalLM",
    "MixtralForCausalLM", NULL};

/* The family facts (docs/PLUGIN_ABI.md "Traits"): the layer lists of the
 * sparse-MoE VLMs (NeMo Automodel 0.7.0's layer table). */
static const char *const k_family_traits[] = {
    "layers=MiniMaxM3SparseForConditionalGeneration:language:model.layers",
    "layers=MiniMaxM3SparseForConditionalGeneration:vision:"
    "vision_tower.vision_model.encoder.layers",
    "layers=Step3p7ForConditionalGeneration:language:"
    "model.language_model.layers",
    "layers=Step3p7ForConditionalGeneration:vision:"
    "model.vision_model.transformer.resblocks",
    NULL};

int register_parallel_strategy(const tpx_plugin_host *host,
                               tpx_plugin_info *info) {
  static const tpxp_plugin_desc desc = {
      .name = "moe",
      .version = "1.0.0",
      .description =
          "Hugging Face MoE classes: MixtralForCausalLM "
          "(config-only skeleton with transformers-5 fused experts "
          "mlp.experts.gate_up_proj [E, 2I, H] / down_proj [E, H, I]; "
          "per-expert checkpoint tensors fold onto them). No plan of its "
          "own: upstream's HF-plan path ends at the default base plan, so "
          "experts and router stay replicated over tp and FSDP shards the "
          "experts on dim 0",
      .architectures = k_archs,
      .plans = NULL,
      .traits = k_family_traits,
  };
  return tpxp_register(host, info, &desc);
}

/* ---- skeleton ---- */

typedef struct moe_cfg {
  tpxp_decoder d;
  int64_t experts, moe_inter;
} moe_cfg;

/* Layer i: attention, the sparse block (gate, then experts), then the two
 * norms. */
static int moe_layer(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const char *layer, int64_t i, const void *user) {
  const moe_cfg *m = user;
  const tpxp_decoder *d = &m->d;
  int64_t h = d->hidden, E = m->experts;
  char f[TPXP_FQN_MAX];
  const tpxp_sk_row norms[] = {
      TPXP_SK_NRM("input_layernorm", h, 0),
      TPXP_SK_NRM("post_attention_layernorm", h, 0),
  };
  TPXP_CHK(tpxp_sk_self_attn(host, ctx, d, i, d->kv_heads));
  tpxp_fmt(f, sizeof f, "%s.mlp", layer);
  TPXP_CHK(tpxp_sk_module(host, ctx, f, "other"));
  tpxp_fmt(f, sizeof f, "%s.mlp.gate", layer);
  TPXP_CHK(tpxp_sk_router(host, ctx, f, E, h, d->dtype));
  tpxp_fmt(f, sizeof f, "%s.mlp.experts", layer);
  TPXP_CHK(tpxp_sk_fused_experts(host, ctx, f, E, h, m->moe_inter, d->dtype));
  return TPXP_SK_ROWS(host, ctx, layer, norms, d->dtype);
}

/* One MoE decoder stack in transformers' module order: embed_tokens,
 * layers.* {self_attn, mlp, input_layernorm, post_attention_layernorm},
 * norm, rotary_emb, lm_head. Every layer is sparse; intermediate_size is
 * per expert. */
static int moe_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                        const char *arch) {
  moe_cfg m;
  (void)arch;
  memset(&m, 0, sizeof m);
  TPXP_CHK(tpxp_decoder_read(host, ctx, "", 0, &m.d));
  m.d.prefix = "model";
  m.d.rotary = 1;
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "num_local_experts", 8, &m.experts));
  m.moe_inter = m.d.intermediate;
  {
    const tpxp_sk_row tail[] = {
        TPXP_SK_NRM("norm", m.d.hidden, 0),
        TPXP_SK_MOD("rotary_emb", "rotary"),
    };
    const tpxp_stack stack = {.prefix = "model",
                              .embed = "embed_tokens",
                              .vocab = m.d.vocab,
                              .hidden = m.d.hidden,
                              .layers = m.d.layers,
                              .layer = moe_layer,
                              .user = &m,
                              .tail = tail,
                              .n_tail = TPXP_N_OF(tail),
                              .dtype = m.d.dtype,
                              .head = "lm_head",
                              .tie = m.d.tie};
    return tpxp_sk_stack(host, ctx, &stack);
  }
}

/* No plan of its own: upstream's HF-plan path (tpxp_refuse_to_hf_flow). */
static int moe_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    const tpx_plugin_plan_request *req) {
  return tpxp_refuse_to_hf_flow(
      host, ctx, "moe", req->architecture,
      "the class plan's lm_head 'colwise_gather_output', the experts' "
      "'packed_colwise' / 'moe_tp_experts'");
}

static const tpxp_arch_ops moe_ops[] = {
    {.bare = "MixtralForCausalLM", .plan = moe_plan, .skeleton = moe_skeleton},
};
static const tpxp_family moe = {"moe", moe_ops, TPXP_N_OF(moe_ops)};

TPXP_EXPORT_GET_PLAN(moe)
TPXP_EXPORT_SKELETON(moe)
