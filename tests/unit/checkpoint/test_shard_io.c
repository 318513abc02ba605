/* test_shard_io.c — the write path of `tpx shard` (core/src/checkpoint:
 * direct.c, write_io.c, rankfile_write.c) under failure: the pwritev loop
 * against a pwritev that is interrupted, writes short, fails or makes no
 * progress; the rank files of the direct paths (copy_file_range, the
 * bounce buffer, pwritev from the mapping) byte for byte those of the
 * buffered path (pread reader), with copy_file_range unsupported,
 * interrupted or short too, and their one-run pieces at their source's
 * offset modulo the page; a
 * copy_file_range or an fsync that fails (this executable's definitions
 * interpose libc's for libtpx too) and a run killed in the middle leave no
 * file of theirs under a final name, and an earlier set whole. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checkpoint/writer_impl.h"
#include "tpx/tpx.h"

#include "../test_tmpdir.h"

/* ---- the pwritev loop against a scripted pwritev ---- */

static char g_file[256];
static int g_step;
/* per call: -EINTR, -ENOSPC, 0 (no progress), or at most that many bytes */
static const int *g_script;

static ssize_t fake_pwritev(int fd, const struct iovec *iov, int n, off_t off) {
  (void)fd;
  int act = g_script[g_step++];
  if (act < 0) {
    errno = -act;
    return -1;
  }
  size_t done = 0;
  for (int i = 0; i < n && done < (size_t)act; i++) {
    size_t k = iov[i].iov_len < (size_t)act - done ? iov[i].iov_len
                                                   : (size_t)act - done;
    memcpy(g_file + off + done, iov[i].iov_base, k);
    done += k;
  }
  return (ssize_t)done;
}

START_TEST(test_pwritev_retries) {
  static const int script[] = {-EINTR, 3, 5, -EINTR, 1, 100};
  char a[] = "abcdef", b[] = "", c[] = "ghijklmnop";
  struct iovec iov[3] = {{a, 6}, {b, 0}, {c, 10}};
  tpx_error err = {0};
  memset(g_file, '.', sizeof g_file);
  g_step = 0;
  g_script = script;
  ck_assert_int_eq(
      tpx__ckpt_pwritev_all(3, iov, 3, 10, fake_pwritev, "f", "t", &err),
      TPX_OK);
  ck_assert_int_eq(g_step, 6);
  ck_assert_int_eq(memcmp(g_file + 10, "abcdefghijklmnop", 16), 0);
  ck_assert_int_eq(g_file[9], '.');
  ck_assert_int_eq(g_file[26], '.');
}
END_TEST

START_TEST(test_pwritev_failures) {
  static const int nospace[] = {4, -ENOSPC};
  static const int stuck[] = {2, 0};
  char a[] = "abcdef";
  struct iovec iov[1] = {{a, 6}};
  tpx_error err = {0};
  g_step = 0;
  g_script = nospace;
  ck_assert_int_eq(tpx__ckpt_pwritev_all(3, iov, 1, 0, fake_pwritev,
                                         "out/rank.safetensors", "tensor 'x'",
                                         &err),
                   TPX_IO);
  ck_assert_ptr_nonnull(strstr(err.message, "out/rank.safetensors"));
  ck_assert_ptr_nonnull(strstr(err.message, "tensor 'x'"));
  ck_assert_ptr_nonnull(strstr(err.message, "offset 4"));
  ck_assert_ptr_nonnull(strstr(err.message, strerror(ENOSPC)));
  struct iovec iov2[1] = {{a, 6}};
  tpx_error_clear(&err);
  g_step = 0;
  g_script = stuck;
  ck_assert_int_eq(
      tpx__ckpt_pwritev_all(3, iov2, 1, 0, fake_pwritev, "f", "t", &err),
      TPX_IO);
  ck_assert_ptr_nonnull(strstr(err.message, "no progress"));
}
END_TEST

/* ---- fsync that fails on purpose: this definition interposes libc's for
 * libtpx too; g_fsync_fail_at = k fails the k-th call with EIO ---- */

static int g_fsync_calls, g_fsync_fail_at;

