/* test_phi.c — the tpx_phi plugin through the registry: Phi-2 plans sp
 * off/on (docs/SEMANTICS.md "Family plans"), the Phi-3 plan with sp
 * ignored, the
 * phi-2 skeleton against its published total and every tensor name of its
 * model.safetensors.index.json, the Phi-3-mini skeleton, per-rank bytes; at
 * a tp the heads do not divide, the same plans (the host's
 * heads-not-divisible error, no refusal). */
#include <check.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "fam_util.h"
#include "tpx/registry.h"

#define FAM "phi"

START_TEST(test_abi) { fam_check_abi(FAM); }
END_TEST

START_TEST(test_phi_plans) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = fam_model(reg, FAM, "phi-2.config.json", 1);
  const char *q = "transformers.models.phi.modeling_phi.PhiForCausalLM";
  fam_check_plan(reg, m, "PhiForCausalLM", NULL, 0, FAM, "plan_phi_sp0.json");
  fam_check_plan(reg, m, "PhiForCausalLM", NULL, 1, FAM, "plan_phi_sp1.json");
  fam_check_plan(reg, m, q, NULL, 0, FAM, "plan_phi_sp0.json");
  fam_check_plan(reg, m, q, NULL, 1, FAM, "plan_phi_sp1.json");
  /* 32 heads at tp=3 or 64: upstream's plan function never looks at tp,
   * so the plan is the same as at tp = 1 and 2 and is selected; the host's
   * validate_tp_mesh reports the heads once, as an error (no refusal, no
   * fallback to the HF plan). */
  fam_check_plan_any_tp(reg, m, "PhiForCausalLM", NULL, 1, 3, FAM,
                        "plan_phi_sp1.json");
  fam_check_plan_any_tp(reg, m, q, NULL, 0, 64, FAM, "plan_phi_sp0.json");
  fam_check_selected(reg, m, NULL, 1, 3, 0, FAM, "plan_phi_sp1.json",
                     "heads-not-divisible", "num_key_value_heads (32)", 1);
  fam_check_selected(reg, m, NULL, 0, 64, 0, FAM, "plan_phi_sp0.json",
                     "heads-not-divisible", NULL, 1);
  fam_check_selected(reg, m, NULL, 1, 3, 0, FAM, NULL, "plugin-refused", NULL,
                     0);
  fam_check_selected(reg, m, NULL, 0, 8, 0, FAM, "plan_phi_sp0.json",
                     "heads-not-divisible", NULL, 0);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

START_TEST(test_phi3_plans) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = fam_model(reg, FAM, "Phi-3-mini-4k.config.json", 1);
  const char *q = "transformers.models.phi3.modeling_phi3.Phi3ForCausalLM";
  fam_check_plan(reg, m, "Phi3ForCausalLM", NULL, 0, FAM, "plan_phi3.json");
  fam_check_plan(reg, m, "Phi3ForCausalLM", NULL, 1, FAM, "plan_phi3.json");
  fam_check_plan(reg, m, q, NULL, 1, FAM, "plan_phi3.json");
  fam_check_refused(reg, m, q, "named", 0, "named");
  /* Phi-3's plan does not shard attention heads, and validate_tp_mesh still
   * runs: NeMo Automodel 0.7.0 checks the head counts at tp > 1 before it
   * chooses any plan (tests/data/upstream/validate_tp_mesh,
   * plugin_phi3_heads3). The plan function never looks at tp, so the plan
   * is the same at every tp and is selected; 32 heads at tp 64 and 3 are the
   * host's error, at tp 8 they fit. */
  fam_check_plan_any_tp(reg, m, "Phi3ForCausalLM", NULL, 0, 64, FAM,
                        "plan_phi3.json");
  fam_check_plan_any_tp(reg, m, q, NULL, 1, 3, FAM, "plan_phi3.json");
  fam_check_selected(reg, m, NULL, 0, 64, 0, FAM, "plan_phi3.json",
                     "heads-not-divisible",
                     "num_key_value_heads (32) must be divisible by TP size "
                     "(64)",
                     1);
  fam_check_selected(reg, m, NULL, 1, 3, 0, FAM, "plan_phi3.json",
                     "heads-not-divisible", NULL, 1);
  fam_check_selected(reg, m, NULL, 1, 8, 0, FAM, "plan_phi3.json",
                     "heads-not-divisible", NULL, 0);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

