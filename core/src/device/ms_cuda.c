/* device/ms_cuda.c — the cuda memory space of the nccl backend: device
 * pointers; copies and memsets are enqueued on the comm's stream
 * (cudaMemcpyAsync / cudaMemcpy2DAsync / cudaMemsetAsync) and waited for,
 * so each op is complete when it returns, like the collectives. Kernels
 * come from ms_cuda_kernels.cu (compiled by nvcc when the build finds a
 * working one: TPX_HAVE_CUDA_KERNELS); without it they return
 * TPX_UNSUPPORTED naming the op. Plain C on the CUDA runtime API. Built as
 * a stub (TPX_UNSUPPORTED) without CUDA + NCCL. No GPU runs here: this
 * file compiles and links, it is not executed by the tests. */
#include "tpx_config.h"

#include "device/memspace.h"

#if TPX_HAVE_NCCL

#include "device/cuda_api.h"

#include "device/ms_cuda_kernels.h"

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

#if TPX_HAVE_CUDA_KERNELS
#define KERNEL(what, call) return done(ms, what, (cudaError_t)(call), err)
#else
#define KERNEL(what, call)                                                     \
  return tpx_error_set(err, TPX_UNSUPPORTED,                                   \
                       "cuda memory space: kernel %s is not built (libtpx "    \
                       "was configured without a working nvcc)",               \
                       what)
#endif

static tpx_status c_convert(const tpx__memspace *ms, void *dst, tpx_dtype dd,
                            const void *src, tpx_dtype sd, size_t n,
                            tpx_error *err) {
  if (dd == sd)
    return c_copy(ms, dst, src, n * tpx_dtype_size(dd), TPX__D2D, err);
  KERNEL("convert", tpx__cuk_convert(ms->stream, dst, (int)dd, src, (int)sd,
                                     n));
}

static tpx_status c_add_f32(const tpx__memspace *ms, float *dst,
                            const void *src, tpx_dtype sd, size_t n,
                            float div, tpx_error *err) {
  KERNEL("add_f32", tpx__cuk_add_f32(ms->stream, dst, src, (int)sd, n, div));
}

static tpx_status c_scale_f32(const tpx__memspace *ms, float *p, size_t n,
                              float v, int divide, tpx_error *err) {
  KERNEL("scale_f32", tpx__cuk_scale_f32(ms->stream, p, n, v, divide));
}

static tpx_status c_norm_acc(const tpx__memspace *ms, double *acc,
                             const float *g, size_t n, int inf,
                             tpx_error *err) {
  KERNEL("norm_acc", tpx__cuk_norm_acc(ms->stream, acc, g, n, inf));
}

static tpx_status c_adamw(const tpx__memspace *ms, float *p, const float *g,
                          float *m, float *v, size_t n,
                          const tpx__ms_adamw *h, tpx_error *err) {
  KERNEL("adamw", tpx__cuk_adamw(ms->stream, p, g, m, v, n, h->decay, h->w1,
                                 h->b2, h->w2, h->bc2s, h->eps, h->step));
}

static tpx_status c_index_check(const tpx__memspace *ms, const void *ids,
                                tpx_dtype idt, size_t n, int64_t V,
                                int has_ignore, int64_t ignore, int64_t *bad,
                                tpx_error *err) {
#if TPX_HAVE_CUDA_KERNELS
  /* Two device words (the first bad index or -1, and its id), read back:
   * the verdict an input check needs. */
  void *wordv = NULL;
  tpx_status st = c_alloc(ms, 2 * sizeof(int64_t), 0, &wordv, err);
  int64_t *word = wordv;
  if (st != TPX_OK) return st;
  st = done(ms, "index_check",
            (cudaError_t)tpx__cuk_index_check(ms->stream, ids, (int)idt, n, V,
                                              has_ignore, ignore, word),
            err);
  if (st == TPX_OK)
    st = c_copy(ms, bad, word, 2 * sizeof *word, TPX__D2H, err);
  c_free(ms, word);
  return st;
#else
  (void)ids, (void)idt, (void)n, (void)V, (void)bad, (void)has_ignore,
      (void)ignore;
  KERNEL("index_check", 0);
#endif
}

