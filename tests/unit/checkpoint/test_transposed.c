/* test_transposed.c — parameters stored as several checkpoint tensors,
 * some transposed (tpx_model_add_param_source; NeMo Automodel's grouped
 * experts hold experts.gate_and_up_projs [E, H, 2I] with [e, :, 0:I] =
 * gate_proj.weight^T and experts.down_projs [E, I, H] = down_proj^T):
 * the declarations refused with the parameter and source named, the cover
 * check, the safetensors header check (a transposed source of the wrong
 * shape refused naming it), and every rank's slice read from the stored
 * tensors on uneven meshes — boxes of whole experts (dim 0), of dim 1 (a
 * column slice of each stored tensor), across the gate / up border, a
 * single row, empty shards — in f32 and bf16, against the values computed
 * element by element here. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpx/tpx.h"

#include "../test_tmpdir.h"
#include "ckpt_test_util.h"

static tpx_error e_;
#define CHECK_OK(x) ck_assert_msg((x) == TPX_OK, "%s", e_.message)

/* ---- the model ----
 * moe.gu.weight [E, H, 2I] (gate^T | up^T per expert), moe.dn.weight
 * [E, I, H] (down^T), flat.weight [H, 2I] (one expert's gate^T | up^T, no
 * expert dim), emb.weight [4, H] stored as itself. Under the plan below
 * (rowwise: Shard(1) over tp; FSDP: dim 0 over dp_shard) ranks hold whole
 * experts, dim-1 slices, and flat's dim-1 slices cross the border at I. */
typedef struct dims {
  int64_t E, H, I;
} dims;

static const dims shapes[] = {{3, 5, 3}, {2, 1, 1}, {4, 6, 2}};

/* Stored tensors: kind 0 gate_e [I, H], 1 up_e [I, H], 2 down_e [H, I],
 * 3 flat gate [I, H], 4 flat up [I, H], 5 emb [4, H]. */
static void src_name(char *buf, size_t size, int kind, int e) {
  static const char *const fmt[] = {
      "hf.experts.%d.gate_proj.weight", "hf.experts.%d.up_proj.weight",
      "hf.experts.%d.down_proj.weight", "hf.flat.gate_proj.weight",
      "hf.flat.up_proj.weight",         "zemb.weight"};
  snprintf(buf, size, fmt[kind], e);
}

/* The stored element i of tensor (kind, e), as bits. */
static uint32_t value(int kind, int e, int64_t i) {
  return 0x4000u + (uint32_t)(kind * 2048 + e * 256) + (uint32_t)i;
}

static tpx_model *moe_model(const dims *d, tpx_dtype dt) {
  tpx_model *m = NULL;
  CHECK_OK(tpx_model_create(&m, &e_));
  int64_t gu[3] = {d->E, d->H, 2 * d->I}, dn[3] = {d->E, d->I, d->H},
          fl[2] = {d->H, 2 * d->I}, emb[2] = {4, d->H};
  const char *mods[] = {"moe.gu", "moe.dn", "flat", "zemb"};
  for (int k = 0; k < 4; k++)
    CHECK_OK(tpx_model_add_module(
        m, mods[k], k == 3 ? TPX_MODULE_EMBEDDING : TPX_MODULE_LINEAR, NULL,
        &e_));
  CHECK_OK(tpx_model_add_param(m, "moe.gu", "weight", gu, 3, dt, NULL, &e_));
  CHECK_OK(tpx_model_add_param(m, "moe.dn", "weight", dn, 3, dt, NULL, &e_));
  CHECK_OK(tpx_model_add_param(m, "flat", "weight", fl, 2, dt, NULL, &e_));
  CHECK_OK(tpx_model_add_param(m, "zemb", "weight", emb, 2, dt, NULL, &e_));
  char name[128];
  for (int e = 0; e < d->E; e++)
    for (int part = 0; part < 2; part++) {
      tpx_slice b = {3, {e, 0, part * d->I}, {1, d->H, d->I}};
      src_name(name, sizeof name, part, e);
      CHECK_OK(
          tpx_model_add_param_source(m, "moe.gu.weight", name, &b, 1, &e_));
    }
  for (int e = 0; e < d->E; e++) {
    tpx_slice b = {3, {e, 0, 0}, {1, d->I, d->H}};
    src_name(name, sizeof name, 2, e);
    CHECK_OK(tpx_model_add_param_source(m, "moe.dn.weight", name, &b, 1, &e_));
  }
  for (int part = 0; part < 2; part++) {
    tpx_slice b = {2, {0, part * d->I}, {d->H, d->I}};
    src_name(name, sizeof name, 3 + part, 0);
    CHECK_OK(tpx_model_add_param_source(m, "flat.weight", name, &b, 1, &e_));
  }
  CHECK_OK(tpx_model_check_param_sources(m, &e_));
  return m;
}

