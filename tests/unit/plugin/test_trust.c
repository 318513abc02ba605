/* test_trust.c — what the registry refuses before opening a file (issue 28
 * A1, A2): a plugin file or directory others can write, or owned by
 * someone else, is refused as plugin-untrusted naming path, mode and owner
 * (TPX_PLUGIN_TRUST_ANY=1 opts out); a FIFO is never opened; junk, and
 * ELF files without the entry points, are refused from their bytes; a
 * directory named 2,000 times is searched once. */
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "plugin_test.h"
#include "tpx/diag.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A fresh 0700 directory under /tmp holding a copy of the good plugin as
 * lib.so (mode 0755). */
static void make_dir(char *dir, size_t size, char *lib, size_t lsize) {
  snprintf(dir, size, "/tmp/tpx-trust-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(lib, lsize, "%s/lib.so", dir);
  FILE *in = fopen(GOOD("libtpxtest_good.so"), "rb");
  FILE *out = fopen(lib, "wb");
  ck_assert_ptr_nonnull(in);
  ck_assert_ptr_nonnull(out);
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, in)) > 0)
    ck_assert_uint_eq(fwrite(buf, 1, n, out), n);
  fclose(in);
  ck_assert_int_eq(fclose(out), 0);
  ck_assert_int_eq(chmod(lib, 0755), 0);
}

static void remove_dir(const char *dir) {
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  ck_assert_int_eq(system(cmd), 0);
}

static int has_diag(const tpx_registry *r, const char *code,
                    const char *needle) {
  const tpx_diag_list *dl = tpx_registry_diagnostics(r);
  for (size_t i = 0; i < tpx_diag_count(dl); i++) {
    tpx_diag d;
    if (tpx_diag_get(dl, i, &d, NULL) == TPX_OK && strcmp(d.code, code) == 0 &&
        strstr(d.message, needle))
      return 1;
  }
  return 0;
}

/* Load `dir` alone: 1 when lib.so loaded, 0 when refused (the reason must
 * then hold every needle). */
static int loads(const char *dir, const char *const *needles) {
  tpx_registry *r = NULL;
  CHECK_OK(tpx_registry_create(&r, &e_));
  CHECK_OK(tpx_registry_load_dir(r, dir, &e_));
  int loaded = tpx_registry_num_plugins(r) == 1;
  if (!loaded) {
    ck_assert_uint_eq(tpx_registry_num_refused(r), 1);
    tpx_plugin_refusal ref;
    CHECK_OK(tpx_registry_refused(r, 0, &ref, &e_));
    for (size_t i = 0; needles && needles[i]; i++)
      ASSERT_CONTAINS(ref.reason, needles[i]);
    ck_assert(has_diag(r, "plugin-untrusted", "untrusted"));
  }
  tpx_registry_destroy(r);
  return loaded;
}

static const struct {
  mode_t file, dir;
  const char *needle[5];
} modes[] = {
    {0666, 0700, {"untrusted: the file", "lib.so", "mode 0666", "owner"}},
    {0646, 0700, {"the file", "mode 0646", "writable by anyone", NULL}},
    {0755, 0777, {"the directory", "mode 0777", "owner", NULL}},
    {0755, 01777, {"the directory", "mode 1777", "sticky", NULL}},
    {0755, 0757, {"the directory", "mode 0757", NULL, NULL}},
};

START_TEST(writable_by_others_is_refused) {
  char dir[64], lib[128];
  make_dir(dir, sizeof dir, lib, sizeof lib);
  ck_assert_int_eq(chmod(lib, modes[_i].file), 0);
  ck_assert_int_eq(chmod(dir, modes[_i].dir), 0);
  ck_assert_int_eq(loads(dir, modes[_i].needle), 0);
  /* The explicit opt-out loads it. */
  setenv("TPX_PLUGIN_TRUST_ANY", "1", 1);
  ck_assert_int_eq(loads(dir, NULL), 1);
  unsetenv("TPX_PLUGIN_TRUST_ANY");
  chmod(dir, 0700);
  remove_dir(dir);
}
END_TEST

/* 0755 in a 0700 directory: trusted. Group-writable by root's group (or any
 * group that is not the owner's own): refused. */
START_TEST(group_write) {
  char dir[64], lib[128];
  make_dir(dir, sizeof dir, lib, sizeof lib);
  ck_assert_int_eq(loads(dir, NULL), 1);
  ck_assert_int_eq(chmod(lib, 0664), 0);
  struct stat st;
  ck_assert_int_eq(stat(lib, &st), 0);
  if (st.st_gid == 0) {
    const char *n[] = {"mode 0664", "writable by its group", NULL};
    ck_assert_int_eq(loads(dir, n), 0);
  }
  remove_dir(dir);
}
END_TEST

