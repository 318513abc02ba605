/* gemma4_skeleton.c — the Gemma4ForConditionalGeneration skeleton from a
 * config: every tensor of the published checkpoint, with the names, shapes
 * and order of the transformers Gemma4 module tree (modeling_gemma4.py).
 *
 * Tree: model.vision_tower (when vision_config is present),
 * model.language_model, model.audio_tower (when audio_config is present),
 * model.embed_vision / model.embed_audio, and lm_head tied to
 * model.language_model.embed_tokens.weight (tie_word_embeddings, default
 * true). Absent keys take the Gemma4{Text,Vision,Audio}Config defaults.
 *
 * Text layers are heterogeneous, per layer_types:
 *  - full-attention layers use global_head_dim (default 512) when it is
 *    non-zero; with attention_k_eq_v they also use
 *    num_global_key_value_heads and have no v_proj (values reuse keys);
 *  - the last num_kv_shared_layers layers reuse earlier layers' keys and
 *    values: no k_proj, v_proj, k_norm; with use_double_wide_mlp their MLP is
 *    twice intermediate_size wide;
 *  - E-series (hidden_size_per_layer_input truthy): embed_tokens_per_layer,
 *    per_layer_model_projection, per_layer_projection_norm on the text model
 *    and per_layer_input_gate / per_layer_projection /
 *    post_per_layer_input_norm on every layer;
 *  - enable_moe_block: router, experts and three extra norms per layer.
 *
 * Persistent buffers are in the checkpoint, so they are listed as tensors
 * too: each layer's layer_scalar [1], the vision tower's std_bias/std_scale
 * (standardize) and the four 0-d clip bounds of every Gemma4ClippableLinear
 * (use_clipped_linears). Weight-less modules (v_norm, the embedders'
 * pre-projection norms, rotary embeddings) are listed without parameters.
 * Not here: the plans (gemma3_plan.c). */
#include "gemma3.h"

#include <stdio.h>
#include <string.h>

#include "tpxp_common.h"

/* Longest layer_types list read; a longer one is refused. */
#define G4_MAX_LAYERS 1024

typedef struct g4_text {
  int64_t vocab, hidden, inter, layers, heads, kv, head_dim, global_head_dim,
      global_kv, kv_shared, ple, ple_vocab, experts, moe_inter;
  int attn_bias, k_eq_v, double_wide, moe;
  unsigned char full[G4_MAX_LAYERS]; /* 1: full_attention layer */
} g4_text;

typedef struct g4_vision {
  int64_t hidden, inter, layers, heads, kv, head_dim, patch, pos;
  int clipped, standardize;
} g4_vision;

typedef struct g4_audio {
  int64_t hidden, layers, heads, c0, c1, kernel, out_dims;
  int clipped;
} g4_audio;

static int fail_size(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const char *what) {
  return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                   "gemma4: config %s has a non-positive or inconsistent size",
                   what);
}

/* 1 if the object at `sec` ("" = root) has `key`, even with a null value
 * (config_has answers 0 for null). */
static int key_present(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                       const char *sec, const char *key) {
  int64_t n = 0, i;
  if (host->config_get_length(ctx, sec, &n) != TPX_PLUGIN_OK)
    return 0;
  for (i = 0; i < n; i++) {
    const char *k = NULL;
    if (host->config_get_key(ctx, sec, i, &k) == TPX_PLUGIN_OK && k != NULL &&
        strcmp(k, key) == 0)
      return 1;
  }
  return 0;
}

/* Python truthiness of an int / bool key as the config object holds it:
 * absent -> dflt (the dataclass default), null -> 0, false/true -> 0/1. */
static int truthy_int(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                      const char *sec, const char *key, int64_t dflt,
                      int64_t *out) {
  char p[TPXP_FQN_MAX];
  int b = 0;
  tpxp_path(p, sizeof p, sec, key);
  if (!host->config_has(ctx, p)) {
    *out = key_present(host, ctx, sec, key) ? 0 : dflt;
    return TPX_PLUGIN_OK;
  }
  if (host->config_get_bool(ctx, p, &b) == TPX_PLUGIN_OK) {
    *out = b;
    return TPX_PLUGIN_OK;
  }
  return tpxp_cfg_int_opt(host, ctx, p, dflt, out);
}

