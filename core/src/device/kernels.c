/* device/kernels.c — the checked wrappers of the memory-space kernels
 * (device/kernels.h): argument checks, n == 0 no-ops, and TPX_UNSUPPORTED
 * for a kernel a space was built without; then one call through the
 * space's kernel table. Not here: the kernels themselves (host_kernels.c,
 * ms_cuda_kernels.cu). */
#include "device/elem.h"
#include "device/kernels.h"

/* TPX_OK when the space has kernel `fn`. */
static tpx_status have(const tpx__memspace *ms, int has, const char *what,
                       tpx_error *err) {
  if (has)
    return TPX_OK;
  return tpx_error_set(err, TPX_UNSUPPORTED,
                       "%s memory space: kernel %s is not built (libtpx was "
                       "configured without a working nvcc)",
                       ms->buf->name, what);
}

/* The kernel table's member `m`, or NULL when the space has none. */
#define K(ms, m) ((ms)->k ? (ms)->k->m : NULL)

static tpx_status null_buf(const char *what, const char *arg, tpx_error *err) {
  return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                       "kernel %s: buffer %s is NULL", what, arg);
}

static int is_float(tpx_dtype d) {
  return d == TPX_DTYPE_F32 || d == TPX_DTYPE_BF16 || d == TPX_DTYPE_F16;
}

static int is_index(tpx_dtype d) {
  return d == TPX_DTYPE_I32 || d == TPX_DTYPE_I64;
}

static tpx_status bad_dtype(const char *what, const char *arg, tpx_dtype d,
                            const char *want, tpx_error *err) {
  return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                       "kernel %s: %s dtype %s (expected %s)", what, arg,
                       tpx_dtype_short_name(d), want);
}

