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

/* Python truthiness of an int / bool key as the config object holds it:
 * absent -> dflt (the dataclass default), null -> 0, false/true -> 0/1. */
static int truthy_int(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                      const char *sec, const char *key, int64_t dflt,
                      int64_t *out) {
  char p[TPXP_FQN_MAX];
  int b = 0;
  tpxp_path(p, sizeof p, sec, key);
  if (!host->config_has(ctx, p)) {
    *out = tpxp_cfg_key_present(host, ctx, sec, key) ? 0 : dflt;
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
  {
    /* num_global_key_value_heads defaults to num_key_value_heads, which the
     * table reads first: absent leaves the sentinel, replaced below. */
    const tpxp_key keys[] = {
        TPXP_KEY_I("vocab_size", &t->vocab, 262144),
        TPXP_KEY_I("hidden_size", &t->hidden, 2304),
        TPXP_KEY_I("intermediate_size", &t->inter, 9216),
        TPXP_KEY_I("num_hidden_layers", &t->layers, 30),
        TPXP_KEY_I("num_attention_heads", &t->heads, 8),
        TPXP_KEY_I("num_key_value_heads", &t->kv, 4),
        TPXP_KEY_I("head_dim", &t->head_dim, 256),
        TPXP_KEY_I("global_head_dim", &t->global_head_dim, 512),
        TPXP_KEY_I("num_global_key_value_heads", &t->global_kv, INT64_MIN),
        TPXP_KEY_I("num_kv_shared_layers", &t->kv_shared, 0),
    };
    const tpxp_key flags[] = {
        TPXP_KEY_I("vocab_size_per_layer_input", &t->ple_vocab, 262144),
        TPXP_KEY_B("attention_bias", &t->attn_bias, 0),
        TPXP_KEY_B("attention_k_eq_v", &t->k_eq_v, 0),
        TPXP_KEY_B("use_double_wide_mlp", &t->double_wide, 0),
        TPXP_KEY_B("enable_moe_block", &t->moe, 0),
    };
    TPXP_CHK(TPXP_CFG_READ(host, ctx, sec, keys));
    if (t->global_kv == INT64_MIN)
      t->global_kv = t->kv;
    /* Gemma4TextConfig defaults hidden_size_per_layer_input to 256: a text
     * config that omits the key builds the per-layer embeddings; null or 0
     * does not. */
    TPXP_CHK(truthy_int(host, ctx, sec, "hidden_size_per_layer_input", 256,
                        &t->ple));
    TPXP_CHK(TPXP_CFG_READ(host, ctx, sec, flags));
  }
  t->experts = t->moe_inter = 0;
  if (t->moe) {
    TPXP_CHK(tpxp_cfg_int_req(host, ctx, P("num_experts"), &t->experts));
    TPXP_CHK(
        tpxp_cfg_int_req(host, ctx, P("moe_intermediate_size"), &t->moe_inter));
    if (t->experts <= 0 || t->moe_inter <= 0)
      return fail_size(host, ctx, "num_experts / moe_intermediate_size");
  }
  if (t->vocab <= 0 || t->hidden <= 0 || t->inter <= 0 || t->layers < 0 ||
      t->heads <= 0 || t->kv <= 0 || t->head_dim <= 0 ||
      t->global_head_dim < 0 || t->global_kv <= 0 || t->kv_shared < 0 ||
      t->ple < 0 || (t->ple > 0 && t->ple_vocab <= 0))
    return tpxp_fail(
        host, ctx, TPX_PLUGIN_ERROR,
        "gemma4: text config has a non-positive size (vocab %lld, "
        "hidden %lld, intermediate %lld, layers %lld, heads "
        "%lld, kv heads %lld, head_dim %lld, global_head_dim "
        "%lld, global kv heads %lld, num_kv_shared_layers %lld, "
        "hidden_size_per_layer_input %lld)",
        (long long)t->vocab, (long long)t->hidden, (long long)t->inter,
        (long long)t->layers, (long long)t->heads, (long long)t->kv,
        (long long)t->head_dim, (long long)t->global_head_dim,
        (long long)t->global_kv, (long long)t->kv_shared, (long long)t->ple);
  if (t->layers > G4_MAX_LAYERS)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "gemma4: num_hidden_layers %lld exceeds this plugin's "
                     "limit of %d",
                     (long long)t->layers, G4_MAX_LAYERS);
  /* layer_types: absent -> every 6th layer full (5:1); the last layer is
   * forced to full attention either way, as Gemma4TextConfig does. */
  has_types =
      host->config_get_length(ctx, P("layer_types"), &n) == TPX_PLUGIN_OK;
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
  const tpxp_key keys[] = {
      TPXP_KEY_I("hidden_size", &v->hidden, 768),
      TPXP_KEY_I("intermediate_size", &v->inter, 3072),
      TPXP_KEY_I("num_hidden_layers", &v->layers, 16),
      TPXP_KEY_I("num_attention_heads", &v->heads, 12),
      TPXP_KEY_I("num_key_value_heads", &v->kv, 12),
      TPXP_KEY_I("head_dim", &v->head_dim, 64),
      TPXP_KEY_I("patch_size", &v->patch, 16),
      TPXP_KEY_I("position_embedding_size", &v->pos, 10240),
      TPXP_KEY_B("use_clipped_linears", &v->clipped, 0),
      TPXP_KEY_B("standardize", &v->standardize, 0),
  };
  TPXP_CHK(TPXP_CFG_READ(host, ctx, "vision_config", keys));
  if (v->hidden <= 0 || v->inter <= 0 || v->layers < 0 || v->heads <= 0 ||
      v->kv <= 0 || v->head_dim <= 0 || v->patch <= 0 || v->pos <= 0)
    return fail_size(host, ctx, "vision_config");
  return TPX_PLUGIN_OK;
}

