/* test_tp_arrival.c — the plain transition calls of tpx/runtime_tp.h and
 * inputs that arrive as DTensors, on local threads.
 *
 * Regression: under the llama plugin's sp1 plan, input_layernorm
 * (sequence_parallel_allgather_activation) hands q_proj a Replicate DTensor.
 * q_proj's Partial input gradient must then reach the norm's output backward
 * (a reduce-scatter) unreduced. The static description all-reduces it first,
 * and the norm's input gradient came out tp times too large (the reference
 * trainer's grad norm 7.18 instead of 2.55 at tp 2). The test shows the
 * factor tp through the static path (_dt with NULL, an explicit "plain
 * tensor"), the exact gradient through arrived = Replicate, and that the
 * plain calls now refuse, naming the module and the _dt call. Under a plan
 * whose hooks hand no DTensor on, the plain calls still run. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rt_fixture.h"
#include "rt_util.h"

typedef struct arr_arg {
  const tpx_sharding *sh;
  int expect_refusal; /* the plan hands DTensors on */
} arr_arg;

/* The gradient of the norm's input through q_proj's input backward and the
 * norm's output backward, against the sum of every rank's Partial piece. */
static tpx_status double_count_body(tpx_comm *world, void *arg,
                                    tpx_error *err) {
  arr_arg *a = arg;
  const tpx_sharding *sh = a->sh;
  blk b = {sh, NULL, tpx_comm_rank(world), err, 1};
  tpx_status st =
      tpx_mesh_comm_create(world, tpx_sharding_mesh(sh), &b.mc, err);
  if (st != TPX_OK)
    return st;
  int64_t q = rtu_find_module(sh, "model.layers.0.self_attn.q_proj");
  int64_t norm = rtu_find_module(sh, "model.layers.0.input_layernorm");
  int64_t tp = tpx_sharding_tp_size(sh);
  int64_t r = rtu_tp_coord(sh, b.mc);
  const int64_t B = 2, T = 7, H = 64;
  int64_t shape[3] = {B, T, H};
  int64_t n = B * T * H;
  /* every tp rank's Partial piece (the full logical shape) and their sum */
  double *sum = calloc((size_t)n, sizeof *sum);
  tpx_tensor part = rtu_talloc(TPX_DTYPE_F32, 3, shape);
  for (int64_t k = 0; k < tp; k++)
    for (int64_t i = 0; i < n; i++) {
      double v = rtu_rval(i, 40 + k);
      sum[i] += (double)(float)v;
      if (k == r)
        ((float *)part.data)[i] = (float)v;
    }
  tpx_placement rep = tpx_placement_replicate();
  tpx_error e = {0};
  /* 1. the plain calls refuse (before any communication) */
  tpx_tensor scratch = rtu_talloc(TPX_DTYPE_F32, 3, shape);
  int64_t lo[3];
  tpx_placement pi, po;
  tpx_status s1 = tpx_tp_transition_run(sh, b.mc, q, TPX_TRANSITION_INPUT, 0, 1,
                                        shape, &part, &scratch, &e);
  if (a->expect_refusal) {
    if (s1 != TPX_INVALID_ARGUMENT ||
        !strstr(e.message, "'model.layers.0.self_attn.q_proj' input 0") ||
        !strstr(e.message, "tpx_tp_transition_run_dt") ||
        !strstr(e.message, "may arrive as a DTensor"))
      rtu_failed(err, "plain run: %s '%s'", tpx_status_name(s1), e.message);
    e = (tpx_error){0};
    if (tpx_tp_transition_shape(sh, q, TPX_TRANSITION_INPUT, 0, 1, b.me, shape,
                                3, NULL, lo, &e) != TPX_INVALID_ARGUMENT ||
        !strstr(e.message, "tpx_tp_transition_shape: module"))
      rtu_failed(err, "plain shape: '%s'", e.message);
    e = (tpx_error){0};
    if (tpx_tp_transition_layouts(sh, q, TPX_TRANSITION_INPUT, 0, 0, &pi, &po,
                                  NULL, &e) != TPX_INVALID_ARGUMENT)
      rtu_failed(err, "plain layouts: '%s'", e.message);
    /* outputs are never ambiguous */
    e = (tpx_error){0};
    if (tpx_tp_transition_layouts(sh, q, TPX_TRANSITION_OUTPUT, 0, 1, &pi, &po,
                                  NULL, &e) != TPX_OK)
      rtu_failed(err, "plain output layouts: '%s'", e.message);
  }
  /* 2. arrived = what the producer left (Replicate DTensor) vs the static
   * description (NULL: a plain tensor) */
  for (int path = 0; path < 2; path++) {
    const tpx_placement *arrived = path == 0 ? &rep : NULL;
    int producer_dt = tpx_tp_output_keeps_dtensor(sh, norm, 0);
    if (path == 0 && !producer_dt)
      continue;
    tpx_tensor g1, g2;
    rtu_xrun(&b, q, TPX_TRANSITION_INPUT, 1, arrived, shape, &part, &g1);
    /* the norm's output backward: Partial -> Shard(1) (reduce-scatter) or,
     * with no SP norm, q_proj's all-reduced gradient is the norm's */
    if (tpx_sharding_module_entry(sh, norm) >= 0)
      rtu_xrun(&b, norm, TPX_TRANSITION_OUTPUT, 1, NULL, shape, &g1, &g2);
    else
      g2 = g1, g1.data = NULL;
    tpx_placement lay =
        tpx_sharding_module_entry(sh, norm) >= 0 ? tpx_placement_shard(1) : rep;
    tpx_slice s;
    rtu_act_slice(sh, b.me, lay, shape, 3, &s, &e);
    int64_t nl = tpx_slice_numel(&s);
    double *want = malloc((size_t)nl * sizeof *want);
    rtu_box_get(sum, shape, 3, &s, want);
    /* the static path over-counts by tp exactly when the producer kept a
     * DTensor */
    double factor = path == 1 && producer_dt ? (double)tp : 1.0;
    if (tpx_tensor_numel(&g2) != nl) {
      rtu_failed(err, "path %d: %lld elements, want %lld", path,
                 (long long)tpx_tensor_numel(&g2), (long long)nl);
    } else {
      for (int64_t i = 0; i < nl; i++) {
        double got = ((float *)g2.data)[i];
        if (fabs(got - factor * want[i]) > 1e-4 * (1 + fabs(want[i]))) {
          rtu_failed(err, "path %d [%lld]: %g, want %g x %g", path,
                     (long long)i, got, factor, want[i]);
          break;
        }
      }
    }
    free(want), free(g1.data), free(g2.data);
  }
  /* 3. without DTensor sources the plain call runs: all-reduce */
  if (!a->expect_refusal) {
    tpx_tensor g;
    e = (tpx_error){0};
    g = rtu_talloc(TPX_DTYPE_F32, 3, shape);
    if (tpx_tp_transition_run(sh, b.mc, q, TPX_TRANSITION_INPUT, 0, 1, shape,
                              &part, &g, &e) != TPX_OK)
      rtu_lib_failed(err, "plain run", &e);
    else
      rtu_cmp(&b, "plain all-reduce", g.data, sum, n);
    free(g.data);
  }
  free(sum), free(part.data), free(scratch.data);
  tpx_mesh_comm_destroy(b.mc);
  return err->status;
}

