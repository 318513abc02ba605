/* falcon_h1_skeleton.c — the FalconH1ForCausalLM skeleton from a config,
 * with the names, shapes and module order of the Hugging Face checkpoint
 * (transformers' modeling_falcon_h1).
 *
 * Per decoder layer (model.layers.N), in module order, parameters in
 * torch's named_parameters() order (a module's own parameters before its
 * children's):
 *   feed_forward.{gate,up,down}_proj   gated MLP, bias mlp_bias
 *   mamba.{dt_bias, A_log, D}          [n_heads] each (direct parameters)
 *   mamba.conv1d        weight [conv_dim, 1, d_conv] (+ bias, mamba_conv_bias)
 *   mamba.in_proj       [d_ssm + conv_dim + n_heads, hidden] (+
 * mamba_proj_bias) mamba.norm          [d_ssm], only with mamba_rms_norm
 *   mamba.out_proj      [hidden, d_ssm] (+ bias, projectors_bias)
 *   self_attn.{q,k,v,o}_proj           bias attention_bias
 *   input_layernorm, pre_ff_layernorm  [hidden]
 * where conv_dim = d_ssm + 2 * mamba_n_groups * mamba_d_state. Then
 * model.final_layernorm, model.rotary_emb (no parameters) and lm_head (tied
 * only with tie_word_embeddings, default false).
 *
 * d_ssm is mamba_d_ssm; null means mamba_expand * hidden_size. An ABSENT
 * mamba_d_ssm takes transformers' default 1024 only when that agrees with
 * mamba_n_heads * mamba_d_head (transformers refuses any other combination);
 * otherwise the only loadable value, n_heads * d_head, is used and a warning
 * logged (trimmed configs such as Megatron-Bridge's Falcon-H1-0.5B fixture
 * omit the key). */
#include "falcon_h1.h"

#include <stdio.h>
#include <string.h>

#include "tpxp_common.h"

typedef struct falcon_h1_cfg {
  int64_t vocab, hidden, inter, layers, heads, kv, head_dim;
  int64_t m_heads, m_head_dim, m_groups, m_state, m_conv, m_expand, d_ssm;
  int attn_bias, mlp_bias, proj_bias, in_bias, conv_bias, rms_norm, tie;
} falcon_h1_cfg;

/* mamba_d_head: an integer, or "auto" / absent (= d_ssm / n_heads). Sets
 * *is_auto when not given as a number. */
static int read_d_head(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                       int64_t *out, int *is_auto) {
  const char *s = NULL;
  int st = host->config_get_int(ctx, "mamba_d_head", out);
  *is_auto = 0;
  if (st == TPX_PLUGIN_OK)
    return st;
  if (st == TPX_PLUGIN_NOT_FOUND) {
    *is_auto = 1;
    return TPX_PLUGIN_OK;
  }
  if (host->config_get_string(ctx, "mamba_d_head", &s) == TPX_PLUGIN_OK &&
      s != NULL && strcmp(s, "auto") == 0) {
    *is_auto = 1;
    return TPX_PLUGIN_OK;
  }
  return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                   "falcon_h1: config key 'mamba_d_head' must be an integer "
                   "or \"auto\"");
}

int falcon_h1_kv_heads(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                       int64_t heads, int64_t *kv) {
  if (!tpxp_cfg_key_present(host, ctx, "", "num_key_value_heads")) {
    *kv = 8;
    return TPX_PLUGIN_OK;
  }
  return tpxp_cfg_int_opt(host, ctx, "num_key_value_heads", heads, kv);
}

