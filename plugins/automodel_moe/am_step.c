/* am_step.c — Step-3.7 (Step3p7ForConditionalGeneration; Step3p6 maps to the
 * same class; Automodel's own Step3p7Config, model type step3p7) as NeMo
 * Automodel 0.7.0 builds it: the Step-3.5 text decoder from text_config
 * under model.language_model (GQA with per-head q/k norms, attention_bias
 * on all four projections, g_proj [heads, H] with use_head_wise_attn_gate;
 * a "sliding_attention" layer takes attention_other_setting's head and group
 * counts; moe_layers_enum says which layers are MoE: router moe.gate,
 * grouped experts moe.experts, share_expert of share_expert_dim(s), else a
 * dense mlp), the MTP blocks at the root (mtp.layers.N, num_nextn_predict_
 * layers: a dense block of mtp_layer_types' kind, enorm, hnorm, eh_proj,
 * transformer.shared_head), the perception-encoder vision tower
 * (model.vision_model) and model.vit_large_projector. Absent keys take the
 * config classes' defaults. The checkpoint's names: the decoder under
 * "model.", the MTP blocks as layers num_hidden_layers.. (sources), the
 * experts as three [E, ...] tensors (sources), the router bias
 * moe.router_bias. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "am.h"

#define T "text_config."

typedef struct step_cfg {
  int64_t kv, swa_heads, swa_kv, share, mtp, base, nlt;
  int attn_bias, g_proj, swa_set;
} step_cfg;

static int has_sources(const tpx_plugin_host *host) {
  return host->struct_size > offsetof(tpx_plugin_host, skeleton_add_source) &&
         host->skeleton_add_source != NULL;
}

static int read_step(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const am_cfg *c, step_cfg *s) {
  int64_t dims = -1, dim = 1280;
  memset(s, 0, sizeof *s);
  {
    const tpxp_key keys[] = {
        TPXP_KEY_Z("num_attention_groups", &s->kv, 8),
        TPXP_KEY_I("share_expert_dims", &dims, -1),
        TPXP_KEY_Z("share_expert_dim", &dim, 1280),
        TPXP_KEY_I("num_nextn_predict_layers", &s->mtp, 0),
        TPXP_KEY_I("mtp_base_layer_idx", &s->base, c->layers),
        TPXP_KEY_B("attention_bias", &s->attn_bias, 0),
        TPXP_KEY_B("use_head_wise_attn_gate", &s->g_proj, 0),
    };
    TPXP_CHK(TPXP_CFG_READ(host, ctx, "text_config", keys));
  }
  s->share = dims > 0 ? dims : dim;
  s->swa_set = host->config_has(ctx, T "attention_other_setting");
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx,
                            T "attention_other_setting.num_attention_heads",
                            c->heads, &s->swa_heads));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx,
                            T "attention_other_setting.num_attention_groups",
                            s->kv, &s->swa_kv));
  if (host->config_get_length(ctx, T "layer_types", &s->nlt) != TPX_PLUGIN_OK)
    s->nlt = 0;
  if (s->mtp < 0)
    s->mtp = 0;
  return TPX_PLUGIN_OK;
}

/* Entry i of the string list at `key`, the last one past its end (the
 * config's per-layer normalization); NULL when absent or empty. */
static int list_last(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const char *key, int64_t i, const char **out) {
  int64_t n = 0;
  char p[TPXP_FQN_MAX];
  *out = NULL;
  if (host->config_get_length(ctx, key, &n) != TPX_PLUGIN_OK || n <= 0)
    return TPX_PLUGIN_OK;
  tpxp_fmt(p, sizeof p, "%s[%lld]", key, (long long)(i < n ? i : n - 1));
  return tpxp_cfg_str_opt(host, ctx, p, NULL, out);
}

/* Is decoder layer i MoE (moe_layers_enum: a list, an integer, a comma
 * list; absent: every layer but 0... as the config class's default, 3..44). */
