/* test_split.c — stored tensors cut into several parameters
 * (tpx_model_add_split_source, tpx_model_add_param_source_box;
 * transformers' Split: a fused qkv projection saved as one tensor, the
 * model holding q, k and v): the declarations and their refusals naming
 * the tensor and the parameters, the tiling check, the safetensors header
 * check (the stored tensor accepted, its shape the sum of its parts along
 * the split dim), every rank's slice read from the right offset of the
 * stored tensor on uneven meshes — a dim-0 split under colwise TP and
 * FSDP, a dim-1 split under rowwise TP (slices of dim 1 of a part that
 * starts inside the tensor), parts given in another order than they are
 * stored — in f32 and bf16 against values computed element by element
 * here, the rank files' "fold" items (negative offsets) and a shard +
 * merge round trip that writes the stored tensors back byte for byte. */
#include <check.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tpx/tpx.h"

#include "../test_tmpdir.h"
#include "ckpt_test_util.h"

static tpx_error e_;
#define CHECK_OK(x) ck_assert_msg((x) == TPX_OK, "%s", e_.message)

/* ---- the model ----
 * ck.qkv.weight [Q+K+V, H] -> attn.q/k/v.weight (dim 0, uneven parts);
 * ck.down.weight [H, A+B] -> mlp.down_a/down_b.weight (dim 1);
 * ck.gu.weight [2I, H] -> mlp.up.weight at rows [0, I), mlp.gate.weight at
 * [I, 2I) (given gate first, with offsets); emb.weight [4, H] as itself. */
typedef struct dims {
  int64_t H, Q, K, V, A, B, I;
} dims;

static const dims shapes[] = {{5, 4, 3, 3, 3, 4, 3}, {3, 2, 1, 1, 1, 2, 1}};

enum { P_Q, P_K, P_V, P_DA, P_DB, P_GATE, P_UP, P_EMB, NP };
static const char *const pnames[NP] = {"attn.q.weight",     "attn.k.weight",
                                       "attn.v.weight",     "mlp.down_a.weight",
                                       "mlp.down_b.weight", "mlp.gate.weight",
                                       "mlp.up.weight",     "emb.weight"};
/* stored tensors, in name order (the writer's) */
enum { S_DOWN, S_GU, S_QKV, S_EMB, NS };
static const char *const snames[NS] = {"ck.down.weight", "ck.gu.weight",
                                       "ck.qkv.weight", "emb.weight"};

static void stored_shape(const dims *d, int s, int64_t *shape) {
  const int64_t sh[NS][2] = {{d->H, d->A + d->B},
                             {2 * d->I, d->H},
                             {d->Q + d->K + d->V, d->H},
                             {4, d->H}};
  shape[0] = sh[s][0];
  shape[1] = sh[s][1];
}

/* The stored element i of tensor s, as bits (distinct everywhere). */
static uint32_t value(int s, int64_t i) {
  return 0x4000u + (uint32_t)(s * 1024) + (uint32_t)i;
}

static void param_shape(const dims *d, int p, int64_t *shape) {
  const int64_t sh[NP][2] = {{d->Q, d->H}, {d->K, d->H}, {d->V, d->H},
                             {d->H, d->A}, {d->H, d->B}, {d->I, d->H},
                             {d->I, d->H}, {4, d->H}};
  shape[0] = sh[p][0];
  shape[1] = sh[p][1];
}