int fsync(int fd) {
  if (g_fsync_fail_at > 0 && ++g_fsync_calls == g_fsync_fail_at) {
    errno = EIO;
    return -1;
  }
  return (int)syscall(SYS_fsync, fd);
}

/* ---- copy_file_range, interposed the same way: g_cfr_mode 0 the real
 * one, 1 unsupported (ENOSYS), 2 interrupted then at most 12 bytes per
 * call, 3 failing (EIO) from its second call ---- */

static int g_cfr_mode, g_cfr_calls;

ssize_t copy_file_range(int in, off_t *in_off, int out, off_t *out_off,
                        size_t len, unsigned flags);

ssize_t copy_file_range(int in, off_t *in_off, int out, off_t *out_off,
                        size_t len, unsigned flags) {
  g_cfr_calls++;
  if (g_cfr_mode == 1 || (g_cfr_mode == 3 && g_cfr_calls > 1)) {
    errno = g_cfr_mode == 1 ? ENOSYS : EIO;
    return -1;
  }
  if (g_cfr_mode == 2) {
    if (g_cfr_calls % 2) {
      errno = EINTR;
      return -1;
    }
    len = len < 12 ? len : 12;
  }
  return (ssize_t)syscall(SYS_copy_file_range, in, in_off, out, out_off, len,
                          flags);
}

/* ---- a small model, its checkpoint and a dp 2 x tp 2 sharding ---- */

static tpx_model *small_model(void) {
  tpx_model *m = NULL;
  tpx_error e = {0};
  int64_t cw[2] = {7, 5}, rw[2] = {5, 7};
  ck_assert_int_eq(tpx_model_create(&m, &e), TPX_OK);
  ck_assert_int_eq(tpx_model_add_module(m, "col", TPX_MODULE_LINEAR, NULL, &e),
                   TPX_OK);
  ck_assert_int_eq(tpx_model_add_module(m, "row", TPX_MODULE_LINEAR, NULL, &e),
                   TPX_OK);
  ck_assert_int_eq(
      tpx_model_add_param(m, "col", "weight", cw, 2, TPX_DTYPE_F32, NULL, &e),
      TPX_OK);
  ck_assert_int_eq(
      tpx_model_add_param(m, "row", "weight", rw, 2, TPX_DTYPE_F32, NULL, &e),
      TPX_OK);
  return m;
}

static void write_source(const char *path) {
  static const char hdr[] =
      "{\"col.weight\":{\"dtype\":\"F32\",\"shape\":[7,5],"
      "\"data_offsets\":[0,140]},"
      "\"row.weight\":{\"dtype\":\"F32\",\"shape\":[5,7],"
      "\"data_offsets\":[140,280]}}";
  float data[70];
  unsigned char len[8] = {0};
  size_t n = strlen(hdr);
  for (int i = 0; i < 70; i++) data[i] = (float)(1000 + i);
  for (int b = 0; b < 8; b++) len[b] = (unsigned char)((n >> (8 * b)) & 0xff);
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(len, 1, 8, f), 8);
  ck_assert_uint_eq(fwrite(hdr, 1, n, f), n);
  ck_assert_uint_eq(fwrite(data, 1, sizeof data, f), sizeof data);
  fclose(f);
}

typedef struct fixture {
  tpx_model *m;
  tpx_mesh *mesh;
  tpx_sharding *sh;
  char src[1100];
} fixture;

/* fx->mesh (dp_shard 2 x tp) and fx->sh: fx->m under `plan_json`. */
static void fixture_shard(fixture *fx, const char *plan_json, int64_t tp) {
  const char *names[2] = {"dp_shard", "tp"};
  int64_t sizes[2] = {2, tp};
  tpx_plan *plan = NULL;
  tpx_error e = {0};
  ck_assert_int_eq(
      tpx_plan_from_json(plan_json, strlen(plan_json), "t", &plan, &e), TPX_OK);
  ck_assert_int_eq(tpx_mesh_create(names, sizes, 2, &fx->mesh, &e), TPX_OK);
  ck_assert_msg(tpx_sharding_create(fx->m, plan, fx->mesh, NULL, &fx->sh, &e) ==
                    TPX_OK,
                "%s", e.message);
  tpx_plan_destroy(plan);
}

