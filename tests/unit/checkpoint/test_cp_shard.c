/* test_cp_shard.c — rank files of a context-parallel mesh (what `tpx shard
 * --cp` writes, tpx_shard_write): on (dp_replicate, dp_shard, cp, tp)
 * meshes every rank file holds the slice torch.chunk arithmetic written out
 * here by hand gives (TP first, then one chunk of dim 0 over dp_shard x cp
 * at index dp_shard_idx x cp + cp_idx), so the cp ranks of one dp_shard
 * group hold different pieces; the file's metadata names the cp dim and
 * its coordinates (docs/CHECKPOINT.md, docs/SEMANTICS.md "Context
 * parallelism"). */
#include <dirent.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../shard/shard_fixture.h"
#include "tpx/checkpoint.h"
#include "tpx/checkpoint_shard.h"

static char root[256];

static void rm_tree(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *de;
  char p[600];
  while (d && (de = readdir(d)) != NULL) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
      continue;
    snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
    if (unlink(p) != 0)
      rm_tree(p);
  }
  if (d)
    closedir(d);
  rmdir(dir);
}

/* Element i of parameter p: distinct per tensor and position. */
static uint16_t value(int64_t p, int64_t i) {
  return (uint16_t)((p * 7919 + i * 3) & 0x7fff);
}

static void hand_chunk(int64_t n, int64_t w, int64_t i, int64_t *off,
                       int64_t *len) {
  int64_t c = (n + w - 1) / w, o = i * c;
  if (o > n)
    o = n;
  *off = o;
  *len = n - o < c ? n - o : c;
}

static int tp_dim_of(const char *fqn) {
  if (strstr(fqn, "o_proj") || strstr(fqn, "down_proj"))
    return 1;
  return strstr(fqn, "norm") ? -1 : 0;
}

/* The source checkpoint: every parameter whole, bf16 bit patterns. */
static void write_source(const tpx_model *m, const char *dir) {
  tpx_checkpoint_entry *entries = NULL;
  size_t ne = 0;
  tpx_error e = {0};
  ck_assert_int_eq(tpx_checkpoint_model_entries(m, &entries, &ne, &e), TPX_OK);
  tpx_checkpoint_writer *w = NULL;
  ck_assert_msg(tpx_checkpoint_writer_create(dir, entries, ne, NULL, &w, &e) ==
                    TPX_OK,
                "%s", e.message);
  for (size_t p = 0; p < tpx_model_num_params(m); p++) {
    tpx_param_info pi;
    ck_assert_int_eq(tpx_model_param(m, (int64_t)p, &pi, NULL), TPX_OK);
    tpx_slice s;
    memset(&s, 0, sizeof s);
    s.ndim = pi.ndim;
    int64_t n = 1;
    for (int d = 0; d < pi.ndim; d++) n *= (s.length[d] = pi.shape[d]);
    uint16_t *buf = malloc((size_t)n * 2);
    for (int64_t i = 0; i < n; i++) buf[i] = value((int64_t)p, i);
    ck_assert_msg(tpx_checkpoint_write_slice(w, pi.fqn, &s, TPX_DTYPE_BF16, buf,
                                             &e) == TPX_OK,
                  "%s", e.message);
    free(buf);
  }
  ck_assert_int_eq(tpx_checkpoint_writer_finish(w, NULL, &e), TPX_OK);
  tpx_checkpoint_writer_destroy(w);
  free(entries);
}