static int read_audio(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                      g4_audio *a) {
  int64_t n = 0;
  const tpxp_key keys[] = {
      TPXP_KEY_I("hidden_size", &a->hidden, 1024),
      TPXP_KEY_I("num_hidden_layers", &a->layers, 12),
      TPXP_KEY_I("num_attention_heads", &a->heads, 8),
      TPXP_KEY_I("conv_kernel_size", &a->kernel, 5),
      TPXP_KEY_I("output_proj_dims", &a->out_dims, 1536),
      TPXP_KEY_B("use_clipped_linears", &a->clipped, 1),
  };
  TPXP_CHK(TPXP_CFG_READ(host, ctx, "audio_config", keys));
  a->c0 = 128;
  a->c1 = 32;
  if (host->config_get_length(ctx, "audio_config.subsampling_conv_channels",
                              &n) == TPX_PLUGIN_OK) {
    if (n != 2)
      return fail_size(host, ctx,
                       "audio_config.subsampling_conv_channels (2 entries)");
    TPXP_CHK(tpxp_cfg_int_req(
        host, ctx, "audio_config.subsampling_conv_channels[0]", &a->c0));
    TPXP_CHK(tpxp_cfg_int_req(
        host, ctx, "audio_config.subsampling_conv_channels[1]", &a->c1));
  }
  if (a->hidden <= 0 || a->layers < 0 || a->heads <= 0 ||
      a->hidden % a->heads != 0 || a->kernel <= 0 || a->out_dims <= 0 ||
      a->c0 < 4 || a->c1 <= 0)
    return fail_size(host, ctx, "audio_config");
  return TPX_PLUGIN_OK;
}

/* ---- builders ---- */

/* Gemma4ClippableLinear at `fqn`: the bounds (persistent 0-d buffers, own
 * tensors first) when clipped, then `fqn.linear` without bias. */
