/* test_tp_transition.c — module transitions of tpx/runtime_tp.h on local
 * threads: every transition of every styled module (a zoo plan using every
 * style, the llama plugin's sp0 / sp1 plans, Llama-3.2-1B's skeleton),
 * forward and backward, plain and DTensor arrivals, at tp 2, 3 (uneven
 * sequence and last-dim shards) and 4, with and without a data-parallel
 * dim, f32 and bf16, against the logical tensor; a residual MLP block
 * through the transitions against a single-rank reference (sp off, sp on,
 * an SP norm straight into colwise); tp = 1; bad input. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "rt_fixture.h"

/* ---- every transition --------------------------------------------------- */

typedef struct zoo_case {
  int plan; /* 0 zoo, 1 llama sp0, 2 llama sp1, 3 SP norm, 4 / 5 qwen3
               sp0 / sp1 */
  int64_t dp, tp;
  tpx_dtype dtype;
} zoo_case;

static const zoo_case zoo_cases[] = {
    {0, 1, 2, TPX_DTYPE_F32},  {0, 1, 3, TPX_DTYPE_F32},
    {0, 1, 4, TPX_DTYPE_F32},  {0, 2, 2, TPX_DTYPE_F32},
    {0, 1, 3, TPX_DTYPE_BF16}, {1, 1, 2, TPX_DTYPE_F32},
    {1, 1, 3, TPX_DTYPE_F32},  {1, 1, 4, TPX_DTYPE_F32},
    {2, 1, 2, TPX_DTYPE_F32},  {2, 1, 3, TPX_DTYPE_F32},
    {2, 1, 4, TPX_DTYPE_F32},  {2, 2, 2, TPX_DTYPE_BF16},
    {4, 1, 3, TPX_DTYPE_F32},  {5, 1, 3, TPX_DTYPE_F32},
};

static tpx_plan *plan_for(const tpx_model *m, int which, int64_t tp) {
  if (which == 0)
    return rt_plan_json(rt_zoo_plan);
  if (which == 3)
    return rt_plan_json(rt_sp_norm_plan);
  if (which >= 4)
    return rt_plugin_plan("qwen", "Qwen3ForCausalLM", m, which == 5, tp);
  return rt_llama_plan(m, which == 2, tp);
}

START_TEST(test_every_transition) {
  const zoo_case *c = &zoo_cases[_i];
  tpx_model *m = rt_model(256);
  tpx_plan *p = plan_for(m, c->plan, c->tp);
  rt_world w = rt_world_of(m, p, c->dp, c->tp);
  tpx_sharding *sh = w.sh;
  rt_arg a = {sh, 7, 10, c->dtype, 0, 0, 0};
  rt_run(case_transitions, &a, "transitions");
  /* the zoo has 15+ styled modules with 2+ transitions each */
  ck_assert_int_ge(a.cases_run, c->plan == 0 ? 100 : 40);
  rt_world_free(&w);
}
END_TEST

/* Llama-3.2-1B's skeleton (the llama plugin's) with its sp1 plan, tp 4. */
START_TEST(test_llama_1b_sp1) {
  rt_world w = rt_config_world("llama",
                               "tests/data/families/llama/"
                               "Llama-3.2-1B.config.json",
                               "LlamaForCausalLM", 1, 4);
  const tpx_model *m = w.m;
  tpx_sharding *sh = w.sh;
  rt_arg a = {sh, 7, 10, TPX_DTYPE_F32, 0, 0, 0};
  rt_run(case_transitions, &a, "Llama-3.2-1B sp1 transitions");
  /* 16 layers x (2 spag + 7 linear) + embed, norm, lm_head */
  ck_assert_int_ge(a.cases_run, 16 * 9 * 4);
  /* the SP norms need their grads all-reduced; nothing else does */
  int64_t n_ar = 0;
  for (size_t i = 0; i < tpx_model_num_params(m); i++)
    n_ar += tpx_tp_param_grad_needs_allreduce(sh, (int64_t)i);
  ck_assert_int_eq(n_ar, 16 * 2 + 1);
  rt_world_free(&w);
}
END_TEST

/* ---- the MLP block: forward and backward against a reference ----------- */

typedef struct blk_case {
  int plan; /* 1 sp0, 2 sp1, 3 SP norm into colwise, 4 / 5 qwen3 sp0 / 1 */
  int64_t tp;
} blk_case;

static const blk_case blk_cases[] = {
    {1, 2}, {1, 3}, {1, 4}, {2, 2}, {2, 3}, {2, 4},
    {3, 2}, {3, 3}, {3, 4}, {4, 3}, {5, 3}, {5, 4},
};

