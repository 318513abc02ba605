/* diffusion_plugin.c — registration and entry points of the diffusion family
 * plugin: the Diffusers transformers upstream's strategy registry names
 * (docs/DIFFUSION.md). Their config.json carries "_class_name" instead of
 * "architectures"; tpx reads it as the architecture.
 *
 *   WanTransformer3DModel             Wan: its own flow, fixed TP calls
 *   HunyuanVideo15Transformer3DModel  Hunyuan: no TP, output bf16
 *   LTX2VideoTransformer3DModel       LTX2: Hunyuan's flow
 *   QwenImageTransformer2DModel       QwenImageEdit: the Default flow with
 *                                     a check of its blocks
 *
 * What a plan cannot say (mixed-precision default, activation checkpointing,
 * no TP) goes through tpx_plugin_strategy. FSDP units follow tpx's recursive
 * rule, which is what every one of these strategies runs. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "diffusion.h"

static const char *const diffusion_architectures[] = {
    "WanTransformer3DModel", "HunyuanVideo15Transformer3DModel",
    "LTX2VideoTransformer3DModel", "QwenImageTransformer2DModel", NULL};

/* Strategies with their own flow: no validate_tp_mesh, tp_shard_plan
 * ignored (Qwen-Image's is a Default subclass and has neither). */
static const char *const diffusion_traits[] = {
    "own_flow=WanTransformer3DModel",
    "own_flow=HunyuanVideo15Transformer3DModel",
    "own_flow=LTX2VideoTransformer3DModel", NULL};

TPX_PLUGIN_EXPORT int register_parallel_strategy(const tpx_plugin_host *host,
                                                 tpx_plugin_info *info) {
  static const tpxp_plugin_desc desc = {
      .name = "diffusion",
      .version = "1.0.0",
      .description =
          "Diffusers video/image transformers (config _class_name): Wan "
          "(fixed TP on the condition embedders, block FFNs and proj_out), "
          "HunyuanVideo-1.5 and LTX-2 (no TP, bf16 output), Qwen-Image "
          "(Default flow); whole-block activation checkpointing",
      .architectures = diffusion_architectures,
      .plans = NULL,
      .traits = diffusion_traits,
  };
  return tpxp_register(host, info, &desc);
}

/* Hunyuan and LTX2: no TP at all, an empty plan at every tp. */
static int hunyuan_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                        const tpx_plugin_plan_request *req) {
  return host->plan_set_function == NULL
             ? TPX_PLUGIN_OK
             : host->plan_set_function(ctx,
                                       "none (HunyuanParallelizationStrategy "
                                       "applies no tensor parallelism)");
}

static int ltx2_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const tpx_plugin_plan_request *req) {
  return host->plan_set_function == NULL
             ? TPX_PLUGIN_OK
             : host->plan_set_function(
                   ctx, "none (LTX2ParallelizationStrategy, Hunyuan's flow, "
                        "applies no tensor parallelism)");
}

/* The QwenImageEdit strategy's check: transformer_blocks is a non-empty
 * module list whose every block has attn, img_mlp and txt_mlp (upstream
 * raises otherwise). */
static int qwenimage_blocks(const tpx_plugin_host *host, tpx_plugin_ctx *ctx) {
  static const char *const need[] = {"attn", "img_mlp", "txt_mlp"};
  int64_t n = host->model_count_children(ctx, "transformer_blocks"), i;
  char fqn[TPXP_FQN_MAX], msg[TPXP_MSG_MAX];
  size_t k;
  if (n <= 0)
    return host->diagnose(
        ctx, TPX_PLUGIN_DIAG_ERROR, "qwenimage-blocks-invalid",
        "QwenImageTransformer2DModel: transformer_blocks is missing or empty; "
        "the QwenImageEdit strategy requires a non-empty ModuleList of "
        "blocks");
  for (i = 0; i < n; i++)
    for (k = 0; k < sizeof need / sizeof need[0]; k++) {
      tpxp_fmt(fqn, sizeof fqn, "transformer_blocks.%lld.%s", (long long)i,
               need[k]);
      if (host->model_has_module(ctx, fqn))
        continue;
      snprintf(msg, sizeof msg,
               "QwenImageTransformer2DModel: transformer_blocks.%lld has no "
               "'%s'; the QwenImageEdit strategy requires attn, img_mlp and "
               "txt_mlp in every block",
               (long long)i, need[k]);
      return host->diagnose(ctx, TPX_PLUGIN_DIAG_ERROR,
                            "qwenimage-blocks-invalid", msg);
    }
  return TPX_PLUGIN_OK;
}

