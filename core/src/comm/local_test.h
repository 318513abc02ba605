/* comm/local_test.h — test-only: a local world whose buffers live in the
 * sim memory space (device/ms_sim.c), the test double for device memory.
 * Not part of the public API: tests (and tools/gpu-check.sh's programs)
 * include it from the source tree.
 *
 * The sim space's pointers are tagged host pointers that crash when the
 * host dereferences them, so every buffer a collective, the TP calls or the
 * runtime take must come from that space (tests allocate them through
 * device/sim_tag.h). This proves that the comm path never reads a buffer
 * on the host (docs/RUNTIME.md "Device memory"). A plain host buffer passed
 * to such a world is that routing bug: it is not detected as an error but
 * faults (SIGSEGV), as device code handed a host pointer would.
 *
 * With TPX_TEST_DEVICE=cuda in the environment (tools/gpu-check.sh), the
 * same tests run with the world in CUDA device memory instead: managed
 * memory (cudaMallocManaged), so the tests' own reads and writes of the
 * world's buffers (tpx__test_dev_*) still work after a sync, while every
 * library op runs on the device.
 *
 * Also a rank whose allocations fail (fail_alloc_ranks), for the abort
 * path of a rank that fails before a collective.
 *
 * The switches reach the library through tpx__local_run_test, a private
 * entry exported for the tests only (declared here, in no public header);
 * the public tpx_local_run_opts takes tpx_local_options and nothing
 * larger. */
#ifndef TPX_COMM_LOCAL_TEST_H
#define TPX_COMM_LOCAL_TEST_H

#include <stdlib.h>
#include <string.h>

#include "device/sim_tag.h"
#include "tpx/comm.h"
#include "tpx_config.h"
#if TPX_HAVE_NCCL
#include "device/cuda_api.h"
#endif

TPX_BEGIN_DECLS

typedef struct tpx__local_test_options {
  tpx_local_options base; /* the public options (TPX_LOCAL_OPTIONS_INIT) */
  int sim_device_memory;  /* 1: the world's buffers are in the sim space */
  int cuda_managed;       /* 1: cuda_memory with cudaMallocManaged buffers */
  /* Bit r set: every buffer allocation of rank r (< 32) through its comms'
   * memory space fails with TPX_NO_MEMORY (host memory only): the failure
   * a rank meets in a collective's temporaries. 0: none. */
  unsigned fail_alloc_ranks;
} tpx__local_test_options;

/* tpx_local_run_opts with the tests' switches (NULL = defaults). Exported
 * for the tests and tools/gpu-check.sh's programs; not public API. */
TPX_API tpx_status tpx__local_run_test(int nranks,
                                       const tpx__local_test_options *opts,
                                       tpx_local_fn fn, void *arg,
                                       tpx_error *err);

/* 1 when the tests' device worlds are CUDA (TPX_TEST_DEVICE=cuda) rather
 * than the sim space. */
static inline int tpx__test_device_cuda(void) {
  const char *v = getenv("TPX_TEST_DEVICE");
  return TPX_HAVE_NCCL && v && strcmp(v, "cuda") == 0;
}

/* The memory space name a test's device world reports. */
static inline const char *tpx__test_device_name(void) {
  return tpx__test_device_cuda() ? "cuda" : "sim";
}

/* tpx_local_run with the world in the tests' device memory when `sim`
 * (the sim space, or CUDA managed memory under TPX_TEST_DEVICE=cuda),
 * else in host memory. */
static inline tpx_status tpx__local_run_sim(int nranks, int sim,
                                            tpx_local_fn fn, void *arg,
                                            tpx_error *err) {
  int cuda = sim && tpx__test_device_cuda();
  tpx__local_test_options o = {TPX_LOCAL_OPTIONS_INIT, sim && !cuda, cuda, 0};
  return tpx__local_run_test(nranks, &o, fn, arg, err);
}

/* A test's own buffer for a device world (`bytes` from host src, or
 * zeroed): sim-tagged host memory, or managed CUDA memory. */
static inline void *tpx__test_dev_alloc(const void *src, size_t bytes) {
  void *p = NULL;
#if TPX_HAVE_NCCL
  if (tpx__test_device_cuda()) {
    if (cudaMallocManaged(&p, bytes ? bytes : 1, cudaMemAttachGlobal) !=
        cudaSuccess)
      return NULL;
    if (src)
      memcpy(p, src, bytes);
    else
      memset(p, 0, bytes ? bytes : 1);
    return p;
  }
#endif
  p = calloc(1, bytes ? bytes : 1);
  if (p && src)
    memcpy(p, src, bytes);
  return tpx__sim_tag(p);
}

/* The host alias of a device world's buffer p (the world's pending work
 * done first): untagged (sim) or p itself (managed CUDA). */
static inline void *tpx__test_dev_host(const void *p) {
#if TPX_HAVE_NCCL
  if (tpx__test_device_cuda()) {
    cudaDeviceSynchronize();
    return (void *)(uintptr_t)p;
  }
#endif
  return tpx__sim_untag(p);
}

static inline void tpx__test_dev_free(void *p) {
#if TPX_HAVE_NCCL
  if (tpx__test_device_cuda()) {
    cudaFree(p);
    return;
  }
#endif
  free(tpx__sim_untag(p));
}

TPX_END_DECLS

#endif /* TPX_COMM_LOCAL_TEST_H */
