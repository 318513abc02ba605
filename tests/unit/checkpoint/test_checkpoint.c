/* test_checkpoint.c — the checkpoint reader and writer (core/src/checkpoint)
 * on files the test writes byte by byte: boxes (dim-0, dim-1, interior,
 * empty) and the bytes each reads, dtype conversion, bad headers (each a
 * case naming file and tensor), the model check, per-rank reads of a
 * sharding with uneven shards, the writer (pieces, several writers, shards
 * + index, unwritable directory, file-size limit: nothing under a final
 * name). */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tpx/tpx.h"

/* ---- helpers ---- */

static char tmpdir[512];

static void make_tmpdir(void) {
  const char *base = getenv("TMPDIR");
  snprintf(tmpdir, sizeof tmpdir, "%s/tpx-ckpt-XXXXXX", base ? base : "/tmp");
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

/* Number of entries in tmpdir (hidden temporaries included). */
static int count_files(void) {
  DIR *d = opendir(tmpdir);
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
      n++;
  if (d)
    closedir(d);
  return n;
}

static int exists(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0;
}

/* A safetensors file: 8-byte length, `header` verbatim, then `data_len`
 * bytes of `data`. */
static void write_raw(const char *path, const char *header, const void *data,
                      size_t data_len) {
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  uint64_t n = strlen(header);
  unsigned char len[8];
  for (int i = 0; i < 8; i++)
    len[i] = (unsigned char)(n >> (8 * i));
  ck_assert_int_eq(fwrite(len, 1, 8, f), 8);
  ck_assert_int_eq(fwrite(header, 1, n, f), n);
  if (data_len)
    ck_assert_int_eq(fwrite(data, 1, data_len, f), data_len);
  ck_assert_int_eq(fclose(f), 0);
}

/* The sample file: a = f32 [5, 7] holding 0..34, b = bf16 [4, 6] holding
 * 0..23, c = f16 [3] = {1, -2, 0.5}, d = f8_e4m3 [4] = {1, 2, -1, 2^-9}. */
static unsigned char sample_data[140 + 48 + 6 + 4];

static void write_sample(const char *path) {
  unsigned char *p = sample_data;
  for (int i = 0; i < 35; i++) {
    float f = (float)i;
    memcpy(p + 4 * i, &f, 4);
  }
  p += 140;
  for (int i = 0; i < 24; i++) {
    float f = (float)i;
    uint32_t u;
    memcpy(&u, &f, 4);
    uint16_t h = (uint16_t)(u >> 16); /* exact for small integers */
    memcpy(p + 2 * i, &h, 2);
  }
  p += 48;
  uint16_t c[3] = {0x3c00, 0xc000, 0x3800};
  memcpy(p, c, 6);
  p += 6;
  unsigned char d[4] = {0x38, 0x40, 0xb8, 0x01};
  memcpy(p, d, 4);
  write_raw(path,
            "{\"__metadata__\":{\"format\":\"pt\"},"
            "\"a\":{\"dtype\":\"F32\",\"shape\":[5,7],\"data_offsets\":[0,140]},"
            "\"b\":{\"dtype\":\"BF16\",\"shape\":[4,6],\"data_offsets\":[140,188]},"
            "\"c\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[188,194]},"
            "\"d\":{\"dtype\":\"F8_E4M3\",\"shape\":[4],\"data_offsets\":[194,198]}}",
            sample_data, sizeof sample_data);
}

static tpx_slice box2(int64_t o0, int64_t l0, int64_t o1, int64_t l1) {
  tpx_slice s;
  memset(&s, 0, sizeof s);
  s.ndim = 2;
  s.offset[0] = o0;
  s.length[0] = l0;
  s.offset[1] = o1;
  s.length[1] = l1;
  return s;
}

/* ---- reader: boxes ---- */

typedef struct box_case {
  const char *what;
  int64_t o0, l0, o1, l1;
  int64_t calls; /* read calls the box needs (contiguous runs) */
} box_case;

static const box_case box_cases[] = {
    {"whole tensor", 0, 5, 0, 7, 1},
    {"dim-0 slice: one range", 1, 3, 0, 7, 1},
    {"dim-1 slice: one range per row", 0, 5, 2, 3, 5},
    {"interior box", 2, 2, 1, 4, 2},
    {"one row", 4, 1, 0, 7, 1},
    {"empty rows", 3, 0, 0, 7, 0},
    {"empty cols", 0, 5, 7, 0, 0},
};

START_TEST(test_read_boxes) {
  const box_case *c = &box_cases[_i];
  make_tmpdir();
  write_sample(tmp("model.safetensors"));
  for (int method = 1; method <= 2; method++) {
    tpx_checkpoint_reader_options o = TPX_CHECKPOINT_READER_OPTIONS_INIT;
    o.io_method = method;
    tpx_checkpoint_reader *rd = NULL;
    tpx_error err = {0};
    ck_assert_msg(tpx_checkpoint_reader_create(tmpdir, &o, &rd, &err) ==
                      TPX_OK,
                  "%s", err.message);
    int64_t a = tpx_checkpoint_find(rd, "a");
    ck_assert_int_ge(a, 0);
    tpx_slice s = box2(c->o0, c->l0, c->o1, c->l1);
    float out[35];
    memset(out, 0xff, sizeof out);
    ck_assert_msg(tpx_checkpoint_read_slice(rd, a, &s, TPX_DTYPE_F32, out,
                                            sizeof out, &err) == TPX_OK,
                  "%s: %s", c->what, err.message);
    for (int64_t i = 0; i < c->l0; i++)
      for (int64_t j = 0; j < c->l1; j++)
        ck_assert_msg(out[i * c->l1 + j] ==
                          (float)((c->o0 + i) * 7 + c->o1 + j),
                      "%s: element (%lld, %lld)", c->what, (long long)i,
                      (long long)j);
    /* exactly the slice's bytes, in as many calls as contiguous runs */
    ck_assert_int_eq(tpx_checkpoint_bytes_read(rd), c->l0 * c->l1 * 4);
    ck_assert_int_eq(tpx_checkpoint_read_calls(rd), c->calls);
    /* the same box converted to bf16 and f64 */
    uint16_t h[35];
    double dd[35];
    ck_assert_int_eq(tpx_checkpoint_read_slice(rd, a, &s, TPX_DTYPE_BF16, h,
                                               sizeof h, &err),
                     TPX_OK);
    ck_assert_int_eq(tpx_checkpoint_read_slice(rd, a, &s, TPX_DTYPE_F64, dd,
                                               sizeof dd, &err),
                     TPX_OK);
    for (int64_t i = 0; i < c->l0 * c->l1; i++) {
      uint32_t u = (uint32_t)h[i] << 16;
      float f;
      memcpy(&f, &u, 4);
      ck_assert(f == out[i]);
      ck_assert(dd[i] == (double)out[i]);
    }
    tpx_checkpoint_reader_destroy(rd);
  }
  remove_tmpdir();
}
END_TEST

START_TEST(test_read_conversions) {
  make_tmpdir();
  write_sample(tmp("model.safetensors"));
  tpx_checkpoint_reader *rd = NULL;
  tpx_error err = {0};
  ck_assert_int_eq(tpx_checkpoint_reader_create(tmp("model.safetensors"),
                                                NULL, &rd, &err),
                   TPX_OK);
  /* bf16 dim-1 slice as f32 */
  float f[24];
  tpx_slice s = box2(1, 3, 2, 3);
  ck_assert_int_eq(tpx_checkpoint_read_slice(rd, tpx_checkpoint_find(rd, "b"),
                                             &s, TPX_DTYPE_F32, f, sizeof f,
                                             &err),
                   TPX_OK);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++)
      ck_assert(f[i * 3 + j] == (float)((1 + i) * 6 + 2 + j));
  /* f16 and f8_e4m3 as f32 */
  tpx_slice v;
  memset(&v, 0, sizeof v);
  v.ndim = 1;
  v.length[0] = 3;
  ck_assert_int_eq(tpx_checkpoint_read_slice(rd, tpx_checkpoint_find(rd, "c"),
                                             &v, TPX_DTYPE_F32, f, sizeof f,
                                             &err),
                   TPX_OK);
  ck_assert(f[0] == 1.0f && f[1] == -2.0f && f[2] == 0.5f);
  v.length[0] = 4;
  ck_assert_int_eq(tpx_checkpoint_read_slice(rd, tpx_checkpoint_find(rd, "d"),
                                             &v, TPX_DTYPE_F32, f, sizeof f,
                                             &err),
                   TPX_OK);
  ck_assert(f[0] == 1.0f && f[1] == 2.0f && f[2] == -1.0f &&
            f[3] == 1.0f / 512.0f);
  /* integers only to themselves; a short buffer and a box outside */
  int32_t i32[4];
  ck_assert_int_eq(tpx_checkpoint_convert(f, TPX_DTYPE_F32, i32,
                                          TPX_DTYPE_I32, 4, &err),
                   TPX_UNSUPPORTED);
  tpx_error e2 = {0};
  ck_assert_int_eq(tpx_checkpoint_read_slice(rd, tpx_checkpoint_find(rd, "d"),
                                             &v, TPX_DTYPE_F32, f, 8, &e2),
                   TPX_OUT_OF_RANGE);
  tpx_error e3 = {0};
  s = box2(4, 2, 0, 7);
  ck_assert_int_eq(tpx_checkpoint_read_slice(rd, tpx_checkpoint_find(rd, "a"),
                                             &s, TPX_DTYPE_F32, f, sizeof f,
                                             &e3),
                   TPX_OUT_OF_RANGE);
  ck_assert_ptr_nonnull(strstr(e3.message, "'a'"));
  /* f32 -> bf16 rounds to nearest even */
  float x[2] = {1.00390625f /* 1 + 2^-8: tie, to even = 1 */,
                1.01171875f /* 1 + 3*2^-8: tie, to even = 1 + 2^-6 */};
  uint16_t hb[2];
  ck_assert_int_eq(tpx_checkpoint_convert(hb, TPX_DTYPE_BF16, x,
                                          TPX_DTYPE_F32, 2, &err),
                   TPX_OK);
  ck_assert_uint_eq(hb[0], 0x3f80);
  ck_assert_uint_eq(hb[1], 0x3f82);
  ck_assert_str_eq(tpx_checkpoint_metadata(rd, "format"), "pt");
  tpx_checkpoint_reader_destroy(rd);
  remove_tmpdir();
}
END_TEST

