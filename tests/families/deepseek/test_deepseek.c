/* test_deepseek.c — the tpx_deepseek plugin (DeepseekV4ForCausalLM): the
 * skeleton against transformers 5.24 (DeepSeek-V4-Flash sizes:
 * 284,325,869,015 parameters, the model card's "284B"; the tiny and
 * legacy-key configs; names and shapes of every part), the DeepseekV4
 * strategy's fp32 parameters through selection and sharding (held and
 * gathered in f32), and upstream's plan path: get_plan refuses, the host
 * falls back to the default base plan, and at tp > 1 validate_tp_mesh's
 * error for the single KV head (upstream's refusal). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "fam_util.h"
#include "tpx/registry.h"
#include "tpx/sharding.h"

#define FAM "deepseek"

START_TEST(test_abi) { fam_check_abi(FAM); }
END_TEST

static void assert_dtype(const tpx_model *m, const char *fqn, tpx_dtype dt) {
  tpx_param_info p;
  tpx_error err = {0};
  int64_t i = tpx_model_find_param(m, fqn);
  ck_assert_msg(i >= 0, "no parameter %s", fqn);
  ck_assert_int_eq(tpx_model_param(m, i, &p, &err), TPX_OK);
  ck_assert_msg(p.dtype == dt, "%s: dtype %s", fqn,
                tpx_dtype_short_name(p.dtype));
}

static void assert_3d(const tpx_model *m, const char *fqn, int64_t a, int64_t b,
                      int64_t c) {
  tpx_param_info p;
  tpx_error err = {0};
  int64_t i = tpx_model_find_param(m, fqn);
  ck_assert_msg(i >= 0, "no parameter %s", fqn);
  ck_assert_int_eq(tpx_model_param(m, i, &p, &err), TPX_OK);
  ck_assert_int_eq(p.ndim, 3);
  ck_assert(p.shape[0] == a && p.shape[1] == b && p.shape[2] == c);
}

START_TEST(test_flash_skeleton) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = fam_model(reg, FAM, "DeepSeek-V4-Flash.config.json", 1);
  ck_assert_int_eq(tpx_model_total_params(m), 284325869015LL);
  fam_assert_param(m, "model.embed_tokens.weight", 129280, 4096);
  fam_assert_param(m, "model.layers.0.self_attn.sinks", 64, -1);
  fam_assert_param(m, "model.layers.0.self_attn.q_a_proj.weight", 1024, 4096);
  fam_assert_param(m, "model.layers.0.self_attn.q_b_proj.weight", 32768, 1024);
  fam_assert_param(m, "model.layers.0.self_attn.kv_proj.weight", 512, 4096);
  /* grouped output: 8 groups of 4096 -> 1024, then 8192 -> 4096 */
  fam_assert_param(m, "model.layers.0.self_attn.o_a_proj.weight", 8192, 4096);
  fam_assert_param(m, "model.layers.0.self_attn.o_b_proj.weight", 4096, 8192);
  /* default schedule: layers 0, 1 HCA; then HCA, CSA alternating */
  fam_assert_param(m, "model.layers.0.self_attn.compressor.position_bias", 128,
                   512);
  fam_assert_no_param(m, "model.layers.0.self_attn.compressor.indexer.kv_proj."
                         "weight");
  fam_assert_param(m, "model.layers.3.self_attn.compressor.position_bias", 4,
                   1024);
  fam_assert_param(m, "model.layers.3.self_attn.compressor.kv_proj.weight",
                   1024, 4096);
  fam_assert_param(m,
                   "model.layers.3.self_attn.compressor.indexer.q_b_proj."
                   "weight",
                   8192, 1024);
  fam_assert_param(m,
                   "model.layers.3.self_attn.compressor.indexer.scorer."
                   "weights_proj.weight",
                   64, 4096);
  fam_assert_param(m, "model.layers.42.mlp.gate.weight", 256, 4096);
  assert_3d(m, "model.layers.42.mlp.experts.gate_up_proj", 256, 4096, 4096);
  assert_3d(m, "model.layers.42.mlp.experts.down_proj", 256, 4096, 2048);
  fam_assert_param(m, "model.layers.42.mlp.shared_experts.down_proj.weight",
                   4096, 2048);
  fam_assert_param(m, "model.layers.42.attn_hc.fn", 24, 16384);
  fam_assert_param(m, "model.layers.42.ffn_hc.scale", 3, -1);
  fam_assert_param(m, "model.hc_head.hc_fn", 4, 16384);
  fam_assert_param(m, "model.hc_head.hc_scale", 1, -1);
  fam_assert_param(m, "lm_head.weight", 129280, 4096);
  /* transformers' _keep_in_fp32_modules_strict: held in fp32 */
  assert_dtype(m, "model.layers.5.attn_hc.fn", TPX_DTYPE_F32);
  assert_dtype(m, "model.layers.5.self_attn.sinks", TPX_DTYPE_F32);
  assert_dtype(m, "model.layers.5.self_attn.compressor.position_bias",
               TPX_DTYPE_F32);
  assert_dtype(m, "model.layers.5.self_attn.q_a_norm.weight", TPX_DTYPE_F32);
  assert_dtype(m, "model.layers.5.input_layernorm.weight", TPX_DTYPE_F32);
  assert_dtype(m, "model.norm.weight", TPX_DTYPE_F32);
  assert_dtype(m, "model.layers.5.self_attn.compressor.kv_proj.weight",
               TPX_DTYPE_BF16);
  assert_dtype(m, "lm_head.weight", TPX_DTYPE_BF16);
  fam_assert_module(m, "model.rotary_emb", TPX_MODULE_ROTARY);
  fam_assert_module(m, "model.layers.3.self_attn.compressor.indexer.rotary_emb",
                    TPX_MODULE_ROTARY);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