START_TEST(test_mlp_block) {
  const blk_case *c = &blk_cases[_i];
  tpx_model *m = rt_model(256);
  tpx_plan *p = plan_for(m, c->plan, c->tp);
  rt_world w = rt_world_of(m, p, 1, c->tp);
  tpx_sharding *sh = w.sh;
  rt_arg a = {sh, 7, 0, TPX_DTYPE_F32, 0, 0, 0};
  rt_run(case_mlp_block, &a, "mlp block");
  a.T = 2; /* shorter than tp: empty sequence shards at tp 3, 4 */
  rt_run(case_mlp_block, &a, "mlp block, T=2");
  rt_world_free(&w);
}
END_TEST

/* ---- tp = 1 ------------------------------------------------------------- */

START_TEST(test_tp1_copies) {
  tpx_model *m = rt_model(256);
  tpx_plan *p = rt_plan_json(rt_zoo_plan);
  rt_world w = rt_world_of(m, p, 2, 1);
  tpx_sharding *sh = w.sh;
  int64_t mod = tpx_model_find_module(m, "model.layers.0.self_attn.q_proj");
  const tpx_transition *tr = (const tpx_transition *)1;
  tpx_error e = {0};
  ck_assert_int_eq(
      tpx_tp_transition_get(sh, mod, TPX_TRANSITION_INPUT, 0, &tr, &e), TPX_OK);
  ck_assert_ptr_null(tr);
  int64_t shape[3] = {2, 7, 10}, lin[3], lout[3];
  ck_assert_int_eq(tpx_tp_transition_shape(sh, mod, TPX_TRANSITION_INPUT, 0, 1,
                                           1, shape, 3, lin, lout, &e),
                   TPX_OK);
  ck_assert_int_eq(lin[1], 7);
  ck_assert_int_eq(lout[2], 10);
  ck_assert_int_eq(tpx_tp_mesh_dim(sh), 2);
  rt_arg a = {sh, 7, 10, TPX_DTYPE_F32, 0, 0, 0};
  rt_run(case_transitions, &a, "tp=1");
  rt_run(case_mlp_block, &a, "tp=1 block");
  for (size_t i = 0; i < tpx_model_num_params(m); i++)
    ck_assert_int_eq(tpx_tp_param_grad_needs_allreduce(sh, (int64_t)i), 0);
  rt_world_free(&w);
}
END_TEST

/* ---- bad input ---------------------------------------------------------- */

typedef struct bad_arg {
  const tpx_sharding *sh;
  const tpx_mesh *other_mesh;
} bad_arg;

