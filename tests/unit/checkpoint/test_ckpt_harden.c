/* test_ckpt_harden.c — the checkpoint writer in a hostile or shared output
 * directory: a link planted at a temporary or final name is never followed
 * (nothing outside the directory changes, every final name is a regular
 * file), two writers into one directory never share a temporary (each
 * publishes a complete file), the index and the shared temporaries of a
 * multi-process write refuse links (symbolic and hard) too, and a path that is
 * not a directory is reported without an unrelated errno text. The CLI side
 * (locks, run ids, coverage) is tests/unit/checkpoint/cli_shard_merge.sh. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tpx/tpx.h"

#include "../test_tmpdir.h"

static const tpx_checkpoint_entry entry = {
    "w.weight", TPX_DTYPE_F32, 2, {16, 8, 0, 0, 0, 0, 0, 0}};

static tpx_slice whole(void) {
  tpx_slice s;
  memset(&s, 0, sizeof s);
  s.ndim = 2;
  s.length[0] = 16;
  s.length[1] = 8;
  return s;
}

static void fill(float *v, float base) {
  for (int i = 0; i < 16 * 8; i++) v[i] = base + (float)i;
}

/* A file outside the output directory that must never change. */
static char victim[600];
static const char victim_text[] = "precious, not a checkpoint\n";

static void make_victim(void) {
  snprintf(victim, sizeof victim, "%s.victim", tmpdir);
  FILE *f = fopen(victim, "w");
  ck_assert_ptr_nonnull(f);
  fputs(victim_text, f);
  fclose(f);
}

static void check_victim(void) {
  char buf[128] = "";
  FILE *f = fopen(victim, "r");
  ck_assert_ptr_nonnull(f);
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  ck_assert_str_eq(buf, victim_text);
  unlink(victim);
}

/* Every element of the final file's tensor equals v. */
static void check_final(const char *name, const float *v) {
  struct stat sb;
  ck_assert_int_eq(lstat(tmp(name), &sb), 0);
  ck_assert(S_ISREG(sb.st_mode));
  tpx_checkpoint_reader *rd = NULL;
  tpx_error err = {0};
  ck_assert_int_eq(tpx_checkpoint_reader_create(tmp(name), NULL, &rd, &err),
                   TPX_OK);
  static float got[16 * 8];
  tpx_slice s = whole();
  ck_assert_int_eq(tpx_checkpoint_read_slice(rd, 0, &s, TPX_DTYPE_F32, got,
                                             sizeof got, &err),
                   TPX_OK);
  ck_assert_int_eq(memcmp(got, v, sizeof got), 0);
  tpx_checkpoint_reader_destroy(rd);
}

static tpx_checkpoint_writer *create(const tpx_checkpoint_writer_options *o) {
  tpx_checkpoint_writer *w = NULL;
  tpx_error err = {0};
  ck_assert_msg(tpx_checkpoint_writer_create(tmpdir, &entry, 1, o, &w, &err) ==
                    TPX_OK,
                "%s", err.message);
  return w;
}

static void write_finish(tpx_checkpoint_writer *w, const float *v) {
  tpx_error err = {0};
  tpx_slice s = whole();
  ck_assert_int_eq(
      tpx_checkpoint_write_slice(w, "w.weight", &s, TPX_DTYPE_F32, v, &err),
      TPX_OK);
  ck_assert_msg(tpx_checkpoint_writer_finish(w, NULL, &err) == TPX_OK, "%s",
                err.message);
}

/* Links planted at the old predictable temporary name and at the final
 * name: the writer follows neither. */
START_TEST(test_links_not_followed) {
  make_tmpdir();
  make_victim();
  ck_assert_int_eq(symlink(victim, tmp(".model.safetensors.tpx-tmp")), 0);
  ck_assert_int_eq(symlink(victim, tmp("model.safetensors")), 0);
  static float v[16 * 8];
  fill(v, 1);
  tpx_checkpoint_writer *w = create(NULL);
  write_finish(w, v);
  tpx_checkpoint_writer_destroy(w);
  check_final("model.safetensors", v);
  check_victim();
  unlink(tmp(".model.safetensors.tpx-tmp"));
  remove_tmpdir();
}
END_TEST

/* The index of a sharded write: a link at the final index name is
 * replaced, not followed. */
START_TEST(test_index_link_not_followed) {
  make_tmpdir();
  make_victim();
  ck_assert_int_eq(symlink(victim, tmp("model.safetensors.index.json")), 0);
  tpx_checkpoint_entry two[2] = {entry, entry};
  two[1].name = "x.weight";
  tpx_checkpoint_writer_options o = TPX_CHECKPOINT_WRITER_OPTIONS_INIT;
  o.max_shard_size = 16 * 8 * 4;
  tpx_checkpoint_writer *w = NULL;
  tpx_error err = {0};
  ck_assert_int_eq(tpx_checkpoint_writer_create(tmpdir, two, 2, &o, &w, &err),
                   TPX_OK);
  static float v[16 * 8];
  fill(v, 3);
  tpx_slice s = whole();
  ck_assert_int_eq(
      tpx_checkpoint_write_slice(w, "w.weight", &s, TPX_DTYPE_F32, v, &err),
      TPX_OK);
  ck_assert_int_eq(
      tpx_checkpoint_write_slice(w, "x.weight", &s, TPX_DTYPE_F32, v, &err),
      TPX_OK);
  ck_assert_int_eq(tpx_checkpoint_writer_finish(w, NULL, &err), TPX_OK);
  tpx_checkpoint_writer_destroy(w);
  struct stat sb;
  ck_assert_int_eq(lstat(tmp("model.safetensors.index.json"), &sb), 0);
  ck_assert(S_ISREG(sb.st_mode));
  check_victim();
  remove_tmpdir();
}
END_TEST

