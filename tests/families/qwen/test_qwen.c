/* test_qwen.c — the tpx_qwen plugin through the registry: the Qwen2/Qwen3 plans
 * under every name (docs/SEMANTICS.md "Family plans"), the
 * sequence-classification plan and its two asserts, the Qwen3.5 HF-derived
 * plans ("Plans and matching"), skeletons (Qwen3-0.6B and Qwen2.5-0.5B
 * published totals, Qwen3.5 hybrid layers), fp32 parameters, the same plan at a
 * tp the heads do not divide (the host's heads-not-divisible error, no refusal)
 * and per-rank bytes; Qwen3.5-MoE through its Hugging Face class (skeleton
 * against transformers' totals, fused experts, upstream's HF-plan path and no
 * fp32 group: it has no strategy of its own). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fam_util.h"
#include "tpx/registry.h"

#define FAM "qwen"

START_TEST(test_abi) { fam_check_abi(FAM); }
END_TEST

START_TEST(test_descriptor) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_plugin_desc d;
  tpx_error err = {0};
  ck_assert_int_eq(tpx_registry_plugin(reg, 0, &d, &err), TPX_OK);
  ck_assert_str_eq(d.name, "qwen");
  ck_assert_uint_eq(d.num_plan_names, 0);
  ck_assert(d.has_skeleton && d.has_fp32_params);
  ck_assert_uint_eq(d.num_architectures, 15);
  ck_assert_int_eq(tpx_registry_find(reg, "Qwen3_5ForCausalLM"), 0);
  ck_assert_int_eq(tpx_registry_find(reg, "Qwen2VLForConditionalGeneration"),
                   -1);
  tpx_registry_destroy(reg);
}
END_TEST

static const char *const k_causal[] = {
    "Qwen2ForCausalLM",
    "Qwen3ForCausalLM",
    "transformers.models.qwen2.modeling_qwen2.Qwen2ForCausalLM",
    "transformers.models.qwen3.modeling_qwen3.Qwen3ForCausalLM",
    "nemo_automodel.components.models.qwen2.model.Qwen2ForCausalLM",
    "nemo_automodel.components.models.qwen3.model.Qwen3ForCausalLM"};

START_TEST(test_qwen_plans) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = fam_model(reg, FAM, "Qwen3-0.6B.config.json", 1);
  fam_check_plan(reg, m, k_causal[_i], NULL, 0, FAM, "plan_qwen_sp0.json");
  fam_check_plan(reg, m, k_causal[_i], NULL, 1, FAM, "plan_qwen_sp1.json");
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

START_TEST(test_classification_plans) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = fam_model(reg, FAM, "Qwen3-0.6B-seqcls.config.json", 1);
  const char *q =
      "transformers.models.qwen3.modeling_qwen3.Qwen3ForSequenceClassification";
  fam_check_plan(reg, m, "Qwen3ForSequenceClassification", NULL, 0, FAM,
                 "plan_qwen_cls_sp0.json");
  fam_check_plan(reg, m, q, NULL, 1, FAM, "plan_qwen_cls_sp1.json");
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* The two asserts of _parallelize_qwen_classification. */
START_TEST(test_classification_asserts) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *causal = fam_model(reg, FAM, "Qwen3-0.6B.config.json", 1);
  tpx_model *empty = fam_model(reg, FAM, "Qwen3-0.6B-seqcls.config.json", 0);
  fam_check_refused(reg, causal, "Qwen3ForSequenceClassification", NULL, 0,
                    "lm_head");
  fam_check_refused(reg, empty, "Qwen3ForSequenceClassification", NULL, 1,
                    "score");
  tpx_model_destroy(causal);
  tpx_model_destroy(empty);
  tpx_registry_destroy(reg);
}
END_TEST

