/* am_plugin.c — the tpx_automodel_moe family plugin: the mixture-of-experts
 * architectures NeMo Automodel 0.7.0 trains with its own model classes
 * (docs/MOE_FAMILIES.md "Automodel's own MoE classes"): DeepSeek-V3 and
 * V3.2, Qwen3-MoE, Qwen3-Next, GLM-4-MoE and -Lite, GLM-MoE-DSA, GPT-OSS,
 * MiniMax-M2, ERNIE-4.5-MoE, Ling-V2 (BailingMoeV2), Laguna, MiMo-V2
 * (-Flash, V2.5), Hy3 (HYV3), Mistral-4 (text) and Qwen3-Omni-MoE (its
 * thinker's text decoder: Automodel's class builds no vision or audio
 * tower), Kimi K2.5 (its MoonViT tower and projector, am_kimi.c, before
 * a DeepSeek-V3 decoder under model.language_model) and MiniMax-M3 (its
 * decoder, MTP blocks and vision tower, am_minimax3.c) and Inkling (its
 * decoder, audio and vision towers, am_inkling.c) and Step-3.7 / 3.6 (the
 * Step-3.5 decoder, MTP blocks and vision tower, am_step.c) and GLM-5-Next
 * (its decoder and vision tower, am_glm5.c).
 *
 * What it declares: the config-only skeleton under Automodel's names
 * (am_skeleton.c); traits saying upstream serves these with its MoE
 * implementation (moe_custom), which parameters are routed experts
 * (expert_param: the GroupedExperts tensors, dim 0 the expert) and the
 * checkpoint's other names for renamed tensors (name_alias, from each
 * family's state-dict adapter) and the routers' e_score_correction_bias
 * as a buffer (buffer: Automodel registers it as one; a checkpoint holds
 * it); the strategy's properties. get_plan refuses but for ERNIE-4.5-MoE
 * (its class's own _tp_plan, ep 1 only): Automodel 0.7.0 registers no
 * tensor-parallel plan for these classes, and the host refuses tp > 1 for
 * a moe_custom architecture as upstream does.
 * Not: the MoE mesh and ep itself (the host's). */
#include <string.h>

#include "am.h"

#define QUAL(mod, cls) "transformers.models." mod ".modeling_" mod "." cls

static const char *const k_archs[] = {
    "DeepseekV3ForCausalLM",
    "DeepseekV32ForCausalLM",
    "Qwen3MoeForCausalLM",
    "Qwen3NextForCausalLM",
    "Glm4MoeForCausalLM",
    "Glm4MoeLiteForCausalLM",
    "GlmMoeDsaForCausalLM",
    "GptOssForCausalLM",
    "MiniMaxM2ForCausalLM",
    "Ernie4_5_MoeForCausalLM",
    "BailingMoeV2ForCausalLM",
    "LagunaForCausalLM",
    "MiMoV2FlashForCausalLM",
    "MiMoV2ForCausalLM",
    "MiMoV25ForCausalLM",
    "HYV3ForCausalLM",
    "Mistral4ForCausalLM",
    "Qwen3OmniMoeForConditionalGeneration",
    "KimiK25VLForConditionalGeneration",
    "KimiK25ForConditionalGeneration",
    "MiniMaxM3SparseForConditionalGeneration",
    "InklingForConditionalGeneration",
    "Step3p7ForConditionalGeneration",
    "Step3p6ForConditionalGeneration",
    "Glm5NextForConditionalGeneration",
    QUAL("deepseek_v3", "DeepseekV3ForCausalLM"),
    QUAL("deepseek_v32", "DeepseekV32ForCausalLM"),
    QUAL("qwen3_moe", "Qwen3MoeForCausalLM"),
    QUAL("qwen3_next", "Qwen3NextForCausalLM"),
    QUAL("glm4_moe", "Glm4MoeForCausalLM"),
    QUAL("glm4_moe_lite", "Glm4MoeLiteForCausalLM"),
    QUAL("glm_moe_dsa", "GlmMoeDsaForCausalLM"),
    QUAL("gpt_oss", "GptOssForCausalLM"),
    QUAL("minimax_m2", "MiniMaxM2ForCausalLM"),
    QUAL("ernie4_5_moe", "Ernie4_5_MoeForCausalLM"),
    NULL};