/* llama sp1 at tp 2, 3 (uneven sequence) and 4. */
START_TEST(test_double_count_sp1) {
  int64_t tp = 2 + _i;
  tpx_model *m = rt_model(256);
  rt_world w = rt_world_of(m, rt_llama_plan(m, 1, tp), 1, tp);
  arr_arg a = {w.sh, 1};
  tpx_error e = {0};
  ck_assert_msg(tpx_local_run((int)tp, double_count_body, &a, &e) == TPX_OK,
                "tp %lld: %s", (long long)tp, e.message);
  rt_world_free(&w);
}
END_TEST

/* The llama sp0 plan: lm_head keeps its Shard(-1) output a DTensor, so a
 * colwise input is ambiguous too; the static path is right here (no SP
 * norm), and the plain call still refuses. */
START_TEST(test_sp0_refuses) {
  tpx_model *m = rt_model(256);
  rt_world w = rt_world_of(m, rt_llama_plan(m, 0, 2), 1, 2);
  arr_arg a = {w.sh, 1};
  tpx_error e = {0};
  ck_assert_msg(tpx_local_run(2, double_count_body, &a, &e) == TPX_OK, "%s",
                e.message);
  rt_world_free(&w);
}
END_TEST

static const char plain_plan[] =
    "{\"format\": \"tpx-plan/1\", \"entries\": ["
    "{\"module\": \"model.layers.*.self_attn.q_proj\", \"style\": "
    "\"colwise\"},"
    "{\"module\": \"model.layers.*.self_attn.o_proj\", \"style\": "
    "\"rowwise\"}]}";

/* No hook hands a DTensor on: the plain calls run and all-reduce. */
START_TEST(test_plain_plan_runs) {
  tpx_model *m = rt_model(256);
  rt_world w = rt_world_of(m, rt_plan_json(plain_plan), 1, 2);
  arr_arg a = {w.sh, 0};
  tpx_error e = {0};
  ck_assert_msg(tpx_local_run(2, double_count_body, &a, &e) == TPX_OK, "%s",
                e.message);
  rt_world_free(&w);
}
END_TEST

/* At tp 1 nothing is ambiguous: the plain calls copy. */
START_TEST(test_tp1_plain) {
  tpx_model *m = rt_model(256);
  rt_world w = rt_world_of(m, rt_llama_plan(m, 1, 1), 1, 1);
  int64_t q = tpx_model_find_module(m, "model.layers.0.self_attn.q_proj");
  int64_t shape[3] = {2, 7, 64}, lo[3];
  tpx_error e = {0};
  ck_assert_msg(tpx_tp_transition_shape(w.sh, q, TPX_TRANSITION_INPUT, 0, 1, 0,
                                        shape, 3, NULL, lo, &e) == TPX_OK,
                "%s", e.message);
  ck_assert_int_eq(lo[1], 7);
  rt_world_free(&w);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("runtime_tp_arrival");
  TCase *tc = tcase_create("arrival");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_double_count_sp1, 0, 3);
  tcase_add_test(tc, test_sp0_refuses);
  tcase_add_test(tc, test_plain_plan_runs);
  tcase_add_test(tc, test_tp1_plain);
  suite_add_tcase(s, tc);
  return s;
}

FX_MAIN(suite)
