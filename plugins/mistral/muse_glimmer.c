/* muse_glimmer.c — MuseGlimmerForConditionalGeneration (docs/SEMANTICS.md "Family plans"):
 * the config-only skeleton and the strategy's tp check.
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
 * Not: the checkpoint renaming itself (--weights with a canonical checkpoint
 * falls back to the headers' tree). */
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
  char p[TPXP_FQN_MAX];
  const char *s = text_section(host, ctx);
  int st, top_tie;
#define OPT(field, key, dflt)                                                  \
  if ((st = tpxp_cfg_int_opt(host, ctx, tpxp_path(p, sizeof p, s, key), dflt,  \
                             &t->field)))                                      \
    return st;
  OPT(layers, "num_hidden_layers", 52)
  OPT(hidden, "hidden_size", 6656)
  OPT(heads, "num_attention_heads", 32)
  OPT(kv, "num_key_value_heads", 2)
  OPT(head_dim, "head_dim", 128)
  OPT(inter, "intermediate_size", 19968)
  OPT(vocab, "vocab_size", 202048)
#undef OPT
  if ((st = tpxp_cfg_bool_opt(host, ctx,
                              tpxp_path(p, sizeof p, s, "attention_bias"), 0,
                              &t->bias)) ||
      (st = tpxp_cfg_bool_opt(host, ctx,
                              tpxp_path(p, sizeof p, s, "tie_word_embeddings"),
                              0, &t->tie)) ||
      (st = tpxp_cfg_bool_opt(host, ctx, "tie_word_embeddings", t->tie,
                              &top_tie)))
    return st;
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

static int text_layer(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                      const mg_text *t, int64_t i) {
  static const char *const norms[] = {"input_layernorm", "post_attn_norm",
                                      "post_attention_layernorm",
                                      "post_ffn_norm"};
  char f[TPXP_FQN_MAX];
  long long L = (long long)i;
  int64_t q = t->heads * t->head_dim, kv = t->kv * t->head_dim;
  size_t k;
  int st;
#define LIN(name, in, out, b)                                                  \
  tpxp_fmt(f, sizeof f, "model.layers.%lld.%s", L, name);                      \
  if ((st = tpxp_sk_linear(host, ctx, f, in, out, b, NULL)))                   \
    return st;
  LIN("self_attn.q_proj", t->hidden, q, t->bias)
  LIN("self_attn.k_proj", t->hidden, kv, t->bias)
  LIN("self_attn.v_proj", t->hidden, kv, t->bias)
  LIN("self_attn.o_proj", q, t->hidden, t->bias)
  LIN("self_attn.output_gate_proj", t->hidden, q, 0)
  LIN("mlp.gate_proj", t->hidden, t->inter, 0)
  LIN("mlp.up_proj", t->hidden, t->inter, 0)
  LIN("mlp.down_proj", t->inter, t->hidden, 0)
#undef LIN
  for (k = 0; k < sizeof norms / sizeof norms[0]; k++) {
    tpxp_fmt(f, sizeof f, "model.layers.%lld.%s", L, norms[k]);
    if ((st = tpxp_sk_norm(host, ctx, f, t->hidden, 0, NULL)))
      return st;
  }
  return TPX_PLUGIN_OK;
}

