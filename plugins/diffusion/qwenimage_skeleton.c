/* qwenimage_skeleton.c — QwenImageTransformer2DModel's parameters from its
 * config, in Diffusers' module order (transformer_qwenimage.py): the
 * timestep embedding (plus the addition_t table with
 * use_additional_t_cond), the text RMSNorm, the image and text input
 * projections, the dual-stream blocks (img/txt modulation, joint attention
 * with per-head RMS q/k norms and added text projections, GELU MLPs) and the
 * output modulation and projection. The published checkpoint (Qwen/Qwen-Image,
 * 20,430,401,088 parameters in 40.86 GB) is bfloat16, the default here. */
#include "diffusion.h"

int dfx_qwenimage_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                           const char *arch) {
  dfx_sk s;
  int64_t p, in_ch, out_ch, layers, hd, heads, joint, inner, i;
  int add_t;
  char b[TPXP_FQN_MAX];
  dfx_sk_init(&s, host, ctx, "bfloat16");
  {
    const tpxp_key keys[] = {
        TPXP_KEY_Z("patch_size", &p, 2),
        TPXP_KEY_Z("in_channels", &in_ch, 64),
        TPXP_KEY_I("num_layers", &layers, 60),
        TPXP_KEY_Z("attention_head_dim", &hd, 128),
        TPXP_KEY_Z("num_attention_heads", &heads, 24),
        TPXP_KEY_Z("joint_attention_dim", &joint, 3584),
        TPXP_KEY_B("use_additional_t_cond", &add_t, 0),
    };
    TPXP_CHK(TPXP_CFG_READ(host, ctx, "", keys));
  }
  out_ch = dfx_size_or(&s, "out_channels", 16, in_ch);
  if (s.st != TPX_PLUGIN_OK)
    return s.st;
  if (layers < 0)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "qwenimage: num_layers (%lld) must not be negative",
                     (long long)layers);
  inner = heads * hd;

  dfx_mod(&s, "rotary", "pos_embed");
  dfx_two_linear(&s, "time_text_embed.timestep_embedder", 256, inner);
  if (add_t && s.st == TPX_PLUGIN_OK)
    s.st = tpxp_sk_embedding(host, ctx, "time_text_embed.addition_t_embedding",
                             2, inner, s.dtype);
  dfx_norm(&s, joint, 1, 0, "txt_norm");
  dfx_lin(&s, in_ch, inner, 1, "img_in");
  dfx_lin(&s, joint, inner, 1, "txt_in");
  for (i = 0; i < layers && s.st == TPX_PLUGIN_OK; i++) {
    char f[TPXP_FQN_MAX];
    tpxp_fmt(b, sizeof b, "transformer_blocks.%lld", (long long)i);
    dfx_mod(&s, "container", "%s", b);
    dfx_lin(&s, inner, 6 * inner, 1, "%s.img_mod.1", b);
    tpxp_fmt(f, sizeof f, "%s.attn", b);
    dfx_mod(&s, "container", "%s", f);
    dfx_norm(&s, hd, 1, 0, "%s.norm_q", f);
    dfx_norm(&s, hd, 1, 0, "%s.norm_k", f);
    dfx_lin(&s, inner, inner, 1, "%s.to_q", f);
    dfx_lin(&s, inner, inner, 1, "%s.to_k", f);
    dfx_lin(&s, inner, inner, 1, "%s.to_v", f);
    dfx_lin(&s, inner, inner, 1, "%s.add_k_proj", f);
    dfx_lin(&s, inner, inner, 1, "%s.add_v_proj", f);
    dfx_lin(&s, inner, inner, 1, "%s.add_q_proj", f);
    dfx_lin(&s, inner, inner, 1, "%s.to_out.0", f);
    dfx_lin(&s, inner, inner, 1, "%s.to_add_out", f);
    dfx_norm(&s, hd, 1, 0, "%s.norm_added_q", f);
    dfx_norm(&s, hd, 1, 0, "%s.norm_added_k", f);
    tpxp_fmt(f, sizeof f, "%s.img_mlp", b);
    dfx_ff(&s, f, inner, 4 * inner, 4 * inner, inner, 1, 0);
    dfx_lin(&s, inner, 6 * inner, 1, "%s.txt_mod.1", b);
    tpxp_fmt(f, sizeof f, "%s.txt_mlp", b);
    dfx_ff(&s, f, inner, 4 * inner, 4 * inner, inner, 1, 0);
  }
  dfx_lin(&s, inner, 2 * inner, 1, "norm_out.linear");
  dfx_lin(&s, inner, p * p * out_ch, 1, "proj_out");
  return s.st;
}