/* The shared temporary of a multi-process write is refused when it is a
 * link (O_NOFOLLOW), naming it. */
START_TEST(test_shared_temp_link_refused) {
  make_tmpdir();
  make_victim();
  ck_assert_int_eq(symlink(victim, tmp(".model.safetensors.tpx-tmp")), 0);
  tpx_checkpoint_writer_options o = TPX_CHECKPOINT_WRITER_OPTIONS_INIT;
  o.num_writers = 2;
  tpx_checkpoint_writer *w = NULL;
  tpx_error err = {0};
  ck_assert_int_eq(
      tpx_checkpoint_writer_create(tmpdir, &entry, 1, &o, &w, &err), TPX_IO);
  ck_assert_ptr_null(w);
  ck_assert_ptr_nonnull(strstr(err.message, ".model.safetensors.tpx-tmp"));
  check_victim();
  unlink(tmp(".model.safetensors.tpx-tmp"));
  remove_tmpdir();
}
END_TEST

/* Two single writers into one directory at once (two `tpx merge` runs):
 * the second's create must not clobber the first's temporary. Each
 * finish publishes its own complete file; the last one stays. */
START_TEST(test_two_writers_one_dir) {
  make_tmpdir();
  static float a[16 * 8], b[16 * 8];
  fill(a, 100);
  fill(b, 5000);
  tpx_checkpoint_writer *wa = create(NULL);
  tpx_error err = {0};
  tpx_slice s = whole();
  ck_assert_int_eq(
      tpx_checkpoint_write_slice(wa, "w.weight", &s, TPX_DTYPE_F32, a, &err),
      TPX_OK);
  tpx_checkpoint_writer *wb = create(NULL); /* starts while A is midway */
  ck_assert_msg(tpx_checkpoint_writer_finish(wa, NULL, &err) == TPX_OK, "%s",
                err.message);
  check_final("model.safetensors", a);
  write_finish(wb, b);
  check_final("model.safetensors", b);
  tpx_checkpoint_writer_destroy(wa);
  tpx_checkpoint_writer_destroy(wb);
  remove_tmpdir();
}
END_TEST

/* A regular file where the directory should be: "not a directory", and no
 * text of an errno left over from an earlier, unrelated call. */
START_TEST(test_not_a_directory_message) {
  make_tmpdir();
  FILE *f = fopen(tmp("plain"), "w");
  ck_assert_ptr_nonnull(f);
  fclose(f);
  tpx_checkpoint_writer *w = NULL;
  tpx_error err = {0};
  errno = ENOTTY; /* what an isatty() before the call leaves behind */
  ck_assert_int_eq(
      tpx_checkpoint_writer_create(tmp("plain"), &entry, 1, NULL, &w, &err),
      TPX_IO);
  ck_assert_ptr_nonnull(strstr(err.message, "not a directory"));
  ck_assert_ptr_null(strstr(err.message, strerror(ENOTTY)));
  ck_assert_ptr_nonnull(strstr(err.message, "plain"));
  remove_tmpdir();
}
END_TEST

/* A hard link planted at the shared temporary's name (the victim on the
 * same file system): refused too, the victim unchanged. */
START_TEST(test_shared_temp_hardlink_refused) {
  make_tmpdir();
  make_victim();
  if (link(victim, tmp(".model.safetensors.tpx-tmp")) != 0) {
    unlink(victim); /* no hard links here: nothing to check */
    remove_tmpdir();
    return;
  }
  tpx_checkpoint_writer_options o = TPX_CHECKPOINT_WRITER_OPTIONS_INIT;
  o.num_writers = 2;
  tpx_checkpoint_writer *w = NULL;
  tpx_error err = {0};
  ck_assert_int_eq(
      tpx_checkpoint_writer_create(tmpdir, &entry, 1, &o, &w, &err), TPX_IO);
  ck_assert_ptr_null(w);
  check_victim();
  unlink(tmp(".model.safetensors.tpx-tmp"));
  remove_tmpdir();
}
END_TEST

static Suite *harden_suite(void) {
  Suite *s = suite_create("checkpoint-harden");
  TCase *tc = tcase_create("writer");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, test_links_not_followed);
  tcase_add_test(tc, test_index_link_not_followed);
  tcase_add_test(tc, test_shared_temp_link_refused);
  tcase_add_test(tc, test_shared_temp_hardlink_refused);
  tcase_add_test(tc, test_two_writers_one_dir);
  tcase_add_test(tc, test_not_a_directory_message);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(harden_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
