/* test_fp8_dequant.c — the checkpoint reader dequantizes FP8 weights read
 * into floats, bit for bit as NeMo Automodel 0.7.0 does on load
 * (docs/CHECKPOINT.md "FP8 checkpoints"). The checkpoint and the goldens
 * in tests/data/fp8/dequant/ were computed once by upstream's own
 * functions (tools/upstream/fp8_dequant.py): 128 x 128 F32 block scales
 * with partial edge blocks, F8_E8M0 block scales (one block into f32
 * subnormals), one F32 scale per tensor, one per expert of a fused 3-D
 * expert tensor. Checked: read_param of the whole tensor into F32, BF16
 * and F16; every rank's rows at dp_shard 3 (cuts inside a block);
 * read_slice of a box cutting inside blocks in both dims; read_rank;
 * a tpx-shard rank file holding a slice and the whole scale; and the
 * refusals (a scale fitting no form, a rank file without its placement).
 * The directory comes as argv[1]. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpx/tpx.h"

#include "../test_tmpdir.h"

static const char *data_dir;
static tpx_error e_;
#define CHECK_OK(x) ck_assert_msg((x) == TPX_OK, "%s", e_.message)

typedef struct fixture {
  tpx_model *m;
  tpx_checkpoint_reader *rd, *exp;
  tpx_mesh *mesh;
  tpx_plan *plan;
  tpx_sharding *sh;
} fixture;

static const char *path(const char *name) {
  static char buf[2][1024];
  static int k;
  k ^= 1;
  snprintf(buf[k], sizeof buf[k], "%s/%s", data_dir, name);
  return buf[k];
}

static void fx_open(fixture *f, int64_t dp_shard) {
  memset(f, 0, sizeof *f);
  FILE *c = fopen(path("config.json"), "rb");
  ck_assert_ptr_nonnull(c);
  char cfg[4096];
  size_t n = fread(cfg, 1, sizeof cfg, c);
  fclose(c);
  CHECK_OK(tpx_model_create(&f->m, &e_));
  CHECK_OK(tpx_model_set_config(f->m, cfg, n, "config.json", &e_));
  CHECK_OK(tpx_model_add_safetensors(f->m, data_dir, &e_));
  CHECK_OK(tpx_checkpoint_reader_create(path("model.safetensors"), NULL, &f->rd,
                                        &e_));
  CHECK_OK(tpx_checkpoint_reader_create(path("expected.safetensors"), NULL,
                                        &f->exp, &e_));
  const char *names[3] = {"dp_replicate", "dp_shard", "tp"};
  int64_t sizes[3] = {1, dp_shard, 1};
  CHECK_OK(tpx_mesh_create(names, sizes, 3, &f->mesh, &e_));
  CHECK_OK(tpx_plan_create(&f->plan, &e_));
  CHECK_OK(tpx_sharding_create(f->m, f->plan, f->mesh, NULL, &f->sh, &e_));
}

static void fx_close(fixture *f) {
  tpx_sharding_destroy(f->sh);
  tpx_plan_destroy(f->plan);
  tpx_mesh_destroy(f->mesh);
  tpx_checkpoint_reader_destroy(f->rd);
  tpx_checkpoint_reader_destroy(f->exp);
  tpx_model_destroy(f->m);
}

/* The golden `<name>.<DT>` box `sl` (malloc'd, dtype dt). */
static void *golden(const fixture *f, const char *name, tpx_dtype dt,
                    const tpx_slice *sl) {
  char key[256];
  snprintf(key, sizeof key, "%s.%s", name, tpx_dtype_safetensors_name(dt));
  int64_t ti = tpx_checkpoint_find(f->exp, key);
  ck_assert_msg(ti >= 0, "no golden %s", key);
  size_t nb = (size_t)tpx_slice_numel(sl) * tpx_dtype_size(dt);
  void *g = malloc(nb ? nb : 1);
  CHECK_OK(tpx_checkpoint_read_slice(f->exp, ti, sl, dt, g, nb, &e_));
  return g;
}

static void same_bits(const void *got, const void *want, size_t nb,
                      const char *what) {
  const unsigned char *a = got, *b = want;
  for (size_t i = 0; i < nb; i++)
    ck_assert_msg(a[i] == b[i], "%s: byte %zu is %02x, upstream %02x", what, i,
                  a[i], b[i]);
}

