/* hunyuan_skeleton.c — HunyuanVideo15Transformer3DModel's parameters from
 * its config, in Diffusers' module order (transformer_hunyuan_video15.py):
 * the Conv3d patch embedding, the image projection, the text token refiner
 * (its refiner_blocks are a module list the recursive FSDP pass wraps), the
 * ByT5 projection (hidden width fixed at 2048 upstream), the time embedding
 * (a second one with use_meanflow), the condition-type table, the dual-stream
 * blocks and the output projection. The checkpoint dtype is taken as
 * bfloat16 (the config names none). */
#include <string.h>

#include "diffusion.h"

/* Diffusers Attention q/k norm for qk_norm: "rms_norm" has a weight,
 * "layer_norm" a weight and a bias (over one head). */
static void qk_norm(dfx_sk *s, int ln, int64_t head_dim, const char *prefix,
                    const char *name) {
  dfx_norm(s, head_dim, 1, ln, "%s.%s", prefix, name);
}

int dfx_hunyuan_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                         const char *arch) {
  dfx_sk s;
  int64_t heads, head_dim, inner, in_ch, out_ch, layers, refiners, p, pt;
  int64_t text_dim, text2_dim, image_dim, mlp, i;
  double ratio;
  const char *qk;
  int meanflow, ln;
  char b[TPXP_FQN_MAX];
  dfx_sk_init(&s, host, ctx, "bfloat16");
  {
    const tpxp_key keys[] = {
        TPXP_KEY_Z("in_channels", &in_ch, 65),
        TPXP_KEY_Z("num_attention_heads", &heads, 16),
        TPXP_KEY_Z("attention_head_dim", &head_dim, 128),
        TPXP_KEY_I("num_layers", &layers, 54),
        TPXP_KEY_I("num_refiner_layers", &refiners, 2),
        TPXP_KEY_F("mlp_ratio", &ratio, 4.0),
        TPXP_KEY_Z("patch_size", &p, 1),
        TPXP_KEY_Z("patch_size_t", &pt, 1),
        TPXP_KEY_S("qk_norm", &qk, "rms_norm"),
        TPXP_KEY_Z("text_embed_dim", &text_dim, 3584),
        TPXP_KEY_Z("text_embed_2_dim", &text2_dim, 1472),
        TPXP_KEY_Z("image_embed_dim", &image_dim, 1152),
        TPXP_KEY_B("use_meanflow", &meanflow, 0),
    };
    TPXP_CHK(TPXP_CFG_READ(host, ctx, "", keys));
  }
  out_ch = dfx_size_or(&s, "out_channels", 32, in_ch);
  if (s.st != TPX_PLUGIN_OK)
    return s.st;
  if (layers < 0 || refiners < 0 || !(ratio > 0))
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "hunyuan: num_layers (%lld) and num_refiner_layers "
                     "(%lld) must not be negative, mlp_ratio must be "
                     "positive",
                     (long long)layers, (long long)refiners);
  if (strcmp(qk, "rms_norm") != 0 && strcmp(qk, "layer_norm") != 0)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "hunyuan: qk_norm '%s' is not supported (rms_norm or "
                     "layer_norm)",
                     qk);
  ln = strcmp(qk, "layer_norm") == 0;
  inner = heads * head_dim;
  mlp = (int64_t)((double)inner * ratio); /* FeedForward: int(dim * mult) */

  dfx_mod(&s, "container", "x_embedder");
  dfx_conv3d(&s, "x_embedder.proj", in_ch, inner, pt, p, p);
  dfx_mod(&s, "container", "image_embedder");
  dfx_norm(&s, image_dim, 1, 1, "image_embedder.norm_in");
  dfx_lin(&s, image_dim, image_dim, 1, "image_embedder.linear_1");
  dfx_lin(&s, image_dim, inner, 1, "image_embedder.linear_2");
  dfx_norm(&s, inner, 1, 1, "image_embedder.norm_out");
  /* The token refiner: CombinedTimestepTextProjEmbeddings, proj_in, and its
   * blocks (mlp width fixed at 4 upstream, whatever mlp_ratio says). */
  dfx_mod(&s, "container", "context_embedder");
  dfx_two_linear(&s, "context_embedder.time_text_embed.timestep_embedder", 256,
                 inner);
  dfx_two_linear(&s, "context_embedder.time_text_embed.text_embedder", text_dim,
                 inner);
  dfx_lin(&s, text_dim, inner, 1, "context_embedder.proj_in");
  for (i = 0; i < refiners && s.st == TPX_PLUGIN_OK; i++) {
    tpxp_fmt(b, sizeof b, "context_embedder.token_refiner.refiner_blocks.%lld",
             (long long)i);
    dfx_mod(&s, "container", "%s", b);
    dfx_norm(&s, inner, 1, 1, "%s.norm1", b);
    dfx_lin(&s, inner, inner, 1, "%s.attn.to_q", b);
    dfx_lin(&s, inner, inner, 1, "%s.attn.to_k", b);
    dfx_lin(&s, inner, inner, 1, "%s.attn.to_v", b);
    dfx_lin(&s, inner, inner, 1, "%s.attn.to_out.0", b);
    dfx_norm(&s, inner, 1, 1, "%s.norm2", b);
    {
      char f[TPXP_FQN_MAX];
      tpxp_fmt(f, sizeof f, "%s.ff", b);
      dfx_ff(&s, f, inner, 4 * inner, 4 * inner, inner, 1, 0);
    }
    dfx_lin(&s, inner, 2 * inner, 1, "%s.norm_out.linear", b);
  }
  dfx_mod(&s, "container", "context_embedder_2");
  dfx_norm(&s, text2_dim, 1, 1, "context_embedder_2.norm");
  dfx_lin(&s, text2_dim, 2048, 1, "context_embedder_2.linear_1");
  dfx_lin(&s, 2048, 2048, 1, "context_embedder_2.linear_2");
  dfx_lin(&s, 2048, inner, 1, "context_embedder_2.linear_3");
  dfx_two_linear(&s, "time_embed.timestep_embedder", 256, inner);
  if (meanflow)
    dfx_two_linear(&s, "time_embed.timestep_embedder_r", 256, inner);
  if (s.st == TPX_PLUGIN_OK)
    s.st = tpxp_sk_embedding(host, ctx, "cond_type_embed", 3, inner, s.dtype);
  dfx_mod(&s, "rotary", "rope");
  for (i = 0; i < layers && s.st == TPX_PLUGIN_OK; i++) {
    char f[TPXP_FQN_MAX];
    tpxp_fmt(b, sizeof b, "transformer_blocks.%lld", (long long)i);
    dfx_mod(&s, "container", "%s", b);
    dfx_lin(&s, inner, 6 * inner, 1, "%s.norm1.linear", b);
    dfx_lin(&s, inner, 6 * inner, 1, "%s.norm1_context.linear", b);
    tpxp_fmt(f, sizeof f, "%s.attn", b);
    dfx_mod(&s, "container", "%s", f);
    qk_norm(&s, ln, head_dim, f, "norm_q");
    qk_norm(&s, ln, head_dim, f, "norm_k");
    dfx_lin(&s, inner, inner, 1, "%s.to_q", f);
    dfx_lin(&s, inner, inner, 1, "%s.to_k", f);
    dfx_lin(&s, inner, inner, 1, "%s.to_v", f);
    dfx_lin(&s, inner, inner, 1, "%s.add_k_proj", f);
    dfx_lin(&s, inner, inner, 1, "%s.add_v_proj", f);
    dfx_lin(&s, inner, inner, 1, "%s.add_q_proj", f);
    dfx_lin(&s, inner, inner, 1, "%s.to_out.0", f);
    dfx_lin(&s, inner, inner, 1, "%s.to_add_out", f);
    qk_norm(&s, ln, head_dim, f, "norm_added_q");
    qk_norm(&s, ln, head_dim, f, "norm_added_k");
    tpxp_fmt(f, sizeof f, "%s.ff", b);
    dfx_ff(&s, f, inner, mlp, mlp, inner, 1, 0);
    tpxp_fmt(f, sizeof f, "%s.ff_context", b);
    dfx_ff(&s, f, inner, mlp, mlp, inner, 1, 0);
  }
  dfx_lin(&s, inner, 2 * inner, 1, "norm_out.linear");
  dfx_lin(&s, inner, pt * p * p * out_ch, 1, "proj_out");
  return s.st;
}
