/* plan_setup.h — the path from command-line options to a sharding, shared
 * by `tpx plan`, `tpx shard` (and whatever else must select the plan exactly
 * as `tpx plan` does): config -> registry -> module tree (skeleton and/or
 * safetensors headers) -> custom or named plan -> selection -> mesh
 * (dp_replicate, dp_shard, tp) -> sharding. Not the report. */
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
} tpx_cli_plan_args;

typedef struct tpx_cli_planned {
  tpx_model *model;
  tpx_registry *reg;
  tpx_plan *custom;
  tpx_selection *sel;
  tpx_diag_list *diags;
  tpx_mesh *mesh;
  tpx_sharding *sh;
  const char **units;
  int *reshard;
  const char **fp32;
  /* How the module tree was built (a trace line), or "". */
  char model_trace[1024];
} tpx_cli_planned;

/* Builds everything; `cmd` ("plan", "shard") prefixes the messages printed
 * on stderr. 0 on success, else 1 (message printed). Free with
 * tpx_cli_planned_free in both cases. */
int tpx_cli_plan_build(const char *cmd, const tpx_cli_plan_args *a,
                       tpx_cli_planned *out);
void tpx_cli_planned_free(tpx_cli_planned *p);

#endif
