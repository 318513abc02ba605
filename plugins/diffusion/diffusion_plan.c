/* diffusion_plan.c — the TP plans of the diffusion family (docs/DIFFUSION.md).
 *
 * Wan: the strategy's fixed parallelize_module calls, flattened into FQN
 * keys in upstream order. Group one, the condition embedders:
 * text_embedder and time_embedder {linear_1: colwise, linear_2: rowwise},
 * time_proj colwise on the module itself; group two: every block's
 * {ffn.net.0.proj: colwise, ffn.net.2: rowwise}, then proj_out rowwise on
 * the module itself. Torch's default layouts throughout. Upstream guards
 * each call with hasattr and each group with a try/except (best effort), so
 * every key is optional: a variant without the module is skipped silently,
 * never an error. tp_shard_plan and sequence_parallel are ignored.
 *
 * QwenImage has no plan here: upstream has no plan function for it, and the
 * Default flow's Hugging Face plan step takes the Diffusers class's own
 * _tp_plan, which the host bundles. Hunyuan and LTX2 have no plan at all. */
#include "diffusion.h"

int dfx_wan_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                 const tpx_plugin_plan_request *req) {
  static const tpxp_rule rules[] = {
      TPXP_COL("condition_embedder.text_embedder.linear_1"),
      TPXP_ROW("condition_embedder.text_embedder.linear_2"),
      TPXP_COL("condition_embedder.time_embedder.linear_1"),
      TPXP_ROW("condition_embedder.time_embedder.linear_2"),
      TPXP_COL("condition_embedder.time_proj"),
      TPXP_COL("blocks.*.ffn.net.0.proj"),
      TPXP_ROW("blocks.*.ffn.net.2"),
      TPXP_ROW("proj_out"),
  };
  int st = TPX_PLUGIN_OK;
  /* a fixed set of calls at every tp, sp ignored */
  if (host->plan_set_function != NULL)
    st = host->plan_set_function(ctx, "wan (WanParallelizationStrategy)");
  if (st == TPX_PLUGIN_OK)
    st = TPXP_ADD_RULES_OPTIONAL(host, ctx, "", rules);
  return st;
}
