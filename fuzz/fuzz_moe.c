/* fuzz_moe.c — libFuzzer target: the MoE router and a single-rank token
 * dispatch (tpx/runtime_moe.h; core/src/runtime/rt_moe_*.c). The input
 * decodes into router options (some invalid), n tokens' logits (raw f32
 * bits, so NaN, ±inf and denormals, or small values) and a bias, then the
 * dispatch options and perturbations of the routing it is handed (an index
 * out of range, a NaN weight, n < 0, a NULL buffer). What must hold:
 *  - tpx_moe_route refuses (TPX_INVALID_ARGUMENT with a message) any
 *    non-finite logit; when it succeeds every token's k experts are in
 *    0..E-1 and distinct, its weights finite and its probs in [0, 1];
 *    tpx_moe_route_backward on that output succeeds;
 *  - the dispatch at ep 1 refuses every perturbation, and otherwise gives
 *    m = n·k rows grouped by expert (offsets from 0 to m, rising), each row
 *    the x of a token routed to that expert, in token order; combine gives
 *    exactly sum_j w[t,j] · y[row of (t,j)] in double, rounded once
 *    (docs/RUNTIME.md "Mixture of experts"), and both backward calls
 *    succeed. A breach aborts. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "tpx/tpx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { MAX_E = 16, MAX_N = 8, MAX_H = 4 };

static float raw_float(tpx_fuzz_bytes *b) {
  uint32_t u = 0;
  for (int i = 0; i < 4; i++) u = u << 8 | tpx_fuzz_byte(b);
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* A logit: raw bits (1 in 4) or a small value. */
static float logit(tpx_fuzz_bytes *b) {
  if (tpx_fuzz_byte(b) % 4 == 0)
    return raw_float(b);
  return ((float)tpx_fuzz_byte(b) - 128.0f) / 16.0f;
}

static void check(int ok) {
  if (!ok)
    abort();
}

static void refused(tpx_status st, const tpx_error *e) {
  check(st == TPX_INVALID_ARGUMENT && e->message[0] != '\0');
}

/* The routing's invariants (route returned OK). */
static void routed(int64_t n, int64_t E, int64_t k, const int32_t *ex,
                   const float *w, const float *p) {
  for (int64_t t = 0; t < n; t++) {
    for (int64_t j = 0; j < k; j++) {
      int32_t e = ex[t * k + j];
      check(e >= 0 && e < E && isfinite(w[t * k + j]));
      for (int64_t i = 0; i < j; i++) check(ex[t * k + i] != e);
    }
    for (int64_t e = 0; e < E; e++)
      check(p[t * E + e] >= 0.0f && p[t * E + e] <= 1.0f);
  }
}