/* ---- reader: bad inputs, each naming the file and the tensor ---- */

typedef struct bad_case {
  const char *what;
  const char *header;
  size_t data_len;
  tpx_status want;
  const char *names; /* must appear in the message */
} bad_case;

static const bad_case bad_cases[] = {
    {"truncated file (data section shorter than the offsets)",
     "{\"w\":{\"dtype\":\"F32\",\"shape\":[5,7],\"data_offsets\":[0,140]}}", 100,
     TPX_PARSE, "'w'"},
    {"offsets lie about the size",
     "{\"w\":{\"dtype\":\"F32\",\"shape\":[5,7],\"data_offsets\":[0,136]}}", 140,
     TPX_PARSE, "'w'"},
    {"overlapping tensors",
     "{\"p\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
     "\"q\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}",
     24, TPX_PARSE, "'q'"},
    {"negative offset",
     "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 8,
     TPX_PARSE, "'w'"},
    {"duplicate name",
     "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
     "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
     8, TPX_PARSE, "model.safetensors"},
    {"unknown dtype",
     "{\"w\":{\"dtype\":\"Q4\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
     TPX_PARSE, "'w'"},
};

START_TEST(test_bad_headers) {
  const bad_case *c = &bad_cases[_i];
  make_tmpdir();
  unsigned char zeros[256] = {0};
  const char *path = tmp("model.safetensors");
  write_raw(path, c->header, zeros, c->data_len);
  struct stat before;
  ck_assert_int_eq(stat(path, &before), 0);
  tpx_checkpoint_reader *rd = NULL;
  tpx_error err = {0};
  ck_assert_int_eq(tpx_checkpoint_reader_create(path, NULL, &rd, &err),
                   c->want);
  ck_assert_ptr_null(rd);
  ck_assert_msg(strstr(err.message, path) && strstr(err.message, c->names),
                "%s: message '%s' lacks the file or '%s'", c->what,
                err.message, c->names);
  struct stat after;
  ck_assert_int_eq(stat(path, &after), 0); /* the source is not modified */
  ck_assert_int_eq(after.st_size, before.st_size);
  ck_assert_int_eq(after.st_mtime, before.st_mtime);
  remove_tmpdir();
}
END_TEST