static int clippable(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const char *fqn, int64_t in, int64_t out, int clipped) {
  const tpxp_sk_row rows[] = {
      TPXP_SK_MOD("", "other"),
      TPXP_SK_PRM_ND("", "input_min", 0, NULL),
      TPXP_SK_PRM_ND("", "input_max", 0, NULL),
      TPXP_SK_PRM_ND("", "output_min", 0, NULL),
      TPXP_SK_PRM_ND("", "output_max", 0, NULL),
      TPXP_SK_LIN("linear", in, out, 0),
  };
  TPXP_CHK(tpxp_sk_rows(host, ctx, fqn, rows, clipped ? 5 : 1, NULL));
  return tpxp_sk_rows(host, ctx, fqn, rows + 5, 1, NULL);
}

/* Rows under `prefix` where every TPXP_SK_LINEAR row is a
 * Gemma4ClippableLinear (the vision and audio towers'). */
static int clippable_rows(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                          const char *prefix, const tpxp_sk_row *rows, size_t n,
                          int clipped) {
  char f[TPXP_FQN_MAX];
  size_t k;
  for (k = 0; k < n; k++) {
    if (rows[k].kind != TPXP_SK_LINEAR) {
      TPXP_CHK(tpxp_sk_rows(host, ctx, prefix, &rows[k], 1, NULL));
      continue;
    }
    tpxp_fmt(f, sizeof f, "%s.%s", prefix, rows[k].suffix);
    TPXP_CHK(clippable(host, ctx, f, rows[k].a, rows[k].b, clipped));
  }
  return TPX_PLUGIN_OK;
}

/* Layer i's attention rows: the shared-KV layers have no k/v (nor k_norm,
 * v_norm), the k_eq_v full layers no v_proj. */
static int text_attn(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const char *L, const g4_text *t, int64_t i) {
  int full = t->full[i];
  int64_t hd = full && t->global_head_dim ? t->global_head_dim : t->head_dim;
  int alt = t->k_eq_v && full; /* keys double as values */
  int64_t kvh = alt ? t->global_kv : t->kv, h = t->hidden;
  int64_t first_shared = t->layers - t->kv_shared;
  int shared = i >= first_shared && first_shared >= 0, ab = t->attn_bias;
  const tpxp_sk_row rows[] = {
      TPXP_SK_MOD("self_attn", "other"),
      TPXP_SK_LIN("self_attn.q_proj", h, t->heads * hd, ab),
      TPXP_SK_NRM("self_attn.q_norm", hd, 0),
      /* 3..6: only on layers that compute their own keys and values */
      TPXP_SK_NRM("self_attn.k_norm", hd, 0),
      TPXP_SK_MOD("self_attn.v_norm", "norm"), /* RMSNorm without scale */
      TPXP_SK_LIN("self_attn.k_proj", h, kvh * hd, ab),
      TPXP_SK_LIN("self_attn.v_proj", h, kvh * hd, ab),
      TPXP_SK_LIN("self_attn.o_proj", t->heads * hd, h, ab),
  };
  TPXP_CHK(tpxp_sk_rows(host, ctx, L, rows, 3, NULL));
  if (!shared)
    TPXP_CHK(tpxp_sk_rows(host, ctx, L, rows + 3, alt ? 3 : 4, NULL));
  return tpxp_sk_rows(host, ctx, L, rows + 7, 1, NULL);
}

