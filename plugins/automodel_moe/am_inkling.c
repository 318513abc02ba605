/* am_inkling.c — Inkling (InklingForConditionalGeneration, Automodel's own
 * InklingConfig, model type inkling_mm_model) as NeMo Automodel 0.7.0
 * builds it, from text_config (absent keys take InklingTextConfig's
 * defaults): model.language_model with embed_tokens, embed_norm, norm and
 * layers.N of attention (q/k/v/o, r_proj for the relative logits, short
 * convolutions k_sconv / v_sconv with float32 weights under _fp32_params,
 * per-head q/k norms, rel_logits_proj.proj [d_rel, extent]; a
 * "hybrid_sliding" layer takes the swa_* sizes and sliding_window_size as
 * extent), the layer's own attn_sconv / mlp_sconv, and an MLP: dense
 * (gate_up_proj [H, 2D], down_proj [D, H], global_scale) or MoE (a router
 * of n_routed + n_shared rows with global_scale and a float32
 * e_score_correction_bias parameter, grouped experts, fused shared experts
 * [S, H, 2I] / [S, I, H]); the audio tower (a summed codebook embedding
 * and a norm) and the vision tower (am_inkling_vit.c). The checkpoint's
 * raw names (model.llm.*, model.audio.*, model.visual.*) are aliases
 * (am_plugin.c) or, for the tensors it stores transposed (experts, shared
 * experts, the dense MLP), sources declared here. */
#include <stddef.h>
#include <string.h>

#include "am.h"

#define IK "InklingForConditionalGeneration"
#define T "text_config."

typedef struct ink_cfg {
  int64_t heads, kv, hd, swa_heads, swa_kv, swa_hd, window, d_rel, extent;
  int64_t conv, dense, moe, shared, dense_idx;
} ink_cfg;

static int read_ink(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    const am_cfg *c, ink_cfg *k) {
  int64_t inter = 24576, dense_inter = -1, moe = -1;
  const tpxp_key keys[] = {
      TPXP_KEY_Z("num_attention_heads", &k->heads, 64),
      TPXP_KEY_Z("num_key_value_heads", &k->kv, 8),
      TPXP_KEY_Z("head_dim", &k->hd, 128),
      TPXP_KEY_Z("swa_num_attention_heads", &k->swa_heads, 64),
      TPXP_KEY_Z("swa_num_key_value_heads", &k->swa_kv, 16),
      TPXP_KEY_Z("swa_head_dim", &k->swa_hd, 128),
      TPXP_KEY_Z("sliding_window_size", &k->window, 512),
      TPXP_KEY_Z("d_rel", &k->d_rel, 16),
      TPXP_KEY_Z("rel_extent", &k->extent, 1024),
      TPXP_KEY_Z("conv_kernel_size", &k->conv, 4),
      TPXP_KEY_Z("intermediate_size", &inter, 24576),
      TPXP_KEY_I("dense_intermediate_size", &dense_inter, -1),
      TPXP_KEY_I("moe_intermediate_size", &moe, -1),
      TPXP_KEY_Z("n_shared_experts", &k->shared, 2),
      TPXP_KEY_I("dense_mlp_idx", &k->dense_idx, 0),
  };
  TPXP_CHK(TPXP_CFG_READ(host, ctx, "text_config", keys));
  /* InklingTextConfig: without moe_intermediate_size the experts take
   * intermediate_size when dense_intermediate_size is given (the dense
   * width), else 3072. */
  k->moe = moe > 0 ? moe : dense_inter > 0 ? inter : 3072;
  k->dense = dense_inter > 0 ? dense_inter : inter;
  (void)c;
  return TPX_PLUGIN_OK;
}

/* Is layer i sliding ("hybrid_sliding"), is it MoE ("sparse")? */
static int layer_kind(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                      const ink_cfg *k, int64_t i, int *sliding, int *sparse) {
  const char *s = NULL;
  TPXP_CHK(am_list_str(host, ctx, T "layer_types", i, &s));
  if (s != NULL)
    *sliding = strcmp(s, "hybrid_sliding") == 0;
  else if (host->config_has(ctx, T "local_layer_ids"))
    TPXP_CHK(am_list_has(host, ctx, T "local_layer_ids", i, sliding));
  else
    *sliding = (i + 1) % 6 != 0;
  TPXP_CHK(am_list_str(host, ctx, T "mlp_layer_types", i, &s));
  *sparse = s != NULL ? strcmp(s, "sparse") == 0 : i >= k->dense_idx;
  return TPX_PLUGIN_OK;
}

static int has_sources(const tpx_plugin_host *host) {
  return host->struct_size > offsetof(tpx_plugin_host, skeleton_add_source) &&
         host->skeleton_add_source != NULL;
}