START_TEST(test_header_beyond_file) {
  make_tmpdir();
  const char *path = tmp("model.safetensors");
  FILE *f = fopen(path, "wb");
  unsigned char len[8] = {0x00, 0x10, 0, 0, 0, 0, 0, 0}; /* 4096 */
  fwrite(len, 1, 8, f);
  fputs("{}", f);
  fclose(f);
  tpx_error err = {0};
  tpx_checkpoint_reader *rd = NULL;
  ck_assert_int_eq(tpx_checkpoint_reader_create(path, NULL, &rd, &err),
                   TPX_PARSE);
  ck_assert_ptr_nonnull(strstr(err.message, path));
  remove_tmpdir();
}
END_TEST

START_TEST(test_index_missing_shard) {
  make_tmpdir();
  write_sample(tmp("model-00001-of-00002.safetensors"));
  FILE *f = fopen(tmp("model.safetensors.index.json"), "w");
  fputs("{\"metadata\":{},\"weight_map\":{\"a\":\"model-00001-of-00002."
        "safetensors\",\"z\":\"model-00002-of-00002.safetensors\"}}",
        f);
  fclose(f);
  tpx_error err = {0};
  tpx_checkpoint_reader *rd = NULL;
  ck_assert_int_eq(tpx_checkpoint_reader_create(tmpdir, NULL, &rd, &err),
                   TPX_NOT_FOUND);
  ck_assert_ptr_nonnull(strstr(err.message, "model-00002-of-00002"));
  ck_assert_ptr_nonnull(strstr(err.message, "\"z\""));
  remove_tmpdir();
}
END_TEST

