/* test_tp_param.c — which parameters replicated over tp get their gradient
 * all-reduced over tp (tpx_tp_param_grad_needs_allreduce): the norms under
 * the llama plugin's sp1 plan, the zoo's sequence_parallel / spag / q-k
 * norms, nothing under sp0, at tp = 1 or for bad arguments; and
 * tpx_tp_param_grad_allreduce summing exactly those over tp on threads. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "rt_fixture.h"

static int64_t pidx(const tpx_model *m, const char *fqn) {
  int64_t p = tpx_model_find_param(m, fqn);
  ck_assert_msg(p >= 0, "no parameter %s", fqn);
  return p;
}

/* Names of the parameters that need the all-reduce, ";"-joined. */
static char *needing(const tpx_sharding *sh) {
  const tpx_model *m = tpx_sharding_model(sh);
  size_t cap = 4096, n = 0;
  char *s = calloc(cap, 1);
  for (size_t i = 0; i < tpx_model_num_params(m); i++) {
    if (!tpx_tp_param_grad_needs_allreduce(sh, (int64_t)i))
      continue;
    tpx_param_info pi;
    ck_assert_int_eq(tpx_model_param(m, (int64_t)i, &pi, NULL), TPX_OK);
    n += (size_t)snprintf(s + n, cap - n, "%s;", pi.fqn);
    ck_assert(n < cap);
  }
  return s;
}

START_TEST(test_llama_sp1) {
  tpx_model *m = rt_model(256);
  tpx_plan *p = rt_llama_plan(m, 1, 2);
  rt_world w = rt_world_of(m, p, 1, 2);
  tpx_sharding *sh = w.sh;
  char *s = needing(sh);
  ck_assert_str_eq(s, "model.layers.0.input_layernorm.weight;"
                      "model.layers.0.post_attention_layernorm.weight;"
                      "model.layers.1.input_layernorm.weight;"
                      "model.layers.1.post_attention_layernorm.weight;"
                      "model.norm.weight;"
                      "model.layers.0.self_attn.q_norm.weight;"
                      "model.layers.0.self_attn.k_norm.weight;"
                      "model.layers.1.self_attn.q_norm.weight;"
                      "model.layers.1.self_attn.k_norm.weight;");
  free(s);
  ck_assert_int_eq(tpx_tp_param_grad_needs_allreduce(sh, -1), 0);
  ck_assert_int_eq(tpx_tp_param_grad_needs_allreduce(sh, 1 << 30), 0);
  ck_assert_int_eq(tpx_tp_param_grad_needs_allreduce(NULL, 0), 0);
  rt_world_free(&w);
}
END_TEST

/* Without SP only the per-head q / k norms next to colwise q / k_proj
 * (unstyled: each rank normalises its own heads), and nothing at tp 1. */
START_TEST(test_none_without_sp) {
  for (int tp = 1; tp <= 4; tp++) {
    tpx_model *m = rt_model(256);
    tpx_plan *p = rt_llama_plan(m, tp == 1, tp); /* sp1 at tp 1: no TP */
    rt_world w = rt_world_of(m, p, 1, tp);
    tpx_sharding *sh = w.sh;
    char *s = needing(sh);
    if (tp == 1)
      ck_assert_msg(s[0] == '\0', "tp %d: %s", tp, s);
    else
      ck_assert_str_eq(s, "model.layers.0.self_attn.q_norm.weight;"
                          "model.layers.0.self_attn.k_norm.weight;"
                          "model.layers.1.self_attn.q_norm.weight;"
                          "model.layers.1.self_attn.k_norm.weight;");
    free(s);
    rt_world_free(&w);
  }
}
END_TEST

