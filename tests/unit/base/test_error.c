/* test_error.c — status names/strings and the first-error-wins struct. */
#include <stdio.h>

#include "base_test.h"
#include "tpx/error.h"

START_TEST(test_names_and_strings) {
  static const struct {
    tpx_status st;
    const char *name, *str;
  } cases[] = {
      {TPX_OK, "TPX_OK", "success"},
      {TPX_INVALID_ARGUMENT, "TPX_INVALID_ARGUMENT", "invalid argument"},
      {TPX_OUT_OF_RANGE, "TPX_OUT_OF_RANGE", "value out of range"},
      {TPX_NOT_FOUND, "TPX_NOT_FOUND", "not found"},
      {TPX_PARSE, "TPX_PARSE", "parse error"},
      {TPX_ABI_MISMATCH, "TPX_ABI_MISMATCH", "plugin ABI version mismatch"},
      {TPX_INTERNAL, "TPX_INTERNAL", "internal error"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ck_assert_str_eq(tpx_status_name(cases[i].st), cases[i].name);
    ck_assert_str_eq(tpx_status_str(cases[i].st), cases[i].str);
  }
  /* Every status in the enum has a distinct, non-placeholder name. */
  for (int s = 0; s < TPX_STATUS_COUNT; s++) {
    ck_assert_str_ne(tpx_status_name((tpx_status)s), "TPX_UNKNOWN");
    ck_assert_str_ne(tpx_status_str((tpx_status)s), "unknown status");
    for (int t = 0; t < s; t++)
      ck_assert_str_ne(tpx_status_name((tpx_status)s),
                       tpx_status_name((tpx_status)t));
  }
  ck_assert_str_eq(tpx_status_name(TPX_STATUS_COUNT), "TPX_UNKNOWN");
  ck_assert_str_eq(tpx_status_name((tpx_status)-1), "TPX_UNKNOWN");
  ck_assert_str_eq(tpx_status_str((tpx_status)12345), "unknown status");
}
END_TEST

START_TEST(test_set_and_first_wins) {
  tpx_error err;
  memset(&err, 0x5a, sizeof err);
  tpx_error_clear(&err);
  ck_assert_int_eq(err.status, TPX_OK);
  ck_assert_str_eq(err.message, "");
  ck_assert_int_eq(
      tpx_error_set(&err, TPX_NOT_FOUND, "no key \"%s\" (%d)", "tp_plan", 7),
      TPX_NOT_FOUND);
  ck_assert_int_eq(err.status, TPX_NOT_FOUND);
  ck_assert_str_eq(err.message, "no key \"tp_plan\" (7)");
  /* A second error returns its own status but keeps the first message. */
  ck_assert_int_eq(tpx_error_set(&err, TPX_IO, "later"), TPX_IO);
  ck_assert_int_eq(err.status, TPX_NOT_FOUND);
  ck_assert_str_eq(err.message, "no key \"tp_plan\" (7)");
  /* Clearing allows a new first error. */
  tpx_error_clear(&err);
  ck_assert_int_eq(tpx_error_set(&err, TPX_IO, "disk"), TPX_IO);
  ck_assert_str_eq(err.message, "disk");
}
END_TEST

START_TEST(test_null_and_ok) {
  /* NULL err is allowed everywhere. */
  ck_assert_int_eq(tpx_error_set(NULL, TPX_PARSE, "x %d", 1), TPX_PARSE);
  tpx_error_clear(NULL);
  /* Setting TPX_OK records nothing. */
  tpx_error err = {0};
  ck_assert_int_eq(tpx_error_set(&err, TPX_OK, "fine"), TPX_OK);
  ck_assert_int_eq(err.status, TPX_OK);
  ck_assert_str_eq(err.message, "");
}
END_TEST

START_TEST(test_truncation) {
  /* Overlong messages are truncated and stay NUL-terminated. */
  char big[2 * TPX_ERROR_MESSAGE_SIZE];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  tpx_error err = {0};
  tpx_error_set(&err, TPX_VALIDATION, "%s", big);
  ck_assert_uint_eq(strlen(err.message), TPX_ERROR_MESSAGE_SIZE - 1);
}
END_TEST

static Suite *error_suite(void) {
  Suite *s = suite_create("error");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, test_names_and_strings);
  tcase_add_test(tc, test_set_and_first_wins);
  tcase_add_test(tc, test_null_and_ok);
  tcase_add_test(tc, test_truncation);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(error_suite()); }
