/* test_checkpoint.c — the checkpoint reader and writer (core/src/checkpoint)
 * on files the test writes byte by byte: boxes (dim-0, dim-1, interior,
 * empty) and the bytes each reads, dtype conversion, bad headers (each a
 * case naming file and tensor), the model check, per-rank reads of a
 * sharding with uneven shards, the writer (pieces, several writers, shards
 * + index, several processes at once, unwritable directory, file-size
 * limit: nothing under a final name). */
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
#include <sys/wait.h>
#include <unistd.h>

#include "tpx/tpx.h"

/* ---- helpers ---- */

#include "../test_tmpdir.h"
#include "ckpt_test_util.h"

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
  ckt_write_raw(
      path,
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
    ck_assert_msg(tpx_checkpoint_reader_create(tmpdir, &o, &rd, &err) == TPX_OK,
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
        ck_assert_msg(
            out[i * c->l1 + j] == (float)((c->o0 + i) * 7 + c->o1 + j),
            "%s: element (%lld, %lld)", c->what, (long long)i, (long long)j);
    /* exactly the slice's bytes, in as many calls as contiguous runs */
    ck_assert_int_eq(tpx_checkpoint_bytes_read(rd), c->l0 * c->l1 * 4);
    ck_assert_int_eq(tpx_checkpoint_read_calls(rd), c->calls);
    /* the same box converted to bf16 and f64 */
    uint16_t h[35];
    double dd[35];
    ck_assert_int_eq(
        tpx_checkpoint_read_slice(rd, a, &s, TPX_DTYPE_BF16, h, sizeof h, &err),
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
  ck_assert_int_eq(
      tpx_checkpoint_reader_create(tmp("model.safetensors"), NULL, &rd, &err),
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
  ck_assert_int_eq(
      tpx_checkpoint_convert(f, TPX_DTYPE_F32, i32, TPX_DTYPE_I32, 4, &err),
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
  ck_assert_int_eq(
      tpx_checkpoint_convert(hb, TPX_DTYPE_BF16, x, TPX_DTYPE_F32, 2, &err),
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
     "{\"w\":{\"dtype\":\"F32\",\"shape\":[5,7],\"data_offsets\":[0,140]}}",
     100, TPX_PARSE, "'w'"},
    {"offsets lie about the size",
     "{\"w\":{\"dtype\":\"F32\",\"shape\":[5,7],\"data_offsets\":[0,136]}}",
     140, TPX_PARSE, "'w'"},
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
  ckt_write_raw(path, c->header, zeros, c->data_len);
  struct stat before;
  ck_assert_int_eq(stat(path, &before), 0);
  tpx_checkpoint_reader *rd = NULL;
  tpx_error err = {0};
  ck_assert_int_eq(tpx_checkpoint_reader_create(path, NULL, &rd, &err),
                   c->want);
  ck_assert_ptr_null(rd);
  ck_assert_msg(strstr(err.message, path) && strstr(err.message, c->names),
                "%s: message '%s' lacks the file or '%s'", c->what, err.message,
                c->names);
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
  ck_assert_int_eq(
      tpx_model_add_param(m, "col", "weight", cw, 2, wdtype, NULL, &e), TPX_OK);
  ck_assert_int_eq(
      tpx_model_add_param(m, "col", "bias", cb, 1, TPX_DTYPE_F32, NULL, &e),
      TPX_OK);
  ck_assert_int_eq(
      tpx_model_add_param(m, "row", "weight", rw, 2, TPX_DTYPE_F32, NULL, &e),
      TPX_OK);
  return m;
}

/* The model's checkpoint: element i of every tensor holds 1000*k + i. */
static void write_model_file(const char *path) {
  float data[35 + 7 + 35];
  for (int i = 0; i < 35; i++) data[i] = (float)(1000 + i);
  for (int i = 0; i < 7; i++) data[35 + i] = (float)(2000 + i);
  for (int i = 0; i < 35; i++) data[42 + i] = (float)(3000 + i);
  ckt_write_raw(path,
                "{\"col.weight\":{\"dtype\":\"F32\",\"shape\":[7,5],"
                "\"data_offsets\":[0,140]},"
                "\"col.bias\":{\"dtype\":\"F32\",\"shape\":[7],"
                "\"data_offsets\":[140,168]},"
                "\"row.weight\":{\"dtype\":\"F32\",\"shape\":[5,7],"
                "\"data_offsets\":[168,308]}}",
                data, sizeof data);
}

static float model_value(const char *name, int64_t i) {
  return (float)((strcmp(name, "col.weight") == 0 ? 1000
                  : strcmp(name, "col.bias") == 0 ? 2000
                                                  : 3000) +
                 i);
}

static tpx_sharding *small_sharding(const tpx_model *m, tpx_mesh **mesh,
                                    int64_t dp, int64_t tp) {
  return ckt_sharding(m,
                      "{\"format\":\"tpx-plan/1\",\"entries\":["
                      "{\"module\":\"col\",\"style\":\"colwise\"},"
                      "{\"module\":\"row\",\"style\":\"rowwise\"}]}",
                      mesh, dp, tp);
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
  ck_assert_int_eq(tpx_checkpoint_check_model(rd, shape, &err), TPX_VALIDATION);
  ck_assert_ptr_nonnull(strstr(err.message, "'col.weight'"));
  ck_assert_ptr_nonnull(strstr(err.message, "model.safetensors"));
  /* dtype disagrees */
  tpx_error e2 = {0};
  tpx_model *dtype = small_model(TPX_DTYPE_BF16, 7);
  ck_assert_int_eq(tpx_checkpoint_check_model(rd, dtype, &e2), TPX_VALIDATION);
  ck_assert_ptr_nonnull(strstr(e2.message, "BF16"));
  /* a parameter the file lacks */
  tpx_error e3 = {0};
  int64_t s1[1] = {5};
  ck_assert_int_eq(
      tpx_model_add_param(good, "row", "bias", s1, 1, TPX_DTYPE_F32, NULL, &e3),
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
  ck_assert_int_eq(tpx_checkpoint_reader_create(tmpdir, &o, &rd, &err), TPX_OK);
  int64_t total = 0;
  for (int64_t r = 0; r < dp * tp; r++) {
    float bufs[3][40];
    tpx_checkpoint_dest dests[3];
    for (int p = 0; p < 3; p++)
      dests[p] = (tpx_checkpoint_dest){bufs[p], sizeof bufs[p], TPX_DTYPE_F32};
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
          ck_assert_msg(
              bufs[p][k] ==
                  model_value(info.fqn, (s.offset[0] + i) * cols + o1 + j),
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

/* ---- fused experts stored per expert ---- */

/* A one-layer MoE: E experts of I rows (gate / up) over H, a router, an
 * embedding stored as is. Fused parameters as transformers 5 holds them. */
enum { MOE_E = 4, MOE_I = 3, MOE_H = 5 };

static tpx_model *moe_model(void) {
  tpx_model *m = NULL;
  tpx_error e = {0};
  ck_assert_int_eq(tpx_model_create(&m, &e), TPX_OK);
  int64_t emb[2] = {7, MOE_H}, gate[2] = {MOE_E, MOE_H},
          gu[3] = {MOE_E, 2 * MOE_I, MOE_H}, dn[3] = {MOE_E, MOE_H, MOE_I};
  ck_assert_int_eq(tpx_model_add_module(m, "model.embed_tokens",
                                        TPX_MODULE_EMBEDDING, NULL, &e),
                   TPX_OK);
  ck_assert_int_eq(tpx_model_add_module(m, "model.layers.0.mlp.gate",
                                        TPX_MODULE_LINEAR, NULL, &e),
                   TPX_OK);
  ck_assert_int_eq(tpx_model_add_param(m, "model.embed_tokens", "weight", emb,
                                       2, TPX_DTYPE_F32, NULL, &e),
                   TPX_OK);
  ck_assert_int_eq(tpx_model_add_param(m, "model.layers.0.mlp.gate", "weight",
                                       gate, 2, TPX_DTYPE_F32, NULL, &e),
                   TPX_OK);
  ck_assert_int_eq(tpx_model_add_param(m, "model.layers.0.mlp.experts",
                                       "gate_up_proj", gu, 3, TPX_DTYPE_F32,
                                       NULL, &e),
                   TPX_OK);
  ck_assert_int_eq(tpx_model_add_param(m, "model.layers.0.mlp.experts",
                                       "down_proj", dn, 3, TPX_DTYPE_F32, NULL,
                                       &e),
                   TPX_OK);
  return m;
}

/* Source tensors: kind 0 embed [7,H], 1 router [E,H], 2 gate_e [I,H],
 * 3 up_e [I,H], 4 down_e [H,I]; element i of source (kind, e) holds
 * 10000*kind + 1000*e + i. */
static float moe_value(int kind, int e, int64_t i) {
  return (float)(10000 * kind + 1000 * e + i);
}

/* Writes the per-expert checkpoint under HF (mixtral 0) or Mixtral names;
 * `skip` drops tensor number skip (-1: none), `bad` gives it another
 * shape. */
static void write_moe_file(const char *path, int mixtral, int skip, int bad) {
  static char header[8192];
  static float data[7 * MOE_H + MOE_E * MOE_H + MOE_E * 3 * MOE_I * MOE_H + 64];
  const char *blk =
      mixtral ? "model.layers.0.block_sparse_moe" : "model.layers.0.mlp";
  const char *pn[3] = {mixtral ? "w1" : "gate_proj", mixtral ? "w3" : "up_proj",
                       mixtral ? "w2" : "down_proj"};
  size_t h = 0, off = 0;
  int t = 0;
  h += (size_t)snprintf(header + h, sizeof header - h, "{");
  for (int kind = 0; kind < 5; kind++) {
    int ne = kind == 0 ? 1 : kind == 1 ? 1 : MOE_E;
    for (int e = 0; e < ne; e++, t++) {
      if (t == skip)
        continue;
      char name[200];
      int64_t r = 0, c = 0;
      if (kind == 0) {
        snprintf(name, sizeof name, "model.embed_tokens.weight");
        r = 7, c = MOE_H;
      } else if (kind == 1) {
        snprintf(name, sizeof name, "%s.gate.weight", blk);
        r = MOE_E, c = MOE_H;
      } else {
        snprintf(name, sizeof name, "%s.experts.%d.%s.weight", blk, e,
                 pn[kind - 2]);
        r = kind == 4 ? MOE_H : MOE_I;
        c = kind == 4 ? MOE_I : MOE_H;
      }
      if (t == bad)
        c += 1;
      int64_t n = r * c;
      for (int64_t i = 0; i < n && t != bad; i++)
        data[off + (size_t)i] = moe_value(kind, e, i);
      h += (size_t)snprintf(header + h, sizeof header - h,
                            "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%lld,%lld],"
                            "\"data_offsets\":[%zu,%zu]}",
                            h > 1 ? "," : "", name, (long long)r, (long long)c,
                            off * 4, (off + (size_t)n) * 4);
      off += (size_t)n;
      ck_assert_uint_lt(off, sizeof data / sizeof *data + 1);
    }
  }
  h += (size_t)snprintf(header + h, sizeof header - h, "}");
  ck_assert_uint_lt(h, sizeof header);
  ckt_write_raw(path, header, data, off * 4);
}

/* Element at global index idx of model parameter p (hand-built fused). */
static float moe_expected(int p, const int64_t *idx) {
  switch (p) {
  case 0: return moe_value(0, 0, idx[0] * MOE_H + idx[1]);
  case 1: return moe_value(1, 0, idx[0] * MOE_H + idx[1]);
  case 2: /* gate_up_proj[e, r, h]: gate rows, then up rows */
    return idx[1] < MOE_I
               ? moe_value(2, (int)idx[0], idx[1] * MOE_H + idx[2])
               : moe_value(3, (int)idx[0], (idx[1] - MOE_I) * MOE_H + idx[2]);
  default: /* down_proj[e, h, i] */
    return moe_value(4, (int)idx[0], idx[1] * MOE_I + idx[2]);
  }
}

static tpx_sharding *moe_sharding(const tpx_model *m, tpx_mesh **mesh,
                                  int64_t dp, int64_t tp) {
  return ckt_sharding(m, "{\"format\":\"tpx-plan/1\",\"entries\":[]}", mesh, dp,
                      tp);
}

/* Checks buf (rank r's slice s of parameter p) against the hand-built
 * fused tensor. */
static void moe_check_slice(const float *buf, int p, const tpx_slice *s,
                            int64_t r) {
  int64_t n = tpx_slice_numel(s), idx[3];
  for (int64_t k = 0; k < n; k++) {
    ckt_global_index(s, k, idx);
    ck_assert_msg(buf[k] == moe_expected(p, idx),
                  "rank %lld param %d element %lld: %g, want %g", (long long)r,
                  p, (long long)k, (double)buf[k],
                  (double)moe_expected(p, idx));
  }
}

/* Every rank of dp_shard x tp (E = 4 over dp_shard 3: 2, 2, 0 experts)
 * reads its slice of the fused parameters from the per-expert tensors,
 * HF names (_i even) and Mixtral names (_i odd, router renamed). */
START_TEST(test_read_folded_experts) {
  static const int64_t meshes[][2] = {{3, 1}, {3, 2}, {5, 1}, {1, 1}};
  int mixtral = _i % 2;
  int64_t dp = meshes[_i / 2][0], tp = meshes[_i / 2][1];
  make_tmpdir();
  write_moe_file(tmp("model.safetensors"), mixtral, -1, -1);
  tpx_model *m = moe_model();
  tpx_mesh *mesh = NULL;
  tpx_sharding *sh = moe_sharding(m, &mesh, dp, tp);
  tpx_checkpoint_reader *rd = NULL;
  tpx_error err = {0};
  ck_assert_int_eq(tpx_checkpoint_reader_create(tmpdir, NULL, &rd, &err),
                   TPX_OK);
  ck_assert_msg(tpx_checkpoint_check_model(rd, m, &err) == TPX_OK, "%s",
                err.message);
  /* the sources: 1 embed, 1 router, 2E gate_up, E down */
  ck_assert_int_eq(tpx_checkpoint_param_num_sources(rd, m, 0), 1);
  ck_assert_int_eq(tpx_checkpoint_param_num_sources(rd, m, 1), 1);
  ck_assert_int_eq(tpx_checkpoint_param_num_sources(rd, m, 2), 2 * MOE_E);
  ck_assert_int_eq(tpx_checkpoint_param_num_sources(rd, m, 3), MOE_E);
  tpx_checkpoint_source src;
  ck_assert_int_eq(tpx_checkpoint_param_source(rd, m, 2, 5, &src, &err),
                   TPX_OK);
  tpx_checkpoint_tensor ti;
  ck_assert_int_eq(
      tpx_checkpoint_tensor_info(rd, (size_t)src.tensor, &ti, &err), TPX_OK);
  ck_assert_str_eq(ti.name,
                   mixtral ? "model.layers.0.block_sparse_moe.experts.2."
                             "w3.weight"
                           : "model.layers.0.mlp.experts.2.up_proj.weight");
  ck_assert_int_eq(src.box.offset[0], 2);
  ck_assert_int_eq(src.box.offset[1], MOE_I);
  ck_assert_int_eq(src.box.length[0], 1);
  ck_assert_int_eq(src.box.length[1], MOE_I);
  ck_assert_int_eq(src.box.length[2], MOE_H);
  ck_assert_int_eq(tpx_checkpoint_param_source(rd, m, 2, 2 * MOE_E, &src, &err),
                   TPX_OUT_OF_RANGE);
  for (int64_t r = 0; r < dp * tp; r++) {
    float bufs[4][2 * MOE_E * MOE_I * MOE_H];
    tpx_checkpoint_dest dests[4];
    for (int p = 0; p < 4; p++) {
      memset(bufs[p], 0xff, sizeof bufs[p]);
      dests[p] = (tpx_checkpoint_dest){bufs[p], sizeof bufs[p], TPX_DTYPE_F32};
    }
    ck_assert_msg(tpx_checkpoint_read_rank(rd, sh, r, dests, &err) == TPX_OK,
                  "%s", err.message);
    for (int p = 0; p < 4; p++) {
      tpx_slice s;
      ck_assert_int_eq(tpx_sharding_local_slice(sh, p, r, &s, &err), TPX_OK);
      moe_check_slice(bufs[p], p, &s, r);
      /* one parameter at a time, read as bf16 and back: same values */
      uint16_t half[2 * MOE_E * MOE_I * MOE_H];
      float back[2 * MOE_E * MOE_I * MOE_H];
      ck_assert_msg(tpx_checkpoint_read_param(rd, sh, p, r, TPX_DTYPE_BF16,
                                              half, sizeof half,
                                              &err) == TPX_OK,
                    "%s", err.message);
      ck_assert_int_eq(
          tpx_checkpoint_convert(back, TPX_DTYPE_F32, half, TPX_DTYPE_BF16,
                                 (size_t)tpx_slice_numel(&s), &err),
          TPX_OK);
      for (int64_t k = 0; k < tpx_slice_numel(&s); k++) {
        float want = 0;
        ck_assert_int_eq(tpx_checkpoint_convert(&half[0], TPX_DTYPE_BF16,
                                                &bufs[p][k], TPX_DTYPE_F32, 1,
                                                &err),
                         TPX_OK);
        ck_assert_int_eq(tpx_checkpoint_convert(&want, TPX_DTYPE_F32, &half[0],
                                                TPX_DTYPE_BF16, 1, &err),
                         TPX_OK);
        ck_assert_msg(back[k] == want, "bf16 read of param %d element %lld", p,
                      (long long)k);
      }
    }
  }
  /* a buffer too small is refused */
  float small[1];
  tpx_slice s0;
  ck_assert_int_eq(tpx_sharding_local_slice(sh, 2, 0, &s0, &err), TPX_OK);
  tpx_error e2 = {0};
  ck_assert_int_eq(tpx_checkpoint_read_param(rd, sh, 2, 0, TPX_DTYPE_F32, small,
                                             sizeof small, &e2),
                   tpx_slice_numel(&s0) > 1 ? TPX_OUT_OF_RANGE : TPX_OK);
  tpx_checkpoint_reader_destroy(rd);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_model_destroy(m);
  remove_tmpdir();
}
END_TEST

/* A missing expert tensor is TPX_NOT_FOUND naming it; an expert tensor of
 * the wrong shape TPX_VALIDATION naming it and the fused parameter. Tensor
 * numbers: 0 embed, 1 router, 2.. gate of each expert, then up, then down. */
START_TEST(test_folded_experts_bad) {
  static const struct {
    int skip, bad;
    tpx_status st;
    const char *text;
  } cases[] = {
      {2 + 1, -1, TPX_NOT_FOUND, "experts.1.gate_proj.weight"},
      {2 + MOE_E + 3, -1, TPX_NOT_FOUND, "experts.3.up_proj.weight"},
      {2 + 2 * MOE_E, -1, TPX_NOT_FOUND, "experts.0.down_proj.weight"},
      {-1, 2 + MOE_E, TPX_VALIDATION, "gate_up_proj"},
      {-1, 2 + 2 * MOE_E + 2, TPX_VALIDATION, "experts.2.down_proj.weight"},
  };
  make_tmpdir();
  write_moe_file(tmp("model.safetensors"), 0, cases[_i].skip, cases[_i].bad);
  tpx_model *m = moe_model();
  tpx_checkpoint_reader *rd = NULL;
  tpx_error err = {0};
  ck_assert_int_eq(tpx_checkpoint_reader_create(tmpdir, NULL, &rd, &err),
                   TPX_OK);
  ck_assert_int_eq(tpx_checkpoint_check_model(rd, m, &err), cases[_i].st);
  ck_assert_msg(strstr(err.message, cases[_i].text) != NULL, "%s", err.message);
  ck_assert_ptr_nonnull(strstr(err.message, "model.safetensors"));
  tpx_checkpoint_reader_destroy(rd);
  tpx_model_destroy(m);
  remove_tmpdir();
}
END_TEST

/* Issue 26: a parameter transformers' conversion rules fuse from tensors
 * with no expert naming (bailing_hybrid: attention.{q,k,v}_conv1d ->
 * self_attn.conv1d, a Concatenate on dim 0) is read from them: three
 * sources at rows 0, 4, 8, under the checkpoint's names. */
START_TEST(test_rule_fused_sources) {
  make_tmpdir();
  static const char header[] =
      "{\"model.layers.0.attention.q_conv1d.weight\":{\"dtype\":\"F32\","
      "\"shape\":[4,1,2],\"data_offsets\":[0,32]},"
      "\"model.layers.0.attention.k_conv1d.weight\":{\"dtype\":\"F32\","
      "\"shape\":[4,1,2],\"data_offsets\":[32,64]},"
      "\"model.layers.0.attention.v_conv1d.weight\":{\"dtype\":\"F32\","
      "\"shape\":[4,1,2],\"data_offsets\":[64,96]}}";
  float data[24];
  for (int i = 0; i < 24; i++) data[i] = (float)i;
  ckt_write_raw(tmp("model.safetensors"), header, data, sizeof data);
  tpx_model *m = NULL;
  tpx_error err = {0};
  static const char cfg[] = "{\"model_type\": \"bailing_hybrid\"}";
  ck_assert_int_eq(tpx_model_create(&m, &err), TPX_OK);
  ck_assert_int_eq(tpx_model_set_config(m, cfg, strlen(cfg), "t", &err),
                   TPX_OK);
  ck_assert_msg(tpx_model_add_safetensors(m, tmpdir, &err) == TPX_OK, "%s",
                err.message);
  int64_t p = tpx_model_find_param(m, "model.layers.0.self_attn.conv1d.weight");
  ck_assert_int_ge(p, 0);
  tpx_checkpoint_reader *rd = NULL;
  ck_assert_int_eq(tpx_checkpoint_reader_create(tmpdir, NULL, &rd, &err),
                   TPX_OK);
  ck_assert_msg(tpx_checkpoint_check_model(rd, m, &err) == TPX_OK, "%s",
                err.message);
  ck_assert_int_lt(tpx_checkpoint_param_tensor(rd, m, p), 0);
  ck_assert_int_eq(tpx_checkpoint_param_num_sources(rd, m, p), 3);
  static const char *const names[3] = {"q_conv1d", "k_conv1d", "v_conv1d"};
  for (int k = 0; k < 3; k++) {
    tpx_checkpoint_source src;
    ck_assert_int_eq(tpx_checkpoint_param_source(rd, m, p, k, &src, &err),
                     TPX_OK);
    tpx_checkpoint_tensor t;
    ck_assert_int_eq(
        tpx_checkpoint_tensor_info(rd, (size_t)src.tensor, &t, &err), TPX_OK);
    ck_assert_ptr_nonnull(strstr(t.name, names[k]));
    ck_assert_int_eq(src.box.ndim, 3);
    ck_assert_int_eq(src.box.offset[0], 4 * k);
    ck_assert_int_eq(src.box.length[0], 4);
    ck_assert_int_eq(src.box.length[2], 2);
  }
  tpx_checkpoint_reader_destroy(rd);
  tpx_model_destroy(m);
  remove_tmpdir();
}
END_TEST

/* ---- writer ---- */

static void fill(float *buf, const char *name, int64_t n) {
  for (int64_t i = 0; i < n; i++) buf[i] = model_value(name, i);
}

static const char *const wnames[3] = {"col.weight", "col.bias", "row.weight"};

/* Rank r of `world` writes its pieces (cut from the full tensors) with
 * write_rank and finishes; *done tells whether it published. */
static tpx_status write_one_rank(const tpx_model *m, const tpx_sharding *sh,
                                 const tpx_checkpoint_entry *entries, size_t ne,
                                 int64_t world, int64_t r, int64_t max,
                                 int *done, tpx_error *err) {
  float full[3][35], local[3][35];
  for (int p = 0; p < 3; p++) fill(full[p], wnames[p], 35);
  tpx_checkpoint_writer_options o = TPX_CHECKPOINT_WRITER_OPTIONS_INIT;
  o.max_shard_size = max;
  o.num_writers = world;
  o.writer_rank = r;
  tpx_checkpoint_writer *w = NULL;
  tpx_status st =
      tpx_checkpoint_writer_create(tmpdir, entries, ne, &o, &w, err);
  if (st != TPX_OK)
    return st;
  tpx_checkpoint_dest src[3];
  for (int p = 0; p < 3 && st == TPX_OK; p++) {
    tpx_slice s;
    st = tpx_sharding_local_slice(sh, p, r, &s, err);
    tpx_param_info info;
    tpx_model_param(m, p, &info, NULL);
    int64_t cols = info.ndim == 2 ? info.shape[1] : 1, k = 0;
    int64_t l1 = s.ndim == 2 ? s.length[1] : 1;
    int64_t o1 = s.ndim == 2 ? s.offset[1] : 0;
    for (int64_t i = 0; i < s.length[0]; i++)
      for (int64_t j = 0; j < l1; j++)
        local[p][k++] = full[p][(s.offset[0] + i) * cols + o1 + j];
    src[p] = (tpx_checkpoint_dest){local[p], sizeof local[p], TPX_DTYPE_F32};
  }
  if (st == TPX_OK)
    st = tpx_checkpoint_write_rank(w, sh, r, src, err);
  if (st == TPX_OK)
    st = tpx_checkpoint_writer_finish(w, done, err);
  tpx_checkpoint_writer_destroy(w);
  return st;
}

/* Only final files are left, `files` of them, holding the full tensors. */
static void verify_written(size_t files) {
  DIR *d = opendir(tmpdir);
  struct dirent *de;
  while ((de = readdir(d)) != NULL)
    ck_assert_msg(strcmp(de->d_name, ".") == 0 ||
                      strcmp(de->d_name, "..") == 0 || de->d_name[0] != '.',
                  "left behind: %s", de->d_name);
  closedir(d);
  tpx_checkpoint_reader *rd = NULL;
  tpx_error err = {0};
  ck_assert_msg(tpx_checkpoint_reader_create(tmpdir, NULL, &rd, &err) == TPX_OK,
                "%s", err.message);
  ck_assert_uint_eq(tpx_checkpoint_num_files(rd), files);
  for (int p = 0; p < 3; p++) {
    float full[35], back[35];
    fill(full, wnames[p], 35);
    int64_t t = tpx_checkpoint_find(rd, wnames[p]);
    tpx_checkpoint_tensor info;
    ck_assert_int_eq(tpx_checkpoint_tensor_info(rd, (size_t)t, &info, &err),
                     TPX_OK);
    tpx_slice s;
    memset(&s, 0, sizeof s);
    s.ndim = info.ndim;
    memcpy(s.length, info.shape, sizeof s.length);
    ck_assert_int_eq(tpx_checkpoint_read_slice(rd, t, &s, TPX_DTYPE_F32, back,
                                               sizeof back, &err),
                     TPX_OK);
    ck_assert_mem_eq(back, full, (size_t)info.nbytes);
  }
  tpx_checkpoint_reader_destroy(rd);
}

/* dp, tp, max_shard_size, files (data bytes: col.bias 28, col.weight 140,
 * row.weight 140, in name order) */
static const int64_t write_cases[][4] = {
    {3, 3, 0, 1}, {2, 3, 150, 3}, {1, 3, 0, 1}, {3, 1, 200, 2}};

/* Every rank of a dp x tp mesh writes its pieces through its own writer:
 * loop indices 0..3 one writer after the other (no final name exists
 * before the last finish), 4..7 every rank in its own process, all at
 * once. The result reads back whole either way. */
START_TEST(test_write_ranks) {
  const int64_t *c = write_cases[_i % 4];
  int concurrent = _i >= 4;
  int64_t dp = c[0], tp = c[1], max = c[2], world = dp * tp;
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
  const char *final =
      max ? "model.safetensors.index.json" : "model.safetensors";
  pid_t kids[16];
  for (int64_t r = 0; r < world; r++) {
    int done = -1;
    if (concurrent) {
      kids[r] = fork();
      ck_assert_int_ge(kids[r], 0);
      if (kids[r] == 0)
        _exit(write_one_rank(m, sh, entries, ne, world, r, max, &done, &err) ==
                      TPX_OK
                  ? 0
                  : 1);
      continue;
    }
    ck_assert_msg(write_one_rank(m, sh, entries, ne, world, r, max, &done,
                                 &err) == TPX_OK,
                  "%s", err.message);
    ck_assert_int_eq(done, r == world - 1);
    ck_assert_int_eq(exists(tmp(final)), r == world - 1);
  }
  for (int64_t r = 0; r < world && concurrent; r++) {
    int status = 0;
    ck_assert_int_eq(waitpid(kids[r], &status, 0), kids[r]);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  verify_written((size_t)c[3]);
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
  ck_assert_int_eq(
      tpx_checkpoint_writer_create(tmpdir, &big_entry, 1, NULL, &w, &err),
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
  ck_assert_int_eq(
      tpx_checkpoint_writer_create(dir, &big_entry, 1, NULL, &w, &err), TPX_IO);
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
  ck_assert_int_eq(
      tpx_checkpoint_writer_create(tmpdir, &big_entry, 1, NULL, &w, &err),
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
  ck_assert_int_eq(tpx_checkpoint_writer_create(tmpdir, two, 2, NULL, &w, &err),
                   TPX_ALREADY_EXISTS);
  ck_assert_ptr_nonnull(strstr(err.message, "big.weight"));
  ck_assert_int_eq(count_files(), 0);
  ck_assert_int_eq(
      tpx_checkpoint_writer_create(tmpdir, &big_entry, 1, NULL, &w, &err),
      TPX_OK);
  tpx_slice s = box2(0, 65, 0, 64);
  static float data[65 * 64];
  tpx_error e2 = {0};
  ck_assert_int_eq(
      tpx_checkpoint_write_slice(w, "big.weight", &s, TPX_DTYPE_F32, data, &e2),
      TPX_OUT_OF_RANGE);
  tpx_error e3 = {0};
  ck_assert_int_eq(
      tpx_checkpoint_write_slice(w, "nope", &s, TPX_DTYPE_F32, data, &e3),
      TPX_NOT_FOUND);
  /* finishing with a hole at the end is refused; nothing is published */
  s = box2(0, 32, 0, 64);
  ck_assert_int_eq(
      tpx_checkpoint_write_slice(w, "big.weight", &s, TPX_DTYPE_F32, data, &e3),
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
  tcase_add_test(tc, test_rule_fused_sources);
  tcase_add_loop_test(tc, test_bad_headers, 0,
                      (int)(sizeof bad_cases / sizeof *bad_cases));
  tcase_add_test(tc, test_header_beyond_file);
  tcase_add_test(tc, test_index_missing_shard);
  tcase_add_test(tc, test_check_model);
  tcase_add_loop_test(tc, test_read_rank, 0, 4);
  tcase_add_loop_test(tc, test_read_folded_experts, 0, 8);
  tcase_add_loop_test(tc, test_folded_experts_bad, 0, 5);
  tcase_add_loop_test(tc, test_write_ranks, 0, 8);
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
