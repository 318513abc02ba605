/* test_moe_route.c — the MoE router (tpx/runtime_moe.h): softmax top-k
 * with and without norm_topk_prob (Qwen3-MoE, Mixtral), sigmoid with the
 * correction bias, grouped top-k and routed_scaling_factor (DeepSeek-V3,
 * GLM-4-MoE) against values worked out by hand, ties to the lower index;
 * the backward against central differences of the weights' formulas in
 * double; the options the router refuses, each named. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tpx/tpx.h"

static double sig(double x) { return 1.0 / (1.0 + exp(-x)); }

START_TEST(test_softmax) {
  tpx_moe_router_options o = TPX_MOE_ROUTER_OPTIONS_INIT;
  o.experts = 4;
  o.top_k = 2;
  float logits[8] = {1, 2, 3, 0, /* ties: */ 1, 1, 1, 1};
  int32_t ex[4];
  float w[4], p[8];
  ck_assert_int_eq(tpx_moe_route(&o, logits, NULL, 2, ex, w, p, NULL), TPX_OK);
  double z = exp(1) + exp(2) + exp(3) + exp(0);
  for (int e = 0; e < 4; e++)
    ck_assert_float_eq_tol(p[e], exp(logits[e]) / z, 1e-7);
  ck_assert_int_eq(ex[0], 2);
  ck_assert_int_eq(ex[1], 1);
  ck_assert_float_eq_tol(w[0], exp(3) / z, 1e-7);
  ck_assert_float_eq_tol(w[1], exp(2) / z, 1e-7);
  /* a tie goes to the lower index */
  ck_assert_int_eq(ex[2], 0);
  ck_assert_int_eq(ex[3], 1);
  ck_assert(w[2] == 0.25f && w[3] == 0.25f);
  o.norm_topk_prob = 1; /* renormalised over the k chosen */
  ck_assert_int_eq(tpx_moe_route(&o, logits, NULL, 2, ex, w, p, NULL), TPX_OK);
  ck_assert_float_eq_tol(w[0], 1.0 / (1.0 + exp(-1)), 1e-7);
  ck_assert_float_eq_tol(w[1], exp(-1) / (1.0 + exp(-1)), 1e-7);
  ck_assert(w[2] == 0.5f && w[3] == 0.5f);
  /* n = 0 with NULL buffers */
  ck_assert_int_eq(tpx_moe_route(&o, NULL, NULL, 0, NULL, NULL, NULL, NULL),
                   TPX_OK);
}
END_TEST

START_TEST(test_sigmoid) {
  tpx_moe_router_options o = TPX_MOE_ROUTER_OPTIONS_INIT;
  o.experts = 4;
  o.top_k = 2;
  o.score = TPX_MOE_SIGMOID;
  o.norm_topk_prob = 1;
  o.routed_scaling_factor = 2.5;
  float logits[4] = {0, 1, -1, 2}, bias[4] = {0, 0, 2, 0};
  int32_t ex[2];
  float w[2], p[4];
  /* the bias makes expert 2 the first choice; its weight is its score */
  ck_assert_int_eq(tpx_moe_route(&o, logits, bias, 1, ex, w, p, NULL), TPX_OK);
  for (int e = 0; e < 4; e++)
    ck_assert_float_eq_tol(p[e], sig(logits[e]), 1e-7);
  ck_assert_int_eq(ex[0], 2);
  ck_assert_int_eq(ex[1], 3);
  double s2 = sig(-1), s3 = sig(2);
  ck_assert_float_eq_tol(w[0], 2.5 * s2 / (s2 + s3), 1e-6);
  ck_assert_float_eq_tol(w[1], 2.5 * s3 / (s2 + s3), 1e-6);
  /* without the bias: 3 then 1; not normalised, scaled */
  o.norm_topk_prob = 0;
  ck_assert_int_eq(tpx_moe_route(&o, logits, NULL, 1, ex, w, p, NULL), TPX_OK);
  ck_assert_int_eq(ex[0], 3);
  ck_assert_int_eq(ex[1], 1);
  ck_assert_float_eq_tol(w[0], 2.5 * s3, 1e-6);
  ck_assert_float_eq_tol(w[1], 2.5 * sig(1), 1e-6);
  /* routed_scaling_factor 0 means 1 */
  o.routed_scaling_factor = 0;
  ck_assert_int_eq(tpx_moe_route(&o, logits, NULL, 1, ex, w, p, NULL), TPX_OK);
  ck_assert_float_eq_tol(w[0], s3, 1e-7);
}
END_TEST

