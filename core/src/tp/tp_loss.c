/* tp_loss.c — vocab-parallel log-probs and cross-entropy with their
 * backward (tpx/runtime_tp.h; docs/SEMANTICS.md "Vocab-parallel embedding
 * and loss").
 *
 * Per row i of logits (this rank's vocab columns [off, off + len)):
 *   max_i    = all-reduce(max) of the local row max
 *   sumexp_i = all-reduce(sum) of sum_j exp(z_ij - max_i)
 *   tgt_i    = all-reduce(sum) of z_i,t - off on the rank holding target t
 *   logprob  = tgt_i - max_i - log(sumexp_i)
 *   d logprob / d z_ij = onehot_ij - exp(z_ij - max_i) / sumexp_i
 * sumexp and tgt travel in one f64 all-reduce, so forward is two
 * collectives. The vocab range is the layout's torch.chunk split (the
 * upstream training utility divides V // tp, which is the same split when
 * tp divides V; docs/RUNTIME.md "Vocab ranges").
 * Logits, targets, log-probs and gradients live in the mesh comm's memory
 * space; the row loops are its kernels (device/memspace.h, loss_*; host
 * loops in device/host_kernels.c). The host reads back only the target-range
 * verdict and cross-entropy's (sum, count), which the call returns.
 * Not here: the lm_head matmul (the caller's). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_view.h"
#include "device/kernels.h"
#include "tp/tp_internal.h"
#include "shard/sharding_view.h"

typedef struct loss_ctx {
  const char *what;
  int64_t V, off, len;     /* vocab, this rank's range */
  int64_t rows;            /* positions */
  tpx_comm *tp;            /* NULL: no collective */
  const tpx__memspace *ms; /* where logits, targets and results live */
  tpx__ms_loss l;          /* the kernels' view of logits and targets */
} loss_ctx;

static tpx_status check_opts(const tpx_tp_loss_options *opts, const char *w,
                             tpx_error *err) {
  if (!opts)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: options are NULL", w);
  if (opts->struct_size < sizeof *opts)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: options struct_size %zu is smaller than %zu "
                         "(use TPX_TP_LOSS_OPTIONS_INIT)",
                         w, opts->struct_size, sizeof *opts);
  if (opts->vocab <= 0)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: options.vocab must be > 0 (the global vocab "
                         "size), got %lld",
                         w, (long long)opts->vocab);
  return TPX_OK;
}

static tpx_status range_of(const tpx_sharding *sh, int64_t rank,
                           const tpx_tp_loss_options *opts, int64_t *off,
                           int64_t *len, tpx_error *err) {
  *off = 0;
  *len = opts->vocab;
  if (!opts->vocab_parallel || tpx__tp_size(sh) == 1)
    return TPX_OK;
  tpx_placement pl[TPX_MESH_MAX_DIMS];
  tpx__tp_activation_placements(sh, tpx_placement_shard(0), pl);
  tpx_slice s;
  TPX__TRY(tpx_layout_local_slice(&opts->vocab, 1, tpx_sharding_mesh(sh), pl,
                                  rank, &s, err));
  *off = s.offset[0];
  *len = s.length[0];
  return TPX_OK;
}

tpx_status tpx_tp_vocab_range(const tpx_sharding *sh, int64_t rank,
                              const tpx_tp_loss_options *opts, int64_t *offset,
                              int64_t *len, tpx_error *err) {
  const char *w = "tpx_tp_vocab_range";
  if (!sh || !offset || !len)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: NULL argument", w);
  TPX__TRY(check_opts(opts, w, err));
  if (rank < 0 || rank >= tpx__sv_world(sh))
    return tpx_error_set(err, TPX_OUT_OF_RANGE, "%s: rank %lld outside 0..%lld",
                         w, (long long)rank, (long long)tpx__sv_world(sh) - 1);
  return range_of(sh, rank, opts, offset, len, err);
}

static int is_float(tpx_dtype d) {
  return d == TPX_DTYPE_F32 || d == TPX_DTYPE_BF16;
}

/* Checks of logits / targets (and a tensor shaped like logits or like
 * targets, when given) before any collective. */
