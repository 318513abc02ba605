/* ltx2_skeleton.c — LTX2VideoTransformer3DModel's parameters from its
 * config, in Diffusers' module order (transformer_ltx2.py): video and audio
 * input projections and caption projections, the adaLN-single timestep
 * modulations (video, audio, the audio/video cross-attention scale-shift and
 * gates, the LTX-2.3 prompt modulation), the output modulation tables, the
 * audio-video blocks (self-, prompt- and audio<->video cross-attention with
 * q/k RMS norms over all heads, optional gate logits, GELU feed-forwards,
 * modulation tables) and the output projections. The checkpoint dtype is
 * taken as bfloat16 (the config names none). */
#include <string.h>

#include "diffusion.h"

/* LTX2Attention: q/k RMS norms over all heads (always with weights), q/k/v
 * and the output projection, the gate logits when gated. */
static void attention(dfx_sk *s, const char *b, const char *name, int64_t q,
                      int64_t kv, int64_t heads, int64_t head_dim, int bias,
                      int out_bias, int gated) {
  int64_t inner = heads * head_dim;
  dfx_mod(s, "container", "%s.%s", b, name);
  dfx_norm(s, inner, 1, 0, "%s.%s.norm_q", b, name);
  dfx_norm(s, inner, 1, 0, "%s.%s.norm_k", b, name);
  dfx_lin(s, q, inner, bias, "%s.%s.to_q", b, name);
  dfx_lin(s, kv, inner, bias, "%s.%s.to_k", b, name);
  dfx_lin(s, kv, inner, bias, "%s.%s.to_v", b, name);
  dfx_lin(s, inner, q, out_bias, "%s.%s.to_out.0", b, name);
  if (gated)
    dfx_lin(s, q, heads, 1, "%s.%s.to_gate_logits", b, name);
}

/* LTX2AdaLayerNormSingle: a timestep embedding and linear dim -> n * dim. */
static void adaln_single(dfx_sk *s, const char *name, int64_t dim, int64_t n) {
  char p[TPXP_FQN_MAX];
  tpxp_fmt(p, sizeof p, "%s.emb.timestep_embedder", name);
  dfx_two_linear(s, p, 256, dim);
  dfx_lin(s, dim, n * dim, 1, "%s.linear", name);
}

static void table(dfx_sk *s, const char *module, const char *name, int64_t n,
                  int64_t dim) {
  int64_t shape[2];
  shape[0] = n;
  shape[1] = dim;
  dfx_param(s, module, name, 2, shape);
}

/* FeedForward's first projection width for `act` (x2 for the gated ones). */
static int ff_width(const char *act, int64_t inner, int64_t *out) {
  static const char *const plain[] = {"gelu", "gelu-approximate",
                                      "linear-silu"};
  static const char *const gated[] = {"geglu", "geglu-approximate", "swiglu"};
  size_t i;
  for (i = 0; i < sizeof plain / sizeof plain[0]; i++)
    if (strcmp(act, plain[i]) == 0) {
      *out = inner;
      return 1;
    }
  for (i = 0; i < sizeof gated / sizeof gated[0]; i++)
    if (strcmp(act, gated[i]) == 0) {
      *out = 2 * inner;
      return 1;
    }
  return 0;
}

