/* plan_extra.h — the parts of `tpx plan` beyond the report, each in its own
 * file: training-memory options and the per-rank slices (plan_extra.c), the
 * sharding built from a selection (plan_shard.c), the mesh advisor
 * (cmd_plan_advise.c) and the block picture (show.c). cmd_plan.c calls in. */
#ifndef TPX_TOOLS_PLAN_EXTRA_H
#define TPX_TOOLS_PLAN_EXTRA_H

#include <stdint.h>
#include <stdio.h>

#include "tpx/tpx.h"

typedef struct plan_extra {
  tpx_memory_options mem; /* --optimizer --batch --seq
                             --activation-checkpointing */
  int seq_given;
  int64_t gpus;      /* --gpus N: the mesh advisor; 0 = off */
  int64_t gpu_mem;   /* --gpu-mem SIZE in bytes (default 80 GiB) */
  int gpu_mem_given; /* --gpu-mem was on the command line */
  int64_t host_mem;  /* --host-mem SIZE: host bytes per rank for offload
                        (default 128 GiB) */
  int host_mem_given;
  const char *show; /* --show PATTERN */
  int64_t rank;     /* --rank R; -1 = off */
} plan_extra;

void plan_extra_init(plan_extra *x);
/* One argument of argv: 0 not ours, 1 a flag, 2 an option and its value
 * (consumed), -1 bad (message printed). */
int plan_extra_arg(plan_extra *x, const char *arg, const char *val);
/* The help lines of these options. */
void plan_extra_usage(FILE *out);
/* Checks across options once all are parsed; -1 bad (printed). */
int plan_extra_check(const plan_extra *x, int64_t tp, int64_t dp_shard,
                     int64_t dp_replicate, const char *format);

/* The sharding of `model` on `mesh` with the selection's plan, FSDP units
 * and fp32 parameters (fsdp: 0 = TP only); FSDP shards over dp_shard_cp
 * when the mesh has a cp dim, else over dp_shard. */
tpx_status plan_shard(const tpx_model *model, const tpx_selection *sel,
                      const tpx_mesh *mesh, int fsdp, tpx_sharding **out,
                      tpx_error *err);
/* The (dp_replicate, dp_shard, cp, tp) mesh with its flattened views
 * (tpx_mesh_create_fsdp2; no cp dim when cp <= 1). */
tpx_status plan_mesh(int64_t dpr, int64_t dps, int64_t cp, int64_t tp,
                     tpx_mesh **out, tpx_error *err);

/* --gpus: every mesh of x->gpus ranks, ranked (the rule is printed with
 * the advice); prints the advice (text or JSON), the best mesh as a
 * runnable `tpx plan` command built from `pa` (the command line's inputs),
 * and returns the exit code (0 when some mesh fits). */
struct tpx_cli_plan_args;
int plan_advise(const struct tpx_cli_plan_args *pa, const tpx_registry *reg,
                const tpx_model *model, const tpx_select_options *base,
                const plan_extra *x, int json);

/* The cp checks that need the memory options (cmd_plan_cp.c): --seq not
 * divisible by 2 x cp is an error-level diagnostic added to `diags`. 0, or
 * -1 out of memory. */
int plan_cp_diags(const struct tpx_cli_plan_args *pa, const plan_extra *x,
                  tpx_diag_list *diags);

/* --show: every parameter matching x->show drawn as a grid of its blocks
 * labelled with the ranks holding them, to `out`; color when `color`.
 * Returns the number of parameters drawn (0: none matched). */
size_t plan_show(FILE *out, const tpx_sharding *sh, const char *pattern,
                 int color);

#endif /* TPX_TOOLS_PLAN_EXTRA_H */
