/* tpx/registry.h — the plugin registry: finds, loads and calls model-family
 * plugins (sdk/include/tpx/plugin.h), and selects the plan for a model.
 *
 * A registry is an object the caller owns (the only "global" of tpx). It
 * searches TPX_PLUGIN_PATH (colon-separated; the first plugin serving an
 * architecture wins, like PATH), then the build tree, then the installed
 * plugin directory. A plugin that fails to load is recorded as refused with
 * its path and reason and never takes the host down. Lookups and plugin calls
 * are thread-safe once loading is done.
 *
 * Selection (docs/SEMANTICS.md "Plan selection"): custom plan > named plan
 * > plugin plan > HF plan (config's own tp plan, else the bundled
 * per-model_type table) > default base plan. */
#ifndef TPX_REGISTRY_H
#define TPX_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/diag.h"
#include "tpx/error.h"
#include "tpx/export.h"
#include "tpx/fsdp.h"
#include "tpx/model.h"
#include "tpx/plan.h"

TPX_BEGIN_DECLS

typedef struct tpx_registry tpx_registry;

/* Borrowed view of one loaded plugin. */
typedef struct tpx_plugin_desc {
  const char *path;
  const char *name;
  const char *version;
  const char *description;
  uint32_t abi_version;
  size_t num_architectures;
  const char *const *architectures;
  size_t num_plan_names;
  const char *const *plan_names;
  int has_skeleton, has_validate, has_fsdp_units, has_fp32_params;
} tpx_plugin_desc;

/* 1 when plugin `index` exports tpx_plugin_strategy (kept out of
 * tpx_plugin_desc, whose size is fixed), else 0. */
TPX_API int tpx_registry_plugin_has_strategy(const tpx_registry *reg,
                                             size_t index);

/* Borrowed view of one refused plugin. */
typedef struct tpx_plugin_refusal {
  const char *path;
  const char *reason;
} tpx_plugin_refusal;

/* An empty registry (no plugins loaded). */
TPX_API tpx_status tpx_registry_create(tpx_registry **out, tpx_error *err);
/* Unloads every plugin. NULL is a no-op. */
TPX_API void tpx_registry_destroy(tpx_registry *reg);

/* Probe mode (on by default; off with on = 0): before a file is loaded
 * in-process it is loaded (dlopen, register_parallel_strategy, dlclose)
 * once in a forked child, and a file whose loading or unloading crashes,
 * exits or hangs (10 s) there is refused ("crashed with SIGSEGV while
 * loading ...", a `plugin-failed` warning naming the file) instead of
 * taking the process down. Costs one fork per file; a multi-threaded
 * program should load its plugins before it starts threads (or turn the
 * probe off). */
TPX_API tpx_status tpx_registry_set_probe(tpx_registry *reg, int on,
                                          tpx_error *err);

/* Isolation mode (off by default), for in-process hosts such as `tpx plan`:
 * every plugin call made through the registry (tpx_registry_get_plan,
 * tpx_registry_build_skeleton, and get_plan / validate / FSDP units / fp32
 * parameters in tpx_select_plan) runs in a forked child, which sends its
 * result back over a pipe; the parent rebuilds it. A call that crashes,
 * aborts, exits or runs longer than `timeout_seconds` (the child is then
 * killed) fails with TPX_PLUGIN and a message naming the plugin, its path
 * and what happened ("crashed with SIGSEGV in get_plan"); selection turns
 * that into its usual plugin-failed diagnostic and fallback. Costs one
 * fork plus a JSON round trip per call (about a millisecond); a
 * multi-threaded caller should not hold locks a plugin needs while calling.
 * `timeout_seconds` must be in (0, 86400] when enabled; ignored when not.
 * Applies to plugins loaded before and after the call. */
TPX_API tpx_status tpx_registry_set_isolation(tpx_registry *reg, int enabled,
                                              double timeout_seconds,
                                              tpx_error *err);

/* Resource limits of the children of isolation mode and the load probe:
 * the address space a child may add to what it inherited (bytes; default
 * TPX_PLUGIN_MEMORY_MB from the environment, else 8 GiB) and its CPU time
 * (seconds; default none: the timeout bounds it). 0 lifts a limit. A
 * child past a limit fails with a message naming the limit. */
TPX_API tpx_status tpx_registry_set_child_limits(tpx_registry *reg,
                                                 unsigned long long max_bytes,
                                                 double max_cpu_seconds,
                                                 tpx_error *err);

/* Load every *.so on the default search path: each $TPX_PLUGIN_PATH entry
 * (colon-separated; an entry that cannot be searched is a
 * `plugin-dir-unusable` warning naming it), then the directory
 * tpx_registry_default_dir names (and its subdirectories). Failures are
 * recorded as refusals, not returned as errors. */
TPX_API tpx_status tpx_registry_load_default(tpx_registry *reg,
                                             tpx_error *err);
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

/* The plugin directory searched after $TPX_PLUGIN_PATH, decided at run time
 * from where libtpx was loaded: the build tree's plugins/ when libtpx is
 * loaded from its build tree, else <libdir>/tpx/plugins next to the loaded
 * libtpx.so (the configured one if that cannot be told). Written to `buf`;
 * `*build_tree` (may be NULL) is set to 1 for the build tree. */
TPX_API tpx_status tpx_registry_default_dir(char *buf, size_t size,
                                            int *build_tree, tpx_error *err);
/* Load every *.so in one directory (and its direct subdirectories). A
 * directory that is missing, not a directory or unreadable is not an error:
 * it is recorded as a `plugin-dir-unusable` warning (subject: the path) in
 * tpx_registry_diagnostics. */
