/* tp_loss.c — vocab-parallel log-probs and cross-entropy with their
 * backward (tpx/runtime_tp.h; seed 004 get_logprobs_from_vocab_parallel_
 * logits, spec/torch-semantics.md §7 "Cross-entropy").
 *
 * Per row i of logits (this rank's vocab columns [off, off + len)):
 *   max_i    = all-reduce(max) of the local row max
 *   sumexp_i = all-reduce(sum) of sum_j exp(z_ij - max_i)
 *   tgt_i    = all-reduce(sum) of z_i,t - off on the rank holding target t
 *   logprob  = tgt_i - max_i - log(sumexp_i)
 *   d logprob / d z_ij = onehot_ij - exp(z_ij - max_i) / sumexp_i
 * sumexp and tgt travel in one f64 all-reduce, so forward is two
 * collectives. The vocab range is the layout's torch.chunk split (seed 004
 * divides V // tp, which is the same split when tp divides V).
 * Not here: the lm_head matmul (the caller's). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/tp_internal.h"
#include "shard/sharding_impl.h"

typedef struct loss_ctx {
  const char *what;
  int64_t V, off, len; /* vocab, this rank's range */
  int64_t rows;        /* positions */
  tpx_comm *tp;        /* NULL: no collective */
} loss_ctx;

static tpx_status check_opts(const tpx_tp_loss_options *opts, const char *w,
                             tpx_error *err) {
  if (!opts)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: options are NULL",
                         w);
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
  if (!opts->vocab_parallel || tpx__tp_size(sh) == 1) return TPX_OK;
  tpx_placement pl[TPX_MESH_MAX_DIMS];
  tpx__tp_activation_placements(sh, tpx_placement_shard(0), pl);
  tpx_slice s;
  TPX__TRY(tpx_layout_local_slice(&opts->vocab, 1, sh->mesh, pl, rank, &s,
                                  err));
  *off = s.offset[0];
  *len = s.length[0];
  return TPX_OK;
}

tpx_status tpx_tp_vocab_range(const tpx_sharding *sh, int64_t rank,
                              const tpx_tp_loss_options *opts,
                              int64_t *offset, int64_t *len, tpx_error *err) {
  const char *w = "tpx_tp_vocab_range";
  if (!sh || !offset || !len)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: NULL argument", w);
  TPX__TRY(check_opts(opts, w, err));
  if (rank < 0 || rank >= sh->world)
    return tpx_error_set(err, TPX_OUT_OF_RANGE, "%s: rank %lld outside 0..%lld",
                         w, (long long)rank, (long long)sh->world - 1);
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
                         (long long)c->len, (long long)c->V,
                         (long long)c->off);
  TPX__TRY(tpx__tp_check_shape(targets, logits->shape, logits->ndim - 1,
                               "targets", w, err));
  if (like_logits) {
    TPX__TRY(tpx_tensor_check(like_logits, ll_name, err));
    if (!is_float(like_logits->dtype))
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "%s: %s must be f32 or bf16, not %s", w, ll_name,
                           tpx_dtype_short_name(like_logits->dtype));
    TPX__TRY(tpx__tp_check_shape(like_logits, want, logits->ndim, ll_name, w,
                                 err));
  }
  if (like_targets) {
    TPX__TRY(tpx_tensor_check(like_targets, lt_name, err));
    if (lt_f32 && like_targets->dtype != TPX_DTYPE_F32)
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "%s: %s must be f32, not %s", w, lt_name,
                           tpx_dtype_short_name(like_targets->dtype));
    TPX__TRY(tpx__tp_check_shape(like_targets, logits->shape,
                                 logits->ndim - 1, lt_name, w, err));
  }
  c->rows = tpx_tensor_numel(targets);
  for (int64_t i = 0; i < c->rows; i++) {
    int64_t t = tpx__tp_read_index(targets, i);
    if (t != opts->ignore_index && (t < 0 || t >= c->V))
      return tpx_error_set(err, TPX_OUT_OF_RANGE,
                           "%s: targets[%lld] = %lld is outside the "
                           "vocabulary [0, %lld) and is not ignore_index "
                           "(%lld)",
                           w, (long long)i, (long long)t, (long long)c->V,
                           (long long)opts->ignore_index);
  }
  c->tp = opts->vocab_parallel && tpx__tp_size(sh) > 1 ? tpx__tp_comm(sh, mc)
                                                       : NULL;
  return TPX_OK;
}