/* ---- reader against a model and a sharding ---- */

/* Model: col (linear, weight f32 [7, 5], bias f32 [7]), row (linear,
 * weight f32 [5, 7]) — colwise shards dim 0, rowwise dim 1. */
static tpx_model *small_model(tpx_dtype wdtype, int64_t rows) {
  tpx_model *m = NULL;
  tpx_error e = {0};
  ck_assert_int_eq(tpx_model_create(&m, &e), TPX_OK);
  int64_t cw[2] = {rows, 5}, cb[1] = {rows}, rw[2] = {5, rows};
  ck_assert_int_eq(tpx_model_add_module(m, "col", TPX_MODULE_LINEAR, NULL, &e),
                   TPX_OK);
  ck_assert_int_eq(tpx_model_add_module(m, "row", TPX_MODULE_LINEAR, NULL, &e),
                   TPX_OK);
  ck_assert_int_eq(tpx_model_add_param(m, "col", "weight", cw, 2, wdtype, NULL,
                                       &e),
                   TPX_OK);
  ck_assert_int_eq(tpx_model_add_param(m, "col", "bias", cb, 1,
                                       TPX_DTYPE_F32, NULL, &e),
                   TPX_OK);
  ck_assert_int_eq(tpx_model_add_param(m, "row", "weight", rw, 2,
                                       TPX_DTYPE_F32, NULL, &e),
                   TPX_OK);
  return m;
}

/* The model's checkpoint: element i of every tensor holds 1000*k + i. */
static void write_model_file(const char *path) {
  float data[35 + 7 + 35];
  for (int i = 0; i < 35; i++)
    data[i] = (float)(1000 + i);
  for (int i = 0; i < 7; i++)
    data[35 + i] = (float)(2000 + i);
  for (int i = 0; i < 35; i++)
    data[42 + i] = (float)(3000 + i);
  write_raw(path,
            "{\"col.weight\":{\"dtype\":\"F32\",\"shape\":[7,5],"
            "\"data_offsets\":[0,140]},"
            "\"col.bias\":{\"dtype\":\"F32\",\"shape\":[7],"
            "\"data_offsets\":[140,168]},"
            "\"row.weight\":{\"dtype\":\"F32\",\"shape\":[5,7],"
            "\"data_offsets\":[168,308]}}",
            data, sizeof data);
}

static float model_value(const char *name, int64_t i) {
  return (float)((strcmp(name, "col.weight") == 0   ? 1000
                  : strcmp(name, "col.bias") == 0 ? 2000
                                                  : 3000) +
                 i);
}