static tpx_status c_embed_lookup(const tpx__memspace *ms, void *out,
                                 const void *weight, size_t row_bytes,
                                 const void *ids, tpx_dtype idt, size_t n,
                                 const tpx__ms_rows *rows, tpx_error *err) {
  KERNEL("embed_lookup",
         tpx__cuk_embed_lookup(ms->stream, out, weight, row_bytes, ids,
                               (int)idt, n, rows->off, rows->len,
                               rows->masked));
}

static tpx_status c_embed_scatter_add(const tpx__memspace *ms, void *wgrad,
                                      tpx_dtype wdt, const void *g,
                                      tpx_dtype gdt, size_t hl,
                                      const void *ids, tpx_dtype idt,
                                      size_t n, const tpx__ms_rows *rows,
                                      tpx_error *err) {
  KERNEL("embed_scatter_add",
         tpx__cuk_embed_scatter_add(ms->stream, wgrad, (int)wdt, g, (int)gdt,
                                    hl, ids, (int)idt, n, rows->off,
                                    rows->len, rows->masked));
}

static tpx_status c_loss_row_max(const tpx__memspace *ms, float *mx,
                                 const tpx__ms_loss *l, tpx_error *err) {
  KERNEL("loss_row_max",
         tpx__cuk_loss_row_max(ms->stream, mx, l->logits, (int)l->ldt,
                               l->rows, l->len));
}

static tpx_status c_loss_row_sums(const tpx__memspace *ms, double *se,
                                  const float *mx, const tpx__ms_loss *l,
                                  int want_tgt, tpx_error *err) {
  KERNEL("loss_row_sums",
         tpx__cuk_loss_row_sums(ms->stream, se, mx, l->logits, (int)l->ldt,
                                l->targets, (int)l->tdt, l->rows, l->len,
                                l->off, l->ignore, want_tgt));
}

static tpx_status c_loss_grad(const tpx__memspace *ms, void *grad,
                              tpx_dtype gdt, const float *mx,
                              const double *se, const float *gi, double scale,
                              double sign, const tpx__ms_loss *l,
                              tpx_error *err) {
  KERNEL("loss_grad",
         tpx__cuk_loss_grad(ms->stream, grad, (int)gdt, mx, se, gi, scale,
                            sign, l->logits, (int)l->ldt, l->targets,
                            (int)l->tdt, l->rows, l->len, l->off, l->ignore));
}

static tpx_status c_loss_logprobs(const tpx__memspace *ms, float *out,
                                  double *sum_count, const float *mx,
                                  const double *se, const tpx__ms_loss *l,
                                  tpx_error *err) {
  KERNEL("loss_logprobs",
         tpx__cuk_loss_logprobs(ms->stream, out, sum_count, mx, se,
                                l->targets, (int)l->tdt, l->rows, l->ignore));
}

static const tpx__ms_ops cuda_ops = {
    .name = "cuda",
    .device = 1,
    .host_view = c_view,
    .alloc = c_alloc,
    .free = c_free,
    .memset = c_memset,
    .copy = c_copy,
    .copy2d = c_copy2d,
    .convert = c_convert,
    .add_f32 = c_add_f32,
    .scale_f32 = c_scale_f32,
    .norm_acc = c_norm_acc,
    .adamw = c_adamw,
    .index_check = c_index_check,
    .embed_lookup = c_embed_lookup,
    .embed_scatter_add = c_embed_scatter_add,
    .loss_row_max = c_loss_row_max,
    .loss_row_sums = c_loss_row_sums,
    .loss_grad = c_loss_grad,
    .loss_logprobs = c_loss_logprobs,
};

tpx_status tpx__ms_cuda_init(tpx__memspace *ms, void *stream,
                             tpx_error *err) {
  (void)err;
  ms->ops = &cuda_ops;
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