static tpx_model *split_model(const dims *d, tpx_dtype dt) {
  tpx_model *m = NULL;
  CHECK_OK(tpx_model_create(&m, &e_));
  for (int p = 0; p < NP; p++) {
    char mod[64];
    int64_t shape[2];
    snprintf(mod, sizeof mod, "%.*s", (int)(strlen(pnames[p]) - 7), pnames[p]);
    param_shape(d, p, shape);
    CHECK_OK(tpx_model_add_module(
        m, mod, p == P_EMB ? TPX_MODULE_EMBEDDING : TPX_MODULE_LINEAR, NULL,
        &e_));
    CHECK_OK(tpx_model_add_param(m, mod, "weight", shape, 2, dt, NULL, &e_));
  }
  const char *qkv[] = {pnames[P_Q], pnames[P_K], pnames[P_V]};
  const char *down[] = {pnames[P_DA], pnames[P_DB]};
  const char *gu[] = {pnames[P_GATE], pnames[P_UP]};
  int64_t gu_off[] = {d->I, 0};
  CHECK_OK(
      tpx_model_add_split_source(m, "ck.qkv.weight", 0, qkv, NULL, 3, &e_));
  CHECK_OK(
      tpx_model_add_split_source(m, "ck.down.weight", -1, down, NULL, 2, &e_));
  CHECK_OK(
      tpx_model_add_split_source(m, "ck.gu.weight", 0, gu, gu_off, 2, &e_));
  CHECK_OK(tpx_model_check_param_sources(m, &e_));
  return m;
}

/* The stored tensors with the library's writer (as a merge writes them);
 * `bad` stored tensor one row short, `skip` left out. */
static void write_split(const char *dir, const dims *d, tpx_dtype dt, int bad,
                        int skip) {
  tpx_checkpoint_entry ents[NS];
  int n = 0;
  for (int s = 0; s < NS; s++) {
    if (s == skip)
      continue;
    ents[n].name = snames[s];
    ents[n].dtype = dt;
    ents[n].ndim = 2;
    memset(ents[n].shape, 0, sizeof ents[n].shape);
    stored_shape(d, s, ents[n].shape);
    if (s == bad)
      ents[n].shape[0]--;
    n++;
  }
  tpx_checkpoint_writer *w = NULL;
  CHECK_OK(tpx_checkpoint_writer_create(dir, ents, (size_t)n, NULL, &w, &e_));
  size_t esz = tpx_dtype_size(dt);
  for (int k = 0; k < n; k++) {
    int s = 0;
    while (strcmp(snames[s], ents[k].name) != 0) s++;
    int64_t numel = ents[k].shape[0] * ents[k].shape[1];
    unsigned char *buf = malloc((size_t)numel * esz);
    ck_assert_ptr_nonnull(buf);
    for (int64_t i = 0; i < numel; i++) ckt_put_bits(buf, esz, i, value(s, i));
    tpx_slice all = {2, {0, 0}, {ents[k].shape[0], ents[k].shape[1]}};
    CHECK_OK(tpx_checkpoint_write_slice(w, ents[k].name, &all, dt, buf, &e_));
    free(buf);
  }
  CHECK_OK(tpx_checkpoint_writer_finish(w, NULL, &e_));
  tpx_checkpoint_writer_destroy(w);
}

/* The element [r, c] of parameter p, computed here from the stored
 * tensors. */
static uint32_t expected(const dims *d, int p, int64_t r, int64_t c) {
  int64_t H = d->H, AB = d->A + d->B;
  switch (p) {
  case P_Q: return value(S_QKV, r * H + c);
  case P_K: return value(S_QKV, (d->Q + r) * H + c);
  case P_V: return value(S_QKV, (d->Q + d->K + r) * H + c);
  case P_DA: return value(S_DOWN, r * AB + c);
  case P_DB: return value(S_DOWN, r * AB + d->A + c);
  case P_GATE: return value(S_GU, (d->I + r) * H + c);
  case P_UP: return value(S_GU, r * H + c);
  default: return value(S_EMB, r * H + c);
  }
}

static tpx_sharding *sharding(const tpx_model *m, tpx_mesh **mesh, int64_t dp,
                              int64_t tp) {
  return ckt_sharding(m,
                      "{\"format\":\"tpx-plan/1\",\"entries\":["
                      "{\"module\":\"attn.*\",\"style\":\"colwise\"},"
                      "{\"module\":\"mlp.gate\",\"style\":\"colwise\"},"
                      "{\"module\":\"mlp.up\",\"style\":\"colwise\"},"
                      "{\"module\":\"mlp.down_*\",\"style\":\"rowwise\"}]}",
                      mesh, dp, tp);
}