static int step_moe(const tpx_plugin_host *host, tpx_plugin_ctx *ctx, int64_t i,
                    int *moe) {
  int64_t n = 0, v = 0, j;
  const char *s = NULL;
  char p[TPXP_FQN_MAX];
  *moe = 0;
  if (!host->config_has(ctx, T "moe_layers_enum")) {
    *moe = i >= 3 && i <= 44;
    return TPX_PLUGIN_OK;
  }
  if (host->config_get_length(ctx, T "moe_layers_enum", &n) == TPX_PLUGIN_OK) {
    for (j = 0; j < n; j++) {
      tpxp_fmt(p, sizeof p, T "moe_layers_enum[%lld]", (long long)j);
      TPXP_CHK(tpxp_cfg_int_req(host, ctx, p, &v));
      *moe |= v == i;
    }
    return TPX_PLUGIN_OK;
  }
  if (tpxp_cfg_str_opt(host, ctx, T "moe_layers_enum", NULL, &s) ==
          TPX_PLUGIN_OK &&
      s != NULL) {
    for (const char *q = s; *q;) {
      char *end = NULL;
      long long x = strtoll(q, &end, 10);
      if (end == q)
        break;
      *moe |= x == i;
      q = *end == ',' ? end + 1 : end;
    }
    return TPX_PLUGIN_OK;
  }
  TPXP_CHK(tpxp_cfg_int_req(host, ctx, T "moe_layers_enum", &v));
  *moe = v == i;
  return TPX_PLUGIN_OK;
}

/* One Step-3.5 block at `blk`: attention of `type`, then a dense mlp or
 * the MoE (moe + share_expert). */
static int step_block(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                      const am_cfg *c, const step_cfg *s, const char *blk,
                      const char *type, int moe) {
  int sliding = type != NULL && strcmp(type, "sliding_attention") == 0;
  int64_t h = c->hidden, heads = sliding ? s->swa_heads : c->heads;
  int64_t q = heads * c->head_dim;
  int64_t kv = (sliding ? s->swa_kv : s->kv) * c->head_dim;
  int64_t E = c->experts, I = c->moe_inter, d = moe ? s->share : c->inter;
  const int64_t gu[3] = {E, h, 2 * I}, dn[3] = {E, I, h};
  const char *m = moe ? "share_expert" : "mlp";
  int b = s->attn_bias;
  if (sliding && !s->swa_set)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "automodel_moe: %s: a sliding_attention layer needs "
                     "text_config.attention_other_setting",
                     c->a->bare);
  {
    const tpxp_sk_row rows[] = {
        TPXP_SK_MOD("", "container"),
        TPXP_SK_MOD("self_attn", "other"),
        TPXP_SK_LIN("self_attn.q_proj", h, q, b),
        TPXP_SK_LIN("self_attn.k_proj", h, kv, b),
        TPXP_SK_LIN("self_attn.v_proj", h, kv, b),
        TPXP_SK_LIN("self_attn.o_proj", q, h, b),
        TPXP_SK_NRM("self_attn.q_norm", c->head_dim, 0),
        TPXP_SK_NRM("self_attn.k_norm", c->head_dim, 0),
        TPXP_SK_WHEN(s->g_proj),
        TPXP_SK_LIN("self_attn.g_proj", h, heads, 0),
        TPXP_SK_WHEN(moe),
        TPXP_SK_MOD("moe", "other"),
        TPXP_SK_WHEN(moe),
        TPXP_SK_MOD("moe.gate", "other"),
        TPXP_SK_WHEN(moe),
        TPXP_SK_PRM("moe.gate", "weight", E, h),
        TPXP_SK_WHEN(moe),
        TPXP_SK_MOD("moe.experts", "other"),
        TPXP_SK_WHEN(moe),
        TPXP_SK_PRM_ND("moe.experts", "gate_and_up_projs", 3, gu),
        TPXP_SK_WHEN(moe),
        TPXP_SK_PRM_ND("moe.experts", "down_projs", 3, dn),
        TPXP_SK_MOD(m, "other"),
        TPXP_SK_NRM("input_layernorm", h, 0),
        TPXP_SK_NRM("post_attention_layernorm", h, 0),
    };
    TPXP_CHK(TPXP_SK_ROWS(host, ctx, blk, rows, NULL));
  }
  {
    char f[TPXP_FQN_MAX];
    const tpxp_sk_row rows[] = {
        TPXP_SK_LIN("gate_proj", h, d, 0),
        TPXP_SK_LIN("up_proj", h, d, 0),
        TPXP_SK_LIN("down_proj", d, h, 0),
    };
    tpxp_fmt(f, sizeof f, "%s.%s", blk, m);
    return TPXP_SK_ROWS(host, ctx, f, rows, NULL);
  }
}

