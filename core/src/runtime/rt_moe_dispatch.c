/* runtime/rt_moe_dispatch.c — the MoE token dispatch object
 * (tpx/runtime_moe.h; docs/RUNTIME.md "Mixture of experts"): its checks,
 * creation (the index maps of rt_moe_plan.c, then the token rows and their
 * weights moved to the expert ranks), accessors and the dispatcher names.
 * Combine and the backward passes: rt_moe_combine.c. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_view.h"
#include "runtime/rt_moe_internal.h"

const char *tpx_moe_dispatcher_name(tpx_moe_dispatcher kind) {
  switch (kind) {
  case TPX_MOE_ALL_GATHER: return "all-gather";
  case TPX_MOE_ALL_TO_ALL: return "all-to-all";
  }
  return NULL;
}

tpx_status tpx_moe_dispatcher_parse(const char *name, tpx_moe_dispatcher *out,
                                    tpx_error *err) {
  if (name && out)
    for (int k = TPX_MOE_ALL_GATHER; k <= TPX_MOE_ALL_TO_ALL; k++)
      if (!strcmp(name, tpx_moe_dispatcher_name((tpx_moe_dispatcher)k))) {
        *out = (tpx_moe_dispatcher)k;
        return TPX_OK;
      }
  return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                       "moe dispatcher '%s' is not one of all-gather, "
                       "all-to-all",
                       name ? name : "(null)");
}

void tpx_moe_dispatch_destroy(tpx_moe_dispatch *d) {
  if (!d)
    return;
  if (d->rows != d->rows_host)
    tpx__ms_free(d->ms, d->rows);
  free(d->rows_host);
  free(d->w);
  free(d->slot_row);
  free(d->send_slot);
  free(d->offsets);
  free(d->row_src);
  free(d->row_dst);
  free(d->row_j);
  free(d->row_w);
  free(d);
}

const float *tpx_moe_dispatch_rows(const tpx_moe_dispatch *d, int64_t *m,
                                   const int64_t **offsets) {
  if (m)
    *m = d ? d->m : 0;
  if (offsets)
    *offsets = d ? d->offsets : NULL;
  return d ? d->rows : NULL;
}

size_t tpx_moe_dispatch_bytes(const tpx_moe_dispatch *d) {
  return d ? d->bytes : 0;
}

/* The options' checks (the same verdict on every rank of the group). */
static tpx_status check_opts(const tpx_moe_dispatch_options *o, const char *w,
                             tpx_error *err) {
  if (!o)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: options are NULL", w);
  if (o->struct_size < sizeof *o)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: options struct_size %zu (want %zu: "
                         "TPX_MOE_DISPATCH_OPTIONS_INIT)",
                         w, o->struct_size, sizeof *o);
  int64_t P = o->ep ? tpx_comm_size(o->ep) : 1;
  if (o->experts <= 0 || o->experts > INT32_MAX)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: experts %lld (want 1..%d: int32 indices)", w,
                         (long long)o->experts, INT32_MAX);
  if (o->top_k < 1 || o->top_k > o->experts)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: top_k %lld is not in 1..experts (%lld)", w,
                         (long long)o->top_k, (long long)o->experts);
  if (o->hidden <= 0)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: hidden %lld (want > 0)", w, (long long)o->hidden);
  if (!tpx_moe_dispatcher_name(o->kind))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: dispatcher %d is not all-gather (0) or "
                         "all-to-all (1)",
                         w, (int)o->kind);
  if (o->experts % P)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: experts %lld are not divisible by the ep "
                         "group's size %lld",
                         w, (long long)o->experts, (long long)P);
  return TPX_OK;
}

/* This rank's inputs (host views): n, pointers, expert indices, weights. */
static tpx_status check_inputs(const tpx_moe_dispatch *d, const float *x,
                               const int32_t *ex, const float *wt,
                               const char *w, tpx_error *err) {
  int64_t n = d->n, k = d->k;
  if (n > 0 && (!x || !ex || !wt))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: %s is NULL", w,
                         !x    ? "x"
                         : !ex ? "experts"
                               : "weights");
  for (int64_t i = 0; i < n * k; i++)
    if (ex[i] < 0 || ex[i] >= d->E)
      return tpx_error_set(
          err, TPX_INVALID_ARGUMENT,
          "%s: experts[%lld, %lld] = %d is not an expert index (0..%lld)", w,
          (long long)(i / k), (long long)(i % k), (int)ex[i],
          (long long)(d->E - 1));
  for (int64_t i = 0; i < n * k; i++)
    if (!isfinite(wt[i]))
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "%s: weights[%lld, %lld] = %g is not finite "
                           "(token %lld, expert %d)",
                           w, (long long)(i / k), (long long)(i % k),
                           (double)wt[i], (long long)(i / k), (int)ex[i]);
  return TPX_OK;
}

