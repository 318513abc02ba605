/* am_glm5.c — GLM-5-Next (Glm5NextForConditionalGeneration, Automodel's own
 * Glm5NextConfig, model type glm5_next) as NeMo Automodel 0.7.0 builds it:
 * the text decoder from text_config under model.language_model, each layer
 * with two hyper-connections (attn_hc / ffn_hc: fn [(2+m)m, m H], float32
 * _fp32_params.base [(2+m)m] and scale [3], m = hc_mult) and either a
 * linear attention ("linear_attention": q/k/v, short convolutions, f/g
 * low-rank projections, b_proj, o_norm, o_proj, float32 A_log / dt_bias) or
 * DeepSeek sparse attention (MLA without RoPE and a kpool indexer); a dense
 * MLP or the MoE with shared experts (mlp_layer_types); the vision tower
 * model.visual (a Conv3d patch embedding, RMSNorm blocks with a fused qkv
 * and q/k norms, a SwiGLU MLP, a downsampling Conv2d and the merger). Absent
 * keys take the config classes' defaults; the configs the text config class
 * refuses are refused with its message. Not: MTP layers (Automodel builds
 * none for this class). */
#include <string.h>

#include "am.h"

#define G5 "Glm5NextForConditionalGeneration"
#define T "text_config."

typedef struct g5_cfg {
  int64_t hc, lin_hd, lin_heads, conv, q_lora, kv_lora, nope, v_head;
  int64_t idx_heads, idx_dim, kpool, topk, rope;
  int bias;
} g5_cfg;

static int refuse(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                  const char *why) {
  return tpxp_fail(host, ctx, TPX_PLUGIN_REFUSED,
                   "automodel_moe: " G5 ": %s (Glm5NextTextConfig raises "
                   "ValueError)",
                   why);
}

static int read_g5(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                   const am_cfg *c, g5_cfg *g) {
  int64_t n = 0;
  const char *lists[3] = {T "mlp_layer_types", T "layer_types",
                          T "indexer_types"};
  const tpxp_key keys[] = {
      TPXP_KEY_Z("hc_mult", &g->hc, 4),
      TPXP_KEY_Z("linear_head_dim", &g->lin_hd, 128),
      TPXP_KEY_Z("linear_num_heads", &g->lin_heads, 64),
      TPXP_KEY_Z("linear_conv_kernel_dim", &g->conv, 4),
      TPXP_KEY_I("q_lora_rank", &g->q_lora, 1536),
      TPXP_KEY_Z("kv_lora_rank", &g->kv_lora, 512),
      TPXP_KEY_Z("qk_nope_head_dim", &g->nope, 256),
      TPXP_KEY_I("qk_rope_head_dim", &g->rope, 0),
      TPXP_KEY_Z("v_head_dim", &g->v_head, 256),
      TPXP_KEY_Z("index_n_heads", &g->idx_heads, 32),
      TPXP_KEY_Z("index_head_dim", &g->idx_dim, 128),
      TPXP_KEY_I("index_kpool", &g->kpool, 16),
      TPXP_KEY_I("index_topk", &g->topk, 2048),
      TPXP_KEY_B("attention_bias", &g->bias, 0),
  };
  TPXP_CHK(TPXP_CFG_READ(host, ctx, "text_config", keys));
  /* linear_attn_config's entries win over the flat keys */
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, T "linear_attn_config.head_dim",
                            g->lin_hd, &g->lin_hd));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, T "linear_attn_config.num_heads",
                            g->lin_heads, &g->lin_heads));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx,
                            T "linear_attn_config.short_conv_kernel_size",
                            g->conv, &g->conv));
  for (size_t k = 0; k < 3; k++)
    if (host->config_get_length(ctx, lists[k], &n) == TPX_PLUGIN_OK &&
        n != c->layers)
      return refuse(host, ctx,
                    k == 0   ? "mlp_layer_types must have one entry per "
                               "decoder layer"
                    : k == 1 ? "layer_types must have one entry per decoder "
                               "layer"
                             : "indexer_types must have one entry per decoder "
                               "layer");
  if (c->heads != c->kv_heads)
    return refuse(host, ctx,
                  "GLM-5.3 DSA requires num_attention_heads == "
                  "num_key_value_heads");
  if (g->q_lora <= 0)
    return refuse(host, ctx, "GLM-5.3 DSA requires q_lora_rank");
  if (g->rope != 0)
    return refuse(host, ctx,
                  "GLM-5.3 DSA is NoPE and requires qk_rope_head_dim=0");
  if (g->kpool < 1 || g->topk % g->kpool != 0)
    return refuse(host, ctx,
                  "index_kpool must be positive and divide index_topk");
  return TPX_PLUGIN_OK;
}

