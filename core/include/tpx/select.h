/* tpx/select.h — plan selection: which tensor-parallel plan a model gets,
 * and what else the plugin serving it chose (FSDP units, fp32 parameters,
 * the upstream strategy's properties). The result, a tpx_selection, is the
 * object handed whole to tpx_sharding_create (tpx_sharding_options.selection)
 * and to the reports (tpx_report_options.selection).
 *
 * Order (docs/SEMANTICS.md "Plan selection"): custom plan > named plan >
 * plugin plan > Hugging Face plan (the config's own tp plan, else the
 * bundled per-model_type table, built as transformers 5.25 builds it and
 * used only where NeMo Automodel 0.7.0 translates every style, which a
 * transformers 5 plan's lm_head colwise_gather_output and embed_tokens
 * embedding_rowwise prevent) > default base plan, then the plugin's
 * post-processing declarations, validate_tp_mesh and the plugin's
 * capabilities.
 *
 * Not the registry (tpx/registry.h finds and loads plugins) and not plan
 * application (tpx/sharding.h). */
#ifndef TPX_SELECT_H
#define TPX_SELECT_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/diag.h"
#include "tpx/error.h"
#include "tpx/fsdp.h"
#include "tpx/model.h"
#include "tpx/plan.h"

TPX_BEGIN_DECLS

/* The plugin registry (tpx/registry.h). */
typedef struct tpx_registry tpx_registry;

typedef enum tpx_plan_source {
  TPX_PLAN_SOURCE_CUSTOM = 0,
  TPX_PLAN_SOURCE_PLUGIN = 1,
  TPX_PLAN_SOURCE_HF = 2,
  TPX_PLAN_SOURCE_DEFAULT = 3,
} tpx_plan_source;

/* "custom", "plugin", "hf", "default"; static. */
TPX_API const char *tpx_plan_source_name(tpx_plan_source source);

typedef struct tpx_select_options {
  size_t struct_size;
  int64_t tp_size;        /* >= 1 */
  int sequence_parallel;  /* 0 or 1 */
  const tpx_plan *custom; /* a custom plan, or NULL (borrowed) */
  const char *plan_name;  /* a named plugin plan, or NULL; "hf": the
                             model's Hugging Face plan with transformers'
                             own styles translated (`tpx plan --plan hf`) */
  /* Expert parallelism (docs/SEMANTICS.md "Expert parallelism"): >= 1; 0
   * means 1. Above 1 the selection refuses, with NeMo Automodel 0.7.0's
   * messages, what upstream refuses: a model no plugin declares a
   * moe_custom architecture for, an expert count ep does not divide, tp > 1
   * without a plugin's or a custom plan. Added after plan_name: an older,
   * shorter struct_size means 1. */
  int64_t ep;
} tpx_select_options;

#define TPX_SELECT_OPTIONS_INIT                                                \
  { sizeof(tpx_select_options), 1, 0, NULL, NULL, 1 }

typedef struct tpx_selection tpx_selection;

/* Choose the plan for `model` (docs/SEMANTICS.md "Plan selection") and run the
 * selection-time validation (validate_tp_mesh, Nemotron-NAS, plugin validate).
 * Problems are added to `diags` (e.g. remote-code-no-plan,
 * heads-not-divisible); the return is an error only when no plan at all can be
 * produced or on bad arguments. */
TPX_API tpx_status tpx_select_plan(const tpx_registry *reg,
                                   const tpx_model *model,
                                   const tpx_select_options *opts,
                                   tpx_selection **out, tpx_diag_list *diags,
                                   tpx_error *err);
TPX_API void tpx_selection_destroy(tpx_selection *sel);
/* Borrowed; valid while the selection lives. */
TPX_API const tpx_plan *tpx_selection_plan(const tpx_selection *sel);
TPX_API tpx_plan_source tpx_selection_source(const tpx_selection *sel);
/* The tp size the plan was selected and validated for
 * (tpx_select_options.tp_size); 0 for NULL. tpx_sharding_create refuses a
 * selection whose tp size is not the mesh's. */
TPX_API int64_t tpx_selection_tp_size(const tpx_selection *sel);
/* 1 when the plan is the serving plugin's own and the plugin declares that
 * upstream's strategy sums over tp the gradients the plan leaves partial on
 * replicated parameters (trait tp_grad_sync, docs/PLUGIN_ABI.md "Traits":
 * NeMo Automodel 0.7.0's Qwen3 q_norm / k_norm); tpx_sharding_create then
 * reports those parameters as one info instead of partial-grad-replicated
 * warnings. 0 otherwise and for NULL. */
TPX_API int tpx_selection_tp_grad_sync(const tpx_selection *sel);
/* Expert parallelism (docs/SEMANTICS.md "Expert parallelism"). The ep the
 * selection was made for (tpx_select_options.ep; 1 for NULL). */
TPX_API int64_t tpx_selection_ep(const tpx_selection *sel);
/* 1 when a loaded plugin declares the architecture moe_custom (upstream
 * serves it with NeMo Automodel's own MoE implementation: ep > 1 is
 * possible, tp > 1 is checked as upstream's MoE path checks it), else 0. */