static int read_text(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const char *sec, g4_text *t) {
  char p[TPXP_FQN_MAX];
  int64_t n = 0, i;
  int has_types;
#define P(key) tpxp_path(p, sizeof p, sec, key)
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, P("vocab_size"), 262144, &t->vocab));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, P("hidden_size"), 2304, &t->hidden));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, P("intermediate_size"), 9216, &t->inter));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, P("num_hidden_layers"), 30, &t->layers));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, P("num_attention_heads"), 8, &t->heads));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, P("num_key_value_heads"), 4, &t->kv));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, P("head_dim"), 256, &t->head_dim));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, P("global_head_dim"), 512,
                       &t->global_head_dim));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, P("num_global_key_value_heads"), t->kv,
                       &t->global_kv));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, P("num_kv_shared_layers"), 0,
                       &t->kv_shared));
  /* Gemma4TextConfig defaults hidden_size_per_layer_input to 256: a text
   * config that omits the key builds the per-layer embeddings; null or 0
   * does not. */
  TPXP_CHK(truthy_int(host, ctx, sec, "hidden_size_per_layer_input", 256,
                 &t->ple));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, P("vocab_size_per_layer_input"), 262144,
                       &t->ple_vocab));
  TPXP_CHK(tpxp_cfg_bool_opt(host, ctx, P("attention_bias"), 0, &t->attn_bias));
  TPXP_CHK(tpxp_cfg_bool_opt(host, ctx, P("attention_k_eq_v"), 0, &t->k_eq_v));
  TPXP_CHK(tpxp_cfg_bool_opt(host, ctx, P("use_double_wide_mlp"), 0,
                        &t->double_wide));
  TPXP_CHK(tpxp_cfg_bool_opt(host, ctx, P("enable_moe_block"), 0, &t->moe));
  t->experts = t->moe_inter = 0;
  if (t->moe) {
    TPXP_CHK(tpxp_cfg_int_req(host, ctx, P("num_experts"), &t->experts));
    TPXP_CHK(tpxp_cfg_int_req(host, ctx, P("moe_intermediate_size"),
                         &t->moe_inter));
    if (t->experts <= 0 || t->moe_inter <= 0)
      return fail_size(host, ctx, "num_experts / moe_intermediate_size");
  }
  if (t->vocab <= 0 || t->hidden <= 0 || t->inter <= 0 || t->layers < 0 ||
      t->heads <= 0 || t->kv <= 0 || t->head_dim <= 0 ||
      t->global_head_dim < 0 || t->global_kv <= 0 || t->kv_shared < 0 ||
      t->ple < 0 || (t->ple > 0 && t->ple_vocab <= 0))
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "gemma4: text config has a non-positive size (vocab %lld, "
                     "hidden %lld, intermediate %lld, layers %lld, heads "
                     "%lld, kv heads %lld, head_dim %lld, global_head_dim "
                     "%lld, global kv heads %lld, num_kv_shared_layers %lld, "
                     "hidden_size_per_layer_input %lld)",
                     (long long)t->vocab, (long long)t->hidden,
                     (long long)t->inter, (long long)t->layers,
                     (long long)t->heads, (long long)t->kv,
                     (long long)t->head_dim, (long long)t->global_head_dim,
                     (long long)t->global_kv, (long long)t->kv_shared,
                     (long long)t->ple);
  if (t->layers > G4_MAX_LAYERS)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "gemma4: num_hidden_layers %lld exceeds this plugin's "
                     "limit of %d",
                     (long long)t->layers, G4_MAX_LAYERS);
  /* layer_types: absent -> every 6th layer full (5:1); the last layer is
   * forced to full attention either way, as Gemma4TextConfig does. */
  has_types = host->config_get_length(ctx, P("layer_types"), &n) ==
              TPX_PLUGIN_OK;
  if (has_types && n != t->layers)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "gemma4: %s has %lld entries but num_hidden_layers is "
                     "%lld",
                     P("layer_types"), (long long)n, (long long)t->layers);
  for (i = 0; i < t->layers; i++) {
    if (has_types) {
      char item[48];
      const char *s = NULL;
      snprintf(item, sizeof item, "layer_types[%lld]", (long long)i);
      if (host->config_get_string(ctx, P(item), &s) != TPX_PLUGIN_OK ||
          s == NULL)
        return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                         "gemma4: %s is not a string", p);
      if (strcmp(s, "full_attention") == 0)
        t->full[i] = 1;
      else if (strcmp(s, "sliding_attention") == 0)
        t->full[i] = 0;
      else
        return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                         "gemma4: %s is '%s' (expected sliding_attention or "
                         "full_attention)",
                         p, s);
    } else {
      t->full[i] = (unsigned char)((i + 1) % 6 == 0);
    }
  }
  if (t->layers > 0)
    t->full[t->layers - 1] = 1;
