/* test_verdict.c — the verdict screen that opens the text report and
 * tpx_report_summary: OK / NOT OK with the error count, the plan source,
 * per-rank memory, errors listed with the uneven-shard warnings that follow
 * from a heads-not-divisible error folded under it (in the verdict and in
 * the Diagnostics section); warnings without such a cause stay top-level. */
#include "../shard/shard_fixture.h"
#include "tpx/report.h"

static char *text_of(const tpx_sharding *sh, const tpx_report_options *o,
                     int summary) {
  char *t = NULL;
  tpx_error e = {0};
  tpx_status s = summary ? tpx_report_summary(sh, o, &t, &e)
                         : tpx_report_text(sh, o, &t, &e);
  ck_assert_msg(s == TPX_OK, "%s", e.message);
  return t;
}

/* tp = 3 on the fixture (8 heads, dims 64 and 128): every sharded linear is
 * uneven, and tp 2, 4 or 8 would divide them all. */
START_TEST(heads_error_folds_uneven_shards) {
  tpx_model *m = fx_llama();
  tpx_plan *p = fx_llama_plan();
  tpx_mesh *mesh = fx_mesh(1, 1, 3);
  tpx_sharding *sh = fx_shard(m, p, mesh, NULL);
  tpx_diag_list *sel = NULL;
  ck_assert_int_eq(tpx_diag_list_create(&sel, NULL), TPX_OK);
  ck_assert_int_eq(tpx_diag_add(sel, TPX_DIAG_ERROR, "heads-not-divisible", "",
                                "use a tp size from: 1, 2, 4, 8",
                                "num_attention_heads (8) must be divisible by "
                                "TP size (3)"),
                   TPX_OK);
  tpx_report_options o = TPX_REPORT_OPTIONS_INIT;
  o.plan_source = "plugin";
  o.plugin_name = "llama";
  o.function = "llama";
  o.selection_diags = sel;
  size_t uneven = 0;
  const tpx_diag_list *ad = tpx_sharding_diagnostics(sh);
  for (size_t i = 0; i < tpx_diag_count(ad); i++) {
    tpx_diag d;
    tpx_diag_get(ad, i, &d, NULL);
    uneven += strcmp(d.code, "uneven-shard") == 0;
  }
  ck_assert_uint_gt(uneven, 0);

  char *s = text_of(sh, &o, 1);
  ck_assert_msg(strncmp(s, "Verdict: NOT OK (1 error)\n", 26) == 0, "%s", s);
  ck_assert_ptr_nonnull(
      strstr(s, "  plan      plugin 'llama' (function llama)"));
  ck_assert_ptr_nonnull(strstr(s, "  per rank  parameters "));
  ck_assert_ptr_nonnull(
      strstr(s, "error [heads-not-divisible] num_attention_heads (8)"));
  char want[96];
  snprintf(want, sizeof want, "(%zu uneven-shard warning%s follow", uneven,
           uneven == 1 ? "" : "s");
  ck_assert_msg(strstr(s, want) != NULL, "lacks '%s':\n%s", want, s);
  ck_assert_ptr_null(strstr(s, "Parameters ("));
  ck_assert_ptr_null(strstr(s, "warning [uneven-shard]"));

  char *t = text_of(sh, &o, 0);
  ck_assert_msg(strncmp(t, s, strlen(s)) == 0,
                "the report opens with the verdict");
  ck_assert_uint_eq(fx_occurrences(t, "\n  warning [uneven-shard]"), 0);
  ck_assert_uint_eq(fx_occurrences(t, "\n        warning [uneven-shard]"),
                    uneven);
  ck_assert_ptr_nonnull(strstr(t, "      following from it ("));
  ck_assert_ptr_nonnull(strstr(t, "Result: NOT OK (1 error)"));
  free(s);
  free(t);
  tpx_diag_list_destroy(sel);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

/* Without a head error the same warnings stand alone. */
START_TEST(warnings_without_cause_stay) {
  tpx_model *m = fx_llama();
  tpx_plan *p = fx_llama_plan();
  tpx_mesh *mesh = fx_mesh(1, 2, 3);
  tpx_sharding *sh = fx_shard(m, p, mesh, NULL);
  tpx_report_options o = TPX_REPORT_OPTIONS_INIT;
  char *s = text_of(sh, &o, 1);
  ck_assert_msg(strncmp(s, "Verdict: OK (with warnings)\n", 28) == 0, "%s", s);
  ck_assert_ptr_nonnull(strstr(s, "  plan      custom, "));
  ck_assert_ptr_nonnull(strstr(s, "under Diagnostics"));
  ck_assert_ptr_null(strstr(s, "follow"));
  char *t = text_of(sh, &o, 0);
  ck_assert_uint_gt(fx_occurrences(t, "\n  warning [uneven-shard]"), 0);
  ck_assert_ptr_null(strstr(t, "following from it"));
  free(s);
  free(t);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

START_TEST(summary_bad_arguments) {
  tpx_model *m = fx_llama();
  tpx_plan *p = fx_llama_plan();
  tpx_mesh *mesh = fx_mesh(1, 1, 2);
  tpx_sharding *sh = fx_shard(m, p, mesh, NULL);
  char *t = NULL;
  tpx_error e = {0};
  ck_assert_int_eq(tpx_report_summary(NULL, NULL, &t, &e),
                   TPX_INVALID_ARGUMENT);
  ck_assert_int_eq(tpx_report_summary(sh, NULL, NULL, NULL),
                   TPX_INVALID_ARGUMENT);
  tpx_report_options o = TPX_REPORT_OPTIONS_INIT;
  o.struct_size = 8;
  ck_assert_int_eq(tpx_report_summary(sh, &o, &t, NULL), TPX_INVALID_ARGUMENT);
  ck_assert_ptr_null(t);
  ck_assert_int_eq(tpx_report_summary(sh, NULL, &t, NULL), TPX_OK);
  ck_assert_msg(strncmp(t, "Verdict: OK\n", 12) == 0, "%s", t);
  free(t);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

static Suite *verdict_suite(void) {
  Suite *s = suite_create("report-verdict");
  TCase *tc = tcase_create("verdict");
  tcase_add_test(tc, heads_error_folds_uneven_shards);
  tcase_add_test(tc, warnings_without_cause_stay);
  tcase_add_test(tc, summary_bad_arguments);
  suite_add_tcase(s, tc);
  return s;
}

FX_MAIN(verdict_suite)
