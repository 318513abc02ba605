/* base_test.h — small helpers shared by the base-suite Check tests. */
#ifndef TPX_TESTS_BASE_TEST_H
#define TPX_TESTS_BASE_TEST_H

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "tpx/error.h"

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

#endif /* TPX_TESTS_BASE_TEST_H */
