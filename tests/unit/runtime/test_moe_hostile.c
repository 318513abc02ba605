/* test_moe_hostile.c — tpx/runtime_moe.h against bad input: every case a
 * TPX_INVALID_ARGUMENT naming what is at fault, never a crash, a hang or
 * a silent success.
 *  - tpx_moe_route: NaN / ±inf logits (softmax and sigmoid) named by token
 *    and expert, a non-finite bias, n < 0, NULL buffers, NULL options,
 *    experts beyond int32 indices, a scale f32 cannot hold; logits of the
 *    largest finite magnitudes still give valid, distinct experts and
 *    finite weights;
 *  - tpx_moe_route_backward: repeated or out-of-range experts, non-finite
 *    dweights, probs outside [0, 1], chosen probs summing to 0 under
 *    softmax's renormalisation, n < 0, NULL buffers;
 *  - the dispatch on 2 local threads, both dispatchers, one rank's bad
 *    input (an expert index out of range, a NaN weight, n < 0, x NULL) or
 *    options that differ between the ranks (experts, hidden, dispatcher),
 *    and E not divisible by ep: every rank returns an error (the bad rank
 *    its own, its peer one naming that rank), nobody waits, and the comm
 *    still carries a good dispatch afterwards. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpx/tpx.h"

enum { E = 4, K = 2, N = 3 };

static tpx_moe_router_options router(tpx_moe_score score) {
  tpx_moe_router_options o = TPX_MOE_ROUTER_OPTIONS_INIT;
  o.experts = E;
  o.top_k = K;
  o.score = score;
  o.norm_topk_prob = 1;
  return o;
}

static void refused(tpx_status st, const tpx_error *e, const char *want) {
  ck_assert_int_eq(st, TPX_INVALID_ARGUMENT);
  ck_assert_msg(strstr(e->message, want), "want '%s' in: %s", want, e->message);
}

START_TEST(route_nonfinite) {
  const float bad[3] = {NAN, INFINITY, -INFINITY};
  const char *name[3] = {"nan", "inf", "-inf"};
  for (int s = 0; s < 2; s++)
    for (int b = 0; b < 3; b++) {
      tpx_moe_router_options o = router((tpx_moe_score)s);
      float lg[N * E], w[N * K], p[N * E];
      int32_t ex[N * K];
      for (int i = 0; i < N * E; i++) lg[i] = 0.1f * (float)i;
      lg[1 * E + 2] = bad[b];
      tpx_error e = {0};
      char want[96];
      snprintf(want, sizeof want,
               "logits[1, 2] = %s is not finite (token 1, expert 2)", name[b]);
      refused(tpx_moe_route(&o, lg, NULL, N, ex, w, p, &e), &e, want);
    }
  tpx_moe_router_options o = router(TPX_MOE_SIGMOID);
  float lg[N * E] = {0}, bias[E] = {0, 0, 0, NAN}, w[N * K], p[N * E];
  int32_t ex[N * K];
  tpx_error e = {0};
  refused(tpx_moe_route(&o, lg, bias, N, ex, w, p, &e), &e, "bias[3] = nan");
}
END_TEST

/* The largest finite logits: a choice that means something. */
START_TEST(route_extremes) {
  const float vals[4][E] = {{FLT_MAX, -FLT_MAX, FLT_MAX, -FLT_MAX},
                            {-FLT_MAX, -FLT_MAX, -FLT_MAX, -FLT_MAX},
                            {FLT_MAX, FLT_MAX, FLT_MAX, FLT_MAX},
                            {0, 0, 0, 0}};
  for (int s = 0; s < 2; s++)
    for (int v = 0; v < 4; v++) {
      tpx_moe_router_options o = router((tpx_moe_score)s);
      float w[K], p[E];
      int32_t ex[K];
      ck_assert_int_eq(tpx_moe_route(&o, vals[v], NULL, 1, ex, w, p, NULL),
                       TPX_OK);
      ck_assert(ex[0] >= 0 && ex[0] < E && ex[1] >= 0 && ex[1] < E);
      ck_assert_int_ne(ex[0], ex[1]);
      ck_assert(isfinite(w[0]) && isfinite(w[1]));
    }
}
END_TEST