TPX_API int tpx_selection_moe_custom(const tpx_selection *sel);
/* The routed-expert parameter patterns plugins declare for the
 * architecture (trait expert_param; dotted FQN patterns matched per atom,
 * dim 0 the expert dim), in declaration order; borrowed. */
TPX_API size_t tpx_selection_num_expert_params(const tpx_selection *sel);
TPX_API const char *tpx_selection_expert_param(const tpx_selection *sel,
                                               size_t i);

/* Plugin name / path; NULL when the plan is not from a plugin (a named plan
 * is source CUSTOM with its plugin's name and path). The function names the
 * plan: the plugin's plan_set_function text (else its name or the plan
 * name), "custom", "get_hf_tp_shard_plan" or "default_base_plan". */
TPX_API const char *tpx_selection_plugin_name(const tpx_selection *sel);
TPX_API const char *tpx_selection_plugin_path(const tpx_selection *sel);
TPX_API const char *tpx_selection_function(const tpx_selection *sel);
/* The trace: what was tried and why each step was taken or skipped. */
TPX_API size_t tpx_selection_trace_size(const tpx_selection *sel);
TPX_API const char *tpx_selection_trace(const tpx_selection *sel, size_t i);
/* All trace lines as one borrowed array of tpx_selection_trace_size lines
 * (NULL when there are none), ready for tpx_report_options.trace. */
TPX_API const char *const *tpx_selection_trace_lines(const tpx_selection *sel);
/* Parameter patterns the plugin keeps in fp32 (may be 0). */
TPX_API size_t tpx_selection_num_fp32(const tpx_selection *sel);
TPX_API const char *tpx_selection_fp32(const tpx_selection *sel, size_t i);
/* The upstream strategy's properties the plugin described
 * (tpx_plugin_strategy), as "key=value" lines in the order first set (may be
 * 0); tpx_selection_strategy_value gives the value of one key or NULL. Keys:
 * sdk/include/tpx/plugin.h (strategy_set). */
TPX_API size_t tpx_selection_num_strategy(const tpx_selection *sel);
TPX_API const char *tpx_selection_strategy(const tpx_selection *sel, size_t i);
TPX_API const char *tpx_selection_strategy_value(const tpx_selection *sel,
                                                 const char *key);
/* All of them as one borrowed array of tpx_selection_num_strategy lines
 * (NULL when there are none), ready for tpx_report_options.strategy. */
TPX_API const char *const *
tpx_selection_strategy_lines(const tpx_selection *sel);
/* The strategy's mixed-precision default (keys mp_param_dtype,
 * mp_reduce_dtype, mp_output_dtype; "none" = None) written over *mp, field
 * by field, where the strategy gives one; the others are left as they are
 * (the Default strategy's bf16 / f32 / f32 is the caller's starting point).
 * TPX_INVALID_ARGUMENT naming the key and the plugin for a value tpx cannot
 * parse (*mp unchanged then). */
TPX_API tpx_status tpx_selection_strategy_mp(const tpx_selection *sel,
                                             tpx_mp_policy *mp, tpx_error *err);
/* FSDP units the plugin chose, bottom-up (none = use tpx's rule).
 * *reshard_after_forward (may be NULL) is 0 or 1, or -1 for tpx's rule. */
TPX_API size_t tpx_selection_num_fsdp_units(const tpx_selection *sel);
TPX_API const char *tpx_selection_fsdp_unit(const tpx_selection *sel, size_t i,
                                            int *reshard_after_forward);

/* ---- Hugging Face tp_plan files ---- */

/* 1 when the file at `path` is meant as a Hugging Face tp_plan (as a
 * config's base_model_tp_plan / tp_plan or a class's _tp_plan): a non-empty
 * JSON object with neither of tpx-plan/1's "format" and "entries" fields
 * (tpx_plan_load_hf then checks that every value is a style string); 0
 * otherwise, also when it cannot be read. */
TPX_API int tpx_plan_file_is_hf(const char *path);
/* Read a Hugging Face tp_plan file and translate it for `model`: keys whose
 * first atom is a child of the model's root ("lm_head", "model...") are
 * used as they are (class level), the others are relative to the base
 * model and get the prefix transformers uses for the model's architecture
 * ("model" for *ForCausalLM, "model.language_model" for most VLMs); then
 * tpx_plan_from_hf_class_and_base (embed_tokens added as rowwise_rep when
 * missing; skipped strings are hf-style-skipped infos in `diags`; a string
 * with no faithful translation fails, naming the file, key and string).
 * `summary` (may be NULL) receives one line saying how it was read. */
TPX_API tpx_status tpx_plan_load_hf(const char *path, const tpx_model *model,
                                    tpx_plan **out, tpx_diag_list *diags,
                                    char *summary, size_t summary_size,
                                    tpx_error *err);

TPX_END_DECLS

#endif /* TPX_SELECT_H */
