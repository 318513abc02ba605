/* gemma3_plugin.c — registration and entry points of the gemma3 family
 * plugin (register_parallel_strategy, get_plan, tpx_plugin_get_skeleton).
 * The plans live in gemma3_plan.c, the skeletons in gemma3_skeleton.c
 * (Gemma3) and gemma4_skeleton.c (Gemma4). */
#include "gemma3.h"

#include <string.h>

#include "tpxp_common.h"

/* Every name a model class reaches Automodel under (docs/SEMANTICS.md "Plan
 * selection"): qualified HF names as PARALLELIZE_FUNCTIONS keys them, the bare
 * names a config.json's "architectures" carries, and the NeMo Gemma4 class (the
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

/* The family facts (docs/PLUGIN_ABI.md "Traits"): the VLMs' layer lists
 * (NeMo Automodel 0.7.0's layer table; Gemma4's has no vision list), head
 * counts in text_config, Gemma3's Hugging Face tp plan under its language
 * model (model.model.language_model in the conditional-generation class). */
static const char *const gemma3_traits[] = {
    "layers=Gemma3ForConditionalGeneration:language:"
    "model.language_model.layers,language_model.model.layers",
    "layers=Gemma3ForConditionalGeneration:vision:"
    "model.vision_tower.vision_model.encoder.layers,"
    "model.vision_tower.encoder.layers,"
    "vision_tower.vision_model.encoder.layers",
    "text_config_heads=Gemma3ForConditionalGeneration",
    "hf_prefix=Gemma3ForConditionalGeneration:model.language_model",
    "layers=Gemma4ForConditionalGeneration:language:"
    "model.language_model.layers",
    "text_config_heads=Gemma4ForConditionalGeneration",
    NULL};

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
      .traits = gemma3_traits,
  };
  return tpxp_register(host, info, &desc);
}

/* Upstream, the Gemma4 strategy raises before any plan exists; a host that
 * falls back to another plan source after our refusal still reports it
 * through gemma4_validate's diagnostics. Gemma3 has nothing beyond
 * validate_tp_mesh, which the host runs itself. */
static const tpxp_arch_ops gemma3_ops[] = {
    {.bare = "Gemma3ForCausalLM",
     .plan = gemma3_plan,
     .skeleton = gemma3_skeleton},
    {.bare = "Gemma3ForConditionalGeneration",
     .plan = gemma3_plan,
     .skeleton = gemma3_skeleton},
    {.bare = "Gemma4ForConditionalGeneration",
     .plan = gemma4_plan,
     .skeleton = gemma4_skeleton,
     .validate = gemma4_validate},
};
static const tpxp_family gemma3 = {"gemma3", gemma3_ops, TPXP_N_OF(gemma3_ops)};

TPXP_EXPORT_GET_PLAN(gemma3)
TPXP_EXPORT_SKELETON(gemma3)
TPXP_EXPORT_VALIDATE(gemma3)