static int text_layer(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                      const char *P, const g4_text *t, int64_t i) {
  char L[TPXP_FQN_MAX];
  int64_t first_shared = t->layers - t->kv_shared, h = t->hidden;
  int wide = t->double_wide && i >= first_shared && first_shared > 0;
  int64_t inter = t->inter * (wide ? 2 : 1), E = t->experts;
  const int64_t one[1] = {1}, scale[1] = {h}, per_expert[1] = {E};
  const int64_t gate_up[3] = {E, 2 * t->moe_inter, h};
  const int64_t down[3] = {E, h, t->moe_inter};
  const tpxp_sk_row head[] = {
      TPXP_SK_MOD("", "container"),
      TPXP_SK_PRM_ND("", "layer_scalar", 1, one),
  };
  const tpxp_sk_row mlp[] = {
      TPXP_SK_LIN("mlp.gate_proj", h, inter, 0),
      TPXP_SK_LIN("mlp.up_proj", h, inter, 0),
      TPXP_SK_LIN("mlp.down_proj", inter, h, 0),
      TPXP_SK_NRM("input_layernorm", h, 0),
      TPXP_SK_NRM("post_attention_layernorm", h, 0),
      TPXP_SK_NRM("pre_feedforward_layernorm", h, 0),
      TPXP_SK_NRM("post_feedforward_layernorm", h, 0),
  };
  const tpxp_sk_row ple[] = {
      TPXP_SK_LIN("per_layer_input_gate", h, t->ple, 0),
      TPXP_SK_LIN("per_layer_projection", t->ple, h, 0),
      TPXP_SK_NRM("post_per_layer_input_norm", h, 0),
  };
  /* Gemma4TextRouter: own scale and per_expert_scale, a weight-less norm,
   * then the proj; Gemma4TextExperts: packed 3-D tensors. */
  const tpxp_sk_row moe[] = {
      TPXP_SK_MOD("router", "other"),
      TPXP_SK_PRM_ND("router", "scale", 1, scale),
      TPXP_SK_PRM_ND("router", "per_expert_scale", 1, per_expert),
      TPXP_SK_MOD("router.norm", "norm"),
      TPXP_SK_LIN("router.proj", h, E, 0),
      TPXP_SK_MOD("experts", "other"),
      TPXP_SK_PRM_ND("experts", "gate_up_proj", 3, gate_up),
      TPXP_SK_PRM_ND("experts", "down_proj", 3, down),
      TPXP_SK_NRM("post_feedforward_layernorm_1", h, 0),
      TPXP_SK_NRM("post_feedforward_layernorm_2", h, 0),
      TPXP_SK_NRM("pre_feedforward_layernorm_2", h, 0),
  };
  tpxp_fmt(L, sizeof L, "%s.layers.%lld", P, (long long)i);
  TPXP_CHK(TPXP_SK_ROWS(host, ctx, L, head, NULL));
  TPXP_CHK(text_attn(host, ctx, L, t, i));
  TPXP_CHK(TPXP_SK_ROWS(host, ctx, L, mlp, NULL));
  if (t->ple > 0)
    TPXP_CHK(TPXP_SK_ROWS(host, ctx, L, ple, NULL));
  return t->moe ? TPXP_SK_ROWS(host, ctx, L, moe, NULL) : TPX_PLUGIN_OK;
}

/* Gemma4TextModel at `P`. */
static int text_model(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                      const char *P, const g4_text *t) {
  int64_t i, h = t->hidden;
  const tpxp_sk_row head[] = {
      TPXP_SK_EMB("embed_tokens", t->vocab, h),
      TPXP_SK_MOD("layers", "container"),
  };
  const tpxp_sk_row tail[] = {
      TPXP_SK_NRM("norm", h, 0),
      TPXP_SK_MOD("rotary_emb", "rotary"),
      /* E-series only */
      TPXP_SK_EMB("embed_tokens_per_layer", t->ple_vocab, t->layers * t->ple),
      TPXP_SK_LIN("per_layer_model_projection", h, t->layers * t->ple, 0),
      TPXP_SK_NRM("per_layer_projection_norm", t->ple, 0),
  };
  TPXP_CHK(TPXP_SK_ROWS(host, ctx, P, head, NULL));
  for (i = 0; i < t->layers; i++) TPXP_CHK(text_layer(host, ctx, P, t, i));
  return tpxp_sk_rows(host, ctx, P, tail, t->ple > 0 ? TPXP_N_OF(tail) : 2,
                      NULL);
}