/* Qwen3.5: the HF-derived plan, sp has no effect; prefix by class name. */
START_TEST(test_qwen3_5_plans) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *c = fam_model(reg, FAM, "qwen3_5-tiny-causal.config.json", 1);
  tpx_model *v = fam_model(reg, FAM, "qwen3_5-tiny-vlm.config.json", 1);
  int sp;
  for (sp = 0; sp <= 1; sp++) {
    fam_check_plan(reg, c, "Qwen3_5ForCausalLM", NULL, sp, FAM,
                   "plan_qwen3_5_causal.json");
    fam_check_plan(reg, c,
                   "nemo_automodel.components.models.qwen3_5.model."
                   "Qwen3_5ForCausalLM",
                   NULL, sp, FAM, "plan_qwen3_5_causal.json");
    fam_check_plan(reg, v, "Qwen3_5ForConditionalGeneration", NULL, sp, FAM,
                   "plan_qwen3_5_vlm.json");
    fam_check_plan(reg, v,
                   "transformers.models.qwen3_5.modeling_qwen3_5."
                   "Qwen3_5ForConditionalGeneration",
                   NULL, sp, FAM, "plan_qwen3_5_vlm.json");
    fam_check_plan(reg, v,
                   "nemo_automodel.components.models.qwen3_5.model."
                   "Qwen3_5ForConditionalGeneration",
                   NULL, sp, FAM, "plan_qwen3_5_vlm.json");
  }
  tpx_model_destroy(c);
  tpx_model_destroy(v);
  tpx_registry_destroy(reg);
}
END_TEST

START_TEST(test_refusals) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = fam_model(reg, FAM, "Qwen3-0.6B.config.json", 0);
  fam_check_refused(reg, m, "Qwen3ForCausalLM", "llama_nemotron_super_tp_plan",
                    0, "llama_nemotron_super_tp_plan");
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* validate_tp_mesh is the host's: upstream's plan functions never look at
 * tp or the head counts, so at a tp the heads do not divide get_plan gives
 * the same plan as at tp = 1 and 2, selection picks it, and the host reports
 * heads-not-divisible once, as an error (no plugin-refused fallback). */
static const struct {
  const char *config, *arch;
  int sp;
  int64_t tp;
  const char *golden, *needle;
} k_indivisible[] = {
    /* Qwen2.5-0.5B: 14 heads, 2 kv heads */
    {"Qwen2.5-0.5B.config.json", "Qwen2ForCausalLM", 0, 4, "plan_qwen_sp0.json",
     "num_key_value_heads (2) must be divisible by TP size (4)"},
    {"Qwen2.5-0.5B.config.json", "Qwen2ForCausalLM", 1, 4, "plan_qwen_sp1.json",
     "num_key_value_heads (2)"},
    /* tp=7 divides the 14 heads but not the 2 kv heads */
    {"Qwen2.5-0.5B.config.json", "Qwen2ForCausalLM", 0, 7, "plan_qwen_sp0.json",
     "num_key_value_heads (2)"},
    /* Qwen3-0.6B: 16 heads, 8 kv heads */
    {"Qwen3-0.6B.config.json", "Qwen3ForCausalLM", 1, 16, "plan_qwen_sp1.json",
     "num_key_value_heads (8)"},
    {"Qwen3-0.6B-seqcls.config.json", "Qwen3ForSequenceClassification", 1, 16,
     "plan_qwen_cls_sp1.json", "num_key_value_heads (8)"},
    {"Qwen3-0.6B-seqcls.config.json", "Qwen3ForSequenceClassification", 0, 3,
     "plan_qwen_cls_sp0.json", "num_key_value_heads (8)"},
    /* Qwen3.5 causal: 8 heads, 2 kv heads; sp has no effect */
    {"qwen3_5-tiny-causal.config.json", "Qwen3_5ForCausalLM", 0, 4,
     "plan_qwen3_5_causal.json", "num_key_value_heads (2)"},
    {"qwen3_5-tiny-causal.config.json", "Qwen3_5ForCausalLM", 1, 3,
     "plan_qwen3_5_causal.json", "num_key_value_heads (2)"},
};