static const int64_t meshes[][2] = {{1, 1}, {2, 1}, {3, 1}, {4, 1},
                                    {1, 2}, {2, 2}, {1, 3}, {3, 2}};
#define NMESH ((int)(sizeof meshes / sizeof meshes[0]))

/* Every rank of each mesh reads each parameter's slice from its stored
 * tensor: loop over shapes x dtypes x meshes. */
START_TEST(read_split_slices) {
  const dims *d = &shapes[_i / (2 * NMESH)];
  tpx_dtype dt = (_i / NMESH) % 2 ? TPX_DTYPE_BF16 : TPX_DTYPE_F32;
  int64_t dp = meshes[_i % NMESH][0], tp = meshes[_i % NMESH][1];
  size_t esz = tpx_dtype_size(dt);
  make_tmpdir();
  write_split(tmpdir, d, dt, -1, -1);
  tpx_model *m = split_model(d, dt);
  tpx_mesh *mesh = NULL;
  tpx_sharding *sh = sharding(m, &mesh, dp, tp);
  tpx_checkpoint_reader *rd = NULL;
  CHECK_OK(tpx_checkpoint_reader_create(tmpdir, NULL, &rd, &e_));
  CHECK_OK(tpx_checkpoint_check_model(rd, m, &e_));
  /* k's one source: the whole qkv tensor, placed so k lands on k */
  tpx_checkpoint_source src;
  ck_assert_int_eq(tpx_checkpoint_param_num_sources(rd, m, P_K), 1);
  CHECK_OK(tpx_checkpoint_param_source(rd, m, P_K, 0, &src, &e_));
  ck_assert_int_eq(src.tensor, tpx_checkpoint_find(rd, "ck.qkv.weight"));
  ck_assert_int_eq(src.box.offset[0], -d->Q);
  ck_assert_int_eq(src.box.length[0], d->Q + d->K + d->V);
  CHECK_OK(tpx_checkpoint_param_source(rd, m, P_DB, 0, &src, &e_));
  ck_assert_int_eq(src.box.offset[1], -d->A);
  for (int64_t r = 0; r < dp * tp; r++)
    for (int p = 0; p < NP; p++) {
      tpx_slice s;
      int64_t n;
      unsigned char *buf = ckt_read_slice(rd, sh, p, r, dt, &s, &n);
      for (int64_t k = 0; k < n; k++) {
        int64_t row = s.offset[0] + k / s.length[1];
        int64_t col = s.offset[1] + k % s.length[1];
        uint32_t want = ckt_bits(expected(d, p, row, col), esz);
        uint32_t got = ckt_get_bits(buf, esz, k);
        ck_assert_msg(got == want,
                      "%s dp %lld tp %lld rank %lld %s [%lld, %lld]: %#x, "
                      "want %#x",
                      tpx_dtype_short_name(dt), (long long)dp, (long long)tp,
                      (long long)r, pnames[p], (long long)row, (long long)col,
                      got, want);
      }
      free(buf);
    }
  tpx_checkpoint_reader_destroy(rd);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_model_destroy(m);
  remove_tmpdir();
}
END_TEST

/* The header load accepts the stored tensors (no parameter added); a
 * stored tensor whose shape is not the sum of its parts is refused naming
 * it and its parameters; a missing one is named by the model check. */
