/* runtime/rt_moe_combine.c — the MoE combine and the backward passes
 * (tpx/runtime_moe.h; docs/RUNTIME.md "Mixture of experts"). Each token's
 * sum over its k choices is taken on the token's own rank, in the order
 * j = 0..k-1, in double and rounded once, so both dispatchers and every ep
 * size give the same bits. Collective over ep. */
#include <stdlib.h>
#include <string.h>

#include "comm/comm_view.h"
#include "runtime/rt_moe_internal.h"

/* out[t] = sum_j (w[t, j] or 1) · back[slot_row[t·k + j]], rows of W. */
static tpx_status sum_slots(const tpx_moe_dispatch *d, const float *back,
                            int64_t W, int weighted, float *out,
                            tpx_error *err) {
  double *acc = malloc(sizeof(double) * (size_t)W);
  if (!acc)
    return tpx_error_set(err, TPX_NO_MEMORY, "moe combine: %lld doubles",
                         (long long)W);
  for (int64_t t = 0; t < d->n; t++) {
    for (int64_t h = 0; h < W; h++) acc[h] = 0;
    for (int64_t j = 0; j < d->k; j++) {
      int64_t s = t * d->k + j;
      const float *row = back + d->slot_row[s] * W;
      double wj = weighted ? (double)d->w[s] : 1.0;
      for (int64_t h = 0; h < W; h++) acc[h] += wj * (double)row[h];
    }
    for (int64_t h = 0; h < W; h++) out[t * W + h] = (float)acc[h];
  }
  free(acc);
  return TPX_OK;
}

static tpx_status check(const tpx_moe_dispatch *d, const char *w, const void *a,
                        const char *an, int64_t arows, const void *b,
                        const char *bn, int64_t brows, tpx_error *err) {
  if (!d)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: dispatch is NULL", w);
  if ((!a && arows > 0) || (!b && brows > 0))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: %s is NULL", w,
                         !a && arows > 0 ? an : bn);
  return TPX_OK;
}

/* The rank failed before (or in) a collective: release its peers. */
static tpx_status fail(const tpx_moe_dispatch *d, const char *w, tpx_status st,
                       tpx_error *err) {
  return st != TPX_OK && d && d->ep ? tpx__comm_fail_before(d->ep, w, st, err)
                                    : st;
}

/* Return vals (W per row) and sum them per token into dst of d->ms. */
static tpx_status ret_sum(const tpx_moe_dispatch *d, const float *vals_dev,
                          int64_t W, int weighted, float *dst, tpx_error *err) {
  const void *vh = NULL;
  void *vo = NULL, *oh = NULL, *oo = NULL;
  float *back = NULL;
  size_t ob = (size_t)(d->n * W) * sizeof(float);
  tpx_status st = tpx__moe_in(
      d->ms, vals_dev, (size_t)(d->m * W) * sizeof(float), &vh, &vo, err);
  if (st == TPX_OK)
    st = tpx__moe_ret(d, vh, W, &back, err);
  if (st == TPX_OK)
    st = tpx__moe_out_buf(d->ms, dst, ob, &oh, &oo, err);
  if (st == TPX_OK)
    st = sum_slots(d, back, W, weighted, oh, err);
  if (st == TPX_OK)
    st = tpx__moe_out(d->ms, dst, oo, ob, err);
  else
    free(oo);
  free(back);
  free(vo);
  return st;
}

static tpx_status combine(tpx_moe_dispatch *d, const float *y, float *out,
                          tpx_error *err) {
  const char *w = "tpx_moe_combine";
  tpx_status st =
      check(d, w, y, "y", d ? d->m : 0, out, "out", d ? d->n : 0, err);
  if (st == TPX_OK)
    st = ret_sum(d, y, d->H, 1, out, err);
  return fail(d, w, st, err);
}

static tpx_status dispatch_backward(tpx_moe_dispatch *d, const float *dx_rows,
                                    float *dx, tpx_error *err) {
  const char *w = "tpx_moe_dispatch_backward";
  tpx_status st = check(d, w, dx_rows, "dx_rows", d ? d->m : 0, dx, "dx",
                        d ? d->n : 0, err);
  if (st == TPX_OK)
    st = ret_sum(d, dx_rows, d->H, 0, dx, err);
  return fail(d, w, st, err);
}

