/* muse_glimmer.c — MuseGlimmerForConditionalGeneration (docs/SEMANTICS.md
 * "Family plans"): the config-only skeleton and the strategy's tp check.
 *
 * Upstream's plan key (model.layers.*.self_attn.output_gate_proj) names
 * Automodel's native module tree, into which its state-dict adapter loads
 * the canonical Hugging Face checkpoint: model.language_model.X becomes
 * model.X, self_attn.gate_proj -> output_gate_proj, post_attention_layernorm
 * -> post_attn_norm, pre_feedforward_layernorm -> post_attention_layernorm,
 * post_feedforward_layernorm -> post_ffn_norm; the vision tower becomes
 * model.vision_encoder (patch_embedding -> conv1_linear, the position table
 * -> the parameter positional_embedding_vlm, layers.{i} -> transformer.{i}
 * with norm1/norm2 -> ln_1/ln_2, attn.proj -> attn.o_proj, mlp.fc1/fc2 ->
 * c_fc/c_proj), vision_adapter.fc1/fc2 -> c_fc/c_proj. The skeleton is that
 * native tree with the shapes of transformers' muse_glimmer model (5.24);
 * parameterless modules (the scale-free qk_norm / embed_norm) are omitted.
 * These renamings are declared as name aliases (mistral.c k_traits), so
 * --weights with a canonical (transformers-5) checkpoint matches the
 * skeleton. */
#include "muse_glimmer.h"

#include <string.h>

int muse_glimmer_is(const char *arch) {
  return tpxp_arch_is(arch, "MuseGlimmerForConditionalGeneration");
}

/* The text keys live in text_config (canonical layout) or at the top
 * level (a flattened native config). */
static const char *text_section(const tpx_plugin_host *host,
                                tpx_plugin_ctx *ctx) {
  return host->config_has(ctx, "text_config") ? "text_config" : "";
}

typedef struct mg_text {
  int64_t layers, hidden, heads, kv, head_dim, inter, vocab;
  int bias, tie;
} mg_text;

/* MuseGlimmerTextConfig's fields and defaults. */
static int read_text(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     mg_text *t) {
  const char *s = text_section(host, ctx);
  int top_tie;
  const tpxp_key keys[] = {
      TPXP_KEY_I("num_hidden_layers", &t->layers, 52),
      TPXP_KEY_I("hidden_size", &t->hidden, 6656),
      TPXP_KEY_I("num_attention_heads", &t->heads, 32),
      TPXP_KEY_I("num_key_value_heads", &t->kv, 2),
      TPXP_KEY_I("head_dim", &t->head_dim, 128),
      TPXP_KEY_I("intermediate_size", &t->inter, 19968),
      TPXP_KEY_I("vocab_size", &t->vocab, 202048),
      TPXP_KEY_B("attention_bias", &t->bias, 0),
      TPXP_KEY_B("tie_word_embeddings", &t->tie, 0),
  };
  TPXP_CHK(TPXP_CFG_READ(host, ctx, s, keys));
  /* a top-level flag wins over the text config's */
  TPXP_CHK(
      tpxp_cfg_bool_opt(host, ctx, "tie_word_embeddings", t->tie, &top_tie));
  t->tie = top_tie;
  if (t->layers < 0 || t->hidden <= 0 || t->heads <= 0 || t->kv <= 0 ||
      t->head_dim <= 0 || t->inter <= 0 || t->vocab <= 0 ||
      t->layers > ((int64_t)1 << 20) || t->hidden > ((int64_t)1 << 24) ||
      t->inter > ((int64_t)1 << 26) || t->vocab > ((int64_t)1 << 31) ||
      t->heads * t->head_dim > ((int64_t)1 << 26))
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "MuseGlimmer config %s: sizes must be positive and "
                     "bounded",
                     s[0] ? s : "(top level)");
  return TPX_PLUGIN_OK;
}

/* One text layer (native names): attention with its output gate, the gated
 * MLP, the four norms. */
