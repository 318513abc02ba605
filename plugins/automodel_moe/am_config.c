/* am_config.c — the architectures NeMo Automodel 0.7.0 trains with its
 * own MoE classes, as a table of config keys and module-tree features, and
 * the config reads that turn a Hugging Face config.json into an am_cfg
 * (layer counts and sizes, which layers are MoE, which attention). Not the
 * module tree itself (am_skeleton.c). */
#include <string.h>

#include "am.h"

/* Rows in MODEL_ARCH_MAPPING order. Config keys are transformers 5.25's
 * (Qwen3-MoE's num_experts is written num_local_experts there; the old name
 * is read too). */
static const am_arch k_archs[] = {
    {.bare = "DeepseekV3ForCausalLM",
     .tie_support = AM_TIE_UNTIED,
     .attn = AM_ATTN_MLA,
     .sparse = AM_SPARSE_FIRST_K,
     .experts_key = "n_routed_experts",
     .moe_inter_key = "moe_intermediate_size",
     .shared_key = "n_shared_experts"},
    {.bare = "DeepseekV32ForCausalLM",
     .tie_support = AM_TIE_UNTIED,
     .attn = AM_ATTN_MLA,
     .sparse = AM_SPARSE_FIRST_K,
     .experts_key = "n_routed_experts",
     .moe_inter_key = "moe_intermediate_size",
     .shared_key = "n_shared_experts",
     .indexer = 1},
    {.bare = "Qwen3MoeForCausalLM",
     .tie_support = AM_TIE_UNTIED,
     .attn = AM_ATTN_GQA,
     .sparse = AM_SPARSE_STEP,
     .experts_key = "num_local_experts",
     .moe_inter_key = "moe_intermediate_size",
     .bias_key = "attention_bias",
     .o_bias = 1,
     .qk_norm = 1},
    {.bare = "Qwen3NextForCausalLM",
     .tie_support = AM_TIE_UNTIED,
     .attn = AM_ATTN_HYBRID,
     .sparse = AM_SPARSE_STEP,
     .experts_key = "num_local_experts",
     .moe_inter_key = "moe_intermediate_size",
     .shared_key = "",
     .shared_inter_key = "shared_expert_intermediate_size",
     .shared_gate = 1,
     .qk_norm = 1,
     .fp32_linear_attn = 1},
    {.bare = "Glm4MoeForCausalLM",
     .tie_support = AM_TIE_UNTIED,
     .attn = AM_ATTN_GQA,
     .sparse = AM_SPARSE_FIRST_K,
     .experts_key = "n_routed_experts",
     .moe_inter_key = "moe_intermediate_size",
     .shared_key = "n_shared_experts",
     .bias_key = "attention_bias",
     .qk_norm = 1,
     .qk_norm_key = "use_qk_norm"},
    {.bare = "Glm4MoeLiteForCausalLM",
     .tie_support = AM_TIE_UNTIED,
     .attn = AM_ATTN_MLA,
     .sparse = AM_SPARSE_LAYER_TYPES,
     .experts_key = "n_routed_experts",
     .moe_inter_key = "moe_intermediate_size",
     .shared_key = "n_shared_experts"},
    {.bare = "GlmMoeDsaForCausalLM",
     .tie_support = AM_TIE_UNTIED,
     .attn = AM_ATTN_MLA,
     .sparse = AM_SPARSE_LAYER_TYPES,
     .experts_key = "n_routed_experts",
     .moe_inter_key = "moe_intermediate_size",
     .shared_key = "n_shared_experts",
     .indexer = 1},
    {.bare = "GptOssForCausalLM",
     .tie_support = AM_TIE_UNTIED,
     .attn = AM_ATTN_GQA,
     .sparse = AM_SPARSE_ALL,
     .experts_key = "num_local_experts",
     .o_bias = 1,
     .gpt_oss = 1,
     .fused_in_ckpt = 1},
    {.bare = "MiniMaxM2ForCausalLM",
     .tie_support = AM_TIE_UNTIED,
     .attn = AM_ATTN_GQA,
     .sparse = AM_SPARSE_ALL,
     .experts_key = "num_local_experts",
     .gate_dtype = AM_F32,
     .qk_norm = 2,
     .qk_norm_key = "use_qk_norm",
     .minimax_names = 1},
    {.bare = "Ernie4_5_MoeForCausalLM",
     .tie_support = AM_TIE_TIED,
     .attn = AM_ATTN_GQA,
     .sparse = AM_SPARSE_ERNIE,
     .experts_key = "moe_num_experts",
     .moe_inter_key = "moe_intermediate_size",
     .shared_key = "moe_num_shared_experts",
     .gate_dtype = AM_F32,
     .bias_key = "use_bias",
     .o_bias = 1,
     .ernie = 1,
     .tie_default = 1},
    /* Ling 2.0 (Automodel's own BailingMoeV2Config, model_type bailing_moe):
     * q/k/v split out of the checkpoint's fused query_key_value. */
    {.bare = "BailingMoeV2ForCausalLM",
     .tie_support = AM_TIE_UNTIED,
     .attn = AM_ATTN_GQA,
     .sparse = AM_SPARSE_FIRST_K,
     .experts_key = "num_experts",
     .moe_inter_key = "moe_intermediate_size",
     .shared_key = "num_shared_experts",
     .bias_key = "use_qkv_bias",
     .o_bias_key = "use_bias",
     .qk_norm = 1,
     .qk_norm_key = "use_qk_norm",
     .qk_norm_default = 1,
     .fused_qkv_ckpt = 1},
    /* Laguna (Automodel's LagunaConfig): q/k norms always, qkv_bias on
     * q/k/v, attention_bias on o_proj, shared experts of
     * shared_expert_intermediate_size. */
    {.bare = "LagunaForCausalLM",
     .tie_support = AM_TIE_UNTIED,
     .attn = AM_ATTN_GQA,
     .sparse = AM_SPARSE_LAGUNA,
     .experts_key = "num_experts",
     .moe_inter_key = "moe_intermediate_size",
     .shared_key = "",
     .shared_inter_key = "shared_expert_intermediate_size",
     .bias_key = "qkv_bias",
     .o_bias_key = "attention_bias",
     .qk_norm = 1,
     .laguna = 1},
    /* MiMo-V2-Flash, and MiMo-V2.5 checkpoints (model type mimo_v2) on the
     * same class; MiMo-V2.5's own class (MiMoV25ForCausalLM). */
    {.bare = "MiMoV2FlashForCausalLM",
     .tie_support = AM_TIE_UNTIED,
     .attn = AM_ATTN_MIMO,
     .sparse = AM_SPARSE_FREQ,
     .experts_key = "n_routed_experts",
     .moe_inter_key = "moe_intermediate_size",
     .shared_key = "n_shared_experts",
     .bias_key = "attention_bias"},
    {.bare = "MiMoV2ForCausalLM",
     .tie_support = AM_TIE_UNTIED,
     .attn = AM_ATTN_MIMO,
     .sparse = AM_SPARSE_FREQ,
     .experts_key = "n_routed_experts",
     .moe_inter_key = "moe_intermediate_size",
     .shared_key = "n_shared_experts",
     .bias_key = "attention_bias"},
    {.bare = "MiMoV25ForCausalLM",
     .tie_support = AM_TIE_UNTIED,
     .tie_class = "MiMoV2ForCausalLM",
     .attn = AM_ATTN_MIMO,
     .sparse = AM_SPARSE_FREQ,
     .experts_key = "n_routed_experts",
     .moe_inter_key = "moe_intermediate_size",
     .shared_key = "n_shared_experts",
     .bias_key = "attention_bias",
     .mimo_fused = 1},
    /* Tencent Hy3 (Automodel's HYV3Config): the class defaults apply to
     * absent keys (one shared expert, first layer dense). */
    {.bare = "HYV3ForCausalLM",
     .tie_support = AM_TIE_UNTIED,
     .attn = AM_ATTN_GQA,
     .sparse = AM_SPARSE_FIRST_K,
     .experts_key = "num_experts",
     .moe_inter_key = "moe_intermediate_size",
     .shared_key = "num_shared_experts",
     .shared_default = 1,
     .first_k_default = 1,
     .bias_key = "attention_bias",
     .o_bias = 1,
     .qk_norm = 1},
    /* Mistral Small 4 (text): DeepSeek-V3's MLA and MoE; the checkpoint
     * under language_model., experts fused as transformers stores them. */
    {.bare = "Mistral4ForCausalLM",
     .tie_support = AM_TIE_UNTIED,
     .attn = AM_ATTN_MLA,
     .sparse = AM_SPARSE_FIRST_K,
     .experts_key = "n_routed_experts",
     .moe_inter_key = "moe_intermediate_size",
     .shared_key = "n_shared_experts",
     .ckpt_prefix = "language_model."},
    /* Qwen3-Omni-MoE's thinker (Automodel's class for the whole Omni
     * config): a Qwen3-MoE text decoder read from thinker_config.
     * text_config; Automodel builds no vision or audio tower. The
     * checkpoint holds it under "thinker.". */
    {.bare = "Qwen3OmniMoeForConditionalGeneration",
     .tie_support = AM_TIE_UNTIED,
     .tie_class = "Qwen3OmniMoeThinkerForConditionalGeneration",
     .attn = AM_ATTN_GQA,
     .sparse = AM_SPARSE_STEP,
     .experts_key = "num_experts",
     .moe_inter_key = "moe_intermediate_size",
     .bias_key = "attention_bias",
     .o_bias = 1,
     .qk_norm = 1,
     .sec = "thinker_config.text_config",
     .tie_key = "thinker_config.tie_word_embeddings",
     .src_prefix = "thinker."},
    /* Kimi K2.5 (Automodel's KimiK25VLConfig): DeepSeek-V3 read from
     * text_config under model.language_model, after the MoonViT tower and
     * projector; the checkpoint drops the leading "model.". */
    {.bare = "KimiK25VLForConditionalGeneration",
     .tie_support = AM_TIE_UNTIED,
     .attn = AM_ATTN_MLA,
     .sparse = AM_SPARSE_FIRST_K,
     .experts_key = "n_routed_experts",
     .moe_inter_key = "moe_intermediate_size",
     .shared_key = "n_shared_experts",
     .sec = "text_config",
     .tie_key = "tie_word_embeddings",
     .src_strip = "model.",
     .stack = "model.language_model.model",
     .head = "model.language_model.lm_head",
     .kimi_vision = 1},
    {.bare = "KimiK25ForConditionalGeneration",
     .tie_support = AM_TIE_UNTIED,
     .tie_class = "KimiK25VLForConditionalGeneration",
     .attn = AM_ATTN_MLA,
     .sparse = AM_SPARSE_FIRST_K,
     .experts_key = "n_routed_experts",
     .moe_inter_key = "moe_intermediate_size",
     .shared_key = "n_shared_experts",
     .sec = "text_config",
     .tie_key = "tie_word_embeddings",
     .src_strip = "model.",
     .stack = "model.language_model.model",
     .head = "model.language_model.lm_head",
     .kimi_vision = 1},
    /* MiniMax-M3 (Automodel's MiniMaxM3VLConfig): its own decoder, MTP
     * blocks and vision tower (am_minimax3.c), read from text_config; the
     * checkpoint holds the decoder under "language_model." with
     * MiniMax-M2's expert names. */
    {.bare = "MiniMaxM3SparseForConditionalGeneration",
     .tie_support = AM_TIE_UNTIED,
     .attn = AM_ATTN_GQA,
     .sparse = AM_SPARSE_ALL,
     .experts_key = "num_local_experts",
     .gate_dtype = AM_F32,
     .qk_norm = 1,
     .qk_norm_key = "use_qk_norm",
     .qk_norm_default = 1,
     .minimax_names = 1,
     .sec = "text_config",
     .tie_key = "tie_word_embeddings",
     .src_prefix = "language_model.",
     .minimax3 = 1},
    /* Inkling (Automodel's InklingConfig): its own decoder, audio and
     * vision towers (am_inkling.c), read from text_config. */
    {.bare = "InklingForConditionalGeneration",
     .tie_support = AM_TIE_UNTIED,
     .attn = AM_ATTN_GQA,
     .sparse = AM_SPARSE_ALL,
     .experts_key = "n_routed_experts",
     .sec = "text_config",
     .tie_key = "tie_word_embeddings",
     .inkling = 1},
    /* Step-3.7 (Automodel's Step3p7Config; Step3p6 checkpoints name the same
     * class): the Step-3.5 decoder, MTP blocks and vision tower
     * (am_step.c), read from text_config. */
    {.bare = "Step3p7ForConditionalGeneration",
     .tie_support = AM_TIE_UNTIED,
     .attn = AM_ATTN_GQA,
     .sparse = AM_SPARSE_ALL,
     .experts_key = "moe_num_experts",
     .moe_inter_key = "moe_intermediate_size",
     .sec = "text_config",
     .tie_key = "tie_word_embeddings",
     .step = 1},
    {.bare = "Step3p6ForConditionalGeneration",
     .tie_support = AM_TIE_UNTIED,
     .tie_class = "Step3p7ForConditionalGeneration",
     .attn = AM_ATTN_GQA,
     .sparse = AM_SPARSE_ALL,
     .experts_key = "moe_num_experts",
     .moe_inter_key = "moe_intermediate_size",
     .sec = "text_config",
     .tie_key = "tie_word_embeddings",
     .step = 1},
    /* GLM-5-Next (Automodel's Glm5NextConfig): its decoder (linear or
     * DeepSeek sparse attention, hyper-connections) and vision tower
     * (am_glm5.c), read from text_config; the checkpoint's names are
     * Automodel's but for the hyper-connections' and A_log / dt_bias. */
    {.bare = "Glm5NextForConditionalGeneration",
     .tie_support = AM_TIE_UNTIED,
     .attn = AM_ATTN_GQA,
     .sparse = AM_SPARSE_ALL,
     .experts_key = "n_routed_experts",
     .moe_inter_key = "moe_intermediate_size",
     .shared_key = "n_shared_experts",
     .shared_default = 1,
     .sec = "text_config",
     .tie_key = "tie_word_embeddings",
     .glm5 = 1},
};