static tpx_status bad_body(tpx_comm *world, void *arg, tpx_error *err) {
  bad_arg *b = arg;
  const tpx_sharding *sh = b->sh;
  const tpx_model *m = tpx_sharding_model(sh);
  tpx_mesh_comm *mc = NULL, *mc2 = NULL;
  tpx_status st = tpx_mesh_comm_create(world, tpx_sharding_mesh(sh), &mc, err);
  if (st != TPX_OK)
    return st;
  int64_t q = tpx_model_find_module(m, "model.layers.0.self_attn.q_proj");
  int64_t mlp = tpx_model_find_module(m, "model.layers.0.mlp");
  int64_t shape[3] = {2, 7, 10};
  float buf[2 * 7 * 10] = {0}, out[2 * 7 * 10];
  int64_t full[3] = {2, 7, 10}, wrong[3] = {2, 6, 10};
  tpx_tensor in = tpx_tensor_make(buf, TPX_DTYPE_F32, 3, full);
  tpx_tensor o = tpx_tensor_make(out, TPX_DTYPE_F32, 3, full);
  tpx_tensor bad = tpx_tensor_make(buf, TPX_DTYPE_F32, 3, wrong);
  tpx_tensor ob16 = tpx_tensor_make(out, TPX_DTYPE_BF16, 3, full);
  /* q_proj (llama sp0): colwise, input Replicate */
  RT_EXPECT(tpx_tp_transition_run(sh, mc, mlp, TPX_TRANSITION_INPUT, 0, 0,
                                  shape, &in, &o, &e_),
            TPX_NOT_FOUND, "'model.layers.0.mlp' has no parallel style");
  RT_EXPECT(tpx_tp_transition_run_dt(sh, mc, q, TPX_TRANSITION_INPUT, 3, 0,
                                     NULL, shape, &in, &o, &e_),
            TPX_NOT_FOUND,
            "has no input 3 transition; it has: input 0, output 0");
  RT_EXPECT(tpx_tp_transition_run_dt(sh, mc, q, TPX_TRANSITION_INPUT, 0, 0,
                                     NULL, shape, &bad, &o, &e_),
            TPX_INVALID_ARGUMENT,
            "input has local shape [2, 6, 10], expected "
            "[2, 7, 10]");
  RT_EXPECT(tpx_tp_transition_run_dt(sh, mc, q, TPX_TRANSITION_INPUT, 0, 0,
                                     NULL, shape, &in, &ob16, &e_),
            TPX_INVALID_ARGUMENT,
            "input dtype f32 differs from output dtype bf16");
  RT_EXPECT(tpx_tp_transition_run(sh, mc, q, TPX_TRANSITION_OUTPUT, 0, 0, shape,
                                  &in, &o, &e_),
            TPX_INVALID_ARGUMENT, "'model.layers.0.self_attn.q_proj'");
  RT_EXPECT(tpx_tp_transition_run(sh, mc, 100000, TPX_TRANSITION_INPUT, 0, 0,
                                  shape, &in, &o, &e_),
            TPX_OUT_OF_RANGE, "module index 100000");
  RT_EXPECT(tpx_tp_transition_run_dt(sh, mc, q, TPX_TRANSITION_INPUT, 0, 0,
                                     NULL, NULL, &in, &o, &e_),
            TPX_INVALID_ARGUMENT, "logical shape is NULL");
  tpx_tensor nodata = tpx_tensor_make(NULL, TPX_DTYPE_F32, 3, full);
  RT_EXPECT(tpx_tp_transition_run_dt(sh, mc, q, TPX_TRANSITION_INPUT, 0, 0,
                                     NULL, shape, &nodata, &o, &e_),
            TPX_INVALID_ARGUMENT, "input: data is NULL for 140 elements");
  tpx_placement rep = tpx_placement_replicate();
  RT_EXPECT(tpx_tp_transition_run_dt(sh, mc, q, TPX_TRANSITION_OUTPUT, 0, 0,
                                     &rep, shape, &in, &o, &e_),
            TPX_INVALID_ARGUMENT, "an arrival layout applies to inputs only");
  RT_EXPECT(tpx_tp_transition_run_dt(NULL, mc, q, TPX_TRANSITION_INPUT, 0, 0,
                                     NULL, shape, &in, &o, &e_),
            TPX_INVALID_ARGUMENT, "sharding is NULL");
  /* a mesh comm over another mesh */
  st = tpx_mesh_comm_create(world, b->other_mesh, &mc2, err);
  if (st == TPX_OK) {
    tpx_status s2 = TPX_OK;
    {
      tpx_error e_ = {0};
      s2 = tpx_tp_transition_run_dt(sh, mc2, q, TPX_TRANSITION_INPUT, 0, 0,
                                    NULL, shape, &in, &o, &e_);
      if (s2 != TPX_INVALID_ARGUMENT || !strstr(e_.message, "differs"))
        st = tpx_error_set(err, TPX_VALIDATION, "other mesh: %s", e_.message);
    }
    tpx_mesh_comm_destroy(mc2);
  }
  /* in place: an all-reduce (same shape) through one buffer */
  int64_t o_proj = tpx_model_find_module(m, "model.layers.0.self_attn.o_proj");
  for (int i = 0; i < 140; i++) buf[i] = (float)(i % 7);
  if (st == TPX_OK) {
    tpx_error e_ = {0};
    st = tpx_tp_transition_run(sh, mc, o_proj, TPX_TRANSITION_OUTPUT, 0, 0,
                               shape, &in, &in, &e_);
    if (st != TPX_OK)
      tpx_error_set(err, st, "in place: %s", e_.message);
    for (int i = 0; st == TPX_OK && i < 140; i++)
      if (buf[i] != (float)(2 * (i % 7)))
        st =
            tpx_error_set(err, TPX_VALIDATION, "in place [%d] = %g", i, buf[i]);
  }
  tpx_mesh_comm_destroy(mc);
  return st;
}

