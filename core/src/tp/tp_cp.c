/* tp_cp.c — context parallelism's sequence cut and its collectives
 * (tpx/runtime_cp.h; docs/SEMANTICS.md "Context parallelism"): the
 * positions each cp rank holds, the all-gather of a sequence-sharded
 * tensor into global position order and the reduce-scatter back.
 * Reordering between "rank after rank" (what the comm gathers) and
 * "position order" moves runs of consecutive positions, each one 2-D copy
 * over the batch rows in the comm's memory space (two runs per rank under
 * head-tail, one under contiguous), so nothing here reads the data.
 * Not here: log-probs with seq_index (tp_cp_logprobs.c). */
#include <stdlib.h>
#include <string.h>

#include "comm/comm_view.h"
#include "device/memspace.h"
#include "tp/tp_cp_internal.h"

const char *tpx_cp_layout_name(tpx_cp_layout layout) {
  switch (layout) {
  case TPX_CP_HEAD_TAIL: return "head-tail";
  case TPX_CP_CONTIGUOUS: return "contiguous";
  }
  return NULL;
}

tpx_status tpx_cp_layout_parse(const char *name, tpx_cp_layout *out,
                               tpx_error *err) {
  if (name && out)
    for (int l = TPX_CP_HEAD_TAIL; l <= TPX_CP_CONTIGUOUS; l++)
      if (!strcmp(name, tpx_cp_layout_name((tpx_cp_layout)l))) {
        *out = (tpx_cp_layout)l;
        return TPX_OK;
      }
  return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                       "cp layout '%s' is not one of head-tail, contiguous",
                       name ? name : "(null)");
}

tpx_status tpx_cp_positions(int64_t seq, int64_t cp, int64_t cp_rank,
                            tpx_cp_layout layout, int64_t *pos,
                            tpx_error *err) {
  const char *w = "tpx_cp_positions";
  if (!pos)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: pos is NULL", w);
  if (seq <= 0 || cp <= 0 || cp_rank < 0 || cp_rank >= cp)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: seq %lld, cp %lld, cp rank %lld (want seq > 0, "
                         "cp > 0, 0 <= rank < cp)",
                         w, (long long)seq, (long long)cp, (long long)cp_rank);
  if (!tpx_cp_layout_name(layout))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: unknown layout %d", w,
                         (int)layout);
  /* cp 1 cuts nothing: any length, positions in order */
  int64_t parts = layout == TPX_CP_HEAD_TAIL && cp > 1 ? 2 * cp : cp;
  if (seq % parts)
    return tpx_error_set(
        err, TPX_INVALID_ARGUMENT,
        "%s: sequence length %lld is not divisible by %s = %lld (the %s "
        "split cuts it into %lld equal chunks)",
        w, (long long)seq, parts == 2 * cp ? "2·cp" : "cp", (long long)parts,
        tpx_cp_layout_name(layout), (long long)parts);
  int64_t c = seq / parts;
  for (int64_t j = 0; j < c; j++) pos[j] = cp_rank * c + j;
  if (parts == 2 * cp)
    for (int64_t j = 0; j < c; j++) pos[c + j] = (2 * cp - 1 - cp_rank) * c + j;
  return TPX_OK;
}

tpx_status tpx_cp_seq_index(int64_t seq, int64_t cp, tpx_cp_layout layout,
                            int64_t *seq_index, tpx_error *err) {
  if (!seq_index)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_cp_seq_index: seq_index is NULL");
  for (int64_t r = 0; r < (cp > 0 ? cp : 1); r++) {
    tpx_status st = tpx_cp_positions(
        seq, cp, r, layout, seq_index + r * (seq / (cp > 0 ? cp : 1)), err);
    if (st)
      return st;
  }
  return TPX_OK;
}

int64_t tpx__cp_size(const tpx_comm *cp) {
  return cp && tpx_comm_size(cp) > 1 ? tpx_comm_size(cp) : 1;
}

const tpx__memspace *tpx__cp_ms(const tpx_comm *cp) {
  return cp ? tpx__comm_ms(cp) : &tpx__ms_host;
}

tpx_status tpx__cp_reorder(const tpx__memspace *ms, void *blocks, void *seq,
                           int64_t T, const int64_t *index, int64_t n,
                           int64_t t, int64_t b, size_t rb, int to_seq,
                           tpx_error *err) {
  for (int64_t r = 0; r < n; r++)
    for (int64_t j = 0; j < t;) {
      const int64_t *ix = index + r * t;
      int64_t k = j + 1;
      while (k < t && ix[k] == ix[k - 1] + 1) k++;
      unsigned char *bp =
          (unsigned char *)blocks + (size_t)(r * b * t + j) * rb;
      unsigned char *sp = (unsigned char *)seq + (size_t)ix[j] * rb;
      size_t width = (size_t)(k - j) * rb;
      tpx_status st =
          to_seq ? tpx__ms_copy2d(ms, sp, (size_t)T * rb, bp, (size_t)t * rb,
                                  width, (size_t)b, TPX__D2D, err)
                 : tpx__ms_copy2d(ms, bp, (size_t)t * rb, sp, (size_t)T * rb,
                                  width, (size_t)b, TPX__D2D, err);
      if (st)
        return st;
      j = k;
    }
  return TPX_OK;
}

/* Checks shared by the gather and its backward: local [b, t, rest...],
 * full [b, t·n, rest...], one dtype; *rb = bytes of one position's row. */