const char *am_key(const am_cfg *c, const char *key, char *buf, size_t n) {
  if (c->a->sec == NULL)
    return key;
  tpxp_fmt(buf, n, "%s.%s", c->a->sec, key);
  return buf;
}

const am_arch *am_archs(size_t *n) {
  *n = TPXP_N_OF(k_archs);
  return k_archs;
}

const am_arch *am_find(const char *arch) {
  size_t i;
  for (i = 0; arch != NULL && i < TPXP_N_OF(k_archs); i++)
    if (tpxp_arch_is(arch, k_archs[i].bare))
      return &k_archs[i];
  return NULL;
}

static int read_mla(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    am_cfg *c) {
  const tpxp_key keys[] = {
      TPXP_KEY_I("q_lora_rank", &c->q_lora, 0),
      TPXP_KEY_Z("kv_lora_rank", &c->kv_lora, 512),
      TPXP_KEY_Z("qk_nope_head_dim", &c->qk_nope, 128),
      TPXP_KEY_Z("qk_rope_head_dim", &c->qk_rope, 64),
      TPXP_KEY_Z("v_head_dim", &c->v_head, 128),
      TPXP_KEY_Z("index_n_heads", &c->idx_heads, 64),
      TPXP_KEY_Z("index_head_dim", &c->idx_dim, 128),
  };
  return TPXP_CFG_READ(host, ctx, c->a->sec != NULL ? c->a->sec : "", keys);
}