/* "<layer>.<param>" read whole from "model.llm.layers.<i>.<src>", stored
 * transposed (its last two dims swapped). */
static int src_t(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                 const char *layer, int64_t i, const char *param,
                 const char *src, int nd, const int64_t *shape) {
  char p[TPXP_FQN_MAX], s[TPXP_FQN_MAX];
  const int64_t o[3] = {0, 0, 0};
  if (!has_sources(host))
    return TPX_PLUGIN_OK;
  tpxp_fmt(p, sizeof p, "%s.%s", layer, param);
  tpxp_fmt(s, sizeof s, "model.llm.layers.%lld.%s", (long long)i, src);
  return host->skeleton_add_source(ctx, p, s, o, shape, nd, 1);
}

static int ink_attn(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    const am_cfg *c, const ink_cfg *k, const char *layer,
                    int sliding) {
  const int64_t h = c->hidden, hd = sliding ? k->swa_hd : k->hd;
  const int64_t q = (sliding ? k->swa_heads : k->heads) * hd;
  const int64_t kv = (sliding ? k->swa_kv : k->kv) * hd;
  const int64_t r = (sliding ? k->swa_heads : k->heads) * k->d_rel;
  const int64_t ks[3] = {kv, 1, k->conv}, hs[3] = {h, 1, k->conv};
  const tpxp_sk_row rows[] = {
      TPXP_SK_MOD("", "container"),
      TPXP_SK_MOD("self_attn", "other"),
      TPXP_SK_LIN("self_attn.q_proj", h, q, 0),
      TPXP_SK_LIN("self_attn.k_proj", h, kv, 0),
      TPXP_SK_LIN("self_attn.v_proj", h, kv, 0),
      TPXP_SK_LIN("self_attn.r_proj", h, r, 0),
      TPXP_SK_LIN("self_attn.o_proj", q, h, 0),
      TPXP_SK_MOD("self_attn.k_sconv", "other"),
      TPXP_SK_MOD("self_attn.k_sconv._fp32_params", "other"),
      {.kind = TPXP_SK_PARAM_ND,
       .suffix = "self_attn.k_sconv._fp32_params",
       .name = "weight",
       .a = 3,
       .shape = ks,
       .dtype = AM_F32},
      TPXP_SK_MOD("self_attn.v_sconv", "other"),
      TPXP_SK_MOD("self_attn.v_sconv._fp32_params", "other"),
      {.kind = TPXP_SK_PARAM_ND,
       .suffix = "self_attn.v_sconv._fp32_params",
       .name = "weight",
       .a = 3,
       .shape = ks,
       .dtype = AM_F32},
      TPXP_SK_NRM("self_attn.q_norm", hd, 0),
      TPXP_SK_NRM("self_attn.k_norm", hd, 0),
      TPXP_SK_MOD("self_attn.rel_logits_proj", "other"),
      TPXP_SK_PRM("self_attn.rel_logits_proj", "proj", k->d_rel,
                  sliding ? k->window : k->extent),
      TPXP_SK_NRM("input_layernorm", h, 0),
      TPXP_SK_NRM("post_attention_layernorm", h, 0),
      TPXP_SK_MOD("attn_sconv", "other"),
      TPXP_SK_MOD("attn_sconv._fp32_params", "other"),
      {.kind = TPXP_SK_PARAM_ND,
       .suffix = "attn_sconv._fp32_params",
       .name = "weight",
       .a = 3,
       .shape = hs,
       .dtype = AM_F32},
      TPXP_SK_MOD("mlp_sconv", "other"),
      TPXP_SK_MOD("mlp_sconv._fp32_params", "other"),
      {.kind = TPXP_SK_PARAM_ND,
       .suffix = "mlp_sconv._fp32_params",
       .name = "weight",
       .a = 3,
       .shape = hs,
       .dtype = AM_F32},
  };
  return TPXP_SK_ROWS(host, ctx, layer, rows, NULL);
}

