/* test_partial_grad.c — replicated per-head norms whose gradient is partial
 * over tp (Qwen3's self_attn.q_norm / k_norm next to colwise q / k_proj):
 * the `partial-grad-replicated` warning of the sharding and
 * tpx_tp_param_grad_needs_allreduce. Qwen3-0.6B's real config with the qwen
 * plugin's plans (tp 2 and 4: warned and reduced; tp 1: neither),
 * Llama-3.2-1B (no q / k norms: nothing), and hand-made plans on the test
 * llama: q_proj gathered (every rank sees every head), a norm over the
 * whole projection (not per head; the qk-norm-whole-width error when the
 * output stays sharded), a styled q_norm. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "rt_fixture.h"

static rt_world real_world(const char *family, const char *cfg,
                           const char *arch, int sp, int64_t tp) {
  char path[256];
  snprintf(path, sizeof path, "tests/data/configs/%s/config.json", cfg);
  return rt_config_world(family, path, arch, sp, tp);
}

/* The warnings with code partial-grad-replicated, "subject|" joined. */
static void warned(const tpx_sharding *sh, char *buf, size_t size,
                   char *first_msg, size_t msize) {
  const tpx_diag_list *l = tpx_sharding_diagnostics(sh);
  size_t n = 0;
  buf[0] = first_msg[0] = '\0';
  for (size_t i = 0; i < tpx_diag_count(l); i++) {
    tpx_diag d;
    ck_assert_int_eq(tpx_diag_get(l, i, &d, NULL), TPX_OK);
    if (strcmp(d.code, "partial-grad-replicated") != 0)
      continue;
    ck_assert_int_eq(d.level, TPX_DIAG_WARNING);
    ck_assert(d.fix && d.fix[0]);
    if (!first_msg[0])
      snprintf(first_msg, msize, "%s", d.message);
    n += (size_t)snprintf(buf + n, size - n, "%s|", d.subject);
    ck_assert(n < size);
  }
}

static int needs(const tpx_sharding *sh, const char *fqn) {
  int64_t p = tpx_model_find_param(tpx_sharding_model(sh), fqn);
  ck_assert_msg(p >= 0, "no parameter %s", fqn);
  return tpx_tp_param_grad_needs_allreduce(sh, p);
}

START_TEST(test_qwen3) {
  int64_t tp = _i == 0 ? 2 : _i == 1 ? 4 : 1;
  for (int sp = 0; sp < 2; sp++) {
    rt_world w = real_world("qwen", "Qwen3-0.6B", "Qwen3ForCausalLM", sp, tp);
    char subj[512], msg[512];
    warned(w.sh, subj, sizeof subj, msg, sizeof msg);
    int qn = needs(w.sh, "model.layers.5.self_attn.q_norm.weight");
    int kn = needs(w.sh, "model.layers.27.self_attn.k_norm.weight");
    int q = needs(w.sh, "model.layers.5.self_attn.q_proj.weight");
    if (tp > 1) {
      ck_assert_str_eq(subj, "model.layers.*.self_attn.q_norm|"
                             "model.layers.*.self_attn.k_norm|");
      ck_assert_msg(strstr(msg, "'model.layers.*.self_attn.q_norm' (28 "
                                "modules) is replicated over tp") &&
                        strstr(msg, "'model.layers.*.self_attn.q_proj'"),
                    "%s", msg);
      ck_assert(qn && kn);
    } else {
      ck_assert_str_eq(subj, "");
      ck_assert(!qn && !kn);
    }
    ck_assert(!q);
    /* the plain decoder norms: reduced only under SP */
    ck_assert_int_eq(needs(w.sh, "model.layers.5.input_layernorm.weight"),
                     sp && tp > 1);
    ck_assert(tpx_sharding_ok(w.sh));
    rt_world_free(&w);
  }
}
END_TEST

START_TEST(test_llama_none) {
  rt_world w = real_world("llama", "Llama-3.2-1B", "LlamaForCausalLM", 0, 2);
  char subj[512], msg[512];
  warned(w.sh, subj, sizeof subj, msg, sizeof msg);
  ck_assert_str_eq(subj, "");
  for (size_t i = 0; i < tpx_model_num_params(w.m); i++)
    ck_assert(!tpx_tp_param_grad_needs_allreduce(w.sh, (int64_t)i));
  rt_world_free(&w);
}
END_TEST

/* Plans on the test llama (q / k norms of 8 per head, q_proj 64 out). */
typedef struct hand_case {
  const char *q_proj; /* the q_proj entry's extra fields */
  const char *q_norm; /* a q_norm entry, or NULL */
  int64_t norm_width; /* q_norm weight size (8 per head; 64 = whole) */
  int want;           /* q_norm's weight needs the all-reduce */
  int want_warning;
  int want_whole; /* the qk-norm-whole-width error (issue 28 D16) */
} hand_case;