static int read_linear_attn(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                            am_cfg *c) {
  const tpxp_key keys[] = {
      TPXP_KEY_Z("linear_num_key_heads", &c->lin_kh, 16),
      TPXP_KEY_Z("linear_key_head_dim", &c->lin_kd, 128),
      TPXP_KEY_Z("linear_num_value_heads", &c->lin_vh, 32),
      TPXP_KEY_Z("linear_value_head_dim", &c->lin_vd, 128),
      TPXP_KEY_Z("linear_conv_kernel_dim", &c->conv_k, 4),
  };
  return TPXP_CFG_READ(host, ctx, c->a->sec != NULL ? c->a->sec : "", keys);
}

/* Routed experts, their size, and the shared experts' total width. */
static int read_moe(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    const am_arch *a, am_cfg *c) {
  int64_t shared = 0;
  char k[TPXP_FQN_MAX];
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, am_key(c, a->experts_key, k, sizeof k),
                            -1, &c->experts));
  if (c->experts < 0 && strcmp(a->experts_key, "num_local_experts") == 0)
    TPXP_CHK(tpxp_cfg_int_opt(host, ctx, am_key(c, "num_experts", k, sizeof k),
                              -1, &c->experts));
  if (c->experts <= 0)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "automodel_moe: %s: config %s must be a positive expert "
                     "count",
                     a->bare, a->experts_key);
  c->moe_inter = c->inter;
  if (a->moe_inter_key != NULL)
    TPXP_CHK(tpxp_cfg_int_req(
        host, ctx, am_key(c, a->moe_inter_key, k, sizeof k), &c->moe_inter));
  if (a->shared_key != NULL && a->shared_key[0] != '\0')
    TPXP_CHK(tpxp_cfg_int_opt(host, ctx, am_key(c, a->shared_key, k, sizeof k),
                              a->shared_default, &shared));
  c->shared_inter = shared * c->moe_inter;
  if (a->shared_inter_key != NULL)
    TPXP_CHK(tpxp_cfg_int_opt(host, ctx,
                              am_key(c, a->shared_inter_key, k, sizeof k), 0,
                              &c->shared_inter));
  if (c->moe_inter <= 0 || c->shared_inter < 0)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "automodel_moe: %s: expert sizes must be positive "
                     "(moe_intermediate_size %lld, shared %lld)",
                     a->bare, (long long)c->moe_inter,
                     (long long)c->shared_inter);
  return TPX_PLUGIN_OK;
}