TPX_API tpx_status tpx_registry_load_dir(tpx_registry *reg, const char *dir,
                                         tpx_error *err);
/* Load one plugin file. A refused plugin returns TPX_PLUGIN (or
 * TPX_ABI_MISMATCH) with the reason, and is also recorded as refused. */
TPX_API tpx_status tpx_registry_load_file(tpx_registry *reg, const char *path,
                                          tpx_error *err);

TPX_API size_t tpx_registry_num_plugins(const tpx_registry *reg);
TPX_API tpx_status tpx_registry_plugin(const tpx_registry *reg, size_t index,
                                       tpx_plugin_desc *out, tpx_error *err);
TPX_API size_t tpx_registry_num_refused(const tpx_registry *reg);
TPX_API tpx_status tpx_registry_refused(const tpx_registry *reg, size_t index,
                                        tpx_plugin_refusal *out,
                                        tpx_error *err);
/* Warnings collected while loading (e.g. duplicate architecture, naming both
 * files). Borrowed. */
TPX_API const tpx_diag_list *tpx_registry_diagnostics(const tpx_registry *reg);

/* Index of the plugin serving `architecture` (first loaded wins), or -1.
 * Matched as strings: exactly against every registered name first, then a
 * bare class name against the last dotted component of qualified names. */
TPX_API int64_t tpx_registry_find(const tpx_registry *reg,
                                  const char *architecture);

/* Fill `model` with the skeleton the plugin serving its primary architecture
 * builds from the model's config. TPX_NOT_FOUND if no plugin serves it or
 * the plugin has no skeleton capability. */
TPX_API tpx_status tpx_registry_build_skeleton(const tpx_registry *reg,
                                               tpx_model *model,
                                               tpx_error *err);

/* Ask plugin `index` for its plan directly (no fallback). A refusal is
 * TPX_PLUGIN with the plugin's message. *out is a new plan. */
TPX_API tpx_status tpx_registry_get_plan(const tpx_registry *reg, size_t index,
                                         const tpx_model *model,
                                         const char *architecture,
                                         const char *plan_name,
                                         int sequence_parallel,
                                         int64_t tp_size, tpx_plan **out,
                                         tpx_error *err);

/* ---- selection ---- */

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
  int64_t tp_size;          /* >= 1 */
  int sequence_parallel;    /* 0 or 1 */
  const tpx_plan *custom;   /* a custom plan, or NULL (borrowed) */
  const char *plan_name;    /* a named plugin plan, or NULL */
} tpx_select_options;

#define TPX_SELECT_OPTIONS_INIT                                                \
  { sizeof(tpx_select_options), 1, 0, NULL, NULL }

typedef struct tpx_selection tpx_selection;

/* Choose the plan for `model` (docs/SEMANTICS.md "Plan selection") and run
 * the selection-time validation (validate_tp_mesh, Nemotron-NAS, plugin
 * validate). Problems are added to `diags` (e.g. remote-code-no-plan,
 * heads-not-divisible); the return is an error only when no plan at all can
 * be produced or on bad arguments. */
TPX_API tpx_status tpx_select_plan(const tpx_registry *reg,
                                   const tpx_model *model,
                                   const tpx_select_options *opts,
                                   tpx_selection **out, tpx_diag_list *diags,
                                   tpx_error *err);
TPX_API void tpx_selection_destroy(tpx_selection *sel);
/* Borrowed; valid while the selection lives. */
TPX_API const tpx_plan *tpx_selection_plan(const tpx_selection *sel);
TPX_API tpx_plan_source tpx_selection_source(const tpx_selection *sel);
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
/* Parameter patterns the plugin keeps in fp32 (may be 0). */
TPX_API size_t tpx_selection_num_fp32(const tpx_selection *sel);
TPX_API const char *tpx_selection_fp32(const tpx_selection *sel, size_t i);
/* The upstream strategy's properties the plugin described
 * (tpx_plugin_strategy), as "key=value" lines in the order first set (may be
 * 0); tpx_selection_strategy_value gives the value of one key or NULL. Keys:
 * sdk/include/tpx/plugin.h (strategy_set). */
TPX_API size_t tpx_selection_num_strategy(const tpx_selection *sel);
TPX_API const char *tpx_selection_strategy(const tpx_selection *sel,
                                           size_t i);
TPX_API const char *tpx_selection_strategy_value(const tpx_selection *sel,
                                                 const char *key);
/* All of them as one borrowed array of tpx_selection_num_strategy lines
 * (NULL when there are none), ready for tpx_report_options.strategy. */
TPX_API const char *const *tpx_selection_strategy_lines(
    const tpx_selection *sel);
/* The strategy's mixed-precision default (keys mp_param_dtype,
 * mp_reduce_dtype, mp_output_dtype; "none" = None) written over *mp, field
 * by field, where the strategy gives one; the others are left as they are
 * (the Default strategy's bf16 / f32 / f32 is the caller's starting point).
 * TPX_INVALID_ARGUMENT naming the key and the plugin for a value tpx cannot
 * parse (*mp unchanged then). */
TPX_API tpx_status tpx_selection_strategy_mp(const tpx_selection *sel,
                                             tpx_mp_policy *mp,
                                             tpx_error *err);
/* FSDP units the plugin chose, bottom-up (none = use tpx's rule).
 * *reshard_after_forward (may be NULL) is 0 or 1, or -1 for tpx's rule. */
TPX_API size_t tpx_selection_num_fsdp_units(const tpx_selection *sel);
TPX_API const char *tpx_selection_fsdp_unit(const tpx_selection *sel,
                                            size_t i,
                                            int *reshard_after_forward);

TPX_END_DECLS

#endif /* TPX_REGISTRY_H */
