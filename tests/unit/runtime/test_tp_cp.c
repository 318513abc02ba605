/* test_tp_cp.c — context parallelism (tpx/runtime_cp.h) on local threads:
 * the positions each cp rank holds (head-tail and contiguous, as torch's
 * context_parallel cuts a sequence), the K/V all-gather into position
 * order and its reduce-scatter backward against sums computed here, and
 * tpx_tp_logprobs_seq (logits vocab-sharded over tp, sequence-sharded over
 * cp) against an unsharded log-softmax at every position, on even and
 * uneven vocab splits, on host memory and in the sim memory space (the
 * calls never read a buffer on the host); bad input. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rt_fixture.h"

/* ---- positions ---- */

START_TEST(test_positions) {
  int64_t pos[8];
  /* seq 8 over cp 2, head-tail: chunks of 2; rank 0 holds 0 and 3 */
  ck_assert_int_eq(tpx_cp_positions(8, 2, 0, TPX_CP_HEAD_TAIL, pos, NULL),
                   TPX_OK);
  int64_t r0[4] = {0, 1, 6, 7}, r1[4] = {2, 3, 4, 5};
  ck_assert_mem_eq(pos, r0, sizeof r0);
  ck_assert_int_eq(tpx_cp_positions(8, 2, 1, TPX_CP_HEAD_TAIL, pos, NULL),
                   TPX_OK);
  ck_assert_mem_eq(pos, r1, sizeof r1);
  /* cp 4 of 16: rank 1 holds chunks 1 and 6 */
  ck_assert_int_eq(tpx_cp_positions(16, 4, 1, TPX_CP_HEAD_TAIL, pos, NULL),
                   TPX_OK);
  int64_t r41[4] = {2, 3, 12, 13};
  ck_assert_mem_eq(pos, r41, sizeof r41);
  ck_assert_int_eq(tpx_cp_positions(6, 2, 1, TPX_CP_CONTIGUOUS, pos, NULL),
                   TPX_OK);
  int64_t c1[3] = {3, 4, 5};
  ck_assert_mem_eq(pos, c1, sizeof c1);
  /* cp 1 cuts nothing: everything in order, any length */
  ck_assert_int_eq(tpx_cp_positions(3, 1, 0, TPX_CP_HEAD_TAIL, pos, NULL),
                   TPX_OK);
  ck_assert_int_eq(pos[2], 2);
  tpx_error e = {0};
  ck_assert_int_eq(tpx_cp_positions(6, 2, 0, TPX_CP_HEAD_TAIL, pos, &e),
                   TPX_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(e.message, "not divisible by 2·cp = 4"));
  ck_assert_int_eq(tpx_cp_positions(8, 2, 2, TPX_CP_HEAD_TAIL, pos, NULL),
                   TPX_INVALID_ARGUMENT);
  ck_assert_int_eq(tpx_cp_positions(8, 0, 0, TPX_CP_HEAD_TAIL, pos, NULL),
                   TPX_INVALID_ARGUMENT);
  /* the whole permutation */
  int64_t ix[8], want[8] = {0, 1, 6, 7, 2, 3, 4, 5};
  ck_assert_int_eq(tpx_cp_seq_index(8, 2, TPX_CP_HEAD_TAIL, ix, NULL), TPX_OK);
  ck_assert_mem_eq(ix, want, sizeof want);
  tpx_cp_layout l;
  ck_assert_int_eq(tpx_cp_layout_parse("contiguous", &l, NULL), TPX_OK);
  ck_assert_int_eq(l, TPX_CP_CONTIGUOUS);
  tpx_error e2 = {0};
  ck_assert_int_eq(tpx_cp_layout_parse("ring", &l, &e2), TPX_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(e2.message, "head-tail, contiguous"));
}
END_TEST

/* ---- the all-gather and its backward ---- */

typedef struct move_arg {
  int64_t b, t, f;
  tpx_cp_layout layout;
} move_arg;

/* element (row i, position p, feature k) as rank `r` contributes it */
static float code(int64_t i, int64_t p, int64_t k, int r) {
  return (float)(1000 * i + 10 * p + k) + 0.25f * (float)r;
}

