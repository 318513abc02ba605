/* runtime/rt_moe_plan.c — the MoE dispatch's index maps
 * (runtime/rt_moe_internal.h), one function per dispatcher; each is
 * collective over ep (counts and choices exchanged with tpx__moe_coll).
 * Expert rows come out ordered by local expert, then source rank, then
 * token under both, so the experts see the same rows in the same order. */
#include <stdlib.h>
#include <string.h>

#include "runtime/rt_moe_internal.h"

/* The expert-side arrays for m rows. */
static tpx_status alloc_rows(tpx_moe_dispatch *d, tpx_error *err) {
  size_t m = (size_t)d->m;
  d->row_src = tpx__moe_alloc(d, m, sizeof(int64_t), 0);
  d->row_dst = tpx__moe_alloc(d, m, sizeof(int64_t), 0);
  d->row_j = tpx__moe_alloc(d, m, sizeof(int32_t), 0);
  if (!d->row_src || !d->row_dst || !d->row_j)
    return tpx_error_set(err, TPX_NO_MEMORY,
                         "tpx_moe_dispatch_create: the map of %lld rows",
                         (long long)d->m);
  return TPX_OK;
}

/* The agreement (rt_moe_internal.h): what every rank sends. */
enum { A_N, A_E, A_K, A_H, A_KIND, A_BAD, A_WIDTH, A_LEN };

/* The ranks' options differ: the first field that does, named. */
static tpx_status disagree(const tpx_moe_dispatch *d, const int64_t *all,
                           int64_t q, tpx_error *err) {
  static const char *names[] = {"n", "experts", "top_k", "hidden",
                                "dispatcher"};
  const int64_t *me = all + d->r * A_LEN, *o = all + q * A_LEN;
  int f = A_E;
  while (f < A_KIND && me[f] == o[f]) f++;
  return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                       "tpx_moe_dispatch_create: the ep group's ranks "
                       "disagree on %s: rank %d has %lld, rank %lld has %lld "
                       "(every rank passes the same options)",
                       names[f], d->r, (long long)me[f], (long long)q,
                       (long long)o[f]);
}

/* The group's buffers fit a size_t (as int64): an all-gather of nmax
 * token rows (and the return of nmax·k slot rows), or ep·C rows. */
static tpx_status sizes_fit(const tpx_moe_dispatch *d, tpx_error *err) {
  int64_t rows = d->kind == TPX_MOE_ALL_GATHER ? d->nmax * d->k : d->C, b;
  if (__builtin_mul_overflow(rows, (int64_t)d->P, &b) ||
      __builtin_mul_overflow(b, d->H, &b) ||
      __builtin_mul_overflow(b, (int64_t)sizeof(float), &b))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_moe_dispatch_create: %lld rows per rank of "
                         "hidden %lld over %d ranks overflow a buffer's size",
                         (long long)rows, (long long)d->H, d->P);
  return TPX_OK;
}

tpx_status tpx__moe_agree(tpx_moe_dispatch *d, tpx_status st, int64_t width,
                          int64_t *cnts, int *agreed, tpx_error *err) {
  *agreed = 0;
  if (d->P == 1) {
    cnts[0] = d->nmax = d->n;
    d->C = width;
    return st != TPX_OK ? st : sizes_fit(d, err);
  }
  int64_t mine[A_LEN] = {d->n,         d->E, d->k, d->H, (int64_t)d->kind,
                         st != TPX_OK, width};
  int64_t *all = malloc(sizeof(int64_t) * (size_t)(d->P * A_LEN));
  if (!all)
    return st != TPX_OK ? st
                        : tpx_error_set(err, TPX_NO_MEMORY,
                                        "tpx_moe_dispatch_create: the "
                                        "agreement of %d ranks",
                                        d->P);
  tpx_status cs =
      tpx__moe_coll(d, TPX__MOE_GATHER, mine, all, A_LEN, TPX_DTYPE_I64, err);
  if (cs != TPX_OK) {
    free(all);
    return st != TPX_OK ? st : cs;
  }
  *agreed = 1; /* from here every rank reaches the same verdict */
  for (int64_t q = 0; st == TPX_OK && q < d->P; q++)
    if (all[q * A_LEN + A_BAD])
      st = tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_moe_dispatch_create: rank %lld of the ep group "
                         "refused its input (its own error says why)",
                         (long long)q);
  for (int64_t q = 0; st == TPX_OK && q < d->P; q++)
    for (int f = A_E; st == TPX_OK && f <= A_KIND; f++)
      if (all[q * A_LEN + f] != mine[f])
        st = disagree(d, all, q, err);
  d->nmax = d->C = 0;
  for (int64_t q = 0; st == TPX_OK && q < d->P; q++) {
    cnts[q] = all[q * A_LEN + A_N];
    d->nmax = cnts[q] > d->nmax ? cnts[q] : d->nmax;
    d->C = all[q * A_LEN + A_WIDTH] > d->C ? all[q * A_LEN + A_WIDTH] : d->C;
  }
  free(all);
  return st != TPX_OK ? st : sizes_fit(d, err);
}

