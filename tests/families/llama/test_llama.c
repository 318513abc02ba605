/* test_llama.c — the tpx_llama plugin through the registry: every plan (Llama
 * under its three names, NemotronFlash, the named llama_nemotron_super_tp_plan
 * on both branches, DeciLM) against the goldens of docs/SEMANTICS.md "Family
 * plans", the DeciLM refusal, the Nemotron-Flash lm_head rule ("Plan
 * selection"), skeletons (Llama-3.2-1B published total; DeciLM's heterogeneous
 * blocks), Nemotron-NAS validation, the same plan at a tp the heads do not
 * divide (the host's heads-not-divisible error, no refusal) and per-rank bytes.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "fam_util.h"
#include "tpx/registry.h"

#define FAM "llama"
#define SUPER "llama_nemotron_super_tp_plan"

START_TEST(test_abi) { fam_check_abi(FAM); }
END_TEST

START_TEST(test_descriptor) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_plugin_desc d;
  tpx_error err = {0};
  static const char *const archs[] = {
      "LlamaForCausalLM",
      "transformers.models.llama.modeling_llama.LlamaForCausalLM",
      "nemo_automodel.components.models.llama.model.LlamaForCausalLM",
      "NemotronFlashForCausalLM", "DeciLMForCausalLM"};
  size_t i;
  ck_assert_int_eq(tpx_registry_plugin(reg, 0, &d, &err), TPX_OK);
  ck_assert_str_eq(d.name, "llama");
  ck_assert_uint_eq(d.num_plan_names, 1);
  ck_assert_str_eq(d.plan_names[0], SUPER);
  ck_assert(d.has_skeleton);
  /* validate only warns about Nemotron-Flash's replicated ffn;
   * validate_tp_mesh_for_nemotron_nas is the host's (tpx_validate_tp_mesh),
   * so the plugin does not report it a second time. */
  ck_assert_int_eq(d.has_validate, 1);
  ck_assert_int_eq(d.has_fsdp_units, 0);
  for (i = 0; i < sizeof archs / sizeof archs[0]; i++)
    ck_assert_int_eq(tpx_registry_find(reg, archs[i]), 0);
  ck_assert_int_eq(tpx_registry_find(reg, "MistralForCausalLM"), -1);
  tpx_registry_destroy(reg);
}
END_TEST

/* Llama plan under every name that selects it, sp off and on. */
static const char *const k_llama_archs[] = {
    "LlamaForCausalLM",
    "transformers.models.llama.modeling_llama.LlamaForCausalLM",
    "nemo_automodel.components.models.llama.model.LlamaForCausalLM",
    "NemotronFlashForCausalLM"};

START_TEST(test_llama_plans) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = fam_model(reg, FAM, "Llama-3.2-1B.config.json", 1);
  const char *arch = k_llama_archs[_i];
  /* Nemotron-Flash: the same plan, its mlp.* keys marked variant-only. */
  int flash = strcmp(arch, "NemotronFlashForCausalLM") == 0;
  fam_check_plan(reg, m, arch, NULL, 0, FAM,
                 flash ? "plan_nemotron_flash_sp0.json"
                       : "plan_llama_sp0.json");
  fam_check_plan(reg, m, arch, NULL, 1, FAM,
                 flash ? "plan_nemotron_flash_sp1.json"
                       : "plan_llama_sp1.json");
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* The named plan: a Llama config gets the Llama plan ... */
START_TEST(test_named_plan_llama_branch) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = fam_model(reg, FAM, "Llama-3.2-1B.config.json", 1);
  fam_check_plan(reg, m, "LlamaForCausalLM", SUPER, 0, FAM,
                 "plan_llama_sp0.json");
  fam_check_plan(reg, m, "LlamaForCausalLM", SUPER, 1, FAM,
                 "plan_llama_sp1.json");
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* ... a DeciLM / nemotron-nas config the DeciLM plan ... */
START_TEST(test_named_plan_decilm_branch) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = fam_model(reg, FAM, "decilm-nas-small-tp2ok.config.json", 1);
  fam_check_plan(reg, m, "DeciLMForCausalLM", SUPER, 0, FAM,
                 "plan_decilm_sp0.json");
  fam_check_plan(reg, m, "DeciLMForCausalLM", SUPER, 1, FAM,
                 "plan_decilm_sp1.json");
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* ... and DeciLM architecture without nemotron-nas, or no architectures at
 * all, the Llama plan. */