#undef P
  return TPX_PLUGIN_OK;
}

static int read_vision(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                       g4_vision *v) {
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "vision_config.hidden_size", 768,
                       &v->hidden));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "vision_config.intermediate_size", 3072,
                       &v->inter));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "vision_config.num_hidden_layers", 16,
                       &v->layers));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "vision_config.num_attention_heads", 12,
                       &v->heads));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "vision_config.num_key_value_heads", 12,
                       &v->kv));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "vision_config.head_dim", 64,
                       &v->head_dim));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "vision_config.patch_size", 16, &v->patch));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "vision_config.position_embedding_size",
                       10240, &v->pos));
  TPXP_CHK(tpxp_cfg_bool_opt(host, ctx, "vision_config.use_clipped_linears", 0,
                        &v->clipped));
  TPXP_CHK(tpxp_cfg_bool_opt(host, ctx, "vision_config.standardize", 0,
                        &v->standardize));
  if (v->hidden <= 0 || v->inter <= 0 || v->layers < 0 || v->heads <= 0 ||
      v->kv <= 0 || v->head_dim <= 0 || v->patch <= 0 || v->pos <= 0)
    return fail_size(host, ctx, "vision_config");
  return TPX_PLUGIN_OK;
}

static int read_audio(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                      g4_audio *a) {
  int64_t n = 0;
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "audio_config.hidden_size", 1024,
                       &a->hidden));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "audio_config.num_hidden_layers", 12,
                       &a->layers));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "audio_config.num_attention_heads", 8,
                       &a->heads));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "audio_config.conv_kernel_size", 5,
                       &a->kernel));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "audio_config.output_proj_dims", 1536,
                       &a->out_dims));
  TPXP_CHK(tpxp_cfg_bool_opt(host, ctx, "audio_config.use_clipped_linears", 1,
                        &a->clipped));
  a->c0 = 128;
  a->c1 = 32;
  if (host->config_get_length(ctx, "audio_config.subsampling_conv_channels",
                              &n) == TPX_PLUGIN_OK) {
    if (n != 2)
      return fail_size(host, ctx,
                       "audio_config.subsampling_conv_channels (2 entries)");
    TPXP_CHK(tpxp_cfg_int_req(host, ctx,
                         "audio_config.subsampling_conv_channels[0]", &a->c0));
    TPXP_CHK(tpxp_cfg_int_req(host, ctx,
                         "audio_config.subsampling_conv_channels[1]", &a->c1));
  }
  if (a->hidden <= 0 || a->layers < 0 || a->heads <= 0 ||
      a->hidden % a->heads != 0 || a->kernel <= 0 || a->out_dims <= 0 ||
      a->c0 < 4 || a->c1 <= 0)
    return fail_size(host, ctx, "audio_config");
  return TPX_PLUGIN_OK;
}

/* ---- builders ---- */