START_TEST(route_args) {
  tpx_moe_router_options o = router(TPX_MOE_SOFTMAX);
  float lg[E] = {0}, w[K], p[E];
  int32_t ex[K];
  tpx_error e = {0};
  refused(tpx_moe_route(&o, lg, NULL, -1, ex, w, p, &e), &e, "n -1");
  const char *names[4] = {"logits", "experts", "weights", "probs"};
  for (int i = 0; i < 4; i++) {
    tpx_error e2 = {0};
    refused(tpx_moe_route(&o, i == 0 ? NULL : lg, NULL, 1, i == 1 ? NULL : ex,
                          i == 2 ? NULL : w, i == 3 ? NULL : p, &e2),
            &e2, names[i]);
  }
  ck_assert_int_eq(tpx_moe_route(&o, NULL, NULL, 0, NULL, NULL, NULL, NULL),
                   TPX_OK);
  tpx_error e3 = {0};
  refused(tpx_moe_route(NULL, lg, NULL, 1, ex, w, p, &e3), &e3,
          "options are NULL");
  tpx_moe_router_options big = o;
  big.experts = (int64_t)INT32_MAX + 1;
  tpx_error e4 = {0};
  refused(tpx_moe_route(&big, NULL, NULL, 0, NULL, NULL, NULL, &e4), &e4,
          "experts 2147483648");
  tpx_moe_router_options sc = router(TPX_MOE_SIGMOID);
  sc.routed_scaling_factor = 1e39;
  tpx_error e5 = {0};
  refused(tpx_moe_route(&sc, lg, NULL, 1, ex, w, p, &e5), &e5,
          "routed_scaling_factor 1e+39");
}
END_TEST

START_TEST(route_backward_args) {
  tpx_moe_router_options o = router(TPX_MOE_SOFTMAX);
  float lg[E] = {0.3f, 0.1f, 0.4f, 0.2f}, w[K], p[E], dw[K] = {1, -1}, dl[E];
  int32_t ex[K];
  ck_assert_int_eq(tpx_moe_route(&o, lg, NULL, 1, ex, w, p, NULL), TPX_OK);
  ck_assert_int_eq(tpx_moe_route_backward(&o, p, ex, w, dw, 1, dl, NULL),
                   TPX_OK);
  tpx_error e = {0};
  int32_t dup[K] = {ex[0], ex[0]};
  refused(tpx_moe_route_backward(&o, p, dup, w, dw, 1, dl, &e), &e,
          "repeats experts[0, 0]");
  int32_t out[K] = {ex[0], E};
  tpx_error e1 = {0};
  refused(tpx_moe_route_backward(&o, p, out, w, dw, 1, dl, &e1), &e1,
          "experts[0, 1] = 4 is not in 0..3");
  float dn[K] = {1, NAN};
  tpx_error e2 = {0};
  refused(tpx_moe_route_backward(&o, p, ex, w, dn, 1, dl, &e2), &e2,
          "dweights[0, 1] = nan is not finite");
  float pb[E] = {0.5f, NAN, 0.2f, 0.3f};
  tpx_error e3 = {0};
  refused(tpx_moe_route_backward(&o, pb, ex, w, dw, 1, dl, &e3), &e3,
          "probs[0, 1] = nan is not a score");
  float pz[E] = {0, 0, 0, 0};
  tpx_error e4 = {0};
  refused(tpx_moe_route_backward(&o, pz, ex, w, dw, 1, dl, &e4), &e4,
          "the probs of its experts sum to 0");
  tpx_error e5 = {0};
  refused(tpx_moe_route_backward(&o, p, ex, w, dw, -2, dl, &e5), &e5, "n -2");
  tpx_error e6 = {0};
  refused(tpx_moe_route_backward(&o, p, ex, w, NULL, 1, dl, &e6), &e6,
          "dweights is NULL");
  ck_assert_int_eq(
      tpx_moe_route_backward(&o, NULL, NULL, NULL, NULL, 0, NULL, NULL),
      TPX_OK);
}
END_TEST

/* ---- the dispatch over 2 threads, one rank's input bad ---- */