static tpx_status setup(const tpx_sharding *sh, tpx_mesh_comm *mc,
                        const tpx_tp_loss_options *opts,
                        const tpx_tensor *logits, const tpx_tensor *targets,
                        const tpx_tensor *like_logits, const char *ll_name,
                        const tpx_tensor *like_targets, const char *lt_name,
                        int lt_f32, loss_ctx *c, tpx_error *err) {
  const char *w = c->what;
  TPX__TRY(tpx__tp_check_comm(sh, mc, w, err));
  TPX__TRY(check_opts(opts, w, err));
  TPX__TRY(tpx_tensor_check(logits, "logits", err));
  TPX__TRY(tpx_tensor_check(targets, "targets", err));
  if (!is_float(logits->dtype))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: logits must be f32 or bf16, not %s", w,
                         tpx_dtype_short_name(logits->dtype));
  if (targets->dtype != TPX_DTYPE_I32 && targets->dtype != TPX_DTYPE_I64)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: targets must be int32 or int64, not %s", w,
                         tpx_dtype_short_name(targets->dtype));
  if (logits->ndim < 1)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: logits need at least one dim (the vocab)", w);
  TPX__TRY(range_of(sh, tpx__tp_my_rank(mc), opts, &c->off, &c->len, err));
  c->V = opts->vocab;
  int64_t want[TPX_MAX_TENSOR_DIMS];
  memcpy(want, logits->shape, sizeof want);
  want[logits->ndim - 1] = c->len;
  if (logits->shape[logits->ndim - 1] != c->len)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: logits' last dim is %lld but this rank holds "
                         "%lld of the %lld vocab entries (offset %lld)",
                         w, (long long)logits->shape[logits->ndim - 1],
                         (long long)c->len, (long long)c->V, (long long)c->off);
  TPX__TRY(tpx__tp_check_shape(targets, logits->shape, logits->ndim - 1,
                               "targets", w, err));
  if (like_logits) {
    TPX__TRY(tpx_tensor_check(like_logits, ll_name, err));
    if (!is_float(like_logits->dtype))
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "%s: %s must be f32 or bf16, not %s", w, ll_name,
                           tpx_dtype_short_name(like_logits->dtype));
    TPX__TRY(
        tpx__tp_check_shape(like_logits, want, logits->ndim, ll_name, w, err));
  }
  if (like_targets) {
    TPX__TRY(tpx_tensor_check(like_targets, lt_name, err));
    if (lt_f32 && like_targets->dtype != TPX_DTYPE_F32)
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "%s: %s must be f32, not %s", w, lt_name,
                           tpx_dtype_short_name(like_targets->dtype));
    TPX__TRY(tpx__tp_check_shape(like_targets, logits->shape, logits->ndim - 1,
                                 lt_name, w, err));
  }
  c->rows = tpx_tensor_numel(targets);
  c->ms = tpx__comm_ms(tpx_mesh_comm_world(mc));
  int64_t bad[2] = {-1, 0};
  if (c->rows > 0)
    TPX__TRY(tpx__ms_index_check(c->ms, targets->data, targets->dtype,
                                 (size_t)c->rows, c->V, 1, opts->ignore_index,
                                 bad, err));
  if (bad[0] >= 0)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "%s: targets[%lld] = %lld is outside the "
                         "vocabulary [0, %lld) and is not ignore_index "
                         "(%lld)",
                         w, (long long)bad[0], (long long)bad[1],
                         (long long)c->V, (long long)opts->ignore_index);
  c->l.logits = logits->data;
  c->l.ldt = logits->dtype;
  c->l.targets = targets->data;
  c->l.tdt = targets->dtype;
  c->l.rows = (size_t)c->rows;
  c->l.len = (size_t)c->len;
  c->l.off = c->off;
  c->l.ignore = opts->ignore_index;
  c->tp = opts->vocab_parallel && tpx__tp_size(sh) > 1 ? tpx__tp_comm(sh, mc)
                                                       : NULL;
  return TPX_OK;
}

/* Row statistics in the memory space: mx[rows] (f32), se[2 * rows] (f64:
 * sumexp, then the target logit, filled only when want_tgt). Collective
 * over tp: the row max all-reduced (max), then sumexp and target logit in
 * one f64 all-reduce (sum). The caller frees with free_stats, whatever the
 * result. */
typedef struct row_buf {
  float *mx;
  double *se;
} row_buf;

static void free_stats(const loss_ctx *c, row_buf *b) {
  tpx__ms_free(c->ms, b->mx);
  tpx__ms_free(c->ms, b->se);
}