/* Writes every stored tensor (in dtype dt; `bad` kind gets its dims the
 * other way round, `skip` kind is left out, for expert 1 or the flat
 * ones). */
static void write_moe(const char *path, const dims *d, tpx_dtype dt, int bad,
                      int skip) {
  static char header[16384];
  size_t esz = tpx_dtype_size(dt), h = 0, off = 0;
  size_t cap = (size_t)(3 * d->E * d->I * d->H + 2 * d->I * d->H + 4 * d->H);
  unsigned char *data = malloc(cap * esz);
  ck_assert_ptr_nonnull(data);
  h += (size_t)snprintf(header, sizeof header, "{");
  for (int kind = 0; kind < 6; kind++)
    for (int e = 0; e < (kind < 3 ? d->E : 1); e++) {
      int64_t r = kind == 5 ? 4 : kind == 2 ? d->H : d->I;
      int64_t c = kind == 5 ? d->H : kind == 2 ? d->I : d->H;
      int target = kind < 3 ? e == 1 || d->E == 1 : 1;
      if (kind == skip && target)
        continue;
      if (kind == bad && target) {
        int64_t t = r;
        r = c;
        c = t;
      }
      char name[128];
      src_name(name, sizeof name, kind, e);
      for (int64_t i = 0; i < r * c; i++) {
        ckt_put_bits(data, esz, (int64_t)off + i, value(kind, e, i));
      }
      h += (size_t)snprintf(
          header + h, sizeof header - h,
          "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld,%lld],"
          "\"data_offsets\":[%zu,%zu]}",
          h > 1 ? "," : "", name, tpx_dtype_safetensors_name(dt), (long long)r,
          (long long)c, off * esz, (off + (size_t)(r * c)) * esz);
      off += (size_t)(r * c);
    }
  snprintf(header + h, sizeof header - h, "}");
  ckt_write_raw(path, header, data, off * esz);
  free(data);
}

/* The element at global index idx of parameter p, computed here. */
static uint32_t expected(const dims *d, int p, const int64_t *idx) {
  int64_t I = d->I, H = d->H;
  switch (p) {
  case 0: /* gu[e, h, j] = (j < I ? gate_e : up_e)[j mod I, h] */
    return idx[2] < I ? value(0, (int)idx[0], idx[2] * H + idx[1])
                      : value(1, (int)idx[0], (idx[2] - I) * H + idx[1]);
  case 1: /* dn[e, i, h] = down_e[h, i] */
    return value(2, (int)idx[0], idx[2] * I + idx[1]);
  case 2: /* flat[h, j] */
    return idx[1] < I ? value(3, 0, idx[1] * H + idx[0])
                      : value(4, 0, (idx[1] - I) * H + idx[0]);
  default: return value(5, 0, idx[0] * H + idx[1]);
  }
}

static tpx_sharding *sharding(const tpx_model *m, tpx_mesh **mesh, int64_t dp,
                              int64_t tp) {
  return ckt_sharding(m,
                      "{\"format\":\"tpx-plan/1\",\"entries\":["
                      "{\"module\":\"moe.gu\",\"style\":\"rowwise\"},"
                      "{\"module\":\"moe.dn\",\"style\":\"rowwise\"},"
                      "{\"module\":\"flat\",\"style\":\"rowwise\"}]}",
                      mesh, dp, tp);
}

/* Every rank of each mesh reads each parameter's slice from the stored
 * tensors: loop over shapes x dtypes x meshes. */