typedef enum fault {
  F_INDEX,     /* rank 1 routes a token to expert E */
  F_NAN,       /* rank 1's weight NaN */
  F_NEG_N,     /* rank 1's n = -1 */
  F_NULL_X,    /* rank 1's x NULL */
  F_EXPERTS,   /* rank 1 says experts 2E */
  F_HIDDEN,    /* rank 1 says hidden 3 */
  F_KIND,      /* rank 1 runs the other dispatcher */
  F_DIVISIBLE, /* both say experts 3 (not divisible by 2) */
  F_COUNT
} fault;

typedef struct fault_case {
  fault f;
  const char *bad;  /* in rank 1's error */
  const char *peer; /* in rank 0's */
} fault_case;

static const fault_case cases[] = {
    {F_INDEX, "experts[0, 1] = 4 is not an expert index",
     "rank 1 of the ep group refused its input"},
    {F_NAN, "weights[0, 1] = nan is not finite (token 0, expert 1)",
     "rank 1 of the ep group refused its input"},
    {F_NEG_N, "n -1 (want >= 0)", "rank 1 of the ep group refused its input"},
    {F_NULL_X, "x is NULL", "rank 1 of the ep group refused its input"},
    {F_EXPERTS, "disagree on experts: rank 1 has 8, rank 0 has 4",
     "disagree on experts: rank 0 has 4, rank 1 has 8"},
    {F_HIDDEN, "disagree on hidden: rank 1 has 3, rank 0 has 2",
     "disagree on hidden: rank 0 has 2, rank 1 has 3"},
    {F_KIND, "disagree on dispatcher", "disagree on dispatcher"},
    {F_DIVISIBLE, "experts 3 are not divisible by the ep group's size 2",
     "experts 3 are not divisible by the ep group's size 2"},
};

typedef struct fault_arg {
  fault_case c;
  tpx_moe_dispatcher kind;
  tpx_status st[2];
  char msg[2][512];
  tpx_status after[2]; /* a good dispatch afterwards */
} fault_arg;

static tpx_status one(tpx_comm *ep, tpx_moe_dispatcher kind, int64_t experts,
                      int64_t hidden, const float *x, const int32_t *ex,
                      const float *w, int64_t n, tpx_error *err) {
  tpx_moe_dispatch_options o = TPX_MOE_DISPATCH_OPTIONS_INIT;
  o.ep = ep;
  o.experts = experts;
  o.top_k = K;
  o.hidden = hidden;
  o.kind = kind;
  tpx_moe_dispatch *d = NULL;
  tpx_status st = tpx_moe_dispatch_create(&o, x, ex, w, n, &d, err);
  float out[2 * 3], y[16 * 3] = {0};
  if (st == TPX_OK)
    st = tpx_moe_combine(d, y, out, err);
  tpx_moe_dispatch_destroy(d);
  return st;
}

static tpx_status fault_body(tpx_comm *world, void *arg, tpx_error *err) {
  fault_arg *a = arg;
  int r = tpx_comm_rank(world), me = r == 1;
  fault f = a->c.f;
  float x[2 * 3] = {1, 2, 3, 4, 5, 6}, w[2 * K] = {0.5f, 0.5f, 0.5f, 0.5f};
  int32_t ex[2 * K] = {0, 1, 2, 3};
  if (me && f == F_INDEX)
    ex[1] = E;
  if (me && f == F_NAN)
    w[1] = NAN;
  tpx_moe_dispatcher kind = a->kind;
  if (me && f == F_KIND)
    kind = kind == TPX_MOE_ALL_GATHER ? TPX_MOE_ALL_TO_ALL : TPX_MOE_ALL_GATHER;
  int64_t experts = f == F_DIVISIBLE ? 3 : me && f == F_EXPERTS ? 2 * E : E;
  tpx_error e = {0};
  a->st[r] = one(world, kind, experts, me && f == F_HIDDEN ? 3 : 2,
                 me && f == F_NULL_X ? NULL : x, ex, w,
                 me && f == F_NEG_N ? -1 : 2, &e);
  snprintf(a->msg[r], sizeof a->msg[r], "%s", e.message);
  /* the comm was not torn down: a good dispatch goes through */
  float w2[2 * K] = {0.5f, 0.5f, 0.5f, 0.5f};
  int32_t ex2[2 * K] = {0, 1, 2, 3};
  tpx_error e2 = {0};
  a->after[r] = one(world, a->kind, E, 2, x, ex2, w2, 2, &e2);
  (void)err;
  return TPX_OK;
}

