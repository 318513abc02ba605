/* gpu_check.c — tpx-gpu-check, the program tools/gpu-check.sh runs on a
 * machine with an NVIDIA GPU: the cuda memory space and the local and nccl
 * backends on device memory against host memory.
 *
 *   tpx-gpu-check [GROUP...]   groups: ops big coll nccl fsdp bench
 *                              (default: all, in that order)
 *   tpx-gpu-check --sim [G...] ops, coll and fsdp with the sim space
 *                              standing in for the GPU: the harness checks
 *                              itself on a CPU (a meson test wherever this
 *                              builds)
 *
 * Each failing check prints a line, each group one summary line:
 *   "gpu-check <group>: PASS (<n> checks)" or "FAIL (<k> of <n> checks)".
 * Exit 0 when every check passed, 1 otherwise, 77 (with the reason)
 * when no usable GPU is present. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "device/cuda_api.h"
#include "gpu_check.h"

int gc_sim;

void gc_check(gc_group *g, int ok, const char *fmt, ...) {
  if (ok) {
    g->pass++;
    return;
  }
  g->fail++;
  va_list ap;
  va_start(ap, fmt);
  printf("FAIL %s: ", g->name);
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  fflush(stdout);
}

void gc_note(gc_group *g, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g->note, sizeof g->note, fmt, ap);
  va_end(ap);
}

static const char *const groups[] = {"ops",  "big",  "coll",
                                     "nccl", "fsdp", "bench"};
enum { NGROUPS = sizeof groups / sizeof groups[0] };

static void run_group(gc_group *g, const tpx__memspace *cu, size_t free_b) {
  if (!strcmp(g->name, "ops"))
    gc_ops_run(g, cu);
  if (!strcmp(g->name, "big"))
    gc_big_run(g, cu, free_b);
  if (!strcmp(g->name, "coll"))
    gc_coll_run(g);
  if (!strcmp(g->name, "nccl"))
    gc_nccl_run(g);
  if (!strcmp(g->name, "fsdp"))
    gc_fsdp_run(g);
  if (!strcmp(g->name, "bench")) {
    gc_bench_run(g, cu);
    gc_fsdp_bench(g);
  }
}

/* ops, coll and fsdp with the sim space as the device: every comparison
 * must hold. */
static int self_test(int argc, char **argv) {
  static const char *const names[] = {"ops", "coll", "fsdp"};
  int failed = 0;
  gc_sim = 1;
  for (int i = 0; i < 3; i++) {
    int wanted = argc < 3;
    for (int a = 2; a < argc; a++) wanted |= !strcmp(argv[a], names[i]);
    if (!wanted)
      continue;
    gc_group g = {names[i], 0, 0, ""};
    if (i == 0)
      gc_ops_run(&g, &tpx__ms_sim);
    if (i == 1)
      gc_coll_run(&g);
    if (i == 2)
      gc_fsdp_run(&g);
    printf("gpu-check %-5s (sim space, harness self-test): %s (%d/%d)\n",
           g.name, g.fail ? "FAIL" : "PASS", g.pass, g.pass + g.fail);
    failed += g.fail;
  }
  return failed ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "--sim"))
    return self_test(argc, argv);
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count < 1) {
    printf("SKIP gpu-check: no usable GPU (%s)\n",
           e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device");
    return 77;
  }
  struct cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  size_t free_b = 0, total_b = 0;
  cudaMemGetInfo(&free_b, &total_b);
  printf("# GPU 0: %s, compute capability %d.%d, %.1f GiB (%.1f free)\n",
         prop.name, prop.major, prop.minor, (double)total_b / (1 << 30),
         (double)free_b / (1 << 30));
  tpx__memspace *cu = NULL;
  tpx_error err = {0};
  if (tpx__ms_cuda_create(&cu, 0, &err) != TPX_OK) {
    printf("SKIP gpu-check: %s\n", err.message);
    return 77;
  }
  int failed = 0;
  for (int i = 0; i < NGROUPS; i++) {
    int wanted = argc < 2;
    for (int a = 1; a < argc; a++) wanted |= !strcmp(argv[a], groups[i]);
    if (!wanted)
      continue;
    gc_group g = {groups[i], 0, 0, ""};
    run_group(&g, cu, free_b);
    failed += g.fail;
    printf("gpu-check %-5s: %s (%d/%d checks passed)%s%s\n", g.name,
           g.fail ? "FAIL" : "PASS", g.pass, g.pass + g.fail,
           g.note[0] ? "; " : "", g.note);
    fflush(stdout);
  }
  tpx__ms_cuda_destroy(cu);
  return failed ? 1 : 0;
}