/* The dispatch at ep 1 on a valid routing, against sums taken here. */
static void dispatch(tpx_fuzz_bytes *b, int64_t n, int64_t E, int64_t k,
                     const int32_t *ex0, const float *w0) {
  int64_t H = 1 + tpx_fuzz_byte(b) % MAX_H;
  tpx_moe_dispatch_options o = TPX_MOE_DISPATCH_OPTIONS_INIT;
  o.experts = E;
  o.top_k = k;
  o.hidden = H;
  o.kind = (tpx_moe_dispatcher)(tpx_fuzz_byte(b) % 2);
  float x[MAX_N * MAX_H], w[MAX_N * MAX_E], y[MAX_N * MAX_E * MAX_H];
  float out[MAX_N * MAX_H], dx[MAX_N * MAX_H], dw[MAX_N * MAX_E];
  float dy[MAX_N * MAX_E * MAX_H];
  int32_t ex[MAX_N * MAX_E];
  for (int64_t i = 0; i < n * H; i++) x[i] = logit(b);
  memcpy(ex, ex0, sizeof(int32_t) * (size_t)(n * k));
  memcpy(w, w0, sizeof(float) * (size_t)(n * k));
  for (int64_t i = 0; i < n * H; i++)
    if (!isfinite(x[i]))
      x[i] = 0.5f; /* the rows are compared bit for bit below */
  /* a perturbation the dispatch must refuse */
  unsigned f = tpx_fuzz_byte(b) % 8;
  int64_t nn = n;
  const float *xp = x;
  if (n > 0 && f == 1)
    ex[tpx_fuzz_byte(b) % (n * k)] = tpx_fuzz_byte(b) % 2 ? (int32_t)E : -1;
  else if (n > 0 && f == 2)
    w[tpx_fuzz_byte(b) % (n * k)] = tpx_fuzz_byte(b) % 2 ? NAN : INFINITY;
  else if (f == 3)
    nn = -1 - (int64_t)tpx_fuzz_byte(b);
  else if (n > 0 && f == 4)
    xp = NULL;
  else
    f = 0;
  tpx_moe_dispatch *d = NULL;
  tpx_error e = {0};
  tpx_status st = tpx_moe_dispatch_create(&o, xp, ex, w, nn, &d, &e);
  if (f) {
    refused(st, &e);
    check(d == NULL);
    return;
  }
  check(st == TPX_OK && d != NULL);
  int64_t m = -1;
  const int64_t *off = NULL;
  const float *rows = tpx_moe_dispatch_rows(d, &m, &off);
  check(m == n * k && off[0] == 0 && off[E] == m);
  for (int64_t g = 0; g < E; g++) {
    check(off[g] <= off[g + 1]);
    int64_t row = off[g];
    for (int64_t t = 0; t < n; t++)
      for (int64_t j = 0; j < k; j++)
        if (ex[t * k + j] == g) {
          check(row < off[g + 1]);
          check(!memcmp(rows + row * H, x + t * H, sizeof(float) * (size_t)H));
          row++;
        }
    check(row == off[g + 1]);
  }
  /* a toy expert: y = row · (e + 1) */
  for (int64_t g = 0; g < E; g++)
    for (int64_t i = off[g] * H; i < off[g + 1] * H; i++)
      y[i] = rows[i] * (float)(g + 1);
  check(tpx_moe_combine(d, y, out, &e) == TPX_OK);
  for (int64_t t = 0; t < n; t++)
    for (int64_t h = 0; h < H; h++) {
      double acc = 0;
      for (int64_t j = 0; j < k; j++) {
        int32_t g = ex[t * k + j];
        float yv = x[t * H + h] * (float)(g + 1);
        acc += (double)w[t * k + j] * (double)yv;
      }
      float want = (float)acc, got = out[t * H + h];
      check(memcmp(&want, &got, sizeof want) == 0 ||
            (isnan(want) && isnan(got)));
    }
  check(tpx_moe_combine_backward(d, out, y, dy, dw, &e) == TPX_OK);
  check(tpx_moe_dispatch_backward(d, dy, dx, &e) == TPX_OK);
  tpx_moe_dispatch_destroy(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tpx_fuzz_bytes b = {data, size};
  tpx_moe_router_options o = TPX_MOE_ROUTER_OPTIONS_INIT;
  o.experts = 1 + tpx_fuzz_byte(&b) % MAX_E;
  o.top_k = tpx_fuzz_byte(&b) % (o.experts + 2); /* 0 and E + 1 refused */
  o.score = (tpx_moe_score)(tpx_fuzz_byte(&b) % 3);
  o.norm_topk_prob = tpx_fuzz_byte(&b) % 2;
  o.n_group = tpx_fuzz_byte(&b) % 5;
  o.topk_group = tpx_fuzz_byte(&b) % 5;
  unsigned sf = tpx_fuzz_byte(&b);
  o.routed_scaling_factor = sf < 200 ? 0.0 : sf < 250 ? sf / 100.0 : -1.0;
  int64_t n = tpx_fuzz_byte(&b) % (MAX_N + 1), E = o.experts;
  float lg[MAX_N * MAX_E], bias[MAX_E], w[MAX_N * MAX_E], p[MAX_N * MAX_E];
  float dw[MAX_N * MAX_E], dl[MAX_N * MAX_E];
  int32_t ex[MAX_N * MAX_E];
  int finite = 1, has_bias = tpx_fuzz_byte(&b) % 2;
  for (int64_t i = 0; i < n * E; i++) finite &= isfinite(lg[i] = logit(&b));
  for (int64_t e = 0; e < E; e++) bias[e] = logit(&b);
  if (o.score == TPX_MOE_SIGMOID && has_bias)
    for (int64_t e = 0; e < E; e++) finite &= isfinite(bias[e]);
  tpx_error e = {0};
  tpx_status st =
      tpx_moe_route(&o, lg, has_bias ? bias : NULL, n, ex, w, p, &e);
  if (!finite && n > 0) {
    refused(st, &e);
    return 0;
  }
  if (st != TPX_OK) {
    refused(st, &e); /* the options */
    return 0;
  }
  int64_t k = o.top_k;
  routed(n, E, k, ex, w, p);
  for (int64_t i = 0; i < n * k; i++)
    dw[i] = ((float)tpx_fuzz_byte(&b) - 128.0f) / 64.0f;
  check(tpx_moe_route_backward(&o, p, ex, w, dw, n, dl, &e) == TPX_OK);
  dispatch(&b, n, E, k, ex, w);
  return 0;
}