static void fixture_init(fixture *fx) {
  static const char plan_json[] =
      "{\"format\":\"tpx-plan/1\",\"entries\":["
      "{\"module\":\"col\",\"style\":\"colwise\"},"
      "{\"module\":\"row\",\"style\":\"rowwise\"}]}";
  fx->m = small_model();
  fixture_shard(fx, plan_json, 2);
  snprintf(fx->src, sizeof fx->src, "%s", tmp("src.safetensors"));
  write_source(fx->src);
}

static void fixture_free(fixture *fx) {
  tpx_sharding_destroy(fx->sh);
  tpx_mesh_destroy(fx->mesh);
  tpx_model_destroy(fx->m);
}

/* tpx_shard_write of the fixture into tmpdir/<sub> with reader io `io`
 * and `threads` (the reader's num_threads, up to which rank files are
 * written at once; 0: its default). */
static const char *g_run_id = "test-run"; /* shard_into's run id */

static tpx_status shard_into(const fixture *fx, const char *sub, int io,
                             int threads, tpx_error *err) {
  tpx_checkpoint_reader_options ro = TPX_CHECKPOINT_READER_OPTIONS_INIT;
  tpx_shard_write_options wo = TPX_SHARD_WRITE_OPTIONS_INIT;
  tpx_checkpoint_reader *rd = NULL;
  char out[1024];
  ro.io_method = io;
  ro.num_threads = threads;
  wo.run_id = g_run_id;
  snprintf(out, sizeof out, "%s", tmp(sub));
  ck_assert_int_eq(tpx_checkpoint_reader_create(fx->src, &ro, &rd, err),
                   TPX_OK);
  tpx_status st = tpx_shard_write(rd, fx->sh, out, &wo, err);
  tpx_checkpoint_reader_destroy(rd);
  return st;
}

/* The whole file tmpdir/<sub>/<name> (malloc'd), its size in *n; NULL when
 * missing. */
static char *slurp(const char *sub, const char *name, long *n) {
  char p[1200];
  snprintf(p, sizeof p, "%s/%s", tmp(sub), name);
  FILE *f = fopen(p, "rb");
  if (f == NULL)
    return NULL;
  fseek(f, 0, SEEK_END);
  *n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)*n + 1);
  ck_assert_ptr_nonnull(b);
  ck_assert_uint_eq(fread(b, 1, (size_t)*n, f), (size_t)*n);
  fclose(f);
  return b;
}

/* Rank file r of `world` in tmpdir/direct and tmpdir/buffered: the same
 * bytes. */
static void same_rank_files(int64_t r, int64_t world) {
  char name[96];
  long na = 0, nb = 0;
  tpx_shard_file_name(r, world, name, sizeof name);
  char *a = slurp("direct", name, &na), *b = slurp("buffered", name, &nb);
  ck_assert_ptr_nonnull(a);
  ck_assert_ptr_nonnull(b);
  ck_assert_int_eq(na, nb);
  ck_assert_msg(memcmp(a, b, (size_t)na) == 0, "%s differs", name);
  free(a);
  free(b);
}

/* The direct paths (copy_file_range for the dim-0 pieces of col.weight,
 * pwritev from the mapping for the dim-1 pieces of row.weight) write the
 * buffered path's files byte for byte, also when copy_file_range is
 * unsupported (the pwritev fallback) or interrupted and short. */
START_TEST(test_direct_equals_buffered) {
  fixture fx;
  tpx_error err = {0};
  fixture_init(&fx);
  g_cfr_mode = _i;
  g_cfr_calls = 0;
  ck_assert_msg(shard_into(&fx, "direct", TPX_CHECKPOINT_IO_MMAP, 0, &err) ==
                    TPX_OK,
                "%s", err.message);
  g_cfr_mode = 0;
  ck_assert_int_gt(g_cfr_calls, _i == 2 ? 8 : 0);
  ck_assert_msg(shard_into(&fx, "buffered", TPX_CHECKPOINT_IO_PREAD, 0, &err) ==
                    TPX_OK,
                "%s", err.message);
  for (int r = 0; r < 4; r++) same_rank_files(r, 4);
  fixture_free(&fx);
}
END_TEST

