/* tpx/registry.h — the plugin registry: finds, loads and calls model-family
 * plugins (sdk/include/tpx/plugin.h). Plan selection (tpx_select_plan) is
 * tpx/select.h, included here so older callers keep compiling.
 *
 * A registry is an object the caller owns (the only "global" of tpx). It
 * searches TPX_PLUGIN_PATH (colon-separated; the first plugin serving an
 * architecture wins, like PATH), then the build tree, then the installed
 * plugin directory. A plugin that fails to load is recorded as refused with
 * its path and reason and never takes the host down. Lookups and plugin calls
 * are thread-safe once loading is done.
 */
#ifndef TPX_REGISTRY_H
#define TPX_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/diag.h"
#include "tpx/error.h"
#include "tpx/fsdp.h"
#include "tpx/model.h"
#include "tpx/plan.h"
#include "tpx/select.h"

TPX_BEGIN_DECLS

/* tpx_registry is declared in tpx/select.h. */

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
TPX_API tpx_status tpx_registry_load_default(tpx_registry *reg, tpx_error *err);
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

/* Give `model` what the loaded plugins declare about its primary
 * architecture beyond their plans (tpx_model_add_trait: its layer lists,
 * where its head counts live, ...). tpx_registry_build_skeleton does it
 * itself; call it for a model read from config.json and safetensors
 * headers. TPX_OK when no plugin declares anything about it. */
TPX_API tpx_status tpx_registry_describe_model(const tpx_registry *reg,
                                               tpx_model *model,
                                               tpx_error *err);

/* Ask plugin `index` for its plan directly (no fallback). A refusal is
 * TPX_PLUGIN with the plugin's message. *out is a new plan. */
TPX_API tpx_status tpx_registry_get_plan(const tpx_registry *reg, size_t index,
                                         const tpx_model *model,
                                         const char *architecture,
                                         const char *plan_name,
                                         int sequence_parallel, int64_t tp_size,
                                         tpx_plan **out, tpx_error *err);

TPX_END_DECLS

#endif /* TPX_REGISTRY_H */
