/* plan_test.h — small helpers shared by the plan-suite Check tests: error
 * assertions, reading test data files, running a suite. */
#ifndef TPX_TESTS_PLAN_TEST_H
#define TPX_TESTS_PLAN_TEST_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpx/error.h"

/* Assert that `call` failed with `want_st` and that err.message mentions
 * `needle`. `call` passes `&e_` as its error argument. */
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

#define CHECK_OK(call)                                                         \
  do {                                                                         \
    tpx_error e_ = {0};                                                        \
    tpx_status st_ = (call);                                                   \
    ck_assert_msg(st_ == TPX_OK, "%s: %s (%s)", #call, tpx_status_name(st_),   \
                  e_.message);                                                 \
  } while (0)

/* "<TPX_SOURCE_DIR>/tests/data/plan/<rel>" in buf. */
static inline const char *plan_data_path(char *buf, size_t size,
                                         const char *rel) {
  const char *root = getenv("TPX_SOURCE_DIR");
  snprintf(buf, size, "%s/tests/data/plan/%s", root ? root : ".", rel);
  return buf;
}

/* Whole file, NUL-terminated, malloc'd; NULL if unreadable. */
static inline char *read_text(const char *path, size_t *len_out) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  for (;;) {
    if (!buf)
      break;
    if (len + 1 >= cap) {
      char *nb = realloc(buf, cap * 2);
      if (!nb) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = nb;
      cap *= 2;
    }
    size_t n = fread(buf + len, 1, cap - len - 1, f);
    len += n;
    if (n == 0)
      break;
  }
  fclose(f);
  if (buf)
    buf[len] = '\0';
  if (len_out)
    *len_out = len;
  return buf;
}

/* Trailing whitespace removed in place. */
static inline char *rstrip(char *s) {
  size_t n = strlen(s);
  while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' '))
    s[--n] = '\0';
  return s;
}

static inline int run_suite(Suite *s) {
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

#endif /* TPX_TESTS_PLAN_TEST_H */