START_TEST(test_phi2_skeleton) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = fam_model(reg, FAM, "phi-2.config.json", 1);
  char path[1024];
  json_error_t jerr;
  json_t *index, *map, *v;
  const char *key;
  size_t n = 0;
  /* Published: phi-2 has 2,779,683,840 parameters; fp16 (the index's
   * total_size 5,559,367,680 is exactly twice that). */
  ck_assert_int_eq(tpx_model_total_params(m), 2779683840LL);
  ck_assert_int_eq(tpx_model_total_bytes(m), 5559367680LL);
  fam_data_path(path, sizeof path, FAM, "phi-2.model.safetensors.index.json");
  index = json_load_file(path, 0, &jerr);
  ck_assert_msg(index != NULL, "%s: %s", path, jerr.text);
  map = json_object_get(index, "weight_map");
  ck_assert_ptr_nonnull(map);
  json_object_foreach(map, key, v) {
    ck_assert_msg(tpx_model_find_param(m, key) >= 0,
                  "checkpoint tensor %s missing from the skeleton", key);
    n++;
  }
  ck_assert_uint_eq(n, 453);
  /* ... and the skeleton has nothing the checkpoint lacks. */
  ck_assert_int_eq(fam_count_untied(m), (int64_t)n);
  json_decref(index);
  fam_assert_param(m, "model.embed_tokens.weight", 51200, 2560);
  fam_assert_param(m, "model.layers.0.self_attn.q_proj.weight", 2560, 2560);
  fam_assert_param(m, "model.layers.0.self_attn.q_proj.bias", 2560, -1);
  fam_assert_param(m, "model.layers.31.self_attn.dense.bias", 2560, -1);
  fam_assert_param(m, "model.layers.31.mlp.fc1.weight", 10240, 2560);
  fam_assert_param(m, "model.layers.31.mlp.fc1.bias", 10240, -1);
  fam_assert_param(m, "model.layers.31.mlp.fc2.weight", 2560, 10240);
  fam_assert_param(m, "model.layers.31.input_layernorm.bias", 2560, -1);
  fam_assert_param(m, "model.final_layernorm.weight", 2560, -1);
  fam_assert_param(m, "lm_head.weight", 51200, 2560);
  fam_assert_param(m, "lm_head.bias", 51200, -1);
  fam_assert_no_param(m, "model.layers.0.post_attention_layernorm.weight");
  fam_assert_module(m, "model.final_layernorm", TPX_MODULE_NORM);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

START_TEST(test_phi3_skeleton) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = fam_model(reg, FAM, "Phi-3-mini-4k.config.json", 1);
  /* Published: Phi-3-mini-4k-instruct 3,821,079,552 parameters. */
  ck_assert_int_eq(tpx_model_total_params(m), 3821079552LL);
  fam_assert_param(m, "model.layers.0.self_attn.qkv_proj.weight", 9216, 3072);
  fam_assert_param(m, "model.layers.0.self_attn.o_proj.weight", 3072, 3072);
  fam_assert_param(m, "model.layers.0.mlp.gate_up_proj.weight", 16384, 3072);
  fam_assert_param(m, "model.layers.0.mlp.down_proj.weight", 3072, 8192);
  fam_assert_param(m, "lm_head.weight", 32064, 3072);
  fam_assert_no_param(m, "lm_head.bias");
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

START_TEST(test_rank_bytes) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = fam_model(reg, FAM, "phi-2.config.json", 1);
  tpx_model *m3 = fam_model(reg, FAM, "Phi-3-mini-4k.config.json", 1);
  tpx_plan *plan = NULL;
  char msg[256];
  ck_assert_int_eq(
      fam_plan(reg, m, "PhiForCausalLM", NULL, 1, 2, &plan, msg, sizeof msg),
      TPX_OK);
  fam_check_rank_bytes(m, plan);
  tpx_plan_destroy(plan);
  ck_assert_int_eq(
      fam_plan(reg, m3, "Phi3ForCausalLM", NULL, 0, 2, &plan, msg, sizeof msg),
      TPX_OK);
  fam_check_rank_bytes(m3, plan);
  tpx_plan_destroy(plan);
  tpx_model_destroy(m);
  tpx_model_destroy(m3);
  tpx_registry_destroy(reg);
}
END_TEST

static Suite *phi_suite(void) {
  Suite *s = suite_create("families-phi");
  TCase *tc = tcase_create("phi");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_abi);
  tcase_add_test(tc, test_phi_plans);
  tcase_add_test(tc, test_phi3_plans);
  tcase_add_test(tc, test_phi2_skeleton);
  tcase_add_test(tc, test_phi3_skeleton);
  tcase_add_test(tc, test_rank_bytes);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(phi_suite());
  int failed;
  srunner_run_all(sr, CK_NORMAL);
  failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