static tpx_status move_body(tpx_comm *world, void *arg, tpx_error *err) {
  const move_arg *m = arg;
  int n = tpx_comm_size(world), r = tpx_comm_rank(world);
  int64_t b = m->b, t = m->t, f = m->f, T = t * n;
  int64_t *pos = malloc(sizeof(int64_t) * (size_t)t);
  float *loc = calloc((size_t)(b * t * f), sizeof(float));
  float *full = calloc((size_t)(b * T * f), sizeof(float));
  tpx_status st = tpx_cp_positions(T, n, r, m->layout, pos, err);
  for (int64_t i = 0; i < b; i++)
    for (int64_t j = 0; j < t; j++)
      for (int64_t k = 0; k < f; k++)
        loc[(i * t + j) * f + k] = code(i, pos[j], k, 0);
  int64_t ls[3] = {b, t, f}, fs[3] = {b, T, f};
  tpx_tensor tl = tpx_tensor_make(loc, TPX_DTYPE_F32, 3, ls);
  tpx_tensor tf = tpx_tensor_make(full, TPX_DTYPE_F32, 3, fs);
  if (!st)
    st = tpx_cp_all_gather_seq(world, m->layout, &tl, &tf, err);
  for (int64_t x = 0; !st && x < b * T * f; x++) {
    int64_t i = x / (T * f), p = x / f % T, k = x % f;
    if (full[x] != code(i, p, k, 0))
      st = tpx_error_set(
          err, TPX_VALIDATION, "gather: [%lld, %lld, %lld] = %g, want %g",
          (long long)i, (long long)p, (long long)k, full[x], code(i, p, k, 0));
  }
  /* backward: every rank's gradient of every position, summed at the
   * rank that holds the position */
  for (int64_t x = 0; x < b * T * f; x++)
    full[x] = code(x / (T * f), x / f % T, x % f, r);
  if (!st)
    st = tpx_cp_reduce_scatter_seq(world, m->layout, &tf, &tl, err);
  for (int64_t x = 0; !st && x < b * t * f; x++) {
    int64_t i = x / (t * f), p = pos[x / f % t], k = x % f;
    float want = 0;
    for (int q = 0; q < n; q++) want += code(i, p, k, q);
    if (fabsf(loc[x] - want) > 1e-3f * fabsf(want))
      st =
          tpx_error_set(err, TPX_VALIDATION,
                        "reduce-scatter: [%lld, %lld, %lld] = %g, want %g",
                        (long long)i, (long long)p, (long long)k, loc[x], want);
  }
  free(pos);
  free(loc);
  free(full);
  return st;
}

static const struct {
  int n;
  move_arg a;
} moves[] = {
    {2, {2, 4, 3, TPX_CP_HEAD_TAIL}}, {4, {3, 2, 5, TPX_CP_HEAD_TAIL}},
    {3, {2, 2, 1, TPX_CP_HEAD_TAIL}}, {2, {1, 3, 2, TPX_CP_CONTIGUOUS}},
    {1, {2, 4, 2, TPX_CP_HEAD_TAIL}}, {4, {0, 2, 2, TPX_CP_HEAD_TAIL}},
};

START_TEST(test_move) {
  move_arg a = moves[_i].a;
  tpx_error e = {0};
  ck_assert_msg(tpx_local_run(moves[_i].n, move_body, &a, &e) == TPX_OK, "%s",
                e.message);
}
END_TEST

/* ---- log-probs with seq_index ---- */

typedef struct lp_case {
  int64_t vocab, b, seq, cp, tp;
  tpx_cp_layout layout;
} lp_case;

static const lp_case lp_cases[] = {
    {1000, 2, 8, 2, 2, TPX_CP_HEAD_TAIL},
    {1000, 1, 16, 4, 1, TPX_CP_HEAD_TAIL},
    {10, 2, 8, 2, 4, TPX_CP_HEAD_TAIL}, /* 3, 3, 3, 1 vocab columns */
    {10, 3, 6, 2, 3, TPX_CP_CONTIGUOUS},
    {1000, 2, 5, 1, 2, TPX_CP_HEAD_TAIL}, /* cp 1: the shifted log-prob */
};