static tpx_status row_stats(const loss_ctx *c, int want_tgt, row_buf *b,
                            tpx_error *err) {
  const tpx__memspace *ms = c->ms;
  size_t rows = (size_t)c->rows;
  void *mx = NULL, *se = NULL;
  TPX__TRY(tpx__ms_alloc(ms, rows * sizeof(float), 1, &mx, err));
  b->mx = mx;
  TPX__TRY(tpx__ms_alloc(ms, 2 * rows * sizeof(double), 1, &se, err));
  b->se = se;
  if (rows == 0)
    return TPX_OK;
  TPX__TRY(tpx__ms_loss_row_max(ms, b->mx, &c->l, err));
  if (c->tp)
    TPX__TRY(tpx_comm_all_reduce(c->tp, b->mx, b->mx, rows, TPX_DTYPE_F32,
                                 TPX_REDUCE_MAX, err));
  TPX__TRY(tpx__ms_loss_row_sums(ms, b->se, b->mx, &c->l, want_tgt, err));
  if (c->tp)
    TPX__TRY(tpx_comm_all_reduce(c->tp, b->se, b->se, rows * (want_tgt ? 2 : 1),
                                 TPX_DTYPE_F64, TPX_REDUCE_SUM, err));
  return TPX_OK;
}

/* grad[i, j] = g_i * (p_ij - onehot_ij) for counted rows (sign = +1:
 * cross-entropy) or g_i * (onehot_ij - p_ij) (sign = -1: log-prob). */
static tpx_status write_grad(const loss_ctx *c, const row_buf *b,
                             const float *gi, double scale, double sign,
                             tpx_tensor *grad, tpx_error *err) {
  if (c->rows == 0)
    return TPX_OK;
  return tpx__ms_loss_grad(c->ms, grad->data, grad->dtype, b->mx, b->se, gi,
                           scale, sign, &c->l, err);
}

static tpx_status clocked_tp_logprobs(const tpx_sharding *sh, tpx_mesh_comm *mc,
                                      const tpx_tp_loss_options *opts,
                                      const tpx_tensor *logits,
                                      const tpx_tensor *targets,
                                      tpx_tensor *logprobs, tpx_error *err) {
  loss_ctx c = {.what = "tpx_tp_logprobs"};
  if (!logprobs)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: logprobs is NULL",
                         c.what);
  TPX__TRY(setup(sh, mc, opts, logits, targets, NULL, NULL, logprobs,
                 "logprobs", 1, &c, err));
  row_buf rb = {0};
  tpx_status st = row_stats(&c, 1, &rb, err);
  if (st == TPX_OK && c.rows)
    st = tpx__ms_loss_logprobs(c.ms, logprobs->data, NULL, rb.mx, rb.se, &c.l,
                               err);
  free_stats(&c, &rb);
  return st;
}

static tpx_status clocked_tp_logprobs_backward(
    const tpx_sharding *sh, tpx_mesh_comm *mc, const tpx_tp_loss_options *opts,
    const tpx_tensor *logits, const tpx_tensor *targets,
    const tpx_tensor *grad_logprobs, tpx_tensor *grad_logits, tpx_error *err) {
  loss_ctx c = {.what = "tpx_tp_logprobs_backward"};
  if (!grad_logprobs || !grad_logits)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: %s is NULL", c.what,
                         !grad_logprobs ? "grad_logprobs" : "grad_logits");
  TPX__TRY(setup(sh, mc, opts, logits, targets, grad_logits, "grad_logits",
                 grad_logprobs, "grad_logprobs", 1, &c, err));
  row_buf rb = {0};
  tpx_status st = row_stats(&c, 0, &rb, err);
  if (st == TPX_OK)
    st = write_grad(&c, &rb, grad_logprobs->data, 1.0, -1.0, grad_logits, err);
  free_stats(&c, &rb);
  return st;
}

/* Cross-entropy: the sum of -log p over counted rows and their count come
 * back to the host in one copy of two f64 (the call returns them); the
 * gradient scale is grad_scale, or 1 / count when `mean`. */