START_TEST(test_named_plan_guards) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m1 = fam_model_json("{\"architectures\": [\"DeciLMForCausalLM\"],"
                                 " \"model_type\": \"llama\"}");
  tpx_model *m2 = fam_model_json("{\"model_type\": \"nemotron-nas\"}");
  tpx_model *m3 = fam_model_json("{\"architectures\": [], "
                                 "\"model_type\": \"nemotron-nas\"}");
  fam_check_plan(reg, m1, "DeciLMForCausalLM", SUPER, 0, FAM,
                 "plan_llama_sp0.json");
  fam_check_plan(reg, m2, "LlamaForCausalLM", SUPER, 1, FAM,
                 "plan_llama_sp1.json");
  fam_check_plan(reg, m3, "LlamaForCausalLM", SUPER, 0, FAM,
                 "plan_llama_sp0.json");
  tpx_model_destroy(m1);
  tpx_model_destroy(m2);
  tpx_model_destroy(m3);
  tpx_registry_destroy(reg);
}
END_TEST

START_TEST(test_unknown_named_plan) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = fam_model(reg, FAM, "Llama-3.2-1B.config.json", 0);
  fam_check_refused(reg, m, "LlamaForCausalLM", "no_such_plan", 0,
                    "no_such_plan");
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

START_TEST(test_decilm_plans) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = fam_model(reg, FAM, "decilm-nas-small-tp2ok.config.json", 1);
  fam_check_plan(reg, m, "DeciLMForCausalLM", NULL, 0, FAM,
                 "plan_decilm_sp0.json");
  fam_check_plan(reg, m, "DeciLMForCausalLM", NULL, 1, FAM,
                 "plan_decilm_sp1.json");
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* _parallelize_decilm_nemotron raises unless model_type == nemotron-nas. */
START_TEST(test_decilm_refusal) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = fam_model_json("{\"architectures\": [\"DeciLMForCausalLM\"],"
                                " \"model_type\": \"deci\"}");
  tpx_model *m2 =
      fam_model_json("{\"architectures\": [\"DeciLMForCausalLM\"]}");
  fam_check_refused(reg, m, "DeciLMForCausalLM", NULL, 0, "nemotron-nas");
  fam_check_refused(reg, m, "DeciLMForCausalLM", NULL, 1, "deci");
  fam_check_refused(reg, m2, "DeciLMForCausalLM", NULL, 0, "nemotron-nas");
  tpx_model_destroy(m);
  tpx_model_destroy(m2);
  tpx_registry_destroy(reg);
}
END_TEST

/* Nemotron-Flash post-processing (docs/SEMANTICS.md "Plan selection"; in
 * _get_parallel_plan after the plan function, for every source): lm_head stays
 * when its output is Shard (the Llama plan), is dropped when Replicate (the
 * DeciLM plan reached by a Nemotron-Flash-named config). The host applies it;
 * the plugin's get_plan is the bare plan function and keeps lm_head. */
