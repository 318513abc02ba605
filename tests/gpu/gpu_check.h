/* gpu_check.h — the pieces of tpx-gpu-check (tools/gpu-check.sh's
 * program): a group of checks prints one summary line; each failing check
 * prints its own line to the log first. */
#ifndef TPX_TESTS_GPU_CHECK_H
#define TPX_TESTS_GPU_CHECK_H

#include <stddef.h>

#include "device/kernels.h"

typedef struct gc_group {
  const char *name;
  int pass, fail;
  char note[200]; /* why a part was skipped, for the summary line */
} gc_group;

/* 1 (--sim): the sim memory space stands in for the GPU, so the harness
 * checks itself on a CPU; the "device" worlds are local sim worlds. */
extern int gc_sim;

/* Count one check; print `fmt` when it failed. */
void gc_check(gc_group *g, int ok, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A remark for the summary line (e.g. a part skipped for memory). */
void gc_note(gc_group *g, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* gpu_ops.c: every op and kernel, cuda space vs host space. */
void gc_ops_run(gc_group *g, const tpx__memspace *cu);
/* gpu_ops.c: the streaming kernels at n > 2^31 (skipped, with a note,
 * when free_bytes is too small). */
void gc_big_run(gc_group *g, const tpx__memspace *cu, size_t free_bytes);
/* gpu_coll.c: every collective on local worlds of 1..4 ranks in cuda
 * memory vs host memory; the nccl backend at world 1. */
void gc_coll_run(gc_group *g);
void gc_nccl_run(gc_group *g);
/* gpu_fsdp.c: the FSDP runtime step on local cuda worlds vs host. */
void gc_fsdp_run(gc_group *g);
/* gpu_bench.c: bandwidths as a fraction of cudaMemcpy D2D; one FSDP
 * step's compute / collective split. */
void gc_bench_run(gc_group *g, const tpx__memspace *cu);
void gc_fsdp_bench(gc_group *g);

#endif /* TPX_TESTS_GPU_CHECK_H */