tpx_status tpx__moe_plan_gather(tpx_moe_dispatch *d, const int32_t *ex,
                                const int64_t *cnts, tpx_error *err) {
  int64_t P = d->P, k = d->k, El = d->El, lo = d->r * El;
  int64_t n = d->n;
  tpx_status st = TPX_OK;
  int64_t nk = d->nmax * k;
  int32_t *send = calloc((size_t)(nk ? nk : 1), sizeof(int32_t));
  int32_t *ge = malloc(sizeof(int32_t) * (size_t)(P * nk > 0 ? P * nk : 1));
  if (!send || !ge)
    st = tpx_error_set(err, TPX_NO_MEMORY,
                       "tpx_moe_dispatch_create: %lld gathered choices",
                       (long long)(P * nk));
  if (st == TPX_OK) {
    for (int64_t i = 0; i < nk; i++) send[i] = i < n * k ? ex[i] : -1;
    st = tpx__moe_coll(d, TPX__MOE_GATHER, send, ge, (size_t)nk, TPX_DTYPE_I32,
                       err);
  }
  free(send);
  /* counting sort by local expert; (source rank, token) order kept */
  for (int64_t e = 0; e <= El; e++) d->offsets[e] = 0;
  for (int64_t i = 0; st == TPX_OK && i < P * nk; i++)
    if (ge[i] >= lo && ge[i] < lo + El && (i / k) % d->nmax < cnts[i / nk])
      d->offsets[ge[i] - lo + 1]++;
  for (int64_t e = 0; e < El; e++) d->offsets[e + 1] += d->offsets[e];
  d->m = d->offsets[El];
  if (st == TPX_OK)
    st = alloc_rows(d, err);
  int64_t *fill = calloc((size_t)El, sizeof(int64_t));
  if (st == TPX_OK && !fill)
    st = tpx_error_set(err, TPX_NO_MEMORY, "tpx_moe_dispatch_create: fill");
  for (int64_t i = 0; st == TPX_OK && i < P * nk; i++)
    if (ge[i] >= lo && ge[i] < lo + El && (i / k) % d->nmax < cnts[i / nk]) {
      int64_t e = ge[i] - lo, row = d->offsets[e] + fill[e]++;
      d->row_src[row] = i / k; /* s·nmax + t */
      d->row_j[row] = (int32_t)(i % k);
      d->row_dst[row] = i; /* (s·nmax + t)·k + j */
    }
  for (int64_t s = 0; st == TPX_OK && s < n * k; s++) d->slot_row[s] = s;
  free(fill);
  free(ge);
  return st;
}

/* All-to-all, this rank as owner: scnt[E] rows per global expert, the
 * position of each slot in its destination's block (pos), the blocks'
 * widths qcnt[P]. Rows of a block go by local expert, then token. */
static void owner_side(const tpx_moe_dispatch *d, const int32_t *ex,
                       int64_t *scnt, int64_t *start, int64_t *qcnt,
                       int64_t *pos) {
  int64_t E = d->E, El = d->El, nk = d->n * d->k;
  for (int64_t e = 0; e < E; e++) scnt[e] = 0;
  for (int64_t s = 0; s < nk; s++) scnt[ex[s]]++;
  for (int64_t q = 0; q < d->P; q++) {
    int64_t base = 0;
    for (int64_t el = 0; el < El; el++) {
      start[q * El + el] = base;
      base += scnt[q * El + el];
    }
    qcnt[q] = base;
  }
  for (int64_t s = 0; s < nk; s++) pos[s] = start[ex[s]]++;
}

tpx_status tpx__moe_plan_a2a(tpx_moe_dispatch *d, const int32_t *ex,
                             tpx_error *err) {
  int64_t P = d->P, E = d->E, El = d->El, nk = d->n * d->k;
  int64_t *scnt = malloc(sizeof(int64_t) * (size_t)(3 * E + P));
  int64_t *pos = malloc(sizeof(int64_t) * (size_t)(nk ? nk : 1));
  if (!scnt || !pos) {
    free(scnt);
    free(pos);
    return tpx_error_set(err, TPX_NO_MEMORY,
                         "tpx_moe_dispatch_create: counts of %lld experts",
                         (long long)E);
  }
  int64_t *start = scnt + E, *rcnt = scnt + 2 * E, *qcnt = scnt + 3 * E;
  owner_side(d, ex, scnt, start, qcnt, pos); /* d->C: tpx__moe_agree */
  tpx_status st = tpx__moe_coll(d, TPX__MOE_A2A, scnt, rcnt, (size_t)El,
                                TPX_DTYPE_I64, err);
  if (st == TPX_OK && !(d->send_slot = tpx__moe_alloc(d, (size_t)(P * d->C),
                                                      sizeof(int64_t), 0)))
    st = tpx_error_set(err, TPX_NO_MEMORY,
                       "tpx_moe_dispatch_create: %lld send slots",
                       (long long)(P * d->C));
  if (st == TPX_OK) {
    for (int64_t i = 0; i < P * d->C; i++) d->send_slot[i] = -1;
    for (int64_t s = 0; s < nk; s++) {
      int64_t at = (ex[s] / El) * d->C + pos[s];
      d->send_slot[at] = s;
      d->slot_row[s] = at;
    }
    /* expert side: rows from rank s for local expert el sit in s's block
     * after those of the experts before el */
    d->offsets[0] = 0;
    for (int64_t el = 0; el < El; el++) {
      d->offsets[el + 1] = d->offsets[el];
      for (int64_t s = 0; s < P; s++) d->offsets[el + 1] += rcnt[s * El + el];
    }
    d->m = d->offsets[El];
    st = alloc_rows(d, err);
  }
  if (st == TPX_OK) {
    int64_t row = 0;
    for (int64_t el = 0; el < El; el++)
      for (int64_t s = 0; s < P; s++) {
        int64_t first = 0;
        for (int64_t e2 = 0; e2 < el; e2++) first += rcnt[s * El + e2];
        for (int64_t p = 0; p < rcnt[s * El + el]; p++, row++) {
          d->row_src[row] = d->row_dst[row] = s * d->C + first + p;
          d->row_j[row] = -1;
        }
      }
  }
  free(scnt);
  free(pos);
  return st;
}
