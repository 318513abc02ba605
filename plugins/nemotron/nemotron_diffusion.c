/* nemotron_diffusion.c — NemotronLabsDiffusionModel (remote code, reached by
 * its bare class name): `_parallelize_nemotron_labs_diffusion`, the
 * Ministral3 plan shape with prefix `encoder` and head `diffusion_head`
 * (plans.md §3.4), and its skeleton: a Ministral3 (Llama-style) encoder
 * stack plus an untied nn.Linear diffusion head. It runs under the Default
 * strategy, whose validate_tp_mesh (§4.5) is the host's diagnostic
 * (heads-not-divisible); the plan is the same at every tp. */
#include "nemotron.h"

#include "tpxp_common.h"

#define COL "colwise"
#define ROW "rowwise"
#define VOCAB "vocab_parallel_embedding"
#define SP "sequence_parallel"
#define SPAG "sequence_parallel_allgather_activation"

static const tpxp_rule diffusion_sp0[] = {
    {"embed_tokens", VOCAB, TPXP_R, NULL, TPXP_DEF, 0, 0},
    {"layers.*.self_attn.q_proj", COL, NULL, NULL, TPXP_DEF, 0, 0},
    {"layers.*.self_attn.k_proj", COL, NULL, NULL, TPXP_DEF, 0, 0},
    {"layers.*.self_attn.v_proj", COL, NULL, NULL, TPXP_DEF, 0, 0},
    {"layers.*.self_attn.o_proj", ROW, NULL, NULL, TPXP_DEF, 0, 0},
    {"layers.*.mlp.up_proj", COL, NULL, NULL, TPXP_DEF, 0, 0},
    {"layers.*.mlp.gate_proj", COL, NULL, NULL, TPXP_DEF, 0, 0},
    {"layers.*.mlp.down_proj", ROW, NULL, NULL, TPXP_DEF, 0, 0},
    {"diffusion_head", COL, NULL, TPXP_SM1, 0, 0, 1},
};

static const tpxp_rule diffusion_sp1[] = {
    {"embed_tokens", VOCAB, TPXP_R, TPXP_S1, 0, 0, 0},
    {"layers.*.self_attn.o_proj", ROW, NULL, TPXP_S1, 0, 0, 0},
    {"layers.*.mlp.down_proj", ROW, NULL, TPXP_S1, 0, 0, 0},
    {"diffusion_head", COL, TPXP_S1, TPXP_SM1, 0, 0, 1},
    {"norm", SP, NULL, NULL, TPXP_DEF, 0, 0},
    {"layers.*.input_layernorm", SPAG, NULL, NULL, 0, 0, 0},
    {"layers.*.post_attention_layernorm", SPAG, NULL, NULL, 0, 0, 0},
};

int nemotron_diffusion_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                            int sequence_parallel, int64_t tp_size) {
  int st;
  /* Like upstream's plan function, never looks at tp or the head counts:
   * validate_tp_mesh is the host's (heads-not-divisible). */
  (void)tp_size;
  if (host->plan_set_function != NULL &&
      (st = host->plan_set_function(ctx, "nemotron_labs_diffusion")) !=
          TPX_PLUGIN_OK)
    return st;
  st = tpxp_add_rules(host, ctx, "encoder", diffusion_sp0,
                      sizeof diffusion_sp0 / sizeof diffusion_sp0[0]);
  if (st == TPX_PLUGIN_OK && sequence_parallel)
    st = tpxp_add_rules(host, ctx, "encoder", diffusion_sp1,
                        sizeof diffusion_sp1 / sizeof diffusion_sp1[0]);
  return st;
}

int nemotron_diffusion_skeleton(const tpx_plugin_host *host,
                                tpx_plugin_ctx *ctx) {
  tpxp_decoder d;
  int st = tpxp_decoder_read(host, ctx, "", 0, &d);
  if (st != TPX_PLUGIN_OK)
    return st;
  d.prefix = "encoder";
  d.qk_norm = 0;
  d.rotary = 1;
  d.dtype = NULL;
  st = tpxp_sk_decoder(host, ctx, &d);
  if (st != TPX_PLUGIN_OK)
    return st;
  return tpxp_sk_lm_head(host, ctx, "diffusion_head", d.hidden, d.vocab, 0,
                         d.tie, "encoder.embed_tokens.weight", NULL);
}