START_TEST(test_indivisible_heads) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = fam_model(reg, FAM, k_indivisible[_i].config, 1);
  fam_check_plan_any_tp(reg, m, k_indivisible[_i].arch, NULL,
                        k_indivisible[_i].sp, k_indivisible[_i].tp, FAM,
                        k_indivisible[_i].golden);
  fam_check_selected(reg, m, NULL, k_indivisible[_i].sp, k_indivisible[_i].tp,
                     0, FAM, k_indivisible[_i].golden, "heads-not-divisible",
                     k_indivisible[_i].needle, 1);
  fam_check_selected(reg, m, NULL, k_indivisible[_i].sp, k_indivisible[_i].tp,
                     0, FAM, NULL, "heads-not-divisible", NULL, 1);
  fam_check_selected(reg, m, NULL, k_indivisible[_i].sp, k_indivisible[_i].tp,
                     0, FAM, NULL, "plugin-refused", NULL, 0);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* The tps the heads allow: the same plans, no head diagnostic. The Qwen3.5
 * VLM keeps its counts in text_config: upstream's check reads the top-level
 * config (the class is not in its VLM list), sees none and passes. */
START_TEST(test_divisible_tps) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *q2 = fam_model(reg, FAM, "Qwen2.5-0.5B.config.json", 1);
  tpx_model *c35 = fam_model(reg, FAM, "qwen3_5-tiny-causal.config.json", 1);
  tpx_model *v35 = fam_model(reg, FAM, "qwen3_5-tiny-vlm.config.json", 1);
  fam_check_selected(reg, q2, NULL, 1, 2, 0, FAM, "plan_qwen_sp1.json",
                     "heads-not-divisible", NULL, 0);
  fam_check_selected(reg, c35, NULL, 0, 2, 0, FAM, "plan_qwen3_5_causal.json",
                     "heads-not-divisible", NULL, 0);
  fam_check_plan_any_tp(reg, v35, "Qwen3_5ForConditionalGeneration", NULL, 0, 4,
                        FAM, "plan_qwen3_5_vlm.json");
  fam_check_selected(reg, v35, NULL, 0, 4, 0, FAM, "plan_qwen3_5_vlm.json",
                     "heads-not-divisible", NULL, 0);
  tpx_model_destroy(q2);
  tpx_model_destroy(c35);
  tpx_model_destroy(v35);
  tpx_registry_destroy(reg);
}
END_TEST

START_TEST(test_qwen3_skeleton) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = fam_model(reg, FAM, "Qwen3-0.6B.config.json", 1);
  /* Published: Qwen3-0.6B 596,049,920 parameters (tied). */
  ck_assert_int_eq(tpx_model_total_params(m), 596049920LL);
  ck_assert_int_eq(fam_count_untied(m), 1 + 28 * 11 + 1);
  fam_assert_param(m, "model.layers.0.self_attn.q_proj.weight", 2048, 1024);
  fam_assert_param(m, "model.layers.0.self_attn.k_proj.weight", 1024, 1024);
  fam_assert_param(m, "model.layers.27.self_attn.o_proj.weight", 1024, 2048);
  fam_assert_param(m, "model.layers.27.self_attn.q_norm.weight", 128, -1);
  fam_assert_param(m, "model.layers.27.self_attn.k_norm.weight", 128, -1);
  fam_assert_param(m, "model.layers.1.mlp.down_proj.weight", 1024, 3072);
  fam_assert_no_param(m, "model.layers.0.self_attn.q_proj.bias");
  fam_assert_tied(m, "lm_head.weight", "model.embed_tokens.weight");
  fam_assert_module(m, "model.rotary_emb", TPX_MODULE_ROTARY);
  fam_assert_module(m, "model.layers.0.self_attn.q_norm", TPX_MODULE_NORM);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

START_TEST(test_qwen2_skeleton) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = fam_model(reg, FAM, "Qwen2.5-0.5B.config.json", 1);
  /* Published: Qwen2.5-0.5B 494,032,768 parameters (tied). */
  ck_assert_int_eq(tpx_model_total_params(m), 494032768LL);
  ck_assert_int_eq(fam_count_untied(m), 1 + 24 * 12 + 1);
  fam_assert_param(m, "model.layers.0.self_attn.q_proj.bias", 896, -1);
  fam_assert_param(m, "model.layers.0.self_attn.k_proj.weight", 128, 896);
  fam_assert_param(m, "model.layers.0.self_attn.k_proj.bias", 128, -1);
  fam_assert_param(m, "model.layers.23.self_attn.v_proj.bias", 128, -1);
  fam_assert_no_param(m, "model.layers.0.self_attn.o_proj.bias");
  fam_assert_no_param(m, "model.layers.0.self_attn.q_norm.weight");
  fam_assert_param(m, "model.layers.5.mlp.gate_proj.weight", 4864, 896);
  fam_assert_tied(m, "lm_head.weight", "model.embed_tokens.weight");
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

