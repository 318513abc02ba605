/* test_diag.c — tpx_diag_list: append, borrowed views, counts by level,
 * copies of every string, bounds (core/src/plan/diag.c). */
#include <check.h>

#include "plan_test.h"
#include "tpx/diag.h"

START_TEST(test_add_and_get) {
  tpx_diag_list *l = NULL;
  CHECK_OK(tpx_diag_list_create(&l, &e_));
  ck_assert_uint_eq(tpx_diag_count(l), 0);
  char key[32];
  strcpy(key, "model.x");
  ck_assert_int_eq(tpx_diag_add(l, TPX_DIAG_ERROR, "unmatched-key", key,
                                "mark it optional", "plan key '%s' matches %d",
                                key, 0),
                   TPX_OK);
  strcpy(key, "overwritten");
  ck_assert_int_eq(tpx_diag_add(l, TPX_DIAG_INFO, "hf-style-skipped", NULL,
                                NULL, "%s", "skipped"),
                   TPX_OK);
  ck_assert_int_eq(
      tpx_diag_add(l, TPX_DIAG_WARNING, "uneven-shard", "w", "", "uneven"),
      TPX_OK);
  ck_assert_uint_eq(tpx_diag_count(l), 3);
  tpx_diag d;
  CHECK_OK(tpx_diag_get(l, 0, &d, &e_));
  ck_assert_int_eq(d.level, TPX_DIAG_ERROR);
  ck_assert_str_eq(d.code, "unmatched-key");
  ck_assert_str_eq(d.subject, "model.x"); /* copied, not borrowed */
  ck_assert_str_eq(d.message, "plan key 'model.x' matches 0");
  ck_assert_str_eq(d.fix, "mark it optional");
  CHECK_OK(tpx_diag_get(l, 1, &d, &e_));
  ck_assert_str_eq(d.subject, "");
  ck_assert_str_eq(d.fix, "");
  ck_assert_str_eq(d.message, "skipped");
  CHECK_FAILS(tpx_diag_get(l, 3, &d, &e_), TPX_OUT_OF_RANGE, "3");
  ck_assert_uint_eq(tpx_diag_count_at_least(l, TPX_DIAG_INFO), 3);
  ck_assert_uint_eq(tpx_diag_count_at_least(l, TPX_DIAG_WARNING), 2);
  ck_assert_uint_eq(tpx_diag_count_at_least(l, TPX_DIAG_ERROR), 1);
  tpx_diag_list_destroy(l);
  tpx_diag_list_destroy(NULL);
}
END_TEST

START_TEST(test_many_and_names) {
  tpx_diag_list *l = NULL;
  CHECK_OK(tpx_diag_list_create(&l, &e_));
  for (int i = 0; i < 1000; i++)
    ck_assert_int_eq(tpx_diag_add(l, TPX_DIAG_WARNING, "c", "s", "f", "%d", i),
                     TPX_OK);
  tpx_diag d;
  CHECK_OK(tpx_diag_get(l, 999, &d, &e_));
  ck_assert_str_eq(d.message, "999");
  ck_assert_int_eq(tpx_diag_add(NULL, TPX_DIAG_INFO, "c", NULL, NULL, "x"),
                   TPX_INVALID_ARGUMENT);
  ck_assert_int_eq(tpx_diag_add(l, TPX_DIAG_INFO, NULL, NULL, NULL, "x"),
                   TPX_INVALID_ARGUMENT);
  ck_assert_uint_eq(tpx_diag_count(NULL), 0);
  ck_assert_uint_eq(tpx_diag_count_at_least(NULL, TPX_DIAG_INFO), 0);
  ck_assert_str_eq(tpx_diag_level_name(TPX_DIAG_INFO), "info");
  ck_assert_str_eq(tpx_diag_level_name(TPX_DIAG_WARNING), "warning");
  ck_assert_str_eq(tpx_diag_level_name(TPX_DIAG_ERROR), "error");
  ck_assert_str_eq(tpx_diag_level_name((tpx_diag_level)9), "unknown");
  CHECK_FAILS(tpx_diag_list_create(NULL, &e_), TPX_INVALID_ARGUMENT, "NULL");
  tpx_diag_list_destroy(l);
}
END_TEST

static Suite *diag_suite(void) {
  Suite *s = suite_create("diag");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_add_and_get);
  tcase_add_test(tc, test_many_and_names);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(diag_suite()); }