START_TEST(test_nemotron_flash_rule) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *flash =
      fam_model_json("{\"architectures\": [\"NemotronFlashForCausalLM\"], "
                     "\"model_type\": \"nemotron_flash\"}");
  tpx_model *named = fam_model_json(
      "{\"architectures\": [\"DeciLMForCausalLM\"], \"model_type\": "
      "\"nemotron-nas\", \"_name_or_path\": \"nvidia/Nemotron-FLASH-1B\"}");
  tpx_model *plain = fam_model_json(
      "{\"architectures\": [\"DeciLMForCausalLM\"], \"model_type\": "
      "\"nemotron-nas\", \"_name_or_path\": \"nvidia/nemotron-flashy\"}");
  fam_check_plan(reg, flash, "NemotronFlashForCausalLM", NULL, 0, FAM,
                 "plan_nemotron_flash_sp0.json");
  fam_check_plan(reg, flash, "NemotronFlashForCausalLM", NULL, 1, FAM,
                 "plan_nemotron_flash_sp1.json");
  fam_check_plan(reg, named, "DeciLMForCausalLM", NULL, 0, FAM,
                 "plan_decilm_sp0.json");
  fam_check_plan(reg, named, "DeciLMForCausalLM", SUPER, 0, FAM,
                 "plan_decilm_sp0.json");
  /* Through selection: the host's post-processing drops the Replicate head,
   * keeps the Shard one. */
  fam_check_selected(reg, flash, NULL, 0, 1, 0, FAM,
                     "plan_nemotron_flash_sp0.json", NULL, NULL, 0);
  fam_check_selected(reg, flash, NULL, 1, 1, 0, FAM,
                     "plan_nemotron_flash_sp1.json", NULL, NULL, 0);
  fam_check_selected(reg, named, NULL, 0, 1, 0, FAM,
                     "plan_decilm_sp0_flash.json", NULL, NULL, 0);
  fam_check_selected(reg, named, SUPER, 0, 1, 0, FAM,
                     "plan_decilm_sp0_flash.json", NULL, NULL, 0);
  /* "nemotron-flashy" still contains "nemotron-flash": upstream's substring
   * test, reproduced as is. */
  fam_check_selected(reg, plain, NULL, 0, 1, 0, FAM,
                     "plan_decilm_sp0_flash.json", NULL, NULL, 0);
  tpx_model_destroy(flash);
  tpx_model_destroy(named);
  tpx_model_destroy(plain);
  tpx_registry_destroy(reg);
}
END_TEST

START_TEST(test_llama_skeleton) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = fam_model(reg, FAM, "Llama-3.2-1B.config.json", 1);
  tpx_param_info p;
  tpx_error err = {0};
  /* Published: Llama-3.2-1B has 1,235,814,400 parameters (tied head). */
  ck_assert_int_eq(tpx_model_total_params(m), 1235814400LL);
  ck_assert_int_eq(tpx_model_total_bytes(m), 2 * 1235814400LL);
  ck_assert_int_eq(fam_count_untied(m), 1 + 16 * 9 + 1);
  fam_assert_param(m, "model.embed_tokens.weight", 128256, 2048);
  fam_assert_param(m, "model.layers.0.self_attn.q_proj.weight", 2048, 2048);
  fam_assert_param(m, "model.layers.7.self_attn.k_proj.weight", 512, 2048);
  fam_assert_param(m, "model.layers.15.self_attn.v_proj.weight", 512, 2048);
  fam_assert_param(m, "model.layers.15.self_attn.o_proj.weight", 2048, 2048);
  fam_assert_param(m, "model.layers.3.mlp.gate_proj.weight", 8192, 2048);
  fam_assert_param(m, "model.layers.3.mlp.up_proj.weight", 8192, 2048);
  fam_assert_param(m, "model.layers.3.mlp.down_proj.weight", 2048, 8192);
  fam_assert_param(m, "model.layers.3.input_layernorm.weight", 2048, -1);
  fam_assert_param(m, "model.layers.3.post_attention_layernorm.weight", 2048,
                   -1);
  fam_assert_param(m, "model.norm.weight", 2048, -1);
  fam_assert_no_param(m, "model.layers.0.self_attn.q_proj.bias");
  fam_assert_no_param(m, "model.layers.16.self_attn.q_proj.weight");
  fam_assert_tied(m, "lm_head.weight", "model.embed_tokens.weight");
  fam_assert_module(m, "model.rotary_emb", TPX_MODULE_ROTARY);
  fam_assert_module(m, "model.layers.0.self_attn.q_proj", TPX_MODULE_LINEAR);
  fam_assert_module(m, "model.embed_tokens", TPX_MODULE_EMBEDDING);
  fam_assert_module(m, "model.norm", TPX_MODULE_NORM);
  fam_assert_module(m, "lm_head", TPX_MODULE_LINEAR);
  ck_assert_int_eq(tpx_model_param(m,
                                   tpx_model_find_param(m, "model.norm.weight"),
                                   &p, &err),
                   TPX_OK);
  ck_assert_int_eq(p.dtype, TPX_DTYPE_BF16);
  tpx_model_destroy(m);
  {
    /* a size past the bound is named, whichever it is */
    static const char *const bad[][2] = {
        {"{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": "
         "4611686018427387904, \"num_hidden_layers\": 1, "
         "\"num_attention_heads\": 2, \"head_dim\": 4, "
         "\"intermediate_size\": 8, \"vocab_size\": 10}",
         "hidden_size 4611686018427387904"},
        {"{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 8, "
         "\"num_hidden_layers\": 4294967296, \"num_attention_heads\": 2, "
         "\"intermediate_size\": 8, \"vocab_size\": 10}",
         "num_hidden_layers 4294967296"}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
      tpx_model *b = fam_model_json(bad[k][0]);
      tpx_error e = {0};
      ck_assert_int_ne(tpx_registry_build_skeleton(reg, b, &e), TPX_OK);
      ck_assert_msg(strstr(e.message, bad[k][1]) != NULL, "%s", e.message);
      tpx_model_destroy(b);
    }
  }
  tpx_registry_destroy(reg);
}
END_TEST

