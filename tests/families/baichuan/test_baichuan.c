/* test_baichuan.c — the tpx_baichuan plugin through the registry: the MLP-only
 * plan with sp ignored (docs/SEMANTICS.md "Family plans"), the W_pack /
 * NormHead skeleton (Baichuan2-7B), the "why" in the description, per-rank
 * bytes. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "fam_util.h"
#include "tpx/registry.h"

#define FAM "baichuan"

START_TEST(test_abi) { fam_check_abi(FAM); }
END_TEST

START_TEST(test_descriptor) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_plugin_desc d;
  tpx_error err = {0};
  ck_assert_int_eq(tpx_registry_plugin(reg, 0, &d, &err), TPX_OK);
  ck_assert_ptr_nonnull(strstr(d.description, "W_pack"));
  ck_assert_ptr_nonnull(strstr(d.description, "NormHead"));
  ck_assert_int_eq(tpx_registry_find(reg, "BaichuanForCausalLM"), 0);
  ck_assert_int_eq(tpx_registry_find(reg, "nemo_automodel.components.models."
                                          "baichuan.model.BaichuanForCausalLM"),
                   0);
  tpx_registry_destroy(reg);
}
END_TEST

START_TEST(test_plans) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = fam_model(reg, FAM, "Baichuan2-7B.config.json", 1);
  const char *q =
      "nemo_automodel.components.models.baichuan.model.BaichuanForCausalLM";
  fam_check_plan(reg, m, "BaichuanForCausalLM", NULL, 0, FAM,
                 "plan_baichuan.json");
  fam_check_plan(reg, m, "BaichuanForCausalLM", NULL, 1, FAM,
                 "plan_baichuan.json");
  fam_check_plan(reg, m, q, NULL, 1, FAM, "plan_baichuan.json");
  fam_check_refused(reg, m, q, "some_plan", 0, "some_plan");
  /* no attention key is planned, and validate_tp_mesh still runs: NeMo
   * Automodel 0.7.0 checks the head counts at tp > 1 before it chooses any
   * plan, head-sharding or not, so 32 heads at tp=3 are the host's error
   * (at tp 8 they fit). The plan function never looks at tp, so the plan
   * is the same at every tp and stays selected. */
  fam_check_plan_any_tp(reg, m, "BaichuanForCausalLM", NULL, 0, 3, FAM,
                        "plan_baichuan.json");
  fam_check_plan_any_tp(reg, m, q, NULL, 1, 64, FAM, "plan_baichuan.json");
  fam_check_selected(reg, m, NULL, 0, 3, 0, FAM, NULL, "plugin-refused", NULL,
                     0);
  fam_check_selected(reg, m, NULL, 0, 3, 0, FAM, "plan_baichuan.json",
                     "heads-not-divisible",
                     "num_key_value_heads (32) must be divisible by TP size "
                     "(3)",
                     1);
  fam_check_selected(reg, m, NULL, 1, 8, 0, FAM, "plan_baichuan.json",
                     "heads-not-divisible", NULL, 0);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

START_TEST(test_skeleton) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = fam_model(reg, FAM, "Baichuan2-7B.config.json", 1);
  /* Baichuan2-7B: 7,505,973,248 parameters (untied NormHead). */
  ck_assert_int_eq(tpx_model_total_params(m), 7505973248LL);
  ck_assert_int_eq(fam_count_untied(m), 1 + 32 * 7 + 1 + 1);
  fam_assert_param(m, "model.layers.0.self_attn.W_pack.weight", 12288, 4096);
  fam_assert_param(m, "model.layers.31.self_attn.o_proj.weight", 4096, 4096);
  fam_assert_param(m, "model.layers.2.mlp.gate_proj.weight", 11008, 4096);
  fam_assert_param(m, "model.layers.2.mlp.down_proj.weight", 4096, 11008);
  fam_assert_param(m, "lm_head.weight", 125696, 4096);
  fam_assert_module(m, "lm_head", TPX_MODULE_OTHER);
  fam_assert_module(m, "model.layers.0.self_attn.W_pack", TPX_MODULE_LINEAR);
  fam_assert_no_param(m, "model.layers.0.self_attn.q_proj.weight");
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

START_TEST(test_rank_bytes) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = fam_model(reg, FAM, "Baichuan2-7B.config.json", 1);
  tpx_plan *plan = NULL;
  char msg[256];
  int64_t mlp = 32LL * 3 * 4096 * 11008;
  ck_assert_int_eq(fam_plan(reg, m, "BaichuanForCausalLM", NULL, 0, 4, &plan,
                            msg, sizeof msg),
                   TPX_OK);
  /* Only the MLP splits: tp=4 keeps 3/4 of it off each rank. */
  ck_assert_int_eq(fam_expected_rank_bytes(m, plan, 4, 3),
                   2 * (7505973248LL - mlp + mlp / 4));
  fam_check_rank_bytes(m, plan);
  tpx_plan_destroy(plan);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

static Suite *baichuan_suite(void) {
  Suite *s = suite_create("families-baichuan");
  TCase *tc = tcase_create("baichuan");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_abi);
  tcase_add_test(tc, test_descriptor);
  tcase_add_test(tc, test_plans);
  tcase_add_test(tc, test_skeleton);
  tcase_add_test(tc, test_rank_bytes);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(baichuan_suite());
  int failed;
  srunner_run_all(sr, CK_NORMAL);
  failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