/* All-to-all: the most slots this rank sends one rank (its block width
 * before the group's max). */
static int64_t a2a_width(const tpx_moe_dispatch *d, const int32_t *ex) {
  int64_t *q = calloc((size_t)d->P, sizeof(int64_t)), mx = 0;
  if (!q)
    return -1;
  for (int64_t s = 0; s < d->n * d->k; s++) q[ex[s] / d->El]++;
  for (int64_t r = 0; r < d->P; r++) mx = q[r] > mx ? q[r] : mx;
  free(q);
  return mx;
}

/* The local half of creation: host views of the inputs, their checks, the
 * slot arrays, this rank's weights; *width for all-to-all. Any failure
 * here still joins the agreement (tpx__moe_agree), which releases the
 * peers. */
static tpx_status prepare(tpx_moe_dispatch *d, const float *x,
                          const int32_t *ex_in, const float *wt_in,
                          const void **xh, const void **exh, void *owned[3],
                          int64_t *width, tpx_error *err) {
  const char *w = "tpx_moe_dispatch_create";
  int64_t lim =
      INT64_MAX / (int64_t)sizeof(float) / (d->H > d->k ? d->H : d->k);
  if (d->n > lim)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: n %lld tokens of hidden %lld x top_k %lld "
                         "overflow a buffer's size",
                         w, (long long)d->n, (long long)d->H, (long long)d->k);
  size_t nk = (size_t)(d->n * d->k);
  const void *wh = NULL;
  tpx_status st =
      tpx__moe_in(d->ms, ex_in, nk * sizeof(int32_t), exh, &owned[0], err);
  if (st == TPX_OK)
    st = tpx__moe_in(d->ms, wt_in, nk * sizeof(float), &wh, &owned[1], err);
  if (st == TPX_OK)
    st = tpx__moe_in(d->ms, x, (size_t)(d->n * d->H) * sizeof(float), xh,
                     &owned[2], err);
  if (st == TPX_OK)
    st = check_inputs(d, *xh, *exh, wh, w, err);
  if (st != TPX_OK)
    return st;
  d->w = tpx__moe_alloc(d, nk, sizeof(float), 0);
  d->slot_row = tpx__moe_alloc(d, nk, sizeof(int64_t), 0);
  d->offsets = tpx__moe_alloc(d, (size_t)d->El + 1, sizeof(int64_t), 0);
  if (!d->w || !d->slot_row || !d->offsets)
    return tpx_error_set(err, TPX_NO_MEMORY, "%s: the map of %zu slots", w, nk);
  if (nk)
    memcpy(d->w, wh, nk * sizeof(float));
  *width = d->kind == TPX_MOE_ALL_TO_ALL ? a2a_width(d, *exh) : 0;
  if (*width < 0)
    return tpx_error_set(err, TPX_NO_MEMORY, "%s: counts", w);
  return TPX_OK;
}

/* The collective half: the index maps, then the token rows and their
 * weights moved to the expert ranks. */
