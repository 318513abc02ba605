/* deepseek.c — the tpx_deepseek family plugin: DeepseekV4ForCausalLM as
 * Automodel runs it (docs/SEMANTICS.md "Family plans"): the DeepseekV4
 * strategy, a Default subclass whose fully_shard_deepseek_v4 keeps a set of
 * reference-sensitive parameters in fp32 (tpx_plugin_fp32_params), and the
 * plan upstream selects: the class is not in PARALLELIZE_FUNCTIONS, so
 * get_hf_tp_shard_plan runs, cannot translate transformers-5's styles
 * (lm_head 'colwise_gather_output', experts 'packed_colwise' /
 * 'moe_tp_experts') and the default base plan is used. Before any plan,
 * validate_tp_mesh asserts num_key_value_heads (1, shared-KV MQA) % tp == 0,
 * so upstream refuses every tp > 1: the host's heads-not-divisible error.
 *
 * Skeleton: transformers' deepseek_v4 model (5.24): MQA attention with
 * low-rank q, grouped output projection and per-head sinks, the HCA / CSA
 * compressors (CSA with its Lightning Indexer), fused routed experts, a
 * shared expert, and the manifold-constrained hyper-connections (attn_hc,
 * ffn_hc per layer, hc_head at the end). Parameters transformers keeps in
 * fp32 (_keep_in_fp32_modules_strict) are declared float32.
 * Not: the MTP layers (not instantiated by transformers), buffers (the hash
 * router's tid2eid, e_score_correction_bias), expert parallelism. */
#include <stdio.h>
#include <string.h>

#include "tpxp_common.h"

#define F32 "float32"

static const char *const k_archs[] = {
    "transformers.models.deepseek_v4.modeling_deepseek_v4."
    "DeepseekV4ForCausalLM",
    "DeepseekV4ForCausalLM", NULL};

/* The family facts (docs/PLUGIN_ABI.md "Traits"): the layer lists of the
 * DeepSeek-V3-based Kimi VLMs (NeMo Automodel 0.7.0's layer table). */
#define KIMI_VL(cls)                                                           \
  "layers=" cls ":language:model.language_model.layers",                       \
      "layers=" cls ":vision:model.vision_tower.encoder.blocks"
static const char *const k_family_traits[] = {
    KIMI_VL("KimiVLForConditionalGeneration"),
    KIMI_VL("KimiK25VLForConditionalGeneration"), NULL};
#undef KIMI_VL

int register_parallel_strategy(const tpx_plugin_host *host,
                               tpx_plugin_info *info) {
  static const tpxp_plugin_desc desc = {
      .name = "deepseek",
      .version = "1.0.0",
      .description =
          "DeepSeek-V4 (DeepseekV4ForCausalLM): the DeepseekV4 strategy's "
          "fp32 parameters (hyper-connections attn_hc / ffn_hc / hc_head, "
          "lm_head, attention sinks, compressor and indexer projections and "
          "position biases); upstream's plan path (HF plan untranslatable, "
          "default base plan) and its validate_tp_mesh refusal of tp > 1 "
          "(one KV head); config-only skeleton with fused routed experts",
      .architectures = k_archs,
      .plans = NULL,
      .traits = k_family_traits,
  };
  return tpxp_register(host, info, &desc);
}

/* ---- fp32 parameters ---- */

/* fully_shard_deepseek_v4's module suffixes, in transformers' names:
 * attn_hc, ffn_hc, hc_head, lm_head, and (Automodel's native names in
 * brackets) self_attn.sinks [sinks_param], self_attn.compressor.kv_proj
 * [wkv], .gate_proj [wgate], .position_bias [ape_param], and the same three
 * under compressor.indexer. */
static const char *const k_fp32[] = {
    "model.layers.*.attn_hc.*",
    "model.layers.*.ffn_hc.*",
    "model.hc_head.*",
    "lm_head.weight",
    "model.layers.*.self_attn.sinks",
    "model.layers.*.self_attn.compressor.kv_proj.weight",
    "model.layers.*.self_attn.compressor.gate_proj.weight",
    "model.layers.*.self_attn.compressor.position_bias",
    "model.layers.*.self_attn.compressor.indexer.kv_proj.weight",
    "model.layers.*.self_attn.compressor.indexer.gate_proj.weight",
    "model.layers.*.self_attn.compressor.indexer.position_bias",
};

/* ---- skeleton ---- */

typedef struct dsv4 {
  int64_t layers, hidden, heads, head_dim, q_rank, vocab, experts, moe_inter;
  int64_t hc, o_groups, o_rank, idx_heads, idx_dim, rate_csa, rate_hca;
  int tie;
} dsv4;

enum { SLIDING, CSA, HCA };

