/* test_harness.c — the conformance harness: the suite's good plugin passes
 * every check; each broken fixture fails exactly the check it breaks, with
 * a precise detail; crashes and hangs in the plugin are reported while the
 * harness returns normally; --config models catch unmatched keys, tied
 * weights laid out twice and non-determinism; at a tp the heads do not
 * divide, a plan or a refusal with a message passes (the host's
 * validate_tp_mesh reports heads-not-divisible) and a refusal without one
 * fails; the text and JSON reports. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plugin_test.h"
#include "tpx/harness.h"

static tpx_harness_result *run(const char *path, const char *const *configs,
                               size_t n, double timeout) {
  tpx_harness_options o = TPX_HARNESS_OPTIONS_INIT;
  o.timeout_sec = timeout;
  o.configs = configs;
  o.num_configs = n;
  tpx_harness_result *r = NULL;
  CHECK_OK(tpx_harness_run(path, &o, &r, &e_));
  ck_assert_ptr_nonnull(r);
  ck_assert_uint_eq(tpx_harness_num_passed(r) + tpx_harness_num_failed(r),
                    tpx_harness_num_checks(r));
  return r;
}

/* The first check whose name starts with `prefix`. */
static int find(const tpx_harness_result *r, const char *prefix,
                tpx_harness_check *out) {
  for (size_t i = 0; i < tpx_harness_num_checks(r); i++) {
    tpx_harness_check c;
    CHECK_OK(tpx_harness_check_get(r, i, &c, &e_));
    if (strncmp(c.name, prefix, strlen(prefix)) == 0) {
      *out = c;
      return 1;
    }
  }
  return 0;
}

/* Some failing check whose name starts with prefix and whose detail holds
 * needle. */
static int failed_with(const tpx_harness_result *r, const char *prefix,
                       const char *needle) {
  for (size_t i = 0; i < tpx_harness_num_checks(r); i++) {
    tpx_harness_check c;
    CHECK_OK(tpx_harness_check_get(r, i, &c, &e_));
    if (!c.passed && strncmp(c.name, prefix, strlen(prefix)) == 0 &&
        strstr(c.detail, needle))
      return 1;
  }
  return 0;
}

START_TEST(good_plugin_passes) {
  tpx_harness_result *r = run(GOOD("libtpxtest_good.so"), NULL, 0, 20);
  char *text = NULL;
  CHECK_OK(tpx_harness_to_text(r, &text, &e_));
  ck_assert_msg(tpx_harness_num_failed(r) == 0, "%s", text);
  /* exports, load, registration, 2 x negotiation, then per architecture:
   * skeleton, 8 plans, concurrent, capabilities. */
  ck_assert_uint_eq(tpx_harness_num_checks(r), 5 + 3 * 11);
  tpx_harness_check c;
  ck_assert(find(r, "exports", &c));
  ASSERT_CONTAINS(c.detail, "tpx_plugin_get_skeleton");
  ASSERT_CONTAINS(c.detail, "other exports: none");
  ck_assert(find(r, "plan TestForCausalLM [synthetic config] sp=1 tp=8", &c));
  ASSERT_CONTAINS(c.detail, "every required key matches");
  ASSERT_CONTAINS(c.detail, "deterministic");
  ck_assert(find(r, "concurrent TestForCausalLM", &c));
  ASSERT_CONTAINS(c.detail, "identical plans");
  ck_assert(find(r, "capabilities TestForCausalLM", &c));
  ASSERT_CONTAINS(c.detail, "fsdp units: 2");
  ASSERT_CONTAINS(text, "PASS exports: ");
  ASSERT_CONTAINS(text, "38 passed, 0 failed\n");
  free(text);
  tpx_harness_result_destroy(r);
}
END_TEST

