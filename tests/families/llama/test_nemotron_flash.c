/* test_nemotron_flash.c — the NemotronFlashForCausalLM skeleton of the llama
 * plugin: a small config with every layer type (DeltaNet, FFN-only, Mamba2,
 * attention) checked for names, shapes, order, memory tokens, ties and the
 * hand-recomputed total; the attention and FFN options (kq_norm,
 * ffn_expand_ratio, relu2, untied head, no mixer FFN); bad input; and the
 * Llama plan (the one upstream maps this class to) selected on the tree. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fam_util.h"
#include "tpx/match.h"
#include "tpx/registry.h"

#define FAM "llama"
#define ARCH "NemotronFlashForCausalLM"

/* Inline config + skeleton; NULL (message copied) when the build fails. */
static tpx_model *flash_model(tpx_registry *reg, const char *json, char *msg,
                              size_t size) {
  tpx_model *m = fam_model_json(json);
  tpx_error err = {0};
  if (tpx_registry_build_skeleton(reg, m, &err) != TPX_OK) {
    snprintf(msg, size, "%s", err.message);
    ck_assert_uint_eq(tpx_model_num_params(m), 0);
    tpx_model_destroy(m);
    return NULL;
  }
  return m;
}

static void assert_conv(const tpx_model *m, const char *fqn, int64_t dim,
                        int64_t kernel) {
  int64_t idx = tpx_model_find_param(m, fqn);
  tpx_param_info pi;
  ck_assert_msg(idx >= 0, "no '%s'", fqn);
  ck_assert_int_eq(tpx_model_param(m, idx, &pi, NULL), TPX_OK);
  ck_assert_int_eq(pi.ndim, 3);
  ck_assert_int_eq(pi.shape[0], dim);
  ck_assert_int_eq(pi.shape[1], 1);
  ck_assert_int_eq(pi.shape[2], kernel);
}