static tpx_status check_pair(const char *w, int64_t n, const tpx_tensor *local,
                             const tpx_tensor *full, size_t *rb,
                             tpx_error *err) {
  tpx_status st = tpx_tensor_check(local, "local", err);
  if (!st)
    st = tpx_tensor_check(full, "full", err);
  if (st)
    return st;
  if (local->ndim < 2 || full->ndim != local->ndim ||
      full->dtype != local->dtype || full->shape[0] != local->shape[0] ||
      full->shape[1] != local->shape[1] * n)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: local [b, t, ...] and full [b, t·cp, ...] of one "
                         "dtype expected (cp %lld; local %dd [%lld, %lld], "
                         "full %dd [%lld, %lld])",
                         w, (long long)n, local->ndim,
                         (long long)local->shape[0], (long long)local->shape[1],
                         full->ndim, (long long)full->shape[0],
                         (long long)full->shape[1]);
  for (int d = 2; d < local->ndim; d++)
    if (full->shape[d] != local->shape[d])
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "%s: dim %d of local (%lld) and full (%lld) differ",
                           w, d, (long long)local->shape[d],
                           (long long)full->shape[d]);
  int64_t rows = local->shape[0] * local->shape[1];
  *rb = rows ? (size_t)(tpx_tensor_nbytes(local) / rows) : 0;
  return TPX_OK;
}

/* The index of the whole sharded sequence (host), or NULL + error. */
static int64_t *seq_index_of(int64_t T, int64_t n, tpx_cp_layout layout,
                             tpx_error *err) {
  int64_t *ix = malloc(sizeof(int64_t) * (size_t)(T ? T : 1));
  if (!ix) {
    tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
    return NULL;
  }
  if (T && tpx_cp_seq_index(T, n, layout, ix, err)) {
    free(ix);
    return NULL;
  }
  return ix;
}

/* gather 1: local -> full (all-gather); 0: full -> local (reduce-scatter) */
static tpx_status cp_move(tpx_comm *cp, tpx_cp_layout layout,
                          const tpx_tensor *local, const tpx_tensor *full,
                          int gather, tpx_error *err) {
  const char *w =
      gather ? "tpx_cp_all_gather_seq" : "tpx_cp_reduce_scatter_seq";
  int64_t n = tpx__cp_size(cp);
  size_t rb = 0;
  tpx_status st = check_pair(w, n, local, full, &rb, err);
  if (st)
    return st;
  if (!gather && local->dtype != TPX_DTYPE_F32 && local->dtype != TPX_DTYPE_F64)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: gradients must be f32 or f64, not %s", w,
                         tpx_dtype_short_name(local->dtype));
  int64_t b = local->shape[0], t = local->shape[1], T = t * n;
  if (!b || !t || !rb)
    return TPX_OK;
  int64_t *ix = seq_index_of(T, n, layout, err);
  if (!ix)
    return err ? err->status : TPX_INVALID_ARGUMENT;
  const tpx__memspace *ms = tpx__cp_ms(cp);
  size_t count = (size_t)(tpx_tensor_numel(local));
  void *stage = NULL;
  if (n == 1) /* no collective: the reorder is the whole move */
    st = tpx__cp_reorder(ms, local->data, full->data, T, ix, 1, t, b, rb,
                         gather, err);
  else if (!(st = tpx__ms_alloc(ms, rb * (size_t)(b * T), 0, &stage, err))) {
    if (gather) {
      st =
          tpx_comm_all_gather(cp, local->data, stage, count, local->dtype, err);
      if (!st)
        st = tpx__cp_reorder(ms, stage, full->data, T, ix, n, t, b, rb, 1, err);
    } else {
      st = tpx__cp_reorder(ms, stage, full->data, T, ix, n, t, b, rb, 0, err);
      if (!st)
        st = tpx_comm_reduce_scatter(cp, stage, local->data, count,
                                     local->dtype, TPX_REDUCE_SUM, err);
    }
  }
  tpx__ms_free(ms, stage);
  free(ix);
  return st;
}

static tpx_status clocked_cp_all_gather_seq(tpx_comm *cp, tpx_cp_layout layout,
                                            const tpx_tensor *local,
                                            tpx_tensor *full, tpx_error *err) {
  return cp_move(cp, layout, local, full, 1, err);
}

static tpx_status clocked_cp_reduce_scatter_seq(tpx_comm *cp,
                                                tpx_cp_layout layout,
                                                const tpx_tensor *full,
                                                tpx_tensor *local,
                                                tpx_error *err) {
  return cp_move(cp, layout, local, full, 0, err);
}

/* ---- the public calls, clocked (tpx_mesh_comm_time) ---- */

tpx_status tpx_cp_all_gather_seq(tpx_comm *cp, tpx_cp_layout layout,
                                 const tpx_tensor *local, tpx_tensor *full,
                                 tpx_error *err) {
  TPX__CLOCKED(tpx__comm_clock_of(cp), TPX__CLOCK_CP,
               clocked_cp_all_gather_seq(cp, layout, local, full, err));
}

tpx_status tpx_cp_reduce_scatter_seq(tpx_comm *cp, tpx_cp_layout layout,
                                     const tpx_tensor *full, tpx_tensor *local,
                                     tpx_error *err) {
  TPX__CLOCKED(tpx__comm_clock_of(cp), TPX__CLOCK_CP,
               clocked_cp_reduce_scatter_seq(cp, layout, full, local, err));
}
