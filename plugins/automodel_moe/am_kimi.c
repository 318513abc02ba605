/* am_kimi.c — Kimi K2.5 (KimiK25VLForConditionalGeneration, Automodel's own
 * KimiK25VLConfig, model type kimi_k25) around its DeepSeek-V3 text
 * decoder: the MoonViT vision tower at model.vision_tower (a patch
 * embedding, a learned 2-D position table, pre-norm blocks with a fused
 * wqkv, a final LayerNorm) and the patch-merger projector at
 * model.multi_modal_projector, all with biases, sized from vision_config
 * and mm_hidden_size. Not the text decoder (am_skeleton.c). */
#include "am.h"

typedef struct kimi_vit {
  int64_t hidden, inter, layers, patch, pos_h, pos_w, chans, merge, mm;
} kimi_vit;

static int read_vit(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    kimi_vit *v) {
  int64_t k0 = 2, k1 = 2;
  const tpxp_key keys[] = {
      TPXP_KEY_Z("hidden_size", &v->hidden, 1152),
      TPXP_KEY_Z("intermediate_size", &v->inter, 4304),
      TPXP_KEY_I("num_hidden_layers", &v->layers, 27),
      TPXP_KEY_Z("patch_size", &v->patch, 14),
      TPXP_KEY_Z("init_pos_emb_height", &v->pos_h, 64),
      TPXP_KEY_Z("init_pos_emb_width", &v->pos_w, 64),
      TPXP_KEY_Z("num_channels", &v->chans, 3),
      TPXP_KEY_Z("merge_kernel_size[0]", &k0, 2),
      TPXP_KEY_Z("merge_kernel_size[1]", &k1, 2),
  };
  TPXP_CHK(TPXP_CFG_READ(host, ctx, "vision_config", keys));
  TPXP_CHK(tpxp_cfg_int_opt(host, ctx, "mm_hidden_size", v->hidden, &v->mm));
  if (v->layers < 0 || v->mm <= 0)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "automodel_moe: KimiK25VLForConditionalGeneration: "
                     "vision_config.num_hidden_layers must be >= 0 and "
                     "mm_hidden_size positive");
  v->merge = k0 * k1;
  return TPX_PLUGIN_OK;
}

/* One MoonViT block at `blk`. */
static int vit_block(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const char *blk, const kimi_vit *v) {
  const tpxp_sk_row rows[] = {
      TPXP_SK_MOD("", "container"),
      TPXP_SK_NRM("norm0", v->hidden, 1),
      TPXP_SK_NRM("norm1", v->hidden, 1),
      TPXP_SK_MOD("mlp", "other"),
      TPXP_SK_LIN("mlp.fc0", v->hidden, v->inter, 1),
      TPXP_SK_LIN("mlp.fc1", v->inter, v->hidden, 1),
      TPXP_SK_LIN("wqkv", v->hidden, 3 * v->hidden, 1),
      TPXP_SK_LIN("wo", v->hidden, v->hidden, 1),
  };
  return TPXP_SK_ROWS(host, ctx, blk, rows, NULL);
}

int am_sk_kimi_vision(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                      const am_cfg *c) {
  kimi_vit v;
  char f[TPXP_FQN_MAX];
  int64_t i;
  TPXP_CHK(read_vit(host, ctx, &v));
  {
    const int64_t conv[4] = {v.hidden, v.chans, v.patch, v.patch};
    const int64_t pos[3] = {v.pos_h, v.pos_w, v.hidden};
    const tpxp_sk_row rows[] = {
        TPXP_SK_MOD("", "other"),
        TPXP_SK_MOD("patch_embed", "other"),
        TPXP_SK_MOD("patch_embed.proj", "other"),
        TPXP_SK_PRM_ND("patch_embed.proj", "weight", 4, conv),
        TPXP_SK_PRM("patch_embed.proj", "bias", v.hidden, -1),
        TPXP_SK_MOD("patch_embed.pos_emb", "other"),
        TPXP_SK_PRM_ND("patch_embed.pos_emb", "weight", 3, pos),
        TPXP_SK_MOD("encoder", "other"),
        TPXP_SK_MOD("encoder.blocks", "container"),
    };
    TPXP_CHK(TPXP_SK_ROWS(host, ctx, "model.vision_tower", rows, NULL));
  }
  for (i = 0; i < v.layers; i++) {
    tpxp_fmt(f, sizeof f, "model.vision_tower.encoder.blocks.%lld",
             (long long)i);
    TPXP_CHK(vit_block(host, ctx, f, &v));
  }
  {
    const int64_t in = v.mm * v.merge;
    const tpxp_sk_row rows[] = {
        TPXP_SK_NRM("vision_tower.encoder.final_layernorm", v.hidden, 1),
        TPXP_SK_MOD("multi_modal_projector", "other"),
        TPXP_SK_NRM("multi_modal_projector.pre_norm", v.mm, 1),
        TPXP_SK_LIN("multi_modal_projector.linear_1", in, in, 1),
        TPXP_SK_LIN("multi_modal_projector.linear_2", in, c->hidden, 1),
        TPXP_SK_MOD("language_model", "other"),
    };
    return TPXP_SK_ROWS(host, ctx, "model", rows, NULL);
  }
}