/* The experts of decoder layer i, read from the checkpoint's three
 * [E, ...] tensors "model.layers.<i>.moe.{gate,up,down}_proj.weight" (each
 * the transpose of its box). */
static int step_sources(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                        const am_cfg *c, const char *blk, int64_t i) {
  char p[TPXP_FQN_MAX], src[TPXP_FQN_MAX];
  const int64_t E = c->experts, I = c->moe_inter, h = c->hidden;
  const int64_t g0[3] = {0, 0, 0}, u0[3] = {0, 0, I}, len[3] = {E, h, I};
  const int64_t dlen[3] = {E, I, h};
  if (!has_sources(host))
    return TPX_PLUGIN_OK;
  tpxp_fmt(p, sizeof p, "%s.moe.experts.gate_and_up_projs", blk);
  tpxp_fmt(src, sizeof src, "model.layers.%lld.moe.gate_proj.weight",
           (long long)i);
  TPXP_CHK(host->skeleton_add_source(ctx, p, src, g0, len, 3, 1));
  tpxp_fmt(src, sizeof src, "model.layers.%lld.moe.up_proj.weight",
           (long long)i);
  TPXP_CHK(host->skeleton_add_source(ctx, p, src, u0, len, 3, 1));
  tpxp_fmt(p, sizeof p, "%s.moe.experts.down_projs", blk);
  tpxp_fmt(src, sizeof src, "model.layers.%lld.moe.down_proj.weight",
           (long long)i);
  return host->skeleton_add_source(ctx, p, src, g0, dlen, 3, 1);
}

static int step_layer(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                      const char *layer, int64_t i, const void *user) {
  const void *const *u = user;
  const am_cfg *c = u[0];
  const char *type = NULL;
  int moe = 0;
  TPXP_CHK(list_last(host, ctx, T "layer_types", i, &type));
  TPXP_CHK(step_moe(host, ctx, i, &moe));
  TPXP_CHK(step_block(host, ctx, c, u[1], layer, type, moe));
  return moe ? step_sources(host, ctx, c, layer, i) : TPX_PLUGIN_OK;
}

/* The MTP block j's attention kind: mtp_layer_types[j] as stored, else the
 * config class's slice of layer_types from mtp_base_layer_idx (its last
 * entry past the end), else sliding. */
static int mtp_type(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    const step_cfg *s, int64_t j, const char **type) {
  *type = "sliding_attention";
  if (host->config_has(ctx, T "mtp_layer_types"))
    return list_last(host, ctx, T "mtp_layer_types", j, type);
  if (s->nlt > 0)
    return list_last(host, ctx, T "layer_types",
                     s->base < s->nlt ? s->base + j : s->nlt - 1, type);
  return TPX_PLUGIN_OK;
}

/* Every parameter of MTP block `blk` read whole from the checkpoint's
 * layer `idx` ("model.layers.<idx>.<the same suffix>"). */
