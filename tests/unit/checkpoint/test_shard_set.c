/* test_shard_set.c — what makes tpx-shard/1 rank files one set, and the
 * merge's refusals (core/src/checkpoint: source_digest.c,
 * merge_pieces.c): XXH64 against its published values; "tpx.source" as
 * docs/CHECKPOINT.md defines it; two checkpoints of one model (the same
 * names and headers, other values) under one run id refused, naming both
 * files; --rank runs on the same source agreeing whatever their reader,
 * threads or directory; rank files of an older tpx (an "fnv1a64:" digest)
 * merging among themselves (with a note saying what that digest cannot
 * tell) and not with new ones; a crafted piece offset
 * of 2^63 - 1 refused with its box printed right (no signed overflow). */
#define _XOPEN_SOURCE 700
#include <check.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>
#include "tpx/tpx.h"

#include "../test_tmpdir.h"

/* ---- XXH64 ---- */

START_TEST(test_xxh64_vectors) {
  static const struct {
    const char *text;
    uint64_t want;
  } v[] = {
      {"", 0xef46db3751d8e999ULL},
      {"a", 0xd24ec4f1a98c6e5bULL},
      {"abc", 0x44bc2cf5ad770999ULL},
      {"Nobody inspects the spammish repetition", 0xfbcea83c8a378bf1ULL},
  };
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
    ck_assert_msg(XXH64(v[i].text, strlen(v[i].text), 0) == v[i].want,
                  "XXH64(\"%s\")", v[i].text);
  /* streaming in uneven pieces gives the one-shot value */
  unsigned char buf[1000];
  for (size_t i = 0; i < sizeof buf; i++) buf[i] = (unsigned char)(i * 7 + 3);
  for (size_t step = 1; step <= 65; step += 4) {
    XXH64_state_t *s = XXH64_createState();
    ck_assert(s != NULL);
    XXH64_reset(s, 42);
    for (size_t at = 0; at < sizeof buf; at += step)
      XXH64_update(s, buf + at,
                   sizeof buf - at < step ? sizeof buf - at : step);
    ck_assert(XXH64_digest(s) == XXH64(buf, sizeof buf, 42));
    XXH64_freeState(s);
  }
}
END_TEST

/* ---- a small model (col: colwise, row: rowwise), dp_shard 2 x tp 2 ---- */

typedef struct fixture {
  tpx_model *m;
  tpx_mesh *mesh;
  tpx_sharding *sh;
} fixture;

static void fixture_init(fixture *fx) {
  static const char plan_json[] =
      "{\"format\":\"tpx-plan/1\",\"entries\":["
      "{\"module\":\"col\",\"style\":\"colwise\"},"
      "{\"module\":\"row\",\"style\":\"rowwise\"}]}";
  const char *names[2] = {"dp_shard", "tp"};
  int64_t sizes[2] = {2, 2}, cw[2] = {8, 6}, rw[2] = {6, 8};
  tpx_plan *plan = NULL;
  tpx_error e = {0};
  ck_assert_int_eq(tpx_model_create(&fx->m, &e), TPX_OK);
  ck_assert_int_eq(
      tpx_model_add_module(fx->m, "col", TPX_MODULE_LINEAR, NULL, &e), TPX_OK);
  ck_assert_int_eq(
      tpx_model_add_module(fx->m, "row", TPX_MODULE_LINEAR, NULL, &e), TPX_OK);
  ck_assert_int_eq(tpx_model_add_param(fx->m, "col", "weight", cw, 2,
                                       TPX_DTYPE_F32, NULL, &e),
                   TPX_OK);
  ck_assert_int_eq(tpx_model_add_param(fx->m, "row", "weight", rw, 2,
                                       TPX_DTYPE_F32, NULL, &e),
                   TPX_OK);
  ck_assert_int_eq(
      tpx_plan_from_json(plan_json, strlen(plan_json), "t", &plan, &e), TPX_OK);
  ck_assert_int_eq(tpx_mesh_create(names, sizes, 2, &fx->mesh, &e), TPX_OK);
  ck_assert_msg(tpx_sharding_create(fx->m, plan, fx->mesh, NULL, &fx->sh, &e) ==
                    TPX_OK,
                "%s", e.message);
  tpx_plan_destroy(plan);
}

static void fixture_free(fixture *fx) {
  tpx_sharding_destroy(fx->sh);
  tpx_mesh_destroy(fx->mesh);
  tpx_model_destroy(fx->m);
}

