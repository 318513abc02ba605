/* test_rt_ckpt.c — tpx_runtime_load_safetensors (and
 * tpx_runtime_load_checkpoint, through one reader the ranks' threads share)
 * on the tiny model over local threads: a safetensors file written here by hand
 * (f32 or bf16, a model of the same dtype, the runtime storing f32 or bf16; the
 * tied head stored only through emb.weight) loads into every mesh so that the
 * gathered parameters equal the stored values exactly (bf16 storage: the
 * f32 master exact, the shard its rounding); a missing file, a wrong shape
 * and an unsharded unit are clear errors; an FP8 checkpoint (Linear weights
 * F8_E4M3 with block scales) loads dequantized (t_load_fp8). */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt_fsdp_fixture.h"

/* Write every non-alias parameter of `m` as rt_weight values in `dtype`
 * (F32 or BF16); `bad_shape` stores the first one with a wrong shape. */
static void write_st(const tpx_model *m, const char *path, tpx_dtype dtype,
                     int bad_shape) {
  size_t np = tpx_model_num_params(m), es = tpx_dtype_size(dtype);
  char header[4096] = "{";
  size_t off = 0, hl = 1;
  for (size_t p = 0; p < np; p++) {
    tpx_param_info in;
    ck_assert_int_eq(tpx_model_param(m, (int64_t)p, &in, NULL), TPX_OK);
    if (in.tied_to >= 0)
      continue;
    int64_t n = 1;
    char shape[128] = "";
    size_t sl = 0;
    for (int i = 0; i < in.ndim; i++) {
      int64_t d = in.shape[i] + (bad_shape && off == 0 && i == 0);
      n *= in.shape[i];
      sl += (size_t)snprintf(shape + sl, sizeof shape - sl, "%s%lld",
                             i ? "," : "", (long long)d);
    }
    hl += (size_t)snprintf(
        header + hl, sizeof header - hl,
        "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%s],\"data_offsets\":[%zu,%zu]}",
        hl > 1 ? "," : "", in.fqn, tpx_dtype_safetensors_name(dtype), shape,
        off, off + (size_t)n * es);
    off += (size_t)n * es;
  }
  hl += (size_t)snprintf(header + hl, sizeof header - hl, "}");
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  uint64_t len = hl;
  ck_assert_uint_eq(fwrite(&len, 8, 1, f), 1);
  ck_assert_uint_eq(fwrite(header, 1, hl, f), hl);
  for (size_t p = 0; p < np; p++) {
    tpx_param_info in;
    tpx_model_param(m, (int64_t)p, &in, NULL);
    if (in.tied_to >= 0)
      continue;
    int64_t n = 1;
    for (int i = 0; i < in.ndim; i++) n *= in.shape[i];
    for (int64_t i = 0; i < n; i++) {
      float v = rt_weight((int64_t)p, i);
      uint16_t b = rt_to_bf16(v);
      ck_assert_uint_eq(
          fwrite(dtype == TPX_DTYPE_F32 ? (void *)&v : (void *)&b, es, 1, f),
          1);
    }
  }
  ck_assert_int_eq(fclose(f), 0);
}

typedef struct kctx {
  tpx_model *model;
  tpx_mesh *mesh;
  tpx_sharding *sh;
  const char *path;
  tpx_dtype file_dtype, storage;
  int expect_error; /* 0: loads; 1: the load fails (message in err) */
  int sim;          /* the world's buffers in the sim memory space */
  const tpx_checkpoint_reader *rd; /* set: load through it, shared */
} kctx;

