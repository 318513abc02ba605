/* nemotron_flash_skeleton.c — the NemotronFlashForCausalLM skeleton from a
 * config, as NeMo Automodel's copy of the remote code builds it
 * (nemo_automodel/components/models/nemotron_flash: modeling_nemotron_flash,
 * delta_net, mamba2; configuration_nemotron_flash for the defaults).
 *
 * Tree: model.memory_tokens [num_memory_tokens, hidden] (when > 0; the
 * model's own parameter, so first), model.embed_tokens, model.layers.N,
 * model.final_layernorm, lm_head (tied to the embedding only when
 * tie_word_embeddings, default false). layer_types (required) picks each
 * layer:
 *  - "deltanet": gla (DeltaNet, expand 1: q/k/v_proj [hidden, hidden],
 *    b_proj [heads, hidden], depthwise q/k/v_conv1d [dim, 1, 4] without
 *    bias, o_norm [hidden / heads], o_proj);
 *  - "m" / "m2": mamba (Mamba2, one group: dt_bias, A_log, D [nheads],
 *    in_proj, conv1d with bias, gated norm [d_inner], out_proj);
 *  - "a": self_attn (q/k/v/o_proj, k_norm and q_norm when kq_norm is "rms");
 *  each followed, when intermediate_size > 0, by ffn (gate_proj for silu,
 *  down_proj, up_proj) and pre_ffn_layernorm, then input_layernorm;
 *  - "f": ffn and pre_ffn_layernorm only.
 * Not here: the plan (llama.c, the Llama plan upstream maps this class to). */
#include "nemotron_flash.h"

#include <stdio.h>
#include <string.h>

#include "tpxp_common.h"

typedef struct nf_config {
  int64_t vocab, hidden, inter, layers, heads, kv, d_state, d_conv, expand,
      m_headdim, mem, attn_hidden, kq_hd, v_hd, ffn_dim;
  int tie, gate, kq_rms;
} nf_config;

static int bad(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
               const char *what) {
  return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR, "nemotron-flash: config %s",
                   what);
}

static int read_config(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                       nf_config *c) {
  const char *act = NULL;
  double ratio = 0.0;
  const tpxp_key keys[] = {
      TPXP_KEY_I("vocab_size", &c->vocab, 65536),
      TPXP_KEY_I("hidden_size", &c->hidden, 4096),
      TPXP_KEY_I("intermediate_size", &c->inter, 14336),
      TPXP_KEY_I("num_hidden_layers", &c->layers, 32),
      TPXP_KEY_I("num_attention_heads", &c->heads, 32),
  };
  const tpxp_key more[] = {
      TPXP_KEY_I("mamba_d_state", &c->d_state, 16),
      TPXP_KEY_I("mamba_d_conv", &c->d_conv, 4),
      TPXP_KEY_I("mamba_expand", &c->expand, 2),
      TPXP_KEY_I("mamba2_headdim", &c->m_headdim, 64),
      TPXP_KEY_I("num_memory_tokens", &c->mem, 0),
      TPXP_KEY_I("attn_hidden_size", &c->attn_hidden, -1),
      TPXP_KEY_I("kq_head_dim", &c->kq_hd, -1),
      TPXP_KEY_I("v_head_dim", &c->v_hd, -1),
      TPXP_KEY_B("tie_word_embeddings", &c->tie, 0),
      TPXP_KEY_S("mlp_hidden_act", &act, "silu"),
  };
  TPXP_CHK(TPXP_CFG_READ(host, ctx, "", keys));
  /* num_key_value_heads defaults to num_attention_heads, read above */
  TPXP_CHK(
      tpxp_cfg_int_opt(host, ctx, "num_key_value_heads", c->heads, &c->kv));
  TPXP_CHK(TPXP_CFG_READ(host, ctx, "", more));
  c->gate = strcmp(act, "silu") == 0;
  if (!c->gate && strcmp(act, "relu2") != 0)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "nemotron-flash: mlp_hidden_act '%s' is not supported "
                     "(the model knows silu and relu2)",
                     act);
  if (c->vocab <= 0 || c->hidden <= 0 || c->layers < 0 || c->heads <= 0 ||
      c->kv <= 0 || c->mem < 0 || c->d_state <= 0 || c->d_conv <= 0 ||
      c->expand <= 0 || c->m_headdim <= 0)
    return bad(host, ctx,
               "has a non-positive size (vocab_size, hidden_size, "
               "num_hidden_layers, num_attention_heads, num_key_value_heads, "
               "num_memory_tokens or a mamba_* size)");
  /* ffn width: ffn_expand_ratio * hidden rounded down to 128, else
   * intermediate_size */
  c->ffn_dim = c->inter;
  if (host->config_has(ctx, "ffn_expand_ratio")) {
    TPXP_CHK(tpxp_cfg_float_opt(host, ctx, "ffn_expand_ratio", 0.0, &ratio));
    c->ffn_dim = (int64_t)(ratio * (double)c->hidden) / 128 * 128;
  }
  return TPX_PLUGIN_OK;
}