/* DeepseekV4Config's fields and defaults (the DeepSeek-V4-Flash sizes). */
static int dsv4_read(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     dsv4 *c) {
  int st;
  int64_t legacy;
  const tpxp_key keys[] = {
      TPXP_KEY_I("num_hidden_layers", &c->layers, 43),
      TPXP_KEY_I("hidden_size", &c->hidden, 4096),
      TPXP_KEY_I("num_attention_heads", &c->heads, 64),
      TPXP_KEY_I("head_dim", &c->head_dim, 512),
      TPXP_KEY_I("q_lora_rank", &c->q_rank, 1024),
      TPXP_KEY_I("vocab_size", &c->vocab, 129280),
      TPXP_KEY_I("n_routed_experts", &c->experts, 256),
      TPXP_KEY_I("moe_intermediate_size", &c->moe_inter, 2048),
      TPXP_KEY_I("hc_mult", &c->hc, 4),
      TPXP_KEY_I("o_groups", &c->o_groups, 8),
      TPXP_KEY_I("o_lora_rank", &c->o_rank, 1024),
      TPXP_KEY_I("index_n_heads", &c->idx_heads, 64),
      TPXP_KEY_I("index_head_dim", &c->idx_dim, 128),
      TPXP_KEY_I("compress_rates.compressed_sparse_attention", &c->rate_csa, 4),
      TPXP_KEY_I("compress_rates.heavily_compressed_attention", &c->rate_hca,
                 128),
  };
  TPXP_CHK(TPXP_CFG_READ(host, ctx, "", keys));
  /* Legacy top-level rates fold in, as __post_init__ does. */
  if ((st = tpxp_cfg_int_opt(host, ctx, "compress_rate_csa", c->rate_csa,
                             &legacy)))
    return st;
  c->rate_csa = legacy;
  if ((st = tpxp_cfg_int_opt(host, ctx, "compress_rate_hca", c->rate_hca,
                             &legacy)))
    return st;
  c->rate_hca = legacy;
  if ((st = tpxp_cfg_bool_opt(host, ctx, "tie_word_embeddings", 0, &c->tie)))
    return st;
  if (c->layers < 0 || c->hidden <= 0 || c->heads <= 0 || c->head_dim <= 0 ||
      c->q_rank <= 0 || c->vocab <= 0 || c->experts <= 0 || c->moe_inter <= 0 ||
      c->hc <= 0 || c->o_groups <= 0 || c->o_rank <= 0 || c->idx_heads <= 0 ||
      c->idx_dim <= 0 || c->rate_csa <= 0 || c->rate_hca <= 0 ||
      (c->heads * c->head_dim) % c->o_groups != 0 ||
      c->layers > ((int64_t)1 << 20) || c->hidden > ((int64_t)1 << 24) ||
      c->vocab > ((int64_t)1 << 31) || c->experts > ((int64_t)1 << 20))
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "deepseek: config sizes must be positive and bounded, "
                     "and num_attention_heads * head_dim (%lld) divisible by "
                     "o_groups (%lld)",
                     (long long)(c->heads * c->head_dim),
                     (long long)c->o_groups);
  return TPX_PLUGIN_OK;
}

/* Layer i's attention type: layer_types[i], else the legacy
 * compress_ratios[i] (0 / 4 / 128), else V4's default schedule (two HCA
 * layers, then HCA / CSA alternating). */
static int layer_type(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                      int64_t i, int *type) {
  char key[64];
  const char *t = NULL;
  int64_t ratio;
  int st;
  tpxp_fmt(key, sizeof key, "layer_types[%lld]", (long long)i);
  st = host->config_get_string(ctx, key, &t);
  if (st == TPX_PLUGIN_OK) {
    if (strcmp(t, "sliding_attention") == 0)
      *type = SLIDING;
    else if (strcmp(t, "compressed_sparse_attention") == 0)
      *type = CSA;
    else if (strcmp(t, "heavily_compressed_attention") == 0)
      *type = HCA;
    else
      return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                       "config %s: unknown DeepSeek-V4 layer type '%s'", key,
                       t);
    return TPX_PLUGIN_OK;
  }
  if (st != TPX_PLUGIN_NOT_FOUND)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR, "config %s is not a string",
                     key);
  tpxp_fmt(key, sizeof key, "compress_ratios[%lld]", (long long)i);
  st = host->config_get_int(ctx, key, &ratio);
  if (st == TPX_PLUGIN_OK) {
    if (ratio != 0 && ratio != 4 && ratio != 128)
      return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                       "config %s = %lld: a compress ratio is 0, 4 or 128", key,
                       (long long)ratio);
    *type = ratio == 0 ? SLIDING : ratio == 4 ? CSA : HCA;
    return TPX_PLUGIN_OK;
  }
  if (st != TPX_PLUGIN_NOT_FOUND)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR, "config %s is not an integer",
                     key);
  *type = i < 2 ? HCA : ((i - 2) % 2 ? CSA : HCA);
  return TPX_PLUGIN_OK;
}