static int ink_mlp(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                   const am_cfg *c, const ink_cfg *k, const char *layer,
                   int64_t i, int sparse) {
  const int64_t h = c->hidden, E = c->experts, I = k->moe, S = k->shared;
  const int64_t gu[3] = {E, h, 2 * I}, dn[3] = {E, I, h};
  const int64_t sgu[3] = {S, h, 2 * I}, sdn[3] = {S, I, h};
  const int64_t dgu[2] = {h, 2 * k->dense}, ddn[2] = {k->dense, h};
  if (!sparse) {
    const tpxp_sk_row rows[] = {
        TPXP_SK_MOD("mlp", "other"),
        TPXP_SK_PRM("mlp", "gate_up_proj", h, 2 * k->dense),
        TPXP_SK_PRM("mlp", "down_proj", k->dense, h),
        TPXP_SK_PRM("mlp", "global_scale", 1, -1),
    };
    TPXP_CHK(TPXP_SK_ROWS(host, ctx, layer, rows, NULL));
    TPXP_CHK(src_t(host, ctx, layer, i, "mlp.gate_up_proj", "mlp.w13_dn.weight",
                   2, dgu));
    return src_t(host, ctx, layer, i, "mlp.down_proj", "mlp.w2_md.weight", 2,
                 ddn);
  }
  {
    const tpxp_sk_row rows[] = {
        TPXP_SK_MOD("mlp", "other"),
        TPXP_SK_MOD("mlp.gate", "other"),
        TPXP_SK_PRM("mlp.gate", "weight", E + S, h),
        TPXP_SK_PRM("mlp.gate", "global_scale", 1, -1),
        TPXP_SK_MOD("mlp.gate._fp32_params", "other"),
        {.kind = TPXP_SK_PARAM,
         .suffix = "mlp.gate._fp32_params",
         .name = "e_score_correction_bias",
         .a = E,
         .b = -1,
         .dtype = AM_F32},
        TPXP_SK_MOD("mlp.experts", "other"),
        TPXP_SK_PRM_ND("mlp.experts", "gate_and_up_projs", 3, gu),
        TPXP_SK_PRM_ND("mlp.experts", "down_projs", 3, dn),
        TPXP_SK_MOD("mlp.shared_experts", "other"),
        TPXP_SK_PRM_ND("mlp.shared_experts", "gate_up_proj", 3, sgu),
        TPXP_SK_PRM_ND("mlp.shared_experts", "down_proj", 3, sdn),
    };
    TPXP_CHK(TPXP_SK_ROWS(host, ctx, layer, rows, NULL));
  }
  TPXP_CHK(src_t(host, ctx, layer, i, "mlp.experts.gate_and_up_projs",
                 "mlp.experts.w13_weight", 3, gu));
  TPXP_CHK(src_t(host, ctx, layer, i, "mlp.experts.down_projs",
                 "mlp.experts.w2_weight", 3, dn));
  TPXP_CHK(src_t(host, ctx, layer, i, "mlp.shared_experts.gate_up_proj",
                 "mlp.shared_experts.shared_w13_weight", 3, sgu));
  return src_t(host, ctx, layer, i, "mlp.shared_experts.down_proj",
               "mlp.shared_experts.shared_w2_weight", 3, sdn);
}

static int ink_layer(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const char *layer, int64_t i, const void *user) {
  const void *const *u = user;
  int sliding = 0, sparse = 0;
  TPXP_CHK(layer_kind(host, ctx, u[1], i, &sliding, &sparse));
  TPXP_CHK(ink_attn(host, ctx, u[0], u[1], layer, sliding));
  return ink_mlp(host, ctx, u[0], u[1], layer, i, sparse);
}

/* model.audio_tower: the n_mel_bins codebooks of mel_vocab_size rows in one
 * table, and a norm. */
static int ink_audio(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     int64_t h) {
  int64_t bins = 80, vocab = 256;
  const tpxp_key keys[] = {
      /* InklingAudioConfig's attribute_map: num_codebooks, codebook_size */
      {.key = "n_mel_bins",
       .alt = "num_codebooks",
       .type = TPXP_KEY_SIZE,
       .out = &bins,
       .dflt_int = 80},
      {.key = "mel_vocab_size",
       .alt = "codebook_size",
       .type = TPXP_KEY_SIZE,
       .out = &vocab,
       .dflt_int = 256},
  };
  TPXP_CHK(TPXP_CFG_READ(host, ctx, "audio_config", keys));
  {
    const tpxp_sk_row rows[] = {
        TPXP_SK_MOD("", "other"),
        TPXP_SK_MOD("embed_audio_tokens", "other"),
        TPXP_SK_EMB("embed_audio_tokens.embed_audio_tokens", bins * vocab, h),
        TPXP_SK_NRM("norm", h, 0),
    };
    return TPXP_SK_ROWS(host, ctx, "model.audio_tower", rows, NULL);
  }
}

int am_sk_inkling(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                  const am_cfg *c) {
  ink_cfg k;
  const void *user[2] = {c, &k};
  memset(&k, 0, sizeof k);
  TPXP_CHK(read_ink(host, ctx, c, &k));
  if (k.shared <= 0)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "automodel_moe: " IK ": text_config.n_shared_experts "
                     "must be positive");
  TPXP_CHK(tpxp_sk_module(host, ctx, "model", "other"));
  TPXP_CHK(am_sk_text_stack(host, ctx, c, "model.language_model", "lm_head",
                            ink_layer, user, 1));
  TPXP_CHK(ink_audio(host, ctx, c->hidden));
  return am_sk_inkling_vision(host, ctx, c->hidden);
}
