/* device/ms_cuda.c — the cuda memory space (the nccl backend's, and the
 * local backend's ranks sharing one GPU): device pointers; copies and
 * memsets are enqueued on the space's stream (cudaMemcpyAsync /
 * cudaMemcpy2DAsync / cudaMemsetAsync) and not waited for, except where
 * the host needs the bytes: a D2H copy returns with them in host memory,
 * an H2D copy with the host source free to reuse. `sync` waits for the
 * stream. Its kernel table is ms_cuda_kernels.cu's (compiled by nvcc when
 * the build finds a working one: TPX_HAVE_CUDA_KERNELS); without it the
 * space has none and the wrappers (kernels.c) return TPX_UNSUPPORTED
 * naming the kernel. Plain C on the CUDA runtime API. Built as a stub
 * (TPX_UNSUPPORTED) without CUDA + NCCL. No GPU runs here: this file
 * compiles and links; tools/gpu-check.sh runs it where a GPU exists. */
#include "tpx_config.h"

#include <stdlib.h>

#include "device/kernels.h"

#if TPX_HAVE_NCCL

#include "device/cuda_api.h"

#if TPX_HAVE_CUDA_KERNELS
#include "device/ms_cuda_kernels.h"
#endif

static cudaStream_t stream_of(const tpx__memspace *ms) {
  return (cudaStream_t)ms->stream;
}

static tpx_status fail(tpx_error *err, const char *what, cudaError_t e) {
  return tpx_error_set(err, TPX_COMM, "cuda memory space: %s failed: %s (%s)",
                       what, cudaGetErrorString(e), cudaGetErrorName(e));
}

/* `e` is the enqueue's result; the work stays in flight. */
static tpx_status queued(const char *what, cudaError_t e, tpx_error *err) {
  return e == cudaSuccess ? TPX_OK : fail(err, what, e);
}

/* The same, then the stream waited for (the host needs the result). */
static tpx_status done(const tpx__memspace *ms, const char *what, cudaError_t e,
                       tpx_error *err) {
  if (e == cudaSuccess)
    e = cudaStreamSynchronize(stream_of(ms));
  return e == cudaSuccess ? TPX_OK : fail(err, what, e);
}

static tpx_status c_sync(const tpx__memspace *ms, tpx_error *err) {
  return done(ms, "cudaStreamSynchronize", cudaSuccess, err);
}

static void *c_view(const tpx__memspace *ms, const void *p) {
  (void)ms, (void)p;
  return NULL;
}

static tpx_status c_alloc(const tpx__memspace *ms, size_t bytes, int zero,
                          void **out, tpx_error *err) {
  *out = NULL;
  cudaError_t e = cudaMalloc(out, bytes ? bytes : 1);
  if (e != cudaSuccess) {
    *out = NULL;
    return tpx_error_set(err, TPX_NO_MEMORY,
                         "cuda memory space: cudaMalloc of %zu bytes: %s",
                         bytes, cudaGetErrorString(e));
  }
  if (!zero || !bytes)
    return TPX_OK;
  tpx_status st = queued("cudaMemsetAsync",
                         cudaMemsetAsync(*out, 0, bytes, stream_of(ms)), err);
  if (st != TPX_OK) {
    cudaFree(*out);
    *out = NULL;
  }
  return st;
}

/* Managed memory (the tests' device mode, comm/local_test.h): the device
 * works on it as on cudaMalloc'd memory, and a test's own host code may
 * read it after a sync. Never chosen by the library itself. */
static tpx_status c_alloc_managed(const tpx__memspace *ms, size_t bytes,
                                  int zero, void **out, tpx_error *err) {
  *out = NULL;
  cudaError_t e =
      cudaMallocManaged(out, bytes ? bytes : 1, cudaMemAttachGlobal);
  if (e != cudaSuccess) {
    *out = NULL;
    return tpx_error_set(err, TPX_NO_MEMORY,
                         "cuda memory space: cudaMallocManaged of %zu bytes: "
                         "%s",
                         bytes, cudaGetErrorString(e));
  }
  if (!zero || !bytes)
    return TPX_OK;
  return queued("cudaMemsetAsync",
                cudaMemsetAsync(*out, 0, bytes, stream_of(ms)), err);
}

static void c_free(const tpx__memspace *ms, void *p) {
  (void)ms;
  if (p)
    cudaFree(p);
}

static tpx_status c_memset(const tpx__memspace *ms, void *dst, int byte,
                           size_t bytes, tpx_error *err) {
  return queued("cudaMemsetAsync",
                cudaMemsetAsync(dst, byte, bytes, stream_of(ms)), err);
}

static enum cudaMemcpyKind kind_of(tpx__copy_kind k) {
  return k == TPX__H2D   ? cudaMemcpyHostToDevice
         : k == TPX__D2H ? cudaMemcpyDeviceToHost
                         : cudaMemcpyDeviceToDevice;
}