static tpx_status cross_entropy(const tpx_sharding *sh, tpx_mesh_comm *mc,
                                const tpx_tp_loss_options *opts,
                                const tpx_tensor *logits,
                                const tpx_tensor *targets, int mean,
                                double grad_scale, tpx_tensor *grad_logits,
                                double *loss_sum, int64_t *count,
                                tpx_error *err) {
  loss_ctx c = {.what = "tpx_tp_cross_entropy"};
  TPX__TRY(setup(sh, mc, opts, logits, targets, grad_logits, "grad_logits",
                 NULL, NULL, 0, &c, err));
  row_buf rb = {0};
  tpx_status st = row_stats(&c, 1, &rb, err);
  double sc[2] = {0, 0}; /* sum, count */
  void *dsc = NULL;
  if (st == TPX_OK)
    st = tpx__ms_alloc(c.ms, sizeof sc, 1, &dsc, err);
  if (st == TPX_OK && c.rows)
    st = tpx__ms_loss_logprobs(c.ms, NULL, dsc, rb.mx, rb.se, &c.l, err);
  if (st == TPX_OK)
    st = tpx__ms_copy(c.ms, sc, dsc, sizeof sc, TPX__D2H, err);
  tpx__ms_free(c.ms, dsc);
  int64_t n = (int64_t)sc[1];
  if (mean)
    grad_scale = n ? 1.0 / (double)n : 0.0;
  if (st == TPX_OK && grad_logits)
    st = write_grad(&c, &rb, NULL, grad_scale, 1.0, grad_logits, err);
  free_stats(&c, &rb);
  if (st != TPX_OK)
    return st;
  if (loss_sum)
    *loss_sum = sc[0];
  if (count)
    *count = n;
  return TPX_OK;
}

static tpx_status clocked_tp_cross_entropy(
    const tpx_sharding *sh, tpx_mesh_comm *mc, const tpx_tp_loss_options *opts,
    const tpx_tensor *logits, const tpx_tensor *targets, double grad_scale,
    tpx_tensor *grad_logits, double *loss_sum, int64_t *count, tpx_error *err) {
  return cross_entropy(sh, mc, opts, logits, targets, 0, grad_scale,
                       grad_logits, loss_sum, count, err);
}

static tpx_status clocked_tp_cross_entropy_mean(
    const tpx_sharding *sh, tpx_mesh_comm *mc, const tpx_tp_loss_options *opts,
    const tpx_tensor *logits, const tpx_tensor *targets,
    tpx_tensor *grad_logits, double *loss, tpx_error *err) {
  /* The count comes with the sum, before the gradient is written. */
  double sum = 0;
  int64_t cnt = 0;
  TPX__TRY(cross_entropy(sh, mc, opts, logits, targets, 1, 0.0, grad_logits,
                         &sum, &cnt, err));
  if (loss)
    *loss = cnt ? sum / (double)cnt : 0.0;
  return TPX_OK;
}

/* ---- the public calls, clocked (tpx_mesh_comm_time) ---- */

tpx_status tpx_tp_logprobs(const tpx_sharding *sh, tpx_mesh_comm *mc,
                           const tpx_tp_loss_options *opts,
                           const tpx_tensor *logits, const tpx_tensor *targets,
                           tpx_tensor *logprobs, tpx_error *err) {
  TPX__CLOCKED(
      tpx__mesh_comm_clock(mc), TPX__CLOCK_TP,
      clocked_tp_logprobs(sh, mc, opts, logits, targets, logprobs, err));
}

tpx_status tpx_tp_logprobs_backward(const tpx_sharding *sh, tpx_mesh_comm *mc,
                                    const tpx_tp_loss_options *opts,
                                    const tpx_tensor *logits,
                                    const tpx_tensor *targets,
                                    const tpx_tensor *grad_logprobs,
                                    tpx_tensor *grad_logits, tpx_error *err) {
  TPX__CLOCKED(tpx__mesh_comm_clock(mc), TPX__CLOCK_TP,
               clocked_tp_logprobs_backward(sh, mc, opts, logits, targets,
                                            grad_logprobs, grad_logits, err));
}

tpx_status tpx_tp_cross_entropy(const tpx_sharding *sh, tpx_mesh_comm *mc,
                                const tpx_tp_loss_options *opts,
                                const tpx_tensor *logits,
                                const tpx_tensor *targets, double grad_scale,
                                tpx_tensor *grad_logits, double *loss_sum,
                                int64_t *count, tpx_error *err) {
  TPX__CLOCKED(tpx__mesh_comm_clock(mc), TPX__CLOCK_TP,
               clocked_tp_cross_entropy(sh, mc, opts, logits, targets,
                                        grad_scale, grad_logits, loss_sum,
                                        count, err));
}

tpx_status tpx_tp_cross_entropy_mean(const tpx_sharding *sh, tpx_mesh_comm *mc,
                                     const tpx_tp_loss_options *opts,
                                     const tpx_tensor *logits,
                                     const tpx_tensor *targets,
                                     tpx_tensor *grad_logits, double *loss,
                                     tpx_error *err) {
  TPX__CLOCKED(tpx__mesh_comm_clock(mc), TPX__CLOCK_TP,
               clocked_tp_cross_entropy_mean(sh, mc, opts, logits, targets,
                                             grad_logits, loss, err));
}