#define MOE(cls)                                                               \
  "moe_custom=" cls, "expert_param=" cls ":model.layers.*.mlp.experts.*",      \
      "buffer=" cls ":model.layers.*.mlp.gate.e_score_correction_bias"
#define L "model.layers.*."
/* MiMo-V2: the attention sink is a float32 buffer Automodel keeps out of
 * the parameters. */
#define MIMO(cls) MOE(cls), "buffer=" cls ":" L "self_attn.attention_sink_bias"

/* Kimi K2.5 (both names MODEL_ARCH_MAPPING gives the class): its text
 * decoder under model.language_model, the layer lists for FSDP, the
 * checkpoint's names (no leading "model.", the projector's proj.0 / proj.2
 * as linear_1 / linear_2). */
#define KL "model.language_model.model.layers"
#define KIMI_TRAITS(cls)                                                       \
  "moe_custom=" cls, "expert_param=" cls ":" KL ".*.mlp.experts.*",            \
      "buffer=" cls ":" KL ".*.mlp.gate.e_score_correction_bias",              \
      "layers=" cls ":language:" KL,                                           \
      "layers=" cls ":vision:model.vision_tower.encoder.blocks",               \
      "name_alias=" cls ":language_model=model.language_model",                \
      "name_alias=" cls ":vision_tower=model.vision_tower",                    \
      "name_alias=" cls ":mm_projector.pre_norm=model.multi_modal_projector."  \
      "pre_norm",                                                              \
      "name_alias=" cls ":mm_projector.proj.0=model.multi_modal_projector."    \
      "linear_1",                                                              \
      "name_alias=" cls ":mm_projector.proj.2=model.multi_modal_projector."    \
      "linear_2"

/* MiniMax-M3: the decoder's checkpoint names under "language_model."
 * (block_sparse_moe for the router, its bias and the shared experts, the
 * indexer's projections and norms straight under self_attn), the MTP
 * blocks' likewise, the projector and patch merger at the top. The first
 * rule that matches a name applies: the specific ones first. */
#define M3C "MiniMaxM3SparseForConditionalGeneration"
#define M3L "language_model.model.layers.*."
#define M3T "language_model.model.mtp.layers.*.transformer_layer."
#define M3_BLOCK(ck, am)                                                       \
  "name_alias=" M3C ":" ck "block_sparse_moe.e_score_correction_bias=" am      \
  "mlp.gate.e_score_correction_bias",                                          \
      "name_alias=" M3C ":" ck "block_sparse_moe.gate=" am "mlp.gate",         \
      "name_alias=" M3C ":" ck "block_sparse_moe.shared_experts=" am           \
      "shared_experts",                                                        \
      "name_alias=" M3C ":" ck "self_attn.index_q_proj=" am                    \
      "self_attn.indexer.index_q_proj",                                        \
      "name_alias=" M3C ":" ck "self_attn.index_k_proj=" am                    \
      "self_attn.indexer.index_k_proj",                                        \
      "name_alias=" M3C ":" ck "self_attn.index_q_norm=" am                    \
      "self_attn.indexer.index_q_norm",                                        \
      "name_alias=" M3C ":" ck "self_attn.index_k_norm=" am                    \
      "self_attn.indexer.index_k_norm"
#define M3_TRAITS                                                              \
  MOE(M3C),                                                                    \
      "buffer=" M3C ":model.mtp.layers.*.transformer_layer.mlp.gate."          \
      "e_score_correction_bias",                                               \
      M3_BLOCK(M3L, "model.layers.*."),                                        \
      M3_BLOCK(M3T, "model.mtp.layers.*.transformer_layer."),                  \
      "name_alias=" M3C ":language_model.model=model",                         \
      "name_alias=" M3C ":language_model.lm_head=lm_head",                     \
      "name_alias=" M3C ":multi_modal_projector=vision_tower.multi_modal_"     \
      "projector",                                                             \
      "name_alias=" M3C ":patch_merge_mlp=vision_tower.patch_merge_mlp"