/* A compressor's kv_proj / gate_proj (out x hidden), position_bias
 * [rate, out] and kv_norm [norm_dim] (fp32), rotary_emb; module `m`. */
static int compressor_core(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                           const char *m, const dsv4 *c, int64_t out,
                           int64_t rate, int64_t norm_dim) {
  const tpxp_sk_row rows[] = {
      TPXP_SK_MOD("", "other"),
      {.kind = TPXP_SK_PARAM,
       .suffix = "",
       .name = "position_bias",
       .a = rate,
       .b = out,
       .dtype = F32},
      TPXP_SK_LIN("kv_proj", c->hidden, out, 0),
      TPXP_SK_LIN("gate_proj", c->hidden, out, 0),
      {.kind = TPXP_SK_NORM, .suffix = "kv_norm", .a = norm_dim, .dtype = F32},
      TPXP_SK_MOD("rotary_emb", "rotary"),
  };
  return TPXP_SK_ROWS(host, ctx, m, rows, NULL);
}

static int attention(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const dsv4 *c, const char *layer, int type) {
  char a[TPXP_FQN_MAX], f[TPXP_FQN_MAX];
  int64_t q = c->heads * c->head_dim;
  /* Grouped output projection: a block-diagonal nn.Linear of
   * (heads * head_dim / o_groups) -> o_groups * o_lora_rank. */
  const tpxp_sk_row rows[] = {
      TPXP_SK_MOD("", "other"),
      {.kind = TPXP_SK_PARAM,
       .suffix = "",
       .name = "sinks",
       .a = c->heads,
       .b = -1,
       .dtype = F32},
      TPXP_SK_LIN("q_a_proj", c->hidden, c->q_rank, 0),
      {.kind = TPXP_SK_NORM,
       .suffix = "q_a_norm",
       .a = c->q_rank,
       .dtype = F32},
      TPXP_SK_LIN("q_b_proj", c->q_rank, q, 0),
      TPXP_SK_LIN("kv_proj", c->hidden, c->head_dim, 0),
      {.kind = TPXP_SK_NORM,
       .suffix = "kv_norm",
       .a = c->head_dim,
       .dtype = F32},
      TPXP_SK_LIN("o_a_proj", q / c->o_groups, c->o_groups * c->o_rank, 0),
      TPXP_SK_LIN("o_b_proj", c->o_groups * c->o_rank, c->hidden, 0),
  };
  /* The Lightning Indexer's own projections. */
  const tpxp_sk_row indexer[] = {
      TPXP_SK_LIN("q_b_proj", c->q_rank, c->idx_heads * c->idx_dim, 0),
      TPXP_SK_LIN("scorer.weights_proj", c->hidden, c->idx_heads, 0),
  };
  tpxp_fmt(a, sizeof a, "%s.self_attn", layer);
  TPXP_CHK(TPXP_SK_ROWS(host, ctx, a, rows, NULL));
  if (type == SLIDING)
    return TPX_PLUGIN_OK;
  tpxp_fmt(f, sizeof f, "%s.compressor", a);
  if (type == HCA)
    return compressor_core(host, ctx, f, c, c->head_dim, c->rate_hca,
                           c->head_dim);
  /* CSA: two overlapping series (2 * head_dim) and the Lightning Indexer. */
  TPXP_CHK(compressor_core(host, ctx, f, c, 2 * c->head_dim, c->rate_csa,
                           c->head_dim));
  tpxp_fmt(a, sizeof a, "%s.indexer", f);
  TPXP_CHK(compressor_core(host, ctx, a, c, 2 * c->idx_dim, c->rate_csa,
                           c->idx_dim));
  return TPXP_SK_ROWS(host, ctx, a, indexer, NULL);
}

/* A hyper-connection's rows at "<prefix>.<name>": fn [(2 + hc) * hc,
 * hc * hidden], base [(2 + hc) * hc], scale [3], all fp32. */
#define HC_ROWS(sfx_, c_)                                                      \
  TPXP_SK_MOD(sfx_, "other"),                                                  \
      {.kind = TPXP_SK_PARAM,                                                  \
       .suffix = sfx_,                                                         \
       .name = "fn",                                                           \
       .a = (2 + (c_)->hc) * (c_)->hc,                                         \
       .b = (c_)->hc * (c_)->hidden,                                           \
       .dtype = F32},                                                          \
      {.kind = TPXP_SK_PARAM,                                                  \
       .suffix = sfx_,                                                         \
       .name = "base",                                                         \
       .a = (2 + (c_)->hc) * (c_)->hc,                                         \
       .b = -1,                                                                \
       .dtype = F32},                                                          \
  {                                                                            \
    .kind = TPXP_SK_PARAM, .suffix = sfx_, .name = "scale", .a = 3, .b = -1,   \
    .dtype = F32                                                               \
  }

