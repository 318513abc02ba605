/* test_tmpdir.h — a scratch directory for one Check test (header-only,
 * static): make_tmpdir() creates $TMPDIR/tpx-test-XXXXXX, tmp(name) is a
 * path inside it (four rotating buffers), remove_tmpdir() deletes its
 * files (hidden ones too) and the directory. */
#ifndef TPX_TESTS_TEST_TMPDIR_H
#define TPX_TESTS_TEST_TMPDIR_H

#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmpdir[512];

static void make_tmpdir(void) {
  const char *base = getenv("TMPDIR");
  snprintf(tmpdir, sizeof tmpdir, "%s/tpx-test-XXXXXX", base ? base : "/tmp");
  ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void remove_tmpdir(void) {
  DIR *d = opendir(tmpdir);
  if (d == NULL)
    return;
  struct dirent *e;
  char p[1024];
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
    unlink(p);
  }
  closedir(d);
  rmdir(tmpdir);
}

static const char *tmp(const char *name) {
  static char buf[4][1024];
  static int k;
  k = (k + 1) % 4;
  snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
  return buf[k];
}

#endif