/* Is layer i linear attention; is it MoE (the config class's defaults:
 * every fourth layer DSA, the first three dense). */
static int g5_kind(const tpx_plugin_host *host, tpx_plugin_ctx *ctx, int64_t i,
                   int *linear, int *sparse) {
  const char *s = NULL;
  TPXP_CHK(am_list_str(host, ctx, T "layer_types", i, &s));
  *linear = s != NULL ? strcmp(s, "linear_attention") == 0 : i % 4 != 3;
  if (s != NULL && !*linear && strcmp(s, "deepseek_sparse_attention") != 0 &&
      strcmp(s, "full_attention") != 0)
    return refuse(host, ctx, "Unsupported GLM-5.3 attention layer types");
  TPXP_CHK(am_list_str(host, ctx, T "mlp_layer_types", i, &s));
  *sparse = s != NULL ? strcmp(s, "sparse") == 0 : i >= 3;
  return TPX_PLUGIN_OK;
}

static int g5_linear(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const am_cfg *c, const g5_cfg *g, const char *attn) {
  const int64_t h = c->hidden, hd = g->lin_hd, p = hd * g->lin_heads;
  const int64_t cv[3] = {p, 1, g->conv};
  const tpxp_sk_row rows[] = {
      TPXP_SK_MOD("", "other"),
      TPXP_SK_LIN("q_proj", h, p, 0),
      TPXP_SK_LIN("k_proj", h, p, 0),
      TPXP_SK_LIN("v_proj", h, p, 0),
      TPXP_SK_MOD("q_conv1d", "other"),
      TPXP_SK_PRM_ND("q_conv1d", "weight", 3, cv),
      TPXP_SK_MOD("k_conv1d", "other"),
      TPXP_SK_PRM_ND("k_conv1d", "weight", 3, cv),
      TPXP_SK_MOD("v_conv1d", "other"),
      TPXP_SK_PRM_ND("v_conv1d", "weight", 3, cv),
      TPXP_SK_MOD("_fp32_params", "other"),
      {.kind = TPXP_SK_PARAM,
       .suffix = "_fp32_params",
       .name = "A_log",
       .a = g->lin_heads,
       .b = -1,
       .dtype = AM_F32},
      {.kind = TPXP_SK_PARAM,
       .suffix = "_fp32_params",
       .name = "dt_bias",
       .a = p,
       .b = -1,
       .dtype = AM_F32},
      TPXP_SK_LIN("f_a_proj", h, hd, 0),
      TPXP_SK_LIN("f_b_proj", hd, p, 0),
      TPXP_SK_LIN("b_proj", h, g->lin_heads, 0),
      TPXP_SK_LIN("g_a_proj", h, hd, 0),
      TPXP_SK_LIN("g_b_proj", hd, p, 0),
      TPXP_SK_NRM("o_norm", hd, 0),
      TPXP_SK_LIN("o_proj", p, h, 0),
  };
  return TPXP_SK_ROWS(host, ctx, attn, rows, NULL);
}

