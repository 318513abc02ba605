/* gemma3_skeleton.c — Gemma3 model skeletons from a config, with the
 * parameter names, shapes and module order of the Hugging Face checkpoints
 * (transformers v5 module tree).
 *
 * Gemma3ForCausalLM: model.{embed_tokens, layers.N, norm, rotary_emb} +
 * lm_head (tied to the embedding unless tie_word_embeddings is false). Each layer has q/k/v/o projections, q_norm
 * and k_norm of head_dim, a gated MLP and four norms (input,
 * post_attention, pre_feedforward, post_feedforward).
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
  char p[TPXP_FQN_MAX];
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, tpxp_path(p, sizeof p, sec, "vocab_size"),
                       262208, &t->vocab));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, tpxp_path(p, sizeof p, sec, "hidden_size"),
                       2304, &t->hidden));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx,
                       tpxp_path(p, sizeof p, sec, "intermediate_size"), 9216,
                       &t->inter));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx,
                       tpxp_path(p, sizeof p, sec, "num_hidden_layers"), 26,
                       &t->layers));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx,
                       tpxp_path(p, sizeof p, sec, "num_attention_heads"), 8,
                       &t->heads));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx,
                       tpxp_path(p, sizeof p, sec, "num_key_value_heads"), 4,
                       &t->kv));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, tpxp_path(p, sizeof p, sec, "head_dim"), 256,
                       &t->head_dim));
  TPXP_CHK(tpxp_cfg_bool_opt(host, ctx,
                        tpxp_path(p, sizeof p, sec, "attention_bias"), 0,
                        &t->attn_bias));
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
  char f[TPXP_FQN_MAX];
  int64_t i, q = t->heads * t->head_dim, kv = t->kv * t->head_dim;
  static const char *const norms[] = {
      "input_layernorm", "post_attention_layernorm",
      "pre_feedforward_layernorm", "post_feedforward_layernorm"};
  size_t k;
  snprintf(f, sizeof f, "%s.embed_tokens", P);
  TPXP_CHK(tpxp_sk_embedding(host, ctx, f, t->vocab, t->hidden, NULL));
  snprintf(f, sizeof f, "%s.layers", P);
  TPXP_CHK(tpxp_sk_module(host, ctx, f, "container"));
  for (i = 0; i < t->layers; i++) {
    long long L = (long long)i;
#define LAYER(suffix) snprintf(f, sizeof f, "%s.layers.%lld.%s", P, L, suffix)
    LAYER("self_attn.q_proj");
    TPXP_CHK(tpxp_sk_linear(host, ctx, f, t->hidden, q, t->attn_bias, NULL));
    LAYER("self_attn.k_proj");
    TPXP_CHK(tpxp_sk_linear(host, ctx, f, t->hidden, kv, t->attn_bias, NULL));
    LAYER("self_attn.v_proj");
    TPXP_CHK(tpxp_sk_linear(host, ctx, f, t->hidden, kv, t->attn_bias, NULL));
    LAYER("self_attn.o_proj");
    TPXP_CHK(tpxp_sk_linear(host, ctx, f, q, t->hidden, t->attn_bias, NULL));
    LAYER("self_attn.q_norm");
    TPXP_CHK(tpxp_sk_norm(host, ctx, f, t->head_dim, 0, NULL));
    LAYER("self_attn.k_norm");
    TPXP_CHK(tpxp_sk_norm(host, ctx, f, t->head_dim, 0, NULL));
    LAYER("mlp.gate_proj");
    TPXP_CHK(tpxp_sk_linear(host, ctx, f, t->hidden, t->inter, 0, NULL));
    LAYER("mlp.up_proj");
    TPXP_CHK(tpxp_sk_linear(host, ctx, f, t->hidden, t->inter, 0, NULL));
    LAYER("mlp.down_proj");
    TPXP_CHK(tpxp_sk_linear(host, ctx, f, t->inter, t->hidden, 0, NULL));
    for (k = 0; k < sizeof norms / sizeof norms[0]; k++) {
      LAYER(norms[k]);
      TPXP_CHK(tpxp_sk_norm(host, ctx, f, t->hidden, 0, NULL));
    }
#undef LAYER
  }
  snprintf(f, sizeof f, "%s.norm", P);
  TPXP_CHK(tpxp_sk_norm(host, ctx, f, t->hidden, 0, NULL));
  snprintf(f, sizeof f, "%s.rotary_emb", P);
  TPXP_CHK(tpxp_sk_module(host, ctx, f, "rotary"));
  return TPX_PLUGIN_OK;
}

typedef struct siglip {
  int64_t hidden, inter, layers, channels, image, patch;
  int use_head;
} siglip;

/* SiglipVisionConfig defaults where a key is absent. */
static int read_siglip(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                       siglip *v) {
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "vision_config.hidden_size", 768,
                       &v->hidden));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "vision_config.intermediate_size", 3072,
                       &v->inter));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "vision_config.num_hidden_layers", 12,
                       &v->layers));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "vision_config.num_channels", 3,
                       &v->channels));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "vision_config.image_size", 224, &v->image));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "vision_config.patch_size", 16, &v->patch));
  TPXP_CHK(tpxp_cfg_bool_opt(host, ctx, "vision_config.vision_use_head", 1,
                        &v->use_head));
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

