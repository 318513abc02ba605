/* test_act_measured.c — `tpx plan`'s activation figure against what torch
 * keeps: tests/fixtures/activations/measured.json holds the bytes
 * transformers' modules save for backward (saved_tensors_hooks, each
 * storage once, parameters left out; measure.py) for tiny models of each
 * family, attention implementation and dtype. For every case this runs
 * `tpx plan --no-fsdp --dtype DT --attention A --batch B --seq S` on the
 * same config and holds its activations against the measurement.
 *
 * The families tpx-train runs (Llama, Qwen2, Qwen3) and Mistral must be
 * exact; every family within 10%, except Gemma3 below f32, whose norms
 * scale in f32 (the formula counts their output in the activation dtype:
 * docs/MEMORY.md says so) — held within 15% and below the measurement, so
 * the gap is pinned where it is.
 *
 * argv[1]: the tpx CLI, argv[2]: the source root. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *tpx_cli, *src_root;

static long long plan_activations(const char *family, const char *attn,
                                  const char *dtype, long long batch,
                                  long long seq) {
  char cmd[4096], how[1024];
  /* no plugin builds a Mistral skeleton: its tree comes from the headers
   * of zero-filled weights in the case's dtype */
  if (!strcmp(family, "mistral"))
    snprintf(how, sizeof how,
             "--weights '%s/tests/fixtures/activations/%s-%s.safetensors'",
             src_root, family, dtype);
  else
    snprintf(how, sizeof how, "--dtype %s", dtype);
  snprintf(cmd, sizeof cmd,
           "'%s' plan --config '%s/tests/fixtures/activations/%s.config.json'"
           " %s --no-fsdp --attention %s --batch %lld --seq %lld"
           " --format json 2>/dev/null",
           tpx_cli, src_root, family, how, attn, batch, seq);
  FILE *p = popen(cmd, "r");
  ck_assert_ptr_nonnull(p);
  json_error_t je;
  json_t *root = json_loadf(p, 0, &je);
  int rc = pclose(p);
  ck_assert_msg(root != NULL, "%s: no JSON (%s), exit %d", cmd, je.text, rc);
  json_t *m = json_object_get(
      json_object_get(json_array_get(json_object_get(root, "per_rank"), 0),
                      "memory"),
      "activations");
  ck_assert_msg(json_is_integer(m), "%s: no per_rank[0].memory.activations",
                cmd);
  long long v = (long long)json_integer_value(m);
  json_decref(root);
  return v;
}

static int exact_family(const char *f) {
  return !strcmp(f, "llama") || !strcmp(f, "qwen2") || !strcmp(f, "qwen3") ||
         !strcmp(f, "mistral");
}

START_TEST(measured_cases) {
  char path[4096];
  snprintf(path, sizeof path, "%s/tests/fixtures/activations/measured.json",
           src_root);
  json_error_t je;
  json_t *root = json_load_file(path, 0, &je);
  ck_assert_msg(root != NULL, "%s: %s", path, je.text);
  long long batch =
      (long long)json_integer_value(json_object_get(root, "batch"));
  json_t *cases = json_object_get(root, "cases");
  ck_assert_int_ge(json_array_size(cases), 48); /* 6 families x 2 x 2 x 2 */
  size_t i;
  json_t *c;
  json_array_foreach(cases, i, c) {
    const char *f = json_string_value(json_object_get(c, "family"));
    const char *a = json_string_value(json_object_get(c, "attention"));
    const char *d = json_string_value(json_object_get(c, "dtype"));
    long long seq = (long long)json_integer_value(json_object_get(c, "seq"));
    long long want = (long long)json_integer_value(json_object_get(c, "bytes"));
    ck_assert(f && a && d && seq > 0 && want > 0);
    long long got = plan_activations(f, a, d, batch, seq);
    double ratio = (double)got / (double)want;
    printf("%-8s %-5s %-4s seq %3lld: torch %8lld  tpx plan %8lld  %.3f\n", f,
           a, d, seq, want, got, ratio);
    if (exact_family(f))
      ck_assert_msg(got == want, "%s %s %s seq %lld: plan %lld, torch %lld", f,
                    a, d, seq, got, want);
    else if (!strcmp(f, "gemma3") && strcmp(d, "f32") != 0)
      ck_assert_msg(ratio > 0.85 && ratio <= 1.0,
                    "%s %s %s seq %lld: plan %lld, torch %lld (%.3f)", f, a, d,
                    seq, got, want, ratio);
    else
      ck_assert_msg(ratio > 0.9 && ratio < 1.1,
                    "%s %s %s seq %lld: plan %lld, torch %lld (%.3f)", f, a, d,
                    seq, got, want, ratio);
  }
  json_decref(root);
}
END_TEST

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: test_act_measured TPX_CLI SOURCE_ROOT\n");
    return 2;
  }
  tpx_cli = argv[1];
  src_root = argv[2];
  Suite *s = suite_create("act-measured");
  TCase *tc = tcase_create("act-measured");
  tcase_set_timeout(tc, 240);
  tcase_add_test(tc, measured_cases);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