static int add_nd(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                  const char *module, const char *name, int32_t ndim,
                  int64_t d0, int64_t d1, int64_t d2, int64_t d3) {
  int64_t shape[4];
  shape[0] = d0;
  shape[1] = d1;
  shape[2] = d2;
  shape[3] = d3;
  return host->skeleton_add_param(ctx, module, name, shape, ndim, NULL);
}

/* Gemma4ClippableLinear at `fqn`: the bounds (persistent 0-d buffers, own
 * tensors first) when clipped, then `fqn.linear` without bias. */
static int clippable(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const char *fqn, int64_t in, int64_t out, int clipped) {
  static const char *const bounds[] = {"input_min", "input_max", "output_min",
                                       "output_max"};
  char f[TPXP_FQN_MAX];
  size_t k;
  TPXP_CHK(tpxp_sk_module(host, ctx, fqn, "other"));
  if (clipped)
    for (k = 0; k < 4; k++)
      TPXP_CHK(add_nd(host, ctx, fqn, bounds[k], 0, 0, 0, 0, 0));
  tpxp_fmt(f, sizeof f, "%s.linear", fqn);
  return tpxp_sk_linear(host, ctx, f, in, out, 0, NULL);
}

static int text_layer(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                      const char *P, const g4_text *t, int64_t i) {
  char f[TPXP_FQN_MAX], L[TPXP_FQN_MAX];
  int full = t->full[i];
  int64_t hd = full && t->global_head_dim ? t->global_head_dim : t->head_dim;
  int alt = t->k_eq_v && full; /* keys double as values */
  int64_t kvh = alt ? t->global_kv : t->kv;
  int64_t first_shared = t->layers - t->kv_shared;
  int shared = i >= first_shared && first_shared >= 0;
  int wide = t->double_wide && i >= first_shared && first_shared > 0;
  int64_t inter = t->inter * (wide ? 2 : 1);
  static const char *const norms[] = {
      "input_layernorm", "post_attention_layernorm",
      "pre_feedforward_layernorm", "post_feedforward_layernorm"};
  size_t k;
  tpxp_fmt(L, sizeof L, "%s.layers.%lld", P, (long long)i);
  TPXP_CHK(tpxp_sk_module(host, ctx, L, "container"));
  TPXP_CHK(add_nd(host, ctx, L, "layer_scalar", 1, 1, 0, 0, 0));
#define SUB(s) tpxp_fmt(f, sizeof f, "%s.%s", L, s)
  SUB("self_attn");
  TPXP_CHK(tpxp_sk_module(host, ctx, f, "other"));
  SUB("self_attn.q_proj");
  TPXP_CHK(tpxp_sk_linear(host, ctx, f, t->hidden, t->heads * hd, t->attn_bias,
                     NULL));
  SUB("self_attn.q_norm");
  TPXP_CHK(tpxp_sk_norm(host, ctx, f, hd, 0, NULL));
  if (!shared) {
    SUB("self_attn.k_norm");
    TPXP_CHK(tpxp_sk_norm(host, ctx, f, hd, 0, NULL));
    SUB("self_attn.v_norm"); /* RMSNorm without scale: no weight */
    TPXP_CHK(tpxp_sk_module(host, ctx, f, "norm"));
    SUB("self_attn.k_proj");
    TPXP_CHK(tpxp_sk_linear(host, ctx, f, t->hidden, kvh * hd, t->attn_bias,
                       NULL));
    if (!alt) {
      SUB("self_attn.v_proj");
      TPXP_CHK(tpxp_sk_linear(host, ctx, f, t->hidden, kvh * hd, t->attn_bias,
                         NULL));
    }
  }
  SUB("self_attn.o_proj");
  TPXP_CHK(tpxp_sk_linear(host, ctx, f, t->heads * hd, t->hidden, t->attn_bias,
                     NULL));
  SUB("mlp.gate_proj");
  TPXP_CHK(tpxp_sk_linear(host, ctx, f, t->hidden, inter, 0, NULL));
  SUB("mlp.up_proj");
  TPXP_CHK(tpxp_sk_linear(host, ctx, f, t->hidden, inter, 0, NULL));
  SUB("mlp.down_proj");
  TPXP_CHK(tpxp_sk_linear(host, ctx, f, inter, t->hidden, 0, NULL));
  for (k = 0; k < sizeof norms / sizeof norms[0]; k++) {
    SUB(norms[k]);
    TPXP_CHK(tpxp_sk_norm(host, ctx, f, t->hidden, 0, NULL));
  }
  if (t->ple > 0) {
    SUB("per_layer_input_gate");
    TPXP_CHK(tpxp_sk_linear(host, ctx, f, t->hidden, t->ple, 0, NULL));
    SUB("per_layer_projection");
    TPXP_CHK(tpxp_sk_linear(host, ctx, f, t->ple, t->hidden, 0, NULL));
    SUB("post_per_layer_input_norm");
    TPXP_CHK(tpxp_sk_norm(host, ctx, f, t->hidden, 0, NULL));
  }
  if (t->moe) {
    /* Gemma4TextRouter: own scale and per_expert_scale, a weight-less
     * norm, then the proj; Gemma4TextExperts: packed 3-D tensors. */
    SUB("router");
    TPXP_CHK(tpxp_sk_module(host, ctx, f, "other"));
    TPXP_CHK(add_nd(host, ctx, f, "scale", 1, t->hidden, 0, 0, 0));
    TPXP_CHK(add_nd(host, ctx, f, "per_expert_scale", 1, t->experts, 0, 0, 0));
    SUB("router.norm");
    TPXP_CHK(tpxp_sk_module(host, ctx, f, "norm"));
    SUB("router.proj");
    TPXP_CHK(tpxp_sk_linear(host, ctx, f, t->hidden, t->experts, 0, NULL));
    SUB("experts");
    TPXP_CHK(tpxp_sk_module(host, ctx, f, "other"));
    TPXP_CHK(add_nd(host, ctx, f, "gate_up_proj", 3, t->experts, 2 * t->moe_inter,
               t->hidden, 0));
    TPXP_CHK(add_nd(host, ctx, f, "down_proj", 3, t->experts, t->hidden,
               t->moe_inter, 0));
    SUB("post_feedforward_layernorm_1");
    TPXP_CHK(tpxp_sk_norm(host, ctx, f, t->hidden, 0, NULL));
    SUB("post_feedforward_layernorm_2");
    TPXP_CHK(tpxp_sk_norm(host, ctx, f, t->hidden, 0, NULL));
    SUB("pre_feedforward_layernorm_2");
    TPXP_CHK(tpxp_sk_norm(host, ctx, f, t->hidden, 0, NULL));
  }
#undef SUB
  return TPX_PLUGIN_OK;
}