static const hand_case hand_cases[] = {
    {"", NULL, 8, 1, 1, 0},
    /* gathered output: every rank normalises every head */
    {", \"output_layouts\": [\"replicate\"]", NULL, 8, 0, 0, 0},
    /* output resharded on the sequence: not the heads */
    {", \"output_layouts\": [\"shard(1)\"]", NULL, 8, 0, 0, 0},
    /* a norm over the whole projection (OLMo2-like): not per head, and
     * wrong on a sharded output */
    {"", NULL, 64, 0, 0, 1},
    /* the same norm after a gathered output (transformers' colwise_rep) */
    {", \"output_layouts\": [\"replicate\"]", NULL, 64, 0, 0, 0},
    /* styled q_norm: the SP rule, no warning */
    {"",
     "{\"module\": \"model.layers.*.self_attn.q_norm\", \"style\": "
     "\"qk_norm_sequence_parallel\", \"sequence_dim\": 2},",
     8, 1, 0, 0},
};

START_TEST(test_hand_plans) {
  const hand_case *c = &hand_cases[_i];
  fx_opts o = {256, 0, 0, 0, NULL};
  tpx_model *m = fx_model(&o);
  tpx_error e = {0};
  int64_t w[1] = {c->norm_width};
  ck_assert_int_eq(tpx_model_add_module(m, "model.layers.0.self_attn.q_norm",
                                        TPX_MODULE_NORM, NULL, &e),
                   TPX_OK);
  ck_assert_int_eq(tpx_model_add_param(m, "model.layers.0.self_attn.q_norm",
                                       "weight", w, 1, TPX_DTYPE_BF16, NULL,
                                       &e),
                   TPX_OK);
  char json[1024];
  snprintf(json, sizeof json,
           "{\"format\": \"tpx-plan/1\", \"entries\": [%s"
           "{\"module\": \"model.layers.*.self_attn.q_proj\", \"style\": "
           "\"colwise\"%s}]}",
           c->q_norm ? c->q_norm : "", c->q_proj);
  rt_world wd = rt_world_of(m, rt_plan_json(json), 1, 2);
  ck_assert_int_eq(needs(wd.sh, "model.layers.0.self_attn.q_norm.weight"),
                   c->want);
  char subj[512], msg[512];
  warned(wd.sh, subj, sizeof subj, msg, sizeof msg);
  ck_assert_str_eq(subj,
                   c->want_warning ? "model.layers.0.self_attn.q_norm|" : "");
  /* the whole-width norm: an error naming both modules, and upstream's
   * silence as an info */
  size_t whole = 0, upstream = 0;
  const tpx_diag_list *l = tpx_sharding_diagnostics(wd.sh);
  for (size_t i = 0; i < tpx_diag_count(l); i++) {
    tpx_diag d;
    ck_assert_int_eq(tpx_diag_get(l, i, &d, NULL), TPX_OK);
    if (strcmp(d.code, "qk-norm-whole-width") == 0) {
      whole++;
      ck_assert_int_eq(d.level, TPX_DIAG_ERROR);
      ck_assert_str_eq(d.subject, "model.layers.0.self_attn.q_norm");
      ck_assert_msg(strstr(d.message, "whole output width 64") &&
                        strstr(d.message, "'model.layers.0.self_attn.q_proj'"),
                    "%s", d.message);
      ck_assert(d.fix && strstr(d.fix, "tp 1"));
    }
    upstream += strcmp(d.code, "upstream-qk-norm-whole-width") == 0 &&
                d.level == TPX_DIAG_INFO;
  }
  ck_assert_uint_eq(whole, (size_t)c->want_whole);
  ck_assert_uint_eq(upstream, (size_t)c->want_whole);
  if (c->want_warning) /* one module: no count, key named when it differs */
    ck_assert_msg(strstr(msg, "'model.layers.0.self_attn.q_norm' is") &&
                      strstr(msg, "(key 'model.layers.*.self_attn.q_proj')"),
                  "%s", msg);
  rt_world_free(&wd);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("runtime_partial_grad");
  TCase *tc = tcase_create("partial_grad");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_qwen3, 0, 3);
  tcase_add_test(tc, test_llama_none);
  tcase_add_loop_test(tc, test_hand_plans, 0,
                      (int)(sizeof hand_cases / sizeof hand_cases[0]));
  suite_add_tcase(s, tc);
  return s;
}

FX_MAIN(suite)