/* read_param of `name` for every rank into dt, against the golden. */
static void check_param(const fixture *f, const char *name, tpx_dtype dt) {
  int64_t p = tpx_model_find_param(f->m, name);
  ck_assert_int_ge(p, 0);
  for (int64_t r = 0; r < tpx_mesh_world_size(f->mesh); r++) {
    tpx_slice sl;
    CHECK_OK(tpx_sharding_local_slice(f->sh, p, r, &sl, &e_));
    size_t nb = (size_t)tpx_slice_numel(&sl) * tpx_dtype_size(dt);
    void *got = malloc(nb ? nb : 1);
    CHECK_OK(tpx_checkpoint_read_param(f->rd, f->sh, p, r, dt, got, nb, &e_));
    void *want = golden(f, name, dt, &sl);
    char what[300];
    snprintf(what, sizeof what, "%s rank %lld into %s", name, (long long)r,
             tpx_dtype_short_name(dt));
    same_bits(got, want, nb, what);
    free(got);
    free(want);
  }
}

START_TEST(whole_tensors_bit_for_bit) {
  fixture f;
  fx_open(&f, 1);
  const tpx_dtype all[3] = {TPX_DTYPE_F32, TPX_DTYPE_BF16, TPX_DTYPE_F16};
  for (int k = 0; k < 3; k++) {
    check_param(&f, "blk.weight", all[k]);
    check_param(&f, "pt.weight", all[k]);
    check_param(&f, "ex.gate_up_proj", all[k]);
  }
  check_param(&f, "e8.weight", TPX_DTYPE_BF16); /* F8_E8M0 scales */
  fx_close(&f);
}
END_TEST

START_TEST(rank_slices_cut_inside_blocks) {
  fixture f;
  fx_open(&f, 3); /* rows 0-43, 44-87, 88-129; experts 1, 1, 1 */
  check_param(&f, "blk.weight", TPX_DTYPE_BF16);
  check_param(&f, "blk.weight", TPX_DTYPE_F32);
  check_param(&f, "e8.weight", TPX_DTYPE_BF16);
  check_param(&f, "ex.gate_up_proj", TPX_DTYPE_F32);
  /* a box cutting blocks in both dims, straight from the tensor */
  tpx_slice box = {2, {50, 100}, {80, 36}};
  int64_t ti = tpx_checkpoint_find(f.rd, "blk.weight");
  float got[80 * 36];
  CHECK_OK(tpx_checkpoint_read_slice(f.rd, ti, &box, TPX_DTYPE_F32, got,
                                     sizeof got, &e_));
  void *want = golden(&f, "blk.weight", TPX_DTYPE_F32, &box);
  same_bits(got, want, sizeof got, "blk.weight [50:130, 100:136]");
  free(want);
  /* every parameter of rank 1 at once, on the reader's threads, as the
   * runtime loads them: f32 (masters), e8.weight bf16 (its golden) */
  size_t np = tpx_model_num_params(f.m);
  tpx_checkpoint_dest *d = calloc(np, sizeof *d);
  for (size_t p = 0; p < np; p++) {
    tpx_param_info info;
    tpx_slice sl;
    CHECK_OK(tpx_model_param(f.m, (int64_t)p, &info, &e_));
    CHECK_OK(tpx_sharding_local_slice(f.sh, (int64_t)p, 1, &sl, &e_));
    d[p].dtype = strcmp(info.fqn, "e8.weight") ? TPX_DTYPE_F32 : TPX_DTYPE_BF16;
    d[p].bytes = (size_t)tpx_slice_numel(&sl) * tpx_dtype_size(d[p].dtype);
    d[p].data = malloc(d[p].bytes ? d[p].bytes : 1);
  }
  CHECK_OK(tpx_checkpoint_read_rank(f.rd, f.sh, 1, d, &e_));
  for (size_t p = 0; p < np; p++) {
    tpx_param_info info;
    tpx_slice sl;
    CHECK_OK(tpx_model_param(f.m, (int64_t)p, &info, &e_));
    CHECK_OK(tpx_sharding_local_slice(f.sh, (int64_t)p, 1, &sl, &e_));
    void *w = golden(&f, info.fqn, d[p].dtype, &sl);
    same_bits(d[p].data, w, d[p].bytes, info.fqn);
    free(w);
    free(d[p].data);
  }
  free(d);
  fx_close(&f);
}
END_TEST