static tpx_status body(tpx_comm *world, void *arg, tpx_error *err) {
  kctx *k = arg;
  tpx_mesh_comm *mc = NULL;
  tpx_status st = tpx_mesh_comm_create(world, k->mesh, &mc, err);
  if (st != TPX_OK)
    return st;
  tpx_runtime_options ro = TPX_RUNTIME_OPTIONS_INIT;
  ro.storage_dtype = k->storage;
  tpx_runtime *rt = NULL;
  st = tpx_runtime_create(k->sh, mc, &ro, &rt, err);
  if (st == TPX_OK)
    st = k->rd ? tpx_runtime_load_checkpoint(rt, k->rd, err)
               : tpx_runtime_load_safetensors(rt, k->path, err);
  if (k->expect_error || st != TPX_OK) {
    tpx_runtime_destroy(rt);
    tpx_mesh_comm_destroy(mc);
    return st;
  }
  size_t np = tpx_model_num_params(k->model);
  for (size_t p = 0; p < np && st == TPX_OK; p++) {
    tpx_param_info in;
    tpx_model_param(k->model, (int64_t)p, &in, NULL);
    int64_t n = 1;
    for (int i = 0; i < in.ndim; i++) n *= in.shape[i];
    float *full = malloc((size_t)n * 4);
    st = tpx_runtime_gather_param(rt, (int64_t)p, full, TPX_DTYPE_F32, err);
    int64_t src = in.tied_to >= 0 ? in.tied_to : (int64_t)p;
    for (int64_t i = 0; i < n && st == TPX_OK; i++) {
      float want = rt_weight(src, i);
      if (k->file_dtype == TPX_DTYPE_BF16)
        want = rt_from_bf16(rt_to_bf16(want));
      if (full[i] != want)
        st = tpx_error_set(err, TPX_INTERNAL, "%s[%lld] = %g, stored %g",
                           in.fqn, (long long)i, full[i], want);
    }
    tpx_runtime_param_info ri;
    if (st == TPX_OK)
      st = tpx_runtime_param(rt, (int64_t)p, &ri, err);
    if (st == TPX_OK && k->storage == TPX_DTYPE_BF16)
      for (int64_t i = 0; i < ri.sharded_numel; i++)
        if (((const uint16_t *)rt_hv(k->sim, ri.sharded))[i] !=
            rt_to_bf16(((const float *)rt_hv(k->sim, ri.master))[i]))
          st = tpx_error_set(err, TPX_INTERNAL, "%s: shard != bf16(master)",
                             in.fqn);
    free(full);
  }
  /* Loading into an unsharded unit is refused. */
  if (st == TPX_OK && tpx_runtime_fsdp_enabled(rt)) {
    st = tpx_runtime_unshard(rt, 0, TPX_RUNTIME_FORWARD, err);
    tpx_error e2 = {0};
    if (st == TPX_OK && (tpx_runtime_load_safetensors(rt, k->path, &e2) !=
                             TPX_INVALID_ARGUMENT ||
                         !strstr(e2.message, "unsharded")))
      st = tpx_error_set(err, TPX_INTERNAL, "unsharded load: '%s'", e2.message);
  }
  tpx_runtime_destroy(rt);
  tpx_mesh_comm_destroy(mc);
  return st;
}

typedef struct kcase {
  int64_t dps, tp;
  tpx_dtype file_dtype, storage;
} kcase;

static const kcase kcases[] = {
    {1, 1, TPX_DTYPE_F32, TPX_DTYPE_F32},
    {2, 2, TPX_DTYPE_F32, TPX_DTYPE_F32},
    {3, 1, TPX_DTYPE_F32, TPX_DTYPE_F32},
    {1, 4, TPX_DTYPE_BF16, TPX_DTYPE_F32},
    {3, 2, TPX_DTYPE_F32, TPX_DTYPE_BF16},
    {2, 2, TPX_DTYPE_BF16, TPX_DTYPE_BF16},
};

static void tmp_path(char *buf, size_t n, const char *tag) {
  snprintf(buf, n, "/tmp/tpx_rt_ckpt_%ld_%s.safetensors", (long)getpid(), tag);
}

START_TEST(t_load) {
  const kcase *c = &kcases[_i];
  char path[256];
  tmp_path(path, sizeof path, "ok");
  kctx k = {rt_tiny_model_dt(c->file_dtype),
            fx_mesh(1, c->dps, c->tp),
            NULL,
            path,
            c->file_dtype,
            c->storage,
            0,
            0,
            NULL};
  tpx_plan *plan = rt_tiny_plan(0);
  write_st(k.model, path, c->file_dtype, 0);
  tpx_sharding_options so = TPX_SHARDING_OPTIONS_INIT;
  so.param_dtype = TPX_DTYPE_INVALID;
  tpx_error e = {0};
  ck_assert_int_eq(tpx_sharding_create(k.model, plan, k.mesh, &so, &k.sh, &e),
                   TPX_OK);
  tpx_status st = TPX_OK;
  for (k.sim = 0; k.sim < 2 && st == TPX_OK; k.sim++) /* host, sim memory */
    st = rt_local_run((int)(c->dps * c->tp), k.sim, body, &k, &e);
  /* one reader, opened once, for every rank's thread */
  tpx_checkpoint_reader *rd = NULL;
  if (st == TPX_OK)
    st = tpx_checkpoint_reader_create(path, NULL, &rd, &e);
  k.rd = rd;
  k.sim = 0;
  if (st == TPX_OK)
    st = rt_local_run((int)(c->dps * c->tp), 0, body, &k, &e);
  tpx_checkpoint_reader_destroy(rd);
  unlink(path);
  ck_assert_msg(st == TPX_OK, "%s", e.message);
  tpx_sharding_destroy(k.sh);
  tpx_plan_destroy(plan);
  tpx_mesh_destroy(k.mesh);
  tpx_model_destroy(k.model);
}
END_TEST

