/* device/ms_cuda_kernels.h — the cuda memory space's kernels
 * (ms_cuda_kernels.cu, compiled by nvcc), callable from C. Each enqueues on
 * `stream` (a cudaStream_t) and returns the launch's cudaError_t as an int;
 * the caller (ms_cuda.c) synchronises. dtypes are tpx_dtype values. The
 * math mirrors ms_host.c loop for loop; reductions (norm_acc) sum in a
 * different order, index_check writes the smallest bad index. */
#ifndef TPX_DEVICE_MS_CUDA_KERNELS_H
#define TPX_DEVICE_MS_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* Not exported from libtpx (nvcc ignores meson's visibility option). */
#if defined(__GNUC__)
#define TPX__CUK __attribute__((visibility("hidden")))
#else
#define TPX__CUK
#endif

#ifdef __cplusplus
extern "C" {
#endif

TPX__CUK int tpx__cuk_convert(void *stream, void *dst, int dd, const void *src,
                              int sd, size_t n);
TPX__CUK int tpx__cuk_add_f32(void *stream, float *dst, const void *src, int sd,
                              size_t n, float div);
TPX__CUK int tpx__cuk_scale_f32(void *stream, float *p, size_t n, float v,
                                int divide);
TPX__CUK int tpx__cuk_norm_acc(void *stream, double *acc, const float *g,
                               size_t n, int inf);
TPX__CUK int tpx__cuk_adamw(void *stream, float *p, const float *g, float *m,
                            float *v, size_t n, float decay, float w1, float b2,
                            float w2, float bc2s, float eps, float step);
/* bad[0] = smallest index of an id outside [0, V) (ids == ignore pass
 * when has_ignore) or -1, bad[1] = that id (device words). */
TPX__CUK int tpx__cuk_index_check(void *stream, const void *ids, int idt,
                                  size_t n, int64_t V, int has_ignore,
                                  int64_t ignore, int64_t *bad);
TPX__CUK int tpx__cuk_embed_lookup(void *stream, void *out, const void *weight,
                                   size_t row_bytes, const void *ids, int idt,
                                   size_t n, int64_t off, int64_t len,
                                   int masked);
TPX__CUK int tpx__cuk_embed_scatter_add(void *stream, void *wgrad, int wdt,
                                        const void *g, int gdt, size_t hl,
                                        const void *ids, int idt, size_t n,
                                        int64_t off, int64_t len, int masked);
TPX__CUK int tpx__cuk_loss_row_max(void *stream, float *mx, const void *logits,
                                   int ldt, size_t rows, size_t len);
TPX__CUK int tpx__cuk_loss_row_sums(void *stream, double *se, const float *mx,
                                    const void *logits, int ldt,
                                    const void *targets, int tdt, size_t rows,
                                    size_t len, int64_t off, int64_t ignore,
                                    int want_tgt);
TPX__CUK int tpx__cuk_loss_grad(void *stream, void *grad, int gdt,
                                const float *mx, const double *se,
                                const float *gi, double scale, double sign,
                                const void *logits, int ldt,
                                const void *targets, int tdt, size_t rows,
                                size_t len, int64_t off, int64_t ignore);
TPX__CUK int tpx__cuk_loss_logprobs(void *stream, float *out, double *sum_count,
                                    const float *mx, const double *se,
                                    const void *targets, int tdt, size_t rows,
                                    int64_t ignore);

#ifdef __cplusplus
}
#endif

#endif /* TPX_DEVICE_MS_CUDA_KERNELS_H */
