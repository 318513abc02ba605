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
 * The switch rides on tpx_local_run_opts: an options struct whose
 * struct_size is this extension's size and whose magic matches. */
#ifndef TPX_COMM_LOCAL_TEST_H
#define TPX_COMM_LOCAL_TEST_H

#include "tpx/comm.h"

TPX_BEGIN_DECLS

#define TPX__LOCAL_TEST_MAGIC 0x7473696du /* "tsim" */

typedef struct tpx__local_test_options {
  tpx_local_options base; /* base.struct_size = sizeof this struct */
  unsigned magic;         /* TPX__LOCAL_TEST_MAGIC */
  int sim_device_memory;  /* 1: the world's buffers are in the sim space */
} tpx__local_test_options;

/* tpx_local_run with the world in the sim memory space when `sim`, else
 * in host memory. */
static inline tpx_status tpx__local_run_sim(int nranks, int sim,
                                            tpx_local_fn fn, void *arg,
                                            tpx_error *err) {
  tpx__local_test_options o = {TPX_LOCAL_OPTIONS_INIT, TPX__LOCAL_TEST_MAGIC,
                               sim};
  o.base.struct_size = sizeof o;
  return tpx_local_run_opts(nranks, &o.base, fn, arg, err);
}

TPX_END_DECLS

#endif /* TPX_COMM_LOCAL_TEST_H */