START_TEST(test_small_skeleton) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = fam_model(reg, FAM, "nemotron-flash-small.config.json", 1);
  tpx_param_info pi;
  /* hand count: memory tokens + embed + final norm; deltanet layer 9 mixer
   * tensors, mamba 8, attention 4 (kq_norm none); every layer ffn 3 + its
   * norm; mixer layers an input norm; tied head */
  ck_assert_uint_eq(tpx_model_num_params(m), 3 + 9 + 8 + 4 + 6 * 4 + 3 + 1);
  ck_assert_int_eq(tpx_model_total_params(m), 3462872);
  ck_assert_int_eq(tpx_model_total_bytes(m), 2 * 3462872LL);
  ck_assert_int_eq(tpx_model_param(m, 0, &pi, NULL), TPX_OK);
  ck_assert_str_eq(pi.fqn, "model.memory_tokens");
  fam_assert_param(m, "model.memory_tokens", 4, 256);
  fam_assert_param(m, "model.embed_tokens.weight", 1024, 256);
  fam_assert_module(m, "model.embed_tokens", TPX_MODULE_EMBEDDING);
  /* layer 0: DeltaNet */
  fam_assert_param(m, "model.layers.0.gla.q_proj.weight", 256, 256);
  fam_assert_param(m, "model.layers.0.gla.v_proj.weight", 256, 256);
  fam_assert_param(m, "model.layers.0.gla.b_proj.weight", 8, 256);
  assert_conv(m, "model.layers.0.gla.k_conv1d.weight", 256, 4);
  fam_assert_no_param(m, "model.layers.0.gla.k_conv1d.bias");
  fam_assert_param(m, "model.layers.0.gla.o_norm.weight", 32, -1);
  fam_assert_param(m, "model.layers.0.gla.o_proj.weight", 256, 256);
  fam_assert_no_param(m, "model.layers.0.gla.g_proj.weight");
  fam_assert_param(m, "model.layers.0.input_layernorm.weight", 256, -1);
  /* layer 1: FFN only (gate, down, up order) */
  fam_assert_param(m, "model.layers.1.ffn.gate_proj.weight", 512, 256);
  fam_assert_param(m, "model.layers.1.ffn.down_proj.weight", 256, 512);
  fam_assert_param(m, "model.layers.1.pre_ffn_layernorm.weight", 256, -1);
  fam_assert_no_param(m, "model.layers.1.input_layernorm.weight");
  /* layer 2: Mamba2, d_inner 512, 8 heads of 64, one group of 16 */
  fam_assert_param(m, "model.layers.2.mamba.dt_bias", 8, -1);
  fam_assert_param(m, "model.layers.2.mamba.A_log", 8, -1);
  fam_assert_param(m, "model.layers.2.mamba.D", 8, -1);
  fam_assert_param(m, "model.layers.2.mamba.in_proj.weight",
                   2 * 512 + 2 * 16 + 8, 256);
  assert_conv(m, "model.layers.2.mamba.conv1d.weight", 512 + 32, 4);
  fam_assert_param(m, "model.layers.2.mamba.conv1d.bias", 512 + 32, -1);
  fam_assert_param(m, "model.layers.2.mamba.norm.weight", 512, -1);
  fam_assert_param(m, "model.layers.2.mamba.out_proj.weight", 256, 512);
  /* layer 4: attention, 8 heads / 2 kv heads of 32, no q/k norms */
  fam_assert_param(m, "model.layers.4.self_attn.q_proj.weight", 256, 256);
  fam_assert_param(m, "model.layers.4.self_attn.k_proj.weight", 64, 256);
  fam_assert_param(m, "model.layers.4.self_attn.v_proj.weight", 64, 256);
  fam_assert_param(m, "model.layers.4.self_attn.o_proj.weight", 256, 256);
  fam_assert_no_param(m, "model.layers.4.self_attn.q_norm.weight");
  fam_assert_param(m, "model.final_layernorm.weight", 256, -1);
  fam_assert_no_param(m, "model.norm.weight");
  fam_assert_tied(m, "lm_head.weight", "model.embed_tokens.weight");
  ck_assert_int_eq(fam_count_untied(m), (int64_t)tpx_model_num_params(m) - 1);
  ck_assert_int_eq(tpx_model_module_num_children(
                       m, tpx_model_find_module(m, "model.layers")),
                   6);
  /* module order inside a mixer layer: mixer, ffn, pre_ffn_layernorm,
   * input_layernorm */
  {
    int64_t L = tpx_model_find_module(m, "model.layers.2");
    static const char *const kids[] = {
        "model.layers.2.mamba", "model.layers.2.ffn",
        "model.layers.2.pre_ffn_layernorm", "model.layers.2.input_layernorm"};
    size_t i;
    ck_assert_uint_eq(tpx_model_module_num_children(m, L), 4);
    for (i = 0; i < 4; i++)
      ck_assert_str_eq(tpx_model_module_fqn(m, tpx_model_module_child(m, L, i)),
                       kids[i]);
  }
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* kq_norm rms, ffn_expand_ratio, relu2 (no gate), untied head, no memory
 * tokens, intermediate_size 0 (mixer layers without FFN). */