START_TEST(test_small_skeletons) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *t = fam_model(reg, FAM, "dsv4-tiny.config.json", 1);
  tpx_model *l = fam_model(reg, FAM, "dsv4-legacy.config.json", 1);
  /* transformers 5.24 totals (meta_totals.py) */
  ck_assert_int_eq(tpx_model_total_params(t), 203235);
  ck_assert_int_eq(tpx_model_total_params(l), 155063);
  /* layer_types: sliding (no compressor), HCA (rate 16), CSA, sliding */
  fam_assert_no_param(t, "model.layers.0.self_attn.compressor.kv_proj.weight");
  fam_assert_param(t, "model.layers.1.self_attn.compressor.position_bias", 16,
                   16);
  fam_assert_param(t, "model.layers.2.self_attn.compressor.position_bias", 4,
                   32);
  fam_assert_param(
      t, "model.layers.2.self_attn.compressor.indexer.position_bias", 4, 16);
  fam_assert_param(t,
                   "model.layers.2.self_attn.compressor.indexer.kv_norm."
                   "weight",
                   8, -1);
  fam_assert_no_param(t, "model.layers.3.self_attn.compressor.position_bias");
  fam_assert_param(t, "model.layers.0.attn_hc.fn", 8, 128);
  /* legacy keys: compress_ratios [128, 4, 0], compress_rate_hca 32, tied */
  fam_assert_param(l, "model.layers.0.self_attn.compressor.position_bias", 32,
                   16);
  fam_assert_param(l,
                   "model.layers.1.self_attn.compressor.indexer.q_b_proj."
                   "weight",
                   16, 32);
  fam_assert_no_param(l, "model.layers.2.self_attn.compressor.kv_proj.weight");
  fam_assert_tied(l, "lm_head.weight", "model.embed_tokens.weight");
  tpx_model_destroy(t);
  tpx_model_destroy(l);
  tpx_registry_destroy(reg);
}
END_TEST

START_TEST(test_bad_configs) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_error err = {0};
  tpx_model *a = fam_model_json(
      "{\"architectures\": [\"DeepseekV4ForCausalLM\"], \"num_hidden_layers\": "
      "2, \"layer_types\": [\"sliding_attention\", \"full_attention\"]}");
  tpx_model *b = fam_model_json(
      "{\"architectures\": [\"DeepseekV4ForCausalLM\"], \"num_hidden_layers\": "
      "1, \"compress_ratios\": [7]}");
  tpx_model *c = fam_model_json(
      "{\"architectures\": [\"DeepseekV4ForCausalLM\"], \"o_groups\": 3}");
  ck_assert_int_ne(tpx_registry_build_skeleton(reg, a, &err), TPX_OK);
  ck_assert_ptr_nonnull(strstr(err.message, "full_attention"));
  tpx_error_clear(&err);
  ck_assert_int_ne(tpx_registry_build_skeleton(reg, b, &err), TPX_OK);
  ck_assert_ptr_nonnull(strstr(err.message, "compress_ratios[0] = 7"));
  tpx_error_clear(&err);
  ck_assert_int_ne(tpx_registry_build_skeleton(reg, c, &err), TPX_OK);
  ck_assert_ptr_nonnull(strstr(err.message, "o_groups"));
  tpx_model_destroy(a);
  tpx_model_destroy(b);
  tpx_model_destroy(c);
  tpx_registry_destroy(reg);
}
END_TEST