/* Owned by another user (only root can arrange that). */
START_TEST(other_owner_is_refused) {
  if (geteuid() != 0)
    return;
  char dir[64], lib[128];
  make_dir(dir, sizeof dir, lib, sizeof lib);
  ck_assert_int_eq(chown(lib, 4242, (gid_t)-1), 0);
  const char *n[] = {"owner uid 4242", "owned by someone else", NULL};
  ck_assert_int_eq(loads(dir, n), 0);
  ck_assert_int_eq(chown(lib, 0, (gid_t)-1), 0);
  ck_assert_int_eq(chown(dir, 4242, (gid_t)-1), 0);
  const char *m[] = {"the directory", "owned by someone else", NULL};
  ck_assert_int_eq(loads(dir, m), 0);
  remove_dir(dir);
}
END_TEST

/* A FIFO named p.so is refused without being opened (opening it would
 * block until a writer came), and junk named .so without a child each. */
START_TEST(fifo_and_junk_are_cheap) {
  char dir[64], lib[128], path[256];
  make_dir(dir, sizeof dir, lib, sizeof lib);
  snprintf(path, sizeof path, "%s/p.so", dir);
  ck_assert_int_eq(mkfifo(path, 0600), 0);
  for (int i = 0; i < 2000; i++) {
    snprintf(path, sizeof path, "%s/junk%04d.so", dir, i);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("not a plugin\n", f);
    fclose(f);
  }
  tpx_registry *r = NULL;
  CHECK_OK(tpx_registry_create(&r, &e_));
  double t0 = now();
  CHECK_OK(tpx_registry_load_dir(r, dir, &e_));
  ck_assert_double_lt(now() - t0, 3.0);
  ck_assert_uint_eq(tpx_registry_num_plugins(r), 1);
  ck_assert_uint_eq(tpx_registry_num_refused(r), 2001);
  int fifo = 0;
  for (size_t i = 0; i < tpx_registry_num_refused(r); i++) {
    tpx_plugin_refusal ref;
    CHECK_OK(tpx_registry_refused(r, i, &ref, &e_));
    if (strstr(ref.path, "/p.so")) {
      ASSERT_CONTAINS(ref.reason, "not a regular file (a FIFO)");
      fifo = 1;
    } else {
      ASSERT_CONTAINS(ref.reason, "not an ELF file");
    }
  }
  ck_assert(fifo);
  tpx_registry_destroy(r);
  remove_dir(dir);
}
END_TEST

/* A directory of 1,000 ELF shared objects that are no plugins (what
 * TPX_PLUGIN_PATH=/usr/lib would meet) is judged from their symbol tables,
 * without a probe child each (about 3 ms each before). */
START_TEST(elf_without_entry_points_is_cheap) {
  char dir[64], lib[128], path[256];
  make_dir(dir, sizeof dir, lib, sizeof lib);
  FILE *in = fopen(BROKEN("no_symbols.so"), "rb");
  ck_assert_ptr_nonnull(in);
  static char buf[1 << 20];
  size_t len = fread(buf, 1, sizeof buf, in);
  fclose(in);
  ck_assert_uint_gt(len, 0);
  for (int i = 0; i < 1000; i++) {
    snprintf(path, sizeof path, "%s/lib%04d.so", dir, i);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(buf, 1, len, f), len);
    fclose(f);
  }
  tpx_registry *r = NULL;
  CHECK_OK(tpx_registry_create(&r, &e_));
  double t0 = now();
  CHECK_OK(tpx_registry_load_dir(r, dir, &e_));
  ck_assert_double_lt(now() - t0, 1.5);
  ck_assert_uint_eq(tpx_registry_num_plugins(r), 1);
  ck_assert_uint_eq(tpx_registry_num_refused(r), 1000);
  tpx_plugin_refusal ref;
  CHECK_OK(tpx_registry_refused(r, 999, &ref, &e_));
  ASSERT_CONTAINS(ref.reason, "missing required symbol "
                              "'register_parallel_strategy' and 'get_plan'");
  tpx_registry_destroy(r);
  remove_dir(dir);
}
END_TEST

/* A file refused as untrusted in one directory loads through a hard link
 * in a trusted one. */
