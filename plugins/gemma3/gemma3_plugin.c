/* gemma3_plugin.c — registration and entry points of the gemma3 family
 * plugin (register_parallel_strategy, get_plan, tpx_plugin_get_skeleton).
 * The plans live in gemma3_plan.c, the skeletons in gemma3_skeleton.c
 * (Gemma3) and gemma4_skeleton.c (Gemma4). */
#include "gemma3.h"

#include <string.h>

#include "tpxp_common.h"

/* Every name a model class reaches Automodel under (plans.md §2, §4.9):
 * qualified HF names as PARALLELIZE_FUNCTIONS keys them, the bare names a
 * config.json's "architectures" carries, and the NeMo Gemma4 class (the
 * Gemma4 strategy is looked up by bare class name, so any module path
 * counts). */
static const char *const gemma3_architectures[] = {
    "transformers.models.gemma3.modeling_gemma3.Gemma3ForCausalLM",
    "transformers.models.gemma3.modeling_gemma3.Gemma3ForConditionalGeneration",
    "Gemma3ForCausalLM",
    "Gemma3ForConditionalGeneration",
    "Gemma4ForConditionalGeneration",
    "transformers.models.gemma4.modeling_gemma4.Gemma4ForConditionalGeneration",
    "nemo_automodel.components.models.gemma4_moe.model."
    "Gemma4ForConditionalGeneration",
    NULL};

gemma3_kind gemma3_kind_of(const char *architecture) {
  if (tpxp_arch_is(architecture, "Gemma3ForCausalLM"))
    return GEMMA3_CAUSAL_LM;
  if (tpxp_arch_is(architecture, "Gemma3ForConditionalGeneration"))
    return GEMMA3_COND_GEN;
  if (tpxp_arch_is(architecture, "Gemma4ForConditionalGeneration"))
    return GEMMA4_COND_GEN;
  return GEMMA3_NONE;
}

TPX_PLUGIN_EXPORT int register_parallel_strategy(const tpx_plugin_host *host,
                                                 tpx_plugin_info *info) {
  static const tpxp_plugin_desc desc = {
      .name = "gemma3",
      .version = "1.0.0",
      .description =
          "Gemma3 causal LM and VLM (_parallelize_gemma3) and the Gemma4 "
          "strategy plan (gemma4 custom styles; MoE and indivisible heads "
          "refused)",
      .architectures = gemma3_architectures,
      .plans = NULL,
  };
  return tpxp_register(host, info, &desc);
}

TPX_PLUGIN_EXPORT int get_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                               const tpx_plugin_plan_request *req) {
  gemma3_kind kind;
  int st = tpxp_plain_plan_request(host, ctx, req, "gemma3");
  if (st != TPX_PLUGIN_OK)
    return st;
  kind = gemma3_kind_of(req->architecture);
  switch (kind) {
  case GEMMA3_CAUSAL_LM:
  case GEMMA3_COND_GEN:
    return gemma3_plan(host, ctx, kind, req->sequence_parallel, req->tp_size);
  case GEMMA4_COND_GEN:
    return gemma4_plan(host, ctx, req->sequence_parallel, req->tp_size);
  case GEMMA3_NONE:
  default:
    break;
  }
  return tpxp_not_served(host, ctx, "gemma3", req->architecture);
}

TPX_PLUGIN_EXPORT int tpx_plugin_get_skeleton(const tpx_plugin_host *host,
                                              tpx_plugin_ctx *ctx,
                                              const char *architecture) {
  gemma3_kind kind;
  if (host == NULL)
    return TPX_PLUGIN_INVALID;
  kind = gemma3_kind_of(architecture);
  if (kind == GEMMA3_CAUSAL_LM || kind == GEMMA3_COND_GEN)
    return gemma3_skeleton(host, ctx, kind);
  if (kind == GEMMA4_COND_GEN)
    return gemma4_skeleton(host, ctx);
  return tpxp_not_served(host, ctx, "gemma3", architecture);
}

/* Upstream, the Gemma4 strategy raises before any plan exists; a host that
 * falls back to another plan source after our refusal still reports it
 * through these diagnostics. Gemma3 has nothing beyond validate_tp_mesh,
 * which the host runs itself. */
TPX_PLUGIN_EXPORT int tpx_plugin_validate(const tpx_plugin_host *host,
                                          tpx_plugin_ctx *ctx,
                                          const tpx_plugin_plan_request *req) {
  if (host == NULL)
    return TPX_PLUGIN_INVALID;
  if (!tpxp_request_ok(req))
    return tpxp_fail(host, ctx, TPX_PLUGIN_INVALID,
                     "gemma3: malformed validate request");
  if (gemma3_kind_of(req->architecture) == GEMMA4_COND_GEN)
    return gemma4_validate(host, ctx, req->tp_size);
  return TPX_PLUGIN_OK;
}