/* The source checkpoint tmpdir/<dir>/model.safetensors: the same header
 * for every `base`, the values base, base + 1, ... (two training steps of
 * one model). */
static void write_source(const char *dir, float base) {
  static const char hdr[] =
      "{\"col.weight\":{\"dtype\":\"F32\",\"shape\":[8,6],"
      "\"data_offsets\":[0,192]},"
      "\"row.weight\":{\"dtype\":\"F32\",\"shape\":[6,8],"
      "\"data_offsets\":[192,384]}}";
  float data[96];
  unsigned char len[8] = {0};
  size_t n = strlen(hdr);
  char path[1200];
  for (int i = 0; i < 96; i++) data[i] = base + (float)i;
  for (int b = 0; b < 8; b++) len[b] = (unsigned char)((n >> (8 * b)) & 0xff);
  mkdir(tmp(dir), 0755);
  snprintf(path, sizeof path, "%s/model.safetensors", tmp(dir));
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(len, 1, 8, f), 8);
  ck_assert_uint_eq(fwrite(hdr, 1, n, f), n);
  ck_assert_uint_eq(fwrite(data, 1, sizeof data, f), sizeof data);
  fclose(f);
}

/* tpx_shard_write of the source in tmpdir/<src> into tmpdir/<out>: rank
 * `rank` (-1: all), run id `run_id`, reader io `io` and `threads`. */
static void shard(const fixture *fx, const char *src, const char *out,
                  int64_t rank, const char *run_id, int io, int threads) {
  tpx_checkpoint_reader_options ro = TPX_CHECKPOINT_READER_OPTIONS_INIT;
  tpx_shard_write_options wo = TPX_SHARD_WRITE_OPTIONS_INIT;
  tpx_checkpoint_reader *rd = NULL;
  tpx_error err = {0};
  char in[1200], dir[1200];
  snprintf(in, sizeof in, "%s/model.safetensors", tmp(src));
  snprintf(dir, sizeof dir, "%s", tmp(out));
  ro.io_method = io;
  ro.num_threads = threads;
  wo.rank = rank;
  wo.run_id = run_id;
  ck_assert_msg(tpx_checkpoint_reader_create(in, &ro, &rd, &err) == TPX_OK,
                "%s", err.message);
  ck_assert_msg(tpx_shard_write(rd, fx->sh, dir, &wo, &err) == TPX_OK, "%s",
                err.message);
  tpx_checkpoint_reader_destroy(rd);
}

static char *rank_path(const char *dir, int64_t r) {
  static char buf[2][1300];
  static int k;
  char name[96];
  k = !k;
  tpx_shard_file_name(r, 4, name, sizeof name);
  snprintf(buf[k], sizeof buf[k], "%s/%s", tmp(dir), name);
  return buf[k];
}

/* "tpx.source" of rank file r of tmpdir/<dir> into out. */
static void source_of(const char *dir, int64_t r, char *out, size_t size) {
  tpx_checkpoint_reader *rd = NULL;
  tpx_error err = {0};
  ck_assert_int_eq(
      tpx_checkpoint_reader_create(rank_path(dir, r), NULL, &rd, &err), TPX_OK);
  const char *v = tpx_checkpoint_metadata(rd, "tpx.source");
  ck_assert_ptr_nonnull(v);
  snprintf(out, size, "%s", v);
  tpx_checkpoint_reader_destroy(rd);
}

static void copy_file(const char *from, const char *to) {
  FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
  char buf[4096];
  size_t n;
  ck_assert(a && b);
  while ((n = fread(buf, 1, sizeof buf, a)) > 0)
    ck_assert_uint_eq(fwrite(buf, 1, n, b), n);
  fclose(a);
  fclose(b);
}

static char g_note[1024]; /* the merge's last note */

static void keep_note(const char *message, void *user) {
  (void)user;
  snprintf(g_note, sizeof g_note, "%s", message);
}

/* tpx_shard_merge of tmpdir/<in> into tmpdir/<out>; its note in g_note. */
static tpx_status merge(const char *in, const char *out, tpx_error *err) {
  char a[1200], b[1200];
  tpx_shard_merge_options mo = TPX_SHARD_MERGE_OPTIONS_INIT;
  mo.note = keep_note;
  g_note[0] = '\0';
  snprintf(a, sizeof a, "%s", tmp(in));
  snprintf(b, sizeof b, "%s", tmp(out));
  return tpx_shard_merge(a, b, &mo, err);
}

/* Rewrites the header of safetensors file `path`: the text after the
 * first `marker`, up to (not including) the next `end`, becomes `value`;
 * the header grows (8-byte steps) or is padded with spaces, the data
 * section moved after it (data_offsets count from its start). */