static tpx_sharding *small_sharding(const tpx_model *m, tpx_mesh **mesh,
                                    int64_t dp, int64_t tp) {
  static const char plan_json[] =
      "{\"format\":\"tpx-plan/1\",\"entries\":["
      "{\"module\":\"col\",\"style\":\"colwise\"},"
      "{\"module\":\"row\",\"style\":\"rowwise\"}]}";
  tpx_error e = {0};
  tpx_plan *plan = NULL;
  ck_assert_msg(tpx_plan_from_json(plan_json, strlen(plan_json), "test",
                                   &plan, &e) == TPX_OK,
                "%s", e.message);
  const char *names[3] = {"dp_replicate", "dp_shard", "tp"};
  int64_t sizes[3] = {1, dp, tp};
  ck_assert_int_eq(tpx_mesh_create(names, sizes, 3, mesh, &e), TPX_OK);
  tpx_sharding *sh = NULL;
  ck_assert_msg(tpx_sharding_create(m, plan, *mesh, NULL, &sh, &e) == TPX_OK,
                "%s", e.message);
  tpx_plan_destroy(plan);
  return sh;
}

START_TEST(test_check_model) {
  make_tmpdir();
  write_model_file(tmp("model.safetensors"));
  tpx_checkpoint_reader *rd = NULL;
  tpx_error err = {0};
  ck_assert_int_eq(tpx_checkpoint_reader_create(tmpdir, NULL, &rd, &err),
                   TPX_OK);
  tpx_model *good = small_model(TPX_DTYPE_F32, 7);
  ck_assert_int_eq(tpx_checkpoint_check_model(rd, good, &err), TPX_OK);
  /* shape disagrees with the config's model */
  tpx_model *shape = small_model(TPX_DTYPE_F32, 8);
  ck_assert_int_eq(tpx_checkpoint_check_model(rd, shape, &err),
                   TPX_VALIDATION);
  ck_assert_ptr_nonnull(strstr(err.message, "'col.weight'"));
  ck_assert_ptr_nonnull(strstr(err.message, "model.safetensors"));
  /* dtype disagrees */
  tpx_error e2 = {0};
  tpx_model *dtype = small_model(TPX_DTYPE_BF16, 7);
  ck_assert_int_eq(tpx_checkpoint_check_model(rd, dtype, &e2),
                   TPX_VALIDATION);
  ck_assert_ptr_nonnull(strstr(e2.message, "BF16"));
  /* a parameter the file lacks */
  tpx_error e3 = {0};
  int64_t s1[1] = {5};
  ck_assert_int_eq(tpx_model_add_param(good, "row", "bias", s1, 1,
                                       TPX_DTYPE_F32, NULL, &e3),
                   TPX_OK);
  ck_assert_int_eq(tpx_checkpoint_check_model(rd, good, &e3), TPX_NOT_FOUND);
  ck_assert_ptr_nonnull(strstr(e3.message, "'row.bias'"));
  tpx_model_destroy(good);
  tpx_model_destroy(shape);
  tpx_model_destroy(dtype);
  tpx_checkpoint_reader_destroy(rd);
  remove_tmpdir();
}
END_TEST

/* Every rank of dp_shard x tp (uneven: 7 rows over tp 3, then over dp)
 * reads exactly its slice, threaded, and the bytes read equal the slices'. */