typedef struct lp_arg {
  const tpx_sharding *sh;
  const lp_case *c;
} lp_arg;

static float logit(int64_t i, int64_t p, int64_t v) {
  return (float)(sin(0.37 * (double)(v + 1) * (double)(p + 2)) +
                 0.01 * (double)i * (double)(v % 7));
}
static int32_t token(int64_t i, int64_t p, int64_t V) {
  return (int32_t)((7 * i + 13 * p * p + 3) % V);
}

/* the unsharded log-prob of position p's next token */
static double ref_logprob(const lp_case *c, int64_t i, int64_t p) {
  double mx = -1e30, s = 0;
  for (int64_t v = 0; v < c->vocab; v++) mx = fmax(mx, (double)logit(i, p, v));
  for (int64_t v = 0; v < c->vocab; v++) s += exp(logit(i, p, v) - mx);
  return logit(i, p, token(i, p + 1, c->vocab)) - mx - log(s);
}

/* The local logits gathered over cp into position order, then gathered
 * gradients (the full logits again) summed back over cp: tpx-train's K/V
 * path on another tensor, in the world's memory space (sim: every pointer
 * the calls see faults on a host access). */
static tpx_status check_gather(const lp_case *c, tpx_mesh_comm *mc,
                               tpx_comm *cp, const tpx_tensor *tl, int64_t off,
                               int64_t me, tpx_error *err) {
  int64_t b = tl->shape[0], t = tl->shape[1], len = tl->shape[2];
  int64_t fs[3] = {b, c->seq, len};
  tpx_tensor tf = rtu_talloc(TPX_DTYPE_F32, 3, fs);
  tpx_tensor back = rtu_talloc(TPX_DTYPE_F32, 3, tl->shape), loc = *tl;
  rtu_sim sm;
  RTU_SIM(&sm, mc, &loc, &tf, &back);
  tpx_status st = tpx_cp_all_gather_seq(cp, c->layout, &loc, &tf, err);
  if (!st)
    st = tpx_cp_reduce_scatter_seq(cp, c->layout, &tf, &back, err);
  rtu_sim_end(&sm, me);
  const float *full = tf.data, *bk = back.data, *lg = tl->data;
  for (int64_t x = 0; !st && x < b * c->seq * len; x++) {
    float want = logit(x / (c->seq * len), x / len % c->seq, off + x % len);
    if (full[x] != want)
      st = tpx_error_set(err, TPX_VALIDATION,
                         "gathered logits[%lld] = %g, "
                         "want %g",
                         (long long)x, full[x], want);
  }
  for (int64_t x = 0; !st && x < b * t * len; x++)
    if (fabsf(bk[x] - (float)c->cp * lg[x]) > 1e-5f * (1 + fabsf(bk[x])))
      st = tpx_error_set(err, TPX_VALIDATION,
                         "reduce-scattered logits[%lld] = %g, want cp x %g",
                         (long long)x, bk[x], lg[x]);
  free(tf.data);
  free(back.data);
  return st;
}

