/* tp_cp_logprobs.c — vocab-parallel log-probs of logits sharded over tp
 * (vocab) and cp (sequence), with the sequence's seq_index
 * (tpx_tp_logprobs_seq, tpx/runtime_cp.h; docs/SEMANTICS.md "Context
 * parallelism"). The upstream recipe, step by step:
 *   1. all-gather input_ids over cp and undo the permutation (seq_index),
 *   2. targets = ids shifted left by one in original order, picked back at
 *      this rank's positions,
 *   3. tpx_tp_logprobs on the local block (the tp collectives),
 *   4. all-gather the log-probs over cp, undo the permutation, drop the
 *      last position.
 * Every buffer lives in the mesh comm's memory space; only seq_index is
 * read on the host. */
#include <stdlib.h>
#include <string.h>

#include "comm/comm_view.h"
#include "tp/tp_cp_internal.h"
#include "tp/tp_internal.h"

typedef struct lp_ctx {
  const char *w;
  int64_t n, r, b, t, T;
  const tpx__memspace *ms;
  tpx_comm *cp;
} lp_ctx;

/* seq_index must be a permutation of 0..T-1. */
static tpx_status check_index(const lp_ctx *c, const int64_t *ix,
                              tpx_error *err) {
  unsigned char *seen = calloc((size_t)c->T + 1, 1);
  if (!seen)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  for (int64_t j = 0; j < c->T; j++) {
    if (ix[j] < 0 || ix[j] >= c->T || seen[ix[j]]) {
      free(seen);
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "%s: seq_index[%lld] = %lld is %s (seq_index must "
                           "be a permutation of 0..%lld)",
                           c->w, (long long)j, (long long)ix[j],
                           ix[j] < 0 || ix[j] >= c->T ? "out of range"
                                                      : "repeated",
                           (long long)c->T - 1);
    }
    seen[ix[j]] = 1;
  }
  free(seen);
  return TPX_OK;
}

static tpx_status check_args(lp_ctx *c, const tpx_tensor *logits,
                             const tpx_tensor *ids, const int64_t *ix,
                             const tpx_tensor *out, tpx_error *err) {
  if (!logits || !ids || !ix || !out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: %s is NULL", c->w,
                         !logits ? "logits"
                         : !ids  ? "input_ids"
                         : !ix   ? "seq_index"
                                 : "logprobs");
  tpx_status st = tpx_tensor_check(ids, "input_ids", err);
  if (!st)
    st = tpx_tensor_check(out, "logprobs", err);
  if (st)
    return st;
  if (ids->ndim != 2 ||
      (ids->dtype != TPX_DTYPE_I32 && ids->dtype != TPX_DTYPE_I64))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: input_ids must be int32 or int64 [b, t]", c->w);
  c->b = ids->shape[0];
  c->t = ids->shape[1];
  c->T = c->t * c->n;
  if (c->T < 1)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: the sequence is empty",
                         c->w);
  int64_t want[2] = {c->b, c->T - 1};
  if (out->dtype != TPX_DTYPE_F32)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: logprobs must be f32, not %s", c->w,
                         tpx_dtype_short_name(out->dtype));
  TPX__TRY(tpx__tp_check_shape(out, want, 2, "logprobs", c->w, err));
  return check_index(c, ix, err);
}

/* 1 + 2: this rank's targets [b, t] (ids' dtype) from the gathered ids. */
static tpx_status local_targets(const lp_ctx *c, const tpx_tensor *ids,
                                const int64_t *ix, void *targets,
                                tpx_error *err) {
  size_t es = tpx_dtype_size(ids->dtype);
  size_t bytes = es * (size_t)(c->b * c->T);
  void *stage = NULL, *orig = NULL;
  int64_t *shift = malloc(sizeof(int64_t) * (size_t)c->t);
  tpx_status st =
      shift ? TPX_OK : tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  if (!st)
    st = tpx__ms_alloc(c->ms, bytes, 0, &stage, err);
  if (!st)
    st = tpx__ms_alloc(c->ms, bytes, 0, &orig, err);
  if (!st)
    st = c->n > 1 ? tpx_comm_all_gather(c->cp, ids->data, stage,
                                        (size_t)(c->b * c->t), ids->dtype, err)
                  : tpx__ms_copy(c->ms, stage, ids->data, bytes, TPX__D2D, err);
  if (!st)
    st = tpx__cp_reorder(c->ms, stage, orig, c->T, ix, c->n, c->t, c->b, es, 1,
                         err);
  for (int64_t j = 0; !st && j < c->t; j++)
    shift[j] = (ix[c->r * c->t + j] + 1) % c->T;
  if (!st)
    st = tpx__cp_reorder(c->ms, targets, orig, c->T, shift, 1, c->t, c->b, es,
                         0, err);
  free(shift);
  tpx__ms_free(c->ms, stage);
  tpx__ms_free(c->ms, orig);
  return st;
}