static const int64_t meshes[][2] = {{1, 1}, {2, 1}, {3, 1}, {4, 1},
                                    {1, 3}, {2, 3}, {1, 4}, {3, 2}};
#define NMESH ((int)(sizeof meshes / sizeof meshes[0]))

START_TEST(read_transposed_slices) {
  const dims *d = &shapes[_i / (2 * NMESH)];
  tpx_dtype dt = (_i / NMESH) % 2 ? TPX_DTYPE_BF16 : TPX_DTYPE_F32;
  int64_t dp = meshes[_i % NMESH][0], tp = meshes[_i % NMESH][1];
  size_t esz = tpx_dtype_size(dt);
  make_tmpdir();
  write_moe(tmp("model.safetensors"), d, dt, -1, -1);
  tpx_model *m = moe_model(d, dt);
  tpx_mesh *mesh = NULL;
  tpx_sharding *sh = sharding(m, &mesh, dp, tp);
  tpx_checkpoint_reader *rd = NULL;
  CHECK_OK(tpx_checkpoint_reader_create(tmpdir, NULL, &rd, &e_));
  CHECK_OK(tpx_checkpoint_check_model(rd, m, &e_));
  ck_assert_int_eq(tpx_checkpoint_param_num_sources(rd, m, 0), 2 * d->E);
  ck_assert_int_eq(tpx_checkpoint_param_source_transposed(rd, m, 0, 1), 1);
  ck_assert_int_eq(tpx_checkpoint_param_source_transposed(rd, m, 3, 0), 0);
  ck_assert_int_eq(tpx_checkpoint_param_source_transposed(rd, m, 0, 99), -1);
  int empty = 0, border = 0;
  for (int64_t r = 0; r < dp * tp; r++)
    for (int p = 0; p < 4; p++) {
      tpx_slice s;
      int64_t n;
      unsigned char *buf = ckt_read_slice(rd, sh, p, r, dt, &s, &n);
      empty |= n == 0;
      border |= p == 2 && s.offset[1] < d->I &&
                s.offset[1] + s.length[1] > d->I && s.length[0] > 0;
      int64_t idx[3];
      for (int64_t k = 0; k < n; k++) {
        ckt_global_index(&s, k, idx);
        uint32_t want = ckt_bits(expected(d, p, idx), esz);
        uint32_t got = ckt_get_bits(buf, esz, k);
        ck_assert_msg(got == want,
                      "E%lld H%lld I%lld %s dp %lld tp %lld rank %lld "
                      "param %d element %lld: %#x, want %#x",
                      (long long)d->E, (long long)d->H, (long long)d->I,
                      tpx_dtype_short_name(dt), (long long)dp, (long long)tp,
                      (long long)r, p, (long long)k, got, want);
      }
      free(buf);
    }
  /* the meshes that must cut empty shards and across the border do */
  if (d->E == 3 && dp == 4)
    ck_assert(empty);
  if (d->I == 3 && tp == 3 && d->H > 1)
    ck_assert(border);
  tpx_checkpoint_reader_destroy(rd);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_model_destroy(m);
  remove_tmpdir();
}
END_TEST

/* A transposed source stored the wrong way round (or missing) is refused
 * naming it: by the reader's model check and by the header load. */
START_TEST(wrong_shape_refused) {
  static const struct {
    int bad, skip;
    tpx_status st;
    const char *text;
  } cases[] = {
      {1, -1, TPX_VALIDATION, "hf.experts.1.up_proj.weight"},
      {2, -1, TPX_VALIDATION, "hf.experts.1.down_proj.weight"},
      {3, -1, TPX_VALIDATION, "hf.flat.gate_proj.weight"},
      {-1, 0, TPX_NOT_FOUND, "hf.experts.1.gate_proj.weight"},
  };
  const dims d = {3, 5, 3};
  make_tmpdir();
  write_moe(tmp("model.safetensors"), &d, TPX_DTYPE_BF16, cases[_i].bad,
            cases[_i].skip);
  tpx_model *m = moe_model(&d, TPX_DTYPE_BF16);
  tpx_checkpoint_reader *rd = NULL;
  CHECK_OK(tpx_checkpoint_reader_create(tmpdir, NULL, &rd, &e_));
  tpx_error err = {0};
  ck_assert_int_eq(tpx_checkpoint_check_model(rd, m, &err), cases[_i].st);
  ck_assert_msg(strstr(err.message, cases[_i].text) != NULL, "%s", err.message);
  if (cases[_i].bad >= 0)
    ck_assert_msg(strstr(err.message, "transposed") != NULL, "%s", err.message);
  /* the header load: the sources are checked, not added as parameters */
  tpx_error e2 = {0};
  tpx_status st = tpx_model_add_safetensors(m, tmpdir, &e2);
  ck_assert_int_eq(st, TPX_VALIDATION);
  ck_assert_msg(strstr(e2.message, cases[_i].text) != NULL, "%s", e2.message);
  tpx_checkpoint_reader_destroy(rd);
  tpx_model_destroy(m);
  remove_tmpdir();
}
END_TEST

