/* plugin/plugin_view.h — what selection (core/src/select/) and the
 * conformance harness (core/src/harness/) see of the plugin area: one
 * loaded plugin (read-only), opening one, the one call request, the
 * registry's lookups, the host table and the stdout diversion around
 * plugin code, all through functions.
 *
 * The plugin's, the registry's and the call context's layout, the isolation
 * protocol and the loader's log capture stay in plugin/plugin_internal.h, which
 * only core/src/plugin/ includes. */
#ifndef TPX_PLUGIN_VIEW_H
#define TPX_PLUGIN_VIEW_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/diag.h"
#include "tpx/error.h"
#include "tpx/model.h"
#include "tpx/plan.h"
#include "tpx/plugin.h"
#include "tpx/registry.h"

/* One plugin that registered successfully (its layout: plugin_internal.h).
 * Read it through the accessors below; every string is a host copy that
 * lives as long as the plugin. */
typedef struct tpx__plugin tpx__plugin;

/* Its name ("llama") and path as found on the search path. */
const char *tpx__plugin_name(const tpx__plugin *p);
const char *tpx__plugin_path(const tpx__plugin *p);
/* The plugin's name, path, version, ABI, architectures, plan names and
 * optional entry points, as tpx_registry_plugin shows them (borrowed). */
void tpx__plugin_desc_of(const tpx__plugin *p, tpx_plugin_desc *out);
/* 1 when it exports tpx_plugin_strategy. */
int tpx__plugin_has_strategy(const tpx__plugin *p);
/* Its tpx_plugin_info.traits ("key=value"), borrowed. */
size_t tpx__plugin_num_traits(const tpx__plugin *p);
const char *tpx__plugin_trait(const tpx__plugin *p, size_t i);

/* What a call into the plugin is allowed to do. */
typedef enum tpx__plugin_op {
  TPX__OP_GET_PLAN = 1,
  TPX__OP_SKELETON = 2,
  TPX__OP_VALIDATE = 3,
  TPX__OP_FSDP_UNITS = 4,
  TPX__OP_FP32 = 5,
  TPX__OP_STRATEGY = 6, /* strings are "key=value" */
} tpx__plugin_op;

/* A growable list of owned strings (+ one int each, for FSDP units). */
typedef struct tpx__strvec {
  char **items;
  int *ints;
  size_t count, cap;
} tpx__strvec;

int tpx__strvec_push(tpx__strvec *v, const char *s, int value);
/* The entry point symbol an op calls ("get_plan", "tpx_plugin_strategy"). */
const char *tpx__plugin_op_symbol(tpx__plugin_op op);
void tpx__strvec_free(tpx__strvec *v);

/* The host table handed to every plugin (constant, one per process). */
const tpx_plugin_host *tpx__plugin_host_table(void);
/* The same table with another ABI range; the harness uses it to test
 * negotiation. *out is filled, nothing allocated. */
void tpx__plugin_host_table_with_range(uint32_t abi_min, uint32_t abi_max,
                                       tpx_plugin_host *out);

/* quiet.c: bracket every in-process run of plugin code; fd 1 points at the
 * sink (default: stderr) in between. Nestable, thread-safe. */
void tpx__quiet_begin(void);
void tpx__quiet_end(void);
/* Where diverted output goes (the harness counts it); -1: stderr. */
void tpx__quiet_sink(int fd);

/* Open `path`, resolve symbols, negotiate with the host range, validate the
 * registration. On success *out is a new plugin; on failure the reason (path
 * not included) is written to `reason` and the status returned. */
tpx_status tpx__plugin_open(const char *path, const tpx_plugin_host *host,
                            tpx__plugin **out, char *reason,
                            size_t reason_size);
void tpx__plugin_free(tpx__plugin *p);

/* One call into a plugin: what to ask (op and its arguments) and, after a
 * successful call, what came back. Fill the request half (designated
 * initialisers), call tpx__plugin_call, take the results, then
 * tpx__call_release. */
typedef struct tpx__call {
  tpx__plugin_op op;
  const tpx_model *model; /* config and module tree the plugin reads */
  const char *arch;       /* the registered string the call is for */
  const char *plan_name;  /* GET_PLAN, VALIDATE: a named plan or NULL */
  int sp;                 /* GET_PLAN, VALIDATE: sequence parallel */
  int64_t tp;             /* GET_PLAN, VALIDATE: the TP size */
  tpx_diag_list *diags;   /* VALIDATE: where the diagnostics go (or NULL) */
  /* Results, owned by the call until taken (set the field to NULL). */
  tpx_plan *plan;      /* GET_PLAN */
  char *function;      /* GET_PLAN: plan_set_function, or NULL */
  int refused;         /* the plugin declined (TPX_PLUGIN_REFUSED) */
  tpx_model *skeleton; /* SKELETON: a scratch model, not merged */
  tpx__strvec strings; /* FSDP_UNITS / FP32 / STRATEGY */
} tpx__call;

/* Make the call: in-process, or in a forked child (isolate.c's protocol
 * over child.c's runner) when the plugin's registry asked for isolation.
 * A failure names the plugin, its path and its words (or the crash, exit
 * or timeout of the child). TPX_NOT_FOUND when the plugin lacks the op's
 * optional capability. */
tpx_status tpx__plugin_call(const tpx__plugin *p, tpx__call *c, tpx_error *err);

/* Free the results still held by `c`. */
void tpx__call_release(tpx__call *c);

/* Build the plugin's skeleton for `model` and merge it in; the model is
 * untouched when the plugin fails halfway. */
tpx_status tpx__plugin_skeleton(const tpx__plugin *p, tpx_model *model,
                                const char *architecture, tpx_error *err);

/* Shorthands over tpx__plugin_call for selection (select.c). */
tpx_status tpx__plugin_get_plan(const tpx__plugin *p, const tpx_model *model,
                                const char *architecture, const char *plan_name,
                                int sequence_parallel, int64_t tp_size,
                                tpx_plan **out, char **function_out,
                                int *refused, tpx_error *err);
tpx_status tpx__plugin_validate(const tpx__plugin *p, const tpx_model *model,
                                const char *architecture, const char *plan_name,
                                int sequence_parallel, int64_t tp_size,
                                tpx_diag_list *diags, tpx_error *err);
tpx_status tpx__plugin_strings(const tpx__plugin *p, tpx__plugin_op op,
                               const tpx_model *model, const char *architecture,
                               tpx__strvec *out, tpx_error *err);

/* Registry internals used by selection and the harness. Index of the plugin
 * serving `arch` (exact match with any registered string first, then
 * matching the last component of qualified names), and the registered
 * string that matched (borrowed). -1 if none. */
int64_t tpx__registry_find_arch(const tpx_registry *reg, const char *arch,
                                const char **matched);
/* Index of the first plugin listing `plan_name` in its plan_names, or -1. */
int64_t tpx__registry_find_plan_name(const tpx_registry *reg,
                                     const char *plan_name);
const tpx__plugin *tpx__registry_at(const tpx_registry *reg, size_t index);

/* describe.c: the loaded plugins' family traits about `arch` into *out
 * (model/family_view.h; free it with tpx__family_free). */
struct tpx__family;
tpx_status tpx__registry_family(const tpx_registry *reg, const char *arch,
                                struct tpx__family *out, tpx_error *err);
/* One plugin's family traits about the model's primary architecture onto
 * the model (tpx_model_add_trait). */
tpx_status tpx__plugin_describe_model(const tpx__plugin *p, tpx_model *model,
                                      tpx_error *err);

#endif /* TPX_PLUGIN_VIEW_H */