/* What the strategies do silently, said once: sequence parallelism and
 * (Hunyuan/LTX2) tp > 1 have no effect; QwenImage's blocks are checked. */
static int sp_ignored(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                      const tpx_plugin_plan_request *req) {
  if (host->diagnose == NULL || !req->sequence_parallel)
    return TPX_PLUGIN_OK;
  return host->diagnose(ctx, TPX_PLUGIN_DIAG_INFO, "sequence-parallel-ignored",
                        "the strategy for this Diffusers transformer ignores "
                        "sequence_parallel (and any tp_shard_plan)");
}

/* Hunyuan's flow (also LTX2's): sp ignored, and no TP at any tp size. */
static int no_tp_validate(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                          const tpx_plugin_plan_request *req,
                          const char *strategy) {
  char msg[TPXP_MSG_MAX];
  TPXP_CHK(sp_ignored(host, ctx, req));
  if (host->diagnose == NULL || req->tp_size <= 1)
    return TPX_PLUGIN_OK;
  snprintf(msg, sizeof msg,
           "the %s strategy applies no tensor parallelism: every parameter "
           "is replicated over the %lld tp ranks (FSDP still shards over "
           "dp)",
           strategy, (long long)req->tp_size);
  return host->diagnose(ctx, TPX_PLUGIN_DIAG_WARNING, "no-tensor-parallel",
                        msg);
}

static int hunyuan_validate(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                            const tpx_plugin_plan_request *req) {
  return no_tp_validate(host, ctx, req, "Hunyuan");
}

static int ltx2_validate(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                         const tpx_plugin_plan_request *req) {
  return no_tp_validate(host, ctx, req, "LTX2");
}

static int qwenimage_validate(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                              const tpx_plugin_plan_request *req) {
  if (host->diagnose == NULL)
    return TPX_PLUGIN_OK;
  return qwenimage_blocks(host, ctx);
}

/* QwenImage: no plan function upstream, so the plugin declines and the
 * Default flow's next step, the Hugging Face plan, finds the class's own
 * Diffusers _tp_plan (bundled by the host): declining is what upstream
 * does. */
static int qwenimage_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                          const tpx_plugin_plan_request *req) {
  return tpxp_fail(host, ctx, TPX_PLUGIN_REFUSED,
                   "QwenImageTransformer2DModel has no plan function "
                   "upstream (QwenImageEdit is a Default subclass): the "
                   "Default flow takes the class's own Diffusers _tp_plan "
                   "in its Hugging Face plan step");
}