/* 4: the local log-probs [b, t] gathered into out [b, T - 1]. */
static tpx_status gather_out(const lp_ctx *c, const float *lp,
                             const int64_t *ix, tpx_tensor *out,
                             tpx_error *err) {
  size_t bytes = sizeof(float) * (size_t)(c->b * c->T);
  void *stage = NULL, *orig = NULL;
  tpx_status st = tpx__ms_alloc(c->ms, bytes, 0, &stage, err);
  if (!st)
    st = tpx__ms_alloc(c->ms, bytes, 0, &orig, err);
  if (!st)
    st = c->n > 1 ? tpx_comm_all_gather(c->cp, lp, stage, (size_t)(c->b * c->t),
                                        TPX_DTYPE_F32, err)
                  : tpx__ms_copy(c->ms, stage, lp, bytes, TPX__D2D, err);
  if (!st)
    st = tpx__cp_reorder(c->ms, stage, orig, c->T, ix, c->n, c->t, c->b,
                         sizeof(float), 1, err);
  size_t row = sizeof(float) * (size_t)(c->T - 1);
  if (!st)
    st = tpx__ms_copy2d(c->ms, out->data, row, orig,
                        sizeof(float) * (size_t)c->T, row, (size_t)c->b,
                        TPX__D2D, err);
  tpx__ms_free(c->ms, stage);
  tpx__ms_free(c->ms, orig);
  return st;
}

static tpx_status
clocked_tp_logprobs_seq(const tpx_sharding *sh, tpx_mesh_comm *mc, tpx_comm *cp,
                        const tpx_tp_loss_options *opts,
                        const tpx_tensor *logits, const tpx_tensor *input_ids,
                        const int64_t *seq_index, tpx_tensor *logprobs,
                        tpx_error *err) {
  lp_ctx c = {.w = "tpx_tp_logprobs_seq", .cp = cp};
  TPX__TRY(tpx__tp_check_comm(sh, mc, c.w, err));
  c.n = tpx__cp_size(cp);
  c.r = c.n > 1 ? tpx_comm_rank(cp) : 0;
  c.ms = tpx__comm_ms(tpx_mesh_comm_world(mc));
  TPX__TRY(check_args(&c, logits, input_ids, seq_index, logprobs, err));
  size_t es = tpx_dtype_size(input_ids->dtype);
  void *tg = NULL, *lp = NULL;
  tpx_status st = tpx__ms_alloc(c.ms, es * (size_t)(c.b * c.t), 0, &tg, err);
  if (!st)
    st = tpx__ms_alloc(c.ms, sizeof(float) * (size_t)(c.b * c.t), 0, &lp, err);
  if (!st)
    st = local_targets(&c, input_ids, seq_index, tg, err);
  if (!st) {
    tpx_tensor tt = tpx_tensor_make(tg, input_ids->dtype, 2, input_ids->shape);
    tpx_tensor tl = tpx_tensor_make(lp, TPX_DTYPE_F32, 2, input_ids->shape);
    st = tpx_tp_logprobs(sh, mc, opts, logits, &tt, &tl, err);
  }
  if (!st)
    st = gather_out(&c, lp, seq_index, logprobs, err);
  tpx__ms_free(c.ms, tg);
  tpx__ms_free(c.ms, lp);
  return st;
}

/* ---- the public calls, clocked (tpx_mesh_comm_time) ---- */

tpx_status tpx_tp_logprobs_seq(const tpx_sharding *sh, tpx_mesh_comm *mc,
                               tpx_comm *cp, const tpx_tp_loss_options *opts,
                               const tpx_tensor *logits,
                               const tpx_tensor *input_ids,
                               const int64_t *seq_index, tpx_tensor *logprobs,
                               tpx_error *err) {
  TPX__CLOCKED(tpx__mesh_comm_clock(mc), TPX__CLOCK_TP,
               clocked_tp_logprobs_seq(sh, mc, cp, opts, logits, input_ids,
                                       seq_index, logprobs, err));
}
