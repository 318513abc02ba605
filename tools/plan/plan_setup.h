/* plan_setup.h — the path from command-line options to a sharding, shared
 * by `tpx plan`, `tpx shard` (and whatever else must select the plan exactly
 * as `tpx plan` does): config -> registry -> module tree (skeleton and/or
 * safetensors headers) -> custom or named plan -> selection -> mesh
 * (dp_replicate, dp_shard, [cp,] tp; with --ep the MoE mesh beside it) ->
 * sharding. Not the report. */
#ifndef TPX_TOOLS_PLAN_SETUP_H
#define TPX_TOOLS_PLAN_SETUP_H

#include <stdint.h>

#include "tpx/tpx.h"

/* Seconds a plugin call may take before its child is killed. */
#define PLUGIN_TIMEOUT_S 30

typedef struct tpx_cli_plan_args {
  const char *config, *weights, *plan;
  int64_t tp, dp_shard, dp_replicate;
  int sp, fsdp, isolate;
  /* --dtype: the config's torch_dtype replaced before the skeleton is built
   * (the parameters' dtype of a config-only plan; plugins' fp32 parameters
   * keep fp32), or NULL. Not with weights (cli_check_dtype). */
  const char *dtype;
  /* --cp: the context-parallel size; 0 or 1 = none (the mesh keeps its
   * three dims, docs/SEMANTICS.md "Context parallelism"). */
  int64_t cp;
  /* argv[0] as the user ran it (the advisor's commands start with it), or
   * NULL for "tpx". */
  const char *prog;
  /* --ep: expert parallelism (docs/SEMANTICS.md "Expert parallelism"); 0 or
   * 1 = none. The MoE mesh (ep_shard, ep) is built over the same ranks. */
  int64_t ep;
} tpx_cli_plan_args;

/* --dtype VALUE for command `cmd`: 0 when VALUE is a dtype tpx parses and no
 * --weights is given; else -1 with a message printed. */
int cli_check_dtype(const char *cmd, const char *dtype, const char *weights);

/* `fp8-checkpoint` (tools/plan/plan_fp8.c): a warning when the model holds FP8
 * block-quantized weights of the checkpoint (tpx_model_num_quantized).
 * 0, or -1 out of memory. */
int cli_fp8_diag(const tpx_model *model, tpx_diag_list *diags);

typedef struct tpx_cli_planned {
  tpx_model *model;
  tpx_registry *reg;
  tpx_plan *custom;
  tpx_select_options so; /* tp, sp, custom or named plan (after prepare) */
  tpx_selection *sel;
  tpx_diag_list *diags;
  tpx_mesh *mesh;
  tpx_sharding *sh;
  /* How the module tree was built (a trace line), or "". */
  char model_trace[1024];
  /* How a --plan file was read (tpx-plan/1 or a translated Hugging Face
   * tp_plan; a trace line), or "". */
  char plan_trace[1024];
} tpx_cli_planned;

/* Builds everything; `cmd` ("plan", "shard") prefixes the messages printed
 * on stderr. 0 on success, else the exit status (message printed): 2 when
 * an input named on the command line cannot be used (config, weights or
 * plan file missing, unreadable or malformed; a plan name no plugin
 * serves), 1 otherwise. Free with tpx_cli_planned_free in both cases. The
 * two stages below return the same. */
int tpx_cli_plan_build(const char *cmd, const tpx_cli_plan_args *a,
                       tpx_cli_planned *out);
/* The same in two stages, for callers that stop in between (the mesh
 * advisor): prepare = config, registry, module tree, custom plan and the
 * selection options; finish = selection, mesh and sharding. */
int tpx_cli_plan_prepare(const char *cmd, const tpx_cli_plan_args *a,
                         tpx_cli_planned *out);
int tpx_cli_plan_finish(const char *cmd, const tpx_cli_plan_args *a,
                        tpx_cli_planned *p);
void tpx_cli_planned_free(tpx_cli_planned *p);

#endif
