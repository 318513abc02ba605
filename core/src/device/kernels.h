/* device/kernels.h — the kernel half of a memory space (private): the
 * element kernels the comm path and the runtime run on buffers of any
 * space, and the checked wrappers every caller uses (device/kernels.c).
 *
 * A space's kernel table (tpx__ms_kernels) is written once per
 * implementation: the host loops (host_kernels.c, which reach buffers
 * through the space's host_view, so the host and sim spaces share them)
 * and the cuda kernels (ms_cuda_kernels.cu). Callers never touch the
 * table: tpx__ms_<kernel> checks the arguments (dtypes, NULL buffers,
 * sizes), treats n == 0 as a no-op, and answers TPX_UNSUPPORTED naming
 * the kernel and the space when the space was built without it. A new
 * kernel adds one member, one host loop, one cuda kernel and one wrapper.
 * The cuda kernels are asynchronous on the space's stream; those that hand
 * the host a value (index_check's verdict) wait for it.
 *
 * Kernels keep the math of the host loops (the host space IS those loops),
 * bit for bit, except where a kernel's comment says otherwise.
 * Not here: buffers (memspace.h), host-only loops (elem.h). */
#ifndef TPX_DEVICE_KERNELS_H
#define TPX_DEVICE_KERNELS_H

#include "device/memspace.h"
#include "tpx/placement.h"

TPX_BEGIN_DECLS

/* The most sources or destinations one reduce takes (a local world). */
#define TPX__MS_MAX_PTRS 256

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

/* The kernels of a space. Buffers are in the space; `bad`, `h`, `rows` and
 * the loss view struct itself are host memory. Called only through the
 * wrappers below, which have checked the arguments and skipped n == 0. */
struct tpx__ms_kernels {
  /* dsts[d][i] = op(srcs[0][i], ..., srcs[nsrc-1][i]) for i < count and
   * every d < ndst: the arithmetic of tpx__reduce_into (device/elem.h: f16
   * / bf16 in f32, integers in 64 bits, sources in order, avg dividing the
   * sum by avg_div once), bit for bit. A destination may alias a source at
   * the same index. dsts / srcs are host arrays of at most
   * TPX__MS_MAX_PTRS pointers into the space (the local backend's ranks). */
  tpx_status (*reduce)(const tpx__memspace *ms, void *const *dsts, int ndst,
                       const void *const *srcs, int nsrc, size_t count,
                       tpx_dtype dtype, tpx_reduce_op op, int64_t avg_div,
                       tpx_error *err);
  /* dst[i] = (dd) src[i] between f32 / bf16 / f16, round to nearest even
   * (dd != sd; the wrapper copies equal dtypes). */
  tpx_status (*convert)(const tpx__memspace *ms, void *dst, tpx_dtype dd,
                        const void *src, tpx_dtype sd, size_t n,
                        tpx_error *err);
  /* dst[i] += src[i] / div in f32 (div 1: no division). */
  tpx_status (*add_f32)(const tpx__memspace *ms, float *dst, const void *src,
                        tpx_dtype sd, size_t n, float div, tpx_error *err);
  /* p[i] = divide ? p[i] / v : p[i] * v. */
  tpx_status (*scale_f32)(const tpx__memspace *ms, float *p, size_t n, float v,
                          int divide, tpx_error *err);
  /* *acc (one f64 in the space) += sum g[i]^2 (inf = 0), or = max(*acc,
   * |g[i]|) with NaN winning (inf = 1), in f64, summed in one fixed tree
   * order every space shares (host_kernels.c "the norms"; the cuda space
   * runs it grid-wide): deterministic and the same bits in every space. */
  tpx_status (*norm_acc)(const tpx__memspace *ms, double *acc, const float *g,
                         size_t n, int inf, tpx_error *err);
  /* torch.optim.AdamW's single-tensor f32 update of p, m, v from g. */
  tpx_status (*adamw)(const tpx__memspace *ms, float *p, const float *g,
                      float *m, float *v, size_t n, const tpx__ms_adamw *h,
                      tpx_error *err);
  /* bad[0] (host) = index of the first id outside [0, V) (ids equal to
   * `ignore` pass when has_ignore), or -1, and bad[1] its value (0 when
   * none): a validation verdict read back for the error message, never
   * used to steer the data path. */
  tpx_status (*index_check)(const tpx__memspace *ms, const void *ids,
                            tpx_dtype idt, size_t n, int64_t V, int has_ignore,
                            int64_t ignore, int64_t *bad, tpx_error *err);
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
   * gather). Every space adds the same terms in the same order. */
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
   * space, zeroed by the caller). The cuda space's log() may differ from
   * libm's in the last bit. */
  tpx_status (*loss_logprobs)(const tpx__memspace *ms, float *out,
                              double *sum_count, const float *mx,
                              const double *se, const tpx__ms_loss *l,
                              tpx_error *err);
};