static void patch_header(const char *path, const char *marker, char end,
                         const char *value) {
  FILE *f = fopen(path, "rb");
  ck_assert_ptr_nonnull(f);
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)size + 1);
  ck_assert_ptr_nonnull(buf);
  ck_assert_uint_eq(fread(buf, 1, (size_t)size, f), (size_t)size);
  fclose(f);
  buf[size] = '\0';
  uint64_t len = 0;
  for (int b = 7; b >= 0; b--) len = len << 8 | (unsigned char)buf[b];
  char *json = buf + 8, *at = strstr(json, marker);
  ck_assert_msg(at != NULL && at < json + len, "%s: no %s", path, marker);
  at += strlen(marker);
  char *stop = strchr(at, end);
  ck_assert_ptr_nonnull(stop);
  size_t head = (size_t)(at - json), tail = len - (size_t)(stop - json);
  while (tail > 0 && stop[tail - 1] == ' ') tail--; /* the old padding */
  size_t used = head + strlen(value) + tail;
  size_t nlen = used <= len ? len : (used + 7) / 8 * 8;
  char *out = malloc(8 + nlen + (size_t)size);
  ck_assert_ptr_nonnull(out);
  memset(out + 8, ' ', nlen);
  memcpy(out + 8, json, head);
  memcpy(out + 8 + head, value, strlen(value));
  memcpy(out + 8 + head + strlen(value), stop, tail);
  for (int b = 0; b < 8; b++) out[b] = (char)((nlen >> (8 * b)) & 0xff);
  size_t data = (size_t)size - 8 - len;
  memcpy(out + 8 + nlen, buf + 8 + len, data);
  f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(out, 1, 8 + nlen + data, f), 8 + nlen + data);
  fclose(f);
  free(out);
  free(buf);
}

/* "tpx.source" is what docs/CHECKPOINT.md says: XXH64 of the base name, a
 * NUL, the size (8 bytes LE) and the XXH64 of each 64 MiB chunk (one
 * here) of every source file. */
START_TEST(test_digest_value) {
  fixture fx;
  fixture_init(&fx);
  write_source("a", 1000);
  shard(&fx, "a", "ra", -1, NULL, TPX_CHECKPOINT_IO_MMAP, 0);
  char path[1200], got[64], want[64];
  snprintf(path, sizeof path, "%s/model.safetensors", tmp("a"));
  FILE *f = fopen(path, "rb");
  static unsigned char bytes[4096];
  size_t n = fread(bytes, 1, sizeof bytes, f);
  fclose(f);
  unsigned char rec[64];
  size_t k = 0;
  memcpy(rec, "model.safetensors", 18); /* with its NUL */
  k = 18;
  for (int b = 0; b < 8; b++)
    rec[k++] = (unsigned char)((uint64_t)n >> (8 * b));
  uint64_t h = XXH64(bytes, n, 0);
  for (int b = 0; b < 8; b++) rec[k++] = (unsigned char)(h >> (8 * b));
  snprintf(want, sizeof want, "xxh64:%016llx",
           (unsigned long long)XXH64(rec, k, 0));
  for (int64_t r = 0; r < 4; r++) {
    source_of("ra", r, got, sizeof got);
    ck_assert_str_eq(got, want);
  }
  fixture_free(&fx);
}
END_TEST

/* Two checkpoints of one model (same names and header, other values):
 * rank 2 of the second, written under the first's run id, is refused by
 * the merge, naming both files. This merged silently when the digest
 * covered the headers only. */
START_TEST(test_two_checkpoints) {
  fixture fx;
  tpx_error err = {0};
  fixture_init(&fx);
  write_source("a", 1000);
  write_source("b", 2000);
  shard(&fx, "a", "ra", -1, "job-7", TPX_CHECKPOINT_IO_MMAP, 0);
  shard(&fx, "b", "rb", 2, "job-7", TPX_CHECKPOINT_IO_MMAP, 0);
  char sa[64], sb[64];
  source_of("ra", 2, sa, sizeof sa);
  source_of("rb", 2, sb, sizeof sb);
  copy_file(rank_path("rb", 2), rank_path("ra", 2));
  ck_assert_int_eq(merge("ra", "m", &err), TPX_VALIDATION);
  ck_assert_msg(strstr(err.message, "another source checkpoint") &&
                    strstr(err.message, "rank-00002-of-00004") &&
                    strstr(err.message, "rank-00000-of-00004"),
                "%s", err.message);
  struct stat st;
  ck_assert_int_ne(stat(tmp("m/model.safetensors"), &st), 0);
  ck_assert_str_ne(sa, sb);
  fixture_free(&fx);
}
END_TEST