/* DeepSeek sparse attention: MLA without RoPE, and the kpool indexer. */
static int g5_dsa(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                  const am_cfg *c, const g5_cfg *g, const char *attn) {
  const int64_t h = c->hidden, H = c->heads, d = g->idx_dim;
  const tpxp_sk_row rows[] = {
      TPXP_SK_MOD("", "other"),
      TPXP_SK_LIN("q_a_proj", h, g->q_lora, g->bias),
      TPXP_SK_NRM("q_a_layernorm", g->q_lora, 0),
      TPXP_SK_LIN("q_b_proj", g->q_lora, H * g->nope, 0),
      TPXP_SK_LIN("kv_a_proj_with_mqa", h, g->kv_lora, g->bias),
      TPXP_SK_NRM("kv_a_layernorm", g->kv_lora, 0),
      TPXP_SK_LIN("kv_b_proj", g->kv_lora, H * (g->nope + g->v_head), 0),
      TPXP_SK_LIN("o_proj", H * g->v_head, h, 0),
      TPXP_SK_MOD("indexer", "other"),
      TPXP_SK_LIN("indexer.wq_b", g->q_lora, g->idx_heads * d, 0),
      TPXP_SK_LIN("indexer.wk", h, d, 0),
      TPXP_SK_NRM("indexer.k_norm", d, 1),
      TPXP_SK_LIN("indexer.weights_proj", h, g->idx_heads, 0),
      TPXP_SK_PRM("indexer", "index_kpool_compress_ape", g->kpool, d),
      TPXP_SK_PRM("indexer", "index_kpool_compress_gate", d, h),
  };
  return TPXP_SK_ROWS(host, ctx, attn, rows, NULL);
}

/* The hyper-connection at "<layer>.<name>". */
static int g5_hc(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                 const am_cfg *c, const g5_cfg *g, const char *layer,
                 const char *name) {
  char f[TPXP_FQN_MAX];
  const int64_t mix = (2 + g->hc) * g->hc;
  const tpxp_sk_row rows[] = {
      TPXP_SK_MOD("", "other"),
      TPXP_SK_PRM("", "fn", mix, g->hc * c->hidden),
      TPXP_SK_MOD("_fp32_params", "other"),
      {.kind = TPXP_SK_PARAM,
       .suffix = "_fp32_params",
       .name = "base",
       .a = mix,
       .b = -1,
       .dtype = AM_F32},
      {.kind = TPXP_SK_PARAM,
       .suffix = "_fp32_params",
       .name = "scale",
       .a = 3,
       .b = -1,
       .dtype = AM_F32},
  };
  tpxp_fmt(f, sizeof f, "%s.%s", layer, name);
  return TPXP_SK_ROWS(host, ctx, f, rows, NULL);
}

static int g5_layer(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    const char *layer, int64_t i, const void *user) {
  const void *const *u = user;
  const am_cfg *c = u[0];
  const g5_cfg *g = u[1];
  char f[TPXP_FQN_MAX];
  int linear = 0, sparse = 0;
  TPXP_CHK(g5_kind(host, ctx, i, &linear, &sparse));
  TPXP_CHK(tpxp_sk_module(host, ctx, layer, "container"));
  tpxp_fmt(f, sizeof f, "%s.self_attn", layer);
  TPXP_CHK(linear ? g5_linear(host, ctx, c, g, f) : g5_dsa(host, ctx, c, g, f));
  if (sparse) {
    TPXP_CHK(am_sk_moe(host, ctx, c, layer));
  } else {
    const tpxp_sk_row rows[] = {
        TPXP_SK_MOD("mlp", "other"),
        TPXP_SK_LIN("mlp.up_proj", c->hidden, c->inter, 0),
        TPXP_SK_LIN("mlp.gate_proj", c->hidden, c->inter, 0),
        TPXP_SK_LIN("mlp.down_proj", c->inter, c->hidden, 0),
    };
    TPXP_CHK(TPXP_SK_ROWS(host, ctx, layer, rows, NULL));
  }
  {
    const tpxp_sk_row rows[] = {
        TPXP_SK_NRM("input_layernorm", c->hidden, 0),
        TPXP_SK_NRM("post_attention_layernorm", c->hidden, 0),
    };
    TPXP_CHK(TPXP_SK_ROWS(host, ctx, layer, rows, NULL));
  }
  TPXP_CHK(g5_hc(host, ctx, c, g, layer, "attn_hc"));
  return g5_hc(host, ctx, c, g, layer, "ffn_hc");
}

int am_sk_glm5(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
               const am_cfg *c) {
  g5_cfg g;
  const void *user[2] = {c, &g};
  memset(&g, 0, sizeof g);
  TPXP_CHK(read_g5(host, ctx, c, &g));
  TPXP_CHK(tpxp_sk_module(host, ctx, "model", "other"));
  TPXP_CHK(am_sk_glm5_vision(host, ctx));
  return am_sk_text_stack(host, ctx, c, "model.language_model", "lm_head",
                          g5_layer, user, 0);
}

