/* wan_skeleton.c — WanTransformer3DModel's parameters from its config, in
 * Diffusers' module order (diffusers models/transformers/transformer_wan.py):
 * the Conv3d patch embedding, the condition embedder (time embedder,
 * time_proj, text embedder, and for image-to-video the image embedder), the
 * blocks (self- and cross-attention with RMS q/k norms over all heads, the
 * optional cross-attention LayerNorm and added image K/V, the GELU
 * feed-forward, the modulation table), proj_out and the output modulation
 * table. The published Diffusers checkpoints (Wan2.1-T2V-1.3B-Diffusers:
 * one 5.68 GB file for 1,418,996,800 parameters) are float32, the default
 * dtype here. */
#include "diffusion.h"

int dfx_wan_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const char *arch) {
  dfx_sk s;
  int64_t heads, head_dim, inner, in_ch, out_ch, text_dim, freq_dim, ffn;
  int64_t layers, image_dim, added_kv, pos_len, pt, ph, pw, i;
  int cross_norm;
  dfx_sk_init(&s, host, ctx, "float32");
  {
    const tpxp_key keys[] = {
        TPXP_KEY_Z("num_attention_heads", &heads, 40),
        TPXP_KEY_Z("attention_head_dim", &head_dim, 128),
        TPXP_KEY_Z("in_channels", &in_ch, 16),
        TPXP_KEY_Z("text_dim", &text_dim, 4096),
        TPXP_KEY_Z("freq_dim", &freq_dim, 256),
        TPXP_KEY_Z("ffn_dim", &ffn, 13824),
        TPXP_KEY_I("num_layers", &layers, 40),
        TPXP_KEY_B("cross_attn_norm", &cross_norm, 1),
        TPXP_KEY_I("image_dim", &image_dim, 0),
        TPXP_KEY_I("added_kv_proj_dim", &added_kv, 0),
        TPXP_KEY_I("pos_embed_seq_len", &pos_len, 0),
        TPXP_KEY_Z("patch_size[0]", &pt, 1),
        TPXP_KEY_Z("patch_size[1]", &ph, 2),
        TPXP_KEY_Z("patch_size[2]", &pw, 2),
    };
    TPXP_CHK(TPXP_CFG_READ(host, ctx, "", keys));
  }
  out_ch = dfx_size_or(&s, "out_channels", 16, in_ch);
  if (s.st != TPX_PLUGIN_OK)
    return s.st;
  if (layers < 0 || image_dim < 0 || added_kv < 0 || pos_len < 0)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "wan: num_layers (%lld), image_dim, added_kv_proj_dim "
                     "and pos_embed_seq_len must not be negative",
                     (long long)layers);
  inner = heads * head_dim;

  dfx_mod(&s, "rotary", "rope");
  dfx_conv3d(&s, "patch_embedding", in_ch, inner, pt, ph, pw);
  dfx_mod(&s, "container", "condition_embedder");
  dfx_two_linear(&s, "condition_embedder.time_embedder", freq_dim, inner);
  dfx_lin(&s, inner, 6 * inner, 1, "condition_embedder.time_proj");
  dfx_two_linear(&s, "condition_embedder.text_embedder", text_dim, inner);
  if (image_dim > 0) {
    /* WanImageEmbedding: LayerNorms with affine weights, a mult=1 GELU
     * FeedForward whose net is a ModuleList the recursive FSDP pass
     * reaches (its dropout is a unit too), and a learned position table. */
    dfx_mod(&s, "container", "condition_embedder.image_embedder");
    dfx_norm(&s, image_dim, 1, 1, "condition_embedder.image_embedder.norm1");
    dfx_ff(&s, "condition_embedder.image_embedder.ff", image_dim, image_dim,
           image_dim, inner, 1, 1);
    dfx_norm(&s, inner, 1, 1, "condition_embedder.image_embedder.norm2");
    if (pos_len > 0) {
      int64_t pe[3];
      pe[0] = 1;
      pe[1] = pos_len;
      pe[2] = image_dim;
      dfx_param(&s, "condition_embedder.image_embedder", "pos_embed", 3, pe);
    }
  }
  for (i = 0; i < layers && s.st == TPX_PLUGIN_OK; i++) {
    static const char *const attn[2] = {"attn1", "attn2"};
    int64_t sst[3];
    int a;
    dfx_mod(&s, "container", "blocks.%lld", (long long)i);
    for (a = 0; a < 2; a++) {
      const char *n = attn[a];
      dfx_lin(&s, inner, inner, 1, "blocks.%lld.%s.to_q", (long long)i, n);
      dfx_lin(&s, inner, inner, 1, "blocks.%lld.%s.to_k", (long long)i, n);
      dfx_lin(&s, inner, inner, 1, "blocks.%lld.%s.to_v", (long long)i, n);
      dfx_lin(&s, inner, inner, 1, "blocks.%lld.%s.to_out.0", (long long)i, n);
      dfx_norm(&s, inner, 1, 0, "blocks.%lld.%s.norm_q", (long long)i, n);
      dfx_norm(&s, inner, 1, 0, "blocks.%lld.%s.norm_k", (long long)i, n);
      if (a == 1 && added_kv > 0) {
        dfx_lin(&s, added_kv, inner, 1, "blocks.%lld.attn2.add_k_proj",
                (long long)i);
        dfx_lin(&s, added_kv, inner, 1, "blocks.%lld.attn2.add_v_proj",
                (long long)i);
        dfx_norm(&s, inner, 1, 0, "blocks.%lld.attn2.norm_added_k",
                 (long long)i);
      }
    }
    if (cross_norm)
      dfx_norm(&s, inner, 1, 1, "blocks.%lld.norm2", (long long)i);
    dfx_mod(&s, "container", "blocks.%lld.ffn", (long long)i);
    {
      char p[TPXP_FQN_MAX];
      tpxp_fmt(p, sizeof p, "blocks.%lld.ffn", (long long)i);
      dfx_ff(&s, p, inner, ffn, ffn, inner, 1, 0);
      tpxp_fmt(p, sizeof p, "blocks.%lld", (long long)i);
      sst[0] = 1;
      sst[1] = 6;
      sst[2] = inner;
      dfx_param(&s, p, "scale_shift_table", 3, sst);
    }
  }
  dfx_lin(&s, inner, out_ch * pt * ph * pw, 1, "proj_out");
  {
    int64_t sst[3];
    sst[0] = 1;
    sst[1] = 2;
    sst[2] = inner;
    dfx_param(&s, "", "scale_shift_table", 3, sst);
  }
  return s.st;
}
