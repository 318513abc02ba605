/* gemma3_skeleton.c — Gemma3 model skeletons from a config, with the
 * parameter names, shapes and module order of the Hugging Face checkpoints
 * (transformers v5 module tree).
 *
 * Gemma3ForCausalLM: model.{embed_tokens, layers.N, norm, rotary_emb} +
 * lm_head (tied to the embedding unless tie_word_embeddings is false). Each
 * layer has q/k/v/o projections, q_norm and k_norm of head_dim, a gated MLP and
 * four norms (input, post_attention, pre_feedforward, post_feedforward).
 * Gemma3ForConditionalGeneration: model.vision_tower (SigLIP),
 * model.multi_modal_projector, model.language_model (the text stack above)
 * and lm_head. Missing keys take the transformers config defaults. The
 * rotary module carries no parameters; it is listed because the sp plan
 * keys it. There is no rotary_emb_local: transformers v5 computes both
 * layer types' RoPE in the one rotary_emb (the sp plan's rotary_emb_local
 * key is optional for that reason). */
#include "gemma3.h"

#include <stdio.h>

#include "tpxp_common.h"

typedef struct gemma3_text {
  int64_t vocab, hidden, inter, layers, heads, kv, head_dim;
  int attn_bias;
} gemma3_text;

/* Gemma3TextConfig defaults (transformers) where a key is absent. */
static int read_text(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const char *sec, gemma3_text *t) {
  const tpxp_key keys[] = {
      TPXP_KEY_I("vocab_size", &t->vocab, 262208),
      TPXP_KEY_I("hidden_size", &t->hidden, 2304),
      TPXP_KEY_I("intermediate_size", &t->inter, 9216),
      TPXP_KEY_I("num_hidden_layers", &t->layers, 26),
      TPXP_KEY_I("num_attention_heads", &t->heads, 8),
      TPXP_KEY_I("num_key_value_heads", &t->kv, 4),
      TPXP_KEY_I("head_dim", &t->head_dim, 256),
      TPXP_KEY_B("attention_bias", &t->attn_bias, 0),
  };
  TPXP_CHK(TPXP_CFG_READ(host, ctx, sec, keys));
  if (t->vocab <= 0 || t->hidden <= 0 || t->inter <= 0 || t->layers < 0 ||
      t->heads <= 0 || t->kv <= 0 || t->head_dim <= 0)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "gemma3: config%s%s has a non-positive size (vocab %lld, "
                     "hidden %lld, intermediate %lld, layers %lld, heads "
                     "%lld, kv heads %lld, head_dim %lld)",
                     sec[0] ? " section " : "", sec, (long long)t->vocab,
                     (long long)t->hidden, (long long)t->inter,
                     (long long)t->layers, (long long)t->heads,
                     (long long)t->kv, (long long)t->head_dim);
  return TPX_PLUGIN_OK;
}

static int text_stack(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                      const char *P, const gemma3_text *t) {
  int64_t h = t->hidden, q = t->heads * t->head_dim, kv = t->kv * t->head_dim;
  int ab = t->attn_bias;
  const tpxp_sk_row head[] = {
      TPXP_SK_EMB("embed_tokens", t->vocab, h),
      TPXP_SK_MOD("layers", "container"),
  };
  const tpxp_sk_row layer[] = {
      TPXP_SK_LIN("self_attn.q_proj", h, q, ab),
      TPXP_SK_LIN("self_attn.k_proj", h, kv, ab),
      TPXP_SK_LIN("self_attn.v_proj", h, kv, ab),
      TPXP_SK_LIN("self_attn.o_proj", q, h, ab),
      TPXP_SK_NRM("self_attn.q_norm", t->head_dim, 0),
      TPXP_SK_NRM("self_attn.k_norm", t->head_dim, 0),
      TPXP_SK_LIN("mlp.gate_proj", h, t->inter, 0),
      TPXP_SK_LIN("mlp.up_proj", h, t->inter, 0),
      TPXP_SK_LIN("mlp.down_proj", t->inter, h, 0),
      TPXP_SK_NRM("input_layernorm", h, 0),
      TPXP_SK_NRM("post_attention_layernorm", h, 0),
      TPXP_SK_NRM("pre_feedforward_layernorm", h, 0),
      TPXP_SK_NRM("post_feedforward_layernorm", h, 0),
  };
  const tpxp_sk_row tail[] = {
      TPXP_SK_NRM("norm", h, 0),
      TPXP_SK_MOD("rotary_emb", "rotary"),
  };
  TPXP_CHK(TPXP_SK_ROWS(host, ctx, P, head, NULL));
  TPXP_CHK(TPXP_SK_LAYERS(host, ctx, P, t->layers, layer, NULL));
  return TPXP_SK_ROWS(host, ctx, P, tail, NULL);
}

typedef struct siglip {
  int64_t hidden, inter, layers, channels, image, patch;
  int use_head;
} siglip;

/* SiglipVisionConfig defaults where a key is absent. */
static int read_siglip(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                       siglip *v) {
  const tpxp_key keys[] = {
      TPXP_KEY_I("hidden_size", &v->hidden, 768),
      TPXP_KEY_I("intermediate_size", &v->inter, 3072),
      TPXP_KEY_I("num_hidden_layers", &v->layers, 12),
      TPXP_KEY_I("num_channels", &v->channels, 3),
      TPXP_KEY_I("image_size", &v->image, 224),
      TPXP_KEY_I("patch_size", &v->patch, 16),
      TPXP_KEY_B("vision_use_head", &v->use_head, 1),
  };
  TPXP_CHK(TPXP_CFG_READ(host, ctx, "vision_config", keys));
  if (v->hidden <= 0 || v->inter <= 0 || v->layers < 0 || v->channels <= 0 ||
      v->patch <= 0 || v->image < v->patch)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "gemma3: vision_config has invalid sizes (hidden %lld, "
                     "intermediate %lld, layers %lld, image %lld, patch %lld)",
                     (long long)v->hidden, (long long)v->inter,
                     (long long)v->layers, (long long)v->image,
                     (long long)v->patch);
  return TPX_PLUGIN_OK;
}