/* DeciLM: the six synthetic blocks exercise every block kind. */
START_TEST(test_decilm_skeleton) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = fam_model(reg, FAM, "decilm-nas-small.config.json", 1);
  /* 2 * vocab * hidden (untied) + norm + blocks, see the config. */
  ck_assert_int_eq(tpx_model_total_params(m), 102378496LL);
  /* block 0: kv = 16 / 8 = 2 heads of 64; ffn_mult 2.625 -> 1792 */
  fam_assert_param(m, "model.layers.0.self_attn.q_proj.weight", 1024, 1024);
  fam_assert_param(m, "model.layers.0.self_attn.k_proj.weight", 128, 1024);
  fam_assert_param(m, "model.layers.0.self_attn.v_proj.weight", 128, 1024);
  fam_assert_param(m, "model.layers.0.mlp.gate_proj.weight", 1792, 1024);
  fam_assert_param(m, "model.layers.0.mlp.down_proj.weight", 1024, 1792);
  /* block 1: attention no_op -> no self_attn, no input_layernorm;
   * ffn_mult 1.3125 -> int(896) rounded up to 1024 */
  ck_assert_int_lt(tpx_model_find_module(m, "model.layers.1.self_attn"), 0);
  fam_assert_no_param(m, "model.layers.1.input_layernorm.weight");
  fam_assert_param(m, "model.layers.1.mlp.up_proj.weight", 1024, 1024);
  fam_assert_param(m, "model.layers.1.post_attention_layernorm.weight", 1024,
                   -1);
  /* block 2: attention replaced with one linear */
  fam_assert_param(m, "model.layers.2.self_attn.linear_attn.weight", 1024,
                   1024);
  fam_assert_no_param(m, "model.layers.2.self_attn.q_proj.weight");
  fam_assert_param(m, "model.layers.2.input_layernorm.weight", 1024, -1);
  /* block 3: kv = 4 heads; FFN no_op */
  fam_assert_param(m, "model.layers.3.self_attn.k_proj.weight", 256, 1024);
  ck_assert_int_lt(tpx_model_find_module(m, "model.layers.3.mlp"), 0);
  fam_assert_no_param(m, "model.layers.3.post_attention_layernorm.weight");
  /* block 4: kv = 1 head; FFN replaced with linear */
  fam_assert_param(m, "model.layers.4.self_attn.v_proj.weight", 64, 1024);
  fam_assert_param(m, "model.layers.4.mlp.linear_mlp.weight", 1024, 1024);
  /* block 5: ffn_mult 5.25 -> 3584 */
  fam_assert_param(m, "model.layers.5.mlp.gate_proj.weight", 3584, 1024);
  fam_assert_param(m, "lm_head.weight", 32000, 1024);
  fam_assert_module(m, "model.rotary_emb", TPX_MODULE_ROTARY);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

