/* am_minimax3.c — MiniMax-M3 (MiniMaxM3SparseForConditionalGeneration,
 * Automodel's own MiniMaxM3VLConfig, model type minimax_m3_vl) as NeMo
 * Automodel 0.7.0 builds it: the text decoder read from text_config
 * (model.layers.N: GQA with per-head q/k norms, on the sparse-attention
 * layers a lightning indexer under self_attn.indexer; moe_layer_freq[i]
 * picks a dense MLP of dense_intermediate_size or the routed experts with a
 * float32 router and, beside them at the layer, shared_experts of
 * n_shared_experts x shared_intermediate_size), its MTP blocks
 * (model.mtp.layers.N: enorm, hnorm, eh_proj, a transformer_layer built as
 * the last decoder layer, final_layernorm) and the vision tower
 * (vision_tower.vision_model: a Conv3d patch embedding, pre_layrnorm,
 * CLIP-style encoder layers with biases; multi_modal_projector and
 * patch_merge_mlp beside it). Absent keys take the config classes'
 * defaults. Refused as upstream refuses them: attention_output_gate,
 * qk_norm_type other than per_head, an indexer with index value
 * projections. Not: the MSA sparse-attention backend (a run-time choice
 * with no parameters of its own). */
#include <string.h>

#include "am.h"

#define M3 "MiniMaxM3SparseForConditionalGeneration"
#define T "text_config."
#define SA T "sparse_attention_config"

typedef struct m3_text {
  int64_t dense_inter, shared_inter, mtp, idx_heads, idx_dim;
  int sparse_attn; /* sparse_attention_config present and enabled */
} m3_text;

static int refuse(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                  const char *why) {
  return tpxp_fail(host, ctx, TPX_PLUGIN_REFUSED,
                   "automodel_moe: " M3 ": %s (Automodel 0.7.0's class "
                   "asserts it at construction)",
                   why);
}

static int read_text(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const am_cfg *c, m3_text *t) {
  int64_t n_shared = 1, shared = 3072;
  int gate = 0, on = 1;
  const char *norm = NULL;
  const tpxp_key keys[] = {
      TPXP_KEY_Z("dense_intermediate_size", &t->dense_inter, 12288),
      TPXP_KEY_I("n_shared_experts", &n_shared, 1),
      TPXP_KEY_Z("shared_intermediate_size", &shared, 3072),
      TPXP_KEY_I("num_mtp_modules", &t->mtp, 1),
      TPXP_KEY_B("attention_output_gate", &gate, 0),
  };
  memset(t, 0, sizeof *t);
  TPXP_CHK(TPXP_CFG_READ(host, ctx, "text_config", keys));
  TPXP_CHK(tpxp_cfg_str_opt(host, ctx, T "qk_norm_type", "per_head", &norm));
  if (host->config_has(ctx, SA))
    TPXP_CHK(tpxp_cfg_bool_opt(host, ctx, SA ".use_sparse_attention", 1, &on));
  t->sparse_attn = host->config_has(ctx, SA) && on;
  if (gate)
    return refuse(host, ctx, "attention_output_gate is not implemented");
  if ((c->qk_norm || t->sparse_attn) && strcmp(norm, "per_head") != 0)
    return refuse(host, ctx, "only qk_norm_type='per_head' is supported");
  t->shared_inter = n_shared > 0 ? n_shared * shared : 0;
  if (t->mtp < 0)
    t->mtp = 0;
  if (t->sparse_attn) {
    TPXP_CHK(tpxp_cfg_int_req(host, ctx, SA ".sparse_num_index_heads",
                              &t->idx_heads));
    TPXP_CHK(tpxp_cfg_int_req(host, ctx, SA ".sparse_index_dim", &t->idx_dim));
  }
  return TPX_PLUGIN_OK;
}

/* Integer entry i of the list at `key`, `dflt` when the list is absent. */
static int list_at(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                   const char *key, int64_t i, int64_t dflt, int64_t *out) {
  char p[TPXP_FQN_MAX];
  *out = dflt;
  if (!host->config_has(ctx, key))
    return TPX_PLUGIN_OK;
  tpxp_fmt(p, sizeof p, "%s[%lld]", key, (long long)i);
  return tpxp_cfg_int_req(host, ctx, p, out);
}