START_TEST(untrusted_refusal_is_per_path) {
  char dir[64], lib[128], bad[128], link2[160];
  make_dir(dir, sizeof dir, lib, sizeof lib);
  snprintf(bad, sizeof bad, "%s/open", dir);
  ck_assert_int_eq(mkdir(bad, 0700), 0);
  snprintf(link2, sizeof link2, "%s/lib.so", bad);
  ck_assert_int_eq(link(lib, link2), 0);
  ck_assert_int_eq(chmod(bad, 0777), 0);
  tpx_registry *r = NULL;
  CHECK_OK(tpx_registry_create(&r, &e_));
  tpx_error e = {0};
  ck_assert_int_eq(tpx_registry_load_file(r, link2, &e), TPX_PLUGIN);
  ASSERT_CONTAINS(e.message, "the directory");
  CHECK_OK(tpx_registry_load_file(r, lib, &e_));
  ck_assert_uint_eq(tpx_registry_num_plugins(r), 1);
  tpx_registry_destroy(r);
  chmod(bad, 0700);
  remove_dir(dir);
}
END_TEST

/* The same directory 2,000 times on TPX_PLUGIN_PATH (and once through a
 * symlink) is searched once: its plugin loaded once, its junk refused
 * once, fast. */
START_TEST(repeated_dir_searched_once) {
  char dir[64], lib[128], path[256], link[256];
  make_dir(dir, sizeof dir, lib, sizeof lib);
  snprintf(path, sizeof path, "%s/junk.so", dir);
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs("junk\n", f);
  fclose(f);
  snprintf(link, sizeof link, "%s-link", dir);
  ck_assert_int_eq(symlink(dir, link), 0);
  size_t len = 2000 * (strlen(dir) + 1) + strlen(link) + 1;
  char *env = malloc(len);
  ck_assert_ptr_nonnull(env);
  env[0] = '\0';
  for (int i = 0; i < 2000; i++) {
    strcat(env, dir);
    strcat(env, ":");
  }
  strcat(env, link);
  /* The baseline: the directory named once (the default directory, whose
   * plugins each get a probe child, is searched in both). */
  tpx_registry *r = NULL;
  setenv("TPX_PLUGIN_PATH", dir, 1);
  CHECK_OK(tpx_registry_create(&r, &e_));
  double t0 = now();
  CHECK_OK(tpx_registry_load_default(r, &e_));
  const double once = now() - t0;
  tpx_registry_destroy(r);
  setenv("TPX_PLUGIN_PATH", env, 1);
  free(env);
  CHECK_OK(tpx_registry_create(&r, &e_));
  t0 = now();
  CHECK_OK(tpx_registry_load_default(r, &e_));
  ck_assert_double_lt(now() - t0, once + 1.5);
  unsetenv("TPX_PLUGIN_PATH");
  size_t mine = 0, refused = 0;
  for (size_t i = 0; i < tpx_registry_num_plugins(r); i++) {
    tpx_plugin_desc d;
    CHECK_OK(tpx_registry_plugin(r, i, &d, &e_));
    mine += strncmp(d.path, dir, strlen(dir)) == 0;
  }
  for (size_t i = 0; i < tpx_registry_num_refused(r); i++) {
    tpx_plugin_refusal ref;
    CHECK_OK(tpx_registry_refused(r, i, &ref, &e_));
    refused += strncmp(ref.path, dir, strlen(dir)) == 0;
  }
  ck_assert_uint_eq(mine, 1);
  ck_assert_uint_eq(refused, 1);
  tpx_registry_destroy(r);
  unlink(link);
  remove_dir(dir);
}
END_TEST

/* A refused file asked for again is refused again, with the same reason,
 * and recorded once. */
START_TEST(refused_twice_recorded_once) {
  char dir[64], lib[128];
  make_dir(dir, sizeof dir, lib, sizeof lib);
  ck_assert_int_eq(chmod(lib, 0666), 0);
  tpx_registry *r = NULL;
  CHECK_OK(tpx_registry_create(&r, &e_));
  tpx_error a = {0}, b = {0};
  ck_assert_int_eq(tpx_registry_load_file(r, lib, &a), TPX_PLUGIN);
  ck_assert_int_eq(tpx_registry_load_file(r, lib, &b), TPX_PLUGIN);
  ck_assert_str_eq(a.message, b.message);
  ASSERT_CONTAINS(a.message, "untrusted");
  ck_assert_uint_eq(tpx_registry_num_refused(r), 1);
  tpx_registry_destroy(r);
  remove_dir(dir);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("plugin-trust");
  TCase *tc = tcase_create("trust");
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, writable_by_others_is_refused, 0,
                      sizeof modes / sizeof modes[0]);
  tcase_add_test(tc, group_write);
  tcase_add_test(tc, other_owner_is_refused);
  tcase_add_test(tc, fifo_and_junk_are_cheap);
  tcase_add_test(tc, repeated_dir_searched_once);
  tcase_add_test(tc, refused_twice_recorded_once);
  tcase_add_test(tc, elf_without_entry_points_is_cheap);
  tcase_add_test(tc, untrusted_refusal_is_per_path);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(suite()); }
