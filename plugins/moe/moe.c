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
    "MixtralForCausalLM", "Qwen3MoeForCausalLM", NULL};

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
          "Hugging Face MoE classes: MixtralForCausalLM, Qwen3MoeForCausalLM "
          "(config-only skeletons with transformers-5 fused experts "
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

typedef struct moe_cfg {
  tpxp_decoder d;
  int64_t experts, moe_inter, step;
  int qwen;
} moe_cfg;

/* Layer i: attention, the sparse block (Mixtral: gate then experts;
 * Qwen3-MoE: experts then gate) or, on Qwen3-MoE's dense layers, a plain
 * gated MLP of intermediate_size, then the two norms. */
static int moe_layer(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const char *layer, int64_t i, const void *user) {
  const moe_cfg *m = user;
  const tpxp_decoder *d = &m->d;
  int64_t h = d->hidden, E = m->experts, in = d->intermediate;
  char f[TPXP_FQN_MAX];
  int sparse = 1;
  const tpxp_sk_row dense[] = {
      TPXP_SK_LIN("mlp.gate_proj", h, in, d->mlp_bias),
      TPXP_SK_LIN("mlp.up_proj", h, in, d->mlp_bias),
      TPXP_SK_LIN("mlp.down_proj", in, h, d->mlp_bias),
  };
  const tpxp_sk_row norms[] = {
      TPXP_SK_NRM("input_layernorm", h, 0),
      TPXP_SK_NRM("post_attention_layernorm", h, 0),
  };
  if (m->qwen)
    TPXP_CHK(qwen3_moe_sparse(host, ctx, i, E, m->step, &sparse));
  TPXP_CHK(tpxp_sk_self_attn(host, ctx, d, i, d->kv_heads));
  if (!sparse) {
    TPXP_CHK(TPXP_SK_ROWS(host, ctx, layer, dense, d->dtype));
  } else {
    tpxp_fmt(f, sizeof f, "%s.mlp", layer);
    TPXP_CHK(tpxp_sk_module(host, ctx, f, "other"));
    tpxp_fmt(f, sizeof f, "%s.mlp.gate", layer);
    if (!m->qwen)
      TPXP_CHK(tpxp_sk_router(host, ctx, f, E, h, d->dtype));
    tpxp_fmt(f, sizeof f, "%s.mlp.experts", layer);
    TPXP_CHK(tpxp_sk_fused_experts(host, ctx, f, E, h, m->moe_inter, d->dtype));
    tpxp_fmt(f, sizeof f, "%s.mlp.gate", layer);
    if (m->qwen)
      TPXP_CHK(tpxp_sk_router(host, ctx, f, E, h, d->dtype));
  }
  return TPXP_SK_ROWS(host, ctx, layer, norms, d->dtype);
}

/* One MoE decoder stack in transformers' module order: embed_tokens,
 * layers.* {self_attn, mlp, input_layernorm, post_attention_layernorm},
 * norm, rotary_emb, lm_head. */
static int moe_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                        const char *arch) {
  moe_cfg m;
  memset(&m, 0, sizeof m);
  m.qwen = tpxp_arch_is(arch, "Qwen3MoeForCausalLM");
  m.step = 1;
  TPXP_CHK(tpxp_decoder_read(host, ctx, "", 0, &m.d));
  m.d.prefix = "model";
  m.d.rotary = 1;
  m.d.qk_norm = m.qwen;
  if (m.qwen) {
    const tpxp_key keys[] = {
        TPXP_KEY_I("num_experts", &m.experts, 128),
        TPXP_KEY_I("moe_intermediate_size", &m.moe_inter, 768),
        TPXP_KEY_I("decoder_sparse_step", &m.step, 1),
    };
    TPXP_CHK(TPXP_CFG_READ(host, ctx, "", keys));
  } else {
    /* Mixtral: every layer is sparse; intermediate_size is per expert. */
    TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "num_local_experts", 8, &m.experts));
    m.moe_inter = m.d.intermediate;
  }
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
    {.bare = "Qwen3MoeForCausalLM", .plan = moe_plan, .skeleton = moe_skeleton},
};
static const tpxp_family moe = {"moe", moe_ops, TPXP_N_OF(moe_ops)};

TPXP_EXPORT_GET_PLAN(moe)
TPXP_EXPORT_SKELETON(moe)