/* Rank r's file holds, for every parameter, the hand-computed box. */
static void check_rank(const tpx_model *m, const char *dir, int64_t r,
                       int64_t world, const int64_t *co, const int64_t *sz) {
  char path[600];
  snprintf(path, sizeof path, "%s/rank-%05lld-of-%05lld.safetensors", dir,
           (long long)r, (long long)world);
  tpx_checkpoint_reader *rd = NULL;
  tpx_error e = {0};
  ck_assert_msg(tpx_checkpoint_reader_create(path, NULL, &rd, &e) == TPX_OK,
                "%s", e.message);
  const char *ms = tpx_checkpoint_metadata(rd, "tpx.mesh");
  ck_assert_ptr_nonnull(ms);
  ck_assert_ptr_nonnull(strstr(ms, "\"cp\""));
  int64_t flat = sz[1] * sz[2];
  for (size_t p = 0; p < tpx_model_num_params(m); p++) {
    tpx_param_info pi;
    ck_assert_int_eq(tpx_model_param(m, (int64_t)p, &pi, NULL), TPX_OK);
    int64_t off[2] = {0, 0};
    int64_t len[2] = {pi.shape[0], pi.ndim > 1 ? pi.shape[1] : 1};
    int td = sz[3] > 1 ? tp_dim_of(pi.fqn) : -1;
    if (td >= 0)
      hand_chunk(pi.shape[td], sz[3], co[3], &off[td], &len[td]);
    int64_t o, l;
    hand_chunk(len[0], flat, co[1] * sz[2] + co[2], &o, &l);
    off[0] += o;
    len[0] = l;
    int64_t t = tpx_checkpoint_find(rd, pi.fqn);
    ck_assert_msg(t >= 0, "rank %lld lacks %s", (long long)r, pi.fqn);
    tpx_checkpoint_tensor info;
    ck_assert_int_eq(tpx_checkpoint_tensor_info(rd, (size_t)t, &info, &e),
                     TPX_OK);
    ck_assert_int_eq(info.shape[0], len[0]);
    if (pi.ndim > 1)
      ck_assert_int_eq(info.shape[1], len[1]);
    if (len[0] * len[1] == 0)
      continue;
    tpx_slice s;
    memset(&s, 0, sizeof s);
    s.ndim = info.ndim;
    memcpy(s.length, info.shape, sizeof s.length);
    uint16_t *got = malloc((size_t)(len[0] * len[1]) * 2);
    ck_assert_int_eq(tpx_checkpoint_read_slice(rd, t, &s, TPX_DTYPE_BF16, got,
                                               (size_t)(len[0] * len[1]) * 2,
                                               &e),
                     TPX_OK);
    int64_t cols = pi.ndim > 1 ? pi.shape[1] : 1;
    for (int64_t i = 0; i < len[0]; i++)
      for (int64_t j = 0; j < len[1]; j++)
        ck_assert_msg(got[i * len[1] + j] ==
                          value((int64_t)p, (off[0] + i) * cols + off[1] + j),
                      "rank %lld %s [%lld,%lld]", (long long)r, pi.fqn,
                      (long long)i, (long long)j);
    free(got);
  }
  tpx_checkpoint_reader_destroy(rd);
}

/* dp_replicate, dp_shard, cp, tp, vocab */
static const int64_t cases[][5] = {
    {1, 1, 2, 1, 256}, {1, 2, 2, 1, 250}, {2, 2, 2, 2, 250}, {1, 3, 2, 1, 253}};

START_TEST(rank_files_hold_flat_chunks) {
  const int64_t *c = cases[_i];
  snprintf(root, sizeof root, "%s/tpx-cp-shard.XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  ck_assert_ptr_nonnull(mkdtemp(root));
  char src[300], out[300];
  snprintf(src, sizeof src, "%s/src", root);
  snprintf(out, sizeof out, "%s/ranks", root);
  ck_assert_int_eq(mkdir(src, 0700), 0);
  fx_opts fo = {c[4], 0, 0, 0, NULL};
  tpx_model *m = fx_model(&fo);
  write_source(m, src);
  tpx_plan *plan = fx_llama_plan();
  tpx_mesh *mesh = NULL;
  ck_assert_int_eq(tpx_mesh_create_fsdp2(c[0], c[1], c[2], c[3], &mesh, NULL),
                   TPX_OK);
  tpx_sharding_options so = TPX_SHARDING_OPTIONS_INIT;
  so.dp_shard_dim = "dp_shard_cp";
  tpx_sharding *sh = fx_shard(m, plan, mesh, &so);
  tpx_checkpoint_reader *rd = NULL;
  tpx_error e = {0};
  ck_assert_int_eq(tpx_checkpoint_reader_create(src, NULL, &rd, &e), TPX_OK);
  ck_assert_msg(tpx_shard_write(rd, sh, out, NULL, &e) == TPX_OK, "%s",
                e.message);
  int64_t world = tpx_mesh_world_size(mesh);
  for (int64_t r = 0; r < world; r++) {
    int64_t co[4];
    ck_assert_int_eq(tpx_mesh_coords(mesh, r, co, NULL), TPX_OK);
    check_rank(m, out, r, world, co, c);
  }
  tpx_checkpoint_reader_destroy(rd);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(plan);
  tpx_model_destroy(m);
  rm_tree(root);
}
END_TEST

static Suite *cp_shard_suite(void) {
  Suite *s = suite_create("cp_shard");
  TCase *tc = tcase_create("cp_shard");
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, rank_files_hold_flat_chunks, 0,
                      (int)(sizeof cases / sizeof cases[0]));
  suite_add_tcase(s, tc);
  return s;
}

FX_MAIN(cp_shard_suite)