static tpx_status lp_body(tpx_comm *world, void *arg, tpx_error *err) {
  const lp_arg *la = arg;
  const lp_case *c = la->c;
  tpx_mesh_comm *mc;
  tpx_status st0 =
      tpx_mesh_comm_create(world, tpx_sharding_mesh(la->sh), &mc, err);
  if (st0)
    return st0;
  int64_t coords[3], r = tpx_comm_rank(world), off, len;
  tpx_mesh_coords(tpx_sharding_mesh(la->sh), r, coords, NULL);
  tpx_comm *cp = tpx_mesh_comm_dim(mc, 1); /* dp_shard plays cp here */
  int64_t cr = coords[1], t = c->seq / c->cp, b = c->b, T = c->seq;
  tpx_tp_loss_options o = TPX_TP_LOSS_OPTIONS_INIT;
  o.vocab = c->vocab;
  int64_t *ix = malloc(sizeof(int64_t) * (size_t)T);
  tpx_status st = tpx_cp_seq_index(T, c->cp, c->layout, ix, err);
  if (!st)
    st = tpx_tp_vocab_range(la->sh, r, &o, &off, &len, err);
  float *lg = malloc(sizeof(float) * (size_t)(b * t * (len ? len : 1)));
  int32_t *ids = malloc(sizeof(int32_t) * (size_t)(b * t));
  float *out = malloc(sizeof(float) * (size_t)(b * (T - 1) + 1));
  for (int64_t i = 0; !st && i < b; i++)
    for (int64_t j = 0; j < t; j++) {
      int64_t p = ix[cr * t + j];
      ids[i * t + j] = token(i, p, c->vocab);
      for (int64_t v = 0; v < len; v++)
        lg[(i * t + j) * len + v] = logit(i, p, off + v);
    }
  int64_t ls[3] = {b, t, len}, is[2] = {b, t}, os[2] = {b, T - 1};
  tpx_tensor tl = tpx_tensor_make(lg, TPX_DTYPE_F32, 3, ls);
  tpx_tensor ti = tpx_tensor_make(ids, TPX_DTYPE_I32, 2, is);
  tpx_tensor to = tpx_tensor_make(out, TPX_DTYPE_F32, 2, os);
  tpx_tensor l2 = tl, i2 = ti;
  rtu_sim sm;
  RTU_SIM(&sm, mc, &l2, &i2, &to);
  if (!st)
    st = tpx_tp_logprobs_seq(la->sh, mc, c->cp > 1 ? cp : NULL, &o, &l2, &i2,
                             ix, &to, err);
  rtu_sim_end(&sm, r);
  if (!st)
    st = check_gather(c, mc, cp, &tl, off, r, err);
  for (int64_t i = 0; !st && i < b; i++)
    for (int64_t p = 0; p < T - 1; p++) {
      double want = ref_logprob(c, i, p), got = out[i * (T - 1) + p];
      if (fabs(got - want) > 1e-5 * fmax(1.0, fabs(want)))
        st = tpx_error_set(err, TPX_VALIDATION,
                           "rank %lld: logprobs[%lld, %lld] = %.8g, "
                           "unsharded %.8g",
                           (long long)r, (long long)i, (long long)p, got, want);
    }
  /* not a permutation: refused before any collective, on every rank */
  if (!st && T > 1) {
    int64_t keep = ix[1];
    ix[1] = ix[0];
    RT_EXPECT(tpx_tp_logprobs_seq(la->sh, mc, cp, &o, &tl, &ti, ix, &to, &e_),
              TPX_INVALID_ARGUMENT, "is repeated");
    ix[1] = keep;
    os[1] = T;
    tpx_tensor bad = tpx_tensor_make(out, TPX_DTYPE_F32, 2, os);
    RT_EXPECT(tpx_tp_logprobs_seq(la->sh, mc, cp, &o, &tl, &ti, ix, &bad, &e_),
              TPX_INVALID_ARGUMENT, "logprobs");
  }
  free(ix);
  free(lg);
  free(ids);
  free(out);
  tpx_mesh_comm_destroy(mc);
  return st;
}

START_TEST(test_logprobs_seq) {
  const lp_case *c = &lp_cases[_i];
  tpx_model *m = rt_model(c->vocab);
  rt_world w = rt_world_of(m, rt_llama_plan(m, 0, c->tp), c->cp, c->tp);
  lp_arg a = {w.sh, c};
  /* host memory, then the world in sim memory (RTU_SIM) */
  for (int sim = 0; sim < 2; sim++) {
    tpx_error e = {0};
    ck_assert_msg(tpx__local_run_sim((int)(c->cp * c->tp), sim, lp_body, &a,
                                     &e) == TPX_OK,
                  "vocab %lld cp %lld tp %lld%s: %s", (long long)c->vocab,
                  (long long)c->cp, (long long)c->tp,
                  sim ? " (sim memory)" : "", e.message);
  }
  rt_world_free(&w);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("runtime_tp_cp");
  TCase *tc = tcase_create("cp");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_positions);
  tcase_add_loop_test(tc, test_move, 0, (int)(sizeof moves / sizeof *moves));
  tcase_add_loop_test(tc, test_logprobs_seq, 0,
                      (int)(sizeof lp_cases / sizeof *lp_cases));
  suite_add_tcase(s, tc);
  return s;
}

FX_MAIN(suite)
