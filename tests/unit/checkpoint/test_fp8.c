/* test_fp8.c — FP8 block-quantized checkpoints through the library
 * (docs/CHECKPOINT.md "FP8 checkpoints"): tpx_model_add_safetensors pairs
 * a weight stored F8_E4M3 with its `_scale_inv`, gives the weight the
 * config's dtype and no scale a parameter (tpx_model_quantized lists the
 * pair), drops activation scales; tpx_checkpoint_check_model accepts the
 * F8 weight, tpx_checkpoint_read_param reads it into a float buffer
 * (dequantized: the values are test_fp8_dequant.c's), refuses an integer
 * one (TPX_UNSUPPORTED naming it and its scale) and reads it into an F8
 * one as stored; a scale on
 * a weight that is not F8, and scales under a config without
 * quantization_config, are refused naming the tensor. The CLI's cases are
 * in cli_fp8.sh. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tpx/tpx.h"

#include "../test_tmpdir.h"

static tpx_error e_;
#define CHECK_OK(x) ck_assert_msg((x) == TPX_OK, "%s", e_.message)

static const char *const cfg_q =
    "{\"architectures\": [\"TpxTestForCausalLM\"], \"torch_dtype\": "
    "\"bfloat16\", \"quantization_config\": {\"quant_method\": \"fp8\", "
    "\"weight_block_size\": [128, 128]}}";
static const char *const cfg_plain =
    "{\"architectures\": [\"TpxTestForCausalLM\"], \"torch_dtype\": "
    "\"bfloat16\"}";

/* a.weight [256, 130] `wdt` with a.weight_scale_inv [2, 2] F32 (an F8
 * weight), a.activation_scale [] F32, n.weight [130] BF16. */
static void write_ckpt(const char *dir, tpx_dtype wdt) {
  tpx_checkpoint_entry ents[4] = {
      {"a.weight", wdt, 2, {256, 130}},
      {"a.weight_scale_inv", TPX_DTYPE_F32, 2, {2, 2}},
      {"a.activation_scale", TPX_DTYPE_F32, 0, {0}},
      {"n.weight", TPX_DTYPE_BF16, 1, {130}},
  };
  tpx_checkpoint_writer *w = NULL;
  CHECK_OK(tpx_checkpoint_writer_create(dir, ents, 4, NULL, &w, &e_));
  static unsigned char buf[256 * 130 * 2];
  for (size_t i = 0; i < sizeof buf; i++) buf[i] = (unsigned char)(i % 0x70);
  for (int k = 0; k < 4; k++) {
    tpx_slice all = {ents[k].ndim, {0}, {0}};
    memcpy(all.length, ents[k].shape, sizeof ents[k].shape);
    CHECK_OK(tpx_checkpoint_write_slice(w, ents[k].name, &all, ents[k].dtype,
                                        buf, &e_));
  }
  CHECK_OK(tpx_checkpoint_writer_finish(w, NULL, &e_));
  tpx_checkpoint_writer_destroy(w);
}

static tpx_model *model_of(const char *cfg) {
  tpx_model *m = NULL;
  CHECK_OK(tpx_model_create(&m, &e_));
  CHECK_OK(tpx_model_set_config(m, cfg, strlen(cfg), "config.json", &e_));
  return m;
}