/* Gemma4VisionModel at `P`. */
static int vision_tower(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                        const char *P, const g4_vision *v) {
  char f[TPXP_FQN_MAX];
  int64_t i, h = v->hidden, q = v->heads * v->head_dim;
  int64_t kv = v->kv * v->head_dim;
  const int64_t hid[1] = {h}, pos[3] = {2, v->pos, h};
  const tpxp_sk_row std[] = {
      TPXP_SK_MOD("", "other"),
      TPXP_SK_PRM_ND("", "std_bias", 1, hid),
      TPXP_SK_PRM_ND("", "std_scale", 1, hid),
  };
  const tpxp_sk_row embed[] = {
      TPXP_SK_MOD("patch_embedder", "other"),
      TPXP_SK_PRM_ND("patch_embedder", "position_embedding_table", 3, pos),
      TPXP_SK_LIN("patch_embedder.input_proj", 3 * v->patch * v->patch, h, 0),
      TPXP_SK_MOD("encoder.rotary_emb", "rotary"),
      TPXP_SK_MOD("encoder.layers", "container"),
  };
  /* LINEAR rows are clippable linears. */
  const tpxp_sk_row layer[] = {
      TPXP_SK_LIN("self_attn.q_proj", h, q, 0),
      TPXP_SK_LIN("self_attn.k_proj", h, kv, 0),
      TPXP_SK_LIN("self_attn.v_proj", h, kv, 0),
      TPXP_SK_LIN("self_attn.o_proj", q, h, 0),
      TPXP_SK_NRM("self_attn.q_norm", v->head_dim, 0),
      TPXP_SK_NRM("self_attn.k_norm", v->head_dim, 0),
      TPXP_SK_MOD("self_attn.v_norm", "norm"),
      TPXP_SK_LIN("mlp.gate_proj", h, v->inter, 0),
      TPXP_SK_LIN("mlp.up_proj", h, v->inter, 0),
      TPXP_SK_LIN("mlp.down_proj", v->inter, h, 0),
      TPXP_SK_NRM("input_layernorm", h, 0),
      TPXP_SK_NRM("post_attention_layernorm", h, 0),
      TPXP_SK_NRM("pre_feedforward_layernorm", h, 0),
      TPXP_SK_NRM("post_feedforward_layernorm", h, 0),
  };
  TPXP_CHK(tpxp_sk_rows(host, ctx, P, std, v->standardize ? 3 : 1, NULL));
  TPXP_CHK(TPXP_SK_ROWS(host, ctx, P, embed, NULL));
  for (i = 0; i < v->layers; i++) {
    tpxp_fmt(f, sizeof f, "%s.encoder.layers.%lld", P, (long long)i);
    TPXP_CHK(clippable_rows(host, ctx, f, layer, TPXP_N_OF(layer), v->clipped));
  }
  return TPX_PLUGIN_OK;
}

