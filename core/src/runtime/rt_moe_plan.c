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

tpx_status tpx__moe_plan_gather(tpx_moe_dispatch *d, const int32_t *ex,
                                tpx_error *err) {
  int64_t P = d->P, k = d->k, El = d->El, lo = d->r * El;
  int64_t n = d->n, *cnts = malloc(sizeof(int64_t) * (size_t)P);
  if (!cnts)
    return tpx_error_set(err, TPX_NO_MEMORY, "tpx_moe_dispatch_create: counts");
  tpx_status st =
      tpx__moe_coll(d, TPX__MOE_GATHER, &n, cnts, 1, TPX_DTYPE_I64, err);
  d->nmax = 0;
  for (int64_t s = 0; st == TPX_OK && s < P; s++)
    d->nmax = cnts[s] > d->nmax ? cnts[s] : d->nmax;
  int64_t nk = d->nmax * k;
  int32_t *send = malloc(sizeof(int32_t) * (size_t)(nk ? nk : 1));
  int32_t *ge = malloc(sizeof(int32_t) * (size_t)(P * nk > 0 ? P * nk : 1));
  if (st == TPX_OK && (!send || !ge))
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
  free(cnts);
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
  int64_t *scnt = malloc(sizeof(int64_t) * (size_t)(3 * E + 2 * P));
  int64_t *pos = malloc(sizeof(int64_t) * (size_t)(nk ? nk : 1));
  if (!scnt || !pos) {
    free(scnt);
    free(pos);
    return tpx_error_set(err, TPX_NO_MEMORY,
                         "tpx_moe_dispatch_create: counts of %lld experts",
                         (long long)E);
  }
  int64_t *start = scnt + E, *rcnt = scnt + 2 * E, *qcnt = scnt + 3 * E;
  int64_t *cmax = qcnt + P;
  owner_side(d, ex, scnt, start, qcnt, pos);
  cmax[0] = 0;
  for (int64_t q = 0; q < P; q++)
    cmax[0] = qcnt[q] > cmax[0] ? qcnt[q] : cmax[0];
  tpx_status st =
      tpx__moe_coll(d, TPX__MOE_MAX, cmax, &d->C, 1, TPX_DTYPE_I64, err);
  if (st == TPX_OK)
    st = tpx__moe_coll(d, TPX__MOE_A2A, scnt, rcnt, (size_t)El, TPX_DTYPE_I64,
                       err);
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
