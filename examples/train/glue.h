/* glue.h — creating and feeding one rank's glue (glue_rt.c,
 * or glue_local.c for tpx-train-ref; glue_tp.c for both); the per-step
 * calls the model makes are declared in train.h. */
#ifndef TPX_TRAIN_GLUE_H
#define TPX_TRAIN_GLUE_H
#include "train.h"

typedef struct tr_rank_setup {
  const tpx_model *model;
  const tpx_sharding *sharding;
  tpx_comm *world_comm; /* NULL at world 1 without a backend */
  int64_t world;
  int64_t rank;
  /* context parallelism: how the sequence is cut over the sharding mesh's
   * cp dim (absent: cp 1) */
  tpx_cp_layout cp_layout;
  int offload; /* tpx_runtime_options.offload (--offload) */
} tr_rank_setup;

tpx_status tr_rank_create(const tr_rank_setup *su, tr_rank **out,
                          tpx_error *err);
void tr_rank_destroy(tr_rank *r);
/* Read this rank's slice (tpx_sharding_local_slice) of every parameter
 * through the checkpoint reader (shared by the ranks' threads): only its
 * own bytes, straight into its storage. */
tpx_status tr_rank_load(tr_rank *r, const tpx_checkpoint_reader *rd,
                        tpx_error *err);
/* The full (gathered) parameter p, or with `grad` its gradient (after a
 * step's backward: reduced, pre-clip); collective: every rank calls it,
 * `full` is filled on every rank. */
tpx_status tr_rank_gather(tr_rank *r, int64_t p, int grad, float *full,
                          tpx_error *err);
int tr_rank_is_root(const tr_rank *r);
/* How long this rank spent so far in tpx's calls that communicate (TP
 * transitions, FSDP unshard / gradient reduction, grad norm), and of
 * those in context parallelism's K/V all-gathers and reduce-scatters
 * (tpx_mesh_comm_time: the library clocks its own calls). */
tpx_comm_time tr_rank_comm_time(const tr_rank *r);
double tr_now(void);
/* What this rank's runtime allocated, in bytes (tpx_runtime_memory_stats):
 * the sharded parameters, gradients and optimizer state now, the peak of
 * the unsharded parameters and all-gather staging (peak[GATHER]), the peak
 * of everything the runtime held at once, and the peaks of its device part
 * and of its host part (the offloaded state; 0 without --offload). */
typedef tpx_runtime_memory tr_memory;
/* 1 and *out filled; 0 without a runtime (tpx-train-ref keeps its own
 * storage and reports none). */
int tr_rank_memory(const tr_rank *r, tr_memory *out);
#endif