/* Gemma4TextModel at `P`. */
static int text_model(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                      const char *P, const g4_text *t) {
  char f[TPXP_FQN_MAX];
  int64_t i;
  tpxp_fmt(f, sizeof f, "%s.embed_tokens", P);
  TPXP_CHK(tpxp_sk_embedding(host, ctx, f, t->vocab, t->hidden, NULL));
  tpxp_fmt(f, sizeof f, "%s.layers", P);
  TPXP_CHK(tpxp_sk_module(host, ctx, f, "container"));
  for (i = 0; i < t->layers; i++)
    TPXP_CHK(text_layer(host, ctx, P, t, i));
  tpxp_fmt(f, sizeof f, "%s.norm", P);
  TPXP_CHK(tpxp_sk_norm(host, ctx, f, t->hidden, 0, NULL));
  tpxp_fmt(f, sizeof f, "%s.rotary_emb", P);
  TPXP_CHK(tpxp_sk_module(host, ctx, f, "rotary"));
  if (t->ple > 0) {
    tpxp_fmt(f, sizeof f, "%s.embed_tokens_per_layer", P);
    TPXP_CHK(tpxp_sk_embedding(host, ctx, f, t->ple_vocab, t->layers * t->ple,
                          NULL));
    tpxp_fmt(f, sizeof f, "%s.per_layer_model_projection", P);
    TPXP_CHK(tpxp_sk_linear(host, ctx, f, t->hidden, t->layers * t->ple, 0, NULL));
    tpxp_fmt(f, sizeof f, "%s.per_layer_projection_norm", P);
    TPXP_CHK(tpxp_sk_norm(host, ctx, f, t->ple, 0, NULL));
  }
  return TPX_PLUGIN_OK;
}