/* The strategy's properties (docs/DIFFUSION.md, the strategies' table). */
static const char *const wan_props[][2] = {
    {"name", "Wan (WanParallelizationStrategy)"},
    {"tensor_parallel",
     "fixed calls, each group best effort: condition embedders "
     "(text_embedder, time_embedder: linear_1 colwise, linear_2 rowwise; "
     "time_proj colwise), then every block's ffn.net.0.proj colwise / "
     "ffn.net.2 rowwise and proj_out rowwise"},
    {"sequence_parallel", "ignored"},
    {"tp_shard_plan", "ignored"},
    {"validate_tp_mesh", "not run (own flow)"},
    {"activation_checkpointing",
     "whole block: each blocks[i] wrapped (NO_REENTRANT), when requested"},
    {"fsdp", "apply_fsdp2_sharding_recursively (prefetch on), then the "
             "root with reshard_after_forward=False"},
    {"mp_param_dtype", "bf16"},
    {"mp_reduce_dtype", "f32"},
    {"mp_output_dtype", "f32"},
};
static const char *const hunyuan_props[][2] = {
    {"name", "Hunyuan (HunyuanParallelizationStrategy)"},
    {"tensor_parallel", "none: the strategy applies no TP at any tp size"},
    {"sequence_parallel", "ignored"},
    {"tp_shard_plan", "ignored"},
    {"validate_tp_mesh", "not run (own flow)"},
    {"activation_checkpointing",
     "whole block: each transformer_blocks[i] wrapped (NO_REENTRANT); on "
     "by default in the strategy, the caller passes its own value"},
    {"fsdp", "apply_fsdp2_sharding_recursively (prefetch on), then the "
             "root with reshard_after_forward=False"},
    {"mp_param_dtype", "bf16"},
    {"mp_reduce_dtype", "f32"},
    {"mp_output_dtype", "bf16"},
};
static const char *const qwen_props[][2] = {
    {"name", "QwenImageEdit (a Default subclass)"},
    {"tensor_parallel",
     "Default flow: no plan function, so the Hugging Face plan step takes "
     "the Diffusers class's own _tp_plan (attention and MLP projections "
     "of every transformer_blocks[i], colwise / rowwise)"},
    {"activation_checkpointing",
     "whole block: each transformer_blocks[i] with non-selective AC (the "
     "Default flow is then called without AC); selective AC as Default"},
    {"block_check",
     "transformer_blocks non-empty, every block with attn, img_mlp, "
     "txt_mlp"},
    {"mp_param_dtype", "bf16"},
    {"mp_reduce_dtype", "f32"},
    {"mp_output_dtype", "f32"},
};

/* Set `n` properties; an older host has no strategy_set (and never calls
 * tpx_plugin_strategy). */
static int set_props(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const char *const (*kv)[2], size_t n) {
  size_t i;
  if (host->struct_size <= offsetof(tpx_plugin_host, strategy_set) ||
      host->strategy_set == NULL)
    return TPX_PLUGIN_OK;
  for (i = 0; i < n; i++) TPXP_CHK(host->strategy_set(ctx, kv[i][0], kv[i][1]));
  return TPX_PLUGIN_OK;
}

static int wan_strategy(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                        const char *arch) {
  return set_props(host, ctx, wan_props, TPXP_N_OF(wan_props));
}

static int hunyuan_strategy(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                            const char *arch) {
  return set_props(host, ctx, hunyuan_props, TPXP_N_OF(hunyuan_props));
}

/* LTX2: Hunyuan's properties under its own name. */
static int ltx2_strategy(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                         const char *arch) {
  static const char *const name[][2] = {
      {"name", "LTX2 (LTX2ParallelizationStrategy, an identical subclass of "
               "Hunyuan)"}};
  TPXP_CHK(hunyuan_strategy(host, ctx, arch));
  return set_props(host, ctx, name, 1);
}

static int qwenimage_strategy(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                              const char *arch) {
  return set_props(host, ctx, qwen_props, TPXP_N_OF(qwen_props));
}

/* Every architecture this plugin serves, and what each entry point does for
 * it. FSDP units follow tpx's recursive rule (no fsdp_units). */
static const tpxp_arch_ops diffusion_ops[] = {
    {.bare = "WanTransformer3DModel",
     .plan = dfx_wan_plan,
     .skeleton = dfx_wan_skeleton,
     .validate = sp_ignored,
     .strategy = wan_strategy},
    {.bare = "HunyuanVideo15Transformer3DModel",
     .plan = hunyuan_plan,
     .skeleton = dfx_hunyuan_skeleton,
     .validate = hunyuan_validate,
     .strategy = hunyuan_strategy},
    {.bare = "LTX2VideoTransformer3DModel",
     .plan = ltx2_plan,
     .skeleton = dfx_ltx2_skeleton,
     .validate = ltx2_validate,
     .strategy = ltx2_strategy},
    {.bare = "QwenImageTransformer2DModel",
     .plan = qwenimage_plan,
     .skeleton = dfx_qwenimage_skeleton,
     .validate = qwenimage_validate,
     .strategy = qwenimage_strategy},
};
static const tpxp_family diffusion = {"diffusion", diffusion_ops,
                                      TPXP_N_OF(diffusion_ops)};

TPXP_EXPORT_GET_PLAN(diffusion)
TPXP_EXPORT_SKELETON(diffusion)
TPXP_EXPORT_VALIDATE(diffusion)
TPXP_EXPORT_STRATEGY(diffusion)
