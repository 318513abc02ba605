/* deepseek.c — the tpx_deepseek family plugin: DeepseekV4ForCausalLM as
 * Automodel runs it (docs/SEMANTICS.md "Family plans"): the DeepseekV4 strategy, a
 * Default subclass whose fully_shard_deepseek_v4 keeps a set of
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
    "DeepseekV4ForCausalLM",
    NULL};

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
  };
  return tpxp_register(host, info, &desc);
}

int get_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
             const tpx_plugin_plan_request *req) {
  int st = tpxp_plain_plan_request(host, ctx, req, "deepseek");
  if (st != TPX_PLUGIN_OK)
    return st;
  if (!tpxp_arch_is(req->architecture, "DeepseekV4ForCausalLM"))
    return tpxp_not_served(host, ctx, "deepseek", req->architecture);
  return tpxp_refuse_to_hf_flow(
      host, ctx, "deepseek", req->architecture,
      "the class plan's lm_head 'colwise_gather_output', the experts' "
      "'packed_colwise' / 'moe_tp_experts'");
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

int tpx_plugin_fp32_params(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                           const char *architecture) {
  size_t i;
  int st;
  if (host == NULL)
    return TPX_PLUGIN_INVALID;
  if (!tpxp_arch_is(architecture, "DeepseekV4ForCausalLM"))
    return tpxp_not_served(host, ctx, "deepseek", architecture);
  for (i = 0; i < sizeof k_fp32 / sizeof k_fp32[0]; i++)
    if ((st = host->fp32_add(ctx, k_fp32[i])) != TPX_PLUGIN_OK)
      return st;
  return TPX_PLUGIN_OK;
}

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
#define OPT(field, key, dflt)                                                  \
  if ((st = tpxp_cfg_int_opt(host, ctx, key, dflt, &c->field)))                \
    return st;
  OPT(layers, "num_hidden_layers", 43)
  OPT(hidden, "hidden_size", 4096)
  OPT(heads, "num_attention_heads", 64)
  OPT(head_dim, "head_dim", 512)
  OPT(q_rank, "q_lora_rank", 1024)
  OPT(vocab, "vocab_size", 129280)
  OPT(experts, "n_routed_experts", 256)
  OPT(moe_inter, "moe_intermediate_size", 2048)
  OPT(hc, "hc_mult", 4)
  OPT(o_groups, "o_groups", 8)
  OPT(o_rank, "o_lora_rank", 1024)
  OPT(idx_heads, "index_n_heads", 64)
  OPT(idx_dim, "index_head_dim", 128)
  OPT(rate_csa, "compress_rates.compressed_sparse_attention", 4)
  OPT(rate_hca, "compress_rates.heavily_compressed_attention", 128)
#undef OPT
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
      c->q_rank <= 0 || c->vocab <= 0 || c->experts <= 0 ||
      c->moe_inter <= 0 || c->hc <= 0 || c->o_groups <= 0 || c->o_rank <= 0 ||
      c->idx_heads <= 0 || c->idx_dim <= 0 || c->rate_csa <= 0 ||
      c->rate_hca <= 0 || (c->heads * c->head_dim) % c->o_groups != 0 ||
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
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "config %s is not a string", key);
  tpxp_fmt(key, sizeof key, "compress_ratios[%lld]", (long long)i);
  st = host->config_get_int(ctx, key, &ratio);
  if (st == TPX_PLUGIN_OK) {
    if (ratio != 0 && ratio != 4 && ratio != 128)
      return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                       "config %s = %lld: a compress ratio is 0, 4 or 128",
                       key, (long long)ratio);
    *type = ratio == 0 ? SLIDING : ratio == 4 ? CSA : HCA;
    return TPX_PLUGIN_OK;
  }
  if (st != TPX_PLUGIN_NOT_FOUND)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "config %s is not an integer", key);
  *type = i < 2 ? HCA : ((i - 2) % 2 ? CSA : HCA);
  return TPX_PLUGIN_OK;
}

/* A compressor's kv_proj / gate_proj (out x hidden), position_bias
 * [rate, out] and kv_norm [norm_dim] (fp32), rotary_emb; module `m`. */