START_TEST(test_skeleton_refusals) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = fam_model_json("{\"architectures\": [\"DeciLMForCausalLM\"], "
                                "\"model_type\": \"nemotron-nas\", "
                                "\"hidden_size\": 64, \"num_attention_heads\": "
                                "4, \"num_hidden_layers\": 3, \"vocab_size\": "
                                "10, \"block_configs\": []}");
  tpx_model *flash =
      fam_model_json("{\"architectures\": [\"NemotronFlashForCausalLM\"]}");
  tpx_model *llama = fam_model_json(
      "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 64}");
  tpx_error err = {0};
  ck_assert_int_ne(tpx_registry_build_skeleton(reg, m, &err), TPX_OK);
  ck_assert_ptr_nonnull(strstr(err.message, "block_configs"));
  tpx_error_clear(&err);
  ck_assert_int_ne(tpx_registry_build_skeleton(reg, flash, &err), TPX_OK);
  tpx_error_clear(&err);
  ck_assert_int_ne(tpx_registry_build_skeleton(reg, llama, &err), TPX_OK);
  ck_assert_ptr_nonnull(strstr(err.message, "num_hidden_layers"));
  tpx_model_destroy(m);
  tpx_model_destroy(flash);
  tpx_model_destroy(llama);
  tpx_registry_destroy(reg);
}
END_TEST

/* validate_tp_mesh_for_nemotron_nas through plan selection: the host
 * reports each failed assertion exactly once, as an error (the plugin used
 * to report it a second time from its own validate export, then refused its
 * plan); the DeciLM plan is selected at every tp, as upstream chooses it
 * before validation fails. */
START_TEST(test_decilm_validation) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *bad = fam_model(reg, FAM, "decilm-nas-small.config.json", 1);
  tpx_model *ok = fam_model(reg, FAM, "decilm-nas-small-tp2ok.config.json", 1);
  const char *hnd = "heads-not-divisible";
  const char *sp0 = "plan_decilm_sp0.json", *sp1 = "plan_decilm_sp1.json";
  /* tp=2: block 4 has 16 / 16 = 1 kv head */
  fam_check_selected(reg, bad, NULL, 0, 2, 0, FAM, sp0, hnd, NULL, 1);
  fam_check_selected(reg, bad, NULL, 0, 2, 0, FAM, sp0, hnd, "layer 4", 1);
  fam_check_selected(reg, bad, NULL, 1, 2, 0, FAM, sp1, hnd, NULL, 1);
  fam_check_selected(reg, bad, SUPER, 1, 2, 0, FAM, sp1, hnd, "layer 4", 1);
  /* tp=3: 16 attention heads are not divisible at all */
  fam_check_selected(reg, bad, NULL, 0, 3, 0, FAM, sp0, hnd,
                     "num_attention_heads", 1);
  fam_check_selected(reg, bad, NULL, 0, 3, 0, FAM, sp0, hnd, NULL, 1);
  /* tp=1: nothing is checked */
  fam_check_selected(reg, bad, NULL, 0, 1, 0, FAM, sp0, hnd, NULL, 0);
  /* every kv count divisible by 2; the replaced / no_op blocks bypass */
  fam_check_selected(reg, ok, NULL, 0, 2, 0, FAM, sp0, hnd, NULL, 0);
  fam_check_selected(reg, ok, NULL, 1, 2, 0, FAM, sp1, hnd, NULL, 0);
  fam_check_selected(reg, ok, SUPER, 1, 2, 0, FAM, sp1, hnd, NULL, 0);
  /* the linear-attention bypass note, once */
  fam_check_selected(reg, ok, NULL, 0, 2, 0, FAM, NULL,
                     "nemotron-nas-linear-attention", NULL, 1);
  /* tp=4: block 0 has 2 kv heads */
  fam_check_selected(reg, ok, NULL, 0, 4, 0, FAM, sp0, hnd, NULL, 1);
  fam_check_selected(reg, ok, NULL, 0, 4, 0, FAM, sp0, hnd, "layer 0", 1);
  tpx_model_destroy(bad);
  tpx_model_destroy(ok);
  tpx_registry_destroy(reg);
}
END_TEST