/* The host loops (host_kernels.c): the host and sim spaces' kernels. */
extern const tpx__ms_kernels tpx__ms_host_kernels;

/* ---- the checked wrappers (kernels.c): the members above, with the
 * arguments checked (TPX_INVALID_ARGUMENT / TPX_UNSUPPORTED naming the
 * kernel) and n == 0 a no-op. convert of equal dtypes is a D2D copy. ---- */
tpx_status tpx__ms_reduce(const tpx__memspace *ms, void *const *dsts, int ndst,
                          const void *const *srcs, int nsrc, size_t count,
                          tpx_dtype dtype, tpx_reduce_op op, int64_t avg_div,
                          tpx_error *err);
tpx_status tpx__ms_convert(const tpx__memspace *ms, void *dst, tpx_dtype dd,
                           const void *src, tpx_dtype sd, size_t n,
                           tpx_error *err);
tpx_status tpx__ms_add_f32(const tpx__memspace *ms, float *dst, const void *src,
                           tpx_dtype sd, size_t n, float div, tpx_error *err);
tpx_status tpx__ms_scale_f32(const tpx__memspace *ms, float *p, size_t n,
                             float v, int divide, tpx_error *err);
tpx_status tpx__ms_norm_acc(const tpx__memspace *ms, double *acc,
                            const float *g, size_t n, int inf, tpx_error *err);
tpx_status tpx__ms_adamw_update(const tpx__memspace *ms, float *p,
                                const float *g, float *m, float *v, size_t n,
                                const tpx__ms_adamw *h, tpx_error *err);
/* n == 0 still answers: bad = {-1, 0}. */
tpx_status tpx__ms_index_check(const tpx__memspace *ms, const void *ids,
                               tpx_dtype idt, size_t n, int64_t V,
                               int has_ignore, int64_t ignore, int64_t *bad,
                               tpx_error *err);
tpx_status tpx__ms_embed_lookup(const tpx__memspace *ms, void *out,
                                const void *weight, size_t row_bytes,
                                const void *ids, tpx_dtype idt, size_t n,
                                const tpx__ms_rows *rows, tpx_error *err);
tpx_status tpx__ms_embed_scatter_add(const tpx__memspace *ms, void *wgrad,
                                     tpx_dtype wdt, const void *g,
                                     tpx_dtype gdt, size_t hl, const void *ids,
                                     tpx_dtype idt, size_t n,
                                     const tpx__ms_rows *rows, tpx_error *err);
tpx_status tpx__ms_loss_row_max(const tpx__memspace *ms, float *mx,
                                const tpx__ms_loss *l, tpx_error *err);
tpx_status tpx__ms_loss_row_sums(const tpx__memspace *ms, double *se,
                                 const float *mx, const tpx__ms_loss *l,
                                 int want_tgt, tpx_error *err);
tpx_status tpx__ms_loss_grad(const tpx__memspace *ms, void *grad, tpx_dtype gdt,
                             const float *mx, const double *se, const float *gi,
                             double scale, double sign, const tpx__ms_loss *l,
                             tpx_error *err);
tpx_status tpx__ms_loss_logprobs(const tpx__memspace *ms, float *out,
                                 double *sum_count, const float *mx,
                                 const double *se, const tpx__ms_loss *l,
                                 tpx_error *err);

TPX_END_DECLS

#endif /* TPX_DEVICE_KERNELS_H */
