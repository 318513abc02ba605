/* am_moe_block.c — the blocks the automodel_moe plugin's decoders share:
 * Automodel's dense MLP, the MoE block at "<layer>.mlp" (router,
 * GroupedExperts' two fused tensors with the per-expert checkpoint tensors
 * they are made of, shared experts) and the text decoder stack, used by
 * am_skeleton.c and the multimodal classes' files (one file beneath them
 * all, so none calls back up). */
#include <stddef.h>
#include <string.h>

#include "am.h"

/* ---- MLPs ---- */

/* Automodel's MLP at `fqn`: up, gate, down (its module order). */
int am_sk_mlp(const tpx_plugin_host *host, tpx_plugin_ctx *ctx, const char *fqn,
              int64_t h, int64_t inter, int bias) {
  const tpxp_sk_row rows[] = {
      TPXP_SK_MOD("", "other"),
      TPXP_SK_LIN("up_proj", h, inter, bias),
      TPXP_SK_LIN("gate_proj", h, inter, bias),
      TPXP_SK_LIN("down_proj", inter, h, bias),
  };
  return TPXP_SK_ROWS(host, ctx, fqn, rows, NULL);
}

static int has_sources(const tpx_plugin_host *host) {
  return host->struct_size > offsetof(tpx_plugin_host, skeleton_add_source) &&
         host->skeleton_add_source != NULL;
}

/* The per-expert checkpoint tensors of one MoE layer's grouped experts:
 * "<layer>.mlp.experts.<e>.{gate,up,down}_proj.weight" (MiniMax-M2:
 * "<layer>.block_sparse_moe.experts.<e>.{w1,w3,w2}.weight"), each the
 * transpose of its box. */
static int sk_sources(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                      const am_cfg *c, const char *layer) {
  const char *owner = layer;
  const int mm = c->a->minimax_names;
  const char *blk = mm ? "block_sparse_moe" : "mlp";
  const char *pre = c->a->src_prefix != NULL ? c->a->src_prefix : "";
  const char *strip = c->a->src_strip;
  if (strip != NULL && strncmp(layer, strip, strlen(strip)) == 0)
    layer += strlen(strip);
  const char *names[3];
  char gu[TPXP_FQN_MAX], dn[TPXP_FQN_MAX], src[TPXP_FQN_MAX];
  int64_t e, h = c->hidden, in = c->moe_inter;
  names[0] = mm ? "w1" : "gate_proj";
  names[1] = mm ? "w3" : "up_proj";
  names[2] = mm ? "w2" : "down_proj";
  tpxp_fmt(gu, sizeof gu, "%s.mlp.experts.gate_and_up_projs", owner);
  tpxp_fmt(dn, sizeof dn, "%s.mlp.experts.down_projs", owner);
  for (e = 0; e < c->experts; e++) {
    const int64_t g0[3] = {e, 0, 0}, u0[3] = {e, 0, in}, len[3] = {1, h, in};
    tpxp_fmt(src, sizeof src, "%s%s.%s.experts.%lld.%s.weight", pre, layer, blk,
             (long long)e, names[0]);
    TPXP_CHK(host->skeleton_add_source(ctx, gu, src, g0, len, 3, 1));
    tpxp_fmt(src, sizeof src, "%s%s.%s.experts.%lld.%s.weight", pre, layer, blk,
             (long long)e, names[1]);
    TPXP_CHK(host->skeleton_add_source(ctx, gu, src, u0, len, 3, 1));
  }
  for (e = 0; e < c->experts; e++) {
    const int64_t d0[3] = {e, 0, 0}, dlen[3] = {1, in, h};
    tpxp_fmt(src, sizeof src, "%s%s.%s.experts.%lld.%s.weight", pre, layer, blk,
             (long long)e, names[2]);
    TPXP_CHK(host->skeleton_add_source(ctx, dn, src, d0, dlen, 3, 1));
  }
  return TPX_PLUGIN_OK;
}

/* Mistral-4: each fused expert tensor is one stored tensor, transposed:
 * "<prefix><layer>.mlp.experts.gate_up_proj" [E, 2I, H] and "down_proj"
 * [E, H, I]. */