/* Inkling: the raw checkpoint's names (model.llm.*, model.audio.*,
 * model.visual.final_norm); the specific rules first. The tensors it
 * stores transposed and the vision stages (linear_N / norm_N) are sources
 * (am_inkling.c, am_inkling_vit.c). */
#define IKC "InklingForConditionalGeneration"
#define IKR "model.llm.layers.*."
#define IKN "model.language_model.layers.*."
#define IK_A(ck, am) "name_alias=" IKC ":" IKR ck "=" IKN am
#define IK_TRAITS                                                              \
  "moe_custom=" IKC, "expert_param=" IKC ":" IKN "mlp.experts.*",              \
      IK_A("attn.wq_du", "self_attn.q_proj"),                                  \
      IK_A("attn.wk_dv", "self_attn.k_proj"),                                  \
      IK_A("attn.wv_dv", "self_attn.v_proj"),                                  \
      IK_A("attn.wr_du", "self_attn.r_proj"),                                  \
      IK_A("attn.wo_ud", "self_attn.o_proj"),                                  \
      IK_A("attn.k_sconv", "self_attn.k_sconv._fp32_params"),                  \
      IK_A("attn.v_sconv", "self_attn.v_sconv._fp32_params"),                  \
      IK_A("attn", "self_attn"),                                               \
      IK_A("attn_sconv", "attn_sconv._fp32_params"),                           \
      IK_A("mlp_sconv", "mlp_sconv._fp32_params"),                             \
      IK_A("attn_norm", "input_layernorm"),                                    \
      IK_A("mlp_norm", "post_attention_layernorm"),                            \
      IK_A("mlp.gate.bias", "mlp.gate._fp32_params.e_score_correction_bias"),  \
      IK_A("mlp.gate", "mlp.gate"),                                            \
      IK_A("mlp.global_scale", "mlp.global_scale"),                            \
      "name_alias=" IKC ":model.llm.embed=model.language_model.embed_tokens",  \
      "name_alias=" IKC ":model.llm.embed_norm=model.language_model."          \
      "embed_norm",                                                            \
      "name_alias=" IKC ":model.llm.norm=model.language_model.norm",           \
      "name_alias=" IKC ":model.llm.unembed=lm_head",                          \
      "name_alias=" IKC ":model.audio.encoder=model.audio_tower.embed_audio_"  \
      "tokens.embed_audio_tokens",                                             \
      "name_alias=" IKC ":model.audio.final_norm=model.audio_tower.norm"

/* Step-3.7: the decoder under "model." in the checkpoint (the router bias
 * as moe.router_bias), the tower and projector at the top; the experts
 * and the MTP blocks (stored as layers num_hidden_layers..) are sources
 * (am_step.c). */
#define STEP_TRAITS(cls)                                                       \
  "moe_custom=" cls,                                                           \
      "expert_param=" cls ":model.language_model.layers.*.moe.experts.*",      \
      "buffer=" cls ":model.language_model.layers.*.moe.gate."                 \
      "e_score_correction_bias",                                               \
      "name_alias=" cls ":model.layers.*.moe.router_bias=model.language_"      \
      "model.layers.*.moe.gate.e_score_correction_bias",                       \
      "name_alias=" cls ":model.layers=model.language_model.layers",           \
      "name_alias=" cls ":model.embed_tokens=model.language_model.embed_"      \
      "tokens",                                                                \
      "name_alias=" cls ":model.norm=model.language_model.norm",               \
      "name_alias=" cls ":vision_model=model.vision_model",                    \
      "name_alias=" cls ":vit_large_projector=model.vit_large_projector"

/* GLM-5-Next: the checkpoint's hyper-connection and linear-attention
 * float32 names. */