/* Gemma4AudioModel at `P` (conformer encoder). */
static int audio_tower(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                       const char *P, const g4_audio *a) {
  char f[TPXP_FQN_MAX];
  int64_t i, H = a->hidden;
  const int64_t conv0[4] = {a->c0, 1, 3, 3}, conv1[4] = {a->c1, a->c0, 3, 3};
  const int64_t per_dim[1] = {a->hidden / a->heads};
  const int64_t dw[3] = {H, 1, a->kernel};
  const tpxp_sk_row sub[] = {
      TPXP_SK_MOD("layer0.conv", "other"),
      TPXP_SK_PRM_ND("layer0.conv", "weight", 4, conv0),
      TPXP_SK_NRM("layer0.norm", a->c0, 0),
      TPXP_SK_MOD("layer1.conv", "other"),
      TPXP_SK_PRM_ND("layer1.conv", "weight", 4, conv1),
      TPXP_SK_NRM("layer1.norm", a->c1, 0),
      TPXP_SK_LIN("input_proj_linear", (a->c0 / 4) * a->c1, H, 0),
  };
  /* Gemma4AudioFeedForward twice; LINEAR rows are clippable, except the
   * plain relative_k_proj added apart. */
  const tpxp_sk_row layer[] = {
      TPXP_SK_LIN("feed_forward1.ffw_layer_1", H, 4 * H, 0),
      TPXP_SK_LIN("feed_forward1.ffw_layer_2", 4 * H, H, 0),
      TPXP_SK_NRM("feed_forward1.pre_layer_norm", H, 0),
      TPXP_SK_NRM("feed_forward1.post_layer_norm", H, 0),
      TPXP_SK_LIN("feed_forward2.ffw_layer_1", H, 4 * H, 0),
      TPXP_SK_LIN("feed_forward2.ffw_layer_2", 4 * H, H, 0),
      TPXP_SK_NRM("feed_forward2.pre_layer_norm", H, 0),
      TPXP_SK_NRM("feed_forward2.post_layer_norm", H, 0),
      TPXP_SK_MOD("self_attn", "other"),
      TPXP_SK_PRM_ND("self_attn", "per_dim_scale", 1, per_dim),
      TPXP_SK_LIN("self_attn.q_proj", H, H, 0),
      TPXP_SK_LIN("self_attn.k_proj", H, H, 0),
      TPXP_SK_LIN("self_attn.v_proj", H, H, 0),
      TPXP_SK_LIN("self_attn.post", H, H, 0),
  };
  const tpxp_sk_row rel[] = {TPXP_SK_LIN("self_attn.relative_k_proj", H, H, 0)};
  const tpxp_sk_row lconv[] = {
      TPXP_SK_LIN("lconv1d.linear_start", H, 2 * H, 0),
      TPXP_SK_LIN("lconv1d.linear_end", H, H, 0),
      TPXP_SK_MOD("lconv1d.depthwise_conv1d", "other"),
      TPXP_SK_PRM_ND("lconv1d.depthwise_conv1d", "weight", 3, dw),
      TPXP_SK_NRM("lconv1d.pre_layer_norm", H, 0),
      TPXP_SK_NRM("lconv1d.conv_norm", H, 0),
      TPXP_SK_NRM("norm_pre_attn", H, 0),
      TPXP_SK_NRM("norm_post_attn", H, 0),
      TPXP_SK_NRM("norm_out", H, 0),
  };
  const tpxp_sk_row out[] = {
      TPXP_SK_MOD("layers", "container"),
  };
  tpxp_fmt(f, sizeof f, "%s.subsample_conv_projection", P);
  TPXP_CHK(TPXP_SK_ROWS(host, ctx, f, sub, NULL));
  TPXP_CHK(TPXP_SK_ROWS(host, ctx, P, out, NULL));
  for (i = 0; i < a->layers; i++) {
    tpxp_fmt(f, sizeof f, "%s.layers.%lld", P, (long long)i);
    TPXP_CHK(clippable_rows(host, ctx, f, layer, TPXP_N_OF(layer), a->clipped));
    TPXP_CHK(TPXP_SK_ROWS(host, ctx, f, rel, NULL));
    TPXP_CHK(clippable_rows(host, ctx, f, lconv, TPXP_N_OF(lconv), a->clipped));
  }
  tpxp_fmt(f, sizeof f, "%s.output_proj", P);
  return tpxp_sk_linear(host, ctx, f, H, a->out_dims, 1, NULL);
}

/* Gemma4MultimodalEmbedder at `P`: a projection into the text width and a
 * weight-less pre-projection norm. */
static int embedder(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    const char *P, int64_t mm_hidden, int64_t text_hidden) {
  const tpxp_sk_row rows[] = {
      TPXP_SK_LIN("embedding_projection", mm_hidden, text_hidden, 0),
      TPXP_SK_MOD("embedding_pre_projection_norm", "norm"),
  };
  return TPXP_SK_ROWS(host, ctx, P, rows, NULL);
}

int gemma4_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    const char *arch) {
  g4_text t;
  g4_vision v;
  g4_audio a;
  int tie = 1;
  int has_vision = host->config_has(ctx, "vision_config");
  int has_audio = host->config_has(ctx, "audio_config");
  const char *sec = host->config_has(ctx, "text_config") ? "text_config" : "";
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