/* Gemma4VisionModel at `P`. */
static int vision_tower(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                        const char *P, const g4_vision *v) {
  char f[TPXP_FQN_MAX], L[TPXP_FQN_MAX];
  int64_t i, q = v->heads * v->head_dim, kv = v->kv * v->head_dim;
  static const char *const norms[] = {
      "input_layernorm", "post_attention_layernorm",
      "pre_feedforward_layernorm", "post_feedforward_layernorm"};
  size_t k;
  TPXP_CHK(tpxp_sk_module(host, ctx, P, "other"));
  if (v->standardize) {
    TPXP_CHK(add_nd(host, ctx, P, "std_bias", 1, v->hidden, 0, 0, 0));
    TPXP_CHK(add_nd(host, ctx, P, "std_scale", 1, v->hidden, 0, 0, 0));
  }
  tpxp_fmt(f, sizeof f, "%s.patch_embedder", P);
  TPXP_CHK(tpxp_sk_module(host, ctx, f, "other"));
  TPXP_CHK(add_nd(host, ctx, f, "position_embedding_table", 3, 2, v->pos,
             v->hidden, 0));
  tpxp_fmt(f, sizeof f, "%s.patch_embedder.input_proj", P);
  TPXP_CHK(tpxp_sk_linear(host, ctx, f, 3 * v->patch * v->patch, v->hidden, 0,
                     NULL));
  tpxp_fmt(f, sizeof f, "%s.encoder.rotary_emb", P);
  TPXP_CHK(tpxp_sk_module(host, ctx, f, "rotary"));
  tpxp_fmt(f, sizeof f, "%s.encoder.layers", P);
  TPXP_CHK(tpxp_sk_module(host, ctx, f, "container"));
  for (i = 0; i < v->layers; i++) {
    tpxp_fmt(L, sizeof L, "%s.encoder.layers.%lld", P, (long long)i);
#define SUB(s) tpxp_fmt(f, sizeof f, "%s.%s", L, s)
    SUB("self_attn.q_proj");
    TPXP_CHK(clippable(host, ctx, f, v->hidden, q, v->clipped));
    SUB("self_attn.k_proj");
    TPXP_CHK(clippable(host, ctx, f, v->hidden, kv, v->clipped));
    SUB("self_attn.v_proj");
    TPXP_CHK(clippable(host, ctx, f, v->hidden, kv, v->clipped));
    SUB("self_attn.o_proj");
    TPXP_CHK(clippable(host, ctx, f, q, v->hidden, v->clipped));
    SUB("self_attn.q_norm");
    TPXP_CHK(tpxp_sk_norm(host, ctx, f, v->head_dim, 0, NULL));
    SUB("self_attn.k_norm");
    TPXP_CHK(tpxp_sk_norm(host, ctx, f, v->head_dim, 0, NULL));
    SUB("self_attn.v_norm");
    TPXP_CHK(tpxp_sk_module(host, ctx, f, "norm"));
    SUB("mlp.gate_proj");
    TPXP_CHK(clippable(host, ctx, f, v->hidden, v->inter, v->clipped));
    SUB("mlp.up_proj");
    TPXP_CHK(clippable(host, ctx, f, v->hidden, v->inter, v->clipped));
    SUB("mlp.down_proj");
    TPXP_CHK(clippable(host, ctx, f, v->inter, v->hidden, v->clipped));
    for (k = 0; k < sizeof norms / sizeof norms[0]; k++) {
      SUB(norms[k]);
      TPXP_CHK(tpxp_sk_norm(host, ctx, f, v->hidden, 0, NULL));
    }
#undef SUB
  }
  return TPX_PLUGIN_OK;
}