/* Rank r's outcome of case c: its own status and message, then the good
 * dispatch after it. NULL when right, else what is wrong (in buf). */
static const char *verdict(const fault_arg *a, int r, char *buf, size_t size) {
  const char *want = r == 1 ? a->c.bad : a->c.peer;
  if (a->st[r] != TPX_INVALID_ARGUMENT)
    snprintf(buf, size, "rank %d: status %d (%s)", r, (int)a->st[r], a->msg[r]);
  else if (!strstr(a->msg[r], want))
    snprintf(buf, size, "rank %d: want '%s' in: %s", r, want, a->msg[r]);
  else if (a->after[r] != TPX_OK)
    snprintf(buf, size, "rank %d: the comm is broken", r);
  else
    return NULL;
  return buf;
}

START_TEST(dispatch_fault) {
  const fault_case *c = &cases[_i / 2];
  fault_arg *a = calloc(1, sizeof *a);
  a->c = *c;
  a->kind = (tpx_moe_dispatcher)(_i % 2);
  tpx_error e = {0};
  ck_assert_msg(tpx_local_run(2, fault_body, a, &e) == TPX_OK, "%s", e.message);
  for (int r = 0; r < 2; r++) {
    char buf[700];
    const char *why = verdict(a, r, buf, sizeof buf);
    ck_assert_msg(why == NULL, "case %d: %s", _i, why);
  }
  free(a);
}
END_TEST

#ifdef MOE_MPI
/* ---- the same cases on the mpi backend, mpirun -np 2: one rank a
 * process, where a rank that returned early used to leave its peer
 * waiting out the collective timeout ---- */
#include "../mpi_verdict.h"

static tpx_comm *mpi_world;

START_TEST(dispatch_fault_mpi) {
  ck_assert_int_eq(tpx_comm_size(mpi_world), 2);
  int r = tpx_comm_rank(mpi_world);
  for (int i = 0; i < (int)(2 * sizeof cases / sizeof *cases); i++) {
    fault_arg *a = calloc(1, sizeof *a);
    a->c = cases[i / 2];
    a->kind = (tpx_moe_dispatcher)(i % 2);
    tpx_error e = {0};
    ck_assert_int_eq(fault_body(mpi_world, a, &e), TPX_OK);
    char buf[700];
    const char *why = verdict(a, r, buf, sizeof buf);
    int32_t bad = why != NULL, nbad = 0;
    if (why)
      fprintf(stderr, "mpi case %d: %s\n", i, why);
    ck_assert_int_eq(tpx_comm_all_reduce(mpi_world, &bad, &nbad, 1,
                                         TPX_DTYPE_I32, TPX_REDUCE_SUM, NULL),
                     TPX_OK);
    ck_assert_msg(nbad == 0, "case %d failed on %d rank(s) (stderr)", i, nbad);
    free(a);
  }
}
END_TEST

int main(void) {
  tpx_error e = {0};
  if (tpx_comm_create_mpi(NULL, &mpi_world, &e) != TPX_OK) {
    fprintf(stderr, "test_moe_hostile_mpi: %s\n", e.message);
    return EXIT_FAILURE;
  }
  Suite *s = suite_create("moe_hostile_mpi");
  TCase *tc = tcase_create("mpi");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, dispatch_fault_mpi);
  (void)route_nonfinite; /* the local cases: the plain build's */
  (void)route_extremes;
  (void)route_args;
  (void)route_backward_args;
  (void)dispatch_fault;
  suite_add_tcase(s, tc);
  return mpi_run_suite(s, mpi_world);
}
#else
int main(void) {
  Suite *s = suite_create("moe_hostile");
  TCase *tc = tcase_create("hostile");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, route_nonfinite);
  tcase_add_test(tc, route_extremes);
  tcase_add_test(tc, route_args);
  tcase_add_test(tc, route_backward_args);
  tcase_add_loop_test(tc, dispatch_fault, 0,
                      (int)(2 * sizeof cases / sizeof *cases));
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
#endif
