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
/* Where this rank's slice (tpx_sharding_local_slice) of parameter p lives,
 * f32, for tpx_checkpoint_read_rank; data NULL for a tied alias. */
tpx_checkpoint_dest tr_rank_dest(tr_rank *r, int64_t p);
/* The full (gathered) parameter p; collective: every rank calls it, `full`
 * is filled on every rank. */
tpx_status tr_rank_gather(tr_rank *r, int64_t p, float *full, tpx_error *err);
/* The same for its gradient (after a step's backward: reduced, pre-clip). */
tpx_status tr_rank_gather_grad(tr_rank *r, int64_t p, float *full,
                               tpx_error *err);
int tr_rank_is_root(const tr_rank *r);
/* Wall seconds this rank spent so far in collectives (TP transitions, FSDP
 * unshard / gradient reduction, grad norm); 0 without a runtime. */
double tr_rank_comm_seconds(const tr_rank *r);
/* Of those, the seconds in context parallelism's K/V all-gathers and
 * reduce-scatters. */
double tr_rank_cp_seconds(const tr_rank *r);
double tr_now(void);
/* What this rank's runtime allocated, in bytes (tpx_runtime_allocated_bytes
 * and _peak_bytes): the sharded parameters, gradients and optimizer state
 * now, the peak of the unsharded parameters and all-gather staging
 * (gather_peak), and the peak of everything the runtime held at once; and
 * (tpx_runtime_space_bytes) the peaks of its device part and of its host
 * part (the offloaded state; 0 without --offload). */
typedef struct tr_memory {
  int64_t params, grads, optimizer, gather_peak, peak;
  int64_t device_peak, host_peak;
} tr_memory;
/* 1 and *out filled; 0 without a runtime (tpx-train-ref keeps its own
 * storage and reports none). */
int tr_rank_memory(const tr_rank *r, tr_memory *out);
#endif