int dfx_ltx2_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                      const char *arch) {
  dfx_sk s;
  int64_t in_ch, out_ch, heads, hd, cross, a_in, a_out, a_heads, a_hd;
  int64_t a_cross, layers, caption, inner, a_inner, ffw, a_ffw, i;
  int gated, xmod, a_gated, a_xmod, affine, bias, out_bias, prompts;
  int ff_bias, a_ff_bias, adaln_single_prompt, keyframes;
  const char *qk, *act;
  char b[TPXP_FQN_MAX];
  dfx_sk_init(&s, host, ctx, "bfloat16");
  {
    const tpxp_key keys[] = {
        TPXP_KEY_Z("in_channels", &in_ch, 128),
        TPXP_KEY_Z("num_attention_heads", &heads, 32),
        TPXP_KEY_Z("attention_head_dim", &hd, 128),
        TPXP_KEY_Z("cross_attention_dim", &cross, 4096),
        TPXP_KEY_B("gated_attn", &gated, 0),
        TPXP_KEY_B("cross_attn_mod", &xmod, 0),
        TPXP_KEY_Z("audio_in_channels", &a_in, 128),
        TPXP_KEY_Z("audio_num_attention_heads", &a_heads, 32),
        TPXP_KEY_Z("audio_attention_head_dim", &a_hd, 64),
        TPXP_KEY_Z("audio_cross_attention_dim", &a_cross, 2048),
        TPXP_KEY_B("audio_gated_attn", &a_gated, 0),
        TPXP_KEY_B("audio_cross_attn_mod", &a_xmod, 0),
        TPXP_KEY_I("num_layers", &layers, 48),
        TPXP_KEY_S("activation_fn", &act, "gelu-approximate"),
        TPXP_KEY_S("qk_norm", &qk, "rms_norm_across_heads"),
        TPXP_KEY_B("norm_elementwise_affine", &affine, 0),
        TPXP_KEY_Z("caption_channels", &caption, 3840),
        TPXP_KEY_B("attention_bias", &bias, 1),
        TPXP_KEY_B("attention_out_bias", &out_bias, 1),
        TPXP_KEY_B("use_prompt_embeddings", &prompts, 1),
        TPXP_KEY_B("ff_bias", &ff_bias, 1),
        TPXP_KEY_B("audio_ff_bias", &a_ff_bias, 1),
        TPXP_KEY_B("use_prompt_adaln_single", &adaln_single_prompt, 1),
        TPXP_KEY_B("use_keyframes_abs_pos_embedding", &keyframes, 0),
    };
    TPXP_CHK(TPXP_CFG_READ(host, ctx, "", keys));
  }
  out_ch = dfx_size_or(&s, "out_channels", 128, in_ch);
  a_out = dfx_size_or(&s, "audio_out_channels", 128, a_in);
  if (s.st != TPX_PLUGIN_OK)
    return s.st;
  if (layers < 0)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "ltx2: num_layers (%lld) must not be negative",
                     (long long)layers);
  if (strcmp(qk, "rms_norm_across_heads") != 0)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "ltx2: qk_norm '%s' is not supported (Diffusers accepts "
                     "only rms_norm_across_heads)",
                     qk);
  inner = heads * hd;
  a_inner = a_heads * a_hd;
  if (!ff_width(act, 4 * inner, &ffw) || !ff_width(act, 4 * a_inner, &a_ffw))
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "ltx2: activation_fn '%s' is not supported (gelu, "
                     "gelu-approximate, linear-silu, geglu, "
                     "geglu-approximate, swiglu)",
                     act);

  dfx_lin(&s, in_ch, inner, 1, "proj_in");
  dfx_lin(&s, a_in, a_inner, 1, "audio_proj_in");
  if (keyframes)
    table(&s, "", "keyframes_abs_pos_embedding", 1, inner);
  if (prompts) {
    dfx_two_linear(&s, "caption_projection", caption, inner);
    dfx_two_linear(&s, "audio_caption_projection", caption, a_inner);
  }
  adaln_single(&s, "time_embed", inner, xmod ? 9 : 6);
  adaln_single(&s, "audio_time_embed", a_inner, a_xmod ? 9 : 6);
  adaln_single(&s, "av_cross_attn_video_scale_shift", inner, 4);
  adaln_single(&s, "av_cross_attn_audio_scale_shift", a_inner, 4);
  adaln_single(&s, "av_cross_attn_video_a2v_gate", inner, 1);
  adaln_single(&s, "av_cross_attn_audio_v2a_gate", a_inner, 1);
  table(&s, "", "scale_shift_table", 2, inner);
  table(&s, "", "audio_scale_shift_table", 2, a_inner);
  if ((xmod || a_xmod) && adaln_single_prompt) {
    adaln_single(&s, "prompt_adaln", inner, 2);
    adaln_single(&s, "audio_prompt_adaln", a_inner, 2);
  }
  dfx_mod(&s, "rotary", "rope");
  dfx_mod(&s, "rotary", "audio_rope");
  dfx_mod(&s, "rotary", "cross_attn_rope");
  dfx_mod(&s, "rotary", "cross_attn_audio_rope");
  for (i = 0; i < layers && s.st == TPX_PLUGIN_OK; i++) {
    char f[TPXP_FQN_MAX];
    tpxp_fmt(b, sizeof b, "transformer_blocks.%lld", (long long)i);
    dfx_mod(&s, "container", "%s", b);
    dfx_norm(&s, inner, affine, 0, "%s.norm1", b);
    attention(&s, b, "attn1", inner, inner, heads, hd, bias, out_bias, gated);
    dfx_norm(&s, a_inner, affine, 0, "%s.audio_norm1", b);
    attention(&s, b, "audio_attn1", a_inner, a_inner, a_heads, a_hd, bias,
              out_bias, a_gated);
    dfx_norm(&s, inner, affine, 0, "%s.norm2", b);
    attention(&s, b, "attn2", inner, cross, heads, hd, bias, out_bias, gated);
    dfx_norm(&s, a_inner, affine, 0, "%s.audio_norm2", b);
    attention(&s, b, "audio_attn2", a_inner, a_cross, a_heads, a_hd, bias,
              out_bias, a_gated);
    dfx_norm(&s, inner, affine, 0, "%s.audio_to_video_norm", b);
    attention(&s, b, "audio_to_video_attn", inner, a_inner, a_heads, a_hd, bias,
              out_bias, gated);
    dfx_norm(&s, a_inner, affine, 0, "%s.video_to_audio_norm", b);
    attention(&s, b, "video_to_audio_attn", a_inner, inner, a_heads, a_hd, bias,
              out_bias, a_gated);
    dfx_norm(&s, inner, affine, 0, "%s.norm3", b);
    tpxp_fmt(f, sizeof f, "%s.ff", b);
    dfx_ff(&s, f, inner, ffw, 4 * inner, inner, ff_bias, 0);
    dfx_norm(&s, a_inner, affine, 0, "%s.audio_norm3", b);
    tpxp_fmt(f, sizeof f, "%s.audio_ff", b);
    dfx_ff(&s, f, a_inner, a_ffw, 4 * a_inner, a_inner, a_ff_bias, 0);
    table(&s, b, "scale_shift_table", xmod ? 9 : 6, inner);
    table(&s, b, "audio_scale_shift_table", a_xmod ? 9 : 6, a_inner);
    if (xmod || a_xmod) {
      table(&s, b, "prompt_scale_shift_table", 2, inner);
      table(&s, b, "audio_prompt_scale_shift_table", 2, a_inner);
    }
    table(&s, b, "video_a2v_cross_attn_scale_shift_table", 5, inner);
    table(&s, b, "audio_a2v_cross_attn_scale_shift_table", 5, a_inner);
  }
  dfx_lin(&s, inner, out_ch, 1, "proj_out");
  dfx_lin(&s, a_inner, a_out, 1, "audio_proj_out");
  return s.st;
}