START_TEST(test_bad_input) {
  tpx_model *m = rt_model(256);
  tpx_plan *p = rt_llama_plan(m, 0, 2);
  tpx_mesh *other = fx_mesh(2, 1, 1);
  rt_world w = rt_world_of(m, p, 1, 2);
  tpx_sharding *sh = w.sh;
  bad_arg b = {sh, other};
  tpx_error e = {0};
  ck_assert_msg(tpx_local_run(2, bad_body, &b, &e) == TPX_OK, "%s", e.message);
  /* argument checks that need no comm */
  int64_t q = tpx_model_find_module(m, "model.layers.0.self_attn.q_proj");
  int64_t shape[3] = {2, 7, 10}, lo[3];
  e = (tpx_error){0};
  ck_assert_int_eq(tpx_tp_transition_shape_dt(sh, q, TPX_TRANSITION_INPUT, 0, 0,
                                              NULL, 5, shape, 3, NULL, lo, &e),
                   TPX_OUT_OF_RANGE);
  ck_assert_ptr_nonnull(strstr(e.message, "rank 5"));
  e = (tpx_error){0};
  ck_assert_int_eq(tpx_tp_transition_shape(sh, q, (tpx_transition_side)7, 0, 0,
                                           0, shape, 3, NULL, lo, &e),
                   TPX_INVALID_ARGUMENT);
  ck_assert_int_eq(tpx_tp_mesh_dim(NULL), -1);
  ck_assert_int_eq(tpx_tp_output_keeps_dtensor(sh, q, 0), 0);
  ck_assert_int_eq(tpx_tp_output_keeps_dtensor(NULL, q, 0), 0);
  int64_t lm = tpx_model_find_module(m, "lm_head");
  ck_assert_int_eq(tpx_tp_output_keeps_dtensor(sh, lm, 0), 1);
  tpx_mesh_destroy(other);
  rt_world_free(&w);
}
END_TEST

/* ---- tensor.h ----------------------------------------------------------- */

START_TEST(test_tensor) {
  int64_t s[2] = {3, 4};
  float d[12];
  tpx_tensor t = tpx_tensor_make(d, TPX_DTYPE_BF16, 2, s);
  ck_assert_int_eq(tpx_tensor_numel(&t), 12);
  ck_assert_int_eq(tpx_tensor_nbytes(&t), 24);
  char buf[64];
  tpx_tensor_format_shape(&t, buf, sizeof buf);
  ck_assert_str_eq(buf, "[3, 4] bf16");
  ck_assert_int_eq(tpx_tensor_check(&t, "x", NULL), TPX_OK);
  tpx_tensor z = tpx_tensor_make(NULL, TPX_DTYPE_F32, 0, NULL);
  ck_assert_int_eq(tpx_tensor_numel(&z), 1);
  tpx_error e = {0};
  ck_assert_int_eq(tpx_tensor_check(&z, "scalar", &e), TPX_INVALID_ARGUMENT);
  ck_assert_str_eq(e.message, "scalar: data is NULL for 1 elements");
  t.shape[1] = -1;
  e = (tpx_error){0};
  ck_assert_int_eq(tpx_tensor_check(&t, "x", &e), TPX_INVALID_ARGUMENT);
  ck_assert_str_eq(e.message, "x: dim 1 has negative size -1");
  ck_assert_int_eq(tpx_tensor_numel(&t), -1);
  t.shape[1] = 4;
  t.dtype = TPX_DTYPE_INVALID;
  ck_assert_int_eq(tpx_tensor_nbytes(&t), -1);
  ck_assert_int_eq(tpx_tensor_check(&t, "x", NULL), TPX_INVALID_ARGUMENT);
  t.ndim = 9;
  ck_assert_int_eq(tpx_tensor_check(&t, "x", NULL), TPX_INVALID_ARGUMENT);
  ck_assert_int_eq(tpx_tensor_numel(NULL), -1);
  ck_assert_int_eq(tpx_tensor_check(NULL, "x", NULL), TPX_INVALID_ARGUMENT);
  int64_t s9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  tpx_tensor c = tpx_tensor_make(d, TPX_DTYPE_F32, 20, s9); /* reads 8 */
  ck_assert_int_eq(c.ndim, TPX_MAX_TENSOR_DIMS);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("runtime_tp_transition");
  TCase *tc = tcase_create("transitions");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_every_transition, 0,
                      (int)(sizeof zoo_cases / sizeof zoo_cases[0]));
  tcase_add_test(tc, test_llama_1b_sp1);
  tcase_add_loop_test(tc, test_mlp_block, 0,
                      (int)(sizeof blk_cases / sizeof blk_cases[0]));
  tcase_add_test(tc, test_tp1_copies);
  tcase_add_test(tc, test_bad_input);
  tcase_add_test(tc, test_tensor);
  suite_add_tcase(s, tc);
  return s;
}

FX_MAIN(suite)
