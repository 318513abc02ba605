/* nemotron_diffusion.c — NemotronLabsDiffusionModel (remote code, reached by
 * its bare class name): `_parallelize_nemotron_labs_diffusion`, the
 * Ministral3 plan shape with prefix `encoder` and head `diffusion_head`
 * (plans.md §3.4), and its skeleton: a Ministral3 (Llama-style) encoder
 * stack plus an untied nn.Linear diffusion head. It runs under the Default
 * strategy, whose validate_tp_mesh (§4.5) is the host's diagnostic
 * (heads-not-divisible); the plan is the same at every tp. */
#include "nemotron.h"

#include "tpxp_common.h"


static const tpxp_rule diffusion_sp0[] = {
    TPXP_VOCAB("embed_tokens", .in = TPXP_R),
    TPXP_COL("layers.*.self_attn.q_proj"),
    TPXP_COL("layers.*.self_attn.k_proj"),
    TPXP_COL("layers.*.self_attn.v_proj"),
    TPXP_ROW("layers.*.self_attn.o_proj"),
    TPXP_COL("layers.*.mlp.up_proj"),
    TPXP_COL("layers.*.mlp.gate_proj"),
    TPXP_ROW("layers.*.mlp.down_proj"),
    TPXP_COL("diffusion_head", .out = TPXP_SM1, .local = TPXP_KEEP_DTENSOR, .rooted = 1),
};

static const tpxp_rule diffusion_sp1[] = {
    TPXP_VOCAB("embed_tokens", .in = TPXP_R, .out = TPXP_S1, .local = TPXP_KEEP_DTENSOR),
    TPXP_ROW("layers.*.self_attn.o_proj", .out = TPXP_S1, .local = TPXP_KEEP_DTENSOR),
    TPXP_ROW("layers.*.mlp.down_proj", .out = TPXP_S1, .local = TPXP_KEEP_DTENSOR),
    TPXP_COL("diffusion_head", .in = TPXP_S1, .out = TPXP_SM1, .local = TPXP_KEEP_DTENSOR, .rooted = 1),
    TPXP_SEQ("norm"),
    TPXP_SEQ_AG("layers.*.input_layernorm", .local = TPXP_KEEP_DTENSOR),
    TPXP_SEQ_AG("layers.*.post_attention_layernorm", .local = TPXP_KEEP_DTENSOR),
};

/* Like upstream's plan function, never looks at tp or the head counts:
 * validate_tp_mesh is the host's (heads-not-divisible). */
int nemotron_diffusion_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                            const tpx_plugin_plan_request *req) {
  if (host->plan_set_function != NULL)
    TPXP_CHK(host->plan_set_function(ctx, "nemotron_labs_diffusion"));
  TPXP_CHK(TPXP_ADD_RULES(host, ctx, "encoder", diffusion_sp0));
  return req->sequence_parallel
             ? TPXP_ADD_RULES(host, ctx, "encoder", diffusion_sp1)
             : TPX_PLUGIN_OK;
}

int nemotron_diffusion_skeleton(const tpx_plugin_host *host,
                                tpx_plugin_ctx *ctx, const char *arch) {
  tpxp_decoder d;
  int st = tpxp_decoder_read(host, ctx, "", 0, &d);
  (void)arch;
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