/* Automodel's class refuses a tie_word_embeddings it cannot build, as read
 * from the controlling flag: the top level's when present, else the row's
 * (thinker_config's for Qwen3-Omni), else the class default. */
static int tie_refusal(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                       const am_cfg *c) {
  const am_arch *a = c->a;
  const char *cls = a->tie_class != NULL ? a->tie_class : a->bare;
  int tied = c->tie;
  if (a->tie_support == AM_TIE_BOTH)
    return TPX_PLUGIN_OK;
  if (host->config_has(ctx, "tie_word_embeddings"))
    TPXP_CHK(tpxp_cfg_bool_opt(host, ctx, "tie_word_embeddings", 0, &tied));
  if (a->tie_support == AM_TIE_UNTIED && tied)
    return tpxp_fail(host, ctx, TPX_PLUGIN_REFUSED,
                     "automodel_moe: %s has separate input and output "
                     "embeddings and does not support tie_word_embeddings="
                     "True. The Hugging Face default for this architecture "
                     "is untied; set tie_word_embeddings=False.",
                     cls);
  if (a->tie_support == AM_TIE_TIED && !tied)
    return tpxp_fail(host, ctx, TPX_PLUGIN_REFUSED,
                     "automodel_moe: %s ties its input and output embeddings "
                     "and does not support tie_word_embeddings=False. The "
                     "Hugging Face default for this architecture is tied; set "
                     "tie_word_embeddings=True.",
                     cls);
  return TPX_PLUGIN_OK;
}

