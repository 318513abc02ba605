/* nemotron_h_skeleton.c — the NemotronHForCausalLM skeleton from a config,
 * named as the published checkpoints are (remote-code layout, "backbone."):
 *
 *   backbone.embeddings                 [vocab, hidden]
 *   backbone.layers.N.norm              [hidden]
 *   backbone.layers.N.mixer             one of, by the block pattern:
 *     M  dt_bias, A_log, D [n_heads] (the mixer's own parameters, first
 *        in torch's named_parameters() order), conv1d [conv_dim, 1,
 *        conv_kernel] (+ bias, use_conv_bias), in_proj [2*d_inner +
 *        2*n_groups*ssm_state_size + n_heads, hidden], norm [d_inner],
 *        out_proj [hidden, d_inner]           (in/out bias: use_bias)
 *     *  q/k/v/o_proj (GQA, head_dim; bias: attention_bias)
 *     -  up_proj [intermediate, hidden], down_proj (squared-ReLU, no gate)
 *     E  experts.J.{up,down}_proj (moe_intermediate_size), gate.weight
 *        [n_routed_experts, hidden], gate.e_score_correction_bias (fp32),
 *        shared_experts.{up,down}_proj, latent projections if
 *        moe_latent_size is set
 *   backbone.norm_f, lm_head (tied only with tie_word_embeddings).
 * d_inner = mamba_num_heads * mamba_head_dim, conv_dim = d_inner +
 * 2 * n_groups * ssm_state_size. Config names of both the remote code and
 * transformers v5 are read (n_groups / mamba_n_groups, conv_kernel /
 * mamba_d_conv, use_conv_bias / mamba_conv_bias, head_dim /
 * attention_head_dim); defaults are transformers'. MTP layers (mtp.*) are
 * not part of the model and are left out. */
#include "nemotron.h"

#include <stdio.h>
#include <string.h>

#include "tpxp_common.h"

typedef struct nh_cfg {
  int64_t vocab, hidden, inter, heads, kv, head_dim;
  int64_t m_heads, m_head_dim, groups, state, conv;
  int64_t experts, moe_inter, shared_inter, latent;
  int use_bias, conv_bias, attn_bias, mlp_bias, tie, has_latent;
} nh_cfg;

/* First present key of two (new name, old name). */
static int int2(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                const char *a, const char *b, int64_t dflt, int64_t *out) {
  if (host->config_has(ctx, a) || b == NULL)
    return tpxp_cfg_int_opt(host, ctx, a, dflt, out);
  return tpxp_cfg_int_opt(host, ctx, b, dflt, out);
}

static int bool2(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                 const char *a, const char *b, int dflt, int *out) {
  if (host->config_has(ctx, a) || b == NULL)
    return tpxp_cfg_bool_opt(host, ctx, a, dflt, out);
  return tpxp_cfg_bool_opt(host, ctx, b, dflt, out);
}

/* 1 when the config's top level has `key`, even with a null value
 * (host->config_has treats null as absent; NemotronHConfig does not). */
static int key_present(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                       const char *key) {
  int64_t n = 0, i;
  if (host->config_get_length(ctx, "", &n) != TPX_PLUGIN_OK)
    return 0;
  for (i = 0; i < n; i++) {
    const char *k = NULL;
    if (host->config_get_key(ctx, "", i, &k) == TPX_PLUGIN_OK && k != NULL &&
        strcmp(k, key) == 0)
      return 1;
  }
  return 0;
}