/* Fixture -> the failing check and words of its detail. */
static const struct {
  const char *file;
  const char *check;
  const char *detail;
  size_t failed;
} broken[] = {
    {"no_symbols.so", "exports",
     "missing required symbol(s): register_parallel_strategy get_plan", 2},
    {"missing_get_plan.so", "load", "missing required symbol 'get_plan'", 2},
    {"abi_too_new.so", "negotiation",
     "the host speaks 1.0..1.0, the plugin speaks 2.0", 1},
    {"abi_too_old.so", "negotiation (host too old)",
     "accepted a host speaking only 0.0..0.65535 and answered ABI 0.9", 2},
    {"register_fails.so", "load", "the frobnicator table is missing", 1},
    {"register_crashes.so", "load",
     "crashed with SIGSEGV (signal 11) during: dlopen and "
     "register_parallel_strategy",
     1},
    {"get_plan_crashes.so", "checks for BrokenForCausalLM",
     "crashed with SIGSEGV (signal 11) during: get_plan for "
     "BrokenForCausalLM [synthetic config] sp=0 tp=1",
     1},
    {"get_plan_hangs.so", "checks for BrokenForCausalLM",
     "timed out after 1.0 s (killed) during: get_plan for BrokenForCausalLM",
     1},
    {"unknown_style.so", "plan BrokenForCausalLM [synthetic config] sp=0 tp=1",
     "unknown style 'diagonalwise'", 8},
    {"malformed_key.so", "plan BrokenForCausalLM [synthetic config] sp=1 tp=8",
     "'model..layers.*.mlp.up_proj': empty atom", 8},
    {"null_name.so", "registration", "registration: name is NULL", 1},
    {"no_architectures.so", "registration",
     "registration: architectures is empty", 1},
    {"not_elf.so", "exports", "not an ELF file", 2},
    {"register_exits.so", "load",
     "exited with status 0 (exit() called inside the plugin?) during: "
     "dlopen and register_parallel_strategy",
     1},
    {"ctor_crashes.so", "load",
     "crashed with SIGSEGV (signal 11) during: dlopen and "
     "register_parallel_strategy",
     1},
    /* blamed on the unload alone, not on the checks that passed */
    {"dtor_crashes.so", "unload",
     "crashed with SIGSEGV (signal 11) during: unloading the plugin "
     "(dlclose: its ELF destructors)",
     1},
    {"stdout_noise.so", "stdout",
     "wrote 63 byte(s) to stdout during loading and unloading", 2},
    {"grandchild.so", "processes", "outlived the checks and held their pipe",
     1},
    {"pipe_garbage.so", "pipes", "not written by the harness", 1},
};

START_TEST(broken_plugin_fails_precisely) {
  tpx_harness_result *r = run(BROKEN(broken[_i].file), NULL, 0, 1.0);
  char *text = NULL;
  CHECK_OK(tpx_harness_to_text(r, &text, &e_));
  ck_assert_msg(failed_with(r, broken[_i].check, broken[_i].detail),
                "%s: no failing '%s' check with \"%s\" in:\n%s",
                broken[_i].file, broken[_i].check, broken[_i].detail, text);
  ck_assert_msg(tpx_harness_num_failed(r) == broken[_i].failed,
                "%s: %zu failures, expected %zu:\n%s", broken[_i].file,
                tpx_harness_num_failed(r), broken[_i].failed, text);
  free(text);
  tpx_harness_result_destroy(r);
}
END_TEST

START_TEST(extra_symbols_listed) {
  tpx_harness_result *r = run(BROKEN("extra_symbols.so"), NULL, 0, 5);
  ck_assert_uint_eq(tpx_harness_num_failed(r), 0);
  tpx_harness_check c;
  ck_assert(find(r, "exports", &c));
  ck_assert_int_eq(c.passed, 1);
  ASSERT_CONTAINS(
      c.detail, "other exports: tpxtest_global_table, tpxtest_helper_function");
  ASSERT_CONTAINS(c.detail, "-fvisibility=hidden");
  tpx_harness_result_destroy(r);
}
END_TEST

START_TEST(config_models) {
  const char *cfg[2] = {DATA("tpxtest-tied.json"), DATA("Llama-3.2-1B.json")};
  tpx_harness_result *r = run(GOOD("libtpxtest_good.so"), cfg, 2, 20);
  char *text = NULL;
  CHECK_OK(tpx_harness_to_text(r, &text, &e_));
  tpx_harness_check c;
  ck_assert_msg(find(r, "plan TestForCausalLM [", &c), "%s", text);
  ck_assert_msg(c.passed, "%s", text);
  ASSERT_CONTAINS(c.detail, "1 tied parameter(s) agree");
  ck_assert(find(r, "skeleton TestForCausalLM [", &c));
  ASSERT_CONTAINS(c.detail, "1 tied");
  /* A config the plugin does not serve is a failure. */
  ck_assert(failed_with(r, "config ",
                        "'LlamaForCausalLM' of the config is "
                        "not served by the plugin"));
  ck_assert_uint_eq(tpx_harness_num_failed(r), 1);
  free(text);
  tpx_harness_result_destroy(r);
}
END_TEST

