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

static int read_cfg(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    nh_cfg *c) {
  /* Both the remote code's and transformers v5's names; defaults are
   * transformers'. */
  const tpxp_key dims[] = {
      TPXP_KEY_I("vocab_size", &c->vocab, 131072),
      TPXP_KEY_I("hidden_size", &c->hidden, 4096),
      TPXP_KEY_I("intermediate_size", &c->inter, 21504),
      TPXP_KEY_I("num_attention_heads", &c->heads, 32),
  };
  const tpxp_key more[] = {
      TPXP_KEY_I_OR("head_dim", "attention_head_dim", &c->head_dim, 128),
      TPXP_KEY_I("mamba_num_heads", &c->m_heads, 128),
      TPXP_KEY_I("mamba_head_dim", &c->m_head_dim, 64),
      TPXP_KEY_I_OR("n_groups", "mamba_n_groups", &c->groups, 8),
      TPXP_KEY_I("ssm_state_size", &c->state, 128),
      TPXP_KEY_I_OR("conv_kernel", "mamba_d_conv", &c->conv, 4),
      TPXP_KEY_I("n_routed_experts", &c->experts, 8),
      TPXP_KEY_I("moe_intermediate_size", &c->moe_inter, 7688),
      TPXP_KEY_I("moe_shared_expert_intermediate_size", &c->shared_inter, 7688),
  };
  const tpxp_key flags[] = {
      TPXP_KEY_B("use_bias", &c->use_bias, 0),
      TPXP_KEY_B_OR("use_conv_bias", "mamba_conv_bias", &c->conv_bias, 1),
      TPXP_KEY_B("attention_bias", &c->attn_bias, 0),
      TPXP_KEY_B("mlp_bias", &c->mlp_bias, 0),
      TPXP_KEY_B("tie_word_embeddings", &c->tie, 0),
  };
  TPXP_CHK(TPXP_CFG_READ(host, ctx, "", dims));
  /* NemotronHConfig: absent -> 8, null -> num_attention_heads */
  TPXP_CHK(
      tpxp_cfg_int_opt(host, ctx, "num_key_value_heads", c->heads, &c->kv));
  if (!tpxp_cfg_key_present(host, ctx, "", "num_key_value_heads"))
    c->kv = 8;
  TPXP_CHK(TPXP_CFG_READ(host, ctx, "", more));
  c->has_latent =
      host->config_get_int(ctx, "moe_latent_size", &c->latent) == TPX_PLUGIN_OK;
  TPXP_CHK(TPXP_CFG_READ(host, ctx, "", flags));
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

/* A Mamba2 mixer at `m`. Its own parameters precede its submodules' in
 * named_parameters(), whatever the attribute order in __init__. */
static int mamba(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                 const nh_cfg *c, const char *m) {
  int64_t d_inner = c->m_heads * c->m_head_dim;
  int64_t conv_dim = d_inner + 2 * c->groups * c->state;
  const int64_t cw[3] = {conv_dim, 1, c->conv};
  const tpxp_sk_row rows[] = {
      TPXP_SK_MOD("", "other"),
      TPXP_SK_PRM("", "dt_bias", c->m_heads, -1),
      TPXP_SK_PRM("", "A_log", c->m_heads, -1),
      TPXP_SK_PRM("", "D", c->m_heads, -1),
      TPXP_SK_MOD("conv1d", "other"),
      TPXP_SK_PRM_ND("conv1d", "weight", 3, cw),
      TPXP_SK_WHEN(c->conv_bias),
      TPXP_SK_PRM("conv1d", "bias", conv_dim, -1),
      TPXP_SK_LIN("in_proj", c->hidden, d_inner + conv_dim + c->m_heads,
                  c->use_bias),
      TPXP_SK_NRM("norm", d_inner, 0),
      TPXP_SK_LIN("out_proj", d_inner, c->hidden, c->use_bias),
  };
  return TPXP_SK_ROWS(host, ctx, m, rows, NULL);
}

static int attention(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const nh_cfg *c, const char *m) {
  int64_t q = c->heads * c->head_dim, kv = c->kv * c->head_dim;
  const tpxp_sk_row rows[] = {
      TPXP_SK_LIN("q_proj", c->hidden, q, c->attn_bias),
      TPXP_SK_LIN("k_proj", c->hidden, kv, c->attn_bias),
      TPXP_SK_LIN("v_proj", c->hidden, kv, c->attn_bias),
      TPXP_SK_LIN("o_proj", q, c->hidden, c->attn_bias),
  };
  return TPXP_SK_ROWS(host, ctx, m, rows, NULL);
}

/* A squared-ReLU MLP (no gate) at `m`. */
static int mlp(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
               const nh_cfg *c, const char *m, int64_t in, int64_t inter) {
  const tpxp_sk_row rows[] = {
      TPXP_SK_LIN("up_proj", in, inter, c->mlp_bias),
      TPXP_SK_LIN("down_proj", inter, in, c->mlp_bias),
  };
  return TPXP_SK_ROWS(host, ctx, m, rows, NULL);
}

static int moe(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
               const nh_cfg *c, const char *m) {
  char f[TPXP_FQN_MAX];
  int64_t j, in = c->has_latent ? c->latent : c->hidden;
  const tpxp_sk_row gate[] = {
      TPXP_SK_MOD("gate", "other"),
      TPXP_SK_PRM("gate", "weight", c->experts, c->hidden),
      {.kind = TPXP_SK_PARAM,
       .suffix = "gate",
       .name = "e_score_correction_bias",
       .a = c->experts,
       .b = -1,
       .dtype = "float32"},
  };
  const tpxp_sk_row latent[] = {
      TPXP_SK_LIN("fc1_latent_proj", c->hidden, c->latent, c->mlp_bias),
      TPXP_SK_LIN("fc2_latent_proj", c->latent, c->hidden, c->mlp_bias),
  };
  snprintf(f, sizeof f, "%s.experts", m);
  TPXP_CHK(tpxp_sk_module(host, ctx, f, "container"));
  for (j = 0; j < c->experts; j++) {
    snprintf(f, sizeof f, "%s.experts.%lld", m, (long long)j);
    TPXP_CHK(mlp(host, ctx, c, f, in, c->moe_inter));
  }
  TPXP_CHK(TPXP_SK_ROWS(host, ctx, m, gate, NULL));
  snprintf(f, sizeof f, "%s.shared_experts", m);
  TPXP_CHK(mlp(host, ctx, c, f, c->hidden, c->shared_inter));
  return c->has_latent ? TPXP_SK_ROWS(host, ctx, m, latent, NULL)
                       : TPX_PLUGIN_OK;
}

int nemotron_h_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                        const char *arch) {
  char types[NEMOTRON_H_MAX_BLOCKS + 1], f[TPXP_FQN_MAX], m[160];
  nh_cfg c;
  int64_t n = 0, i;
  memset(&c, 0, sizeof c);
  TPXP_CHK(nemotron_h_block_types(host, ctx, types, &n));
  TPXP_CHK(read_cfg(host, ctx, &c));
  TPXP_CHK(tpxp_sk_embedding(host, ctx, "backbone.embeddings", c.vocab,
                             c.hidden, NULL));
  TPXP_CHK(tpxp_sk_module(host, ctx, "backbone.layers", "container"));
  for (i = 0; i < n; i++) {
    snprintf(f, sizeof f, "backbone.layers.%lld.norm", (long long)i);
    TPXP_CHK(tpxp_sk_norm(host, ctx, f, c.hidden, 0, NULL));
    snprintf(m, sizeof m, "backbone.layers.%lld.mixer", (long long)i);
    switch (types[i]) {
    case NEMOTRON_H_MAMBA: TPXP_CHK(mamba(host, ctx, &c, m)); break;
    case NEMOTRON_H_ATTENTION: TPXP_CHK(attention(host, ctx, &c, m)); break;
    case NEMOTRON_H_MLP:
      TPXP_CHK(mlp(host, ctx, &c, m, c.hidden, c.inter));
      break;
    default: TPXP_CHK(moe(host, ctx, &c, m)); break;
    }
  }
  TPXP_CHK(tpxp_sk_norm(host, ctx, "backbone.norm_f", c.hidden, 0, NULL));
  return tpxp_sk_lm_head(host, ctx, "lm_head", c.hidden, c.vocab, 0, c.tie,
                         "backbone.embeddings.weight", NULL);
}