/* Early returns shared by every wrapper. */
#define CHECK_BUF(what, p)                                                     \
  do {                                                                         \
    if (!(p))                                                                  \
      return null_buf(what, #p, err);                                          \
  } while (0)
#define CHECK_FLOAT(what, d)                                                   \
  do {                                                                         \
    if (!is_float(d))                                                          \
      return bad_dtype(what, #d, d, "f32, bf16, f16", err);                    \
  } while (0)
#define CHECK_INDEX(what, d)                                                   \
  do {                                                                         \
    if (!is_index(d))                                                          \
      return bad_dtype(what, #d, d, "i32, i64", err);                          \
  } while (0)
#define CHECK_KERNEL(ms, m)                                                    \
  do {                                                                         \
    tpx_status st_ = have(ms, K(ms, m) != NULL, #m, err);                      \
    if (st_ != TPX_OK)                                                         \
      return st_;                                                              \
  } while (0)

tpx_status tpx__ms_reduce(const tpx__memspace *ms, void *const *dsts, int ndst,
                          const void *const *srcs, int nsrc, size_t count,
                          tpx_dtype dtype, tpx_reduce_op op, int64_t avg_div,
                          tpx_error *err) {
  tpx_status st = tpx__reduce_check("kernel reduce", dtype, op, err);
  if (st != TPX_OK)
    return st;
  if (ndst < 1 || ndst > TPX__MS_MAX_PTRS || nsrc < 1 ||
      nsrc > TPX__MS_MAX_PTRS)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "kernel reduce: %d destinations, %d sources (1..%d "
                         "each)",
                         ndst, nsrc, TPX__MS_MAX_PTRS);
  if (!count)
    return TPX_OK;
  CHECK_BUF("reduce", dsts);
  CHECK_BUF("reduce", srcs);
  for (int d = 0; d < ndst; d++) CHECK_BUF("reduce", dsts[d]);
  for (int s = 0; s < nsrc; s++) CHECK_BUF("reduce", srcs[s]);
  CHECK_KERNEL(ms, reduce);
  return ms->k->reduce(ms, dsts, ndst, srcs, nsrc, count, dtype, op, avg_div,
                       err);
}

tpx_status tpx__ms_convert(const tpx__memspace *ms, void *dst, tpx_dtype dd,
                           const void *src, tpx_dtype sd, size_t n,
                           tpx_error *err) {
  CHECK_FLOAT("convert", dd);
  CHECK_FLOAT("convert", sd);
  if (!n)
    return TPX_OK;
  CHECK_BUF("convert", dst);
  CHECK_BUF("convert", src);
  if (dd == sd)
    return tpx__ms_copy(ms, dst, src, n * tpx_dtype_size(dd), TPX__D2D, err);
  CHECK_KERNEL(ms, convert);
  return ms->k->convert(ms, dst, dd, src, sd, n, err);
}

tpx_status tpx__ms_add_f32(const tpx__memspace *ms, float *dst, const void *src,
                           tpx_dtype sd, size_t n, float div, tpx_error *err) {
  CHECK_FLOAT("add_f32", sd);
  if (!n)
    return TPX_OK;
  CHECK_BUF("add_f32", dst);
  CHECK_BUF("add_f32", src);
  CHECK_KERNEL(ms, add_f32);
  return ms->k->add_f32(ms, dst, src, sd, n, div, err);
}

tpx_status tpx__ms_scale_f32(const tpx__memspace *ms, float *p, size_t n,
                             float v, int divide, tpx_error *err) {
  if (!n)
    return TPX_OK;
  CHECK_BUF("scale_f32", p);
  CHECK_KERNEL(ms, scale_f32);
  return ms->k->scale_f32(ms, p, n, v, divide, err);
}

tpx_status tpx__ms_norm_acc(const tpx__memspace *ms, double *acc,
                            const float *g, size_t n, int inf, tpx_error *err) {
  if (!n)
    return TPX_OK;
  CHECK_BUF("norm_acc", acc);
  CHECK_BUF("norm_acc", g);
  CHECK_KERNEL(ms, norm_acc);
  return ms->k->norm_acc(ms, acc, g, n, inf, err);
}

tpx_status tpx__ms_adamw_update(const tpx__memspace *ms, float *p,
                                const float *g, float *m, float *v, size_t n,
                                const tpx__ms_adamw *h, tpx_error *err) {
  CHECK_BUF("adamw", h);
  if (!n)
    return TPX_OK;
  CHECK_BUF("adamw", p);
  CHECK_BUF("adamw", g);
  CHECK_BUF("adamw", m);
  CHECK_BUF("adamw", v);
  CHECK_KERNEL(ms, adamw);
  return ms->k->adamw(ms, p, g, m, v, n, h, err);
}

tpx_status tpx__ms_index_check(const tpx__memspace *ms, const void *ids,
                               tpx_dtype idt, size_t n, int64_t V,
                               int has_ignore, int64_t ignore, int64_t *bad,
                               tpx_error *err) {
  CHECK_BUF("index_check", bad);
  CHECK_INDEX("index_check", idt);
  bad[0] = -1;
  bad[1] = 0;
  if (!n)
    return TPX_OK;
  CHECK_BUF("index_check", ids);
  CHECK_KERNEL(ms, index_check);
  return ms->k->index_check(ms, ids, idt, n, V, has_ignore, ignore, bad, err);
}

tpx_status tpx__ms_embed_lookup(const tpx__memspace *ms, void *out,
                                const void *weight, size_t row_bytes,
                                const void *ids, tpx_dtype idt, size_t n,
                                const tpx__ms_rows *rows, tpx_error *err) {
  CHECK_BUF("embed_lookup", rows);
  CHECK_INDEX("embed_lookup", idt);
  if (!n || !row_bytes)
    return TPX_OK;
  CHECK_BUF("embed_lookup", out);
  CHECK_BUF("embed_lookup", weight);
  CHECK_BUF("embed_lookup", ids);
  CHECK_KERNEL(ms, embed_lookup);
  return ms->k->embed_lookup(ms, out, weight, row_bytes, ids, idt, n, rows,
                             err);
}

tpx_status tpx__ms_embed_scatter_add(const tpx__memspace *ms, void *wgrad,
                                     tpx_dtype wdt, const void *g,
                                     tpx_dtype gdt, size_t hl, const void *ids,
                                     tpx_dtype idt, size_t n,
                                     const tpx__ms_rows *rows, tpx_error *err) {
  CHECK_BUF("embed_scatter_add", rows);
  CHECK_FLOAT("embed_scatter_add", wdt);
  CHECK_FLOAT("embed_scatter_add", gdt);
  CHECK_INDEX("embed_scatter_add", idt);
  if (!n || !hl)
    return TPX_OK;
  CHECK_BUF("embed_scatter_add", wgrad);
  CHECK_BUF("embed_scatter_add", g);
  CHECK_BUF("embed_scatter_add", ids);
  CHECK_KERNEL(ms, embed_scatter_add);
  return ms->k->embed_scatter_add(ms, wgrad, wdt, g, gdt, hl, ids, idt, n, rows,
                                  err);
}

/* The loss view: logits f32 / bf16 / f16, targets i32 / i64, buffers set
 * when there are rows. */
static tpx_status check_loss(const char *what, const tpx__ms_loss *l,
                             tpx_error *err) {
  CHECK_BUF(what, l);
  CHECK_FLOAT(what, l->ldt);
  CHECK_INDEX(what, l->tdt);
  if (!l->rows)
    return TPX_OK;
  if (l->len)
    CHECK_BUF(what, l->logits);
  CHECK_BUF(what, l->targets);
  return TPX_OK;
}

#define CHECK_LOSS(what, l)                                                    \
  do {                                                                         \
    tpx_status st_ = check_loss(what, l, err);                                 \
    if (st_ != TPX_OK)                                                         \
      return st_;                                                              \
  } while (0)

tpx_status tpx__ms_loss_row_max(const tpx__memspace *ms, float *mx,
                                const tpx__ms_loss *l, tpx_error *err) {
  CHECK_LOSS("loss_row_max", l);
  if (!l->rows)
    return TPX_OK;
  CHECK_BUF("loss_row_max", mx);
  CHECK_KERNEL(ms, loss_row_max);
  return ms->k->loss_row_max(ms, mx, l, err);
}

tpx_status tpx__ms_loss_row_sums(const tpx__memspace *ms, double *se,
                                 const float *mx, const tpx__ms_loss *l,
                                 int want_tgt, tpx_error *err) {
  CHECK_LOSS("loss_row_sums", l);
  if (!l->rows)
    return TPX_OK;
  CHECK_BUF("loss_row_sums", se);
  CHECK_BUF("loss_row_sums", mx);
  CHECK_KERNEL(ms, loss_row_sums);
  return ms->k->loss_row_sums(ms, se, mx, l, want_tgt, err);
}

tpx_status tpx__ms_loss_grad(const tpx__memspace *ms, void *grad, tpx_dtype gdt,
                             const float *mx, const double *se, const float *gi,
                             double scale, double sign, const tpx__ms_loss *l,
                             tpx_error *err) {
  CHECK_LOSS("loss_grad", l);
  CHECK_FLOAT("loss_grad", gdt);
  if (!l->rows || !l->len)
    return TPX_OK;
  CHECK_BUF("loss_grad", grad);
  CHECK_BUF("loss_grad", mx);
  CHECK_BUF("loss_grad", se);
  CHECK_KERNEL(ms, loss_grad);
  return ms->k->loss_grad(ms, grad, gdt, mx, se, gi, scale, sign, l, err);
}

tpx_status tpx__ms_loss_logprobs(const tpx__memspace *ms, float *out,
                                 double *sum_count, const float *mx,
                                 const double *se, const tpx__ms_loss *l,
                                 tpx_error *err) {
  CHECK_LOSS("loss_logprobs", l);
  if (!l->rows || (!out && !sum_count))
    return TPX_OK;
  CHECK_BUF("loss_logprobs", mx);
  CHECK_BUF("loss_logprobs", se);
  CHECK_KERNEL(ms, loss_logprobs);
  return ms->k->loss_logprobs(ms, out, sum_count, mx, se, l, err);
}