/* exp(x) in f32 without a libm call, so the row loops vectorise: x =
 * n ln2 + r with |r| <= ln2/2 (n rounded with the 1.5 * 2^23 trick), e^r by
 * its Taylor series to r^7 (truncation error < 6e-9 relative), times 2^n
 * built in the exponent bits. Only x <= 0 occurs here (logit - row max);
 * x is raised to -100 first (-inf: no NaN), and 2^n for n < -126 is
 * flushed to 0 with integer ops, so no branch remains. */
static inline float exp_f32(float x) {
  x = fmaxf(x, -100.0f);
  const float shifter = 12582912.0f; /* 1.5 * 2^23 */
  float t = x * 1.44269504088896341f + shifter;
  int32_t tb, sb;
  memcpy(&tb, &t, 4);
  memcpy(&sb, &shifter, 4);
  float n = t - shifter;
  float r = x - n * 0.693145751953125f - n * 1.428606765330187e-06f;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  int32_t e = tb - sb + 127;
  e &= ~(e >> 31); /* max(e, 0): 2^n below the normal range -> 0 */
  e <<= 23;
  float scale;
  memcpy(&scale, &e, 4);
  return p * scale;
}

/* Blocks of 8 lanes: straight-line code the compiler vectorises at -O2. */
#define LANES 8

/* sum_j exp(z[j] - m), lanes summed per block in f32, blocks in f64. */
static double sum_exp(const float *z, int64_t len, float m) {
  double s = 0;
  int64_t j = 0;
  for (; j + LANES <= len; j += LANES) {
    float v[LANES];
    for (int l = 0; l < LANES; l++) v[l] = exp_f32(z[j + l] - m);
    float a = (v[0] + v[4]) + (v[1] + v[5]), b = (v[2] + v[6]) + (v[3] + v[7]);
    s += (double)(a + b);
  }
  for (; j < len; j++) s += (double)exp_f32(z[j] - m);
  return s;
}

/* o[j] = k * exp(z[j] - m); o may alias z. */
static void scaled_exp(const float *z, int64_t len, float m, float k,
                       float *o) {
  int64_t j = 0;
  for (; j + LANES <= len; j += LANES) {
    float v[LANES];
    for (int l = 0; l < LANES; l++) v[l] = k * exp_f32(z[j + l] - m);
    memcpy(o + j, v, sizeof v);
  }
  for (; j < len; j++) o[j] = k * exp_f32(z[j] - m);
}

static float row_max(const float *z, int64_t len) {
  float v[LANES];
  for (int l = 0; l < LANES; l++) v[l] = -INFINITY;
  int64_t j = 0;
  for (; j + LANES <= len; j += LANES)
    for (int l = 0; l < LANES; l++) v[l] = z[j + l] > v[l] ? z[j + l] : v[l];
  float m = -INFINITY;
  for (int l = 0; l < LANES; l++) m = v[l] > m ? v[l] : m;
  for (; j < len; j++) m = z[j] > m ? z[j] : m;
  return m;
}

/* Row i of the logits as f32: a pointer into the buffer, or `scratch`
 * (len floats) filled from bf16. */
static const float *row_f32(const tpx_tensor *t, int64_t i, int64_t len,
                            float *scratch) {
  if (t->dtype == TPX_DTYPE_F32) return (const float *)t->data + i * len;
  for (int64_t j = 0; j < len; j++)
    scratch[j] = tpx__tp_read_f(t->data, t->dtype, i * len + j);
  return scratch;
}

/* mx[rows] (f32), se[2 * rows] (f64: sumexp, then target logit). The
 * target part is filled only when want_tgt. Collective over tp. */