/* A tpx-shard rank file holding rows [88, 130) of blk.weight (F8) at
 * offsets [88, 0] (across the block boundary at row 128) and its scale whole,
 * as tpx shard writes them; with `placed` 0 the file's tpx.tensors lacks the
 * weight. */
static void write_rank_file(const fixture *f, const char *dir, int placed) {
  tpx_checkpoint_entry ents[2] = {
      {"blk.weight", TPX_DTYPE_F8_E4M3, 2, {42, 136}},
      {"blk.weight_scale_inv", TPX_DTYPE_F32, 2, {2, 2}},
  };
  const char *keys[2] = {"format", "tpx.tensors"};
  const char *vals[2] = {
      "tpx-shard/1",
      placed ? "{\"blk.weight\": {\"global_shape\": [130, 136], \"offsets\": "
               "[88, 0], \"placements\": [\"replicate\", \"shard(0)\", "
               "\"replicate\"]}, \"blk.weight_scale_inv\": {\"global_shape\": "
               "[2, 2], \"offsets\": [0, 0], \"placements\": [\"replicate\", "
               "\"replicate\", \"replicate\"]}}"
             : "{}"};
  tpx_checkpoint_writer_options o = TPX_CHECKPOINT_WRITER_OPTIONS_INIT;
  o.num_metadata = 2;
  o.metadata_keys = keys;
  o.metadata_values = vals;
  tpx_checkpoint_writer *w = NULL;
  CHECK_OK(tpx_checkpoint_writer_create(dir, ents, 2, &o, &w, &e_));
  unsigned char rows[42 * 136];
  tpx_slice in = {2, {88, 0}, {42, 136}};
  CHECK_OK(tpx_checkpoint_read_slice(
      f->rd, tpx_checkpoint_find(f->rd, "blk.weight"), &in, TPX_DTYPE_F8_E4M3,
      rows, sizeof rows, &e_));
  tpx_slice all = {2, {0, 0}, {42, 136}};
  CHECK_OK(tpx_checkpoint_write_slice(w, "blk.weight", &all, TPX_DTYPE_F8_E4M3,
                                      rows, &e_));
  float scale[4];
  tpx_slice s = {2, {0, 0}, {2, 2}};
  CHECK_OK(tpx_checkpoint_read_slice(
      f->rd, tpx_checkpoint_find(f->rd, "blk.weight_scale_inv"), &s,
      TPX_DTYPE_F32, scale, sizeof scale, &e_));
  CHECK_OK(tpx_checkpoint_write_slice(w, "blk.weight_scale_inv", &s,
                                      TPX_DTYPE_F32, scale, &e_));
  CHECK_OK(tpx_checkpoint_writer_finish(w, NULL, &e_));
  tpx_checkpoint_writer_destroy(w);
}

START_TEST(rank_file_with_whole_scale) {
  fixture f;
  fx_open(&f, 1);
  make_tmpdir();
  write_rank_file(&f, tmpdir, 1);
  tpx_checkpoint_reader *rk = NULL;
  CHECK_OK(
      tpx_checkpoint_reader_create(tmp("model.safetensors"), NULL, &rk, &e_));
  tpx_slice local = {2, {0, 0}, {42, 136}}, global = {2, {88, 0}, {42, 136}};
  uint16_t got[42 * 136];
  CHECK_OK(tpx_checkpoint_read_slice(rk, tpx_checkpoint_find(rk, "blk.weight"),
                                     &local, TPX_DTYPE_BF16, got, sizeof got,
                                     &e_));
  void *want = golden(&f, "blk.weight", TPX_DTYPE_BF16, &global);
  same_bits(got, want, sizeof got, "rank file blk.weight");
  free(want);
  tpx_checkpoint_reader_destroy(rk);
  remove_tmpdir();

  /* the same file without the weight's placement: its blocks unknown */
  make_tmpdir();
  write_rank_file(&f, tmpdir, 0);
  CHECK_OK(
      tpx_checkpoint_reader_create(tmp("model.safetensors"), NULL, &rk, &e_));
  tpx_error err = {0};
  ck_assert_int_eq(
      tpx_checkpoint_read_slice(rk, tpx_checkpoint_find(rk, "blk.weight"),
                                &local, TPX_DTYPE_BF16, got, sizeof got, &err),
      TPX_VALIDATION);
  ck_assert_msg(strstr(err.message, "'blk.weight'") &&
                    strstr(err.message, "tpx.tensors"),
                "%s", err.message);
  /* read as stored, it is the F8 bytes, no scale needed */
  CHECK_OK(tpx_checkpoint_read_slice(rk, tpx_checkpoint_find(rk, "blk.weight"),
                                     &local, TPX_DTYPE_F8_E4M3, got, sizeof got,
                                     &e_));
  tpx_checkpoint_reader_destroy(rk);
  remove_tmpdir();
  fx_close(&f);
}
END_TEST

