/* falcon_h1_plugin.c — the falcon_h1 family plugin: registration and the
 * `_parallelize_falcon_h1` plan (docs/SEMANTICS.md "Family plans").
 *
 * Only attention and the MLP are sharded. The Mamba2 branch (`mamba`) stays
 * replicated: its SSM scan and causal conv1d have no TP-sharded stock
 * kernels. The MLP is named `feed_forward`, which the generic fallback plan
 * would miss. lm_head gathers its output to Replicate (HF's own
 * `colwise_gather_output` is not a style Automodel translates). Sequence
 * parallelism is ignored: the parallel Mamba branch's activations are not
 * sequence-sharded. The plan is the same at every tp: the Default
 * strategy's validate_tp_mesh (docs/SEMANTICS.md "Plan selection") is the
 * host's diagnostic (heads-not-divisible). The skeleton lives in
 * falcon_h1_skeleton.c. */
#include "falcon_h1.h"

#include "tpxp_common.h"

static const char *const falcon_h1_architectures[] = {
    "transformers.models.falcon_h1.modeling_falcon_h1.FalconH1ForCausalLM",
    "FalconH1ForCausalLM", NULL};

static const tpxp_rule falcon_h1_rules[] = {
    TPXP_VOCAB("model.embed_tokens", .in = TPXP_R, .rooted = 1),
    TPXP_COL("model.layers.*.self_attn.q_proj", .rooted = 1),
    TPXP_COL("model.layers.*.self_attn.k_proj", .rooted = 1),
    TPXP_COL("model.layers.*.self_attn.v_proj", .rooted = 1),
    TPXP_ROW("model.layers.*.self_attn.o_proj", .rooted = 1),
    TPXP_COL("model.layers.*.feed_forward.gate_proj", .rooted = 1),
    TPXP_COL("model.layers.*.feed_forward.up_proj", .rooted = 1),
    TPXP_ROW("model.layers.*.feed_forward.down_proj", .rooted = 1),
    TPXP_COL("lm_head", .out = TPXP_R, .rooted = 1),
};

TPX_PLUGIN_EXPORT int register_parallel_strategy(const tpx_plugin_host *host,
                                                 tpx_plugin_info *info) {
  static const tpxp_plugin_desc desc = {
      .name = "falcon_h1",
      .version = "1.0.0",
      .description =
          "Falcon-H1 hybrid attention+Mamba2 (_parallelize_falcon_h1; Mamba2 "
          "mixer replicated, sequence parallel ignored)",
      .architectures = falcon_h1_architectures,
      .plans = NULL,
      .traits = NULL,
  };
  return tpxp_register(host, info, &desc);
}

/* Like upstream's _parallelize_falcon_h1, never looks at tp or the head
 * counts: validate_tp_mesh is the host's (heads-not-divisible). */
static int falcon_h1_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                          const tpx_plugin_plan_request *req) {
  if (req->sequence_parallel)
    tpxp_log(host, ctx, TPX_PLUGIN_LOG_INFO,
             "falcon_h1: sequence parallelism is ignored (the parallel Mamba "
             "branch emits activations that are not sequence-sharded)");
  if (host->plan_set_function != NULL)
    TPXP_CHK(host->plan_set_function(ctx, "falcon_h1"));
  return TPXP_ADD_RULES(host, ctx, "", falcon_h1_rules);
}

static const tpxp_arch_ops falcon_h1_ops[] = {
    {.bare = "FalconH1ForCausalLM",
     .plan = falcon_h1_plan,
     .skeleton = falcon_h1_skeleton},
};
static const tpxp_family falcon_h1 = {"falcon_h1", falcon_h1_ops, 1};

TPXP_EXPORT_GET_PLAN(falcon_h1)
TPXP_EXPORT_SKELETON(falcon_h1)