static tpx_status stats(const loss_ctx *c, const tpx_tp_loss_options *opts,
                        const tpx_tensor *logits, const tpx_tensor *targets,
                        float *mx, double *se, float *scratch, int want_tgt,
                        tpx_error *err) {
  int64_t rows = c->rows, len = c->len;
  for (int64_t i = 0; i < rows; i++) {
    const float *z = row_f32(logits, i, len, scratch);
    mx[i] = row_max(z, len);
  }
  if (c->tp && rows)
    TPX__TRY(tpx_comm_all_reduce(c->tp, mx, mx, (size_t)rows, TPX_DTYPE_F32,
                                 TPX_REDUCE_MAX, err));
  for (int64_t i = 0; i < rows; i++) {
    const float *z = row_f32(logits, i, len, scratch);
    se[i] = sum_exp(z, len, mx[i]);
    se[rows + i] = 0;
    int64_t t = tpx__tp_read_index(targets, i);
    if (want_tgt && t != opts->ignore_index && t >= c->off &&
        t < c->off + len)
      se[rows + i] = z[t - c->off];
  }
  size_t n = (size_t)rows * (want_tgt ? 2 : 1);
  if (c->tp && rows)
    TPX__TRY(tpx_comm_all_reduce(c->tp, se, se, n, TPX_DTYPE_F64,
                                 TPX_REDUCE_SUM, err));
  return TPX_OK;
}

/* Row statistics (stats()) in buffers the caller frees with free_stats,
 * whatever the result. */
typedef struct row_buf {
  float *mx;
  double *se;
  float *scratch; /* one row, for bf16 logits / grads */
} row_buf;

static void free_stats(row_buf *b) {
  free(b->mx);
  free(b->se);
  free(b->scratch);
}

static tpx_status row_stats(const loss_ctx *c, const tpx_tp_loss_options *opts,
                            const tpx_tensor *logits,
                            const tpx_tensor *targets, int want_tgt,
                            row_buf *b, tpx_error *err) {
  size_t r = (size_t)(c->rows ? c->rows : 1);
  b->mx = calloc(r, sizeof *b->mx);
  b->se = calloc(2 * r, sizeof *b->se);
  b->scratch = calloc((size_t)(c->len ? c->len : 1), sizeof *b->scratch);
  if (!b->mx || !b->se || !b->scratch)
    return tpx_error_set(err, TPX_NO_MEMORY, "%s: row statistics for %zu "
                         "positions", c->what, r);
  return stats(c, opts, logits, targets, b->mx, b->se, b->scratch, want_tgt,
               err);
}

/* grad[i, j] = g_i * (p_ij - onehot_ij) for counted rows (sign = +1:
 * cross-entropy) or g_i * (onehot_ij - p_ij) (sign = -1: log-prob). */
static void write_grad(const loss_ctx *c, const tpx_tp_loss_options *opts,
                       const tpx_tensor *logits, const tpx_tensor *targets,
                       row_buf *b, const float *gi, double scale, double sign,
                       tpx_tensor *grad) {
  int64_t len = c->len;
  int direct = grad->dtype == TPX_DTYPE_F32;
  for (int64_t i = 0; i < c->rows; i++) {
    int64_t t = tpx__tp_read_index(targets, i);
    float *out = direct ? (float *)grad->data + i * len : NULL;
    if (t == opts->ignore_index) {
      for (int64_t j = 0; j < len; j++)
        tpx__tp_write_f(grad->data, grad->dtype, i * len + j, 0.0f);
      continue;
    }
    const float *z = row_f32(logits, i, len, b->scratch);
    float m = b->mx[i];
    float k = (float)((gi ? (double)gi[i] : 1.0) * scale * sign / b->se[i]);
    float *o = out ? out : b->scratch; /* bf16: z was read into scratch */
    scaled_exp(z, len, m, k, o);
    if (t >= c->off && t < c->off + len)
      o[t - c->off] -= (float)((gi ? (double)gi[i] : 1.0) * scale * sign);
    if (!out)
      for (int64_t j = 0; j < len; j++)
        tpx__tp_write_f(grad->data, grad->dtype, i * len + j, o[j]);
  }
}

static double logprob_of(const float *mx, const double *se, int64_t rows,
                         int64_t i) {
  return se[rows + i] - (double)mx[i] - log(se[i]);
}