START_TEST(test_grouped) {
  /* 8 experts in 4 groups of 2, 2 groups kept. Group sums of the two best
   * scores: g0 s(3)+s(-5) = 0.96, g1 2 s(1) = 1.46, g2 2 s(0.5) = 1.25,
   * g3 2 s(-1) = 0.54: groups 1 and 2 are eligible, so expert 0 (the best
   * single score) is not; the tie of experts 2 and 3 goes to 2. */
  tpx_moe_router_options o = TPX_MOE_ROUTER_OPTIONS_INIT;
  o.experts = 8;
  o.top_k = 2;
  o.score = TPX_MOE_SIGMOID;
  o.norm_topk_prob = 1;
  o.n_group = 4;
  o.topk_group = 2;
  o.routed_scaling_factor = 2.5;
  float logits[16] = {3, -5, 1, 1, 0.5f, 0.5f, -1, -1,
                      /* token 2: every group ties; groups 0, 1 kept */
                      0, 0, 0, 0, 0, 0, 0, 4};
  int32_t ex[4];
  float w[4], p[16];
  ck_assert_int_eq(tpx_moe_route(&o, logits, NULL, 2, ex, w, p, NULL), TPX_OK);
  ck_assert_int_eq(ex[0], 2);
  ck_assert_int_eq(ex[1], 3);
  ck_assert_float_eq_tol(w[0], 1.25, 1e-6);
  ck_assert_float_eq_tol(w[1], 1.25, 1e-6);
  /* token 2: group 3 scores s(0) + s(4) = 1.48 > 1.0: kept with group 0 */
  ck_assert_int_eq(ex[2], 7);
  ck_assert_int_eq(ex[3], 0);
  /* the bias moves a group in: +1 on expert 6 lifts group 3 past group 2 */
  float bias[8] = {0, 0, 0, 0, 0, 0, 1, 0};
  ck_assert_int_eq(tpx_moe_route(&o, logits, bias, 1, ex, w, p, NULL), TPX_OK);
  ck_assert_int_eq(ex[0], 6); /* s(-1) + 1 = 1.27 > s(1) */
  ck_assert_int_eq(ex[1], 2);
  double s6 = sig(-1), s2 = sig(1);
  ck_assert_float_eq_tol(w[0], 2.5 * s6 / (s6 + s2), 1e-6);
  /* topk_group = n_group: plain top-k, expert 0 first */
  o.topk_group = 4;
  ck_assert_int_eq(tpx_moe_route(&o, logits, NULL, 1, ex, w, p, NULL), TPX_OK);
  ck_assert_int_eq(ex[0], 0);
}
END_TEST

/* ---- backward ---- */

/* The weights of token x[E] for the fixed choice ex[k], in double: what
 * tpx_moe_route computes once the choice is made. */
static void weights_d(const tpx_moe_router_options *o, const double *x,
                      const int32_t *ex, double *w) {
  int64_t E = o->experts, k = o->top_k;
  double p[16], z = 0, sum = 0;
  for (int64_t e = 0; e < E; e++) {
    p[e] = o->score == TPX_MOE_SOFTMAX ? exp(x[e]) : sig(x[e]);
    z += p[e];
  }
  if (o->score == TPX_MOE_SOFTMAX)
    for (int64_t e = 0; e < E; e++) p[e] /= z;
  for (int64_t j = 0; j < k; j++) sum += p[ex[j]];
  double scale = o->score == TPX_MOE_SIGMOID && o->routed_scaling_factor != 0
                     ? o->routed_scaling_factor
                     : 1.0;
  if (o->score == TPX_MOE_SIGMOID && o->norm_topk_prob)
    sum += 1e-20;
  for (int64_t j = 0; j < k; j++)
    w[j] = (o->norm_topk_prob ? p[ex[j]] / sum : p[ex[j]]) * scale;
}

typedef struct bw_case {
  tpx_moe_score score;
  int norm;
  double scale;
  int64_t n_group, topk_group;
} bw_case;

static const bw_case bw_cases[] = {
    {TPX_MOE_SOFTMAX, 0, 0, 0, 0},   {TPX_MOE_SOFTMAX, 1, 0, 0, 0},
    {TPX_MOE_SIGMOID, 0, 2.5, 0, 0}, {TPX_MOE_SIGMOID, 1, 2.5, 0, 0},
    {TPX_MOE_SIGMOID, 1, 0, 3, 2},
};