START_TEST(test_read_rank) {
  static const int64_t meshes[][2] = {{1, 3}, {3, 3}, {2, 3}, {3, 1}};
  int64_t dp = meshes[_i][0], tp = meshes[_i][1];
  make_tmpdir();
  write_model_file(tmp("model.safetensors"));
  tpx_model *m = small_model(TPX_DTYPE_F32, 7);
  tpx_mesh *mesh = NULL;
  tpx_sharding *sh = small_sharding(m, &mesh, dp, tp);
  tpx_checkpoint_reader *rd = NULL;
  tpx_error err = {0};
  tpx_checkpoint_reader_options o = TPX_CHECKPOINT_READER_OPTIONS_INIT;
  o.num_threads = 3;
  ck_assert_int_eq(tpx_checkpoint_reader_create(tmpdir, &o, &rd, &err),
                   TPX_OK);
  int64_t total = 0;
  for (int64_t r = 0; r < dp * tp; r++) {
    float bufs[3][40];
    tpx_checkpoint_dest dests[3];
    for (int p = 0; p < 3; p++)
      dests[p] = (tpx_checkpoint_dest){bufs[p], sizeof bufs[p],
                                       TPX_DTYPE_F32};
    ck_assert_msg(tpx_checkpoint_read_rank(rd, sh, r, dests, &err) == TPX_OK,
                  "%s", err.message);
    for (int p = 0; p < 3; p++) {
      tpx_slice s;
      tpx_param_info info;
      ck_assert_int_eq(tpx_sharding_local_slice(sh, p, r, &s, &err), TPX_OK);
      ck_assert_int_eq(tpx_model_param(m, p, &info, &err), TPX_OK);
      total += tpx_slice_numel(&s) * 4;
      int64_t k = 0;
      int64_t cols = info.ndim == 2 ? info.shape[1] : 1;
      int64_t l1 = s.ndim == 2 ? s.length[1] : 1;
      int64_t o1 = s.ndim == 2 ? s.offset[1] : 0;
      for (int64_t i = 0; i < s.length[0]; i++)
        for (int64_t j = 0; j < l1; j++, k++)
          ck_assert_msg(bufs[p][k] == model_value(info.fqn,
                                                  (s.offset[0] + i) * cols +
                                                      o1 + j),
                        "rank %lld %s element %lld", (long long)r, info.fqn,
                        (long long)k);
    }
  }
  ck_assert_int_eq(tpx_checkpoint_bytes_read(rd), total);
  /* a buffer too small names the parameter */
  float small[1];
  tpx_checkpoint_dest d3[3] = {{small, sizeof small, TPX_DTYPE_F32},
                               {NULL, 0, TPX_DTYPE_F32},
                               {NULL, 0, TPX_DTYPE_F32}};
  tpx_error e2 = {0};
  ck_assert_int_eq(tpx_checkpoint_read_rank(rd, sh, 0, d3, &e2),
                   TPX_OUT_OF_RANGE);
  ck_assert_ptr_nonnull(strstr(e2.message, "'col.weight'"));
  tpx_checkpoint_reader_destroy(rd);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_model_destroy(m);
  remove_tmpdir();
}
END_TEST

/* ---- writer ---- */

static void fill(float *buf, const char *name, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    buf[i] = model_value(name, i);
}

/* Every rank of a dp x tp mesh writes its pieces with write_rank, through
 * `writers` writers (processes, one after the other here); the result
 * reads back whole, and no final name exists before the last finish. */