/* Gemma4AudioFeedForward at `F`. */
static int audio_ffw(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const char *F, const g4_audio *a) {
  char f[TPXP_FQN_MAX];
  tpxp_fmt(f, sizeof f, "%s.ffw_layer_1", F);
  TPXP_CHK(clippable(host, ctx, f, a->hidden, 4 * a->hidden, a->clipped));
  tpxp_fmt(f, sizeof f, "%s.ffw_layer_2", F);
  TPXP_CHK(clippable(host, ctx, f, 4 * a->hidden, a->hidden, a->clipped));
  tpxp_fmt(f, sizeof f, "%s.pre_layer_norm", F);
  TPXP_CHK(tpxp_sk_norm(host, ctx, f, a->hidden, 0, NULL));
  tpxp_fmt(f, sizeof f, "%s.post_layer_norm", F);
  return tpxp_sk_norm(host, ctx, f, a->hidden, 0, NULL);
}

/* Gemma4AudioModel at `P` (conformer encoder). */
static int audio_tower(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                       const char *P, const g4_audio *a) {
  char f[TPXP_FQN_MAX], L[TPXP_FQN_MAX];
  int64_t i, H = a->hidden, hd = a->hidden / a->heads;
  tpxp_fmt(f, sizeof f, "%s.subsample_conv_projection.layer0.conv", P);
  TPXP_CHK(tpxp_sk_module(host, ctx, f, "other"));
  TPXP_CHK(add_nd(host, ctx, f, "weight", 4, a->c0, 1, 3, 3));
  tpxp_fmt(f, sizeof f, "%s.subsample_conv_projection.layer0.norm", P);
  TPXP_CHK(tpxp_sk_norm(host, ctx, f, a->c0, 0, NULL));
  tpxp_fmt(f, sizeof f, "%s.subsample_conv_projection.layer1.conv", P);
  TPXP_CHK(tpxp_sk_module(host, ctx, f, "other"));
  TPXP_CHK(add_nd(host, ctx, f, "weight", 4, a->c1, a->c0, 3, 3));
  tpxp_fmt(f, sizeof f, "%s.subsample_conv_projection.layer1.norm", P);
  TPXP_CHK(tpxp_sk_norm(host, ctx, f, a->c1, 0, NULL));
  tpxp_fmt(f, sizeof f, "%s.subsample_conv_projection.input_proj_linear", P);
  TPXP_CHK(tpxp_sk_linear(host, ctx, f, (a->c0 / 4) * a->c1, H, 0, NULL));
  tpxp_fmt(f, sizeof f, "%s.layers", P);
  TPXP_CHK(tpxp_sk_module(host, ctx, f, "container"));
  for (i = 0; i < a->layers; i++) {
    tpxp_fmt(L, sizeof L, "%s.layers.%lld", P, (long long)i);
#define SUB(s) tpxp_fmt(f, sizeof f, "%s.%s", L, s)
    SUB("feed_forward1");
    TPXP_CHK(audio_ffw(host, ctx, f, a));
    SUB("feed_forward2");
    TPXP_CHK(audio_ffw(host, ctx, f, a));
    SUB("self_attn");
    TPXP_CHK(tpxp_sk_module(host, ctx, f, "other"));
    TPXP_CHK(add_nd(host, ctx, f, "per_dim_scale", 1, hd, 0, 0, 0));
    SUB("self_attn.q_proj");
    TPXP_CHK(clippable(host, ctx, f, H, H, a->clipped));
    SUB("self_attn.k_proj");
    TPXP_CHK(clippable(host, ctx, f, H, H, a->clipped));
    SUB("self_attn.v_proj");
    TPXP_CHK(clippable(host, ctx, f, H, H, a->clipped));
    SUB("self_attn.post");
    TPXP_CHK(clippable(host, ctx, f, H, H, a->clipped));
    SUB("self_attn.relative_k_proj");
    TPXP_CHK(tpxp_sk_linear(host, ctx, f, H, H, 0, NULL));
    SUB("lconv1d.linear_start");
    TPXP_CHK(clippable(host, ctx, f, H, 2 * H, a->clipped));
    SUB("lconv1d.linear_end");
    TPXP_CHK(clippable(host, ctx, f, H, H, a->clipped));
    SUB("lconv1d.depthwise_conv1d");
    TPXP_CHK(tpxp_sk_module(host, ctx, f, "other"));
    TPXP_CHK(add_nd(host, ctx, f, "weight", 3, H, 1, a->kernel, 0));
    SUB("lconv1d.pre_layer_norm");
    TPXP_CHK(tpxp_sk_norm(host, ctx, f, H, 0, NULL));
    SUB("lconv1d.conv_norm");
    TPXP_CHK(tpxp_sk_norm(host, ctx, f, H, 0, NULL));
    SUB("norm_pre_attn");
    TPXP_CHK(tpxp_sk_norm(host, ctx, f, H, 0, NULL));
    SUB("norm_post_attn");
    TPXP_CHK(tpxp_sk_norm(host, ctx, f, H, 0, NULL));
    SUB("norm_out");
    TPXP_CHK(tpxp_sk_norm(host, ctx, f, H, 0, NULL));
#undef SUB
  }
  tpxp_fmt(f, sizeof f, "%s.output_proj", P);
  return tpxp_sk_linear(host, ctx, f, H, a->out_dims, 1, NULL);
}