#define G5C "Glm5NextForConditionalGeneration"
#define G5L "model.language_model.layers.*."
#define G5_A(ck, am) "name_alias=" G5C ":" G5L ck "=" G5L am
#define G5_TRAITS                                                              \
  "moe_custom=" G5C, "expert_param=" G5C ":" G5L "mlp.experts.*",              \
      "buffer=" G5C ":" G5L "mlp.gate.e_score_correction_bias",                \
      G5_A("self_attn.A_log", "self_attn._fp32_params.A_log"),                 \
      G5_A("self_attn.dt_bias", "self_attn._fp32_params.dt_bias"),             \
      G5_A("hc_attn_fn", "attn_hc.fn"),                                        \
      G5_A("hc_attn_base", "attn_hc._fp32_params.base"),                       \
      G5_A("hc_attn_scale", "attn_hc._fp32_params.scale"),                     \
      G5_A("hc_ffn_fn", "ffn_hc.fn"),                                          \
      G5_A("hc_ffn_base", "ffn_hc._fp32_params.base"),                         \
      G5_A("hc_ffn_scale", "ffn_hc._fp32_params.scale")

/* The state-dict adapters' renames, checkpoint name = Automodel's name (the
 * per-expert tensors are declared as sources by the skeleton instead). */
static const char *const k_traits[] = {
    MOE("DeepseekV3ForCausalLM"),
    MOE("DeepseekV32ForCausalLM"),
    MOE("Qwen3MoeForCausalLM"),
    MOE("Qwen3NextForCausalLM"),
    "name_alias=Qwen3NextForCausalLM:" L "mlp.shared_expert=" L
    "mlp.shared_experts",
    "name_alias=Qwen3NextForCausalLM:" L "linear_attn.A_log=" L
    "linear_attn._fp32_params.A_log",
    "name_alias=Qwen3NextForCausalLM:" L "linear_attn.dt_bias=" L
    "linear_attn._fp32_params.dt_bias",
    MOE("Glm4MoeForCausalLM"),
    MOE("Glm4MoeLiteForCausalLM"),
    MOE("GlmMoeDsaForCausalLM"),
    MOE("GptOssForCausalLM"),
    "name_alias=GptOssForCausalLM:" L "mlp.router=" L "mlp.gate",
    "name_alias=GptOssForCausalLM:" L "mlp.experts.gate_up_proj=" L
    "mlp.experts.gate_and_up_projs",
    "name_alias=GptOssForCausalLM:" L "mlp.experts.down_proj=" L
    "mlp.experts.down_projs",
    MOE("MiniMaxM2ForCausalLM"),
    "name_alias=MiniMaxM2ForCausalLM:" L
    "block_sparse_moe.e_score_correction_bias=" L
    "mlp.gate.e_score_correction_bias",
    "name_alias=MiniMaxM2ForCausalLM:" L "block_sparse_moe=" L "mlp",
    MOE("Ernie4_5_MoeForCausalLM"),
    "name_alias=Ernie4_5_MoeForCausalLM:" L "mlp.moe_statics=" L "mlp.gate",
    MOE("BailingMoeV2ForCausalLM"),
    "name_alias=BailingMoeV2ForCausalLM:model.word_embeddings=model.embed_"
    "tokens",
    "name_alias=BailingMoeV2ForCausalLM:" L "attention.dense=" L
    "self_attn.o_proj",
    "name_alias=BailingMoeV2ForCausalLM:" L "attention.query_layernorm=" L
    "self_attn.q_norm",
    "name_alias=BailingMoeV2ForCausalLM:" L "attention.key_layernorm=" L
    "self_attn.k_norm",
    "name_alias=BailingMoeV2ForCausalLM:" L "mlp.gate.expert_bias=" L
    "mlp.gate.e_score_correction_bias",
    MOE("LagunaForCausalLM"),
    "name_alias=LagunaForCausalLM:" L "mlp.experts.e_score_correction_bias=" L
    "mlp.gate.e_score_correction_bias",
    "name_alias=LagunaForCausalLM:" L "mlp.shared_expert=" L
    "mlp.shared_experts",
    MIMO("MiMoV2FlashForCausalLM"),
    MIMO("MiMoV2ForCausalLM"),
    MIMO("MiMoV25ForCausalLM"),
    MOE("HYV3ForCausalLM"),
    "name_alias=HYV3ForCausalLM:" L "mlp.router.gate=" L "mlp.gate",
    "name_alias=HYV3ForCausalLM:" L "mlp.expert_bias=" L
    "mlp.gate.e_score_correction_bias",
    "name_alias=HYV3ForCausalLM:" L "mlp.shared_mlp=" L "mlp.shared_experts",
    MOE("Mistral4ForCausalLM"),
    "name_alias=Mistral4ForCausalLM:language_model.model=model",
    "name_alias=Mistral4ForCausalLM:language_model.lm_head=lm_head",
    MOE("Qwen3OmniMoeForConditionalGeneration"),
    "name_alias=Qwen3OmniMoeForConditionalGeneration:thinker.model=model",
    "name_alias=Qwen3OmniMoeForConditionalGeneration:thinker.lm_head=lm_"
    "head",
    KIMI_TRAITS("KimiK25VLForConditionalGeneration"),
    KIMI_TRAITS("KimiK25ForConditionalGeneration"),
    M3_TRAITS,
    IK_TRAITS,
    STEP_TRAITS("Step3p7ForConditionalGeneration"),
    STEP_TRAITS("Step3p6ForConditionalGeneration"),
    G5_TRAITS,
    NULL};