static void expect_fail(const char *path, int bad_shape, const char *text) {
  kctx k = {rt_tiny_model(),
            fx_mesh(1, 2, 1),
            NULL,
            path,
            TPX_DTYPE_F32,
            TPX_DTYPE_F32,
            1,
            0,
            NULL};
  if (bad_shape)
    write_st(k.model, path, TPX_DTYPE_F32, 1);
  tpx_error e = {0};
  ck_assert_int_eq(tpx_sharding_create(k.model, NULL, k.mesh, NULL, &k.sh, &e),
                   TPX_OK);
  tpx_status st = tpx_local_run(2, body, &k, &e);
  if (bad_shape)
    unlink(path);
  ck_assert_msg(st != TPX_OK, "loading %s succeeded", path);
  ck_assert_msg(strstr(e.message, text) != NULL, "message '%s' lacks '%s'",
                e.message, text);
  tpx_sharding_destroy(k.sh);
  tpx_mesh_destroy(k.mesh);
  tpx_model_destroy(k.model);
}

START_TEST(t_errors) {
  char path[256];
  tmp_path(path, sizeof path, "missing");
  expect_fail(path, 0, "tpx_rt_ckpt_");
  tmp_path(path, sizeof path, "shape");
  expect_fail(path, 1, "emb.weight");
  tpx_error e = {0};
  ck_assert_int_eq(tpx_runtime_load_safetensors(NULL, path, &e),
                   TPX_INVALID_ARGUMENT);
  tpx_error e2 = {0};
  ck_assert_int_eq(tpx_runtime_load_checkpoint(NULL, NULL, &e2),
                   TPX_INVALID_ARGUMENT);
  ck_assert_msg(strstr(e2.message, "tpx_runtime_load_checkpoint"), "%s",
                e2.message);
}
END_TEST

/* ---- an FP8 checkpoint (docs/CHECKPOINT.md "FP8 checkpoints") ---- */

/* The tiny model's checkpoint with both Linear weights stored F8_E4M3
 * beside a [1, 1] F32 block scale, the rest F32; `want` gets every
 * parameter's values as upstream loads them (f32: widened F8 times its
 * scale, one f32 product). */
typedef struct fp8ctx {
  tpx_model *model;
  tpx_mesh *mesh;
  tpx_sharding *sh;
  const tpx_checkpoint_reader *rd;
  float *want[32];
} fp8ctx;

static int is_lin_weight(const char *fqn) {
  return strstr(fqn, ".lin.weight") != NULL;
}

static void write_fp8(fp8ctx *k, const char *dir) {
  size_t np = tpx_model_num_params(k->model), ne = 0;
  tpx_checkpoint_entry ents[64];
  char scale[4][64];
  int ns = 0;
  tpx_error e = {0};
  for (size_t p = 0; p < np; p++) {
    tpx_param_info in;
    ck_assert_int_eq(tpx_model_param(k->model, (int64_t)p, &in, NULL), TPX_OK);
    if (in.tied_to >= 0)
      continue;
    int f8 = is_lin_weight(in.fqn);
    ents[ne] = (tpx_checkpoint_entry){
        in.fqn, f8 ? TPX_DTYPE_F8_E4M3 : TPX_DTYPE_F32, in.ndim, {0}};
    memcpy(ents[ne++].shape, in.shape, sizeof in.shape);
    if (f8) {
      snprintf(scale[ns], sizeof scale[ns], "%s_scale_inv", in.fqn);
      ents[ne++] =
          (tpx_checkpoint_entry){scale[ns++], TPX_DTYPE_F32, 2, {1, 1}};
    }
  }
  tpx_checkpoint_writer *w = NULL;
  ck_assert_msg(tpx_checkpoint_writer_create(dir, ents, ne, NULL, &w, &e) ==
                    TPX_OK,
                "%s", e.message);
  for (size_t p = 0; p < np; p++) {
    tpx_param_info in;
    tpx_model_param(k->model, (int64_t)p, &in, NULL);
    int64_t n = 1;
    for (int i = 0; i < in.ndim; i++) n *= in.shape[i];
    k->want[p] = malloc((size_t)(n ? n : 1) * 4);
    int64_t src = in.tied_to >= 0 ? in.tied_to : (int64_t)p;
    tpx_slice all = {in.ndim, {0}, {0}};
    memcpy(all.length, in.shape, sizeof in.shape);
    if (!is_lin_weight(in.fqn)) {
      for (int64_t i = 0; i < n; i++) k->want[p][i] = rt_weight(src, i);
      if (in.tied_to < 0)
        ck_assert_int_eq(tpx_checkpoint_write_slice(
                             w, in.fqn, &all, TPX_DTYPE_F32, k->want[p], &e),
                         TPX_OK);
      continue;
    }
    unsigned char b[64];
    float sc = 0.0371f * (float)(p + 1), one;
    for (int64_t i = 0; i < n; i++) {
      b[i] = (unsigned char)((i * 29 + (int64_t)p * 11 + 3) % 0x7e);
      ck_assert_int_eq(tpx_checkpoint_convert(&one, TPX_DTYPE_F32, &b[i],
                                              TPX_DTYPE_F8_E4M3, 1, &e),
                       TPX_OK);
      k->want[p][i] = one * sc;
    }
    char sn[64];
    snprintf(sn, sizeof sn, "%s_scale_inv", in.fqn);
    tpx_slice s1 = {2, {0, 0}, {1, 1}};
    ck_assert_int_eq(
        tpx_checkpoint_write_slice(w, in.fqn, &all, TPX_DTYPE_F8_E4M3, b, &e),
        TPX_OK);
    ck_assert_int_eq(
        tpx_checkpoint_write_slice(w, sn, &s1, TPX_DTYPE_F32, &sc, &e), TPX_OK);
  }
  ck_assert_msg(tpx_checkpoint_writer_finish(w, NULL, &e) == TPX_OK, "%s",
                e.message);
  tpx_checkpoint_writer_destroy(w);
}