START_TEST(scale_fitting_no_form_refused) {
  make_tmpdir();
  tpx_checkpoint_entry ents[2] = {
      {"w.weight", TPX_DTYPE_F8_E4M3, 2, {130, 136}},
      {"w.weight_scale_inv", TPX_DTYPE_F32, 2, {2, 3}},
  };
  tpx_checkpoint_writer *w = NULL;
  CHECK_OK(tpx_checkpoint_writer_create(tmpdir, ents, 2, NULL, &w, &e_));
  static unsigned char buf[130 * 136 * 4];
  for (int k = 0; k < 2; k++) {
    tpx_slice all = {2, {0, 0}, {0, 0}};
    memcpy(all.length, ents[k].shape, sizeof all.length);
    CHECK_OK(tpx_checkpoint_write_slice(w, ents[k].name, &all, ents[k].dtype,
                                        buf, &e_));
  }
  CHECK_OK(tpx_checkpoint_writer_finish(w, NULL, &e_));
  tpx_checkpoint_writer_destroy(w);
  tpx_checkpoint_reader *rd = NULL;
  CHECK_OK(
      tpx_checkpoint_reader_create(tmp("model.safetensors"), NULL, &rd, &e_));
  tpx_slice all = {2, {0, 0}, {130, 136}};
  tpx_error err = {0};
  ck_assert_int_eq(tpx_checkpoint_read_slice(rd, 0, &all, TPX_DTYPE_F32, buf,
                                             sizeof buf, &err),
                   TPX_VALIDATION);
  ck_assert_msg(strstr(err.message, "'w.weight_scale_inv'") &&
                    strstr(err.message, "[2, 3]") &&
                    strstr(err.message, "cannot dequantize"),
                "%s", err.message);
  tpx_checkpoint_reader_destroy(rd);
  remove_tmpdir();
}
END_TEST

/* A grouped expert parameter (transformers 5's gate_up_proj [E, 2I, H])
 * folded from per-expert F8 tensors, each with its own scale: every
 * element is its source's element dequantized with its source's scale. */