static int compressor_core(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                           const char *m, const char *kind, const dsv4 *c,
                           int64_t out, int64_t rate, int64_t norm_dim) {
  char f[TPXP_FQN_MAX];
  int st;
  if ((st = tpxp_sk_module(host, ctx, m, kind)) ||
      (st = tpxp_sk_param(host, ctx, m, "position_bias", rate, out, F32)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.kv_proj", m);
  if ((st = tpxp_sk_linear(host, ctx, f, c->hidden, out, 0, NULL)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.gate_proj", m);
  if ((st = tpxp_sk_linear(host, ctx, f, c->hidden, out, 0, NULL)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.kv_norm", m);
  if ((st = tpxp_sk_norm(host, ctx, f, norm_dim, 0, F32)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.rotary_emb", m);
  return tpxp_sk_module(host, ctx, f, "rotary");
}

static int attention(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const dsv4 *c, const char *layer, int type) {
  char a[TPXP_FQN_MAX], f[TPXP_FQN_MAX];
  int64_t q = c->heads * c->head_dim, shape[2];
  int st;
  tpxp_fmt(a, sizeof a, "%s.self_attn", layer);
  if ((st = tpxp_sk_module(host, ctx, a, "other")) ||
      (st = tpxp_sk_param(host, ctx, a, "sinks", c->heads, -1, F32)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.q_a_proj", a);
  if ((st = tpxp_sk_linear(host, ctx, f, c->hidden, c->q_rank, 0, NULL)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.q_a_norm", a);
  if ((st = tpxp_sk_norm(host, ctx, f, c->q_rank, 0, F32)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.q_b_proj", a);
  if ((st = tpxp_sk_linear(host, ctx, f, c->q_rank, q, 0, NULL)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.kv_proj", a);
  if ((st = tpxp_sk_linear(host, ctx, f, c->hidden, c->head_dim, 0, NULL)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.kv_norm", a);
  if ((st = tpxp_sk_norm(host, ctx, f, c->head_dim, 0, F32)))
    return st;
  /* Grouped output projection: a block-diagonal nn.Linear of
   * (heads * head_dim / o_groups) -> o_groups * o_lora_rank. */
  tpxp_fmt(f, sizeof f, "%s.o_a_proj", a);
  shape[0] = c->o_groups * c->o_rank;
  shape[1] = q / c->o_groups;
  if ((st = tpxp_sk_module(host, ctx, f, "linear")) ||
      (st = host->skeleton_add_param(ctx, f, "weight", shape, 2, NULL)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.o_b_proj", a);
  if ((st = tpxp_sk_linear(host, ctx, f, c->o_groups * c->o_rank, c->hidden,
                           0, NULL)))
    return st;
  if (type == SLIDING)
    return TPX_PLUGIN_OK;
  tpxp_fmt(f, sizeof f, "%s.compressor", a);
  if (type == HCA)
    return compressor_core(host, ctx, f, "other", c, c->head_dim, c->rate_hca,
                           c->head_dim);
  /* CSA: two overlapping series (2 * head_dim) and the Lightning Indexer. */
  if ((st = compressor_core(host, ctx, f, "other", c, 2 * c->head_dim,
                            c->rate_csa, c->head_dim)))
    return st;
  tpxp_fmt(a, sizeof a, "%s.indexer", f);
  if ((st = compressor_core(host, ctx, a, "other", c, 2 * c->idx_dim,
                            c->rate_csa, c->idx_dim)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.q_b_proj", a);
  if ((st = tpxp_sk_linear(host, ctx, f, c->q_rank, c->idx_heads * c->idx_dim,
                           0, NULL)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.scorer.weights_proj", a);
  return tpxp_sk_linear(host, ctx, f, c->hidden, c->idx_heads, 0, NULL);
}

/* A hyper-connection at `m`: fn [(2 + hc) * hc, hc * hidden], base
 * [(2 + hc) * hc], scale [3], all fp32. */
static int hyper_connection(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                            const dsv4 *c, const char *m) {
  int64_t n = (2 + c->hc) * c->hc;
  int st;
  if ((st = tpxp_sk_module(host, ctx, m, "other")) ||
      (st = tpxp_sk_param(host, ctx, m, "fn", n, c->hc * c->hidden, F32)) ||
      (st = tpxp_sk_param(host, ctx, m, "base", n, -1, F32)))
    return st;
  return tpxp_sk_param(host, ctx, m, "scale", 3, -1, F32);
}

static int layer(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                 const dsv4 *c, int64_t i) {
  char l[TPXP_FQN_MAX], f[TPXP_FQN_MAX];
  int type = SLIDING, st;
  if ((st = layer_type(host, ctx, i, &type)))
    return st;
  tpxp_fmt(l, sizeof l, "model.layers.%lld", (long long)i);
  if ((st = attention(host, ctx, c, l, type)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.mlp", l);
  if ((st = tpxp_sk_module(host, ctx, f, "other")))
    return st;
  tpxp_fmt(f, sizeof f, "%s.mlp.gate", l);
  if ((st = tpxp_sk_router(host, ctx, f, c->experts, c->hidden, NULL)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.mlp.experts", l);
  if ((st = tpxp_sk_fused_experts(host, ctx, f, c->experts, c->hidden,
                                  c->moe_inter, NULL)))
    return st;
  /* The shared expert: one gated MLP of moe_intermediate_size. */
  tpxp_fmt(f, sizeof f, "%s.mlp.shared_experts.gate_proj", l);
  if ((st = tpxp_sk_linear(host, ctx, f, c->hidden, c->moe_inter, 0, NULL)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.mlp.shared_experts.up_proj", l);
  if ((st = tpxp_sk_linear(host, ctx, f, c->hidden, c->moe_inter, 0, NULL)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.mlp.shared_experts.down_proj", l);
  if ((st = tpxp_sk_linear(host, ctx, f, c->moe_inter, c->hidden, 0, NULL)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.input_layernorm", l);
  if ((st = tpxp_sk_norm(host, ctx, f, c->hidden, 0, F32)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.post_attention_layernorm", l);
  if ((st = tpxp_sk_norm(host, ctx, f, c->hidden, 0, F32)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.attn_hc", l);
  if ((st = hyper_connection(host, ctx, c, f)))
    return st;
  tpxp_fmt(f, sizeof f, "%s.ffn_hc", l);
  return hyper_connection(host, ctx, c, f);
}

int tpx_plugin_get_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                            const char *architecture) {
  dsv4 c;
  int64_t i;
  int st;
  if (host == NULL)
    return TPX_PLUGIN_INVALID;
  if (!tpxp_arch_is(architecture, "DeepseekV4ForCausalLM"))
    return tpxp_not_served(host, ctx, "deepseek", architecture);
  memset(&c, 0, sizeof c);
  if ((st = dsv4_read(host, ctx, &c)))
    return st;
  if ((st = tpxp_sk_embedding(host, ctx, "model.embed_tokens", c.vocab,
                              c.hidden, NULL)) ||
      (st = tpxp_sk_module(host, ctx, "model.layers", "container")))
    return st;
  for (i = 0; i < c.layers; i++)
    if ((st = layer(host, ctx, &c, i)))
      return st;
  if ((st = tpxp_sk_norm(host, ctx, "model.norm", c.hidden, 0, F32)) ||
      (st = tpxp_sk_module(host, ctx, "model.rotary_emb", "rotary")) ||
      (st = tpxp_sk_module(host, ctx, "model.hc_head", "other")) ||
      (st = tpxp_sk_param(host, ctx, "model.hc_head", "hc_fn", c.hc,
                          c.hc * c.hidden, F32)) ||
      (st = tpxp_sk_param(host, ctx, "model.hc_head", "hc_base", c.hc, -1,
                          F32)) ||
      (st = tpxp_sk_param(host, ctx, "model.hc_head", "hc_scale", 1, -1, F32)))
    return st;
  return tpxp_sk_lm_head(host, ctx, "lm_head", c.hidden, c.vocab, 0, c.tie,
                         "model.embed_tokens.weight", NULL);
}
