/* check_util.h — the Check assertions and runner that the base, plan and
 * plugin suites share (header-only: macros and one static inline): a call
 * that must succeed, a call that must fail naming the thing at fault, and
 * running a suite into an exit status. The folder headers (base_test.h,
 * plan_test.h, plugin_test.h) include it and add their own helpers. */
#ifndef TPX_TESTS_CHECK_UTIL_H
#define TPX_TESTS_CHECK_UTIL_H

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "tpx/error.h"

/* Assert that `call` succeeded. `call` passes `&e_` as its error argument
 * (its message is printed on failure). */
#define CHECK_OK(call)                                                         \
  do {                                                                         \
    tpx_error e_ = {0};                                                        \
    tpx_status st_ = (call);                                                   \
    ck_assert_msg(st_ == TPX_OK, "%s: %s (%s)", #call, tpx_status_name(st_),   \
                  e_.message);                                                 \
  } while (0)

/* Assert that `call` failed with `want_st` and that err.message mentions
 * `needle` (the name of the thing at fault). `call` passes `&e_` as its
 * error argument. */
#define CHECK_FAILS(call, want_st, needle)                                     \
  do {                                                                         \
    tpx_error e_ = {0};                                                        \
    tpx_status st_ = (call);                                                   \
    ck_assert_msg(st_ == (want_st), "%s: expected %s, got %s (%s)", #call,     \
                  tpx_status_name(want_st), tpx_status_name(st_), e_.message); \
    ck_assert_int_eq(e_.status, (want_st));                                    \
    ck_assert_msg(strstr(e_.message, (needle)) != NULL,                        \
                  "%s: message \"%s\" does not mention \"%s\"", #call,         \
                  e_.message, (needle));                                       \
  } while (0)

/* Run one suite in CK_NORMAL mode and turn failures into the exit code. */
static inline int run_suite(Suite *s) {
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

#endif /* TPX_TESTS_CHECK_UTIL_H */
