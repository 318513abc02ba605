/* nemotron_diffusion.c — NemotronLabsDiffusionModel (remote code, reached by
 * its bare class name): `_parallelize_nemotron_labs_diffusion`, the
 * Ministral3 plan shape with prefix `encoder` and head `diffusion_head`
 * (docs/SEMANTICS.md "Family plans"), and its skeleton: a Ministral3
 * (Llama-style) encoder stack plus an untied nn.Linear diffusion head. It runs
 * under the Default strategy, whose validate_tp_mesh (docs/SEMANTICS.md "Plan
 * selection") is the host's diagnostic (heads-not-divisible); the plan is the
 * same at every tp. */
#include "nemotron.h"

#include "tpxp_common.h"

/* Like upstream's plan function, never looks at tp or the head counts:
 * validate_tp_mesh is the host's (heads-not-divisible). */
int nemotron_diffusion_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                            const tpx_plugin_plan_request *req) {
  if (host->plan_set_function != NULL)
    TPXP_CHK(host->plan_set_function(ctx, "nemotron_labs_diffusion"));
  /* The Ministral3 plan shape with prefix `encoder`, head `diffusion_head`. */
  static const tpxp_rule head[2] = TPXP_HEAD_VOCAB("diffusion_head");
  return tpxp_add_m3_plan(host, ctx, "encoder", head, req->sequence_parallel,
                          tpxp_m3_norms_sp, TPXP_N_OF(tpxp_m3_norms_sp));
}

int nemotron_diffusion_skeleton(const tpx_plugin_host *host,
                                tpx_plugin_ctx *ctx, const char *arch) {
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