static int mtp_sources(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                       const am_cfg *c, const step_cfg *s, const char *blk,
                       int64_t idx, const char *type) {
  int sliding = type != NULL && strcmp(type, "sliding_attention") == 0;
  const int64_t h = c->hidden, heads = sliding ? s->swa_heads : c->heads;
  const int64_t q = heads * c->head_dim, d = c->inter;
  const int64_t kv = (sliding ? s->swa_kv : s->kv) * c->head_dim;
  const int b = s->attn_bias;
  const struct {
    const char *sfx;
    int64_t d0, d1;
    int on;
  } t[] = {
      {"self_attn.q_proj.weight", q, h, 1},
      {"self_attn.q_proj.bias", q, -1, b},
      {"self_attn.k_proj.weight", kv, h, 1},
      {"self_attn.k_proj.bias", kv, -1, b},
      {"self_attn.v_proj.weight", kv, h, 1},
      {"self_attn.v_proj.bias", kv, -1, b},
      {"self_attn.o_proj.weight", h, q, 1},
      {"self_attn.o_proj.bias", h, -1, b},
      {"self_attn.q_norm.weight", c->head_dim, -1, 1},
      {"self_attn.k_norm.weight", c->head_dim, -1, 1},
      {"self_attn.g_proj.weight", heads, h, s->g_proj},
      {"mlp.gate_proj.weight", d, h, 1},
      {"mlp.up_proj.weight", d, h, 1},
      {"mlp.down_proj.weight", h, d, 1},
      {"input_layernorm.weight", h, -1, 1},
      {"post_attention_layernorm.weight", h, -1, 1},
      {"enorm.weight", h, -1, 1},
      {"hnorm.weight", h, -1, 1},
      {"eh_proj.weight", h, 2 * h, 1},
      {"transformer.shared_head.norm.weight", h, -1, 1},
      {"transformer.shared_head.output.weight", c->vocab, h, 1},
  };
  char p[TPXP_FQN_MAX], src[TPXP_FQN_MAX];
  const int64_t o[2] = {0, 0};
  size_t k;
  if (!has_sources(host))
    return TPX_PLUGIN_OK;
  for (k = 0; k < TPXP_N_OF(t); k++) {
    const int64_t len[2] = {t[k].d0, t[k].d1};
    if (!t[k].on)
      continue;
    tpxp_fmt(p, sizeof p, "%s.%s", blk, t[k].sfx);
    tpxp_fmt(src, sizeof src, "model.layers.%lld.%s", (long long)idx, t[k].sfx);
    TPXP_CHK(
        host->skeleton_add_source(ctx, p, src, o, len, t[k].d1 < 0 ? 1 : 2, 0));
  }
  return TPX_PLUGIN_OK;
}

/* One MTP block: the dense Step-3.5 block, then its own norms, eh_proj and
 * shared head; the checkpoint holds it as layer base + j. */
static int step_mtp(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    const am_cfg *c, const step_cfg *s, int64_t j) {
  char blk[TPXP_FQN_MAX];
  const char *type = NULL;
  const int64_t h = c->hidden;
  const tpxp_sk_row rows[] = {
      TPXP_SK_NRM("enorm", h, 0),
      TPXP_SK_NRM("hnorm", h, 0),
      TPXP_SK_LIN("eh_proj", 2 * h, h, 0),
      TPXP_SK_MOD("transformer", "other"),
      TPXP_SK_MOD("transformer.shared_head", "other"),
      TPXP_SK_NRM("transformer.shared_head.norm", h, 0),
      TPXP_SK_LIN("transformer.shared_head.output", h, c->vocab, 0),
  };
  TPXP_CHK(mtp_type(host, ctx, s, j, &type));
  tpxp_fmt(blk, sizeof blk, "mtp.layers.%lld", (long long)j);
  TPXP_CHK(step_block(host, ctx, c, s, blk, type, 0));
  TPXP_CHK(TPXP_SK_ROWS(host, ctx, blk, rows, NULL));
  return mtp_sources(host, ctx, c, s, blk, s->base + j, type);
}

int am_sk_step(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
               const am_cfg *c) {
  step_cfg s;
  const void *user[2] = {c, &s};
  int64_t j;
  TPXP_CHK(read_step(host, ctx, c, &s));
  TPXP_CHK(tpxp_sk_module(host, ctx, "model", "other"));
  TPXP_CHK(am_sk_step_vision(host, ctx, c->hidden));
  TPXP_CHK(am_sk_text_stack(host, ctx, c, "model.language_model", "lm_head",
                            step_layer, user, 0));
  if (s.mtp == 0)
    return TPX_PLUGIN_OK;
  TPXP_CHK(tpxp_sk_module(host, ctx, "mtp", "other"));
  TPXP_CHK(tpxp_sk_module(host, ctx, "mtp.layers", "container"));
  for (j = 0; j < s.mtp; j++) TPXP_CHK(step_mtp(host, ctx, c, &s, j));
  return TPX_PLUGIN_OK;
}