tpx_status tpx_tp_logprobs(const tpx_sharding *sh, tpx_mesh_comm *mc,
                           const tpx_tp_loss_options *opts,
                           const tpx_tensor *logits, const tpx_tensor *targets,
                           tpx_tensor *logprobs, tpx_error *err) {
  loss_ctx c = {.what = "tpx_tp_logprobs"};
  if (!logprobs)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: logprobs is NULL",
                         c.what);
  TPX__TRY(setup(sh, mc, opts, logits, targets, NULL, NULL, logprobs,
                 "logprobs", 1, &c, err));
  row_buf rb = {0};
  tpx_status st = row_stats(&c, opts, logits, targets, 1, &rb, err);
  for (int64_t i = 0; st == TPX_OK && i < c.rows; i++) {
    int ignored = tpx__tp_read_index(targets, i) == opts->ignore_index;
    ((float *)logprobs->data)[i] =
        ignored ? 0.0f : (float)logprob_of(rb.mx, rb.se, c.rows, i);
  }
  free_stats(&rb);
  return st;
}

tpx_status tpx_tp_logprobs_backward(const tpx_sharding *sh, tpx_mesh_comm *mc,
                                    const tpx_tp_loss_options *opts,
                                    const tpx_tensor *logits,
                                    const tpx_tensor *targets,
                                    const tpx_tensor *grad_logprobs,
                                    tpx_tensor *grad_logits, tpx_error *err) {
  loss_ctx c = {.what = "tpx_tp_logprobs_backward"};
  if (!grad_logprobs || !grad_logits)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: %s is NULL", c.what,
                         !grad_logprobs ? "grad_logprobs" : "grad_logits");
  TPX__TRY(setup(sh, mc, opts, logits, targets, grad_logits, "grad_logits",
                 grad_logprobs, "grad_logprobs", 1, &c, err));
  row_buf rb = {0};
  tpx_status st = row_stats(&c, opts, logits, targets, 0, &rb, err);
  if (st == TPX_OK)
    write_grad(&c, opts, logits, targets, &rb, grad_logprobs->data, 1.0,
               -1.0, grad_logits);
  free_stats(&rb);
  return st;
}

tpx_status tpx_tp_cross_entropy(const tpx_sharding *sh, tpx_mesh_comm *mc,
                                const tpx_tp_loss_options *opts,
                                const tpx_tensor *logits,
                                const tpx_tensor *targets, double grad_scale,
                                tpx_tensor *grad_logits, double *loss_sum,
                                int64_t *count, tpx_error *err) {
  loss_ctx c = {.what = "tpx_tp_cross_entropy"};
  TPX__TRY(setup(sh, mc, opts, logits, targets, grad_logits, "grad_logits",
                 NULL, NULL, 0, &c, err));
  row_buf rb = {0};
  tpx_status st = row_stats(&c, opts, logits, targets, 1, &rb, err);
  double sum = 0;
  int64_t n = 0;
  for (int64_t i = 0; st == TPX_OK && i < c.rows; i++) {
    if (tpx__tp_read_index(targets, i) == opts->ignore_index) continue;
    sum -= logprob_of(rb.mx, rb.se, c.rows, i);
    n++;
  }
  if (st == TPX_OK && grad_logits)
    write_grad(&c, opts, logits, targets, &rb, NULL, grad_scale, 1.0,
               grad_logits);
  free_stats(&rb);
  if (st != TPX_OK) return st;
  if (loss_sum) *loss_sum = sum;
  if (count) *count = n;
  return TPX_OK;
}

tpx_status tpx_tp_cross_entropy_mean(const tpx_sharding *sh,
                                     tpx_mesh_comm *mc,
                                     const tpx_tp_loss_options *opts,
                                     const tpx_tensor *logits,
                                     const tpx_tensor *targets,
                                     tpx_tensor *grad_logits, double *loss,
                                     tpx_error *err) {
  /* The count is local data (targets), known before the collectives. */
  int64_t n = 0;
  if (opts && targets && tpx_tensor_check(targets, "targets", NULL) == TPX_OK &&
      (targets->dtype == TPX_DTYPE_I32 || targets->dtype == TPX_DTYPE_I64)) {
    int64_t rows = tpx_tensor_numel(targets);
    for (int64_t i = 0; i < rows; i++)
      n += tpx__tp_read_index(targets, i) != opts->ignore_index;
  }
  double sum = 0;
  int64_t cnt = 0;
  TPX__TRY(tpx_tp_cross_entropy(sh, mc, opts, logits, targets,
                                n ? 1.0 / (double)n : 0.0, grad_logits, &sum,
                                &cnt, err));
  if (loss) *loss = cnt ? sum / (double)cnt : 0.0;
  return TPX_OK;
}
