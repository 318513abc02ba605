/* diffusion_plugin.c — registration and entry points of the diffusion family
 * plugin: the Diffusers transformers upstream's strategy registry names
 * (plans.md §4.9). Their config.json carries "_class_name" instead of
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

dfx_kind dfx_kind_of(const char *arch) {
  if (tpxp_arch_is(arch, "WanTransformer3DModel"))
    return DFX_WAN;
  if (tpxp_arch_is(arch, "HunyuanVideo15Transformer3DModel"))
    return DFX_HUNYUAN;
  if (tpxp_arch_is(arch, "LTX2VideoTransformer3DModel"))
    return DFX_LTX2;
  if (tpxp_arch_is(arch, "QwenImageTransformer2DModel"))
    return DFX_QWENIMAGE;
  return DFX_NONE;
}

static int not_served(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                      const char *arch) {
  return tpxp_not_served(host, ctx, "diffusion", arch);
}

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

TPX_PLUGIN_EXPORT int get_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                               const tpx_plugin_plan_request *req) {
  int st = tpxp_plain_plan_request(host, ctx, req, "diffusion");
  if (st != TPX_PLUGIN_OK)
    return st;
  switch (dfx_kind_of(req->architecture)) {
  case DFX_WAN:
    return dfx_wan_plan(host, ctx);
  case DFX_HUNYUAN:
  case DFX_LTX2:
    /* No TP at all: an empty plan at every tp. */
    return host->plan_set_function == NULL
               ? TPX_PLUGIN_OK
               : host->plan_set_function(
                     ctx, dfx_kind_of(req->architecture) == DFX_HUNYUAN
                              ? "none (HunyuanParallelizationStrategy applies "
                                "no tensor parallelism)"
                              : "none (LTX2ParallelizationStrategy, "
                                "Hunyuan's flow, applies no tensor "
                                "parallelism)");
  case DFX_QWENIMAGE:
    /* No plan function upstream: the Default flow's next step, the Hugging
     * Face plan, finds the class's own Diffusers _tp_plan (bundled by the
     * host), so declining here is what upstream does. */
    return tpxp_fail(host, ctx, TPX_PLUGIN_REFUSED,
                     "QwenImageTransformer2DModel has no plan function "
                     "upstream (QwenImageEdit is a Default subclass): the "
                     "Default flow takes the class's own Diffusers _tp_plan "
                     "in its Hugging Face plan step");
  default:
    return not_served(host, ctx, req->architecture);
  }
}

TPX_PLUGIN_EXPORT int tpx_plugin_get_skeleton(const tpx_plugin_host *host,
                                              tpx_plugin_ctx *ctx,
                                              const char *architecture) {
  if (host == NULL)
    return TPX_PLUGIN_INVALID;
  switch (dfx_kind_of(architecture)) {
  case DFX_WAN:
    return dfx_wan_skeleton(host, ctx);
  case DFX_HUNYUAN:
    return dfx_hunyuan_skeleton(host, ctx);
  case DFX_LTX2:
    return dfx_ltx2_skeleton(host, ctx);
  case DFX_QWENIMAGE:
    return dfx_qwenimage_skeleton(host, ctx);
  default:
    return not_served(host, ctx, architecture);
  }
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
TPX_PLUGIN_EXPORT int tpx_plugin_validate(const tpx_plugin_host *host,
                                          tpx_plugin_ctx *ctx,
                                          const tpx_plugin_plan_request *req) {
  char msg[TPXP_MSG_MAX];
  dfx_kind kind;
  int st = TPX_PLUGIN_OK;
  if (host == NULL)
    return TPX_PLUGIN_INVALID;
  if (!tpxp_request_ok(req))
    return tpxp_fail(host, ctx, TPX_PLUGIN_INVALID,
                     "diffusion: malformed validate request");
  kind = dfx_kind_of(req->architecture);
  if (kind == DFX_NONE)
    return not_served(host, ctx, req->architecture);
  if (host->diagnose == NULL)
    return TPX_PLUGIN_OK;
  if (req->sequence_parallel && kind != DFX_QWENIMAGE)
    st = host->diagnose(ctx, TPX_PLUGIN_DIAG_INFO, "sequence-parallel-ignored",
                        "the strategy for this Diffusers transformer ignores "
                        "sequence_parallel (and any tp_shard_plan)");
  if (st == TPX_PLUGIN_OK && req->tp_size > 1 &&
      (kind == DFX_HUNYUAN || kind == DFX_LTX2)) {
    snprintf(msg, sizeof msg,
             "the %s strategy applies no tensor parallelism: every parameter "
             "is replicated over the %lld tp ranks (FSDP still shards over "
             "dp)",
             kind == DFX_HUNYUAN ? "Hunyuan" : "LTX2", (long long)req->tp_size);
    st = host->diagnose(ctx, TPX_PLUGIN_DIAG_WARNING, "no-tensor-parallel",
                        msg);
  }
  if (st == TPX_PLUGIN_OK && kind == DFX_QWENIMAGE)
    st = qwenimage_blocks(host, ctx);
  return st;
}

/* The strategy's properties (plans.md §4.9 table). */
TPX_PLUGIN_EXPORT int tpx_plugin_strategy(const tpx_plugin_host *host,
                                          tpx_plugin_ctx *ctx,
                                          const char *architecture) {
  static const char *const wan[][2] = {
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
  static const char *const hunyuan[][2] = {
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
  static const char *const qwen[][2] = {
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
  const char *const(*kv)[2];
  size_t n, i;
  int st = TPX_PLUGIN_OK;
  if (host == NULL)
    return TPX_PLUGIN_INVALID;
  switch (dfx_kind_of(architecture)) {
  case DFX_WAN:
    kv = wan;
    n = sizeof wan / sizeof wan[0];
    break;
  case DFX_HUNYUAN:
  case DFX_LTX2:
    kv = hunyuan;
    n = sizeof hunyuan / sizeof hunyuan[0];
    break;
  case DFX_QWENIMAGE:
    kv = qwen;
    n = sizeof qwen / sizeof qwen[0];
    break;
  default:
    return not_served(host, ctx, architecture);
  }
  /* An older host has no strategy_set (and never calls this). */
  if (host->struct_size <= offsetof(tpx_plugin_host, strategy_set) ||
      host->strategy_set == NULL)
    return TPX_PLUGIN_OK;
  for (i = 0; i < n && st == TPX_PLUGIN_OK; i++)
    st = host->strategy_set(ctx, kv[i][0], kv[i][1]);
  if (st == TPX_PLUGIN_OK && dfx_kind_of(architecture) == DFX_LTX2)
    st = host->strategy_set(ctx, "name",
                            "LTX2 (LTX2ParallelizationStrategy, an identical "
                            "subclass of Hunyuan)");
  return st;
}