/* SiglipVisionModel at `P` ("model.vision_tower"). The pooling head
 * (SiglipMultiheadAttentionPoolingHead: probe, nn.MultiheadAttention with
 * a packed in_proj, layernorm, MLP) only with vision_use_head. */
static int siglip_tower(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                        const char *P, const siglip *v) {
  char f[TPXP_FQN_MAX];
  int64_t h = v->hidden, grid = v->image / v->patch;
  const int64_t conv[4] = {h, v->channels, v->patch, v->patch};
  const int64_t probe[3] = {1, 1, h};
  const tpxp_sk_row embed[] = {
      TPXP_SK_MOD("embeddings.patch_embedding", "other"),
      TPXP_SK_PRM_ND("embeddings.patch_embedding", "weight", 4, conv),
      TPXP_SK_PRM("embeddings.patch_embedding", "bias", h, -1),
      TPXP_SK_EMB("embeddings.position_embedding", grid * grid, h),
      TPXP_SK_MOD("encoder.layers", "container"),
  };
  const tpxp_sk_row layer[] = {
      TPXP_SK_LIN("self_attn.k_proj", h, h, 1),
      TPXP_SK_LIN("self_attn.v_proj", h, h, 1),
      TPXP_SK_LIN("self_attn.q_proj", h, h, 1),
      TPXP_SK_LIN("self_attn.out_proj", h, h, 1),
      TPXP_SK_NRM("layer_norm1", h, 1),
      TPXP_SK_LIN("mlp.fc1", h, v->inter, 1),
      TPXP_SK_LIN("mlp.fc2", v->inter, h, 1),
      TPXP_SK_NRM("layer_norm2", h, 1),
  };
  const tpxp_sk_row post[] = {
      TPXP_SK_NRM("post_layernorm", h, 1),
      TPXP_SK_MOD("head", "other"),
      TPXP_SK_PRM_ND("head", "probe", 3, probe),
      TPXP_SK_MOD("head.attention", "other"),
      TPXP_SK_PRM("head.attention", "in_proj_weight", 3 * h, h),
      TPXP_SK_PRM("head.attention", "in_proj_bias", 3 * h, -1),
      TPXP_SK_LIN("head.attention.out_proj", h, h, 1),
      TPXP_SK_NRM("head.layernorm", h, 1),
      TPXP_SK_LIN("head.mlp.fc1", h, v->inter, 1),
      TPXP_SK_LIN("head.mlp.fc2", v->inter, h, 1),
  };
  snprintf(f, sizeof f, "%s.vision_model", P);
  TPXP_CHK(TPXP_SK_ROWS(host, ctx, f, embed, NULL));
  snprintf(f, sizeof f, "%s.vision_model.encoder", P);
  TPXP_CHK(TPXP_SK_LAYERS(host, ctx, f, v->layers, layer, NULL));
  snprintf(f, sizeof f, "%s.vision_model", P);
  return tpxp_sk_rows(host, ctx, f, post, v->use_head ? TPXP_N_OF(post) : 1,
                      NULL);
}

int gemma3_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    const char *arch) {
  gemma3_text t;
  int tie = 1;
  const char *P = "model";
  char w[TPXP_FQN_MAX];
  if (tpxp_arch_is(arch, "Gemma3ForConditionalGeneration")) {
    siglip v;
    TPXP_CHK(read_text(host, ctx, "text_config", &t));
    TPXP_CHK(read_siglip(host, ctx, &v));
    /* The top-level flag wins; else the text config's; default tied. */
    TPXP_CHK(tpxp_cfg_bool_opt(host, ctx,
                               host->config_has(ctx, "tie_word_embeddings")
                                   ? "tie_word_embeddings"
                                   : "text_config.tie_word_embeddings",
                               1, &tie));
    TPXP_CHK(siglip_tower(host, ctx, "model.vision_tower", &v));
    {
      /* Gemma3MultiModalProjector: a bare [vision_hidden, text_hidden]
       * parameter and a Gemma3RMSNorm over the vision width. */
      const tpxp_sk_row proj[] = {
          TPXP_SK_MOD("", "other"),
          TPXP_SK_PRM("", "mm_input_projection_weight", v.hidden, t.hidden),
          TPXP_SK_NRM("mm_soft_emb_norm", v.hidden, 0),
      };
      TPXP_CHK(
          TPXP_SK_ROWS(host, ctx, "model.multi_modal_projector", proj, NULL));
    }
    P = "model.language_model";
  } else {
    TPXP_CHK(read_text(host, ctx, "", &t));
    TPXP_CHK(tpxp_cfg_bool_opt(host, ctx, "tie_word_embeddings", 1, &tie));
  }
  TPXP_CHK(text_stack(host, ctx, P, &t));
  snprintf(w, sizeof w, "%s.embed_tokens.weight", P);
  return tpxp_sk_lm_head(host, ctx, "lm_head", t.hidden, t.vocab, 0, tie, w,
                         NULL);
}