/* NemotronFlashMLP at `F` (gate_proj only for silu). */
static int ffn(const tpx_plugin_host *host, tpx_plugin_ctx *ctx, const char *F,
               const nf_config *c) {
  const tpxp_sk_row rows[] = {
      TPXP_SK_WHEN(c->gate),
      TPXP_SK_LIN("gate_proj", c->hidden, c->ffn_dim, 0),
      TPXP_SK_LIN("down_proj", c->ffn_dim, c->hidden, 0),
      TPXP_SK_LIN("up_proj", c->hidden, c->ffn_dim, 0),
  };
  if (c->ffn_dim <= 0)
    return bad(host, ctx,
               "gives an FFN layer a non-positive width (intermediate_size or "
               "ffn_expand_ratio)");
  return TPXP_SK_ROWS(host, ctx, F, rows, NULL);
}

/* DeltaNet at `G` (fla layer; the model passes only hidden size and heads,
 * so expand_k = expand_v = 1, beta on, no output gate, conv size 4:
 * depthwise q/k/v Conv1d [H, 1, 4] without bias). */
static int deltanet(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    const char *G, const nf_config *c) {
  int64_t H = c->hidden;
  const int64_t cw[3] = {H, 1, 4};
  const tpxp_sk_row rows[] = {
      TPXP_SK_LIN("q_proj", H, H, 0),
      TPXP_SK_LIN("k_proj", H, H, 0),
      TPXP_SK_LIN("v_proj", H, H, 0),
      TPXP_SK_LIN("b_proj", H, c->heads, 0),
      TPXP_SK_MOD("q_conv1d", "other"),
      TPXP_SK_PRM_ND("q_conv1d", "weight", 3, cw),
      TPXP_SK_MOD("k_conv1d", "other"),
      TPXP_SK_PRM_ND("k_conv1d", "weight", 3, cw),
      TPXP_SK_MOD("v_conv1d", "other"),
      TPXP_SK_PRM_ND("v_conv1d", "weight", 3, cw),
      TPXP_SK_NRM("o_norm", H / c->heads, 0),
      TPXP_SK_LIN("o_proj", H, H, 0),
  };
  if (H % c->heads != 0)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "nemotron-flash: hidden_size %lld is not divisible by "
                     "num_attention_heads %lld (DeltaNet layers)",
                     (long long)H, (long long)c->heads);
  return TPXP_SK_ROWS(host, ctx, G, rows, NULL);
}

/* Mamba2 at `M` (ngroups 1, no projection bias, conv bias). */
static int mamba2(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                  const char *M, const nf_config *c) {
  int64_t d_inner = c->expand * c->hidden;
  int64_t nheads = d_inner / c->m_headdim, conv = d_inner + 2 * c->d_state;
  const int64_t cw[3] = {conv, 1, c->d_conv};
  const tpxp_sk_row rows[] = {
      TPXP_SK_MOD("", "other"),
      TPXP_SK_PRM("", "dt_bias", nheads, -1),
      TPXP_SK_PRM("", "A_log", nheads, -1),
      TPXP_SK_PRM("", "D", nheads, -1),
      TPXP_SK_LIN("in_proj", c->hidden, 2 * d_inner + 2 * c->d_state + nheads,
                  0),
      TPXP_SK_MOD("conv1d", "other"),
      TPXP_SK_PRM_ND("conv1d", "weight", 3, cw),
      TPXP_SK_PRM("conv1d", "bias", conv, -1),
      TPXP_SK_NRM("norm", d_inner, 0),
      TPXP_SK_LIN("out_proj", d_inner, c->hidden, 0),
  };
  if (d_inner % c->m_headdim != 0 || nheads % 8 != 0)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "nemotron-flash: mamba_expand * hidden_size (%lld) must "
                     "be a multiple of 8 * mamba2_headdim (%lld)",
                     (long long)d_inner, (long long)c->m_headdim);
  return TPXP_SK_ROWS(host, ctx, M, rows, NULL);
}

/* Attention at `A` (k_norm and q_norm when kq_norm is "rms"). */
static int attention(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const char *A, const nf_config *c) {
  int64_t in = c->attn_hidden > 0 ? c->attn_hidden : c->hidden;
  int64_t hd = in / c->heads;
  int64_t kq = c->kq_hd > 0 ? c->kq_hd : hd, v = c->v_hd > 0 ? c->v_hd : hd;
  const tpxp_sk_row rows[] = {
      TPXP_SK_LIN("q_proj", in, c->heads * kq, 0),
      TPXP_SK_LIN("k_proj", in, c->kv * kq, 0),
      TPXP_SK_LIN("v_proj", in, c->kv * v, 0),
      TPXP_SK_LIN("o_proj", c->heads * v, in, 0),
      TPXP_SK_WHEN(c->kq_rms),
      TPXP_SK_NRM("k_norm", kq, 0),
      TPXP_SK_WHEN(c->kq_rms),
      TPXP_SK_NRM("q_norm", kq, 0),
  };
  if (hd * c->heads != in && kq == hd)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "nemotron-flash: attention width %lld is not divisible "
                     "by num_attention_heads %lld",
                     (long long)in, (long long)c->heads);
  if (kq <= 0 || v <= 0)
    return bad(host, ctx, "gives attention a non-positive head size");
  return TPXP_SK_ROWS(host, ctx, A, rows, NULL);
}

