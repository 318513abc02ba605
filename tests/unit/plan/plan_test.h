/* plan_test.h — small helpers shared by the plan-suite Check tests:
 * reading test data files (CHECK_OK, CHECK_FAILS and run_suite:
 * ../check_util.h). */
#ifndef TPX_TESTS_PLAN_TEST_H
#define TPX_TESTS_PLAN_TEST_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpx/error.h"

#include "../check_util.h"

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

#endif /* TPX_TESTS_PLAN_TEST_H */