START_TEST(headers_check_split) {
  const dims *d = &shapes[0];
  make_tmpdir();
  write_split(tmpdir, d, TPX_DTYPE_BF16, -1, -1);
  tpx_model *m = split_model(d, TPX_DTYPE_BF16);
  CHECK_OK(tpx_model_add_safetensors(m, tmpdir, &e_));
  ck_assert_uint_eq(tpx_model_num_params(m), NP);
  size_t differ = 9;
  CHECK_OK(tpx_checkpoint_check_shapes(m, tmpdir, &differ, &e_));
  ck_assert_uint_eq(differ, 0);
  tpx_model_destroy(m);
  remove_tmpdir();

  make_tmpdir();
  write_split(tmpdir, d, TPX_DTYPE_BF16, S_QKV, -1);
  m = split_model(d, TPX_DTYPE_BF16);
  tpx_error err = {0};
  ck_assert_int_eq(tpx_model_add_safetensors(m, tmpdir, &err), TPX_VALIDATION);
  ck_assert_msg(strstr(err.message, "'ck.qkv.weight'") &&
                    strstr(err.message, "cut into") &&
                    strstr(err.message, "'attn.q.weight'") &&
                    strstr(err.message, "'attn.v.weight'") &&
                    strstr(err.message, "[10, 5]"),
                "%s", err.message);
  tpx_checkpoint_reader *rd = NULL;
  CHECK_OK(tpx_checkpoint_reader_create(tmpdir, NULL, &rd, &e_));
  tpx_error e2 = {0};
  ck_assert_int_eq(tpx_checkpoint_check_model(rd, m, &e2), TPX_VALIDATION);
  ck_assert_msg(strstr(e2.message, "ck.qkv.weight"), "%s", e2.message);
  tpx_checkpoint_reader_destroy(rd);
  tpx_model_destroy(m);
  remove_tmpdir();

  make_tmpdir();
  write_split(tmpdir, d, TPX_DTYPE_BF16, -1, S_DOWN);
  m = split_model(d, TPX_DTYPE_BF16);
  CHECK_OK(tpx_checkpoint_reader_create(tmpdir, NULL, &rd, &e_));
  tpx_error e3 = {0};
  ck_assert_int_eq(tpx_checkpoint_check_model(rd, m, &e3), TPX_NOT_FOUND);
  ck_assert_msg(strstr(e3.message, "mlp.down_a.weight"), "%s", e3.message);
  tpx_checkpoint_reader_destroy(rd);
  tpx_model_destroy(m);
  remove_tmpdir();
}
END_TEST

/* Declarations refused naming the tensor and the parameters; nothing is
 * recorded by a refused split. */