static int read_cfg(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    nh_cfg *c) {
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "vocab_size", 131072, &c->vocab));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "hidden_size", 4096, &c->hidden));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "intermediate_size", 21504, &c->inter));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "num_attention_heads", 32, &c->heads));
  /* NemotronHConfig: absent -> 8, null -> num_attention_heads */
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "num_key_value_heads", c->heads, &c->kv));
  if (!key_present(host, ctx, "num_key_value_heads"))
    c->kv = 8;
  TPXP_CHK(int2(host, ctx, "head_dim", "attention_head_dim", 128, &c->head_dim));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "mamba_num_heads", 128, &c->m_heads));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "mamba_head_dim", 64, &c->m_head_dim));
  TPXP_CHK(int2(host, ctx, "n_groups", "mamba_n_groups", 8, &c->groups));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "ssm_state_size", 128, &c->state));
  TPXP_CHK(int2(host, ctx, "conv_kernel", "mamba_d_conv", 4, &c->conv));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "n_routed_experts", 8, &c->experts));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "moe_intermediate_size", 7688,
                       &c->moe_inter));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "moe_shared_expert_intermediate_size", 7688,
                       &c->shared_inter));
  c->has_latent = host->config_get_int(ctx, "moe_latent_size", &c->latent) ==
                  TPX_PLUGIN_OK;
  TPXP_CHK(tpxp_cfg_bool_opt(host, ctx, "use_bias", 0, &c->use_bias));
  TPXP_CHK(bool2(host, ctx, "use_conv_bias", "mamba_conv_bias", 1, &c->conv_bias));
  TPXP_CHK(tpxp_cfg_bool_opt(host, ctx, "attention_bias", 0, &c->attn_bias));
  TPXP_CHK(tpxp_cfg_bool_opt(host, ctx, "mlp_bias", 0, &c->mlp_bias));
  TPXP_CHK(tpxp_cfg_bool_opt(host, ctx, "tie_word_embeddings", 0, &c->tie));
  if (c->vocab <= 0 || c->hidden <= 0 || c->heads <= 0 || c->kv <= 0 ||
      c->head_dim <= 0 || c->m_heads <= 0 || c->m_head_dim <= 0 ||
      c->groups <= 0 || c->state <= 0 || c->conv <= 0)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "nemotron_h: config sizes must be positive (vocab %lld, "
                     "hidden %lld, heads %lld/%lld, head_dim %lld, mamba "
                     "heads %lld x %lld, groups %lld, state %lld, conv %lld)",
                     (long long)c->vocab, (long long)c->hidden,
                     (long long)c->heads, (long long)c->kv,
                     (long long)c->head_dim, (long long)c->m_heads,
                     (long long)c->m_head_dim, (long long)c->groups,
                     (long long)c->state, (long long)c->conv);
  return TPX_PLUGIN_OK;
}

static int mamba(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                 const nh_cfg *c, const char *m) {
  char f[TPXP_FQN_MAX];
  int64_t d_inner = c->m_heads * c->m_head_dim;
  int64_t conv_dim = d_inner + 2 * c->groups * c->state;
  int64_t cw[3];
  TPXP_CHK(tpxp_sk_module(host, ctx, m, "other"));
  /* the mixer's own parameters precede its submodules' in
   * named_parameters(), whatever the attribute order in __init__ */
  TPXP_CHK(tpxp_sk_param(host, ctx, m, "dt_bias", c->m_heads, -1, NULL));
  TPXP_CHK(tpxp_sk_param(host, ctx, m, "A_log", c->m_heads, -1, NULL));
  TPXP_CHK(tpxp_sk_param(host, ctx, m, "D", c->m_heads, -1, NULL));
  snprintf(f, sizeof f, "%s.conv1d", m);
  TPXP_CHK(tpxp_sk_module(host, ctx, f, "other"));
  cw[0] = conv_dim;
  cw[1] = 1;
  cw[2] = c->conv;
  TPXP_CHK(host->skeleton_add_param(ctx, f, "weight", cw, 3, NULL));
  if (c->conv_bias)
    TPXP_CHK(tpxp_sk_param(host, ctx, f, "bias", conv_dim, -1, NULL));
  snprintf(f, sizeof f, "%s.in_proj", m);
  TPXP_CHK(tpxp_sk_linear(host, ctx, f, c->hidden, d_inner + conv_dim + c->m_heads,
                     c->use_bias, NULL));
  snprintf(f, sizeof f, "%s.norm", m);
  TPXP_CHK(tpxp_sk_norm(host, ctx, f, d_inner, 0, NULL));
  snprintf(f, sizeof f, "%s.out_proj", m);
  return tpxp_sk_linear(host, ctx, f, d_inner, c->hidden, c->use_bias, NULL);
}

static int attention(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const nh_cfg *c, const char *m) {
  char f[TPXP_FQN_MAX];
  int64_t q = c->heads * c->head_dim, kv = c->kv * c->head_dim;
  snprintf(f, sizeof f, "%s.q_proj", m);
  TPXP_CHK(tpxp_sk_linear(host, ctx, f, c->hidden, q, c->attn_bias, NULL));
  snprintf(f, sizeof f, "%s.k_proj", m);
  TPXP_CHK(tpxp_sk_linear(host, ctx, f, c->hidden, kv, c->attn_bias, NULL));
  snprintf(f, sizeof f, "%s.v_proj", m);
  TPXP_CHK(tpxp_sk_linear(host, ctx, f, c->hidden, kv, c->attn_bias, NULL));
  snprintf(f, sizeof f, "%s.o_proj", m);
  return tpxp_sk_linear(host, ctx, f, q, c->hidden, c->attn_bias, NULL);
}