/* model.visual, sized from vision_config. */
int am_sk_glm5_vision(const tpx_plugin_host *host, tpx_plugin_ctx *ctx) {
  int64_t hv, n, heads, chans, patch, tps, sms, out, inter, pinter, i;
  int b = 1;
  char f[TPXP_FQN_MAX];
  const tpxp_key keys[] = {
      TPXP_KEY_Z("hidden_size", &hv, 1024),
      TPXP_KEY_I("depth", &n, 24),
      TPXP_KEY_Z("num_heads", &heads, 16),
      TPXP_KEY_Z("in_channels", &chans, 3),
      TPXP_KEY_Z("patch_size", &patch, 14),
      TPXP_KEY_Z("temporal_patch_size", &tps, 2),
      TPXP_KEY_Z("spatial_merge_size", &sms, 2),
      TPXP_KEY_Z("out_hidden_size", &out, 4096),
      TPXP_KEY_Z("intermediate_size", &inter, 4096),
      TPXP_KEY_Z("projection_intermediate_size", &pinter, 10240),
      TPXP_KEY_B("attention_bias", &b, 1),
  };
  TPXP_CHK(TPXP_CFG_READ(host, ctx, "vision_config", keys));
  if (n < 0 || hv % heads != 0)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "automodel_moe: " G5 ": vision_config needs depth >= 0 "
                     "and num_heads dividing hidden_size");
  {
    const int64_t conv[5] = {hv, chans, tps, patch, patch};
    const tpxp_sk_row rows[] = {
        TPXP_SK_MOD("", "other"),
        TPXP_SK_MOD("patch_embed", "other"),
        TPXP_SK_MOD("patch_embed.proj", "other"),
        TPXP_SK_PRM_ND("patch_embed.proj", "weight", 5, conv),
        TPXP_SK_PRM("patch_embed.proj", "bias", hv, -1),
        TPXP_SK_MOD("blocks", "container"),
    };
    TPXP_CHK(TPXP_SK_ROWS(host, ctx, "model.visual", rows, NULL));
  }
  for (i = 0; i < n; i++) {
    const tpxp_sk_row rows[] = {
        TPXP_SK_MOD("", "container"),
        TPXP_SK_NRM("norm1", hv, 0),
        TPXP_SK_NRM("norm2", hv, 0),
        TPXP_SK_MOD("attn", "other"),
        TPXP_SK_LIN("attn.qkv", hv, 3 * hv, b),
        TPXP_SK_LIN("attn.proj", hv, hv, b),
        TPXP_SK_NRM("attn.q_norm", hv / heads, 0),
        TPXP_SK_NRM("attn.k_norm", hv / heads, 0),
        TPXP_SK_MOD("mlp", "other"),
        TPXP_SK_LIN("mlp.gate_proj", hv, inter, 1),
        TPXP_SK_LIN("mlp.up_proj", hv, inter, 1),
        TPXP_SK_LIN("mlp.down_proj", inter, hv, 1),
    };
    tpxp_fmt(f, sizeof f, "model.visual.blocks.%lld", (long long)i);
    TPXP_CHK(TPXP_SK_ROWS(host, ctx, f, rows, NULL));
  }
  {
    const int64_t ds[4] = {out, hv, sms, sms};
    const tpxp_sk_row rows[] = {
        TPXP_SK_NRM("post_layernorm", hv, 0),
        TPXP_SK_MOD("downsample", "other"),
        TPXP_SK_PRM_ND("downsample", "weight", 4, ds),
        TPXP_SK_PRM("downsample", "bias", out, -1),
        TPXP_SK_MOD("merger", "other"),
        TPXP_SK_LIN("merger.proj", out, out, 0),
        TPXP_SK_NRM("merger.post_projection_norm", out, 1),
        TPXP_SK_LIN("merger.gate_proj", out, pinter, 0),
        TPXP_SK_LIN("merger.up_proj", out, pinter, 0),
        TPXP_SK_LIN("merger.down_proj", pinter, out, 0),
    };
    return TPXP_SK_ROWS(host, ctx, "model.visual", rows, NULL);
  }
}