START_TEST(pairs_and_reads) {
  make_tmpdir();
  write_ckpt(tmpdir, TPX_DTYPE_F8_E4M3);
  tpx_model *m = model_of(cfg_q);
  CHECK_OK(tpx_model_add_safetensors(m, tmpdir, &e_));
  ck_assert_int_eq(tpx_model_num_params(m), 2); /* no scale is a parameter */
  tpx_param_info p;
  CHECK_OK(tpx_model_param(m, tpx_model_find_param(m, "a.weight"), &p, &e_));
  ck_assert_int_eq(p.dtype, TPX_DTYPE_BF16);
  ck_assert_int_eq(tpx_model_num_quantized(m), 1);
  tpx_quantized_weight q;
  CHECK_OK(tpx_model_quantized(m, 0, &q, &e_));
  ck_assert_str_eq(q.weight, "a.weight");
  ck_assert_str_eq(q.scale, "a.weight_scale_inv");
  ck_assert_int_eq(q.stored_dtype, TPX_DTYPE_F8_E4M3);
  ck_assert_int_eq(q.scale_dtype, TPX_DTYPE_F32);
  ck_assert_int_eq(q.train_dtype, TPX_DTYPE_BF16);
  ck_assert_int_eq(q.numel, 256 * 130);
  ck_assert_int_eq(q.scale_numel, 4);
  ck_assert_int_eq(q.block[0], 128);
  ck_assert_int_eq(q.block[1], 128);
  ck_assert_int_eq(tpx_model_quantized(m, 1, &q, NULL), TPX_OUT_OF_RANGE);
  ck_assert_int_eq(tpx_model_quantized(NULL, 0, &q, NULL),
                   TPX_INVALID_ARGUMENT);
  ck_assert_int_eq(tpx_model_num_quantized(NULL), 0);

  tpx_checkpoint_reader *rd = NULL;
  CHECK_OK(
      tpx_checkpoint_reader_create(tmp("model.safetensors"), NULL, &rd, &e_));
  /* the checkpoint holds the model (the F8 weight is known), ... */
  CHECK_OK(tpx_checkpoint_check_model(rd, m, &e_));
  /* ... and reads it dequantized into floats (the values against
   * upstream's: checkpoint-fp8-dequant), or into an integer type not at
   * all */
  const char *names[3] = {"dp_replicate", "dp_shard", "tp"};
  int64_t sizes[3] = {1, 2, 1};
  tpx_mesh *mesh = NULL;
  tpx_sharding *sh = NULL;
  CHECK_OK(tpx_mesh_create(names, sizes, 3, &mesh, &e_));
  tpx_plan *plan = NULL;
  CHECK_OK(tpx_plan_create(&plan, &e_));
  CHECK_OK(tpx_sharding_create(m, plan, mesh, NULL, &sh, &e_));
  static uint16_t dst[128 * 130 * 2];
  CHECK_OK(tpx_checkpoint_read_param(rd, sh,
                                     tpx_model_find_param(m, "a.weight"), 0,
                                     TPX_DTYPE_BF16, dst, sizeof dst, &e_));
  tpx_error err = {0};
  ck_assert_int_eq(
      tpx_checkpoint_read_param(rd, sh, tpx_model_find_param(m, "a.weight"), 0,
                                TPX_DTYPE_I32, dst, sizeof dst, &err),
      TPX_UNSUPPORTED);
  ck_assert_msg(strstr(err.message, "'a.weight' is stored F8_E4M3") &&
                    strstr(err.message, "'a.weight_scale_inv'") &&
                    strstr(err.message, "dequantized"),
                "%s", err.message);
  /* read as itself (F8 into F8), it is the stored bytes: rank 1's rows */
  CHECK_OK(tpx_checkpoint_read_param(rd, sh,
                                     tpx_model_find_param(m, "a.weight"), 1,
                                     TPX_DTYPE_F8_E4M3, dst, 128 * 130, &e_));
  const unsigned char *got = (const unsigned char *)dst;
  for (size_t i = 0; i < 128 * 130; i++)
    ck_assert_uint_eq(got[i], (128 * 130 + i) % 0x70);
  tpx_sharding_destroy(sh);
  tpx_plan_destroy(plan);
  tpx_mesh_destroy(mesh);
  tpx_checkpoint_reader_destroy(rd);
  tpx_model_destroy(m);
  remove_tmpdir();
}
END_TEST

START_TEST(refusals_name_the_tensor) {
  make_tmpdir();
  write_ckpt(tmpdir, TPX_DTYPE_BF16); /* a scale on a weight that is not F8 */
  tpx_model *m = model_of(cfg_q);
  tpx_error err = {0};
  ck_assert_int_eq(tpx_model_add_safetensors(m, tmpdir, &err), TPX_VALIDATION);
  ck_assert_msg(strstr(err.message, "'a.weight' has an FP8 scale") &&
                    strstr(err.message, "stored BF16"),
                "%s", err.message);
  tpx_model_destroy(m);
  remove_tmpdir();

  make_tmpdir();
  write_ckpt(tmpdir, TPX_DTYPE_F8_E4M3);
  m = model_of(cfg_plain); /* scales, but no quantization_config */
  memset(&err, 0, sizeof err);
  ck_assert_int_eq(tpx_model_add_safetensors(m, tmpdir, &err), TPX_VALIDATION);
  ck_assert_msg(strstr(err.message, "'a.weight_scale_inv'") &&
                    strstr(err.message, "quantization_config"),
                "%s", err.message);
  ck_assert_int_eq(tpx_model_num_quantized(m), 0);
  tpx_model_destroy(m);
  remove_tmpdir();
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("checkpoint-fp8");
  TCase *tc = tcase_create("fp8");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, pairs_and_reads);
  tcase_add_test(tc, refusals_name_the_tensor);
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
