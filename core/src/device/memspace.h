/* device/memspace.h — where a communicator's buffers live, and the few
 * operations the runtime runs on them (private).
 *
 * Every buffer the comm path touches (redistribution, TP transitions, the
 * runtime's flat units, gradients, optimizer state, caches) is moved and
 * computed on only through these calls, never dereferenced by the caller,
 * so the same code runs on host memory and on device memory. Three spaces:
 *  - host: plain pointers (ms_host.c holds the reference loops);
 *  - sim:  tagged host pointers that fault when the host dereferences them
 *          (ms_sim.c, sim_tag.h) — the test double that proves the rule;
 *  - cuda: device pointers, copies on the comm's stream, kernels from
 *          ms_cuda_kernels.cu (ms_cuda.c).
 * A communicator names its space (tpx__comm_ms, comm_impl.h): nccl -> cuda,
 * mpi -> host, local -> host or sim (tpx_local_options.sim_device_memory).
 *
 * Contract of every op: sizes and offsets come from the caller (shapes,
 * layouts), never from buffer contents; calls on one space are ordered (the
 * cuda space runs them on one stream and returns once done, so a following
 * collective or host read sees the result); n == 0 is a no-op. Kernels keep
 * the math of the host loops (the host space IS those loops); the cuda
 * space's reductions may sum in another order (not bit-identical).
 * Not here: collectives (comm/), shard arithmetic (tpx/layout.h). */
#ifndef TPX_DEVICE_MEMSPACE_H
#define TPX_DEVICE_MEMSPACE_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/dtype.h"
#include "tpx/error.h"

typedef enum tpx__copy_kind {
  TPX__D2D = 0, /* both buffers in the space */
  TPX__H2D = 1, /* src is host memory */
  TPX__D2H = 2, /* dst is host memory */
} tpx__copy_kind;

/* AdamW's per-step scalars, as rt_adamw.c derives them from the options. */
typedef struct tpx__ms_adamw {
  float decay, w1, b2, w2, bc2s, eps, step;
} tpx__ms_adamw;

/* The vocab-parallel embedding's row map: id -> local row id - off when
 * `masked` (weight Shard(0): rows outside [off, off + len) are masked),
 * else id itself. */
typedef struct tpx__ms_rows {
  int64_t off, len;
  int masked;
} tpx__ms_rows;

/* The vocab-parallel loss's view of this rank's logits: `rows` rows of
 * `len` columns (f32 / bf16; the vocab entries [off, off + len)), one
 * target per row (int32 / int64; `ignore` = ignore_index skips a row). */
typedef struct tpx__ms_loss {
  const void *logits;
  tpx_dtype ldt;
  const void *targets;
  tpx_dtype tdt;
  size_t rows, len;
  int64_t off, ignore;
} tpx__ms_loss;

typedef struct tpx__memspace tpx__memspace;