START_TEST(test_rank_bytes) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = fam_model(reg, FAM, "Llama-3.2-1B.config.json", 1);
  tpx_model *dm = fam_model(reg, FAM, "decilm-nas-small-tp2ok.config.json", 1);
  tpx_plan *plan = NULL;
  char msg[256];
  ck_assert_int_eq(
      fam_plan(reg, m, "LlamaForCausalLM", NULL, 0, 2, &plan, msg, sizeof msg),
      TPX_OK);
  /* Llama-3.2-1B, tp=2, by hand: every sharded matrix halves; norms
   * (16 * 2 + 1) * 2048 replicated; bf16. */
  ck_assert_int_eq(fam_expected_rank_bytes(m, plan, 2, 0),
                   2 * ((1235814400LL - 33 * 2048) / 2 + 33 * 2048));
  fam_check_rank_bytes(m, plan);
  tpx_plan_destroy(plan);
  ck_assert_int_eq(fam_plan(reg, dm, "DeciLMForCausalLM", NULL, 1, 2, &plan,
                            msg, sizeof msg),
                   TPX_OK);
  fam_check_rank_bytes(dm, plan);
  tpx_plan_destroy(plan);
  tpx_model_destroy(m);
  tpx_model_destroy(dm);
  tpx_registry_destroy(reg);
}
END_TEST

/* Upstream's plan functions never look at tp or the head counts: at a tp
 * the heads do not allow (per layer for Nemotron-NAS) get_plan returns the
 * same plan as at tp = 1 and 2, on the bare-architecture and the named-plan
 * path; selection then picks it, and the host's validate_tp_mesh reports
 * the heads once, as an error (no plugin-refused fallback to the HF plan). */
static const struct {
  const char *config, *arch, *plan_name;
  int sp;
  int64_t tp;
  const char *golden, *needle;
} k_indivisible[] = {
    /* Llama-3.2-1B: 32 heads, 8 kv heads */
    {"Llama-3.2-1B.config.json", "LlamaForCausalLM", NULL, 0, 3,
     "plan_llama_sp0.json",
     "num_key_value_heads (8) must be divisible by TP size (3)"},
    {"Llama-3.2-1B.config.json", "LlamaForCausalLM", NULL, 1, 3,
     "plan_llama_sp1.json", "num_key_value_heads (8)"},
    {"Llama-3.2-1B.config.json", "LlamaForCausalLM", NULL, 0, 16,
     "plan_llama_sp0.json",
     "num_key_value_heads (8) must be divisible by TP size (16)"},
    {"Llama-3.2-1B.config.json", "LlamaForCausalLM", SUPER, 0, 3,
     "plan_llama_sp0.json", "num_key_value_heads (8)"},
    {"Llama-3.2-1B.config.json", "LlamaForCausalLM", SUPER, 1, 16,
     "plan_llama_sp1.json", "num_key_value_heads (8)"},
    /* Nemotron-NAS: block 4 has 1 kv head; 16 heads */
    {"decilm-nas-small.config.json", "DeciLMForCausalLM", NULL, 0, 2,
     "plan_decilm_sp0.json", "layer 4"},
    {"decilm-nas-small.config.json", "DeciLMForCausalLM", SUPER, 1, 2,
     "plan_decilm_sp1.json", "layer 4"},
    {"decilm-nas-small.config.json", "DeciLMForCausalLM", NULL, 0, 3,
     "plan_decilm_sp0.json", "num_attention_heads=16, tp=3"},
    {"decilm-nas-small-tp2ok.config.json", "DeciLMForCausalLM", NULL, 1, 4,
     "plan_decilm_sp1.json", "layer 0"},
};