int register_parallel_strategy(const tpx_plugin_host *host,
                               tpx_plugin_info *info) {
  static const tpxp_plugin_desc desc = {
      .name = "automodel_moe",
      .version = "1.0.0",
      .description =
          "NeMo Automodel 0.7.0's own MoE classes (MODEL_ARCH_MAPPING): "
          "DeepSeek-V3 / V3.2, Qwen3-MoE, Qwen3-Next, GLM-4-MoE / -Lite, "
          "GLM-MoE-DSA, GPT-OSS, MiniMax-M2, ERNIE-4.5-MoE, Ling-V2, Laguna, "
          "MiMo-V2 (-Flash, V2.5), Hy3, Mistral-4, Qwen3-Omni-MoE's "
          "thinker, Kimi K2.5 (MoonViT and DeepSeek-V3), MiniMax-M3, Inkling, "
          "Step-3.7. "
          "Config-only "
          "skeletons under Automodel's names with GroupedExperts' fused "
          "gate_and_up_projs [E, H, 2I] / down_projs [E, I, H]; the "
          "checkpoint's names as aliases and sources; expert parameters "
          "and moe_custom declared for expert parallelism. No plan: "
          "upstream registers no tensor-parallel plan for these classes",
      .architectures = k_archs,
      .plans = NULL,
      .traits = k_traits,
  };
  return tpxp_register(host, info, &desc);
}

/* No plan: Automodel 0.7.0 has none for its custom MoE classes. */
static int am_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                   const tpx_plugin_plan_request *req) {
  return tpxp_fail(host, ctx, TPX_PLUGIN_REFUSED,
                   "automodel_moe: declines '%s' on purpose: NeMo Automodel "
                   "0.7.0 serves it with its own MoE class and registers no "
                   "tensor-parallel plan for it (tp > 1 is refused upstream); "
                   "at tp 1 no plan applies",
                   req->architecture != NULL ? req->architecture : "(null)");
}

/* ERNIE-4.5-MoE: Automodel's class carries a _tp_plan ({"lm_head":
 * "colwise_rep"}), so at ep 1 the generic path takes get_hf_tp_shard_plan:
 * lm_head colwise with Shard(-1) outputs kept as DTensors, then the
 * embed_tokens entry it adds ("rowwise_rep": rowwise, replicated input).
 * Neither touches an expert or router, so _validate_moe_tp_plan lets it
 * through; with ep > 1 upstream refuses tp > 1 all the same (no plan in
 * PARALLELIZE_FUNCTIONS). */