START_TEST(misbehaving_plans_caught) {
  const char *cfg[1] = {DATA("tpxtest-misbehaving.json")};
  tpx_harness_result *r = run(GOOD("libtpxtest_good.so"), cfg, 1, 20);
  char *text = NULL;
  CHECK_OK(tpx_harness_to_text(r, &text, &e_));
  ck_assert_msg(failed_with(r, "plan TestForCausalLM",
                            "tied parameters "
                            "'lm_head.weight' (shard(0) on tp"),
                "%s", text);
  ck_assert_msg(failed_with(r, "plan TestForCausalLM",
                            "and 'model.embed_tokens.weight' (shard(1) on tp"),
                "%s", text);
  ck_assert_msg(failed_with(r, "plan TestForCausalLM",
                            "required key 'model.layers.*.mlp.gate_proj' "
                            "matches no module"),
                "%s", text);
  ck_assert_msg(failed_with(r, "plan TestForCausalLM", "not deterministic"),
                "%s", text);
  ck_assert_msg(
      failed_with(r, "concurrent TestForCausalLM", "different plan(s)"), "%s",
      text);
  /* Indivisible heads are the host's diagnostic, never the harness's. */
  ck_assert_msg(!failed_with(r, "plan TestForCausalLM", "heads"), "%s", text);
  free(text);
  tpx_harness_result_destroy(r);
}
END_TEST

/* 6 heads: tp=4 and tp=8 do not divide them; tp=1 and tp=2 do. Config ->
 * what the plugin does at tp=4/8, whether every check passes, and words of
 * the tp=4/8 plan checks' detail. */
static const struct {
  const char *config;
  const char *behaviour;
  int all_pass;
  const char *detail;
} indivisible[] = {
    /* Upstream's plan functions never look at tp: the plan is handed out,
     * and the host's validation catches the heads. */
    {"tpxtest-indivisible.json", "returns its plan", 1,
     "heads not divisible by tp=%d: the host's validate_tp_mesh reports "
     "heads-not-divisible (error); plan not used"},
    /* A clean refusal (with a message) is fine too. */
    {"tpxtest-indivisible-refused.json", "refuses with a message", 1,
     "refused get_plan: num_attention_heads (6) / num_key_value_heads (6) "
     "are not divisible by tp=%d, deterministic; heads not divisible by "
     "tp=%d: the host's validate_tp_mesh reports heads-not-divisible (error)"},
    /* A refusal must say why. */
    {"tpxtest-silent-refusal.json", "refuses without a message", 0,
     "refused without a message (call host->set_error)"},
};

START_TEST(indivisible_heads) {
  const char *cfg[1] = {DATA(indivisible[_i].config)};
  tpx_harness_result *r = run(GOOD("libtpxtest_good.so"), cfg, 1, 20);
  char *text = NULL;
  CHECK_OK(tpx_harness_to_text(r, &text, &e_));
  const char *label = "plan TestForCausalLM [";
  size_t plans = 0, failed = 0;
  for (size_t i = 0; i < tpx_harness_num_checks(r); i++) {
    tpx_harness_check c;
    CHECK_OK(tpx_harness_check_get(r, i, &c, &e_));
    if (!c.passed)
      failed++;
    if (strncmp(c.name, label, strlen(label)) != 0 ||
        !strstr(c.name, indivisible[_i].config))
      continue;
    plans++;
    const char *t = strstr(c.name, " tp=");
    ck_assert_ptr_nonnull(t);
    int tp = atoi(t + 4);
    char want[256];
    /* Extra arguments to snprintf are ignored: one or two %d. */
    snprintf(want, sizeof want, indivisible[_i].detail, tp, tp);
    if (tp == 4 || tp == 8) {
      ck_assert_msg(c.passed == indivisible[_i].all_pass, "%s (plugin %s): %s",
                    c.name, indivisible[_i].behaviour, c.detail);
      ck_assert_msg(strstr(c.detail, want) != NULL, "%s: want \"%s\" in %s",
                    c.name, want, c.detail);
    } else {
      /* tp=1 and 2 divide 6: a plan, and no note about heads. */
      ck_assert_msg(c.passed, "%s: %s", c.name, c.detail);
      ASSERT_CONTAINS(c.detail, "entries");
      ck_assert_msg(!strstr(c.detail, "heads"), "%s: %s", c.name, c.detail);
    }
  }
  ck_assert_uint_eq(plans, 8);
  /* sp off/on x tp 4, 8 for the silent refusal; nothing else fails. */
  ck_assert_msg(failed == (indivisible[_i].all_pass ? 0 : 4), "%s", text);
  ck_assert_uint_eq(tpx_harness_num_failed(r), failed);
  free(text);
  tpx_harness_result_destroy(r);
}
END_TEST

