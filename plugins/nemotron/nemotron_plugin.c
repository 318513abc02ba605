/* nemotron_plugin.c — registration and entry points of the nemotron family
 * plugin. Dispatches by architecture to NemotronH (nemotron_h.c,
 * nemotron_h_skeleton.c) and Nemotron-Labs-Diffusion (nemotron_diffusion.c).
 * Both are reached by bare class name upstream: NemotronH through the
 * strategy registry, the diffusion model through PARALLELIZE_FUNCTIONS. */
#include "nemotron.h"

#include "tpxp_common.h"

static const char *const nemotron_architectures[] = {
    "NemotronHForCausalLM", "NemotronLabsDiffusionModel", NULL};

/* What each entry point does per architecture (the diffusion model has
 * nothing beyond validate_tp_mesh, which the host runs, and uses tpx's
 * default FSDP rule and no fp32 parameters). NemotronH: sequence
 * parallelism refused and a tied head left unsynced, as diagnostics; every
 * decoder block its own FSDP unit. */
static const tpxp_arch_ops nemotron_ops[] = {
    {.bare = "NemotronHForCausalLM",
     .plan = nemotron_h_plan,
     .skeleton = nemotron_h_skeleton,
     .validate = nemotron_h_validate,
     .fsdp_units = nemotron_h_fsdp_units,
     .fp32 = nemotron_h_fp32_params},
    {.bare = "NemotronLabsDiffusionModel",
     .plan = nemotron_diffusion_plan,
     .skeleton = nemotron_diffusion_skeleton},
};
static const tpxp_family nemotron = {"nemotron", nemotron_ops,
                                     TPXP_N_OF(nemotron_ops)};

/* NemotronH's strategy has its own flow: no validate_tp_mesh, and
 * tp_shard_plan ignored. */
static const char *const nemotron_traits[] = {
    "own_flow=NemotronHForCausalLM",
    /* NeMo Automodel's own NemotronH class names the tree model.* where the
     * checkpoint says backbone.*, and keeps each Mamba mixer's A_log, D
     * and dt_bias in mixer._fp32_params. */
    "name_alias=NemotronHForCausalLM:model.layers.*.mixer._fp32_params="
    "backbone.layers.*.mixer",
    "name_alias=NemotronHForCausalLM:model=backbone",
    /* its layer list (NeMo Automodel 0.7.0's layer table) */
    "layers=NemotronHForCausalLM:language:backbone.layers,model.layers", NULL};

TPX_PLUGIN_EXPORT int register_parallel_strategy(const tpx_plugin_host *host,
                                                 tpx_plugin_info *info) {
  static const tpxp_plugin_desc desc = {
      .name = "nemotron",
      .version = "1.0.0",
      .description =
          "NemotronH hybrid Mamba2/attention/MLP strategy (lm_head + MLP "
          "blocks; sequence parallel refused) and Nemotron-Labs-Diffusion",
      .architectures = nemotron_architectures,
      .plans = NULL,
      .traits = nemotron_traits,
  };
  return tpxp_register(host, info, &desc);
}

TPXP_EXPORT_GET_PLAN(nemotron)
TPXP_EXPORT_SKELETON(nemotron)
TPXP_EXPORT_VALIDATE(nemotron)
TPXP_EXPORT_FSDP_UNITS(nemotron)
TPXP_EXPORT_FP32(nemotron)