int am_read(const tpx_plugin_host *host, tpx_plugin_ctx *ctx, const am_arch *a,
            am_cfg *c) {
  int64_t hd = 0;
  char k[TPXP_FQN_MAX];
  memset(c, 0, sizeof *c);
  c->a = a;
  {
    const tpxp_key keys[] = {
        {.key = "num_hidden_layers",
         .type = TPXP_KEY_INT,
         .out = &c->layers,
         .required = 1},
        {.key = "hidden_size",
         .type = TPXP_KEY_SIZE,
         .out = &c->hidden,
         .required = 1},
        {.key = "num_attention_heads",
         .type = TPXP_KEY_SIZE,
         .out = &c->heads,
         .required = 1},
        {.key = "vocab_size",
         .type = TPXP_KEY_SIZE,
         .out = &c->vocab,
         .required = 1},
        TPXP_KEY_I("num_key_value_heads", &c->kv_heads, 0),
        TPXP_KEY_I("head_dim", &hd, 0),
        TPXP_KEY_I("intermediate_size", &c->inter, 0),
        TPXP_KEY_B("tie_word_embeddings", &c->tie, a->tie_default),
    };
    TPXP_CHK(TPXP_CFG_READ(host, ctx, a->sec != NULL ? a->sec : "", keys));
  }
  if (a->tie_key != NULL)
    TPXP_CHK(tpxp_cfg_bool_opt(host, ctx, a->tie_key, a->tie_default, &c->tie));
  TPXP_CHK(tie_refusal(host, ctx, c));
  if (c->layers < 0)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "automodel_moe: config num_hidden_layers must be >= 0");
  if (c->kv_heads <= 0)
    c->kv_heads = c->heads;
  c->head_dim = hd > 0 ? hd : c->hidden / c->heads;
  if (a->bias_key != NULL)
    TPXP_CHK(tpxp_cfg_bool_opt(host, ctx, am_key(c, a->bias_key, k, sizeof k),
                               0, &c->attn_bias));
  c->use_bias = a->ernie ? c->attn_bias : 0;
  c->o_bias = a->o_bias && c->attn_bias;
  if (a->o_bias_key != NULL)
    TPXP_CHK(tpxp_cfg_bool_opt(host, ctx, am_key(c, a->o_bias_key, k, sizeof k),
                               0, &c->o_bias));
  c->qk_norm = a->qk_norm;
  if (a->qk_norm && a->qk_norm_key != NULL) {
    int on = 0;
    TPXP_CHK(tpxp_cfg_bool_opt(host, ctx,
                               am_key(c, a->qk_norm_key, k, sizeof k),
                               a->qk_norm_default, &on));
    c->qk_norm = on ? a->qk_norm : 0;
  }
  if (a->laguna)
    TPXP_CHK(am_laguna_refusals(host, ctx));
  if (a->attn == AM_ATTN_MLA)
    TPXP_CHK(read_mla(host, ctx, c));
  if (a->attn == AM_ATTN_HYBRID)
    TPXP_CHK(read_linear_attn(host, ctx, c));
  return read_moe(host, ctx, a, c);
}