START_TEST(test_classification_skeleton) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = fam_model(reg, FAM, "Qwen3-0.6B-seqcls.config.json", 1);
  /* Qwen3-0.6B body + score [3, 1024]; no lm_head. */
  ck_assert_int_eq(tpx_model_total_params(m), 596049920LL + 3 * 1024);
  fam_assert_param(m, "score.weight", 3, 1024);
  ck_assert_int_lt(tpx_model_find_module(m, "lm_head"), 0);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

START_TEST(test_qwen3_5_skeleton) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *c = fam_model(reg, FAM, "qwen3_5-tiny-causal.config.json", 1);
  tpx_model *v = fam_model(reg, FAM, "qwen3_5-tiny-vlm.config.json", 1);
  int64_t i;
  /* Totals computed from the config by hand (see the config comment). */
  ck_assert_int_eq(tpx_model_total_params(c), 420318144LL);
  /* text 674,597,824 + vision tower 4,137,216 (patch_embed 393,472,
   * pos_embed 589,824, 2 blocks of 527,104, merger 2,099,712) */
  ck_assert_int_eq(tpx_model_total_params(v), 674597824LL + 4137216LL);
  /* full attention on layers 3 and 7, GatedDeltaNet elsewhere */
  for (i = 0; i < 8; i++) {
    char f[128];
    int full = (i + 1) % 4 == 0;
    snprintf(f, sizeof f, "model.layers.%lld.self_attn", (long long)i);
    ck_assert_int_eq(tpx_model_find_module(c, f) >= 0, full);
    snprintf(f, sizeof f, "model.layers.%lld.linear_attn", (long long)i);
    ck_assert_int_eq(tpx_model_find_module(c, f) >= 0, !full);
    snprintf(f, sizeof f, "model.language_model.layers.%lld.self_attn",
             (long long)i);
    ck_assert_int_eq(tpx_model_find_module(v, f) >= 0, full);
  }
  /* gated attention: q_proj carries the output gate */
  fam_assert_param(c, "model.layers.3.self_attn.q_proj.weight", 4096, 1024);
  fam_assert_param(c, "model.layers.3.self_attn.k_proj.weight", 512, 1024);
  fam_assert_param(c, "model.layers.3.self_attn.o_proj.weight", 1024, 2048);
  fam_assert_param(c, "model.layers.3.self_attn.q_norm.weight", 256, -1);
  fam_assert_param(c, "model.layers.0.linear_attn.in_proj_qkv.weight", 6144,
                   1024);
  fam_assert_param(c, "model.layers.0.linear_attn.in_proj_z.weight", 2048,
                   1024);
  fam_assert_param(c, "model.layers.0.linear_attn.in_proj_b.weight", 16, 1024);
  fam_assert_param(c, "model.layers.0.linear_attn.A_log", 16, -1);
  fam_assert_param(c, "model.layers.0.linear_attn.dt_bias", 16, -1);
  fam_assert_param(c, "model.layers.0.linear_attn.norm.weight", 128, -1);
  fam_assert_param(c, "model.layers.0.linear_attn.out_proj.weight", 1024, 2048);
  fam_assert_tied(c, "lm_head.weight", "model.embed_tokens.weight");
  fam_assert_param(v, "lm_head.weight", 248320, 1024);
  fam_assert_param(v, "model.visual.pos_embed.weight", 2304, 256);
  fam_assert_param(v, "model.visual.blocks.1.attn.qkv.weight", 768, 256);
  fam_assert_param(v, "model.visual.blocks.1.attn.qkv.bias", 768, -1);
  fam_assert_param(v, "model.visual.blocks.0.mlp.linear_fc2.weight", 256, 512);
  fam_assert_param(v, "model.visual.merger.norm.bias", 256, -1);
  fam_assert_param(v, "model.visual.merger.linear_fc1.weight", 1024, 1024);
  fam_assert_param(v, "model.visual.merger.linear_fc2.weight", 1024, 1024);
  fam_assert_no_param(v, "model.visual.blocks.2.attn.qkv.weight");
  fam_assert_param(v, "model.language_model.embed_tokens.weight", 248320, 1024);
  tpx_model_destroy(c);
  tpx_model_destroy(v);
  tpx_registry_destroy(reg);
}
END_TEST