typedef struct tpx__ms_ops {
  const char *name; /* "host", "sim", "cuda" */
  int device;       /* 1: buffers are not host-dereferenceable */
  /* A host-dereferenceable alias of p (sim: untagged), or NULL when there
   * is none (cuda). Only the local backend's shared-memory collectives use
   * it; runtime code never does. */
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
  /* dst[i] = (dd) src[i] between f32 / bf16 / f16, round to nearest even;
   * the same dtype is a D2D copy. */
  tpx_status (*convert)(const tpx__memspace *ms, void *dst, tpx_dtype dd,
                        const void *src, tpx_dtype sd, size_t n,
                        tpx_error *err);
  /* dst[i] += src[i] / div in f32 (div 1: no division). */
  tpx_status (*add_f32)(const tpx__memspace *ms, float *dst, const void *src,
                        tpx_dtype sd, size_t n, float div, tpx_error *err);
  /* p[i] = divide ? p[i] / v : p[i] * v. */
  tpx_status (*scale_f32)(const tpx__memspace *ms, float *p, size_t n,
                          float v, int divide, tpx_error *err);
  /* *acc (one f64 in the space) += sum g[i]^2 (inf = 0), or = max(*acc,
   * |g[i]|) with NaN winning (inf = 1), in f64. */
  tpx_status (*norm_acc)(const tpx__memspace *ms, double *acc,
                         const float *g, size_t n, int inf, tpx_error *err);
  /* torch.optim.AdamW's single-tensor f32 update of p, m, v from g. */
  tpx_status (*adamw)(const tpx__memspace *ms, float *p, const float *g,
                      float *m, float *v, size_t n, const tpx__ms_adamw *h,
                      tpx_error *err);
  /* bad[0] (host) = index of the first id outside [0, V) (ids equal to
   * `ignore` pass when has_ignore), or -1, and bad[1] its value: a
   * validation verdict (two integers) read back for the error message,
   * never used to steer the data path. */
  tpx_status (*index_check)(const tpx__memspace *ms, const void *ids,
                            tpx_dtype idt, size_t n, int64_t V,
                            int has_ignore, int64_t ignore, int64_t *bad,
                            tpx_error *err);
  /* out row i = weight row map(ids[i]) (row_bytes each), zero when masked. */
  tpx_status (*embed_lookup)(const tpx__memspace *ms, void *out,
                             const void *weight, size_t row_bytes,
                             const void *ids, tpx_dtype idt, size_t n,
                             const tpx__ms_rows *rows, tpx_error *err);
  /* wgrad row map(ids[i]) += g row i (hl elements, f32 / bf16 each, the
   * sum rounded once per element and id, in id order); masked ids skip. */
  tpx_status (*embed_scatter_add)(const tpx__memspace *ms, void *wgrad,
                                  tpx_dtype wdt, const void *g, tpx_dtype gdt,
                                  size_t hl, const void *ids, tpx_dtype idt,
                                  size_t n, const tpx__ms_rows *rows,
                                  tpx_error *err);
  /* Loss pieces (tp_loss.c), all in the space: mx[i] = max_j z_ij (f32). */
  tpx_status (*loss_row_max)(const tpx__memspace *ms, float *mx,
                             const tpx__ms_loss *l, tpx_error *err);
  /* se[i] = sum_j exp(z_ij - mx[i]) (f64); when want_tgt, se[rows + i] =
   * the target's logit on the rank holding it, else 0 (the masked target
   * gather). */
  tpx_status (*loss_row_sums)(const tpx__memspace *ms, double *se,
                              const float *mx, const tpx__ms_loss *l,
                              int want_tgt, tpx_error *err);
  /* grad_ij = c_i * (exp(z_ij - mx_i) / se_i - onehot_ij) with c_i =
   * (gi ? gi[i] : 1) * scale * sign (softmax minus one-hot; sign -1 gives
   * the log-prob backward); ignored rows zero. grad f32 / bf16. */
  tpx_status (*loss_grad)(const tpx__memspace *ms, void *grad, tpx_dtype gdt,
                          const float *mx, const double *se, const float *gi,
                          double scale, double sign, const tpx__ms_loss *l,
                          tpx_error *err);
  /* logprob_i = se[rows + i] - mx[i] - log(se[i]): into out[i] (f32; 0 for
   * ignored rows) when out, and into sum_count[0] -= logprob_i,
   * sum_count[1] += 1 over counted rows when sum_count (two f64 in the
   * space, zeroed by the caller). */
  tpx_status (*loss_logprobs)(const tpx__memspace *ms, float *out,
                              double *sum_count, const float *mx,
                              const double *se, const tpx__ms_loss *l,
                              tpx_error *err);
} tpx__ms_ops;

struct tpx__memspace {
  const tpx__ms_ops *ops;
  void *stream; /* cuda: the comm's cudaStream_t; else NULL */
};

/* The host and sim spaces (stateless, shared). */
extern const tpx__memspace tpx__ms_host;
extern const tpx__memspace tpx__ms_sim;

/* cuda (ms_cuda.c): a space on `stream` (a cudaStream_t); TPX_UNSUPPORTED
 * when built without CUDA. */
tpx_status tpx__ms_cuda_init(tpx__memspace *ms, void *stream, tpx_error *err);

/* The host space's loops, for the sim space (which untags and calls them)
 * and for host code holding host buffers. */
extern const tpx__ms_ops tpx__ms_host_ops;

/* ---- shorthands (ms->ops->op(ms, ...)) ---- */
static inline tpx_status tpx__ms_alloc(const tpx__memspace *ms, size_t bytes,
                                       int zero, void **out, tpx_error *err) {
  return ms->ops->alloc(ms, bytes, zero, out, err);
}
static inline void tpx__ms_free(const tpx__memspace *ms, void *p) {
  ms->ops->free(ms, p);
}
static inline tpx_status tpx__ms_memset(const tpx__memspace *ms, void *dst,
                                        int byte, size_t bytes,
                                        tpx_error *err) {
  return bytes ? ms->ops->memset(ms, dst, byte, bytes, err) : TPX_OK;
}
static inline tpx_status tpx__ms_copy(const tpx__memspace *ms, void *dst,
                                      const void *src, size_t bytes,
                                      tpx__copy_kind kind, tpx_error *err) {
  return bytes && dst != src ? ms->ops->copy(ms, dst, src, bytes, kind, err)
                             : TPX_OK;
}
static inline tpx_status tpx__ms_copy2d(const tpx__memspace *ms, void *dst,
                                        size_t dpitch, const void *src,
                                        size_t spitch, size_t width,
                                        size_t rows, tpx__copy_kind kind,
                                        tpx_error *err) {
  return width && rows ? ms->ops->copy2d(ms, dst, dpitch, src, spitch, width,
                                         rows, kind, err)
                       : TPX_OK;
}
static inline tpx_status tpx__ms_convert(const tpx__memspace *ms, void *dst,
                                         tpx_dtype dd, const void *src,
                                         tpx_dtype sd, size_t n,
                                         tpx_error *err) {
  return n ? ms->ops->convert(ms, dst, dd, src, sd, n, err) : TPX_OK;
}

#endif /* TPX_DEVICE_MEMSPACE_H */