/* SiglipVisionModel at `P` ("model.vision_tower"). */
static int siglip_tower(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                        const char *P, const siglip *v) {
  char f[TPXP_FQN_MAX];
  int64_t i, grid = v->image / v->patch;
  int64_t conv[4];
  static const char *const attn[] = {"k_proj", "v_proj", "q_proj", "out_proj"};
  size_t k;
  conv[0] = v->hidden;
  conv[1] = v->channels;
  conv[2] = v->patch;
  conv[3] = v->patch;
  snprintf(f, sizeof f, "%s.vision_model.embeddings.patch_embedding", P);
  TPXP_CHK(tpxp_sk_module(host, ctx, f, "other"));
  TPXP_CHK(host->skeleton_add_param(ctx, f, "weight", conv, 4, NULL));
  TPXP_CHK(tpxp_sk_param(host, ctx, f, "bias", v->hidden, -1, NULL));
  snprintf(f, sizeof f, "%s.vision_model.embeddings.position_embedding", P);
  TPXP_CHK(tpxp_sk_embedding(host, ctx, f, grid * grid, v->hidden, NULL));
  snprintf(f, sizeof f, "%s.vision_model.encoder.layers", P);
  TPXP_CHK(tpxp_sk_module(host, ctx, f, "container"));
  for (i = 0; i < v->layers; i++) {
    long long L = (long long)i;
    for (k = 0; k < 4; k++) {
      snprintf(f, sizeof f, "%s.vision_model.encoder.layers.%lld.self_attn.%s",
               P, L, attn[k]);
      TPXP_CHK(tpxp_sk_linear(host, ctx, f, v->hidden, v->hidden, 1, NULL));
    }
    snprintf(f, sizeof f, "%s.vision_model.encoder.layers.%lld.layer_norm1", P,
             L);
    TPXP_CHK(tpxp_sk_norm(host, ctx, f, v->hidden, 1, NULL));
    snprintf(f, sizeof f, "%s.vision_model.encoder.layers.%lld.mlp.fc1", P, L);
    TPXP_CHK(tpxp_sk_linear(host, ctx, f, v->hidden, v->inter, 1, NULL));
    snprintf(f, sizeof f, "%s.vision_model.encoder.layers.%lld.mlp.fc2", P, L);
    TPXP_CHK(tpxp_sk_linear(host, ctx, f, v->inter, v->hidden, 1, NULL));
    snprintf(f, sizeof f, "%s.vision_model.encoder.layers.%lld.layer_norm2", P,
             L);
    TPXP_CHK(tpxp_sk_norm(host, ctx, f, v->hidden, 1, NULL));
  }
  snprintf(f, sizeof f, "%s.vision_model.post_layernorm", P);
  TPXP_CHK(tpxp_sk_norm(host, ctx, f, v->hidden, 1, NULL));
  if (v->use_head) {
    /* SiglipMultiheadAttentionPoolingHead: probe, nn.MultiheadAttention
     * (packed in_proj), layernorm, MLP. */
    int64_t probe[3];
    probe[0] = 1;
    probe[1] = 1;
    probe[2] = v->hidden;
    snprintf(f, sizeof f, "%s.vision_model.head", P);
    TPXP_CHK(tpxp_sk_module(host, ctx, f, "other"));
    TPXP_CHK(host->skeleton_add_param(ctx, f, "probe", probe, 3, NULL));
    snprintf(f, sizeof f, "%s.vision_model.head.attention", P);
    TPXP_CHK(tpxp_sk_module(host, ctx, f, "other"));
    TPXP_CHK(tpxp_sk_param(host, ctx, f, "in_proj_weight", 3 * v->hidden, v->hidden,
                      NULL));
    TPXP_CHK(tpxp_sk_param(host, ctx, f, "in_proj_bias", 3 * v->hidden, -1, NULL));
    snprintf(f, sizeof f, "%s.vision_model.head.attention.out_proj", P);
    TPXP_CHK(tpxp_sk_linear(host, ctx, f, v->hidden, v->hidden, 1, NULL));
    snprintf(f, sizeof f, "%s.vision_model.head.layernorm", P);
    TPXP_CHK(tpxp_sk_norm(host, ctx, f, v->hidden, 1, NULL));
    snprintf(f, sizeof f, "%s.vision_model.head.mlp.fc1", P);
    TPXP_CHK(tpxp_sk_linear(host, ctx, f, v->hidden, v->inter, 1, NULL));
    snprintf(f, sizeof f, "%s.vision_model.head.mlp.fc2", P);
    TPXP_CHK(tpxp_sk_linear(host, ctx, f, v->inter, v->hidden, 1, NULL));
  }
  return TPX_PLUGIN_OK;
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
    if (host->config_has(ctx, "tie_word_embeddings"))
      TPXP_CHK(tpxp_cfg_bool_opt(host, ctx, "tie_word_embeddings", 1, &tie));
    else
      TPXP_CHK(tpxp_cfg_bool_opt(host, ctx, "text_config.tie_word_embeddings", 1,
                            &tie));
    TPXP_CHK(siglip_tower(host, ctx, "model.vision_tower", &v));
    /* Gemma3MultiModalProjector: a bare [vision_hidden, text_hidden]
     * parameter and a Gemma3RMSNorm over the vision width. */
    TPXP_CHK(tpxp_sk_module(host, ctx, "model.multi_modal_projector", "other"));
    TPXP_CHK(tpxp_sk_param(host, ctx, "model.multi_modal_projector",
                      "mm_input_projection_weight", v.hidden, t.hidden, NULL));
    TPXP_CHK(tpxp_sk_norm(host, ctx, "model.multi_modal_projector.mm_soft_emb_norm",
                     v.hidden, 0, NULL));
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