static int first_k(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                   const am_cfg *c, int64_t i, int *sparse) {
  int64_t k = 0;
  char key[TPXP_FQN_MAX];
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx,
                            am_key(c, "first_k_dense_replace", key, sizeof key),
                            c->a->first_k_default, &k));
  *sparse = i >= k;
  return TPX_PLUGIN_OK;
}

int am_layer_sparse(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    const am_cfg *c, int64_t i, int *sparse) {
  const char *s = NULL;
  int64_t step = 1, start = 0, end = 0, every = 1;
  int only = 0;
  char k[TPXP_FQN_MAX];
  switch (c->a->sparse) {
  case AM_SPARSE_ALL: *sparse = 1; return TPX_PLUGIN_OK;
  case AM_SPARSE_FIRST_K: return first_k(host, ctx, c, i, sparse);
  case AM_SPARSE_LAYER_TYPES:
    TPXP_CHK(am_list_str(host, ctx, "mlp_layer_types", i, &s));
    if (s == NULL)
      return first_k(host, ctx, c, i, sparse);
    *sparse = strcmp(s, "sparse") == 0;
    return TPX_PLUGIN_OK;
  case AM_SPARSE_STEP:
    TPXP_CHK(am_list_has(host, ctx, am_key(c, "mlp_only_layers", k, sizeof k),
                         i, &only));
    TPXP_CHK(tpxp_cfg_int_opt(
        host, ctx, am_key(c, "decoder_sparse_step", k, sizeof k), 1, &step));
    *sparse = !only && step > 0 && (i + 1) % step == 0;
    return TPX_PLUGIN_OK;
  case AM_SPARSE_LAGUNA: return am_laguna_sparse(host, ctx, c, i, sparse);
  case AM_SPARSE_FREQ: return am_mimo_sparse(host, ctx, c, i, sparse);
  case AM_SPARSE_ERNIE:
    TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "moe_layer_interval", 1, &every));
    TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "moe_layer_start_index", 0, &start));
    TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "moe_layer_end_index", c->layers - 1,
                              &end));
    if (end < 0)
      end = c->layers - 1;
    *sparse = every > 0 && (i + 1) % every == 0 && i >= start && i <= end;
    return TPX_PLUGIN_OK;
  }
  return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                   "automodel_moe: no sparse-layer rule for %s", c->a->bare);
}

int am_layer_linear(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    const am_cfg *c, int64_t i, int *linear) {
  const char *s = NULL;
  int64_t every = 4;
  *linear = 0;
  if (c->a->attn != AM_ATTN_HYBRID)
    return TPX_PLUGIN_OK;
  TPXP_CHK(am_list_str(host, ctx, "layer_types", i, &s));
  if (s != NULL) {
    *linear = strcmp(s, "linear_attention") == 0;
    return TPX_PLUGIN_OK;
  }
  /* transformers' default: every full_attention_interval-th is full. */
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "full_attention_interval", 4, &every));
  *linear = every <= 0 || (i + 1) % every != 0;
  return TPX_PLUGIN_OK;
}
