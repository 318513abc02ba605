/* device/memspace.h — where a communicator's buffers live: the buffer half
 * of a memory space (private). The kernel half is device/kernels.h.
 *
 * Every buffer the comm path touches (redistribution, TP transitions, the
 * runtime's flat units, gradients, optimizer state, caches) is moved and
 * computed on only through a memory space, never dereferenced by the
 * caller, so the same code runs on host memory and on device memory. As
 * ggml splits buffer types from compute, a space is two tables:
 *  - buffers (tpx__ms_buffers, here): alloc, free, memset, copies;
 *  - kernels (tpx__ms_kernels, kernels.h): the element kernels, each
 *    called through a checked wrapper (tpx__ms_<kernel>).
 * Three spaces:
 *  - host: plain pointers; kernels are the reference loops (host_kernels.c);
 *  - sim:  tagged host pointers that fault when the host dereferences them
 *          (ms_sim.c, sim_tag.h) — the test double that proves the rule.
 *          Its kernels ARE the host loops: they reach every buffer through
 *          the space's host_view, which untags;
 *  - cuda: device pointers, copies on the comm's stream (ms_cuda.c),
 *          kernels from ms_cuda_kernels.cu.
 * A communicator names its space (tpx__comm_ms, comm_impl.h): nccl -> cuda,
 * mpi -> host, local -> host or sim (comm/local_test.h, tests only).
 *
 * Contract of every op: sizes and offsets come from the caller (shapes,
 * layouts), never from buffer contents; calls on one space are ordered
 * (the cuda space enqueues them on one stream, so a following op or
 * collective on that stream sees the result); n == 0 is a no-op. The cuda
 * space returns before its work is done except where the host needs a
 * value: a D2H copy returns with the bytes in host memory, an H2D copy
 * with the host source free to reuse; tpx__ms_sync waits for the rest.
 * Not here: collectives (comm/), shard arithmetic (tpx/layout.h). */
#ifndef TPX_DEVICE_MEMSPACE_H
#define TPX_DEVICE_MEMSPACE_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/dtype.h"
#include "tpx/error.h"

TPX_BEGIN_DECLS

typedef enum tpx__copy_kind {
  TPX__D2D = 0, /* both buffers in the space */
  TPX__H2D = 1, /* src is host memory */
  TPX__D2H = 2, /* dst is host memory */
} tpx__copy_kind;

typedef struct tpx__memspace tpx__memspace;
typedef struct tpx__ms_kernels tpx__ms_kernels; /* device/kernels.h */

/* The buffer operations of a space. Every member is required. */
typedef struct tpx__ms_buffers {
  const char *name; /* "host", "sim", "cuda" */
  int device;       /* 1: buffers are not host-dereferenceable */
  /* A host-dereferenceable alias of p (sim: untagged), or NULL when there
   * is none (cuda). The local backend's shared-memory collectives and the
   * host kernels (host_kernels.c) use it; runtime code never does. */
  void *(*host_view)(const tpx__memspace *ms, const void *p);
  /* Allocate `bytes` (zeroed when `zero`); *out NULL only on error. */
  tpx_status (*alloc)(const tpx__memspace *ms, size_t bytes, int zero,
                      void **out, tpx_error *err);
  void (*free)(const tpx__memspace *ms, void *p); /* NULL: no-op */
  tpx_status (*memset)(const tpx__memspace *ms, void *dst, int byte,
                       size_t bytes, tpx_error *err);
  /* memmove semantics for D2D (regions may overlap). */
  tpx_status (*copy)(const tpx__memspace *ms, void *dst, const void *src,
                     size_t bytes, tpx__copy_kind kind, tpx_error *err);
  /* `rows` runs of `width` bytes: row r from src + r*spitch to
   * dst + r*dpitch (cudaMemcpy2D's shape). */
  tpx_status (*copy2d)(const tpx__memspace *ms, void *dst, size_t dpitch,
                       const void *src, size_t spitch, size_t width,
                       size_t rows, tpx__copy_kind kind, tpx_error *err);
  /* Wait until every op enqueued on the space so far is complete (for a
   * host thread that hands buffers to another: the local backend's
   * rendezvous). NULL: ops complete on return (host, sim). */
  tpx_status (*sync)(const tpx__memspace *ms, tpx_error *err);
} tpx__ms_buffers;

