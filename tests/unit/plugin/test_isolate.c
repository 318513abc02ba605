/* test_isolate.c — isolation mode (tpx_registry_set_isolation): plugin calls
 * in a forked child with a timeout. A get_plan that crashes or hangs becomes
 * a TPX_PLUGIN error naming the plugin and what happened, and selection falls
 * back with a plugin-failed diagnostic; a well-behaved plugin gives exactly
 * the same results (plan JSON byte for byte, skeleton, capabilities,
 * refusals) with isolation on and off. */
#include <math.h>
#include <stdint.h>
#include <time.h>

#include "plugin_test.h"
#include "tpx/plan.h"

static tpx_registry *registry(const char *plugin, int isolate, double timeout) {
  tpx_registry *reg = NULL;
  CHECK_OK(tpx_registry_create(&reg, &e_));
  /* Half the cases switch isolation on before loading, half after. */
  if (isolate == 2)
    CHECK_OK(tpx_registry_set_isolation(reg, 1, timeout, &e_));
  CHECK_OK(tpx_registry_load_file(reg, plugin, &e_));
  if (isolate == 1)
    CHECK_OK(tpx_registry_set_isolation(reg, 1, timeout, &e_));
  return reg;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#define BROKEN_CONFIG                                                          \
  "{\"architectures\": [\"BrokenForCausalLM\"], \"model_type\": \"qwen2\", "   \
  "\"num_attention_heads\": 8, \"num_key_value_heads\": 8}"

static const struct {
  const char *file;
  double timeout;
  const char *what; /* expected in the message */
} broken_cases[] = {
    {"get_plan_crashes.so", 10, "crashed with SIGSEGV in get_plan"},
    {"get_plan_hangs.so", 0.5, "did not return within 0.5 s from get_plan"},
    /* junk on the result pipe is named as such, not as exit() */
    {"pipe_garbage.so", 10, "get_plan returned, but its result pipe held"},
};

/* A get_plan that leaves a process behind holding the result pipe (for
 * 10 s) returned its plan at once: the call succeeds, without waiting for
 * the grandchild and without a timeout blamed on get_plan. */
START_TEST(grandchild_holding_the_pipe) {
  tpx_registry *reg = registry(BROKEN("grandchild.so"), 2, 1.0);
  tpx_model *m = model_from_json(BROKEN_CONFIG);
  tpx_plan *plan = NULL;
  double t0 = now();
  CHECK_OK(tpx_registry_get_plan(reg, 0, m, NULL, NULL, 0, 2, &plan, &e_));
  ck_assert_double_lt(now() - t0, 1.0);
  ck_assert_uint_eq(tpx_plan_size(plan), 1);
  tpx_plan_destroy(plan);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* An isolated child may add only so much address space: a get_plan that
 * wants 1 GiB under a 128 MiB limit runs out of memory there, and the
 * message names the limit instead of the host growing with it. */
START_TEST(child_memory_limit) {
  setenv("TPX_TEST_ALLOCATE_MB", "1024", 1);
  tpx_registry *reg = registry(BROKEN("get_plan_allocates.so"), 2, 30);
  CHECK_OK(tpx_registry_set_child_limits(reg, 128ull << 20, 0, &e_));
  tpx_model *m = model_from_json(BROKEN_CONFIG);
  tpx_plan *plan = NULL;
  tpx_error e = {0};
  tpx_status s = tpx_registry_get_plan(reg, 0, m, NULL, NULL, 0, 2, &plan, &e);
#if defined(__SANITIZE_ADDRESS__)
  /* AddressSanitizer's allocator ends the child at the limit instead of
   * returning NULL: the crash names the limit. */
  ck_assert_int_eq(s, TPX_PLUGIN);
#else
  ck_assert_int_eq(s, TPX_NO_MEMORY);
  ASSERT_CONTAINS(e.message, "get_plan ran out of memory");
#endif
  ASSERT_CONTAINS(e.message, "may add at most 128 MiB of address space");
  ck_assert_ptr_null(plan);
  /* Within the limit it plans. */
  setenv("TPX_TEST_ALLOCATE_MB", "16", 1);
  CHECK_OK(tpx_registry_get_plan(reg, 0, m, NULL, NULL, 0, 2, &plan, &e_));
  tpx_plan_destroy(plan);
  unsetenv("TPX_TEST_ALLOCATE_MB");
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* A plain NULL write with almost no memory in use is a crash, not "out of
 * memory?" — even under a small memory limit (issue 28 C15). */
START_TEST(null_write_not_blamed_on_memory) {
  const char *path = BROKEN("get_plan_null_write.so");
  tpx_registry *reg = registry(path, 2, 10);
  CHECK_OK(tpx_registry_set_child_limits(reg, 128ull << 20, 0, &e_));
  tpx_model *m = model_from_json(BROKEN_CONFIG);
  tpx_plan *plan = NULL;
  tpx_error e = {0};
  ck_assert_int_eq(
      tpx_registry_get_plan(reg, 0, m, NULL, NULL, 0, 2, &plan, &e),
      TPX_PLUGIN);
  ASSERT_CONTAINS(e.message, path);
  ASSERT_CONTAINS(e.message, "in get_plan");
  ASSERT_CONTAINS(e.message, "crashed with SIGSEGV in get_plan");
  ck_assert_msg(!strstr(e.message, "memory"), "blamed on memory: %s",
                e.message);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* A plugin that ignores a failed malloc and crashes after filling its
 * memory limit: there the guess is made, naming the limit. */
START_TEST(crash_at_the_limit_blamed_on_memory) {
  setenv("TPX_TEST_ALLOCATE_MB", "1024", 1);
  setenv("TPX_TEST_ALLOCATE_CRASH", "1", 1);
  tpx_registry *reg = registry(BROKEN("get_plan_allocates.so"), 2, 30);
  CHECK_OK(tpx_registry_set_child_limits(reg, 128ull << 20, 0, &e_));
  tpx_model *m = model_from_json(BROKEN_CONFIG);
  tpx_plan *plan = NULL;
  tpx_error e = {0};
  ck_assert_int_eq(
      tpx_registry_get_plan(reg, 0, m, NULL, NULL, 0, 2, &plan, &e),
      TPX_PLUGIN);
  ASSERT_CONTAINS(e.message, "out of memory?");
  ASSERT_CONTAINS(e.message, "may add at most 128 MiB of address space");
  unsetenv("TPX_TEST_ALLOCATE_CRASH");
  unsetenv("TPX_TEST_ALLOCATE_MB");
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* tpx_registry_set_child_limits checks its arguments. */
START_TEST(child_limits_arguments) {
  tpx_registry *reg = NULL;
  CHECK_OK(tpx_registry_create(&reg, &e_));
  tpx_error e = {0};
  ck_assert_int_eq(tpx_registry_set_child_limits(NULL, 0, 0, &e),
                   TPX_INVALID_ARGUMENT);
  ck_assert_int_eq(tpx_registry_set_child_limits(reg, 0, -1, &e),
                   TPX_INVALID_ARGUMENT);
  ck_assert_int_eq(tpx_registry_set_child_limits(reg, 0, NAN, &e),
                   TPX_INVALID_ARGUMENT);
  CHECK_OK(tpx_registry_set_child_limits(reg, 64ull << 20, 2, &e_));
  CHECK_OK(tpx_registry_set_child_limits(reg, 0, 0, &e_));
  tpx_registry_destroy(reg);
}
END_TEST

START_TEST(broken_get_plan_is_an_error) {
  const char *path = BROKEN(broken_cases[_i].file);
  tpx_registry *reg = registry(path, 1 + _i % 2, broken_cases[_i].timeout);
  tpx_model *m = model_from_json(BROKEN_CONFIG);
  tpx_plan *plan = (tpx_plan *)1;
  tpx_error e = {0};
  double t0 = now();
  ck_assert_int_eq(
      tpx_registry_get_plan(reg, 0, m, NULL, NULL, 0, 2, &plan, &e),
      TPX_PLUGIN);
  ck_assert_double_lt(now() - t0, 5.0);
  ck_assert_ptr_null(plan);
  ASSERT_CONTAINS(e.message, broken_cases[_i].what);
  ASSERT_CONTAINS(e.message, path);
  ASSERT_CONTAINS(e.message, "plugin '");
  /* The host is still here and can ask again. */
  tpx_error e2 = {0};
  ck_assert_int_eq(
      tpx_registry_get_plan(reg, 0, m, NULL, NULL, 0, 2, &plan, &e2),
      TPX_PLUGIN);
  ck_assert_str_eq(e.message, e2.message);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

START_TEST(broken_get_plan_falls_back) {
  const char *path = BROKEN(broken_cases[_i].file);
  tpx_registry *reg = registry(path, 1 + _i % 2, broken_cases[_i].timeout);
  tpx_model *m = model_from_json(BROKEN_CONFIG);
  tpx_diag_list *diags = NULL;
  CHECK_OK(tpx_diag_list_create(&diags, &e_));
  tpx_select_options o = TPX_SELECT_OPTIONS_INIT;
  o.tp_size = 2;
  tpx_selection *sel = NULL;
  CHECK_OK(tpx_select_plan(reg, m, &o, &sel, diags, &e_));
  /* the HF plan as transformers 5 builds it does not translate for
   * Automodel 0.7.0 (lm_head colwise_gather_output): the default plan */
  ck_assert_int_eq(tpx_selection_source(sel), TPX_PLAN_SOURCE_DEFAULT);
  ck_assert_str_eq(tpx_selection_function(sel), "default_base_plan");
  int found = 0;
  for (size_t i = 0; i < tpx_diag_count(diags); i++) {
    tpx_diag d;
    CHECK_OK(tpx_diag_get(diags, i, &d, &e_));
    /* An error (issue 28 C15): the plan shown is not the family's. */
    if (strcmp(d.code, "plugin-failed") == 0 && d.level == TPX_DIAG_ERROR &&
        strcmp(d.subject, path) == 0 &&
        strstr(d.message, broken_cases[_i].what) &&
        strstr(d.message, "fell back to the default plan (default_base_plan)"))
      found = 1;
  }
  ck_assert_msg(found, "no plugin-failed diagnostic naming '%s'",
                broken_cases[_i].what);
  tpx_selection_destroy(sel);
  tpx_diag_list_destroy(diags);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* Everything observable about one selection, as text. */
static char *describe(tpx_registry *reg, const char *config, int64_t tp, int sp,
                      const char *plan_name, char **plan_json) {
  tpx_model *m = model_from_json(config);
  /* The skeleton's outcome, refusal message included, is compared too. */
  tpx_error serr = {0};
  tpx_status ss = tpx_registry_build_skeleton(reg, m, &serr);
  tpx_diag_list *diags = NULL;
  CHECK_OK(tpx_diag_list_create(&diags, &e_));
  tpx_select_options o = TPX_SELECT_OPTIONS_INIT;
  o.tp_size = tp;
  o.sequence_parallel = sp;
  o.plan_name = plan_name;
  tpx_selection *sel = NULL;
  CHECK_OK(tpx_select_plan(reg, m, &o, &sel, diags, &e_));
  CHECK_OK(tpx_plan_to_json(tpx_selection_plan(sel), 0, plan_json, &e_));
  size_t cap = 65536, len = 0;
  char *out = malloc(cap);
  ck_assert_ptr_nonnull(out);
  int64_t tied = 0;
  for (size_t i = 0; i < tpx_model_num_params(m); i++) {
    tpx_param_info pi;
    CHECK_OK(tpx_model_param(m, (int64_t)i, &pi, &e_));
    tied += pi.tied_to >= 0;
  }
  len += (size_t)snprintf(out + len, cap - len, "skeleton %s %s\n",
                          tpx_status_name(ss), serr.message);
  len += (size_t)snprintf(out + len, cap - len,
                          "modules=%zu params=%zu tied=%lld source=%s fn=%s\n",
                          tpx_model_num_modules(m), tpx_model_num_params(m),
                          (long long)tied,
                          tpx_plan_source_name(tpx_selection_source(sel)),
                          tpx_selection_function(sel));
  for (size_t i = 0; i < tpx_diag_count(diags); i++) {
    tpx_diag d;
    CHECK_OK(tpx_diag_get(diags, i, &d, &e_));
    len += (size_t)snprintf(out + len, cap - len, "diag %d %s %s %s %s\n",
                            (int)d.level, d.code, d.subject, d.fix, d.message);
  }
  for (size_t i = 0; i < tpx_selection_num_fp32(sel); i++)
    len += (size_t)snprintf(out + len, cap - len, "fp32 %s\n",
                            tpx_selection_fp32(sel, i));
  for (size_t i = 0; i < tpx_selection_num_fsdp_units(sel); i++) {
    int r = 9;
    const char *u = tpx_selection_fsdp_unit(sel, i, &r);
    len += (size_t)snprintf(out + len, cap - len, "unit %s %d\n", u, r);
  }
  ck_assert_uint_lt(len, cap - 1);
  tpx_selection_destroy(sel);
  tpx_diag_list_destroy(diags);
  tpx_model_destroy(m);
  return out;
}

static const struct {
  const char *config;
  int64_t tp;
  int sp;
  const char *plan_name;
  const char *expect; /* in the description */
} good_cases[] = {
    {TEST_CONFIG(""), 2, 0, NULL, "source=plugin fn=tpxtest_plan"},
    {TEST_CONFIG(""), 2, 1, NULL, "source=plugin"},
    {TEST_CONFIG(""), 1, 0, "tpxtest_named_plan", "fn=tpxtest_named_plan"},
    /* The plugin refuses (6 heads, tp=4): the refusal survives the trip. */
    {"{\"architectures\": [\"TestForCausalLM\"], \"model_type\": \"llama\", "
     "\"num_attention_heads\": 6, \"num_key_value_heads\": 6}",
     4, 0, NULL, "plugin-refused"},
    /* ... and so does the skeleton's refusal (no hidden_size etc.). */
    {"{\"architectures\": [\"TestForCausalLM\"], \"model_type\": \"llama\", "
     "\"num_attention_heads\": 6, \"num_key_value_heads\": 6}",
     1, 0, NULL, "skeleton TPX_PLUGIN plugin 'tpxtest'"},
};

START_TEST(good_plugin_same_with_isolation) {
  const char *path = GOOD("libtpxtest_good.so");
  tpx_registry *in = registry(path, 0, 0);
  tpx_registry *iso = registry(path, 1 + _i % 2, 30);
  char *json_in = NULL, *json_iso = NULL;
  char *d_in = describe(in, good_cases[_i].config, good_cases[_i].tp,
                        good_cases[_i].sp, good_cases[_i].plan_name, &json_in);
  char *d_iso =
      describe(iso, good_cases[_i].config, good_cases[_i].tp, good_cases[_i].sp,
               good_cases[_i].plan_name, &json_iso);
  ck_assert_str_eq(json_in, json_iso);
  ck_assert_str_eq(d_in, d_iso);
  ASSERT_CONTAINS(d_iso, good_cases[_i].expect);
  free(json_in);
  free(json_iso);
  free(d_in);
  free(d_iso);
  tpx_registry_destroy(in);
  tpx_registry_destroy(iso);
}
END_TEST

START_TEST(good_get_plan_and_skeleton_direct) {
  const char *path = GOOD("libtpxtest_good.so");
  tpx_registry *reg[2] = {registry(path, 0, 0), registry(path, 2, 30)};
  char *json[2] = {NULL, NULL};
  size_t mods[2], params[2];
  for (int k = 0; k < 2; k++) {
    tpx_model *m = model_from_json(TEST_CONFIG(""));
    CHECK_OK(tpx_registry_build_skeleton(reg[k], m, &e_));
    mods[k] = tpx_model_num_modules(m);
    params[k] = tpx_model_num_params(m);
    tpx_plan *plan = NULL;
    CHECK_OK(tpx_registry_get_plan(reg[k], 0, m, NULL, NULL, 1, 2, &plan, &e_));
    CHECK_OK(tpx_plan_to_json(plan, 2, &json[k], &e_));
    tpx_plan_destroy(plan);
    tpx_model_destroy(m);
  }
  ck_assert_uint_gt(params[0], 0);
  ck_assert_uint_eq(mods[0], mods[1]);
  ck_assert_uint_eq(params[0], params[1]);
  ck_assert_str_eq(json[0], json[1]);
  for (int k = 0; k < 2; k++) {
    free(json[k]);
    tpx_registry_destroy(reg[k]);
  }
}
END_TEST

START_TEST(set_isolation_arguments) {
  tpx_error e = {0};
  ck_assert_int_eq(tpx_registry_set_isolation(NULL, 1, 1, &e),
                   TPX_INVALID_ARGUMENT);
  ASSERT_CONTAINS(e.message, "registry is NULL");
  tpx_registry *reg = NULL;
  CHECK_OK(tpx_registry_create(&reg, &e_));
  const double bad[] = {0, -1, NAN, 1e9};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    tpx_error_clear(&e);
    ck_assert_int_eq(tpx_registry_set_isolation(reg, 1, bad[i], &e),
                     TPX_INVALID_ARGUMENT);
    ASSERT_CONTAINS(e.message, "timeout_seconds");
  }
  /* Off ignores the timeout; on and off again is fine. */
  CHECK_OK(tpx_registry_set_isolation(reg, 0, 0, &e_));
  CHECK_OK(tpx_registry_set_isolation(reg, 1, 0.25, &e_));
  CHECK_OK(tpx_registry_set_isolation(reg, 0, -1, &e_));
  /* Isolation off again: the good plugin answers in-process as before. */
  CHECK_OK(tpx_registry_load_file(reg, GOOD("libtpxtest_good.so"), &e_));
  tpx_model *m = model_from_json(TEST_CONFIG(""));
  tpx_plan *plan = NULL;
  CHECK_OK(tpx_registry_get_plan(reg, 0, m, NULL, NULL, 0, 2, &plan, &e_));
  ck_assert_uint_gt(tpx_plan_size(plan), 0);
  tpx_plan_destroy(plan);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

int main(void) {
  Suite *s = suite_create("plugin-isolate");
  TCase *tc = tcase_create("isolate");
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, broken_get_plan_is_an_error, 0, 3);
  tcase_add_loop_test(tc, broken_get_plan_falls_back, 0, 3);
  tcase_add_test(tc, grandchild_holding_the_pipe);
  tcase_add_test(tc, child_memory_limit);
  tcase_add_test(tc, child_limits_arguments);
  tcase_add_test(tc, null_write_not_blamed_on_memory);
  tcase_add_test(tc, crash_at_the_limit_blamed_on_memory);
  tcase_add_loop_test(tc, good_plugin_same_with_isolation, 0,
                      (int)(sizeof good_cases / sizeof good_cases[0]));
  tcase_add_test(tc, good_get_plan_and_skeleton_direct);
  tcase_add_test(tc, set_isolation_arguments);
  suite_add_tcase(s, tc);
  return run_suite(s);
}