START_TEST(split_refused) {
  const dims d = {5, 4, 3, 3, 3, 4, 3};
  tpx_model *m = NULL;
  CHECK_OK(tpx_model_create(&m, &e_));
  int64_t a[2] = {4, 5}, b[2] = {3, 5}, c[2] = {3, 6};
  CHECK_OK(tpx_model_add_param(m, "x", "a", a, 2, TPX_DTYPE_F32, NULL, &e_));
  CHECK_OK(tpx_model_add_param(m, "x", "b", b, 2, TPX_DTYPE_F32, NULL, &e_));
  CHECK_OK(tpx_model_add_param(m, "x", "c", c, 2, TPX_DTYPE_F32, NULL, &e_));
  CHECK_OK(tpx_model_add_param(m, "x", "h", b, 2, TPX_DTYPE_BF16, NULL, &e_));
  CHECK_OK(tpx_model_add_module(m, "t", TPX_MODULE_LINEAR, NULL, &e_));
  CHECK_OK(tpx_model_tie(m, "t.weight", "x.a", &e_));
  (void)d;
  const char *ab[] = {"x.a", "x.b"}, *ac[] = {"x.a", "x.c"},
             *ah[] = {"x.a", "x.h"}, *an[] = {"x.a", "no.such"},
             *at[] = {"x.a", "t.weight"};
  const int64_t gap[] = {0, 5}, lap[] = {0, 3}, late[] = {1, 5};
  static const struct {
    int which, dim;
    int off; /* 0 NULL, 1 gap, 2 overlap, 3 starting at 1 */
    tpx_status st;
    const char *t1, *t2;
  } cases[] = {
      {0, 0, 1, TPX_VALIDATION, "[4:5)", "'x.b'"},
      {0, 0, 2, TPX_VALIDATION, "overlaps", "'x.a'"},
      {0, 0, 3, TPX_VALIDATION, "[0:1)", "'x.a'"},
      {1, 0, 0, TPX_VALIDATION, "'x.c'", "differ"},
      {2, 0, 0, TPX_VALIDATION, "'x.h'", "dtype"},
      {3, 0, 0, TPX_NOT_FOUND, "'no.such'", "ck.t"},
      {0, 2, 0, TPX_INVALID_ARGUMENT, "dim 2", "'x.a'"},
      {4, 0, 0, TPX_INVALID_ARGUMENT, "'t.weight'", "tied"},
  };
  const char *const *lists[] = {ab, ac, ah, an, at};
  const int64_t *offs[] = {NULL, gap, lap, late};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tpx_error err = {0};
    ck_assert_int_eq(tpx_model_add_split_source(m, "ck.t", cases[i].dim,
                                                lists[cases[i].which],
                                                offs[cases[i].off], 2, &err),
                     cases[i].st);
    ck_assert_msg(strstr(err.message, "ck.t") &&
                      strstr(err.message, cases[i].t1) &&
                      strstr(err.message, cases[i].t2),
                  "case %zu: %s", i, err.message);
  }
  for (int p = 0; p < 4; p++)
    ck_assert_uint_eq(tpx_model_num_param_sources(m, p), 0);
  /* dim 1: a [4, 5] and c [3, 6] differ off dim 1 too */
  tpx_error err = {0};
  ck_assert_int_eq(tpx_model_add_split_source(m, "ck.u", 1, ac, NULL, 2, &err),
                   TPX_VALIDATION);
  /* a split along dim 0 of a and b: [7, 5]; the name is then taken */
  CHECK_OK(tpx_model_add_split_source(m, "ck.ab", 0, ab, NULL, 2, &e_));
  CHECK_OK(tpx_model_check_param_sources(m, &e_));
  tpx_slice box = {2, {0, 0}, {3, 6}};
  tpx_error_clear(&err);
  ck_assert_int_eq(tpx_model_add_param_source(m, "x.c", "ck.ab", &box, 0, &err),
                   TPX_INVALID_ARGUMENT);
  ck_assert_msg(strstr(err.message, "already a source"), "%s", err.message);
  /* sharing with another shape is refused naming both parameters */
  tpx_slice other = {2, {0, 0}, {8, 6}};
  tpx_error_clear(&err);
  ck_assert_int_eq(
      tpx_model_add_param_source_box(m, "x.c", "ck.ab", &other, 0, &err),
      TPX_INVALID_ARGUMENT);
  ck_assert_msg(strstr(err.message, "'x.c'") && strstr(err.message, "'x.a'"),
                "%s", err.message);
  /* a box that does not meet the parameter */
  tpx_slice away = {2, {-9, 0}, {9, 6}};
  tpx_error_clear(&err);
  ck_assert_int_eq(
      tpx_model_add_param_source_box(m, "x.c", "ck.z", &away, 0, &err),
      TPX_INVALID_ARGUMENT);
  ck_assert_msg(strstr(err.message, "does not meet"), "%s", err.message);
  tpx_model_destroy(m);
}
END_TEST

/* The tiling check of a tensor the parts leave a hole in or overlap in
 * (declared one box at a time): the tensor and its parameters named. */