static tpx_status c_copy(const tpx__memspace *ms, void *dst, const void *src,
                         size_t bytes, tpx__copy_kind kind, tpx_error *err) {
  const char *d = dst, *sp = src;
  if (kind == TPX__D2D && d < sp + bytes && sp < d + bytes) {
    /* memmove semantics: cudaMemcpy does not promise them for overlapping
     * regions, so go through stream-ordered scratch */
    void *tmp = NULL;
    cudaError_t e = cudaMallocAsync(&tmp, bytes, stream_of(ms));
    if (e == cudaSuccess)
      e = cudaMemcpyAsync(tmp, src, bytes, cudaMemcpyDeviceToDevice,
                          stream_of(ms));
    if (e == cudaSuccess)
      e = cudaMemcpyAsync(dst, tmp, bytes, cudaMemcpyDeviceToDevice,
                          stream_of(ms));
    if (tmp)
      cudaFreeAsync(tmp, stream_of(ms));
    return queued("cudaMemcpyAsync (overlapping)", e, err);
  }
  cudaError_t e =
      cudaMemcpyAsync(dst, src, bytes, kind_of(kind), stream_of(ms));
  return kind == TPX__D2D ? queued("cudaMemcpyAsync", e, err)
                          : done(ms, "cudaMemcpyAsync", e, err);
}

static tpx_status c_copy2d(const tpx__memspace *ms, void *dst, size_t dpitch,
                           const void *src, size_t spitch, size_t width,
                           size_t rows, tpx__copy_kind kind, tpx_error *err) {
  cudaError_t e = cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows,
                                    kind_of(kind), stream_of(ms));
  return kind == TPX__D2D ? queued("cudaMemcpy2DAsync", e, err)
                          : done(ms, "cudaMemcpy2DAsync", e, err);
}

static const tpx__ms_buffers cuda_buffers = {
    .name = "cuda",
    .device = 1,
    .host_view = c_view,
    .alloc = c_alloc,
    .free = c_free,
    .memset = c_memset,
    .copy = c_copy,
    .copy2d = c_copy2d,
    .sync = c_sync,
};

static const tpx__ms_buffers cuda_managed_buffers = {
    .name = "cuda",
    .device = 1,
    .host_view = c_view,
    .alloc = c_alloc_managed,
    .free = c_free,
    .memset = c_memset,
    .copy = c_copy,
    .copy2d = c_copy2d,
    .sync = c_sync,
};

tpx_status tpx__ms_cuda_init(tpx__memspace *ms, void *stream, tpx_error *err) {
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess)
    return tpx_error_set(err, TPX_NO_DEVICE,
                         "cuda memory space: no usable GPU: %s (%s)",
                         cudaGetErrorString(e), cudaGetErrorName(e));
  ms->device = dev;
  ms->buf = &cuda_buffers;
#if TPX_HAVE_CUDA_KERNELS
  ms->k = &tpx__ms_cuda_kernels;
#else
  ms->k = NULL; /* the wrappers answer TPX_UNSUPPORTED naming the kernel */
#endif
  ms->stream = stream;
  return TPX_OK;
}

tpx_status tpx__ms_cuda_create(tpx__memspace **out, int managed,
                               tpx_error *err) {
  *out = NULL;
  tpx__memspace *ms = calloc(1, sizeof *ms);
  if (!ms)
    return tpx_error_set(err, TPX_NO_MEMORY, "cuda memory space");
  cudaStream_t stream = NULL;
  cudaError_t e = cudaStreamCreate(&stream);
  tpx_status st =
      e == cudaSuccess
          ? tpx__ms_cuda_init(ms, stream, err)
          : tpx_error_set(err, TPX_NO_DEVICE,
                          "cuda memory space: cudaStreamCreate failed (no "
                          "usable GPU?): %s (%s)",
                          cudaGetErrorString(e), cudaGetErrorName(e));
  if (st != TPX_OK) {
    if (stream)
      cudaStreamDestroy(stream);
    free(ms);
    return st;
  }
  if (managed)
    ms->buf = &cuda_managed_buffers;
  *out = ms;
  return TPX_OK;
}

void tpx__ms_cuda_destroy(tpx__memspace *ms) {
  if (!ms)
    return;
  cudaSetDevice(ms->device);
  cudaStreamSynchronize(stream_of(ms));
  cudaStreamDestroy(stream_of(ms));
  free(ms);
}

tpx_status tpx__ms_bind_thread(const tpx__memspace *ms, tpx_error *err) {
  if (ms->device < 0)
    return TPX_OK;
  cudaError_t e = cudaSetDevice(ms->device);
  return e == cudaSuccess ? TPX_OK : fail(err, "cudaSetDevice", e);
}

#else /* !TPX_HAVE_NCCL */

tpx_status tpx__ms_cuda_init(tpx__memspace *ms, void *stream, tpx_error *err) {
  (void)ms, (void)stream;
  return tpx_error_set(err, TPX_UNSUPPORTED,
                       "cuda memory space: libtpx was built without CUDA");
}

tpx_status tpx__ms_cuda_create(tpx__memspace **out, int managed,
                               tpx_error *err) {
  (void)managed;
  *out = NULL;
  return tpx__ms_cuda_init(NULL, NULL, err);
}

void tpx__ms_cuda_destroy(tpx__memspace *ms) { (void)ms; }

tpx_status tpx__ms_bind_thread(const tpx__memspace *ms, tpx_error *err) {
  (void)ms, (void)err;
  return TPX_OK;
}

#endif