static int text_layer(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                      const char *layer, int64_t i, const void *user) {
  const mg_text *t = user;
  int64_t h = t->hidden, q = t->heads * t->head_dim, kv = t->kv * t->head_dim;
  const tpxp_sk_row rows[] = {
      TPXP_SK_LIN("self_attn.q_proj", h, q, t->bias),
      TPXP_SK_LIN("self_attn.k_proj", h, kv, t->bias),
      TPXP_SK_LIN("self_attn.v_proj", h, kv, t->bias),
      TPXP_SK_LIN("self_attn.o_proj", q, h, t->bias),
      TPXP_SK_LIN("self_attn.output_gate_proj", h, q, 0),
      TPXP_SK_LIN("mlp.gate_proj", h, t->inter, 0),
      TPXP_SK_LIN("mlp.up_proj", h, t->inter, 0),
      TPXP_SK_LIN("mlp.down_proj", t->inter, h, 0),
      TPXP_SK_NRM("input_layernorm", h, 0),
      TPXP_SK_NRM("post_attn_norm", h, 0),
      TPXP_SK_NRM("post_attention_layernorm", h, 0),
      TPXP_SK_NRM("post_ffn_norm", h, 0),
  };
  return TPXP_SK_ROWS(host, ctx, layer, rows, NULL);
}

/* The vision encoder (MuseGlimmerVisionConfig defaults), in native names:
 * patch_embedding is Linear(3 * patch_temporal * patch^2 -> hidden), no
 * bias; the position table [pos_h * pos_w, hidden] a plain parameter of the
 * encoder. */
static int vision(const tpx_plugin_host *host, tpx_plugin_ctx *ctx) {
  int64_t patch, pos_h, pos_w, hidden, inter, layers, temporal;
  const tpxp_key keys[] = {
      TPXP_KEY_I("patch_size", &patch, 14),
      TPXP_KEY_I("pos_emb_height", &pos_h, 32),
      TPXP_KEY_I("pos_emb_width", &pos_w, 32),
      TPXP_KEY_I("hidden_size", &hidden, 1536),
      TPXP_KEY_I("intermediate_size", &inter, 8960),
      TPXP_KEY_I("num_hidden_layers", &layers, 50),
      TPXP_KEY_I("patch_temporal", &temporal, 2),
  };
  TPXP_CHK(TPXP_CFG_READ(host, ctx, "vision_config", keys));
  if (patch <= 0 || pos_h <= 0 || pos_w <= 0 || hidden <= 0 || inter <= 0 ||
      layers < 0 || temporal <= 0 || layers > ((int64_t)1 << 20) ||
      hidden > ((int64_t)1 << 24) || patch > ((int64_t)1 << 12))
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "MuseGlimmer vision_config: sizes must be positive and "
                     "bounded");
  {
    const tpxp_sk_row head[] = {
        TPXP_SK_LIN("conv1_linear", 3 * temporal * patch * patch, hidden, 0),
        TPXP_SK_PRM("", "positional_embedding_vlm", pos_h * pos_w, hidden),
        TPXP_SK_NRM("ln_pre", hidden, 1),
        TPXP_SK_MOD("transformer", "container"),
    };
    const tpxp_sk_row block[] = {
        TPXP_SK_NRM("ln_1", hidden, 1),
        TPXP_SK_NRM("ln_2", hidden, 1),
        TPXP_SK_LIN("attn.o_proj", hidden, hidden, 1),
        TPXP_SK_LIN("attn.q_proj", hidden, hidden, 1),
        TPXP_SK_LIN("attn.k_proj", hidden, hidden, 1),
        TPXP_SK_LIN("attn.v_proj", hidden, hidden, 1),
        TPXP_SK_LIN("mlp.c_fc", hidden, inter, 1),
        TPXP_SK_LIN("mlp.c_proj", inter, hidden, 1),
    };
    const tpxp_sk_row tail[] = {TPXP_SK_NRM("ln_post", hidden, 1)};
    char f[TPXP_FQN_MAX];
    int64_t i;
    TPXP_CHK(TPXP_SK_ROWS(host, ctx, "model.vision_encoder", head, NULL));
    for (i = 0; i < layers; i++) {
      tpxp_fmt(f, sizeof f, "model.vision_encoder.transformer.%lld",
               (long long)i);
      TPXP_CHK(TPXP_SK_ROWS(host, ctx, f, block, NULL));
    }
    return TPXP_SK_ROWS(host, ctx, "model.vision_encoder", tail, NULL);
  }
}