START_TEST(test_write_ranks) {
  /* dp, tp, max_shard_size, files (data bytes: col.bias 28, col.weight
   * 140, row.weight 140, in name order) */
  static const int64_t cases[][4] = {
      {3, 3, 0, 1}, {2, 3, 150, 3}, {1, 3, 0, 1}, {3, 1, 200, 2}};
  int64_t dp = cases[_i][0], tp = cases[_i][1], max = cases[_i][2];
  make_tmpdir();
  tpx_model *m = small_model(TPX_DTYPE_F32, 7);
  tpx_mesh *mesh = NULL;
  tpx_sharding *sh = small_sharding(m, &mesh, dp, tp);
  tpx_checkpoint_entry *entries = NULL;
  size_t ne = 0;
  tpx_error err = {0};
  ck_assert_int_eq(tpx_checkpoint_model_entries(m, &entries, &ne, &err),
                   TPX_OK);
  ck_assert_uint_eq(ne, 3);
  int64_t world = dp * tp;
  float full[3][35];
  const char *names[3] = {"col.weight", "col.bias", "row.weight"};
  for (int p = 0; p < 3; p++)
    fill(full[p], names[p], 35);
  const char *final = max ? "model.safetensors.index.json"
                          : "model.safetensors";
  for (int64_t r = 0; r < world; r++) {
    tpx_checkpoint_writer_options o = TPX_CHECKPOINT_WRITER_OPTIONS_INIT;
    o.max_shard_size = max;
    o.num_writers = world;
    o.writer_rank = r;
    tpx_checkpoint_writer *w = NULL;
    ck_assert_msg(tpx_checkpoint_writer_create(tmpdir, entries, ne, &o, &w,
                                               &err) == TPX_OK,
                  "%s", err.message);
    float local[3][35];
    tpx_checkpoint_dest src[3];
    for (int p = 0; p < 3; p++) {
      tpx_slice s;
      ck_assert_int_eq(tpx_sharding_local_slice(sh, p, r, &s, &err), TPX_OK);
      tpx_param_info info;
      tpx_model_param(m, p, &info, NULL);
      int64_t cols = info.ndim == 2 ? info.shape[1] : 1, k = 0;
      int64_t l1 = s.ndim == 2 ? s.length[1] : 1;
      int64_t o1 = s.ndim == 2 ? s.offset[1] : 0;
      for (int64_t i = 0; i < s.length[0]; i++)
        for (int64_t j = 0; j < l1; j++)
          local[p][k++] = full[p][(s.offset[0] + i) * cols + o1 + j];
      src[p] = (tpx_checkpoint_dest){local[p], sizeof local[p],
                                     TPX_DTYPE_F32};
    }
    ck_assert_msg(tpx_checkpoint_write_rank(w, sh, r, src, &err) == TPX_OK,
                  "%s", err.message);
    int done = -1;
    ck_assert_msg(tpx_checkpoint_writer_finish(w, &done, &err) == TPX_OK,
                  "%s", err.message);
    ck_assert_int_eq(done, r == world - 1);
    ck_assert_int_eq(exists(tmp(final)), r == world - 1);
    tpx_checkpoint_writer_destroy(w);
  }
  /* only final files remain: markers and temporaries are gone */
  DIR *d = opendir(tmpdir);
  struct dirent *de;
  while ((de = readdir(d)) != NULL)
    ck_assert_msg(strcmp(de->d_name, ".") == 0 ||
                      strcmp(de->d_name, "..") == 0 || de->d_name[0] != '.',
                  "left behind: %s", de->d_name);
  closedir(d);
  tpx_checkpoint_reader *rd = NULL;
  ck_assert_msg(tpx_checkpoint_reader_create(tmpdir, NULL, &rd, &err) ==
                    TPX_OK,
                "%s", err.message);
  ck_assert_uint_eq(tpx_checkpoint_num_files(rd), (size_t)cases[_i][3]);
  for (int p = 0; p < 3; p++) {
    int64_t t = tpx_checkpoint_find(rd, names[p]);
    tpx_checkpoint_tensor info;
    ck_assert_int_eq(tpx_checkpoint_tensor_info(rd, (size_t)t, &info, &err),
                     TPX_OK);
    tpx_slice s;
    memset(&s, 0, sizeof s);
    s.ndim = info.ndim;
    memcpy(s.length, info.shape, sizeof s.length);
    float back[35];
    ck_assert_int_eq(tpx_checkpoint_read_slice(rd, t, &s, TPX_DTYPE_F32, back,
                                               sizeof back, &err),
                     TPX_OK);
    ck_assert_mem_eq(back, full[p], (size_t)info.nbytes);
  }
  tpx_checkpoint_reader_destroy(rd);
  free(entries);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_model_destroy(m);
  remove_tmpdir();
}
END_TEST

static const tpx_checkpoint_entry big_entry = {
    "big.weight", TPX_DTYPE_F32, 2, {64, 64, 0, 0, 0, 0, 0, 0}};

/* A writer destroyed before finishing leaves nothing behind. */
START_TEST(test_write_abandoned) {
  make_tmpdir();
  tpx_checkpoint_writer *w = NULL;
  tpx_error err = {0};
  ck_assert_int_eq(tpx_checkpoint_writer_create(tmpdir, &big_entry, 1, NULL,
                                                &w, &err),
                   TPX_OK);
  ck_assert_int_eq(count_files(), 1); /* the temporary */
  ck_assert(!exists(tmp("model.safetensors")));
  tpx_checkpoint_writer_destroy(w);
  ck_assert_int_eq(count_files(), 0);
  remove_tmpdir();
}
END_TEST

START_TEST(test_write_unwritable) {
  make_tmpdir();
  /* root ignores permission bits: /proc takes no new files for anyone */
  const char *dir = geteuid() == 0 ? "/proc" : tmp("ro");
  if (geteuid() != 0) {
    ck_assert_int_eq(mkdir(dir, 0555), 0);
  }
  tpx_checkpoint_writer *w = NULL;
  tpx_error err = {0};
  ck_assert_int_eq(tpx_checkpoint_writer_create(dir, &big_entry, 1, NULL, &w,
                                                &err),
                   TPX_IO);
  ck_assert_ptr_null(w);
  ck_assert_ptr_nonnull(strstr(err.message, dir));
  tpx_error e2 = {0};
  ck_assert_int_eq(tpx_checkpoint_writer_create(tmp("missing"), &big_entry, 1,
                                                NULL, &w, &e2),
                   TPX_IO);
  ck_assert_ptr_nonnull(strstr(e2.message, "missing"));
  if (geteuid() != 0)
    rmdir(dir);
  remove_tmpdir();
}
END_TEST