static int mlp(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
               const nh_cfg *c, const char *m, int64_t in, int64_t inter) {
  char f[TPXP_FQN_MAX];
  snprintf(f, sizeof f, "%s.up_proj", m);
  TPXP_CHK(tpxp_sk_linear(host, ctx, f, in, inter, c->mlp_bias, NULL));
  snprintf(f, sizeof f, "%s.down_proj", m);
  return tpxp_sk_linear(host, ctx, f, inter, in, c->mlp_bias, NULL);
}

static int moe(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
               const nh_cfg *c, const char *m) {
  char f[TPXP_FQN_MAX];
  int64_t j, in = c->has_latent ? c->latent : c->hidden;
  snprintf(f, sizeof f, "%s.experts", m);
  TPXP_CHK(tpxp_sk_module(host, ctx, f, "container"));
  for (j = 0; j < c->experts; j++) {
    snprintf(f, sizeof f, "%s.experts.%lld", m, (long long)j);
    TPXP_CHK(mlp(host, ctx, c, f, in, c->moe_inter));
  }
  snprintf(f, sizeof f, "%s.gate", m);
  TPXP_CHK(tpxp_sk_module(host, ctx, f, "other"));
  TPXP_CHK(tpxp_sk_param(host, ctx, f, "weight", c->experts, c->hidden, NULL));
  TPXP_CHK(tpxp_sk_param(host, ctx, f, "e_score_correction_bias", c->experts, -1,
                    "float32"));
  snprintf(f, sizeof f, "%s.shared_experts", m);
  TPXP_CHK(mlp(host, ctx, c, f, c->hidden, c->shared_inter));
  if (c->has_latent) {
    snprintf(f, sizeof f, "%s.fc1_latent_proj", m);
    TPXP_CHK(tpxp_sk_linear(host, ctx, f, c->hidden, c->latent, c->mlp_bias, NULL));
    snprintf(f, sizeof f, "%s.fc2_latent_proj", m);
    TPXP_CHK(tpxp_sk_linear(host, ctx, f, c->latent, c->hidden, c->mlp_bias, NULL));
  }
  return TPX_PLUGIN_OK;
}

int nemotron_h_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                        const char *arch) {
  char types[NEMOTRON_H_MAX_BLOCKS + 1], f[TPXP_FQN_MAX], m[160];
  nh_cfg c;
  int64_t n = 0, i;
  memset(&c, 0, sizeof c);
  TPXP_CHK(nemotron_h_block_types(host, ctx, types, &n));
  TPXP_CHK(read_cfg(host, ctx, &c));
  TPXP_CHK(tpxp_sk_embedding(host, ctx, "backbone.embeddings", c.vocab, c.hidden,
                        NULL));
  TPXP_CHK(tpxp_sk_module(host, ctx, "backbone.layers", "container"));
  for (i = 0; i < n; i++) {
    snprintf(f, sizeof f, "backbone.layers.%lld.norm", (long long)i);
    TPXP_CHK(tpxp_sk_norm(host, ctx, f, c.hidden, 0, NULL));
    snprintf(m, sizeof m, "backbone.layers.%lld.mixer", (long long)i);
    switch (types[i]) {
    case NEMOTRON_H_MAMBA:
      TPXP_CHK(mamba(host, ctx, &c, m));
      break;
    case NEMOTRON_H_ATTENTION:
      TPXP_CHK(attention(host, ctx, &c, m));
      break;
    case NEMOTRON_H_MLP:
      TPXP_CHK(mlp(host, ctx, &c, m, c.hidden, c.inter));
      break;
    default:
      TPXP_CHK(moe(host, ctx, &c, m));
      break;
    }
  }
  TPXP_CHK(tpxp_sk_norm(host, ctx, "backbone.norm_f", c.hidden, 0, NULL));
  return tpxp_sk_lm_head(host, ctx, "lm_head", c.hidden, c.vocab, 0, c.tie,
                         "backbone.embeddings.weight", NULL);
}