static tpx_status body_fp8(tpx_comm *world, void *arg, tpx_error *err) {
  fp8ctx *k = arg;
  tpx_mesh_comm *mc = NULL;
  tpx_status st = tpx_mesh_comm_create(world, k->mesh, &mc, err);
  if (st != TPX_OK)
    return st;
  tpx_runtime *rt = NULL;
  st = tpx_runtime_create(k->sh, mc, NULL, &rt, err);
  if (st == TPX_OK)
    st = tpx_runtime_load_checkpoint(rt, k->rd, err);
  size_t np = tpx_model_num_params(k->model);
  for (size_t p = 0; p < np && st == TPX_OK; p++) {
    tpx_param_info in;
    tpx_model_param(k->model, (int64_t)p, &in, NULL);
    int64_t n = 1;
    for (int i = 0; i < in.ndim; i++) n *= in.shape[i];
    float *full = malloc((size_t)(n ? n : 1) * 4);
    st = tpx_runtime_gather_param(rt, (int64_t)p, full, TPX_DTYPE_F32, err);
    for (int64_t i = 0; i < n && st == TPX_OK; i++)
      if (memcmp(&full[i], &k->want[p][i], 4) != 0)
        st = tpx_error_set(err, TPX_INTERNAL, "%s[%lld] = %g, dequantized %g",
                           in.fqn, (long long)i, full[i], k->want[p][i]);
    free(full);
  }
  tpx_runtime_destroy(rt);
  tpx_mesh_comm_destroy(mc);
  return st;
}

START_TEST(t_load_fp8) {
  static const char cfg[] =
      "{\"architectures\": [\"TpxTestForCausalLM\"], \"torch_dtype\": "
      "\"float32\", \"quantization_config\": {\"quant_method\": \"fp8\"}}";
  char dir[] = "/tmp/tpx_rt_fp8_XXXXXX", path[256];
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  fp8ctx k = {rt_tiny_model(), fx_mesh(1, 2, 2), NULL, NULL, {NULL}};
  tpx_error e = {0};
  ck_assert_int_eq(
      tpx_model_set_config(k.model, cfg, strlen(cfg), "config.json", &e),
      TPX_OK);
  write_fp8(&k, dir);
  ck_assert_msg(tpx_model_add_safetensors(k.model, dir, &e) == TPX_OK, "%s",
                e.message);
  ck_assert_int_eq(tpx_model_num_quantized(k.model), 2);
  tpx_plan *plan = rt_tiny_plan(0);
  ck_assert_int_eq(tpx_sharding_create(k.model, plan, k.mesh, NULL, &k.sh, &e),
                   TPX_OK);
  tpx_checkpoint_reader *rd = NULL;
  ck_assert_int_eq(tpx_checkpoint_reader_create(path, NULL, &rd, &e), TPX_OK);
  k.rd = rd;
  tpx_status st = rt_local_run(4, 0, body_fp8, &k, &e);
  tpx_checkpoint_reader_destroy(rd);
  unlink(path);
  rmdir(dir);
  ck_assert_msg(st == TPX_OK, "%s", e.message);
  for (size_t p = 0; p < 32; p++) free(k.want[p]);
  tpx_sharding_destroy(k.sh);
  tpx_plan_destroy(plan);
  tpx_mesh_destroy(k.mesh);
  tpx_model_destroy(k.model);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("rt_ckpt");
  TCase *tc = tcase_create("ckpt");
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, t_load, 0, (int)(sizeof kcases / sizeof kcases[0]));
  tcase_add_test(tc, t_errors);
  tcase_add_test(tc, t_load_fp8);
  suite_add_tcase(s, tc);
  return s;
}

FX_MAIN(suite)