static int sk_sources_whole(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                            const am_cfg *c, const char *layer) {
  char p[TPXP_FQN_MAX], src[TPXP_FQN_MAX];
  const int64_t o[3] = {0, 0, 0};
  const int64_t gu[3] = {c->experts, c->hidden, 2 * c->moe_inter};
  const int64_t dn[3] = {c->experts, c->moe_inter, c->hidden};
  tpxp_fmt(p, sizeof p, "%s.mlp.experts.gate_and_up_projs", layer);
  tpxp_fmt(src, sizeof src, "%s%s.mlp.experts.gate_up_proj", c->a->ckpt_prefix,
           layer);
  TPXP_CHK(host->skeleton_add_source(ctx, p, src, o, gu, 3, 1));
  tpxp_fmt(p, sizeof p, "%s.mlp.experts.down_projs", layer);
  tpxp_fmt(src, sizeof src, "%s%s.mlp.experts.down_proj", c->a->ckpt_prefix,
           layer);
  return host->skeleton_add_source(ctx, p, src, o, dn, 3, 1);
}

int am_sk_moe(const tpx_plugin_host *host, tpx_plugin_ctx *ctx, const am_cfg *c,
              const char *layer) {
  char f[TPXP_FQN_MAX];
  int64_t E = c->experts, h = c->hidden, in = c->moe_inter;
  const int64_t gu[3] = {E, h, 2 * in}, dn[3] = {E, in, h};
  int eb = c->a->gpt_oss || c->use_bias;
  const tpxp_sk_row rows[] = {
      TPXP_SK_MOD("mlp", "other"),
      {.kind = TPXP_SK_MODULE, .suffix = "mlp.gate", .name = "other"},
      {.kind = TPXP_SK_PARAM,
       .suffix = "mlp.gate",
       .name = "weight",
       .a = E,
       .b = h,
       .dtype = c->a->gate_dtype},
      TPXP_SK_WHEN(c->a->gpt_oss),
      {.kind = TPXP_SK_PARAM,
       .suffix = "mlp.gate",
       .name = "bias",
       .a = E,
       .b = -1,
       .dtype = c->a->gate_dtype},
      TPXP_SK_MOD("mlp.experts", "other"),
      TPXP_SK_PRM_ND("mlp.experts", "gate_and_up_projs", 3, gu),
      TPXP_SK_PRM_ND("mlp.experts", "down_projs", 3, dn),
      TPXP_SK_WHEN(eb),
      TPXP_SK_PRM("mlp.experts", "gate_up_proj_bias", E, 2 * in),
      TPXP_SK_WHEN(eb),
      TPXP_SK_PRM("mlp.experts", "down_proj_bias", E, h),
  };
  TPXP_CHK(TPXP_SK_ROWS(host, ctx, layer, rows, NULL));
  if (c->a->ckpt_prefix != NULL && has_sources(host))
    TPXP_CHK(sk_sources_whole(host, ctx, c, layer));
  else if (!c->a->fused_in_ckpt && has_sources(host))
    TPXP_CHK(sk_sources(host, ctx, c, layer));
  if (c->shared_inter > 0) {
    tpxp_fmt(f, sizeof f, "%s.mlp.shared_experts", layer);
    TPXP_CHK(am_sk_mlp(host, ctx, f, h, c->shared_inter, c->use_bias));
    if (c->a->shared_gate) {
      tpxp_fmt(f, sizeof f, "%s.mlp.shared_expert_gate", layer);
      TPXP_CHK(tpxp_sk_linear(host, ctx, f, h, 1, 0, NULL));
    }
  }
  return TPX_PLUGIN_OK;
}

/* The text decoder every class builds (tpxp_sk_stack): <prefix>.embed_tokens,
 * the layers through `layer`, the final norm (and, with embed_norm,
 * Inkling's embed_norm after it), then the head (`head`, untied unless the
 * config ties it). */
int am_sk_text_stack(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const am_cfg *c, const char *prefix, const char *head,
                     tpxp_layer_fn layer, const void *user, int embed_norm) {
  const tpxp_sk_row tail[] = {TPXP_SK_NRM("norm", c->hidden, 0),
                              TPXP_SK_NRM("embed_norm", c->hidden, 0)};
  const tpxp_stack stack = {.prefix = prefix,
                            .embed = "embed_tokens",
                            .vocab = c->vocab,
                            .hidden = c->hidden,
                            .layers = c->layers,
                            .layer = layer,
                            .user = user,
                            .tail = tail,
                            .n_tail = embed_norm ? 2 : 1,
                            .head = head,
                            .tie = c->tie};
  return tpxp_sk_stack(host, ctx, &stack);
}