START_TEST(test_options) {
  tpx_registry *reg = fam_registry(FAM);
  char msg[512] = "";
  tpx_model *m =
      flash_model(reg,
                  "{\"architectures\": [\"" ARCH "\"], \"vocab_size\": 100,"
                  " \"hidden_size\": 128, \"intermediate_size\": 0,"
                  " \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
                  " \"num_key_value_heads\": 4, \"kq_norm\": \"rms\","
                  " \"ffn_expand_ratio\": 2.6, \"mlp_hidden_act\": \"relu2\","
                  " \"layer_types\": [\"a\", \"f\"]}",
                  msg, sizeof msg);
  ck_assert_msg(m != NULL, "%s", msg);
  fam_assert_param(m, "model.layers.0.self_attn.k_norm.weight", 32, -1);
  fam_assert_param(m, "model.layers.0.self_attn.q_norm.weight", 32, -1);
  /* intermediate_size 0: the attention layer has no FFN */
  fam_assert_no_param(m, "model.layers.0.ffn.up_proj.weight");
  fam_assert_no_param(m, "model.layers.0.pre_ffn_layernorm.weight");
  /* int(2.6 * 128) = 332 -> 256 (multiple of 128); relu2: no gate */
  fam_assert_param(m, "model.layers.1.ffn.up_proj.weight", 256, 128);
  fam_assert_param(m, "model.layers.1.ffn.down_proj.weight", 128, 256);
  fam_assert_no_param(m, "model.layers.1.ffn.gate_proj.weight");
  fam_assert_no_param(m, "model.memory_tokens");
  fam_assert_param(m, "lm_head.weight", 100, 128);
  {
    tpx_param_info pi;
    ck_assert_int_eq(tpx_model_param(m,
                                     tpx_model_find_param(m, "lm_head.weight"),
                                     &pi, NULL),
                     TPX_OK);
    ck_assert_int_eq(pi.tied_to, -1);
  }
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

typedef struct bad_case {
  const char *json, *needle;
} bad_case;

#define HEAD "{\"architectures\": [\"" ARCH "\"], \"hidden_size\": 128, "
static const bad_case bad[] = {
    {HEAD "\"num_hidden_layers\": 2}", "layer_types"},
    {HEAD "\"num_hidden_layers\": 2, \"layer_types\": [\"a\"]}", "layer_types"},
    {HEAD "\"num_hidden_layers\": 1, \"layer_types\": [\"x\"]}", "'x'"},
    {HEAD "\"num_hidden_layers\": 1, \"layer_types\": [\"a\"]}", "kq_norm"},
    {HEAD "\"num_hidden_layers\": 1, \"layer_types\": [\"m2\"],"
          " \"mamba2_headdim\": 48}",
     "mamba2_headdim"},
    {HEAD "\"num_hidden_layers\": 1, \"layer_types\": [\"f\"],"
          " \"mlp_hidden_act\": \"gelu\"}",
     "mlp_hidden_act"},
    {HEAD "\"num_hidden_layers\": 1, \"layer_types\": [\"deltanet\"],"
          " \"num_attention_heads\": 5}",
     "divisible"},
    {HEAD "\"num_hidden_layers\": 1, \"layer_types\": [\"f\"],"
          " \"vocab_size\": \"big\"}",
     "vocab_size"},
};

START_TEST(test_bad_config) {
  tpx_registry *reg = fam_registry(FAM);
  char msg[512] = "";
  tpx_model *m = flash_model(reg, bad[_i].json, msg, sizeof msg);
  ck_assert_msg(m == NULL, "case %d built a skeleton", _i);
  ck_assert_msg(strstr(msg, bad[_i].needle) != NULL, "case %d: %s", _i, msg);
  tpx_registry_destroy(reg);
}
END_TEST

/* The Llama plan on the tree at tp 2: the plugin's plan is selected and
 * its embedding, attention projections and lm_head match modules; its mlp.*
 * keys match nothing here (Nemotron-Flash calls its MLP "ffn"), so the
 * plugin marks them variant-only (info) and its validate warns once that
 * every layer's ffn stays replicated -- upstream's plan choice for this
 * class, kept visible without failing the run. */
START_TEST(test_plan_on_tree) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = fam_model(reg, FAM, "nemotron-flash-small.config.json", 1);
  tpx_plan *plan = NULL;
  tpx_match *mt = NULL;
  tpx_diag_list *diags = NULL;
  char msg[512] = "";
  fam_check_selected(reg, m, NULL, 0, 2, 0, FAM, "plan_nemotron_flash_sp0.json",
                     "replicated-by-omission", "`ffn` of 6 of 6 layers", 1);
  ck_assert_int_eq(fam_plan(reg, m, ARCH, NULL, 0, 2, &plan, msg, sizeof msg),
                   TPX_OK);
  ck_assert_int_eq(tpx_diag_list_create(&diags, NULL), TPX_OK);
  ck_assert_int_eq(tpx_match_plan(plan, m, &mt, diags, NULL), TPX_OK);
  /* up_proj, gate_proj, down_proj and gate_up_proj, all variant-only */
  ck_assert_uint_eq(fam_diags_count(diags, "unmatched-key", ".mlp."), 4);
  ck_assert_uint_eq(tpx_diag_count_at_least(diags, TPX_DIAG_WARNING), 0);
  ck_assert_uint_eq(
      fam_diags_count(diags, "unmatched-key", "self_attn.q_proj'"), 0);
  ck_assert_uint_eq(fam_diags_count(diags, "unmatched-key", "embed_tokens"), 0);
  ck_assert_uint_eq(fam_diags_count(diags, "unmatched-key", "'lm_head'"), 0);
  tpx_match_destroy(mt);
  tpx_diag_list_destroy(diags);
  tpx_plan_destroy(plan);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

static Suite *flash_suite(void) {
  Suite *s = suite_create("families-nemotron-flash");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_small_skeleton);
  tcase_add_test(tc, test_options);
  tcase_add_loop_test(tc, test_bad_config, 0, N(bad));
  tcase_add_test(tc, test_plan_on_tree);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(flash_suite());
  int failed;
  srunner_run_all(sr, CK_NORMAL);
  failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
