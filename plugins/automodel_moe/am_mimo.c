/* am_mimo.c — Xiaomi MiMo-V2's attention and MoE layers as NeMo Automodel
 * 0.7.0 builds them (MiMoV2FlashForCausalLM, MiMoV2ForCausalLM on the same
 * class, MiMoV25ForCausalLM): per layer, hybrid_layer_pattern[i] == 1 picks
 * the sliding-window sizes (swa_num_attention_heads, swa_num_key_value_
 * heads, swa_head_dim, swa_v_head_dim), else the full-attention ones
 * (num_attention_heads, num_key_value_heads, head_dim, v_head_dim); q/k use
 * head_dim, v and o_proj v_head_dim; q/k/v take attention_bias, o_proj no
 * bias; MiMo-V2.5's class fuses q/k/v into qkv_proj when
 * attention_projection_layout is "fused_qkv". moe_layer_freq[i] says which
 * layers are MoE. Not: the attention sink (a buffer, declared by trait). */
#include <string.h>

#include "am.h"

/* A layer's sizes: heads, kv heads, qk head dim, v head dim. */
static int mimo_sizes(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                      const am_cfg *c, int swa, int64_t s[4]) {
  int64_t hd = c->hidden / c->heads;
  s[0] = c->heads;
  s[1] = c->kv_heads;
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "head_dim", hd, &s[2]));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "v_head_dim", s[2], &s[3]));
  if (swa) {
    /* MiMo-V2.5 falls back to the full-attention sizes (its v head dim to
     * v_head_dim, else hidden / heads); the Flash class needs them all. */
    int64_t v = hd;
    TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "v_head_dim", hd, &v));
    TPXP_CHK(
        tpxp_cfg_int_opt(host, ctx, "swa_num_attention_heads", s[0], &s[0]));
    TPXP_CHK(
        tpxp_cfg_int_opt(host, ctx, "swa_num_key_value_heads", s[1], &s[1]));
    TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "swa_head_dim", s[2], &s[2]));
    TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "swa_v_head_dim", v, &s[3]));
  }
  if (s[0] <= 0 || s[1] <= 0 || s[2] <= 0 || s[3] <= 0)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "automodel_moe: %s: attention sizes must be positive "
                     "(%s heads %lld, kv heads %lld, head_dim %lld, "
                     "v_head_dim %lld)",
                     c->a->bare, swa ? "sliding-window" : "full",
                     (long long)s[0], (long long)s[1], (long long)s[2],
                     (long long)s[3]);
  return TPX_PLUGIN_OK;
}

/* The integer (or boolean) at "<key>[i]"; an absent list reads dflt. */
static int list_int(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    const char *key, int64_t i, int64_t dflt, int64_t *out) {
  char p[64];
  int b = 0;
  *out = dflt;
  if (!host->config_has(ctx, key))
    return TPX_PLUGIN_OK;
  tpxp_fmt(p, sizeof p, "%s[%lld]", key, (long long)i);
  if (host->config_get_bool(ctx, p, &b) == TPX_PLUGIN_OK) {
    *out = b;
    return TPX_PLUGIN_OK;
  }
  return tpxp_cfg_int_req(host, ctx, p, out);
}

int am_mimo_sparse(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                   const am_cfg *c, int64_t i, int *sparse) {
  int64_t on = 0;
  (void)c;
  if (!host->config_has(ctx, "moe_layer_freq"))
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "automodel_moe: %s: config moe_layer_freq (one entry "
                     "per layer) is required",
                     c->a->bare);
  TPXP_CHK(list_int(host, ctx, "moe_layer_freq", i, 0, &on));
  *sparse = on != 0;
  return TPX_PLUGIN_OK;
}

int am_sk_mimo_attn(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    const am_cfg *c, const char *attn, int64_t i) {
  int64_t swa = 0, s[4], h = c->hidden;
  int64_t q, k, v;
  const char *layout = NULL;
  int fused = 0;
  TPXP_CHK(list_int(host, ctx, "hybrid_layer_pattern", i, 0, &swa));
  TPXP_CHK(mimo_sizes(host, ctx, c, swa == 1, s));
  if (c->a->mimo_fused) {
    TPXP_CHK(tpxp_cfg_str_opt(host, ctx, "attention_projection_layout", "split",
                              &layout));
    if (strcmp(layout, "fused_qkv") != 0 && strcmp(layout, "split") != 0)
      return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                       "automodel_moe: %s: unsupported "
                       "attention_projection_layout '%s' (split or "
                       "fused_qkv)",
                       c->a->bare, layout);
    fused = strcmp(layout, "fused_qkv") == 0;
  }
  q = s[0] * s[2];
  k = s[1] * s[2];
  v = s[1] * s[3];
  {
    const tpxp_sk_row rows[] = {
        TPXP_SK_MOD("", "other"),
        TPXP_SK_WHEN(fused),
        TPXP_SK_LIN("qkv_proj", h, q + k + v, c->attn_bias),
        TPXP_SK_WHEN(!fused),
        TPXP_SK_LIN("q_proj", h, q, c->attn_bias),
        TPXP_SK_WHEN(!fused),
        TPXP_SK_LIN("k_proj", h, k, c->attn_bias),
        TPXP_SK_WHEN(!fused),
        TPXP_SK_LIN("v_proj", h, v, c->attn_bias),
        TPXP_SK_LIN("o_proj", s[0] * s[3], h, 0),
    };
    return TPXP_SK_ROWS(host, ctx, attn, rows, NULL);
  }
}