START_TEST(test_backward) {
  const bw_case *c = &bw_cases[_i];
  tpx_moe_router_options o = TPX_MOE_ROUTER_OPTIONS_INIT;
  o.experts = 6;
  o.top_k = 3;
  o.score = c->score;
  o.norm_topk_prob = c->norm;
  o.routed_scaling_factor = c->scale;
  o.n_group = c->n_group;
  o.topk_group = c->topk_group;
  enum { N = 3, E = 6, K = 3 };
  float logits[N * E], bias[E] = {0.1f, -0.2f, 0.05f, 0, 0.3f, -0.1f};
  float dw[N * K], w[N * K], p[N * E], dl[N * E];
  int32_t ex[N * K];
  unsigned s = 12345u + (unsigned)_i;
  for (int i = 0; i < N * E; i++) {
    s = s * 1103515245u + 12345u;
    logits[i] = (float)((s >> 8) % 4001) / 1000.0f - 2.0f;
  }
  for (int i = 0; i < N * K; i++) dw[i] = 0.37f * (float)(i % 5) - 0.6f;
  ck_assert_int_eq(tpx_moe_route(&o, logits, bias, N, ex, w, p, NULL), TPX_OK);
  ck_assert_int_eq(tpx_moe_route_backward(&o, p, ex, w, dw, N, dl, NULL),
                   TPX_OK);
  for (int t = 0; t < N; t++) {
    double x[E], wd[K], wp[K], wm[K];
    for (int e = 0; e < E; e++) x[e] = logits[t * E + e];
    weights_d(&o, x, ex + t * K, wd);
    for (int j = 0; j < K; j++) /* the forward is these formulas */
      ck_assert_float_eq_tol(w[t * K + j], wd[j], 1e-6);
    for (int e = 0; e < E; e++) {
      const double h = 1e-6;
      double x0 = x[e], fd = 0;
      x[e] = x0 + h;
      weights_d(&o, x, ex + t * K, wp);
      x[e] = x0 - h;
      weights_d(&o, x, ex + t * K, wm);
      x[e] = x0;
      for (int j = 0; j < K; j++)
        fd += (double)dw[t * K + j] * (wp[j] - wm[j]) / (2 * h);
      ck_assert_msg(fabs(dl[t * E + e] - fd) < 1e-6 * (1 + fabs(fd)),
                    "case %d token %d logit %d: %.9g, differences %.9g", _i, t,
                    e, (double)dl[t * E + e], fd);
    }
  }
}
END_TEST

/* ---- refusals ---- */

static void refused(const tpx_moe_router_options *o, const char *what) {
  float l[8] = {0}, w[8], p[8], dl[8];
  int32_t ex[8] = {0};
  tpx_error e = {0};
  ck_assert_int_eq(tpx_moe_route(o, l, NULL, 1, ex, w, p, &e),
                   TPX_INVALID_ARGUMENT);
  ck_assert_msg(strstr(e.message, what), "want '%s' in: %s", what, e.message);
  tpx_error e2 = {0};
  ck_assert_int_eq(tpx_moe_route_backward(o, p, ex, w, w, 1, dl, &e2),
                   TPX_INVALID_ARGUMENT);
  ck_assert_msg(strstr(e2.message, what), "want '%s' in: %s", what, e2.message);
}

START_TEST(test_refused) {
  tpx_moe_router_options o = TPX_MOE_ROUTER_OPTIONS_INIT;
  refused(&o, "experts 0");
  o.experts = 4;
  refused(&o, "top_k 0");
  o.top_k = 5;
  refused(&o, "top_k 5 is not in 1..experts (4)");
  o.top_k = 2;
  o.n_group = 2;
  refused(&o, "n_group 2: grouped top-k is for the sigmoid score only");
  o.n_group = 0;
  o.routed_scaling_factor = 2;
  refused(&o, "routed_scaling_factor 2 is for the sigmoid");
  o.score = TPX_MOE_SIGMOID;
  o.routed_scaling_factor = -1;
  refused(&o, "routed_scaling_factor -1");
  o.routed_scaling_factor = 1;
  o.n_group = 3;
  refused(&o, "n_group 3 does not divide experts 4");
  o.n_group = 4;
  o.topk_group = 1;
  refused(&o, "1 expert(s) per group");
  o.n_group = 2;
  o.topk_group = 3;
  refused(&o, "topk_group 3 is not in 1..n_group (2)");
  o.topk_group = 1;
  o.top_k = 3;
  refused(&o, "top_k 3 is more than the 2 experts eligible");
  o.top_k = 2;
  o.score = (tpx_moe_score)7;
  refused(&o, "score 7");
  o.score = TPX_MOE_SIGMOID;
  o.struct_size = 8;
  refused(&o, "struct_size 8");
  o.struct_size = sizeof o;
  /* backward: a choice out of range */
  float p[4] = {0.25f, 0.25f, 0.25f, 0.25f}, g[2] = {1, 1}, dl[4];
  int32_t ex[2] = {1, 4};
  tpx_error e = {0};
  ck_assert_int_eq(tpx_moe_route_backward(&o, p, ex, NULL, g, 1, dl, &e),
                   TPX_INVALID_ARGUMENT);
  ck_assert_msg(strstr(e.message, "experts[0, 1] = 4"), "%s", e.message);
  ck_assert_int_eq(tpx_moe_route(NULL, p, NULL, 1, ex, g, dl, NULL),
                   TPX_INVALID_ARGUMENT);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("runtime_moe_route");
  TCase *tc = tcase_create("route");
  tcase_add_test(tc, test_softmax);
  tcase_add_test(tc, test_sigmoid);
  tcase_add_test(tc, test_grouped);
  tcase_add_loop_test(tc, test_backward, 0,
                      (int)(sizeof bw_cases / sizeof *bw_cases));
  tcase_add_test(tc, test_refused);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