/* ---- every way of the direct path (direct.c): a model whose pieces are
 * one run ("a", colwise: copy_file_range), short rows close together
 * ("b", rowwise at tp 2: the bounce buffer), short rows far apart ("b"
 * and "c" at tp 8: the mapping) and long rows ("c", 80000-byte rows at
 * tp 2: copy_file_range per row) ---- */

static void ways_source(const char *dir, const int64_t (*shapes)[2],
                        const char *const *names) {
  tpx_checkpoint_entry e[3];
  tpx_checkpoint_writer *w = NULL;
  tpx_error err = {0};
  for (int i = 0; i < 3; i++)
    e[i] = (tpx_checkpoint_entry){
        names[i], TPX_DTYPE_F32, 2, {shapes[i][0], shapes[i][1]}};
  ck_assert_int_eq(tpx_checkpoint_writer_create(dir, e, 3, NULL, &w, &err),
                   TPX_OK);
  for (int i = 0; i < 3; i++) {
    int64_t n = shapes[i][0] * shapes[i][1];
    float *v = malloc((size_t)n * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (int64_t k = 0; k < n; k++) v[k] = (float)(i * 1000000 + k);
    tpx_slice all = {2, {0, 0}, {shapes[i][0], shapes[i][1]}};
    ck_assert_int_eq(
        tpx_checkpoint_write_slice(w, names[i], &all, TPX_DTYPE_F32, v, &err),
        TPX_OK);
    free(v);
  }
  ck_assert_int_eq(tpx_checkpoint_writer_finish(w, NULL, &err), TPX_OK);
  tpx_checkpoint_writer_destroy(w);
}

static void ways_init(fixture *x, int64_t tp) {
  static const int64_t shapes[3][2] = {{7, 5}, {5, 7}, {3, 40000}};
  static const char *const names[3] = {"a.weight", "b.weight", "c.weight"};
  static const char *const modules[3] = {"a", "b", "c"};
  static const char plan_json[] = "{\"format\":\"tpx-plan/1\",\"entries\":["
                                  "{\"module\":\"a\",\"style\":\"colwise\"},"
                                  "{\"module\":\"b\",\"style\":\"rowwise\"},"
                                  "{\"module\":\"c\",\"style\":\"rowwise\"}]}";
  tpx_error e = {0};
  ck_assert_int_eq(tpx_model_create(&x->m, &e), TPX_OK);
  for (int i = 0; i < 3; i++) {
    ck_assert_int_eq(
        tpx_model_add_module(x->m, modules[i], TPX_MODULE_LINEAR, NULL, &e),
        TPX_OK);
    ck_assert_int_eq(tpx_model_add_param(x->m, modules[i], "weight", shapes[i],
                                         2, TPX_DTYPE_F32, NULL, &e),
                     TPX_OK);
  }
  fixture_shard(x, plan_json, tp);
  char dir[1024];
  snprintf(dir, sizeof dir, "%.1000s", tmp("src"));
  ck_assert_int_eq(mkdir(dir, 0755), 0);
  ways_source(dir, shapes, names);
  snprintf(x->src, sizeof x->src, "%.1000s/model.safetensors", dir);
}

/* The data offset of tensor `name` in file `path`. */
static int64_t data_offset(const char *path, const char *name) {
  tpx_checkpoint_reader *rd = NULL;
  tpx_checkpoint_tensor t;
  ck_assert_int_eq(tpx_checkpoint_reader_create(path, NULL, &rd, NULL), TPX_OK);
  int64_t i = tpx_checkpoint_find(rd, name);
  ck_assert_int_ge(i, 0);
  ck_assert_int_eq(tpx_checkpoint_tensor_info(rd, (size_t)i, &t, NULL), TPX_OK);
  tpx_checkpoint_reader_destroy(rd);
  return t.data_offset;
}

/* Where the data section of safetensors file `path` starts. */
static int64_t data_start(const char *path) {
  unsigned char len[8];
  int64_t n = 0;
  FILE *f = fopen(path, "rb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fread(len, 1, 8, f), 8);
  fclose(f);
  for (int b = 7; b >= 0; b--) n = n * 256 + len[b];
  return 8 + n;
}

/* Of rank r's one-run pieces (copy_file_range) that an 8-byte step of the
 * header can align, the largest sits in `path` at its source's offset modulo
 * the page: the header's padding chose it. */
static void ways_check_aligned(const fixture *x, int64_t r, const char *path) {
  static const char *const names[3] = {"a.weight", "b.weight", "c.weight"};
  int64_t best = -1, best_bytes = 0, best_src = 0;
  for (int64_t p = 0; p < 3; p++) {
    tpx_slice sl;
    tpx_param_info info;
    ck_assert_int_eq(tpx_sharding_local_slice(x->sh, p, r, &sl, NULL), TPX_OK);
    ck_assert_int_eq(tpx_model_param(x->m, p, &info, NULL), TPX_OK);
    int64_t cols = info.shape[1], bytes = sl.length[0] * sl.length[1] * 4;
    int one_run = sl.length[1] == cols || sl.length[0] <= 1;
    int64_t src = data_offset(x->src, names[p]) +
                  (sl.offset[0] * cols + sl.offset[1]) * 4;
    /* its offset in the data section, which the padding cannot change */
    int64_t rel = data_offset(path, names[p]) - data_start(path);
    if (one_run && (src - rel) % 8 == 0 && bytes > best_bytes) {
      best = p;
      best_bytes = bytes;
      best_src = src;
    }
  }
  if (best >= 0)
    ck_assert_int_eq(data_offset(path, names[best]) % 4096, best_src % 4096);
}

/* _i / 3: tp 2 or 8; _i % 3: copy_file_range real, unsupported, or
 * interrupted and short. Every rank file, written two at a time (where the
 * machine has two CPUs), equals the buffered path's written one at a time
 * byte for byte, and its largest one-run piece sits at its source's offset
 * modulo the page (the header's padding). */
START_TEST(test_direct_ways) {
  fixture x;
  tpx_error err = {0};
  int64_t tp = _i / 3 ? 8 : 2, world = 2 * tp;
  ways_init(&x, tp);
  g_cfr_mode = _i % 3;
  g_cfr_calls = 0;
  ck_assert_msg(shard_into(&x, "direct", TPX_CHECKPOINT_IO_MMAP, 2, &err) ==
                    TPX_OK,
                "%s", err.message);
  g_cfr_mode = 0;
  /* one rank file at a time, through the buffered path */
  ck_assert_msg(shard_into(&x, "buffered", TPX_CHECKPOINT_IO_PREAD, 1, &err) ==
                    TPX_OK,
                "%s", err.message);
  for (int64_t r = 0; r < world; r++) {
    char name[96], path[1200];
    same_rank_files(r, world);
    tpx_shard_file_name(r, world, name, sizeof name);
    snprintf(path, sizeof path, "%s/%s", tmp("direct"), name);
    ways_check_aligned(&x, r, path);
  }
  fixture_free(&x);
}
END_TEST

/* Every entry of tmpdir/<sub>: each rank file a complete one (it opens:
 * its header's sizes match), no temporary left unless `temps_ok`, nothing
 * else. Returns the number of rank files. */
static int complete_files(const char *sub, int temps_ok) {
  char p[1024];
  snprintf(p, sizeof p, "%s", tmp(sub));
  DIR *d = opendir(p);
  struct dirent *de;
  int n = 0;
  ck_assert_ptr_nonnull(d);
  while ((de = readdir(d)) != NULL) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
      continue;
    if (strstr(de->d_name, "tpx-tmp")) {
      ck_assert_msg(temps_ok, "left: %s", de->d_name);
      continue;
    }
    ck_assert_msg(tpx_shard_is_file_name(de->d_name), "stray: %s", de->d_name);
    char f[1400];
    tpx_checkpoint_reader *rd = NULL;
    tpx_error e = {0};
    snprintf(f, sizeof f, "%s/%s", p, de->d_name);
    ck_assert_msg(tpx_checkpoint_reader_create(f, NULL, &rd, &e) == TPX_OK,
                  "%s: %s", f, e.message);
    ck_assert_uint_eq(tpx_checkpoint_num_tensors(rd), 2);
    tpx_checkpoint_reader_destroy(rd);
    n++;
  }
  closedir(d);
  return n;
}

/* The source truncated after the reader opened it: every way of the
 * direct path stops with an I/O error naming the source (a short copy or
 * pread, EFAULT from the mapping), never SIGBUS, and no rank file is left
 * under a final name. */
START_TEST(test_direct_truncated) {
  fixture x;
  tpx_error err = {0};
  ways_init(&x, _i ? 8 : 2);
  tpx_checkpoint_reader *rd = NULL;
  tpx_shard_write_options wo = TPX_SHARD_WRITE_OPTIONS_INIT;
  char out[1024];
  snprintf(out, sizeof out, "%s", tmp("out"));
  ck_assert_int_eq(tpx_checkpoint_reader_create(x.src, NULL, &rd, &err),
                   TPX_OK);
  ck_assert_int_eq(truncate(x.src, 4096), 0);
  ck_assert_int_eq(tpx_shard_write(rd, x.sh, out, &wo, &err), TPX_IO);
  tpx_checkpoint_reader_destroy(rd);
  ck_assert_msg(strstr(err.message, "model.safetensors") != NULL, "%s",
                err.message);
  ck_assert_int_eq(complete_files("out", 0), 0);
  fixture_free(&x);
}
END_TEST

/* copy_file_range failing in the middle: an error naming the file, and
 * no file under a final name. */
START_TEST(test_copy_fails) {
  fixture fx;
  tpx_error err = {0};
  fixture_init(&fx);
  g_cfr_mode = 3;
  g_cfr_calls = 0;
  ck_assert_int_eq(shard_into(&fx, "out", 0, 0, &err), TPX_IO);
  g_cfr_mode = 0;
  ck_assert_ptr_nonnull(strstr(err.message, "copying"));
  ck_assert_ptr_nonnull(strstr(err.message, "src.safetensors"));
  ck_assert_ptr_nonnull(strstr(err.message, strerror(EIO)));
  ck_assert_int_eq(complete_files("out", 0), 0);
  fixture_free(&fx);
}
END_TEST

/* Every rank file of tmpdir/<sub> holds "tpx.run_id" `id`: the count. */
static int files_of_run(const char *sub, const char *id) {
  int n = 0;
  for (int64_t r = 0; r < 4; r++) {
    char name[96], f[1200];
    tpx_checkpoint_reader *rd = NULL;
    tpx_shard_file_name(r, 4, name, sizeof name);
    snprintf(f, sizeof f, "%s/%s", tmp(sub), name);
    if (tpx_checkpoint_reader_create(f, NULL, &rd, NULL) != TPX_OK)
      continue;
    const char *v = tpx_checkpoint_metadata(rd, "tpx.run_id");
    n += v && strcmp(v, id) == 0;
    tpx_checkpoint_reader_destroy(rd);
  }
  return n;
}

/* tmpdir/<sub> merges (into tmpdir/merged, removed after). */
static void merges(const char *sub) {
  char in[1024], out[1024];
  tpx_error err = {0};
  snprintf(in, sizeof in, "%s", tmp(sub));
  snprintf(out, sizeof out, "%s", tmp("merged"));
  ck_assert_msg(tpx_shard_merge(in, out, NULL, &err) == TPX_OK, "%s",
                err.message);
  unlink(tmp("merged/model.safetensors"));
  rmdir(tmp("merged"));
}

/* An fsync failing at the second rank file (a disk failing after some
 * files): the run fails naming it and publishes nothing, into an empty
 * directory (no final name) as over a complete set of an earlier run
 * (all four of its files stay, and merge). Files used to be renamed one
 * by one as each completed, leaving a partial set, or two runs mixed. */
START_TEST(test_fsync_fails) {
  fixture fx;
  tpx_error err = {0};
  fixture_init(&fx);
  g_run_id = "new-run";
  for (int over_old = 0; over_old < 2; over_old++) {
    const char *sub = over_old ? "killed" : "out";
    if (over_old) {
      g_run_id = "old-run";
      ck_assert_msg(shard_into(&fx, sub, 0, 0, &err) == TPX_OK, "%s",
                    err.message);
      g_run_id = "new-run";
    }
    g_fsync_calls = 0;
    g_fsync_fail_at = 2; /* the second rank file's */
    ck_assert_int_eq(shard_into(&fx, sub, 0, 0, &err), TPX_IO);
    g_fsync_fail_at = 0;
    ck_assert_ptr_nonnull(strstr(err.message, strerror(EIO)));
    ck_assert_ptr_nonnull(strstr(err.message, "rank-0000"));
    /* no temporary left, no file of the failed run */
    ck_assert_int_eq(complete_files(sub, 0), over_old ? 4 : 0);
    ck_assert_int_eq(files_of_run(sub, "new-run"), 0);
    if (over_old) {
      ck_assert_int_eq(files_of_run(sub, "old-run"), 4);
      merges(sub);
    }
    /* the directory is usable again at once */
    tpx_error_clear(&err);
    ck_assert_msg(shard_into(&fx, sub, 0, 0, &err) == TPX_OK, "%s",
                  err.message);
    ck_assert_int_eq(complete_files(sub, 0), 4);
    ck_assert_int_eq(files_of_run(sub, "new-run"), 4);
  }
  g_run_id = "test-run";
  fixture_free(&fx);
}
END_TEST

/* user: k > 0 kills after k pieces, k < 0 after -k completed files. */
static void kill_self(const tpx_shard_progress *p, void *user) {
  int64_t k = *(const int64_t *)user;
  if ((k > 0 && p->items >= k) || (k < 0 && p->files >= -k))
    raise(SIGKILL);
}

/* A run killed after some pieces or some completed (sealed) files, over
 * a complete set of an earlier run: that set stays whole (its four files,
 * nothing of the killed run under a final name) beside the temporaries. */
START_TEST(test_killed_run) {
  fixture fx;
  tpx_error err = {0};
  fixture_init(&fx);
  g_run_id = "old-run";
  ck_assert_msg(shard_into(&fx, "killed", 0, 0, &err) == TPX_OK, "%s",
                err.message);
  g_run_id = "test-run";
  static const int64_t at[] = {1, 5, -1, -3};
  for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
    int64_t items = at[i];
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
      tpx_checkpoint_reader *rd = NULL;
      tpx_shard_write_options wo = TPX_SHARD_WRITE_OPTIONS_INIT;
      char out[1024];
      snprintf(out, sizeof out, "%s", tmp("killed"));
      wo.progress = kill_self;
      wo.progress_user = &items;
      wo.replace = 1;
      if (tpx_checkpoint_reader_create(fx.src, NULL, &rd, NULL) != TPX_OK)
        _exit(3);
      tpx_shard_write(rd, fx.sh, out, &wo, NULL);
      _exit(4); /* not killed: a failure */
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    /* temporaries of the killed run stay until the next run removes them;
     * under the final names the earlier set, whole */
    ck_assert_int_eq(complete_files("killed", 1), 4);
    ck_assert_int_eq(files_of_run("killed", "old-run"), 4);
  }
  merges("killed");
  /* the next run removes the temporaries and writes every file */
  ck_assert_msg(shard_into(&fx, "killed", 0, 0, &err) == TPX_OK, "%s",
                err.message);
  ck_assert_int_eq(complete_files("killed", 0), 4);
  fixture_free(&fx);
}
END_TEST

static void setup(void) { make_tmpdir(); }

/* The subdirectories' files, then the scratch directory's. */
static void teardown(void) {
  static const char *const subs[] = {"direct", "buffered", "out",
                                     "killed", "merged",   "src"};
  for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
    char p[1024], f[1400];
    snprintf(p, sizeof p, "%s", tmp(subs[i]));
    DIR *d = opendir(p);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
      snprintf(f, sizeof f, "%s/%s", p, de->d_name);
      unlink(f);
    }
    if (d)
      closedir(d);
    rmdir(p);
  }
  remove_tmpdir();
}

static Suite *io_suite(void) {
  Suite *s = suite_create("shard_io");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_pwritev_retries);
  tcase_add_test(tc, test_pwritev_failures);
  tcase_add_loop_test(tc, test_direct_equals_buffered, 0, 3);
  tcase_add_loop_test(tc, test_direct_ways, 0, 6);
  tcase_add_loop_test(tc, test_direct_truncated, 0, 2);
  tcase_add_test(tc, test_copy_fails);
  tcase_add_test(tc, test_fsync_fails);
  tcase_add_test(tc, test_killed_run);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(io_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
