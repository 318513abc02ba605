/* device/ms_cuda.c — the cuda memory space of the nccl backend: device
 * pointers; copies and memsets are enqueued on the comm's stream
 * (cudaMemcpyAsync / cudaMemcpy2DAsync / cudaMemsetAsync) and waited for,
 * so each op is complete when it returns, like the collectives. Its kernel
 * table is ms_cuda_kernels.cu's (compiled by nvcc when the build finds a
 * working one: TPX_HAVE_CUDA_KERNELS); without it the space has none and
 * the wrappers (kernels.c) return TPX_UNSUPPORTED naming the kernel. Plain
 * C on the CUDA runtime API. Built as
 * a stub (TPX_UNSUPPORTED) without CUDA + NCCL. No GPU runs here: this
 * file compiles and links, it is not executed by the tests. */
#include "tpx_config.h"

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

/* Wait for the stream; `e` is the enqueue's result. */
static tpx_status done(const tpx__memspace *ms, const char *what,
                       cudaError_t e, tpx_error *err) {
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream_of(ms));
  return e == cudaSuccess ? TPX_OK : fail(err, what, e);
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
  if (!zero || !bytes) return TPX_OK;
  tpx_status st = done(ms, "cudaMemsetAsync",
                       cudaMemsetAsync(*out, 0, bytes, stream_of(ms)), err);
  if (st != TPX_OK) {
    cudaFree(*out);
    *out = NULL;
  }
  return st;
}

static void c_free(const tpx__memspace *ms, void *p) {
  (void)ms;
  if (p) cudaFree(p);
}

static tpx_status c_memset(const tpx__memspace *ms, void *dst, int byte,
                           size_t bytes, tpx_error *err) {
  return done(ms, "cudaMemsetAsync",
              cudaMemsetAsync(dst, byte, bytes, stream_of(ms)), err);
}

static enum cudaMemcpyKind kind_of(tpx__copy_kind k) {
  return k == TPX__H2D   ? cudaMemcpyHostToDevice
         : k == TPX__D2H ? cudaMemcpyDeviceToHost
                         : cudaMemcpyDeviceToDevice;
}

static tpx_status c_copy(const tpx__memspace *ms, void *dst, const void *src,
                         size_t bytes, tpx__copy_kind kind, tpx_error *err) {
  return done(ms, "cudaMemcpyAsync",
              cudaMemcpyAsync(dst, src, bytes, kind_of(kind), stream_of(ms)),
              err);
}

static tpx_status c_copy2d(const tpx__memspace *ms, void *dst, size_t dpitch,
                           const void *src, size_t spitch, size_t width,
                           size_t rows, tpx__copy_kind kind, tpx_error *err) {
  return done(ms, "cudaMemcpy2DAsync",
              cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows,
                                kind_of(kind), stream_of(ms)),
              err);
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
};

tpx_status tpx__ms_cuda_init(tpx__memspace *ms, void *stream,
                             tpx_error *err) {
  (void)err;
  ms->buf = &cuda_buffers;
#if TPX_HAVE_CUDA_KERNELS
  ms->k = &tpx__ms_cuda_kernels;
#else
  ms->k = NULL; /* the wrappers answer TPX_UNSUPPORTED naming the kernel */
#endif
  ms->stream = stream;
  return TPX_OK;
}

#else /* !TPX_HAVE_NCCL */

tpx_status tpx__ms_cuda_init(tpx__memspace *ms, void *stream,
                             tpx_error *err) {
  (void)ms, (void)stream;
  return tpx_error_set(err, TPX_UNSUPPORTED,
                       "cuda memory space: libtpx was built without CUDA");
}

#endif