START_TEST(test_indivisible_heads) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = fam_model(reg, FAM, k_indivisible[_i].config, 1);
  fam_check_plan_any_tp(reg, m, k_indivisible[_i].arch,
                        k_indivisible[_i].plan_name, k_indivisible[_i].sp,
                        k_indivisible[_i].tp, FAM, k_indivisible[_i].golden);
  fam_check_selected(reg, m, k_indivisible[_i].plan_name, k_indivisible[_i].sp,
                     k_indivisible[_i].tp, 0, FAM, k_indivisible[_i].golden,
                     "heads-not-divisible", k_indivisible[_i].needle, 1);
  fam_check_selected(reg, m, k_indivisible[_i].plan_name, k_indivisible[_i].sp,
                     k_indivisible[_i].tp, 0, FAM, NULL, "heads-not-divisible",
                     NULL, 1);
  fam_check_selected(reg, m, k_indivisible[_i].plan_name, k_indivisible[_i].sp,
                     k_indivisible[_i].tp, 0, FAM, NULL, "plugin-refused", NULL,
                     0);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* At the tps the heads allow, the same plans and no head diagnostic. */
START_TEST(test_divisible_tps) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *llama = fam_model(reg, FAM, "Llama-3.2-1B.config.json", 1);
  static const int64_t good[] = {1, 2, 4, 8};
  size_t i;
  for (i = 0; i < sizeof good / sizeof good[0]; i++) {
    fam_check_plan_any_tp(reg, llama, "LlamaForCausalLM", NULL, 1, good[i], FAM,
                          "plan_llama_sp1.json");
    fam_check_selected(reg, llama, NULL, 1, good[i], 0, FAM,
                       "plan_llama_sp1.json", "heads-not-divisible", NULL, 0);
  }
  tpx_model_destroy(llama);
  tpx_registry_destroy(reg);
}
END_TEST

static Suite *llama_suite(void) {
  Suite *s = suite_create("families-llama");
  TCase *tc = tcase_create("llama");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_abi);
  tcase_add_test(tc, test_descriptor);
  tcase_add_loop_test(tc, test_llama_plans, 0,
                      (int)(sizeof k_llama_archs / sizeof k_llama_archs[0]));
  tcase_add_test(tc, test_named_plan_llama_branch);
  tcase_add_test(tc, test_named_plan_decilm_branch);
  tcase_add_test(tc, test_named_plan_guards);
  tcase_add_test(tc, test_unknown_named_plan);
  tcase_add_test(tc, test_decilm_plans);
  tcase_add_test(tc, test_decilm_refusal);
  tcase_add_test(tc, test_nemotron_flash_rule);
  tcase_add_test(tc, test_llama_skeleton);
  tcase_add_test(tc, test_decilm_skeleton);
  tcase_add_test(tc, test_skeleton_refusals);
  tcase_add_test(tc, test_decilm_validation);
  tcase_add_loop_test(tc, test_indivisible_heads, 0,
                      (int)(sizeof k_indivisible / sizeof k_indivisible[0]));
  tcase_add_test(tc, test_divisible_tps);
  tcase_add_test(tc, test_rank_bytes);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(llama_suite());
  int failed;
  srunner_run_all(sr, CK_NORMAL);
  failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