static int layer(const tpx_plugin_host *host, tpx_plugin_ctx *ctx, nf_config *c,
                 int64_t i) {
  char L[TPXP_FQN_MAX], f[TPXP_FQN_MAX], path[48];
  const char *t = NULL;
  snprintf(path, sizeof path, "layer_types[%lld]", (long long)i);
  if (host->config_get_string(ctx, path, &t) != TPX_PLUGIN_OK || t == NULL)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "nemotron-flash: %s is missing or not a string "
                     "(layer_types needs one entry per layer)",
                     path);
  tpxp_fmt(L, sizeof L, "model.layers.%lld", (long long)i);
  TPXP_CHK(tpxp_sk_module(host, ctx, L, "container"));
  if (strcmp(t, "f") == 0) {
    tpxp_fmt(f, sizeof f, "%s.ffn", L);
    TPXP_CHK(ffn(host, ctx, f, c));
    tpxp_fmt(f, sizeof f, "%s.pre_ffn_layernorm", L);
    return tpxp_sk_norm(host, ctx, f, c->hidden, 0, NULL);
  }
  if (strcmp(t, "deltanet") == 0) {
    tpxp_fmt(f, sizeof f, "%s.gla", L);
    TPXP_CHK(deltanet(host, ctx, f, c));
  } else if (strcmp(t, "m") == 0 || strcmp(t, "m2") == 0) {
    tpxp_fmt(f, sizeof f, "%s.mamba", L);
    TPXP_CHK(mamba2(host, ctx, f, c));
  } else if (strcmp(t, "a") == 0) {
    const char *kq = NULL;
    TPXP_CHK(tpxp_cfg_str_opt(host, ctx, "kq_norm", "", &kq));
    if (strcmp(kq, "rms") != 0 && strcmp(kq, "none") != 0)
      return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                       "nemotron-flash: attention layer %lld needs kq_norm "
                       "\"rms\" or \"none\" (got '%s')",
                       (long long)i, kq[0] ? kq : "(absent)");
    c->kq_rms = strcmp(kq, "rms") == 0;
    tpxp_fmt(f, sizeof f, "%s.self_attn", L);
    TPXP_CHK(attention(host, ctx, f, c));
  } else {
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "nemotron-flash: %s is '%s' (the model knows deltanet, "
                     "m, m2, a and f)",
                     path, t);
  }
  /* the mixer layers carry an FFN only when intermediate_size > 0 */
  if (c->inter > 0) {
    tpxp_fmt(f, sizeof f, "%s.ffn", L);
    TPXP_CHK(ffn(host, ctx, f, c));
    tpxp_fmt(f, sizeof f, "%s.pre_ffn_layernorm", L);
    TPXP_CHK(tpxp_sk_norm(host, ctx, f, c->hidden, 0, NULL));
  }
  tpxp_fmt(f, sizeof f, "%s.input_layernorm", L);
  return tpxp_sk_norm(host, ctx, f, c->hidden, 0, NULL);
}

int nemotron_flash_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx) {
  nf_config c;
  int64_t n = 0, i;
  memset(&c, 0, sizeof c);
  TPXP_CHK(read_config(host, ctx, &c));
  if (host->config_get_length(ctx, "layer_types", &n) != TPX_PLUGIN_OK ||
      n != c.layers)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "nemotron-flash: layer_types must list one type per "
                     "layer (num_hidden_layers %lld)",
                     (long long)c.layers);
  TPXP_CHK(tpxp_sk_module(host, ctx, "model", "container"));
  if (c.mem > 0)
    TPXP_CHK(tpxp_sk_param(host, ctx, "model", "memory_tokens", c.mem, c.hidden,
                           NULL));
  TPXP_CHK(tpxp_sk_embedding(host, ctx, "model.embed_tokens", c.vocab, c.hidden,
                             NULL));
  TPXP_CHK(tpxp_sk_module(host, ctx, "model.layers", "container"));
  for (i = 0; i < c.layers; i++) TPXP_CHK(layer(host, ctx, &c, i));
  TPXP_CHK(tpxp_sk_norm(host, ctx, "model.final_layernorm", c.hidden, 0, NULL));
  return tpxp_sk_lm_head(host, ctx, "lm_head", c.hidden, c.vocab, 0, c.tie,
                         "model.embed_tokens.weight", NULL);
}