START_TEST(parts_tile_checked) {
  tpx_model *m = NULL;
  CHECK_OK(tpx_model_create(&m, &e_));
  int64_t a[2] = {4, 5}, b[2] = {2, 5};
  CHECK_OK(tpx_model_add_param(m, "x", "a", a, 2, TPX_DTYPE_F32, NULL, &e_));
  CHECK_OK(tpx_model_add_param(m, "x", "b", b, 2, TPX_DTYPE_F32, NULL, &e_));
  /* stored [7, 5]: a at rows 0..4, b at rows 5..7: row 4 left out */
  tpx_slice ba = {2, {0, 0}, {7, 5}}, bb = {2, {-5, 0}, {7, 5}};
  CHECK_OK(tpx_model_add_param_source_box(m, "x.a", "ck.s", &ba, 0, &e_));
  CHECK_OK(tpx_model_add_param_source_box(m, "x.b", "ck.s", &bb, 0, &e_));
  tpx_error err = {0};
  ck_assert_int_eq(tpx_model_check_param_sources(m, &err), TPX_VALIDATION);
  ck_assert_msg(strstr(err.message, "'ck.s' [7, 5]") &&
                    strstr(err.message, "'x.a' [0:4, 0:5]") &&
                    strstr(err.message, "'x.b' [5:7, 0:5]") &&
                    strstr(err.message, "cover 30 of its 35"),
                "%s", err.message);
  tpx_model_destroy(m);
  CHECK_OK(tpx_model_create(&m, &e_));
  CHECK_OK(tpx_model_add_param(m, "x", "a", a, 2, TPX_DTYPE_F32, NULL, &e_));
  CHECK_OK(tpx_model_add_param(m, "x", "b", b, 2, TPX_DTYPE_F32, NULL, &e_));
  tpx_slice ca = {2, {0, 0}, {5, 5}}, cb = {2, {-3, 0}, {5, 5}};
  CHECK_OK(tpx_model_add_param_source_box(m, "x.a", "ck.s", &ca, 0, &e_));
  CHECK_OK(tpx_model_add_param_source_box(m, "x.b", "ck.s", &cb, 0, &e_));
  tpx_error e2 = {0};
  ck_assert_int_eq(tpx_model_check_param_sources(m, &e2), TPX_VALIDATION);
  ck_assert_msg(strstr(e2.message, "'ck.s'") && strstr(e2.message, "overlap") &&
                    strstr(e2.message, "'x.a'") && strstr(e2.message, "'x.b'"),
                "%s", e2.message);
  tpx_model_destroy(m);
}
END_TEST

/* Removes the files of directory `dir` (no subdirectories) and it. */
static void remove_dir(const char *dir) {
  DIR *dd = opendir(dir);
  if (dd == NULL)
    return;
  struct dirent *de;
  char p[1200];
  while ((de = readdir(dd)) != NULL) {
    snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
    if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
      unlink(p);
  }
  closedir(dd);
  rmdir(dir);
}

