/* am_step_vit.c — Step-3.7's perception-encoder vision tower
 * (model.vision_model, vision_config as StepRoboticsVisionEncoderConfig
 * reads it: width, layers, heads, patch_size, image_size, num_channels,
 * mlp_ratio, use_cls_token / ues_cls_token, use_ln_pre, use_ln_post,
 * use_abs_posemb) and model.vit_large_projector [H, 4 width]
 * (projector_bias), as NeMo Automodel 0.7.0 builds them: a bias-free
 * Conv2d patch embedding conv1, the optional class embedding and absolute
 * position table [cls + (image / patch)^2, width], ln_pre / ln_post,
 * transformer.resblocks.N (attn.in_proj_weight [3w, w] and in_proj_bias,
 * attn.out_proj, ln_1 / ln_2, mlp.c_fc / c_proj of int(width x
 * mlp_ratio), layer scales ls_1 / ls_2), and two strided 3x3 downsampling
 * convolutions to 2w and 4w. */
#include "am.h"

typedef struct step_vit {
  int64_t w, n, patch, image, chans, inter;
  int cls, ln_pre, ln_post, abs_pos;
} step_vit;

static int read_vit(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    step_vit *v) {
  double ratio = 8960.0 / 1536.0;
  int ues = 0;
  const tpxp_key keys[] = {
      TPXP_KEY_Z("width", &v->w, 1536),
      TPXP_KEY_I("layers", &v->n, 47),
      TPXP_KEY_Z("patch_size", &v->patch, 14),
      TPXP_KEY_Z("image_size", &v->image, 728),
      TPXP_KEY_Z("num_channels", &v->chans, 3),
      TPXP_KEY_F("mlp_ratio", &ratio, 8960.0 / 1536.0),
      TPXP_KEY_B("ues_cls_token", &ues, 0),
      TPXP_KEY_B("use_ln_pre", &v->ln_pre, 1),
      TPXP_KEY_B("use_ln_post", &v->ln_post, 0),
      TPXP_KEY_B("use_abs_posemb", &v->abs_pos, 1),
  };
  TPXP_CHK(TPXP_CFG_READ(host, ctx, "vision_config", keys));
  TPXP_CHK(tpxp_cfg_bool_opt(host, ctx, "vision_config.use_cls_token", ues,
                             &v->cls));
  v->inter = (int64_t)((double)v->w * ratio);
  if (v->n < 0 || v->inter <= 0 || v->image < v->patch)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "automodel_moe: Step3p7ForConditionalGeneration: "
                     "vision_config needs layers >= 0, a positive mlp_ratio "
                     "and image_size >= patch_size");
  return TPX_PLUGIN_OK;
}

static int resblock(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    const char *blk, const step_vit *v) {
  const int64_t w = v->w;
  const tpxp_sk_row rows[] = {
      TPXP_SK_MOD("", "container"),
      TPXP_SK_MOD("attn", "other"),
      TPXP_SK_PRM("attn", "in_proj_weight", 3 * w, w),
      TPXP_SK_PRM("attn", "in_proj_bias", 3 * w, -1),
      TPXP_SK_LIN("attn.out_proj", w, w, 1),
      TPXP_SK_NRM("ln_1", w, 1),
      TPXP_SK_NRM("ln_2", w, 1),
      TPXP_SK_MOD("mlp", "other"),
      TPXP_SK_LIN("mlp.c_fc", w, v->inter, 1),
      TPXP_SK_LIN("mlp.c_proj", v->inter, w, 1),
      TPXP_SK_MOD("ls_1", "other"),
      TPXP_SK_PRM("ls_1", "gamma", w, -1),
      TPXP_SK_MOD("ls_2", "other"),
      TPXP_SK_PRM("ls_2", "gamma", w, -1),
  };
  return TPXP_SK_ROWS(host, ctx, blk, rows, NULL);
}

int am_sk_step_vision(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                      int64_t text_hidden) {
  step_vit v;
  char f[TPXP_FQN_MAX];
  int64_t i, grid;
  int pb = 0;
  TPXP_CHK(read_vit(host, ctx, &v));
  TPXP_CHK(tpxp_cfg_bool_opt(host, ctx, "projector_bias", 0, &pb));
  grid = v.image / v.patch;
  {
    const int64_t conv[4] = {v.w, v.chans, v.patch, v.patch};
    const tpxp_sk_row rows[] = {
        TPXP_SK_MOD("", "other"),
        TPXP_SK_WHEN(v.cls),
        TPXP_SK_PRM("", "class_embedding", v.w, -1),
        TPXP_SK_WHEN(v.abs_pos),
        TPXP_SK_PRM("", "positional_embedding", (v.cls ? 1 : 0) + grid * grid,
                    v.w),
        TPXP_SK_MOD("conv1", "other"),
        TPXP_SK_PRM_ND("conv1", "weight", 4, conv),
        TPXP_SK_WHEN(v.ln_pre),
        TPXP_SK_NRM("ln_pre", v.w, 1),
        TPXP_SK_WHEN(v.ln_post),
        TPXP_SK_NRM("ln_post", v.w, 1),
        TPXP_SK_MOD("transformer", "other"),
        TPXP_SK_MOD("transformer.resblocks", "container"),
    };
    TPXP_CHK(TPXP_SK_ROWS(host, ctx, "model.vision_model", rows, NULL));
  }
  for (i = 0; i < v.n; i++) {
    tpxp_fmt(f, sizeof f, "model.vision_model.transformer.resblocks.%lld",
             (long long)i);
    TPXP_CHK(resblock(host, ctx, f, &v));
  }
  {
    const int64_t d1[4] = {2 * v.w, v.w, 3, 3},
                  d2[4] = {4 * v.w, 2 * v.w, 3, 3};
    const tpxp_sk_row rows[] = {
        TPXP_SK_MOD("vision_model.vit_downsampler1", "other"),
        TPXP_SK_PRM_ND("vision_model.vit_downsampler1", "weight", 4, d1),
        TPXP_SK_PRM("vision_model.vit_downsampler1", "bias", 2 * v.w, -1),
        TPXP_SK_MOD("vision_model.vit_downsampler2", "other"),
        TPXP_SK_PRM_ND("vision_model.vit_downsampler2", "weight", 4, d2),
        TPXP_SK_PRM("vision_model.vit_downsampler2", "bias", 4 * v.w, -1),
        TPXP_SK_LIN("vit_large_projector", 4 * v.w, text_hidden, pb),
    };
    return TPXP_SK_ROWS(host, ctx, "model", rows, NULL);
  }
}