START_TEST(test_qwen3_5_fp32) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *v = fam_model(reg, FAM, "qwen3_5-tiny-vlm.config.json", 1);
  tpx_select_options o = TPX_SELECT_OPTIONS_INIT;
  tpx_selection *sel = NULL;
  tpx_diag_list *diags = NULL;
  tpx_error err = {0};
  o.tp_size = 2;
  ck_assert_int_eq(tpx_diag_list_create(&diags, &err), TPX_OK);
  ck_assert_msg(tpx_select_plan(reg, v, &o, &sel, diags, &err) == TPX_OK, "%s",
                err.message);
  /* the plugin's plan was chosen, under its function name */
  ck_assert_int_eq(tpx_selection_source(sel), TPX_PLAN_SOURCE_PLUGIN);
  ck_assert_str_eq(tpx_selection_function(sel), "qwen3_5_vlm");
  fam_assert_plan_golden(tpx_selection_plan(sel), FAM, "plan_qwen3_5_vlm.json");
  ck_assert_uint_eq(tpx_selection_num_fp32(sel), 2);
  ck_assert_str_eq(tpx_selection_fp32(sel, 0),
                   "model.language_model.layers.*.linear_attn.A_log");
  ck_assert_str_eq(tpx_selection_fp32(sel, 1),
                   "model.language_model.layers.*.linear_attn.dt_bias");
  tpx_selection_destroy(sel);
  tpx_diag_list_destroy(diags);
  tpx_model_destroy(v);
  tpx_registry_destroy(reg);
}
END_TEST

START_TEST(test_qwen3_5_moe_skeleton) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = fam_model(reg, FAM, "Qwen3.5-35B-A3B.config.json", 1);
  tpx_model *t = fam_model(reg, FAM, "qwen3_5moe-tiny.config.json", 1);
  tpx_param_info p;
  tpx_error err = {0};
  int64_t i;
  /* transformers 5.24 totals (the model card: "35B" total) */
  ck_assert_int_eq(tpx_model_total_params(m), 35107181936LL);
  ck_assert_int_eq(tpx_model_total_params(t), 227920);
  fam_assert_param(m, "model.language_model.layers.0.mlp.gate.weight", 256,
                   2048);
  fam_assert_param(m,
                   "model.language_model.layers.0.mlp.shared_expert.down_proj."
                   "weight",
                   2048, 512);
  fam_assert_param(m,
                   "model.language_model.layers.39.mlp.shared_expert_gate."
                   "weight",
                   1, 2048);
  fam_assert_param(m, "model.language_model.layers.3.self_attn.q_proj.weight",
                   8192, 2048);
  fam_assert_param(m, "model.language_model.layers.0.linear_attn.A_log", 32,
                   -1);
  fam_assert_no_param(m, "model.language_model.layers.0.mlp.gate_proj.weight");
  fam_assert_param(m, "model.visual.merger.linear_fc2.weight", 2048, 4608);
  fam_assert_param(m, "lm_head.weight", 248320, 2048);
  i = tpx_model_find_param(m, "model.language_model.layers.7.mlp.experts."
                              "gate_up_proj");
  ck_assert_int_ge(i, 0);
  ck_assert_int_eq(tpx_model_param(m, i, &p, &err), TPX_OK);
  ck_assert_int_eq(p.ndim, 3);
  ck_assert(p.shape[0] == 256 && p.shape[1] == 1024 && p.shape[2] == 2048);
  tpx_model_destroy(m);
  tpx_model_destroy(t);
  tpx_registry_destroy(reg);
}
END_TEST