/* Decoder block i (layer index `i`, at FQN `blk`). */
static int m3_block(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    const am_cfg *c, const m3_text *t, const char *blk,
                    int64_t i) {
  int64_t moe = 1, sparse = 0, disable = 1, h = c->hidden;
  int64_t q = c->heads * c->head_dim, kv = c->kv_heads * c->head_dim;
  int64_t iq = t->idx_heads * t->idx_dim;
  TPXP_CHK(list_at(host, ctx, T "moe_layer_freq", i, 1, &moe));
  if (t->sparse_attn)
    TPXP_CHK(list_at(host, ctx, SA ".sparse_attention_freq", i, 1, &sparse));
  if (sparse)
    TPXP_CHK(
        list_at(host, ctx, SA ".sparse_disable_index_value", i, 1, &disable));
  if (sparse && !disable)
    return refuse(host, ctx,
                  "a sparse layer with disable_index_value=0 (index value / "
                  "output projections) is not supported");
  {
    const tpxp_sk_row rows[] = {
        TPXP_SK_MOD("", "container"),
        TPXP_SK_MOD("self_attn", "other"),
        TPXP_SK_LIN("self_attn.q_proj", h, q, 0),
        TPXP_SK_LIN("self_attn.k_proj", h, kv, 0),
        TPXP_SK_LIN("self_attn.v_proj", h, kv, 0),
        TPXP_SK_LIN("self_attn.o_proj", q, h, 0),
        TPXP_SK_WHEN(c->qk_norm),
        TPXP_SK_NRM("self_attn.q_norm", c->head_dim, 0),
        TPXP_SK_WHEN(c->qk_norm),
        TPXP_SK_NRM("self_attn.k_norm", c->head_dim, 0),
        TPXP_SK_WHEN(sparse),
        TPXP_SK_MOD("self_attn.indexer", "other"),
        TPXP_SK_WHEN(sparse),
        TPXP_SK_LIN("self_attn.indexer.index_q_proj", h, iq, 0),
        TPXP_SK_WHEN(sparse),
        TPXP_SK_LIN("self_attn.indexer.index_k_proj", h, t->idx_dim, 0),
        TPXP_SK_WHEN(sparse),
        TPXP_SK_NRM("self_attn.indexer.index_q_norm", t->idx_dim, 0),
        TPXP_SK_WHEN(sparse),
        TPXP_SK_NRM("self_attn.indexer.index_k_norm", t->idx_dim, 0),
    };
    TPXP_CHK(TPXP_SK_ROWS(host, ctx, blk, rows, NULL));
  }
  if (moe) {
    TPXP_CHK(am_sk_moe(host, ctx, c, blk));
  } else {
    const tpxp_sk_row rows[] = {
        TPXP_SK_MOD("mlp", "other"),
        TPXP_SK_LIN("mlp.gate_proj", h, t->dense_inter, 0),
        TPXP_SK_LIN("mlp.up_proj", h, t->dense_inter, 0),
        TPXP_SK_LIN("mlp.down_proj", t->dense_inter, h, 0),
    };
    TPXP_CHK(TPXP_SK_ROWS(host, ctx, blk, rows, NULL));
  }
  {
    const int64_t si = moe ? t->shared_inter : 0;
    const tpxp_sk_row rows[] = {
        TPXP_SK_WHEN(si > 0),
        TPXP_SK_MOD("shared_experts", "other"),
        TPXP_SK_WHEN(si > 0),
        TPXP_SK_LIN("shared_experts.gate_proj", h, si, 0),
        TPXP_SK_WHEN(si > 0),
        TPXP_SK_LIN("shared_experts.up_proj", h, si, 0),
        TPXP_SK_WHEN(si > 0),
        TPXP_SK_LIN("shared_experts.down_proj", si, h, 0),
        TPXP_SK_NRM("input_layernorm", h, 0),
        TPXP_SK_NRM("post_attention_layernorm", h, 0),
    };
    return TPXP_SK_ROWS(host, ctx, blk, rows, NULL);
  }
}

static int m3_layer(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    const char *layer, int64_t i, const void *user) {
  const void *const *u = user;
  return m3_block(host, ctx, u[0], u[1], layer, i);
}

/* The MTP blocks, each around the last decoder layer's block. */
static int m3_mtp(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                  const am_cfg *c, const m3_text *t) {
  char f[TPXP_FQN_MAX];
  int64_t j, h = c->hidden;
  if (t->mtp == 0)
    return TPX_PLUGIN_OK;
  {
    const tpxp_sk_row rows[] = {
        TPXP_SK_MOD("model.mtp", "other"),
        TPXP_SK_MOD("model.mtp.layers", "container"),
    };
    TPXP_CHK(TPXP_SK_ROWS(host, ctx, "", rows, NULL));
  }
  for (j = 0; j < t->mtp; j++) {
    const tpxp_sk_row rows[] = {
        TPXP_SK_MOD("", "container"),
        TPXP_SK_NRM("enorm", h, 0),
        TPXP_SK_NRM("hnorm", h, 0),
        TPXP_SK_LIN("eh_proj", 2 * h, h, 0),
    };
    tpxp_fmt(f, sizeof f, "model.mtp.layers.%lld", (long long)j);
    TPXP_CHK(TPXP_SK_ROWS(host, ctx, f, rows, NULL));
    tpxp_fmt(f, sizeof f, "model.mtp.layers.%lld.transformer_layer",
             (long long)j);
    TPXP_CHK(m3_block(host, ctx, c, t, f, c->layers - 1));
    tpxp_fmt(f, sizeof f, "model.mtp.layers.%lld.final_layernorm",
             (long long)j);
    TPXP_CHK(tpxp_sk_rows(host, ctx, f, &(tpxp_sk_row)TPXP_SK_NRM("", h, 0), 1,
                          NULL));
  }
  return TPX_PLUGIN_OK;
}