START_TEST(test_zoo) {
  tpx_model *m = rt_model(256);
  tpx_plan *p = rt_plan_json(rt_zoo_plan);
  rt_world w = rt_world_of(m, p, 1, 4);
  tpx_sharding *sh = w.sh;
  ck_assert(tpx_tp_param_grad_needs_allreduce(
      sh, pidx(m, "model.layers.1.self_attn.q_norm.weight")));
  ck_assert(tpx_tp_param_grad_needs_allreduce(
      sh, pidx(m, "model.layers.0.self_attn.k_norm.weight")));
  ck_assert(tpx_tp_param_grad_needs_allreduce(
      sh, pidx(m, "model.layers.0.input_layernorm.weight")));
  ck_assert(tpx_tp_param_grad_needs_allreduce(
      sh, pidx(m, "model.layers.0.post_attention_layernorm.weight")));
  /* sharded, or replicated on full activations */
  ck_assert(!tpx_tp_param_grad_needs_allreduce(
      sh, pidx(m, "model.embed_tokens.weight")));
  ck_assert(!tpx_tp_param_grad_needs_allreduce(
      sh, pidx(m, "model.layers.0.self_attn.v_proj.weight")));
  ck_assert(
      !tpx_tp_param_grad_needs_allreduce(sh, pidx(m, "model.norm.weight")));
  ck_assert(!tpx_tp_param_grad_needs_allreduce(sh, pidx(m, "lm_head.weight")));
  rt_world_free(&w);
}
END_TEST

/* A tied alias follows its target (here: not a norm, so 0 both ways). */
START_TEST(test_tied) {
  fx_opts o = {256, 1, 0, 0, NULL};
  tpx_model *m = fx_model(&o);
  tpx_plan *p = rt_llama_plan(m, 1, 2);
  rt_world w = rt_world_of(m, p, 1, 2);
  tpx_sharding *sh = w.sh;
  ck_assert(!tpx_tp_param_grad_needs_allreduce(sh, pidx(m, "lm_head.weight")));
  ck_assert(
      tpx_tp_param_grad_needs_allreduce(sh, pidx(m, "model.norm.weight")));
  rt_world_free(&w);
}
END_TEST

static tpx_status ar_body(tpx_comm *world, void *arg, tpx_error *err) {
  rt_sh_arg *a = arg;
  const tpx_model *m = tpx_sharding_model(a->sh);
  tpx_mesh_comm *mc;
  tpx_status st =
      tpx_mesh_comm_create(world, tpx_sharding_mesh(a->sh), &mc, err);
  if (st != TPX_OK)
    return st;
  int r = tpx_comm_rank(world); /* mesh (1, 2, 3): tp index = r % 3 */
  int64_t s1[1] = {64};
  float g1[64], g2[64];
  for (int i = 0; i < 64; i++) g1[i] = g2[i] = (float)(r + 1);
  tpx_tensor t1 = tpx_tensor_make(g1, TPX_DTYPE_F32, 1, s1);
  tpx_tensor t2 = tpx_tensor_make(g2, TPX_DTYPE_F32, 1, s1);
  int64_t norm = tpx_model_find_param(m, "model.norm.weight");
  int64_t q = tpx_model_find_param(m, "model.layers.0.self_attn.q_proj.weight");
  st = tpx_tp_param_grad_allreduce(a->sh, mc, norm, &t1, err);
  if (st == TPX_OK)
    st = tpx_tp_param_grad_allreduce(a->sh, mc, q, &t2, err);
  int base = r - r % 3;               /* first rank of my tp group */
  float want = (float)(3 * base + 6); /* (base+1) + (base+2) + (base+3) */
  for (int i = 0; st == TPX_OK && i < 64; i++)
    if (g1[i] != want || g2[i] != (float)(r + 1))
      st = tpx_error_set(err, TPX_VALIDATION,
                         "rank %d: norm grad %g (want %g), q grad %g", r, g1[i],
                         want, g2[i]);
  if (st == TPX_OK) {
    tpx_error e = {0};
    if (tpx_tp_param_grad_allreduce(a->sh, mc, -3, &t1, &e) !=
            TPX_OUT_OF_RANGE ||
        !strstr(e.message, "parameter index -3"))
      st = tpx_error_set(err, TPX_VALIDATION, "bad index: %s", e.message);
  }
  tpx_mesh_comm_destroy(mc);
  return st;
}

START_TEST(test_allreduce) {
  tpx_model *m = rt_model(256);
  tpx_plan *p = rt_llama_plan(m, 1, 3);
  rt_world w = rt_world_of(m, p, 2, 3);
  tpx_sharding *sh = w.sh;
  rt_run_body(ar_body, sh);
  rt_world_free(&w);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("runtime_tp_param");
  TCase *tc = tcase_create("param");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_llama_sp1);
  tcase_add_test(tc, test_none_without_sp);
  tcase_add_test(tc, test_zoo);
  tcase_add_test(tc, test_tied);
  tcase_add_test(tc, test_allreduce);
  suite_add_tcase(s, tc);
  return s;
}

FX_MAIN(suite)
