/* am_skeleton.c — NeMo Automodel 0.7.0's own MoE module trees from a config:
 * Automodel's parameter names, shapes and dtypes (its classes build every
 * parameter in the config dtype except where noted: MiniMax-M2's and
 * ERNIE-4.5's router weight and Qwen3-Next's A_log / dt_bias are float32),
 * the routed experts as GroupedExperts' two fused tensors
 * (gate_and_up_projs [E, H, 2I], down_projs [E, I, H]) with, where the host
 * offers skeleton_add_source, the per-expert checkpoint tensors they are
 * made of (gate_and_up_projs[e] = cat(gate_proj.weight^T, up_proj.weight^T,
 * dim -1), down_projs[e] = down_proj.weight^T, as the state-dict adapters
 * convert them). Not: buffers (freqs_cis, e_score_correction_bias; a
 * checkpoint's copy is the host's business), MTP layers (Automodel builds
 * none for these classes). */
#include <stddef.h>
#include <string.h>

#include "am.h"

/* ---- attention ---- */

static int sk_gqa(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                  const am_cfg *c, const char *attn, int gated, int64_t heads,
                  int64_t g_out) {
  int64_t h = c->hidden, q = heads * c->head_dim;
  int64_t kv = c->kv_heads * c->head_dim;
  int b = c->a->gpt_oss || c->attn_bias;
  int ob = c->a->gpt_oss || c->o_bias;
  const tpxp_sk_row rows[] = {
      TPXP_SK_MOD("", "other"),
      TPXP_SK_WHEN(c->a->gpt_oss),
      TPXP_SK_PRM("", "sinks", c->heads, -1),
      TPXP_SK_LIN("q_proj", h, gated ? 2 * q : q, b),
      TPXP_SK_LIN("k_proj", h, kv, b),
      TPXP_SK_LIN("v_proj", h, kv, b),
      TPXP_SK_LIN("o_proj", q, h, ob),
      TPXP_SK_WHEN(g_out > 0),
      TPXP_SK_LIN("g_proj", h, g_out, 0),
      TPXP_SK_WHEN(c->qk_norm),
      TPXP_SK_NRM("q_norm", c->qk_norm == 2 ? q : c->head_dim, 0),
      TPXP_SK_WHEN(c->qk_norm),
      TPXP_SK_NRM("k_norm", c->qk_norm == 2 ? kv : c->head_dim, 0),
  };
  return TPXP_SK_ROWS(host, ctx, attn, rows, NULL);
}

/* DeepSeek's multi-head latent attention (and the V3.2 / GLM-MoE-DSA
 * lightning indexer under it). */
static int sk_mla(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                  const am_cfg *c, const char *attn) {
  int64_t h = c->hidden, qk = c->qk_nope + c->qk_rope, ql = c->q_lora;
  const tpxp_sk_row rows[] = {
      TPXP_SK_MOD("", "other"),
      TPXP_SK_WHEN(ql <= 0),
      TPXP_SK_LIN("q_proj", h, c->heads * qk, 0),
      TPXP_SK_WHEN(ql > 0),
      TPXP_SK_LIN("q_a_proj", h, ql, 0),
      TPXP_SK_WHEN(ql > 0),
      TPXP_SK_NRM("q_a_layernorm", ql, 0),
      TPXP_SK_WHEN(ql > 0),
      TPXP_SK_LIN("q_b_proj", ql, c->heads * qk, 0),
      TPXP_SK_LIN("kv_a_proj_with_mqa", h, c->kv_lora + c->qk_rope, 0),
      TPXP_SK_NRM("kv_a_layernorm", c->kv_lora, 0),
      TPXP_SK_LIN("kv_b_proj", c->kv_lora, c->heads * (c->qk_nope + c->v_head),
                  0),
      TPXP_SK_LIN("o_proj", c->heads * c->v_head, h, 0),
      TPXP_SK_WHEN(c->a->indexer),
      TPXP_SK_MOD("indexer", "other"),
      TPXP_SK_WHEN(c->a->indexer),
      TPXP_SK_LIN("indexer.wq_b", ql, c->idx_heads * c->idx_dim, 0),
      TPXP_SK_WHEN(c->a->indexer),
      TPXP_SK_LIN("indexer.wk", h, c->idx_dim, 0),
      TPXP_SK_WHEN(c->a->indexer),
      TPXP_SK_NRM("indexer.k_norm", c->idx_dim, 1),
      TPXP_SK_WHEN(c->a->indexer),
      TPXP_SK_LIN("indexer.weights_proj", h, c->idx_heads, 0),
  };
  if (c->a->indexer && ql <= 0)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "automodel_moe: %s: the indexer needs q_lora_rank > 0",
                     c->a->bare);
  return TPXP_SK_ROWS(host, ctx, attn, rows, NULL);
}

/* Qwen3-Next's gated delta net; A_log and dt_bias live in a child module
 * _fp32_params and stay float32. */