static int ernie_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                      const tpx_plugin_plan_request *req) {
  static const tpxp_rule rules[] = {
      TPXP_COL("lm_head", .out = TPXP_SM1, .local = TPXP_KEEP_DTENSOR,
               .rooted = 1),
      TPXP_ROW("model.embed_tokens", .in = TPXP_R, .rooted = 1),
  };
  (void)req;
  TPXP_CHK(host->plan_set_function(ctx, "get_hf_tp_shard_plan (the class "
                                        "_tp_plan)"));
  return TPXP_ADD_RULES(host, ctx, "", rules);
}

static int am_strategy(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                       const char *arch) {
  static const char *const kv[][2] = {
      {"name", "Automodel custom MoE"},
      {"tensor_parallel",
       "none: NeMo Automodel 0.7.0 registers no tensor-parallel plan for its "
       "custom MoE classes and refuses tp > 1"},
      {"expert_parallel",
       "ep > 1: Automodel's MoE parallelizer; routed experts "
       "(mlp.experts.*) Shard(0) over ep on the MoE mesh (ep_shard, ep), "
       "Shard(1) over ep_shard"},
      {"fsdp", "ep 1: the generic FSDP2 path (one unit per decoder layer, "
               "embed_tokens and lm_head when untied, the root); ep > 1: "
               "the MoE parallelizer's units"},
  };
  size_t i;
  if (host->struct_size <= offsetof(tpx_plugin_host, strategy_set) ||
      host->strategy_set == NULL)
    return TPX_PLUGIN_OK;
  for (i = 0; i < TPXP_N_OF(kv); i++)
    TPXP_CHK(host->strategy_set(ctx, kv[i][0], kv[i][1]));
  if (tpxp_arch_is(arch, "Ernie4_5_MoeForCausalLM"))
    TPXP_CHK(host->strategy_set(
        ctx, "tensor_parallel",
        "ep 1: the class's _tp_plan through get_hf_tp_shard_plan (lm_head "
        "colwise, embed_tokens rowwise); ep > 1: none, tp > 1 refused"));
  return TPX_PLUGIN_OK;
}

#define ROW(cls)                                                               \
  {                                                                            \
    .bare = cls, .plan = am_plan, .skeleton = am_skeleton,                     \
    .strategy = am_strategy                                                    \
  }

static const tpxp_arch_ops am_ops[] = {
    ROW("DeepseekV3ForCausalLM"),
    ROW("DeepseekV32ForCausalLM"),
    ROW("Qwen3MoeForCausalLM"),
    ROW("Qwen3NextForCausalLM"),
    ROW("Glm4MoeForCausalLM"),
    ROW("Glm4MoeLiteForCausalLM"),
    ROW("GlmMoeDsaForCausalLM"),
    ROW("GptOssForCausalLM"),
    ROW("MiniMaxM2ForCausalLM"),
    {.bare = "Ernie4_5_MoeForCausalLM",
     .plan = ernie_plan,
     .skeleton = am_skeleton,
     .strategy = am_strategy},
    ROW("BailingMoeV2ForCausalLM"),
    ROW("LagunaForCausalLM"),
    ROW("MiMoV2FlashForCausalLM"),
    ROW("MiMoV2ForCausalLM"),
    ROW("MiMoV25ForCausalLM"),
    ROW("HYV3ForCausalLM"),
    ROW("Mistral4ForCausalLM"),
    ROW("Qwen3OmniMoeForConditionalGeneration"),
    ROW("KimiK25VLForConditionalGeneration"),
    ROW("KimiK25ForConditionalGeneration"),
    ROW("MiniMaxM3SparseForConditionalGeneration"),
    ROW("InklingForConditionalGeneration"),
    ROW("Step3p7ForConditionalGeneration"),
    ROW("Step3p6ForConditionalGeneration"),
    ROW("Glm5NextForConditionalGeneration"),
};
static const tpxp_family automodel_moe = {"automodel_moe", am_ops,
                                          TPXP_N_OF(am_ops)};

TPXP_EXPORT_GET_PLAN(automodel_moe)
TPXP_EXPORT_SKELETON(automodel_moe)
TPXP_EXPORT_STRATEGY(automodel_moe)