/* --rank runs of one run id on the same source agree, whatever their
 * reader (mmap: copy_file_range and pwritev from the mapping; pread: a
 * buffer), thread count or the source's directory; the set merges. */
START_TEST(test_rank_runs_agree) {
  fixture fx;
  tpx_error err = {0};
  fixture_init(&fx);
  write_source("a", 1000);
  write_source("a2", 1000); /* the same bytes elsewhere */
  static const char *const src[4] = {"a", "a2", "a", "a2"};
  for (int64_t r = 0; r < 4; r++)
    shard(&fx, src[r], "ra", r, "job-7",
          r % 2 ? TPX_CHECKPOINT_IO_PREAD : TPX_CHECKPOINT_IO_MMAP,
          r < 2 ? 1 : 4);
  char s0[64], s[64];
  source_of("ra", 0, s0, sizeof s0);
  ck_assert_msg(strncmp(s0, "xxh64:", 6) == 0 && strlen(s0) == 22, "%s", s0);
  for (int64_t r = 1; r < 4; r++) {
    source_of("ra", r, s, sizeof s);
    ck_assert_str_eq(s, s0);
  }
  ck_assert_msg(merge("ra", "m", &err) == TPX_OK, "%s", err.message);
  ck_assert_str_eq(g_note, ""); /* nothing to say about a data digest */
  fixture_free(&fx);
}
END_TEST

/* Rank files of an older tpx carry "fnv1a64:…" (names and headers only):
 * a set of them still merges, with a note; one beside new files is
 * refused, naming both. */
START_TEST(test_old_digest) {
  fixture fx;
  tpx_error err = {0};
  fixture_init(&fx);
  write_source("a", 1000);
  shard(&fx, "a", "ra", -1, "job-7", TPX_CHECKPOINT_IO_MMAP, 0);
  patch_header(rank_path("ra", 3), "\"tpx.source\":\"", '"',
               "fnv1a64:0123456789abcdef");
  ck_assert_int_eq(merge("ra", "m", &err), TPX_VALIDATION);
  ck_assert_msg(strstr(err.message, "another source checkpoint") &&
                    strstr(err.message, "rank-00003-of-00004") &&
                    strstr(err.message, "rank-00000-of-00004"),
                "%s", err.message);
  for (int64_t r = 0; r < 3; r++)
    patch_header(rank_path("ra", r), "\"tpx.source\":\"", '"',
                 "fnv1a64:0123456789abcdef");
  tpx_error_clear(&err);
  ck_assert_msg(merge("ra", "m", &err) == TPX_OK, "%s", err.message);
  ck_assert_msg(strstr(g_note, "older tpx") && strstr(g_note, "not told apart"),
                "%s", g_note);
  fixture_free(&fx);
}
END_TEST

/* A piece offset of 2^63 - 1 (a crafted rank file): refused as not its
 * rank's box, the box printed with its true end 2^63 + 1 (this overflowed a
 * signed addition: UBSan in CI). */
START_TEST(test_offset_at_int64_max) {
  fixture fx;
  tpx_error err = {0};
  fixture_init(&fx);
  write_source("a", 1000);
  shard(&fx, "a", "ra", -1, NULL, TPX_CHECKPOINT_IO_MMAP, 0);
  patch_header(rank_path("ra", 1), "offsets\\\":[", ',', "9223372036854775807");
  ck_assert_int_eq(merge("ra", "m", &err), TPX_VALIDATION);
  ck_assert_msg(
      strstr(err.message, "rank-00001-of-00004") &&
          strstr(err.message, "[9223372036854775807:9223372036854775809, "),
      "%s", err.message);
  fixture_free(&fx);
}
END_TEST

static int rm_entry(const char *p, const struct stat *sb, int flag,
                    struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(p);
}

static void setup(void) { make_tmpdir(); }
static void teardown(void) {
  nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); /* subdirectories too */
  remove_tmpdir();
}

static Suite *set_suite(void) {
  Suite *s = suite_create("shard_set");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_xxh64_vectors);
  tcase_add_test(tc, test_digest_value);
  tcase_add_test(tc, test_two_checkpoints);
  tcase_add_test(tc, test_rank_runs_agree);
  tcase_add_test(tc, test_old_digest);
  tcase_add_test(tc, test_offset_at_int64_max);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(set_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