/* One CLIP-style encoder layer of the vision tower at `lyr`. */
static int vit_layer(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const char *lyr, int64_t hv, int64_t inter) {
  const tpxp_sk_row rows[] = {
      TPXP_SK_MOD("", "container"),
      TPXP_SK_NRM("layer_norm1", hv, 1),
      TPXP_SK_MOD("self_attn", "other"),
      TPXP_SK_LIN("self_attn.q_proj", hv, hv, 1),
      TPXP_SK_LIN("self_attn.k_proj", hv, hv, 1),
      TPXP_SK_LIN("self_attn.v_proj", hv, hv, 1),
      TPXP_SK_LIN("self_attn.out_proj", hv, hv, 1),
      TPXP_SK_NRM("layer_norm2", hv, 1),
      TPXP_SK_MOD("mlp", "other"),
      TPXP_SK_LIN("mlp.fc1", hv, inter, 1),
      TPXP_SK_LIN("mlp.fc2", inter, hv, 1),
  };
  return TPXP_SK_ROWS(host, ctx, lyr, rows, NULL);
}

/* vision_tower: vision_model (sized from vision_config), the projector
 * (projector_hidden_size, multimodal_projector_bias) and the patch merger
 * (spatial_merge_size^2 text-width tokens in; patch_merge_bias, else the
 * projector's bias). */
static int m3_vision(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const am_cfg *c) {
  int64_t hv, inter, n, patch, chans, tps = 2, sms = 2, ph, i;
  int pb = 1, mb = 1;
  char f[TPXP_FQN_MAX];
  const tpxp_key keys[] = {
      TPXP_KEY_Z("hidden_size", &hv, 1280),
      TPXP_KEY_Z("intermediate_size", &inter, 5120),
      TPXP_KEY_I("num_hidden_layers", &n, 32),
      TPXP_KEY_Z("patch_size", &patch, 14),
      TPXP_KEY_Z("num_channels", &chans, 3),
      TPXP_KEY_Z("img_token_compression_config.temporal_patch_size", &tps, 2),
      TPXP_KEY_Z("img_token_compression_config.spatial_merge_size", &sms, 2),
  };
  TPXP_CHK(TPXP_CFG_READ(host, ctx, "vision_config", keys));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "projector_hidden_size", 6144, &ph));
  TPXP_CHK(tpxp_cfg_bool_opt(host, ctx, "multimodal_projector_bias", 1, &pb));
  TPXP_CHK(tpxp_cfg_bool_opt(host, ctx, "patch_merge_bias", pb, &mb));
  if (n < 0 || ph <= 0)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "automodel_moe: " M3 ": vision_config.num_hidden_layers "
                     "must be >= 0 and projector_hidden_size positive");
  {
    const int64_t conv[5] = {hv, chans, tps, patch, patch};
    const tpxp_sk_row rows[] = {
        TPXP_SK_MOD("", "other"),
        TPXP_SK_MOD("vision_model", "other"),
        TPXP_SK_MOD("vision_model.embeddings", "other"),
        TPXP_SK_MOD("vision_model.embeddings.patch_embedding", "other"),
        TPXP_SK_PRM_ND("vision_model.embeddings.patch_embedding", "weight", 5,
                       conv),
        TPXP_SK_NRM("vision_model.pre_layrnorm", hv, 1),
        TPXP_SK_MOD("vision_model.encoder", "other"),
        TPXP_SK_MOD("vision_model.encoder.layers", "container"),
    };
    TPXP_CHK(TPXP_SK_ROWS(host, ctx, "vision_tower", rows, NULL));
  }
  for (i = 0; i < n; i++) {
    tpxp_fmt(f, sizeof f, "vision_tower.vision_model.encoder.layers.%lld",
             (long long)i);
    TPXP_CHK(vit_layer(host, ctx, f, hv, inter));
  }
  {
    const int64_t h = c->hidden;
    const tpxp_sk_row rows[] = {
        TPXP_SK_MOD("multi_modal_projector", "other"),
        TPXP_SK_LIN("multi_modal_projector.linear_1", hv, ph, pb),
        TPXP_SK_LIN("multi_modal_projector.linear_2", ph, h, pb),
        TPXP_SK_MOD("patch_merge_mlp", "other"),
        TPXP_SK_LIN("patch_merge_mlp.linear_1", h * sms * sms, ph, mb),
        TPXP_SK_LIN("patch_merge_mlp.linear_2", ph, h, mb),
    };
    return TPXP_SK_ROWS(host, ctx, "vision_tower", rows, NULL);
  }
}

int am_sk_minimax3(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                   const am_cfg *c) {
  m3_text t;
  const void *user[2] = {c, &t};
  TPXP_CHK(read_text(host, ctx, c, &t));
  if (c->layers < 1 && t.mtp > 0)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "automodel_moe: " M3 ": MTP blocks need "
                     "num_hidden_layers >= 1");
  TPXP_CHK(
      am_sk_text_stack(host, ctx, c, "model", "lm_head", m3_layer, user, 0));
  TPXP_CHK(m3_mtp(host, ctx, c, &t));
  return m3_vision(host, ctx, c);
}