int muse_glimmer_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx) {
  mg_text t;
  int64_t out_hidden, proj_hidden;
  const tpxp_key keys[] = {
      TPXP_KEY_I("out_hidden_size", &out_hidden, 6144),
      TPXP_KEY_I("projector_hidden_size", &proj_hidden, 4096),
  };
  memset(&t, 0, sizeof t);
  TPXP_CHK(read_text(host, ctx, &t));
  TPXP_CHK(TPXP_CFG_READ(host, ctx, "", keys));
  if (out_hidden <= 0 || proj_hidden <= 0 || out_hidden > ((int64_t)1 << 26) ||
      proj_hidden > ((int64_t)1 << 26))
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "MuseGlimmer config: out_hidden_size and "
                     "projector_hidden_size must be positive and bounded");
  /* transformers' order: vision, language model, adapter, projection. */
  TPXP_CHK(vision(host, ctx));
  {
    const tpxp_sk_row tail[] = {
        TPXP_SK_NRM("norm", t.hidden, 0),
        TPXP_SK_MOD("rotary_emb", "rotary"),
        TPXP_SK_LIN("vision_adapter.c_fc", out_hidden, proj_hidden, 0),
        TPXP_SK_LIN("vision_adapter.c_proj", proj_hidden, proj_hidden, 0),
        TPXP_SK_LIN("vision_projection", proj_hidden, t.hidden, 0),
    };
    const tpxp_stack stack = {.prefix = "model",
                              .embed = "embed_tokens",
                              .vocab = t.vocab,
                              .hidden = t.hidden,
                              .layers = t.layers,
                              .layer = text_layer,
                              .user = &t,
                              .tail = tail,
                              .n_tail = TPXP_N_OF(tail),
                              .head = "lm_head",
                              .tie = t.tie};
    return tpxp_sk_stack(host, ctx, &stack);
  }
}

int muse_glimmer_validate(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                          int sequence_parallel, int64_t tp_size) {
  char p[TPXP_FQN_MAX], msg[TPXP_MSG_MAX];
  int64_t kv;
  int st;
  if (sequence_parallel && host->diagnose != NULL &&
      (st = host->diagnose(ctx, TPX_PLUGIN_DIAG_WARNING,
                           "sequence-parallel-ignored",
                           "sequence_parallel=True is not yet supported for "
                           "MuseGlimmer and will be ignored (upstream's "
                           "warning); the plan has no sequence-parallel "
                           "styles")) != TPX_PLUGIN_OK)
    return st;
  if (tp_size <= 1)
    return TPX_PLUGIN_OK;
  st = tpxp_cfg_int_opt(
      host, ctx,
      tpxp_path(p, sizeof p, text_section(host, ctx), "num_key_value_heads"), 2,
      &kv);
  if (st != TPX_PLUGIN_OK)
    return st;
  if (kv > 0 && tp_size <= kv && kv % tp_size == 0)
    return TPX_PLUGIN_OK;
  tpxp_fmt(msg, sizeof msg,
           "MuseGlimmer supports only a tp that divides its %lld KV heads; "
           "got tp_size=%lld (the MuseGlimmer strategy raises ValueError "
           "before any plan is applied)",
           (long long)kv, (long long)tp_size);
  if (host->diagnose == NULL)
    return TPX_PLUGIN_OK;
  return host->diagnose(ctx, TPX_PLUGIN_DIAG_ERROR, "heads-not-divisible", msg);
}