/* Gemma4MultimodalEmbedder at `P`: a projection into the text width and a
 * weight-less pre-projection norm. */
static int embedder(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    const char *P, int64_t mm_hidden, int64_t text_hidden) {
  char f[TPXP_FQN_MAX];
  tpxp_fmt(f, sizeof f, "%s.embedding_projection", P);
  TPXP_CHK(tpxp_sk_linear(host, ctx, f, mm_hidden, text_hidden, 0, NULL));
  tpxp_fmt(f, sizeof f, "%s.embedding_pre_projection_norm", P);
  return tpxp_sk_module(host, ctx, f, "norm");
}

int gemma4_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    const char *arch) {
  g4_text t;
  g4_vision v;
  g4_audio a;
  int tie = 1;
  (void)arch;
  int has_vision = host->config_has(ctx, "vision_config");
  int has_audio = host->config_has(ctx, "audio_config");
  const char *sec =
      host->config_has(ctx, "text_config") ? "text_config" : "";
  memset(&t, 0, sizeof t);
  TPXP_CHK(read_text(host, ctx, sec, &t));
  if (has_vision)
    TPXP_CHK(read_vision(host, ctx, &v));
  if (has_audio)
    TPXP_CHK(read_audio(host, ctx, &a));
  /* Gemma4Config.tie_word_embeddings (default true) wins; else the text
   * config's. */
  if (host->config_has(ctx, "tie_word_embeddings"))
    TPXP_CHK(tpxp_cfg_bool_opt(host, ctx, "tie_word_embeddings", 1, &tie));
  else if (sec[0] != '\0')
    TPXP_CHK(tpxp_cfg_bool_opt(host, ctx, "text_config.tie_word_embeddings", 1,
                          &tie));
  /* Gemma4Model registration order: vision_tower, language_model,
   * audio_tower, embed_vision, embed_audio. */
  if (has_vision)
    TPXP_CHK(vision_tower(host, ctx, "model.vision_tower", &v));
  TPXP_CHK(text_model(host, ctx, "model.language_model", &t));
  if (has_audio)
    TPXP_CHK(audio_tower(host, ctx, "model.audio_tower", &a));
  if (has_vision)
    TPXP_CHK(embedder(host, ctx, "model.embed_vision", v.hidden, t.hidden));
  if (has_audio)
    TPXP_CHK(embedder(host, ctx, "model.embed_audio", a.out_dims, t.hidden));
  return tpxp_sk_lm_head(host, ctx, "lm_head", t.hidden, t.vocab, 0, tie,
                         "model.language_model.embed_tokens.weight", NULL);
}