static int sk_linear_attn(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                          const am_cfg *c, const char *attn) {
  int64_t h = c->hidden, key = c->lin_kh * c->lin_kd;
  int64_t val = c->lin_vh * c->lin_vd;
  const int64_t conv[3] = {2 * key + val, 1, c->conv_k};
  const tpxp_sk_row rows[] = {
      TPXP_SK_MOD("", "other"),
      TPXP_SK_MOD("conv1d", "other"),
      TPXP_SK_PRM_ND("conv1d", "weight", 3, conv),
      TPXP_SK_LIN("in_proj_qkvz", h, 2 * key + 2 * val, 0),
      TPXP_SK_LIN("in_proj_ba", h, 2 * c->lin_vh, 0),
      TPXP_SK_NRM("norm", c->lin_vd, 0),
      TPXP_SK_LIN("out_proj", val, h, 0),
      TPXP_SK_MOD("_fp32_params", "other"),
      {.kind = TPXP_SK_PARAM,
       .suffix = "_fp32_params",
       .name = "A_log",
       .a = c->lin_vh,
       .b = -1,
       .dtype = AM_F32},
      {.kind = TPXP_SK_PARAM,
       .suffix = "_fp32_params",
       .name = "dt_bias",
       .a = c->lin_vh,
       .b = -1,
       .dtype = AM_F32},
  };
  return TPXP_SK_ROWS(host, ctx, attn, rows, NULL);
}

/* Ling-V2: "<layer>.attention.query_key_value.weight" is cut along dim 0
 * into q_proj, k_proj and v_proj's weights (as Automodel's adapter splits
 * it), where the host can read such a tensor. */
static int sk_fused_qkv(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                        const char *layer) {
  char q[TPXP_FQN_MAX], k[TPXP_FQN_MAX], v[TPXP_FQN_MAX], src[TPXP_FQN_MAX];
  const char *const parts[3] = {q, k, v};
  if (host->struct_size <=
          offsetof(tpx_plugin_host, skeleton_add_split_source) ||
      host->skeleton_add_split_source == NULL)
    return TPX_PLUGIN_OK;
  tpxp_fmt(q, sizeof q, "%s.self_attn.q_proj.weight", layer);
  tpxp_fmt(k, sizeof k, "%s.self_attn.k_proj.weight", layer);
  tpxp_fmt(v, sizeof v, "%s.self_attn.v_proj.weight", layer);
  tpxp_fmt(src, sizeof src, "%s.attention.query_key_value.weight", layer);
  return host->skeleton_add_split_source(ctx, src, 0, parts, NULL, 3);
}

/* ---- the decoder ---- */

static int am_layer(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    const char *layer, int64_t i, const void *user) {
  const am_cfg *c = user;
  char f[TPXP_FQN_MAX];
  int sparse = 0, linear = 0;
  int64_t heads = c->heads, g_out = 0;
  const tpxp_sk_row norms[] = {
      TPXP_SK_NRM("input_layernorm", c->hidden, 0),
      TPXP_SK_NRM("post_attention_layernorm", c->hidden, 0),
  };
  TPXP_CHK(am_layer_linear(host, ctx, c, i, &linear));
  TPXP_CHK(am_layer_sparse(host, ctx, c, i, &sparse));
  TPXP_CHK(am_laguna_attn(host, ctx, c, i, &heads, &g_out));
  TPXP_CHK(tpxp_sk_module(host, ctx, layer, "container"));
  tpxp_fmt(f, sizeof f, "%s.%s", layer, linear ? "linear_attn" : "self_attn");
  if (linear)
    TPXP_CHK(sk_linear_attn(host, ctx, c, f));
  else if (c->a->attn == AM_ATTN_MIMO)
    TPXP_CHK(am_sk_mimo_attn(host, ctx, c, f, i));
  else if (c->a->attn == AM_ATTN_MLA)
    TPXP_CHK(sk_mla(host, ctx, c, f));
  else
    TPXP_CHK(
        sk_gqa(host, ctx, c, f, c->a->attn == AM_ATTN_HYBRID, heads, g_out));
  if (c->a->fused_qkv_ckpt)
    TPXP_CHK(sk_fused_qkv(host, ctx, layer));
  if (sparse) {
    TPXP_CHK(am_sk_moe(host, ctx, c, layer));
  } else {
    if (c->inter <= 0)
      return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                       "automodel_moe: %s: layer %lld is dense, but "
                       "intermediate_size is not positive",
                       c->a->bare, (long long)i);
    tpxp_fmt(f, sizeof f, "%s.mlp", layer);
    TPXP_CHK(am_sk_mlp(host, ctx, f, c->hidden, c->inter, c->use_bias));
  }
  return TPXP_SK_ROWS(host, ctx, layer, norms, NULL);
}

int am_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                const char *arch) {
  am_cfg c;
  const am_arch *a = am_find(arch);
  if (a == NULL)
    return tpxp_not_served(host, ctx, "automodel_moe", arch);
  TPXP_CHK(am_read(host, ctx, a, &c));
  if (a->minimax3)
    return am_sk_minimax3(host, ctx, &c);
  if (a->inkling)
    return am_sk_inkling(host, ctx, &c);
  if (a->step)
    return am_sk_step(host, ctx, &c);
  if (a->glm5)
    return am_sk_glm5(host, ctx, &c);
  if (a->kimi_vision) {
    TPXP_CHK(tpxp_sk_module(host, ctx, "model", "other"));
    TPXP_CHK(am_sk_kimi_vision(host, ctx, &c));
  }
  return am_sk_text_stack(host, ctx, &c, a->stack != NULL ? a->stack : "model",
                          a->head != NULL ? a->head : "lm_head", am_layer, &c,
                          0);
}