/* The header load of a good checkpoint folds every source: no parameter
 * added. */
START_TEST(headers_fold_sources) {
  const dims d = {3, 5, 3};
  make_tmpdir();
  write_moe(tmp("model.safetensors"), &d, TPX_DTYPE_BF16, -1, -1);
  tpx_model *m = moe_model(&d, TPX_DTYPE_BF16);
  CHECK_OK(tpx_model_add_safetensors(m, tmpdir, &e_));
  ck_assert_uint_eq(tpx_model_num_params(m), 4);
  tpx_model_destroy(m);
  /* in f32 the bf16 sources are the wrong dtype, named */
  tpx_model *f = moe_model(&d, TPX_DTYPE_F32);
  tpx_error err = {0};
  ck_assert_int_eq(tpx_model_add_safetensors(f, tmpdir, &err), TPX_VALIDATION);
  ck_assert_msg(strstr(err.message, "hf.") != NULL &&
                    strstr(err.message, "BF16") != NULL,
                "%s", err.message);
  tpx_model_destroy(f);
  remove_tmpdir();
}
END_TEST

/* Declarations refused with the parameter and the source named. */
START_TEST(declarations_refused) {
  const dims d = {2, 4, 3};
  tpx_model *m = moe_model(&d, TPX_DTYPE_BF16);
  int64_t one[1] = {4};
  CHECK_OK(tpx_model_add_module(m, "norm", TPX_MODULE_NORM, NULL, &e_));
  CHECK_OK(tpx_model_add_param(m, "norm", "weight", one, 1, TPX_DTYPE_BF16,
                               NULL, &e_));
  CHECK_OK(tpx_model_add_module(m, "head", TPX_MODULE_LINEAR, NULL, &e_));
  CHECK_OK(tpx_model_tie(m, "head.weight", "zemb.weight", &e_));
  static const struct {
    const char *param, *name;
    tpx_slice box;
    int transpose;
    tpx_status st;
    const char *text;
  } cases[] = {
      {"nope.weight", "x.a", {1, {0}, {4}}, 0, TPX_NOT_FOUND, "'nope.weight'"},
      {"norm.weight",
       "x.b",
       {1, {0}, {4}},
       1,
       TPX_INVALID_ARGUMENT,
       "2 dims or more"},
      {"norm.weight",
       "x.c",
       {2, {0, 0}, {4, 1}},
       0,
       TPX_INVALID_ARGUMENT,
       "the box has 2 dims"},
      {"norm.weight", "x.d", {1, {2}, {3}}, 0, TPX_INVALID_ARGUMENT, "outside"},
      {"norm.weight", "x.e", {1, {0}, {0}}, 0, TPX_INVALID_ARGUMENT, "empty"},
      {"norm.weight",
       "zemb.weight",
       {1, {0}, {4}},
       0,
       TPX_INVALID_ARGUMENT,
       "is a parameter"},
      {"norm.weight",
       "hf.experts.0.gate_proj.weight",
       {1, {0}, {4}},
       0,
       TPX_INVALID_ARGUMENT,
       "already a source (of 'moe.gu.weight')"},
      {"moe.gu.weight",
       "x.f",
       {3, {0, 0, 0}, {1, 1, 1}},
       1,
       TPX_INVALID_ARGUMENT,
       "in a run"},
      {"head.weight",
       "x.g",
       {2, {0, 0}, {1, 1}},
       0,
       TPX_INVALID_ARGUMENT,
       "tied"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tpx_error err = {0};
    ck_assert_int_eq(tpx_model_add_param_source(m, cases[i].param,
                                                cases[i].name, &cases[i].box,
                                                cases[i].transpose, &err),
                     cases[i].st);
    ck_assert_msg(strstr(err.message, cases[i].text) != NULL &&
                      strstr(err.message, cases[i].name) != NULL,
                  "case %zu: %s", i, err.message);
  }
  /* nothing recorded by the refusals */
  ck_assert_uint_eq(tpx_model_num_param_sources(m, 3), 0);
  ck_assert_uint_eq(tpx_model_num_param_sources(m, 0), 2 * d.E);
  const char *name = NULL;
  tpx_slice b;
  int tr = 0;
  CHECK_OK(tpx_model_param_source(m, 0, 3, &name, &b, &tr, &e_));
  ck_assert_str_eq(name, "hf.experts.1.up_proj.weight");
  ck_assert_int_eq(tr, 1);
  ck_assert_int_eq(b.offset[2], d.I);
  ck_assert_int_eq(tpx_model_param_source(m, 0, 2 * d.E, &name, &b, &tr, NULL),
                   TPX_OUT_OF_RANGE);
  CHECK_OK(tpx_model_check_param_sources(m, &e_));
  tpx_model_destroy(m);
}
END_TEST

/* The cover check: overlapping boxes name both sources; a gap names the
 * parameter and the count. */
START_TEST(cover_checked) {
  tpx_model *m = NULL;
  CHECK_OK(tpx_model_create(&m, &e_));
  int64_t shape[3] = {2, 4, 6};
  CHECK_OK(
      tpx_model_add_param(m, "a", "w", shape, 3, TPX_DTYPE_F32, NULL, &e_));
  CHECK_OK(
      tpx_model_add_param(m, "b", "w", shape, 3, TPX_DTYPE_F32, NULL, &e_));
  tpx_slice x = {3, {0, 0, 0}, {2, 4, 3}}, y = {3, {1, 0, 2}, {1, 4, 4}},
            z = {3, {0, 0, 3}, {1, 4, 3}};
  CHECK_OK(tpx_model_add_param_source(m, "a.w", "s.x", &x, 1, &e_));
  CHECK_OK(tpx_model_add_param_source(m, "a.w", "s.y", &y, 0, &e_));
  CHECK_OK(tpx_model_add_param_source(m, "b.w", "s.z", &z, 1, &e_));
  tpx_error err = {0};
  ck_assert_int_eq(tpx_model_check_param_sources(m, &err), TPX_VALIDATION);
  ck_assert_msg(strstr(err.message, "'a.w'") && strstr(err.message, "'s.x'") &&
                    strstr(err.message, "'s.y'") &&
                    strstr(err.message, "overlap"),
                "%s", err.message);
  tpx_model_destroy(m);
  CHECK_OK(tpx_model_create(&m, &e_));
  CHECK_OK(
      tpx_model_add_param(m, "b", "w", shape, 3, TPX_DTYPE_F32, NULL, &e_));
  CHECK_OK(tpx_model_add_param_source(m, "b.w", "s.z", &z, 1, &e_));
  tpx_error e2 = {0};
  ck_assert_int_eq(tpx_model_check_param_sources(m, &e2), TPX_VALIDATION);
  ck_assert_msg(strstr(e2.message, "'b.w'") &&
                    strstr(e2.message, "cover 12 of its 48"),
                "%s", e2.message);
  tpx_model_destroy(m);
}
END_TEST

/* ---- the plugin host: host->skeleton_add_source ---- */

#define MOE_CONFIG(extra)                                                      \
  "{\"architectures\": [\"TpxTestMoeForCausalLM\"], \"hidden_size\": 16, "     \
  "\"moe_intermediate_size\": 4, \"num_local_experts\": 3, "                   \
  "\"num_hidden_layers\": 2, \"vocab_size\": 32, \"num_attention_heads\": 2, " \
  "\"dtype\": \"bfloat16\"" extra "}"

static tpx_model *skeleton(int isolate, const char *config, tpx_status want,
                           tpx_error *err) {
  const char *path = getenv("TPX_TEST_MOE_PLUGIN");
  ck_assert_ptr_nonnull(path);
  tpx_registry *r = NULL;
  tpx_model *m = NULL;
  CHECK_OK(tpx_registry_create(&r, &e_));
  CHECK_OK(tpx_registry_set_isolation(r, isolate, 60, &e_));
  CHECK_OK(tpx_registry_load_file(r, path, &e_));
  CHECK_OK(tpx_model_create(&m, &e_));
  CHECK_OK(tpx_model_set_config(m, config, strlen(config), "test", &e_));
  tpx_error_clear(err);
  ck_assert_msg(tpx_registry_build_skeleton(r, m, err) == want, "%s",
                err->message);
  tpx_registry_destroy(r);
  return m;
}

/* The test plugin's sources reach the model, in-process and isolated. */
START_TEST(host_takes_sources) {
  tpx_error err;
  tpx_model *m = skeleton(_i, MOE_CONFIG(""), TPX_OK, &err);
  int64_t gu = tpx_model_find_param(m, "model.layers.1.mlp.experts."
                                       "gate_and_up_projs");
  int64_t dn = tpx_model_find_param(m, "model.layers.1.mlp.experts.down_projs");
  ck_assert_int_ge(gu, 0);
  ck_assert_uint_eq(tpx_model_num_param_sources(m, gu), 6);
  ck_assert_uint_eq(tpx_model_num_param_sources(m, dn), 3);
  const char *name = NULL;
  tpx_slice b;
  int tr = 0;
  CHECK_OK(tpx_model_param_source(m, gu, 5, &name, &b, &tr, &e_));
  ck_assert_str_eq(name, "model.layers.1.mlp.experts.2.up_proj.weight");
  ck_assert_int_eq(tr, 1);
  ck_assert_int_eq(b.ndim, 3);
  ck_assert_int_eq(b.offset[0], 2);
  ck_assert_int_eq(b.offset[2], 4);
  ck_assert_int_eq(b.length[1], 16);
  ck_assert_int_eq(b.length[2], 4);
  CHECK_OK(tpx_model_check_param_sources(m, &e_));
  tpx_model_destroy(m);
}
END_TEST

/* Misdeclared sources fail the skeleton, naming the plugin, the parameter
 * and the source; the caller's model keeps nothing. Loop: case x
 * isolation. */
START_TEST(host_refuses_bad_sources) {
  static const struct {
    const char *bad, *a, *b;
  } cases[] = {
      {"overlap", "experts.1.up_proj.weight", "overlap"},
      {"gap", "gate_and_up_projs", "cover 320 of its 384"},
      {"outside", "experts.2.up_proj.weight", "outside"},
      {"param", "no.such.param", "experts.0.gate_proj.weight"},
      {"run", "experts.0.up_proj.weight", "in a run"},
      {"shape", "experts.0.down_proj.weight", "transpose=2"},
  };
  int c = _i / 2, isolate = _i % 2;
  char config[512];
  snprintf(config, sizeof config,
           MOE_CONFIG(", \"tpxtest_bad_source\": \"%s\""), cases[c].bad);
  tpx_error err;
  tpx_model *m = skeleton(isolate, config, TPX_PLUGIN, &err);
  ck_assert_msg(strstr(err.message, "tpxtest-moe") &&
                    strstr(err.message, cases[c].a) &&
                    strstr(err.message, cases[c].b),
                "%s: %s", cases[c].bad, err.message);
  ck_assert_uint_eq(tpx_model_num_params(m), 0);
  tpx_model_destroy(m);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("checkpoint-transposed");
  TCase *tc = tcase_create("transposed");
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, read_transposed_slices, 0,
                      (int)(sizeof shapes / sizeof shapes[0]) * 2 * NMESH);
  tcase_add_loop_test(tc, wrong_shape_refused, 0, 4);
  tcase_add_test(tc, headers_fold_sources);
  tcase_add_test(tc, declarations_refused);
  tcase_add_test(tc, cover_checked);
  tcase_add_loop_test(tc, host_takes_sources, 0, 2);
  tcase_add_loop_test(tc, host_refuses_bad_sources, 0, 12);
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