/* A file-size limit (the stand-in for a full disk: EFBIG as ENOSPC) fails
 * the write naming file and tensor; nothing stays under a final name. */
START_TEST(test_write_file_size_limit) {
  make_tmpdir();
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit rl = {4096, 4096};
  ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
  tpx_checkpoint_writer *w = NULL;
  tpx_error err = {0};
  ck_assert_int_eq(tpx_checkpoint_writer_create(tmpdir, &big_entry, 1, NULL,
                                                &w, &err),
                   TPX_OK);
  static float data[64 * 64];
  tpx_slice s = box2(0, 64, 0, 64);
  ck_assert_int_eq(tpx_checkpoint_write_slice(w, "big.weight", &s,
                                              TPX_DTYPE_F32, data, &err),
                   TPX_IO);
  ck_assert_ptr_nonnull(strstr(err.message, "'big.weight'"));
  ck_assert_ptr_nonnull(strstr(err.message, "model.safetensors"));
  ck_assert_ptr_nonnull(strstr(err.message, strerror(EFBIG)));
  tpx_checkpoint_writer_destroy(w);
  ck_assert(!exists(tmp("model.safetensors")));
  ck_assert_int_eq(count_files(), 0);
  remove_tmpdir();
}
END_TEST

/* Bad writer arguments. */
START_TEST(test_write_bad_args) {
  make_tmpdir();
  tpx_checkpoint_entry two[2] = {big_entry, big_entry};
  tpx_checkpoint_writer *w = NULL;
  tpx_error err = {0};
  ck_assert_int_eq(tpx_checkpoint_writer_create(tmpdir, two, 2, NULL, &w,
                                                &err),
                   TPX_ALREADY_EXISTS);
  ck_assert_ptr_nonnull(strstr(err.message, "big.weight"));
  ck_assert_int_eq(count_files(), 0);
  ck_assert_int_eq(tpx_checkpoint_writer_create(tmpdir, &big_entry, 1, NULL,
                                                &w, &err),
                   TPX_OK);
  tpx_slice s = box2(0, 65, 0, 64);
  static float data[65 * 64];
  tpx_error e2 = {0};
  ck_assert_int_eq(tpx_checkpoint_write_slice(w, "big.weight", &s,
                                              TPX_DTYPE_F32, data, &e2),
                   TPX_OUT_OF_RANGE);
  tpx_error e3 = {0};
  ck_assert_int_eq(tpx_checkpoint_write_slice(w, "nope", &s, TPX_DTYPE_F32,
                                              data, &e3),
                   TPX_NOT_FOUND);
  /* finishing with a hole at the end is refused; nothing is published */
  s = box2(0, 32, 0, 64);
  ck_assert_int_eq(tpx_checkpoint_write_slice(w, "big.weight", &s,
                                              TPX_DTYPE_F32, data, &e3),
                   TPX_OK);
  tpx_error e4 = {0};
  ck_assert_int_eq(tpx_checkpoint_writer_finish(w, NULL, &e4), TPX_IO);
  ck_assert(!exists(tmp("model.safetensors")));
  tpx_checkpoint_writer_destroy(w);
  ck_assert_int_eq(count_files(), 0);
  remove_tmpdir();
}
END_TEST

static Suite *ckpt_suite(void) {
  Suite *s = suite_create("checkpoint");
  TCase *tc = tcase_create("checkpoint");
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, test_read_boxes, 0,
                      (int)(sizeof box_cases / sizeof *box_cases));
  tcase_add_test(tc, test_read_conversions);
  tcase_add_loop_test(tc, test_bad_headers, 0,
                      (int)(sizeof bad_cases / sizeof *bad_cases));
  tcase_add_test(tc, test_header_beyond_file);
  tcase_add_test(tc, test_index_missing_shard);
  tcase_add_test(tc, test_check_model);
  tcase_add_loop_test(tc, test_read_rank, 0, 4);
  tcase_add_loop_test(tc, test_write_ranks, 0, 4);
  tcase_add_test(tc, test_write_abandoned);
  tcase_add_test(tc, test_write_unwritable);
  tcase_add_test(tc, test_write_file_size_limit);
  tcase_add_test(tc, test_write_bad_args);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(ckpt_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