static tpx_status create(tpx_moe_dispatch *d, const float *xh,
                         const int32_t *exh, const int64_t *cnts,
                         tpx_error *err) {
  const char *w = "tpx_moe_dispatch_create";
  tpx_status st = d->kind == TPX_MOE_ALL_GATHER
                      ? tpx__moe_plan_gather(d, exh, cnts, err)
                      : tpx__moe_plan_a2a(d, exh, err);
  size_t mh = (size_t)(d->m * d->H);
  if (st == TPX_OK) {
    d->rows_host = tpx__moe_alloc(d, mh, sizeof(float), 0);
    d->row_w = tpx__moe_alloc(d, (size_t)d->m, sizeof(float), 0);
    if (!d->rows_host || !d->row_w)
      st = tpx_error_set(err, TPX_NO_MEMORY, "%s: %lld rows of %lld floats", w,
                         (long long)d->m, (long long)d->H);
  }
  if (st == TPX_OK)
    st = tpx__moe_fwd(d, xh, d->H, 0, d->rows_host, err);
  if (st == TPX_OK)
    st = tpx__moe_fwd(d, d->w, 1, 1, d->row_w, err);
  d->rows = d->rows_host;
  if (st == TPX_OK && tpx__ms_is_device(d->ms)) {
    d->rows = NULL;
    st = tpx__ms_alloc(d->ms, mh ? mh * sizeof(float) : 1, 0, (void **)&d->rows,
                       err);
    if (st == TPX_OK) {
      d->bytes += mh ? mh * sizeof(float) : 1;
      st = tpx__ms_copy(d->ms, d->rows, d->rows_host, mh * sizeof(float),
                        TPX__H2D, err);
    }
  }
  return st;
}

static tpx_status dispatch_create(const tpx_moe_dispatch_options *opts,
                                  const float *x, const int32_t *experts,
                                  const float *weights, int64_t n,
                                  tpx_moe_dispatch **out, tpx_comm *ep,
                                  int multi, tpx_error *err) {
  const char *w = "tpx_moe_dispatch_create";
  tpx_status st = check_opts(opts, w, err);
  if (st == TPX_OK && !out)
    st = tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: out is NULL", w);
  if (st == TPX_OK && n < 0)
    st = tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: n %lld (want >= 0)", w,
                       (long long)n);
  tpx_moe_dispatch *d = calloc(1, sizeof *d);
  if (!d) {
    tpx_error_set(err, TPX_NO_MEMORY, "%s: the dispatch", w);
    return multi ? tpx__comm_fail_before(ep, w, TPX_NO_MEMORY, err)
                 : TPX_NO_MEMORY;
  }
  d->bytes = sizeof *d;
  d->ep = multi ? ep : NULL;
  d->ms = tpx__comm_ms(ep);
  d->P = multi ? tpx_comm_size(ep) : 1;
  d->r = multi ? tpx_comm_rank(ep) : 0;
  if (opts && opts->struct_size >= sizeof *opts) {
    d->kind = opts->kind;
    d->E = opts->experts;
    d->k = opts->top_k;
    d->H = opts->hidden;
  }
  d->El = d->E > 0 ? d->E / d->P : 0;
  d->n = n;
  const void *xh = NULL, *exh = NULL;
  void *owned[3] = {NULL, NULL, NULL};
  int64_t width = 0, *cnts = calloc((size_t)d->P, sizeof(int64_t));
  if (st == TPX_OK && !cnts)
    st = tpx_error_set(err, TPX_NO_MEMORY, "%s: counts", w);
  if (st == TPX_OK)
    st = prepare(d, x, experts, weights, &xh, &exh, owned, &width, err);
  /* every rank's verdict and options, exchanged: a refusal anywhere is
   * every rank's error, and the comm stays usable */
  int agreed = 0;
  if (cnts)
    st = tpx__moe_agree(d, st, width, cnts, &agreed, err);
  if (st == TPX_OK)
    st = create(d, xh, exh, cnts, err);
  for (int i = 0; i < 3; i++) free(owned[i]);
  free(cnts);
  if (st != TPX_OK) {
    tpx_moe_dispatch_destroy(d);
    return multi && !agreed ? tpx__comm_fail_before(ep, w, st, err) : st;
  }
  *out = d;
  return TPX_OK;
}

tpx_status tpx_moe_dispatch_create(const tpx_moe_dispatch_options *opts,
                                   const float *x, const int32_t *experts,
                                   const float *weights, int64_t n,
                                   tpx_moe_dispatch **out, tpx_error *err) {
  tpx_comm *ep = opts && opts->struct_size >= sizeof *opts ? opts->ep : NULL;
  int multi = ep && tpx_comm_size(ep) > 1;
  TPX__CLOCKED(
      multi ? tpx__comm_clock_of(ep) : NULL, TPX__CLOCK_MOE,
      dispatch_create(opts, x, experts, weights, n, out, ep, multi, err));
}