/* The vision encoder (MuseGlimmerVisionConfig defaults), in native names. */
static int vision(const tpx_plugin_host *host, tpx_plugin_ctx *ctx) {
  char f[TPXP_FQN_MAX];
  int64_t patch, pos_h, pos_w, hidden, inter, layers, temporal, i;
  int st;
#define OPT(var, key, dflt)                                                    \
  if ((st = tpxp_cfg_int_opt(host, ctx, "vision_config." key, dflt, &var)))    \
    return st;
  OPT(patch, "patch_size", 14)
  OPT(pos_h, "pos_emb_height", 32)
  OPT(pos_w, "pos_emb_width", 32)
  OPT(hidden, "hidden_size", 1536)
  OPT(inter, "intermediate_size", 8960)
  OPT(layers, "num_hidden_layers", 50)
  OPT(temporal, "patch_temporal", 2)
#undef OPT
  if (patch <= 0 || pos_h <= 0 || pos_w <= 0 || hidden <= 0 || inter <= 0 ||
      layers < 0 || temporal <= 0 || layers > ((int64_t)1 << 20) ||
      hidden > ((int64_t)1 << 24) || patch > ((int64_t)1 << 12))
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "MuseGlimmer vision_config: sizes must be positive and "
                     "bounded");
  /* patch_embedding: Linear(3 * patch_temporal * patch^2 -> hidden), no
   * bias; the position table [pos_h * pos_w, hidden] is a plain parameter
   * of the encoder. */
  if ((st = tpxp_sk_linear(host, ctx, "model.vision_encoder.conv1_linear",
                           3 * temporal * patch * patch, hidden, 0, NULL)) ||
      (st = tpxp_sk_param(host, ctx, "model.vision_encoder",
                          "positional_embedding_vlm", pos_h * pos_w, hidden,
                          NULL)) ||
      (st = tpxp_sk_norm(host, ctx, "model.vision_encoder.ln_pre", hidden, 1,
                         NULL)) ||
      (st = tpxp_sk_module(host, ctx, "model.vision_encoder.transformer",
                           "container")))
    return st;
  for (i = 0; i < layers; i++) {
    static const char *const attn[] = {"o_proj", "q_proj", "k_proj", "v_proj"};
    long long L = (long long)i;
    size_t a;
#define VB "model.vision_encoder.transformer.%lld."
    tpxp_fmt(f, sizeof f, VB "ln_1", L);
    if ((st = tpxp_sk_norm(host, ctx, f, hidden, 1, NULL)))
      return st;
    tpxp_fmt(f, sizeof f, VB "ln_2", L);
    if ((st = tpxp_sk_norm(host, ctx, f, hidden, 1, NULL)))
      return st;
    for (a = 0; a < 4; a++) {
      tpxp_fmt(f, sizeof f, VB "attn.%s", L, attn[a]);
      if ((st = tpxp_sk_linear(host, ctx, f, hidden, hidden, 1, NULL)))
        return st;
    }
    tpxp_fmt(f, sizeof f, VB "mlp.c_fc", L);
    if ((st = tpxp_sk_linear(host, ctx, f, hidden, inter, 1, NULL)))
      return st;
    tpxp_fmt(f, sizeof f, VB "mlp.c_proj", L);
    if ((st = tpxp_sk_linear(host, ctx, f, inter, hidden, 1, NULL)))
      return st;
#undef VB
  }
  return tpxp_sk_norm(host, ctx, "model.vision_encoder.ln_post", hidden, 1,
                      NULL);
}

int muse_glimmer_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx) {
  mg_text t;
  int64_t out_hidden, proj_hidden, i;
  int st;
  memset(&t, 0, sizeof t);
  if ((st = read_text(host, ctx, &t)) ||
      (st = tpxp_cfg_int_opt(host, ctx, "out_hidden_size", 6144,
                             &out_hidden)) ||
      (st = tpxp_cfg_int_opt(host, ctx, "projector_hidden_size", 4096,
                             &proj_hidden)))
    return st;
  if (out_hidden <= 0 || proj_hidden <= 0 || out_hidden > ((int64_t)1 << 26) ||
      proj_hidden > ((int64_t)1 << 26))
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "MuseGlimmer config: out_hidden_size and "
                     "projector_hidden_size must be positive and bounded");
  /* transformers' order: vision, language model, adapter, projection. */
  if ((st = vision(host, ctx)) ||
      (st = tpxp_sk_embedding(host, ctx, "model.embed_tokens", t.vocab,
                              t.hidden, NULL)) ||
      (st = tpxp_sk_module(host, ctx, "model.layers", "container")))
    return st;
  for (i = 0; i < t.layers; i++)
    if ((st = text_layer(host, ctx, &t, i)))
      return st;
  if ((st = tpxp_sk_norm(host, ctx, "model.norm", t.hidden, 0, NULL)) ||
      (st = tpxp_sk_module(host, ctx, "model.rotary_emb", "rotary")) ||
      (st = tpxp_sk_linear(host, ctx, "model.vision_adapter.c_fc", out_hidden,
                           proj_hidden, 0, NULL)) ||
      (st = tpxp_sk_linear(host, ctx, "model.vision_adapter.c_proj",
                           proj_hidden, proj_hidden, 0, NULL)) ||
      (st = tpxp_sk_linear(host, ctx, "model.vision_projection", proj_hidden,
                           t.hidden, 0, NULL)))
    return st;
  return tpxp_sk_lm_head(host, ctx, "lm_head", t.hidden, t.vocab, 0, t.tie,
                         "model.embed_tokens.weight", NULL);
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
  st = tpxp_cfg_int_opt(host, ctx,
                        tpxp_path(p, sizeof p, text_section(host, ctx),
                                  "num_key_value_heads"),
                        2, &kv);
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
  return host->diagnose(ctx, TPX_PLUGIN_DIAG_ERROR, "heads-not-divisible",
                        msg);
}