static int read_cfg(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    falcon_h1_cfg *c) {
  int d_head_auto = 0, st;
  const tpxp_key dims[] = {
      TPXP_KEY_I("vocab_size", &c->vocab, 128000),
      TPXP_KEY_I("hidden_size", &c->hidden, 4096),
      TPXP_KEY_I("intermediate_size", &c->inter, 14336),
      TPXP_KEY_I("num_hidden_layers", &c->layers, 32),
      TPXP_KEY_I("num_attention_heads", &c->heads, 32),
  };
  const tpxp_key mamba[] = {
      TPXP_KEY_I("mamba_n_heads", &c->m_heads, 128),
      TPXP_KEY_I("mamba_n_groups", &c->m_groups, 1),
      TPXP_KEY_I("mamba_d_state", &c->m_state, 256),
      TPXP_KEY_I("mamba_d_conv", &c->m_conv, 4),
      TPXP_KEY_I("mamba_expand", &c->m_expand, 2),
  };
  const tpxp_key flags[] = {
      TPXP_KEY_B("attention_bias", &c->attn_bias, 0),
      TPXP_KEY_B("mlp_bias", &c->mlp_bias, 0),
      TPXP_KEY_B("projectors_bias", &c->proj_bias, 0),
      TPXP_KEY_B("mamba_proj_bias", &c->in_bias, 0),
      TPXP_KEY_B("mamba_conv_bias", &c->conv_bias, 1),
      TPXP_KEY_B("mamba_rms_norm", &c->rms_norm, 0),
      TPXP_KEY_B("tie_word_embeddings", &c->tie, 0),
  };
  TPXP_CHK(TPXP_CFG_READ(host, ctx, "", dims));
  if (c->heads <= 0 || c->hidden <= 0)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "falcon_h1: hidden_size (%lld) and num_attention_heads "
                     "(%lld) must be positive",
                     (long long)c->hidden, (long long)c->heads);
  /* num_key_value_heads: default 8; null means num_attention_heads */
  TPXP_CHK(falcon_h1_kv_heads(host, ctx, c->heads, &c->kv));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "head_dim", c->hidden / c->heads,
                            &c->head_dim));
  TPXP_CHK(TPXP_CFG_READ(host, ctx, "", mamba));
  TPXP_CHK(read_d_head(host, ctx, &c->m_head_dim, &d_head_auto));
  if (c->m_heads <= 0)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "falcon_h1: mamba_n_heads (%lld) must be positive",
                     (long long)c->m_heads);
  st = host->config_get_int(ctx, "mamba_d_ssm", &c->d_ssm);
  if (st == TPX_PLUGIN_NOT_FOUND &&
      !tpxp_cfg_key_present(host, ctx, "", "mamba_d_ssm")) {
    /* absent (not null): transformers' default is 1024 */
    c->d_ssm = 1024;
    if (!d_head_auto && c->m_heads * c->m_head_dim != c->d_ssm) {
      tpxp_log(host, ctx, TPX_PLUGIN_LOG_WARN,
               "falcon_h1: config has no mamba_d_ssm; using mamba_n_heads * "
               "mamba_d_head = %lld * %lld = %lld (the default 1024 would "
               "not load)",
               (long long)c->m_heads, (long long)c->m_head_dim,
               (long long)(c->m_heads * c->m_head_dim));
      c->d_ssm = c->m_heads * c->m_head_dim;
    }
  } else if (st == TPX_PLUGIN_NOT_FOUND) {
    c->d_ssm = c->m_expand * c->hidden; /* explicit null */
  } else if (st != TPX_PLUGIN_OK) {
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "falcon_h1: config key 'mamba_d_ssm' is not an integer");
  }
  if (d_head_auto)
    c->m_head_dim = c->d_ssm / c->m_heads;
  if (c->d_ssm <= 0 || c->d_ssm % c->m_heads != 0 ||
      c->m_head_dim * c->m_heads != c->d_ssm)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "falcon_h1: the Mamba sizes do not agree: mamba_d_ssm "
                     "%lld must equal mamba_n_heads (%lld) * mamba_d_head "
                     "(%lld)",
                     (long long)c->d_ssm, (long long)c->m_heads,
                     (long long)c->m_head_dim);
  return TPXP_CFG_READ(host, ctx, "", flags);
}

static int layer(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                 const char *L, int64_t i, const void *user) {
  const falcon_h1_cfg *c = user;
  int64_t h = c->hidden, conv_dim = c->d_ssm + 2 * c->m_groups * c->m_state;
  int64_t proj = c->d_ssm + conv_dim + c->m_heads;
  int64_t q = c->heads * c->head_dim, kv = c->kv * c->head_dim;
  const int64_t cw[3] = {conv_dim, 1, c->m_conv};
  /* FalconH1Mixer's own parameters come before its submodules' in
   * named_parameters(), whatever the attribute order in __init__. */
  const tpxp_sk_row rows[] = {
      TPXP_SK_LIN("feed_forward.gate_proj", h, c->inter, c->mlp_bias),
      TPXP_SK_LIN("feed_forward.up_proj", h, c->inter, c->mlp_bias),
      TPXP_SK_LIN("feed_forward.down_proj", c->inter, h, c->mlp_bias),
      TPXP_SK_MOD("mamba", "other"),
      TPXP_SK_PRM("mamba", "dt_bias", c->m_heads, -1),
      TPXP_SK_PRM("mamba", "A_log", c->m_heads, -1),
      TPXP_SK_PRM("mamba", "D", c->m_heads, -1),
      TPXP_SK_MOD("mamba.conv1d", "other"),
      TPXP_SK_PRM_ND("mamba.conv1d", "weight", 3, cw),
      TPXP_SK_WHEN(c->conv_bias),
      TPXP_SK_PRM("mamba.conv1d", "bias", conv_dim, -1),
      TPXP_SK_LIN("mamba.in_proj", h, proj, c->in_bias),
      TPXP_SK_WHEN(c->rms_norm),
      TPXP_SK_NRM("mamba.norm", c->d_ssm, 0),
      TPXP_SK_LIN("mamba.out_proj", c->d_ssm, h, c->proj_bias),
      TPXP_SK_LIN("self_attn.q_proj", h, q, c->attn_bias),
      TPXP_SK_LIN("self_attn.k_proj", h, kv, c->attn_bias),
      TPXP_SK_LIN("self_attn.v_proj", h, kv, c->attn_bias),
      TPXP_SK_LIN("self_attn.o_proj", q, h, c->attn_bias),
      TPXP_SK_NRM("input_layernorm", h, 0),
      TPXP_SK_NRM("pre_ff_layernorm", h, 0),
  };
  return TPXP_SK_ROWS(host, ctx, L, rows, NULL);
}

int falcon_h1_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                       const char *arch) {
  falcon_h1_cfg c;
  memset(&c, 0, sizeof c);
  TPXP_CHK(read_cfg(host, ctx, &c));
  {
    const tpxp_sk_row tail[] = {
        TPXP_SK_NRM("final_layernorm", c.hidden, 0),
        TPXP_SK_MOD("rotary_emb", "rotary"),
    };
    const tpxp_stack stack = {.prefix = "model",
                              .embed = "embed_tokens",
                              .vocab = c.vocab,
                              .hidden = c.hidden,
                              .layers = c.layers,
                              .layer = layer,
                              .user = &c,
                              .tail = tail,
                              .n_tail = TPXP_N_OF(tail),
                              .head = "lm_head",
                              .tie = c.tie};
    return tpxp_sk_stack(host, ctx, &stack);
  }
}