START_TEST(test_plan_path) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = fam_model(reg, FAM, "DeepSeek-V4-Flash.config.json", 1);
  fam_check_refused(reg, m, "DeepseekV4ForCausalLM", NULL, 0,
                    "PARALLELIZE_FUNCTIONS");
  fam_check_refused(reg, m,
                    "transformers.models.deepseek_v4.modeling_deepseek_v4."
                    "DeepseekV4ForCausalLM",
                    NULL, 1, "default base plan");
  fam_check_refused(reg, m, "DeepseekV4ForCausalLM", "x_plan", 0, "x_plan");
  /* One KV head: every tp > 1 is upstream's validate_tp_mesh error. */
  fam_check_selected(reg, m, NULL, 0, 2, 1, FAM, NULL, "heads-not-divisible",
                     "num_key_value_heads (1)", 1);
  fam_check_selected(reg, m, NULL, 0, 8, 1, FAM, NULL, "default-plan-fallback",
                     NULL, 1);
  fam_check_selected(reg, m, NULL, 0, 8, 1, FAM, NULL, "hf-style-unsupported",
                     "'lm_head': Hugging Face style 'colwise_gather_output'",
                     1);
  fam_check_selected(reg, m, NULL, 0, 1, 1, FAM, NULL, "heads-not-divisible",
                     NULL, 0);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* The fp32 patterns reach selection and sharding: matched parameters are
 * held and gathered in f32, the others in the bf16 param dtype. */
START_TEST(test_fp32) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = fam_model(reg, FAM, "dsv4-tiny.config.json", 1);
  tpx_select_options o = TPX_SELECT_OPTIONS_INIT;
  tpx_selection *sel = NULL;
  tpx_diag_list *diags = NULL;
  tpx_sharding_options so = TPX_SHARDING_OPTIONS_INIT;
  tpx_sharding *sh = NULL;
  tpx_mesh *mesh = NULL;
  tpx_error err = {0};
  const char *names[] = {"dp_shard"};
  const int64_t sizes[] = {4};
  const char *pats[16];
  size_t i, n;
  static const char *const f32[] = {
      "model.layers.0.attn_hc.fn",
      "model.layers.3.ffn_hc.base",
      "model.hc_head.hc_fn",
      "lm_head.weight",
      "model.layers.1.self_attn.sinks",
      "model.layers.1.self_attn.compressor.kv_proj.weight",
      "model.layers.2.self_attn.compressor.gate_proj.weight",
      "model.layers.2.self_attn.compressor.position_bias",
      "model.layers.2.self_attn.compressor.indexer.kv_proj.weight",
      "model.layers.2.self_attn.compressor.indexer.gate_proj.weight",
      "model.layers.2.self_attn.compressor.indexer.position_bias"};
  static const char *const bf16[] = {
      "model.layers.2.self_attn.compressor.indexer.q_b_proj.weight",
      "model.layers.0.self_attn.q_b_proj.weight",
      "model.layers.0.mlp.experts.gate_up_proj", "model.embed_tokens.weight"};
  ck_assert_int_eq(tpx_diag_list_create(&diags, &err), TPX_OK);
  ck_assert_int_eq(tpx_select_plan(reg, m, &o, &sel, diags, &err), TPX_OK);
  n = tpx_selection_num_fp32(sel);
  ck_assert_int_eq(n, 11);
  for (i = 0; i < n; i++) pats[i] = tpx_selection_fp32(sel, i);
  so.num_fp32_params = n;
  so.fp32_params = pats;
  ck_assert_int_eq(tpx_mesh_create(names, sizes, 1, &mesh, &err), TPX_OK);
  ck_assert_msg(tpx_sharding_create(m, tpx_selection_plan(sel), mesh, &so, &sh,
                                    &err) == TPX_OK,
                "%s", err.message);
  for (i = 0; i < sizeof f32 / sizeof f32[0]; i++) {
    int64_t pi = tpx_model_find_param(m, f32[i]);
    tpx_param_sharding ps;
    ck_assert_msg(pi >= 0, "no %s", f32[i]);
    ck_assert_msg(tpx_sharding_param_keeps_fp32(sh, pi), "%s not fp32", f32[i]);
    ck_assert_int_eq(tpx_sharding_param(sh, pi, &ps, &err), TPX_OK);
    ck_assert_int_eq(ps.param_dtype, TPX_DTYPE_F32);
  }
  for (i = 0; i < sizeof bf16 / sizeof bf16[0]; i++) {
    int64_t pi = tpx_model_find_param(m, bf16[i]);
    tpx_param_sharding ps;
    ck_assert_msg(pi >= 0, "no %s", bf16[i]);
    ck_assert_msg(!tpx_sharding_param_keeps_fp32(sh, pi), "%s fp32", bf16[i]);
    ck_assert_int_eq(tpx_sharding_param(sh, pi, &ps, &err), TPX_OK);
    ck_assert_int_eq(ps.param_dtype, TPX_DTYPE_BF16);
  }
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_selection_destroy(sel);
  tpx_diag_list_destroy(diags);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

static Suite *deepseek_suite(void) {
  Suite *s = suite_create("families-deepseek");
  TCase *tc = tcase_create("deepseek");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_abi);
  tcase_add_test(tc, test_flash_skeleton);
  tcase_add_test(tc, test_small_skeletons);
  tcase_add_test(tc, test_bad_configs);
  tcase_add_test(tc, test_plan_path);
  tcase_add_test(tc, test_fp32);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(deepseek_suite());
  int failed;
  srunner_run_all(sr, CK_NORMAL);
  failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