START_TEST(json_report) {
  tpx_harness_result *r = run(BROKEN("missing_get_plan.so"), NULL, 0, 5);
  char *s = NULL;
  CHECK_OK(tpx_harness_to_json(r, 2, &s, &e_));
  json_error_t je;
  json_t *root = json_loads(s, 0, &je);
  ck_assert_ptr_nonnull(root);
  ASSERT_CONTAINS(json_string_value(json_object_get(root, "plugin")),
                  "missing_get_plan.so");
  ck_assert_int_eq(json_integer_value(json_object_get(root, "failed")), 2);
  ck_assert_int_eq(json_integer_value(json_object_get(root, "passed")), 0);
  json_t *checks = json_object_get(root, "checks");
  ck_assert_uint_eq(json_array_size(checks), 2);
  json_t *c0 = json_array_get(checks, 0);
  ck_assert_str_eq(json_string_value(json_object_get(c0, "name")), "exports");
  ck_assert(json_is_false(json_object_get(c0, "passed")));
  json_decref(root);
  free(s);
  tpx_harness_result_destroy(r);
}
END_TEST

START_TEST(bad_arguments) {
  tpx_harness_result *r = NULL;
  tpx_error e = {0};
  ck_assert_int_eq(tpx_harness_run(NULL, NULL, &r, &e), TPX_INVALID_ARGUMENT);
  tpx_harness_options o = TPX_HARNESS_OPTIONS_INIT;
  o.num_configs = 1;
  ck_assert_int_eq(tpx_harness_run("x.so", &o, &r, NULL), TPX_INVALID_ARGUMENT);
  ck_assert_ptr_null(r);
  tpx_harness_check c;
  ck_assert_int_eq(tpx_harness_check_get(NULL, 0, &c, NULL),
                   TPX_INVALID_ARGUMENT);
  ck_assert_uint_eq(tpx_harness_num_checks(NULL), 0);
  tpx_harness_result_destroy(NULL);
  /* A file that does not exist: two failed checks, no error. */
  r = run("/nonexistent/plugin.so", NULL, 0, 5);
  ck_assert_uint_eq(tpx_harness_num_failed(r), 2);
  ck_assert_int_eq(tpx_harness_check_get(r, 5, &c, &e), TPX_OUT_OF_RANGE);
  tpx_harness_result_destroy(r);
  /* A FIFO: failed checks naming it at once, nothing waits on a writer. */
  char dir[] = "/tmp/tpx-harness-fifo-XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  char fifo[64];
  snprintf(fifo, sizeof fifo, "%s/p.so", dir);
  ck_assert_int_eq(mkfifo(fifo, 0600), 0);
  r = run(fifo, NULL, 0, 5);
  ck_assert_uint_eq(tpx_harness_num_passed(r), 0);
  ck_assert(find(r, "exports", &c));
  ck_assert_msg(strstr(c.detail, "not a regular file (a FIFO)"), "%s",
                c.detail);
  tpx_harness_result_destroy(r);
  unlink(fifo);
  rmdir(dir);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("plugin-harness");
  TCase *tc = tcase_create("harness");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, good_plugin_passes);
  tcase_add_loop_test(tc, broken_plugin_fails_precisely, 0,
                      sizeof broken / sizeof broken[0]);
  tcase_add_test(tc, extra_symbols_listed);
  tcase_add_test(tc, config_models);
  tcase_add_test(tc, misbehaving_plans_caught);
  tcase_add_loop_test(tc, indivisible_heads, 0,
                      sizeof indivisible / sizeof indivisible[0]);
  tcase_add_test(tc, json_report);
  tcase_add_test(tc, bad_arguments);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(suite()); }