START_TEST(folded_experts_dequantized) {
  enum { E = 2, I = 3, H = 5 };
  make_tmpdir();
  tpx_checkpoint_entry ents[4 * E];
  char names[4 * E][128];
  int k = 0;
  for (int e = 0; e < E; e++)
    for (int j = 0; j < 2; j++) {
      snprintf(names[k], sizeof names[k],
               "model.layers.0.mlp.experts.%d.%s_proj.weight", e,
               j ? "up" : "gate");
      ents[k] = (tpx_checkpoint_entry){names[k], TPX_DTYPE_F8_E4M3, 2, {I, H}};
      snprintf(names[k + 1], sizeof names[k + 1],
               "model.layers.0.mlp.experts.%d.%s_proj.weight_scale_inv", e,
               j ? "up" : "gate");
      ents[k + 1] =
          (tpx_checkpoint_entry){names[k + 1], TPX_DTYPE_F32, 2, {1, 1}};
      k += 2;
    }
  tpx_checkpoint_writer *w = NULL;
  CHECK_OK(tpx_checkpoint_writer_create(tmpdir, ents, 4 * E, NULL, &w, &e_));
  for (k = 0; k < 4 * E; k += 2) {
    unsigned char b[I * H];
    for (int i = 0; i < I * H; i++)
      b[i] = (unsigned char)(0x21 + 7 * i + 29 * k);
    float sc = 0.0123f * (float)(k + 1);
    tpx_slice a = {2, {0, 0}, {I, H}}, o = {2, {0, 0}, {1, 1}};
    CHECK_OK(
        tpx_checkpoint_write_slice(w, names[k], &a, TPX_DTYPE_F8_E4M3, b, &e_));
    CHECK_OK(tpx_checkpoint_write_slice(w, names[k + 1], &o, TPX_DTYPE_F32, &sc,
                                        &e_));
  }
  CHECK_OK(tpx_checkpoint_writer_finish(w, NULL, &e_));
  tpx_checkpoint_writer_destroy(w);
  static const char cfg[] =
      "{\"architectures\": [\"TpxTestForCausalLM\"], \"torch_dtype\": "
      "\"bfloat16\", \"quantization_config\": {\"quant_method\": \"fp8\"}}";
  tpx_model *m = NULL;
  CHECK_OK(tpx_model_create(&m, &e_));
  CHECK_OK(tpx_model_set_config(m, cfg, strlen(cfg), "config.json", &e_));
  int64_t gu[3] = {E, 2 * I, H};
  CHECK_OK(tpx_model_add_param(m, "model.layers.0.mlp.experts", "gate_up_proj",
                               gu, 3, TPX_DTYPE_BF16, NULL, &e_));
  CHECK_OK(tpx_model_add_safetensors(m, tmpdir, &e_));
  ck_assert_int_eq(tpx_model_num_quantized(m), 2 * E);
  tpx_checkpoint_reader *rd = NULL;
  CHECK_OK(
      tpx_checkpoint_reader_create(tmp("model.safetensors"), NULL, &rd, &e_));
  const char *mn[3] = {"dp_replicate", "dp_shard", "tp"};
  int64_t sizes[3] = {1, 2, 1};
  tpx_mesh *mesh = NULL;
  tpx_plan *plan = NULL;
  tpx_sharding *sh = NULL;
  CHECK_OK(tpx_mesh_create(mn, sizes, 3, &mesh, &e_));
  CHECK_OK(tpx_plan_create(&plan, &e_));
  CHECK_OK(tpx_sharding_create(m, plan, mesh, NULL, &sh, &e_));
  int64_t p =
      tpx_model_find_param(m, "model.layers.0.mlp.experts.gate_up_proj");
  ck_assert_int_ge(p, 0);
  for (int r = 0; r < 2; r++) { /* expert r on rank r */
    uint16_t got[2 * I * H], want[I * H];
    CHECK_OK(tpx_checkpoint_read_param(rd, sh, p, r, TPX_DTYPE_BF16, got,
                                       sizeof got, &e_));
    for (int j = 0; j < 2; j++) {
      tpx_slice a = {2, {0, 0}, {I, H}};
      CHECK_OK(tpx_checkpoint_read_slice(
          rd, tpx_checkpoint_find(rd, names[4 * r + 2 * j]), &a, TPX_DTYPE_BF16,
          want, sizeof want, &e_));
      same_bits(got + j * I * H, want, sizeof want, names[4 * r + 2 * j]);
    }
    /* and dequantized: not the stored values widened */
    float raw;
    tpx_slice one = {2, {0, 0}, {1, 1}};
    CHECK_OK(tpx_checkpoint_read_slice(rd,
                                       tpx_checkpoint_find(rd, names[4 * r]),
                                       &one, TPX_DTYPE_F32, &raw, 4, &e_));
    float sc;
    CHECK_OK(
        tpx_checkpoint_read_slice(rd, tpx_checkpoint_find(rd, names[4 * r + 1]),
                                  &one, TPX_DTYPE_F32, &sc, 4, &e_));
    unsigned char b0 = (unsigned char)(0x21 + 29 * 4 * r);
    float w0;
    CHECK_OK(tpx_checkpoint_convert(&w0, TPX_DTYPE_F32, &b0, TPX_DTYPE_F8_E4M3,
                                    1, &e_));
    ck_assert_float_eq(raw, w0 * sc);
  }
  tpx_sharding_destroy(sh);
  tpx_plan_destroy(plan);
  tpx_mesh_destroy(mesh);
  tpx_checkpoint_reader_destroy(rd);
  tpx_model_destroy(m);
  remove_tmpdir();
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("checkpoint-fp8-dequant");
  TCase *tc = tcase_create("dequant");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, whole_tensors_bit_for_bit);
  tcase_add_test(tc, rank_slices_cut_inside_blocks);
  tcase_add_test(tc, rank_file_with_whole_scale);
  tcase_add_test(tc, scale_fitting_no_form_refused);
  tcase_add_test(tc, folded_experts_dequantized);
  suite_add_tcase(s, tc);
  return s;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s tests/data/fp8/dequant\n", argv[0]);
    return EXIT_FAILURE;
  }
  data_dir = argv[1];
  SRunner *sr = srunner_create(suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