/* dy[i] = row_w[i] · dout row i (f32), dot[i] = <dout row i, y[i]>. */
static void local_grads(const tpx_moe_dispatch *d, const float *drow,
                        const float *y, float *dy, float *dot) {
  int64_t H = d->H;
  for (int64_t i = 0; i < d->m; i++) {
    double acc = 0;
    for (int64_t h = 0; h < H; h++) {
      dy[i * H + h] = d->row_w[i] * drow[i * H + h];
      acc += (double)drow[i * H + h] * (double)y[i * H + h];
    }
    dot[i] = (float)acc;
  }
}

static tpx_status combine_backward_run(tpx_moe_dispatch *d, const float *dout,
                                       const float *y, float *dy,
                                       float *dweights, tpx_error *err) {
  size_t mh = (size_t)(d->m * d->H), nh = (size_t)(d->n * d->H);
  const void *dh = NULL, *yh = NULL;
  void *dout_o = NULL, *yo = NULL, *dyh = NULL, *dyo = NULL;
  float *drow = malloc(sizeof(float) * (mh ? mh : 1));
  float *dot = malloc(sizeof(float) * (size_t)(d->m ? d->m : 1));
  tpx_status st = TPX_OK;
  if (!drow || !dot)
    st = tpx_error_set(err, TPX_NO_MEMORY,
                       "tpx_moe_combine_backward: %lld rows", (long long)d->m);
  if (st == TPX_OK)
    st = tpx__moe_in(d->ms, dout, nh * sizeof(float), &dh, &dout_o, err);
  if (st == TPX_OK)
    st = tpx__moe_in(d->ms, y, mh * sizeof(float), &yh, &yo, err);
  if (st == TPX_OK)
    st = tpx__moe_fwd(d, dh, d->H, 0, drow, err);
  if (st == TPX_OK)
    st = tpx__moe_out_buf(d->ms, dy, mh * sizeof(float), &dyh, &dyo, err);
  if (st == TPX_OK)
    local_grads(d, drow, yh, dyh, dot);
  if (st == TPX_OK)
    st = tpx__moe_out(d->ms, dy, dyo, mh * sizeof(float), err);
  else
    free(dyo);
  if (st == TPX_OK) { /* the dots go back to the tokens' slots */
    float *back = NULL;
    void *wh = NULL, *wo = NULL;
    size_t wb = (size_t)(d->n * d->k) * sizeof(float);
    st = tpx__moe_ret(d, dot, 1, &back, err);
    if (st == TPX_OK)
      st = tpx__moe_out_buf(d->ms, dweights, wb, &wh, &wo, err);
    for (int64_t s = 0; st == TPX_OK && s < d->n * d->k; s++)
      ((float *)wh)[s] = back[d->slot_row[s]];
    if (st == TPX_OK)
      st = tpx__moe_out(d->ms, dweights, wo, wb, err);
    else
      free(wo);
    free(back);
  }
  free(dout_o);
  free(yo);
  free(drow);
  free(dot);
  return st;
}

static tpx_status combine_backward(tpx_moe_dispatch *d, const float *dout,
                                   const float *y, float *dy, float *dweights,
                                   tpx_error *err) {
  const char *w = "tpx_moe_combine_backward";
  tpx_status st =
      check(d, w, dout, "dout", d ? d->n : 0, y, "y", d ? d->m : 0, err);
  if (st == TPX_OK)
    st = check(d, w, dy, "dy", d->m, dweights, "dweights", d->n, err);
  if (st == TPX_OK)
    st = combine_backward_run(d, dout, y, dy, dweights, err);
  return fail(d, w, st, err);
}

/* The public calls, clocked on the ep comm's clock (tpx_mesh_comm_time's
 * moe_seconds; none at ep 1). */
static tpx__comm_clock *clock_of(const tpx_moe_dispatch *d) {
  return d && d->ep ? tpx__comm_clock_of(d->ep) : NULL;
}

tpx_status tpx_moe_combine(tpx_moe_dispatch *d, const float *y, float *out,
                           tpx_error *err) {
  TPX__CLOCKED(clock_of(d), TPX__CLOCK_MOE, combine(d, y, out, err));
}

tpx_status tpx_moe_combine_backward(tpx_moe_dispatch *d, const float *dout,
                                    const float *y, float *dy, float *dweights,
                                    tpx_error *err) {
  TPX__CLOCKED(clock_of(d), TPX__CLOCK_MOE,
               combine_backward(d, dout, y, dy, dweights, err));
}

tpx_status tpx_moe_dispatch_backward(tpx_moe_dispatch *d, const float *dx_rows,
                                     float *dx, tpx_error *err) {
  TPX__CLOCKED(clock_of(d), TPX__CLOCK_MOE,
               dispatch_backward(d, dx_rows, dx, err));
}