START_TEST(test_qwen3_5_moe_plan_path) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = fam_model(reg, FAM, "Qwen3.5-35B-A3B.config.json", 1);
  tpx_select_options o = TPX_SELECT_OPTIONS_INIT;
  tpx_selection *sel = NULL;
  tpx_diag_list *diags = NULL;
  tpx_error err = {0};
  fam_check_refused(reg, m, "Qwen3_5MoeForConditionalGeneration", NULL, 0,
                    "PARALLELIZE_FUNCTIONS");
  fam_check_refused(reg, m,
                    "transformers.models.qwen3_5_moe.modeling_qwen3_5_moe."
                    "Qwen3_5MoeForConditionalGeneration",
                    NULL, 1, "default base plan");
  fam_check_selected(reg, m, NULL, 0, 2, 1, FAM, NULL, "default-plan-fallback",
                     NULL, 1);
  fam_check_selected(reg, m, NULL, 0, 2, 1, FAM, NULL, "hf-style-unsupported",
                     "Qwen3_5MoeTextConfig", 1);
  /* Default strategy: no fp32 group (the Qwen3_5 strategy is keyed by the
   * dense class names only). */
  o.tp_size = 2;
  ck_assert_int_eq(tpx_diag_list_create(&diags, &err), TPX_OK);
  ck_assert_int_eq(tpx_select_plan(reg, m, &o, &sel, diags, &err), TPX_OK);
  ck_assert_int_eq(tpx_selection_source(sel), TPX_PLAN_SOURCE_DEFAULT);
  ck_assert_uint_eq(tpx_selection_num_fp32(sel), 0);
  tpx_selection_destroy(sel);
  tpx_diag_list_destroy(diags);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

START_TEST(test_rank_bytes) {
  static const char *const cfgs[] = {"Qwen3-0.6B.config.json",
                                     "Qwen2.5-0.5B.config.json",
                                     "qwen3_5-tiny-vlm.config.json"};
  tpx_registry *reg = fam_registry(FAM);
  size_t i;
  for (i = 0; i < 3; i++) {
    tpx_model *m = fam_model(reg, FAM, cfgs[i], 1);
    tpx_plan *plan = NULL;
    char msg[256];
    ck_assert_int_eq(fam_plan(reg, m, tpx_model_architecture(m, 0), NULL,
                              (int)(i == 0), 2, &plan, msg, sizeof msg),
                     TPX_OK);
    fam_check_rank_bytes(m, plan);
    tpx_plan_destroy(plan);
    tpx_model_destroy(m);
  }
  tpx_registry_destroy(reg);
}
END_TEST

static Suite *qwen_suite(void) {
  Suite *s = suite_create("families-qwen");
  TCase *tc = tcase_create("qwen");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_abi);
  tcase_add_test(tc, test_descriptor);
  tcase_add_loop_test(tc, test_qwen_plans, 0,
                      (int)(sizeof k_causal / sizeof k_causal[0]));
  tcase_add_test(tc, test_classification_plans);
  tcase_add_test(tc, test_classification_asserts);
  tcase_add_test(tc, test_qwen3_5_plans);
  tcase_add_test(tc, test_refusals);
  tcase_add_loop_test(tc, test_indivisible_heads, 0,
                      (int)(sizeof k_indivisible / sizeof k_indivisible[0]));
  tcase_add_test(tc, test_divisible_tps);
  tcase_add_test(tc, test_qwen3_skeleton);
  tcase_add_test(tc, test_qwen2_skeleton);
  tcase_add_test(tc, test_classification_skeleton);
  tcase_add_test(tc, test_qwen3_5_skeleton);
  tcase_add_test(tc, test_qwen3_5_fp32);
  tcase_add_test(tc, test_rank_bytes);
  tcase_add_test(tc, test_qwen3_5_moe_skeleton);
  tcase_add_test(tc, test_qwen3_5_moe_plan_path);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(qwen_suite());
  int failed;
  srunner_run_all(sr, CK_NORMAL);
  failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