static int layer(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                 const char *l, int64_t i, const void *user) {
  const dsv4 *c = user;
  char f[TPXP_FQN_MAX];
  int type = SLIDING;
  /* The shared expert: one gated MLP of moe_intermediate_size. */
  const tpxp_sk_row tail[] = {
      TPXP_SK_LIN("mlp.shared_experts.gate_proj", c->hidden, c->moe_inter, 0),
      TPXP_SK_LIN("mlp.shared_experts.up_proj", c->hidden, c->moe_inter, 0),
      TPXP_SK_LIN("mlp.shared_experts.down_proj", c->moe_inter, c->hidden, 0),
      {.kind = TPXP_SK_NORM,
       .suffix = "input_layernorm",
       .a = c->hidden,
       .dtype = F32},
      {.kind = TPXP_SK_NORM,
       .suffix = "post_attention_layernorm",
       .a = c->hidden,
       .dtype = F32},
      HC_ROWS("attn_hc", c),
      HC_ROWS("ffn_hc", c),
  };
  TPXP_CHK(layer_type(host, ctx, i, &type));
  TPXP_CHK(attention(host, ctx, c, l, type));
  tpxp_fmt(f, sizeof f, "%s.mlp", l);
  TPXP_CHK(tpxp_sk_module(host, ctx, f, "other"));
  tpxp_fmt(f, sizeof f, "%s.mlp.gate", l);
  TPXP_CHK(tpxp_sk_router(host, ctx, f, c->experts, c->hidden, NULL));
  tpxp_fmt(f, sizeof f, "%s.mlp.experts", l);
  TPXP_CHK(tpxp_sk_fused_experts(host, ctx, f, c->experts, c->hidden,
                                 c->moe_inter, NULL));
  return TPXP_SK_ROWS(host, ctx, l, tail, NULL);
}

static int dsv4_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                         const char *arch) {
  dsv4 c;
  memset(&c, 0, sizeof c);
  TPXP_CHK(dsv4_read(host, ctx, &c));
  {
    const tpxp_sk_row tail[] = {
        {.kind = TPXP_SK_NORM, .suffix = "norm", .a = c.hidden, .dtype = F32},
        TPXP_SK_MOD("rotary_emb", "rotary"),
        /* The head's hyper-connection: hc_fn [hc, hc * hidden], hc_base
         * [hc], hc_scale [1], fp32. */
        TPXP_SK_MOD("hc_head", "other"),
        {.kind = TPXP_SK_PARAM,
         .suffix = "hc_head",
         .name = "hc_fn",
         .a = c.hc,
         .b = c.hc * c.hidden,
         .dtype = F32},
        {.kind = TPXP_SK_PARAM,
         .suffix = "hc_head",
         .name = "hc_base",
         .a = c.hc,
         .b = -1,
         .dtype = F32},
        {.kind = TPXP_SK_PARAM,
         .suffix = "hc_head",
         .name = "hc_scale",
         .a = 1,
         .b = -1,
         .dtype = F32},
    };
    const tpxp_stack stack = {.prefix = "model",
                              .embed = "embed_tokens",
                              .vocab = c.vocab,
                              .hidden = c.hidden,
                              .layers = c.layers,
                              .layer = layer,
                              .user = &c,
                              .tail = tail,
                              .n_tail = TPXP_N_OF(tail),
                              .head = "lm_head",
                              .tie = c.tie};
    return tpxp_sk_stack(host, ctx, &stack);
  }
}

static int dsv4_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const tpx_plugin_plan_request *req) {
  return tpxp_refuse_to_hf_flow(
      host, ctx, "deepseek", req->architecture,
      "the class plan's lm_head 'colwise_gather_output', the experts' "
      "'packed_colwise' / 'moe_tp_experts'");
}

static int dsv4_fp32(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const char *arch) {
  size_t i;
  for (i = 0; i < TPXP_N_OF(k_fp32); i++)
    TPXP_CHK(host->fp32_add(ctx, k_fp32[i]));
  return TPX_PLUGIN_OK;
}

static const tpxp_arch_ops deepseek_ops[] = {
    {.bare = "DeepseekV4ForCausalLM",
     .plan = dsv4_plan,
     .skeleton = dsv4_skeleton,
     .fp32 = dsv4_fp32},
};
static const tpxp_family deepseek = {"deepseek", deepseek_ops, 1};

TPXP_EXPORT_GET_PLAN(deepseek)
TPXP_EXPORT_SKELETON(deepseek)
TPXP_EXPORT_FP32(deepseek)