struct tpx__memspace {
  const tpx__ms_buffers *buf;
  /* NULL, or NULL members: kernels not built (the wrappers say so). */
  const tpx__ms_kernels *k;
  void *stream; /* cuda: the comm's cudaStream_t; else NULL */
  int device;   /* cuda: the device ordinal of `stream`; else -1 */
};

/* The host and sim spaces (stateless, shared), and the host buffer ops
 * (which the sim space runs on untagged pointers). */
extern const tpx__memspace tpx__ms_host;
extern const tpx__memspace tpx__ms_sim;
extern const tpx__ms_buffers tpx__ms_host_buffers;

/* cuda (ms_cuda.c): a space on `stream` (a cudaStream_t) of the calling
 * thread's current device; TPX_UNSUPPORTED when built without CUDA. */
tpx_status tpx__ms_cuda_init(tpx__memspace *ms, void *stream, tpx_error *err);
/* A cuda space with a stream of its own on the current device (the local
 * backend's ranks sharing one GPU), and its end (NULL: no-op). Without a
 * usable GPU: TPX_NO_DEVICE naming the CUDA error. `managed`: buffers from
 * cudaMallocManaged (the tests' device mode only, comm/local_test.h). */
tpx_status tpx__ms_cuda_create(tpx__memspace **out, int managed,
                               tpx_error *err);
void tpx__ms_cuda_destroy(tpx__memspace *ms);
/* Make ms's device current on the calling thread (cuda); else a no-op. */
tpx_status tpx__ms_bind_thread(const tpx__memspace *ms, tpx_error *err);

/* ---- the buffer wrappers (zero sizes and self-copies are no-ops) ---- */
static inline int tpx__ms_is_device(const tpx__memspace *ms) {
  return ms->buf->device;
}
static inline void *tpx__ms_host_view(const tpx__memspace *ms, const void *p) {
  return ms->buf->host_view(ms, p);
}
static inline tpx_status tpx__ms_alloc(const tpx__memspace *ms, size_t bytes,
                                       int zero, void **out, tpx_error *err) {
  return ms->buf->alloc(ms, bytes, zero, out, err);
}
static inline void tpx__ms_free(const tpx__memspace *ms, void *p) {
  ms->buf->free(ms, p);
}
static inline tpx_status tpx__ms_memset(const tpx__memspace *ms, void *dst,
                                        int byte, size_t bytes,
                                        tpx_error *err) {
  return bytes ? ms->buf->memset(ms, dst, byte, bytes, err) : TPX_OK;
}
static inline tpx_status tpx__ms_copy(const tpx__memspace *ms, void *dst,
                                      const void *src, size_t bytes,
                                      tpx__copy_kind kind, tpx_error *err) {
  return bytes && dst != src ? ms->buf->copy(ms, dst, src, bytes, kind, err)
                             : TPX_OK;
}
static inline tpx_status tpx__ms_sync(const tpx__memspace *ms, tpx_error *err) {
  return ms->buf->sync ? ms->buf->sync(ms, err) : TPX_OK;
}
static inline tpx_status tpx__ms_copy2d(const tpx__memspace *ms, void *dst,
                                        size_t dpitch, const void *src,
                                        size_t spitch, size_t width,
                                        size_t rows, tpx__copy_kind kind,
                                        tpx_error *err) {
  return width && rows ? ms->buf->copy2d(ms, dst, dpitch, src, spitch, width,
                                         rows, kind, err)
                       : TPX_OK;
}

TPX_END_DECLS

#endif /* TPX_DEVICE_MEMSPACE_H */