/* Reads whole file `path` into *buf; its size. */
static size_t slurp(const char *path, unsigned char **buf) {
  FILE *f = fopen(path, "rb");
  ck_assert_msg(f != NULL, "%s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  *buf = malloc((size_t)n + 1);
  ck_assert_ptr_nonnull(*buf);
  ck_assert_int_eq(fread(*buf, 1, (size_t)n, f), n);
  fclose(f);
  return (size_t)n;
}

/* tpx_shard_write at dp_shard 2, 3, 4 and tp 2 (x dp 2), then
 * tpx_shard_merge: the merged file equals the source byte for byte; rank
 * 0's "fold" of attn.k.weight names ck.qkv.weight at offset -Q. */
static const int64_t trips[][2] = {{2, 1}, {3, 1}, {4, 1}, {1, 2}, {2, 2}};

START_TEST(shard_merge_round_trip) {
  const dims *d = &shapes[0];
  tpx_dtype dt = _i % 2 ? TPX_DTYPE_F32 : TPX_DTYPE_BF16;
  int64_t dp = trips[_i / 2][0], tp = trips[_i / 2][1];
  make_tmpdir();
  char src[512], ranks[512], out[512];
  snprintf(src, sizeof src, "%s", tmp("src"));
  snprintf(ranks, sizeof ranks, "%s", tmp("ranks"));
  snprintf(out, sizeof out, "%s", tmp("out"));
  ck_assert_int_eq(mkdir(src, 0700), 0);
  write_split(src, d, dt, -1, -1);
  tpx_model *m = split_model(d, dt);
  tpx_mesh *mesh = NULL;
  tpx_sharding *sh = sharding(m, &mesh, dp, tp);
  tpx_checkpoint_reader *rd = NULL;
  CHECK_OK(tpx_checkpoint_reader_create(src, NULL, &rd, &e_));
  CHECK_OK(tpx_shard_write(rd, sh, ranks, NULL, &e_));
  /* rank 0's fold items */
  char r0[600];
  tpx_shard_file_name(0, dp * tp, r0, sizeof r0);
  char path[1200];
  snprintf(path, sizeof path, "%s/%s", ranks, r0);
  tpx_checkpoint_reader *rr = NULL;
  CHECK_OK(tpx_checkpoint_reader_create(path, NULL, &rr, &e_));
  const char *ts = tpx_checkpoint_metadata(rr, "tpx.tensors");
  const char *ms = tpx_checkpoint_metadata(rr, "tpx.mesh");
  tpx_shard_meta meta;
  CHECK_OK(tpx_shard_meta_parse(ms, strlen(ms), ts, strlen(ts),
                                tpx_checkpoint_metadata(rr, "tpx.rank"), &meta,
                                &e_));
  int seen = 0;
  for (size_t i = 0; i < meta.num_tensors; i++) {
    ck_assert_msg(strncmp(meta.tensors[i].name, "ck.", 3) != 0, "%s",
                  meta.tensors[i].name);
    if (strcmp(meta.tensors[i].name, "attn.k.weight") != 0)
      continue;
    ck_assert_uint_eq(meta.tensors[i].num_fold, 1);
    ck_assert_str_eq(meta.tensors[i].fold[0].name, "ck.qkv.weight");
    ck_assert_int_eq(meta.tensors[i].fold[0].offsets[0], -d->Q);
    ck_assert_int_eq(meta.tensors[i].fold[0].shape[0], d->Q + d->K + d->V);
    seen = 1;
  }
  ck_assert(seen);
  tpx_shard_meta_free(&meta);
  tpx_checkpoint_reader_destroy(rr);
  CHECK_OK(tpx_shard_merge(ranks, out, NULL, &e_));
  unsigned char *x = NULL, *y = NULL;
  char a[1200], b[1200];
  snprintf(a, sizeof a, "%s/model.safetensors", src);
  snprintf(b, sizeof b, "%s/model.safetensors", out);
  size_t nx = slurp(a, &x), ny = slurp(b, &y);
  ck_assert_msg(nx == ny && memcmp(x, y, nx) == 0,
                "dp %lld tp %lld %s: the merged file differs (%zu / %zu "
                "bytes)",
                (long long)dp, (long long)tp, tpx_dtype_short_name(dt), nx, ny);
  free(x);
  free(y);
  tpx_checkpoint_reader_destroy(rd);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_model_destroy(m);
  remove_dir(src);
  remove_dir(ranks);
  remove_dir(out);
  remove_tmpdir();
}
END_TEST

/* "fold" items of the rank-file metadata: a box reaching past the tensor
 * (negative offsets) parses; one that does not meet it is refused. */
START_TEST(fold_meta_parse) {
  static const char mesh[] = "{\"dims\":[\"dp_shard\"],\"sizes\":[1]}";
  static const char ok[] =
      "{\"k\":{\"global_shape\":[3,5],\"offsets\":[0,0],"
      "\"placements\":[\"replicate\"],\"fold\":[{\"name\":\"qkv\","
      "\"offsets\":[-4,0],\"shape\":[10,5]}]}}";
  static const char off[] =
      "{\"k\":{\"global_shape\":[3,5],\"offsets\":[0,0],"
      "\"placements\":[\"replicate\"],\"fold\":[{\"name\":\"qkv\","
      "\"offsets\":[-10,0],\"shape\":[10,5]}]}}";
  tpx_shard_meta m;
  CHECK_OK(
      tpx_shard_meta_parse(mesh, strlen(mesh), ok, strlen(ok), "0", &m, &e_));
  ck_assert_int_eq(m.tensors[0].fold[0].offsets[0], -4);
  tpx_shard_meta_free(&m);
  tpx_error err = {0};
  ck_assert_int_eq(
      tpx_shard_meta_parse(mesh, strlen(mesh), off, strlen(off), "0", &m, &err),
      TPX_PARSE);
  ck_assert_msg(strstr(err.message, "meets it"), "%s", err.message);
  tpx_shard_meta_free(&m);
}
END_TEST

/* tpx_shard_meta and tpx_shard_tensor as they were before .ep and .on_moe
 * were added: what a caller built then allocates (the meta) and indexes
 * (the parse's tensors array). */
typedef struct {
  char *name;
  int ndim;
  int64_t global_shape[TPX_MAX_TENSOR_DIMS];
  int64_t offsets[TPX_MAX_TENSOR_DIMS];
  int num_placements;
  tpx_placement placements[TPX_MESH_MAX_DIMS];
  tpx_shard_fold_source *fold;
  size_t num_fold;
} older_tensor;
typedef struct {
  int mesh_ndim;
  char mesh_names[TPX_MESH_MAX_DIMS][TPX_MESH_NAME_MAX];
  int64_t mesh_sizes[TPX_MESH_MAX_DIMS];
  int64_t rank, world_size;
  older_tensor *tensors;
  size_t num_tensors;
} older_meta;

#define SAME_AT(a, b, f) ck_assert_uint_eq(offsetof(a, f), offsetof(b, f))

/* A caller built before the MoE fields parses an ep 2 rank file: nothing
 * is written past its tpx_shard_meta (by the parse or the free), and it
 * reads every tensor of the array at its own stride; a caller built now
 * reads ep and on_moe from the same bytes. */
START_TEST(older_caller_layout) {
  ck_assert_uint_eq(sizeof(tpx_shard_meta), sizeof(older_meta));
  ck_assert_uint_eq(sizeof(tpx_shard_tensor), sizeof(older_tensor));
  SAME_AT(tpx_shard_meta, older_meta, mesh_sizes);
  SAME_AT(tpx_shard_meta, older_meta, world_size);
  SAME_AT(tpx_shard_meta, older_meta, num_tensors);
  SAME_AT(tpx_shard_tensor, older_tensor, global_shape);
  SAME_AT(tpx_shard_tensor, older_tensor, placements);
  SAME_AT(tpx_shard_tensor, older_tensor, num_fold);
  static const char mesh[] =
      "{\"dims\":[\"dp_shard\"],\"sizes\":[4],"
      "\"moe\":{\"dims\":[\"ep_shard\",\"ep\"],\"sizes\":[2,2]}}";
  static const char tensors[] =
      "{\"a\":{\"global_shape\":[4],\"offsets\":[0],"
      "\"placements\":[\"replicate\"]},"
      "\"x\":{\"global_shape\":[4,6],\"offsets\":[2,0],\"mesh\":\"moe\","
      "\"placements\":[\"replicate\",\"shard(0)\"]}}";
  union {
    older_meta m;
    unsigned char b[sizeof(older_meta) + 64];
  } u;
  memset(&u, 0xA5, sizeof u);
  tpx_shard_meta *now = (tpx_shard_meta *)(void *)&u;
  CHECK_OK(tpx_shard_meta_parse(mesh, strlen(mesh), tensors, strlen(tensors),
                                "1", now, &e_));
  for (size_t i = sizeof(older_meta); i < sizeof u; i++)
    ck_assert_uint_eq(u.b[i], 0xA5);
  ck_assert_uint_eq(u.m.num_tensors, 2);
  ck_assert_str_eq(u.m.tensors[0].name, "a");
  ck_assert_str_eq(u.m.tensors[1].name, "x");
  ck_assert_int_eq(u.m.tensors[1].offsets[0], 2);
  ck_assert_int_eq(u.m.tensors[1].placements[1].kind, TPX_SHARD);
  ck_assert_int_eq(now->ep, 2);
  ck_assert_int_eq(now->tensors[0].on_moe, 0);
  ck_assert_int_eq(now->tensors[1].on_moe, 1);
  tpx_shard_meta_free(now);
  for (size_t i = sizeof(older_meta); i < sizeof u; i++)
    ck_assert_uint_eq(u.b[i], 0xA5);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("checkpoint-split");
  TCase *tc = tcase_create("split");
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, read_split_slices, 0,
                      (int)(sizeof shapes / sizeof shapes[0]) * 2 * NMESH);
  tcase_add_test(tc, headers_check_split);
  tcase_add_test(tc, split_refused);
  tcase_add_test(tc, parts_tile_checked);
  tcase_add_loop_test(tc, shard_merge_round_trip, 0,
                      (int)(sizeof trips / sizeof trips[0]) * 2);
  tcase_add_test(tc, fold_meta_parse);
  tcase_add_test(tc, older_caller_layout);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
