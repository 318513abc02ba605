/* test_select.c — plan selection (docs/SEMANTICS.md "Plan selection"): the
 * priority custom > named > plugin > HF > default, fallbacks and their
 * diagnostics (plugin-refused, plugin-failed, hf-style-unsupported,
 * sp-with-hf-plan, remote-code-no-plan, default-plan-fallback), the bundled HF
 * tables and their prefixes, Nemotron-Flash post-processing, the plugin's
 * capabilities and the trace. Only the suite's own plugins are loaded (and the
 * llama plugin for its Nemotron-Flash declaration). */
#include <stdint.h>

#include "plugin_test.h"
#include "tpx/match.h"
#include "tpx/mesh.h"
#include "tpx/plan.h"
#include "tpx/sharding.h"

typedef struct fixture {
  tpx_registry *reg;
  tpx_model *model;
  tpx_diag_list *diags;
  tpx_selection *sel;
} fixture;

static void setup_reg(fixture *f, const char *plugin) {
  memset(f, 0, sizeof *f);
  CHECK_OK(tpx_registry_create(&f->reg, &e_));
  if (plugin)
    CHECK_OK(tpx_registry_load_file(f->reg, plugin, &e_));
  CHECK_OK(tpx_diag_list_create(&f->diags, &e_));
}

static void teardown(fixture *f) {
  tpx_selection_destroy(f->sel);
  tpx_diag_list_destroy(f->diags);
  tpx_model_destroy(f->model);
  tpx_registry_destroy(f->reg);
}

static void select_ok(fixture *f, int64_t tp, int sp, const tpx_plan *custom,
                      const char *plan_name) {
  tpx_select_options o = TPX_SELECT_OPTIONS_INIT;
  o.tp_size = tp;
  o.sequence_parallel = sp;
  o.custom = custom;
  o.plan_name = plan_name;
  CHECK_OK(tpx_select_plan(f->reg, f->model, &o, &f->sel, f->diags, &e_));
  ck_assert_ptr_nonnull(tpx_selection_plan(f->sel));
}

static int has_diag(const fixture *f, const char *code, tpx_diag_level level,
                    const char *needle) {
  for (size_t i = 0; i < tpx_diag_count(f->diags); i++) {
    tpx_diag d;
    if (tpx_diag_get(f->diags, i, &d, NULL) == TPX_OK &&
        strcmp(d.code, code) == 0 && d.level == level &&
        (!needle || strstr(d.message, needle) || strstr(d.fix, needle)))
      return 1;
  }
  return 0;
}

static int has_trace(const fixture *f, const char *needle) {
  for (size_t i = 0; i < tpx_selection_trace_size(f->sel); i++)
    if (strstr(tpx_selection_trace(f->sel, i), needle))
      return 1;
  return 0;
}

static tpx_plan_entry entry(const fixture *f, const char *key) {
  const tpx_plan *p = tpx_selection_plan(f->sel);
  int64_t i = tpx_plan_find(p, key);
  ck_assert_msg(i >= 0, "plan lacks key '%s'", key);
  tpx_plan_entry e;
  CHECK_OK(tpx_plan_get(p, (size_t)i, &e, &e_));
  return e;
}

static tpx_model *load_data(const char *name) {
  tpx_model *m = NULL;
  CHECK_OK(tpx_model_load_config(DATA(name), &m, &e_));
  return m;
}

/* A strategy key the host refuses fails the capability: a warning, no
 * strategy, and the plan still selected. */
START_TEST(strategy_bad_key) {
  fixture f;
  setup_reg(&f, GOOD("libtpxtest_good.so"));
  f.model =
      model_from_json(TEST_CONFIG(", \"tpxtest_bad_strategy_key\": true"));
  CHECK_OK(tpx_registry_build_skeleton(f.reg, f.model, &e_));
  select_ok(&f, 2, 0, NULL, NULL);
  ck_assert_int_eq(tpx_selection_source(f.sel), TPX_PLAN_SOURCE_PLUGIN);
  ck_assert_uint_eq(tpx_selection_num_strategy(f.sel), 0);
  ck_assert_ptr_null(tpx_selection_strategy_lines(f.sel));
  ck_assert(has_diag(&f, "plugin-failed", TPX_DIAG_WARNING, "Bad Key"));
  ck_assert(has_trace(&f, "strategy properties failed"));
  teardown(&f);
}
END_TEST

/* A strategy dtype tpx cannot parse: an error naming the key and plugin,
 * the policy untouched. */
START_TEST(strategy_bad_mp) {
  fixture f;
  setup_reg(&f, GOOD("libtpxtest_good.so"));
  f.model = model_from_json(TEST_CONFIG(", \"tpxtest_bad_mp\": true"));
  CHECK_OK(tpx_registry_build_skeleton(f.reg, f.model, &e_));
  select_ok(&f, 2, 0, NULL, NULL);
  ck_assert_str_eq(tpx_selection_strategy_value(f.sel, "mp_param_dtype"),
                   "float7");
  tpx_mp_policy mp = {TPX_DTYPE_BF16, TPX_DTYPE_F32, TPX_DTYPE_F32};
  tpx_error e = {0};
  ck_assert_int_eq(tpx_selection_strategy_mp(f.sel, &mp, &e),
                   TPX_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(e.message, "mp_param_dtype=float7"));
  ck_assert_ptr_nonnull(strstr(e.message, "tpxtest"));
  ck_assert_int_eq(mp.param_dtype, TPX_DTYPE_BF16);
  teardown(&f);
}
END_TEST

START_TEST(plugin_plan_with_capabilities) {
  fixture f;
  setup_reg(&f, GOOD("libtpxtest_good.so"));
  f.model = model_from_json(TEST_CONFIG(""));
  CHECK_OK(tpx_registry_build_skeleton(f.reg, f.model, &e_));
  select_ok(&f, 2, 0, NULL, NULL);
  ck_assert_int_eq(tpx_selection_source(f.sel), TPX_PLAN_SOURCE_PLUGIN);
  ck_assert_str_eq(tpx_plan_source_name(TPX_PLAN_SOURCE_PLUGIN), "plugin");
  ck_assert_str_eq(tpx_selection_plugin_name(f.sel), "tpxtest");
  ASSERT_CONTAINS(tpx_selection_plugin_path(f.sel), "libtpxtest_good.so");
  ck_assert_str_eq(tpx_selection_function(f.sel), "tpxtest_plan");
  ck_assert_uint_eq(tpx_plan_size(tpx_selection_plan(f.sel)), 9);
  ck_assert(has_trace(&f, "plugin: used 'tpxtest'"));
  ck_assert(has_trace(&f, "validate_tp_mesh: head counts fit tp=2"));
  /* capabilities */
  ck_assert(has_diag(&f, "tpxtest-validated", TPX_DIAG_INFO, "validated"));
  ck_assert_uint_eq(tpx_selection_num_fp32(f.sel), 1);
  ck_assert_str_eq(tpx_selection_fp32(f.sel, 0), "model.norm.weight");
  ck_assert_ptr_null(tpx_selection_fp32(f.sel, 1));
  /* strategy: set order kept, a key set again replaced in place */
  ck_assert_uint_eq(tpx_selection_num_strategy(f.sel), 3);
  ck_assert_str_eq(tpx_selection_strategy(f.sel, 0), "name=TpxTest");
  ck_assert_str_eq(tpx_selection_strategy(f.sel, 1), "mp_output_dtype=bf16");
  ck_assert_ptr_null(tpx_selection_strategy(f.sel, 3));
  ck_assert_str_eq(tpx_selection_strategy_lines(f.sel)[2],
                   tpx_selection_strategy(f.sel, 2));
  ck_assert_ptr_null(tpx_selection_strategy_lines(NULL));
  ck_assert_str_eq(tpx_selection_strategy_value(f.sel, "mp_output_dtype"),
                   "bf16");
  ck_assert_ptr_null(tpx_selection_strategy_value(f.sel, "mp_output"));
  ck_assert_ptr_null(tpx_selection_strategy_value(f.sel, ""));
  ck_assert_ptr_null(tpx_selection_strategy_value(NULL, "name"));
  ck_assert(has_trace(&f, "3 strategy properties"));
  /* the mixed-precision default: only the field the strategy gives */
  tpx_mp_policy mp = {TPX_DTYPE_BF16, TPX_DTYPE_F32, TPX_DTYPE_F32};
  CHECK_OK(tpx_selection_strategy_mp(f.sel, &mp, &e_));
  ck_assert_int_eq(mp.param_dtype, TPX_DTYPE_BF16);
  ck_assert_int_eq(mp.reduce_dtype, TPX_DTYPE_F32);
  ck_assert_int_eq(mp.output_dtype, TPX_DTYPE_BF16);
  CHECK_OK(tpx_selection_strategy_mp(NULL, &mp, &e_));
  ck_assert_int_eq(tpx_selection_strategy_mp(f.sel, NULL, NULL),
                   TPX_INVALID_ARGUMENT);
  ck_assert_uint_eq(tpx_selection_num_fsdp_units(f.sel), 2);
  int reshard = 7;
  ck_assert_str_eq(tpx_selection_fsdp_unit(f.sel, 0, &reshard),
                   "model.layers.0");
  ck_assert_int_eq(reshard, -1);
  ck_assert_str_eq(tpx_selection_fsdp_unit(f.sel, 1, &reshard),
                   "model.layers.1");
  ck_assert_int_eq(reshard, 0);
  teardown(&f);
}
END_TEST

START_TEST(custom_plan_wins) {
  fixture f;
  setup_reg(&f, GOOD("libtpxtest_good.so"));
  f.model = model_from_json(TEST_CONFIG(""));
  static const char doc[] =
      "{\"format\": \"tpx-plan/1\", \"entries\": [{\"module\": \"lm_head\", "
      "\"style\": \"colwise\"}]}";
  tpx_plan *custom = NULL;
  CHECK_OK(tpx_plan_from_json(doc, strlen(doc), "custom", &custom, &e_));
  select_ok(&f, 2, 0, custom, "tpxtest_named_plan");
  ck_assert_int_eq(tpx_selection_source(f.sel), TPX_PLAN_SOURCE_CUSTOM);
  ck_assert_uint_eq(tpx_plan_size(tpx_selection_plan(f.sel)), 1);
  ck_assert(has_trace(&f, "custom: used the given plan"));
  ck_assert(has_trace(&f, "named plan 'tpxtest_named_plan': skipped"));
  /* A copy: the caller's plan can go away. */
  tpx_plan_destroy(custom);
  ck_assert_uint_eq(tpx_plan_size(tpx_selection_plan(f.sel)), 1);
  teardown(&f);
}
END_TEST

START_TEST(named_plan) {
  fixture f;
  setup_reg(&f, GOOD("libtpxtest_good.so"));
  /* Another architecture: a named plan does not depend on it. */
  f.model = model_from_json(
      "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", "
      "\"num_attention_heads\": 8, \"num_key_value_heads\": 8}");
  select_ok(&f, 2, 0, NULL, "tpxtest_named_plan");
  ck_assert_int_eq(tpx_selection_source(f.sel), TPX_PLAN_SOURCE_CUSTOM);
  ck_assert_str_eq(tpx_selection_plugin_name(f.sel), "tpxtest");
  ck_assert_str_eq(tpx_selection_function(f.sel), "tpxtest_named_plan");
  tpx_plan_entry e = entry(&f, "lm_head");
  ck_assert_int_eq(e.style.output_layouts.items[0].kind, TPX_REPLICATE);
  ck_assert(has_trace(&f, "named plan 'tpxtest_named_plan': used"));
  /* An unknown name is an error. */
  tpx_selection *sel = NULL;
  tpx_select_options o = TPX_SELECT_OPTIONS_INIT;
  o.plan_name = "no_such_plan";
  tpx_error e2 = {0};
  ck_assert_int_eq(tpx_select_plan(f.reg, f.model, &o, &sel, f.diags, &e2),
                   TPX_NOT_FOUND);
  ck_assert_ptr_null(sel);
  ASSERT_CONTAINS(e2.message, "named plan 'no_such_plan'");
  teardown(&f);
}
END_TEST

START_TEST(qualified_name_matches) {
  fixture f;
  setup_reg(&f, GOOD("libtpxtest_good.so"));
  f.model = model_from_json("{\"architectures\": [\"QualOnlyForCausalLM\"], "
                            "\"num_attention_heads\": 8}");
  select_ok(&f, 1, 0, NULL, NULL);
  ck_assert_int_eq(tpx_selection_source(f.sel), TPX_PLAN_SOURCE_PLUGIN);
  ck_assert(has_trace(&f, "tests.models.qual.QualOnlyForCausalLM"));
  ck_assert(has_trace(&f, "validate_tp_mesh: skipped (tp=1)"));
  teardown(&f);
}
END_TEST

/* The HF step is tried, and transformers 5.25's plan (the class plan
 * lm_head colwise_gather_output) does not translate for Automodel 0.7.0,
 * which then takes its default plan (issue 26, cause 4). */
START_TEST(plugin_refuses_falls_back_to_hf) {
  fixture f;
  setup_reg(&f, GOOD("libtpxtest_good.so"));
  f.model = model_from_json(
      "{\"architectures\": [\"TestForCausalLM\"], \"model_type\": \"llama\", "
      "\"num_attention_heads\": 6, \"num_key_value_heads\": 6}");
  select_ok(&f, 4, 0, NULL, NULL);
  ck_assert_int_eq(tpx_selection_source(f.sel), TPX_PLAN_SOURCE_DEFAULT);
  ck_assert(has_diag(&f, "hf-style-unsupported", TPX_DIAG_WARNING,
                     "'lm_head': Hugging Face style 'colwise_gather_output'"));
  ck_assert(has_diag(&f, "plugin-refused", TPX_DIAG_WARNING,
                     "not divisible by tp=4"));
  ck_assert(has_diag(&f, "heads-not-divisible", TPX_DIAG_ERROR, NULL));
  ck_assert(has_trace(&f, "falling back to the HF plan"));
  ck_assert(
      has_diag(&f, "hf-style-unsupported", TPX_DIAG_WARNING, "LlamaConfig"));
  teardown(&f);
}
END_TEST

START_TEST(plugin_fails_falls_back) {
  fixture f;
  setup_reg(&f, BROKEN("unknown_style.so"));
  f.model = model_from_json(
      "{\"architectures\": [\"BrokenForCausalLM\"], \"model_type\": "
      "\"qwen2\"}");
  select_ok(&f, 2, 0, NULL, NULL);
  ck_assert_int_eq(tpx_selection_source(f.sel), TPX_PLAN_SOURCE_DEFAULT);
  /* an error: the plan shown is not the plugin's (issue 28 C15) */
  ck_assert(has_diag(&f, "plugin-failed", TPX_DIAG_ERROR,
                     "unknown style 'diagonalwise'"));
  ck_assert(has_diag(&f, "plugin-failed", TPX_DIAG_ERROR,
                     "fell back to the default plan (default_base_plan)"));
  teardown(&f);
}
END_TEST

/* The bundled HF tables: file, architecture, expected keys; `--plan hf`
 * (the named plan "hf"), since by default transformers 5.25's plan does not
 * translate for Automodel 0.7.0 (hf_transformers_5_falls_back). */
static const struct {
  const char *config;
  size_t entries;
  const char *key;
  tpx_style_kind kind;
  const char *trace;
} hf_cases[] = {
    /* lm_head + 7 base keys + embed_tokens */
    {"Llama-3.2-1B.json", 9, "model.layers.*.mlp.down_proj", TPX_STYLE_ROWWISE,
     "LlamaConfig"},
    /* q_norm / k_norm replicated_with_grad_allreduce are dropped */
    {"Qwen3-0.6B.json", 9, "model.layers.*.self_attn.k_proj", TPX_STYLE_COLWISE,
     "Qwen3Config"},
    {"Qwen2.5-0.5B.json", 9, "lm_head", TPX_STYLE_COLWISE, "Qwen2Config"},
    {"gemma-3-1b-it.json", 9, "model.embed_tokens", TPX_STYLE_ROWWISE,
     "Gemma3TextConfig"},
    {"phi-2.json", 8, "model.layers.*.self_attn.dense", TPX_STYLE_ROWWISE,
     "PhiConfig"},
};

START_TEST(hf_bundled_tables) {
  fixture f;
  setup_reg(&f, NULL);
  f.model = load_data(hf_cases[_i].config);
  select_ok(&f, 1, 0, NULL, "hf");
  ck_assert_int_eq(tpx_selection_source(f.sel), TPX_PLAN_SOURCE_CUSTOM);
  ck_assert_uint_eq(tpx_plan_size(tpx_selection_plan(f.sel)),
                    hf_cases[_i].entries);
  ck_assert_int_eq(entry(&f, hf_cases[_i].key).style.kind, hf_cases[_i].kind);
  ck_assert(has_trace(&f, hf_cases[_i].trace));
  /* lm_head colwise_gather_output: colwise, output gathered */
  tpx_plan_entry head = entry(&f, "lm_head");
  ck_assert_int_eq(head.style.kind, TPX_STYLE_COLWISE);
  ck_assert_int_eq(head.style.output_layouts.items[0].kind, TPX_REPLICATE);
  ck_assert(has_diag(&f, "hf-style-translated", TPX_DIAG_INFO,
                     "'colwise_gather_output'"));
  /* embed_tokens added as rowwise_rep (plain rowwise, replicated input) */
  tpx_plan_entry emb = entry(&f, "model.embed_tokens");
  ck_assert_int_eq(emb.style.kind, TPX_STYLE_ROWWISE);
  ck_assert_int_eq(emb.style.input_layouts.items[0].kind, TPX_REPLICATE);
  /* the class plan comes first */
  tpx_plan_entry first;
  CHECK_OK(tpx_plan_get(tpx_selection_plan(f.sel), 0, &first, &e_));
  ck_assert_str_eq(first.module, "lm_head");
  ck_assert_str_eq(tpx_selection_function(f.sel), "get_hf_tp_shard_plan");
  teardown(&f);
}
END_TEST

/* The inner model comes from the gemma3 plugin's hf_prefix trait, read
 * from the registry when the model was given none (issue 30: no class
 * name in core). */
START_TEST(hf_vlm_prefix) {
  fixture f;
  setup_reg(&f, NULL);
  CHECK_OK(tpx_registry_load_default(f.reg, &e_));
  f.model = model_from_json(
      "{\"architectures\": [\"Gemma3ForConditionalGeneration\"], "
      "\"model_type\": \"gemma3\", \"text_config\": {\"model_type\": "
      "\"gemma3_text\", \"num_attention_heads\": 8, \"num_key_value_heads\": "
      "4}}");
  select_ok(&f, 2, 0, NULL, "hf");
  ck_assert_int_eq(tpx_selection_source(f.sel), TPX_PLAN_SOURCE_CUSTOM);
  entry(&f, "model.language_model.layers.*.self_attn.q_proj");
  entry(&f, "model.language_model.embed_tokens");
  ck_assert(has_trace(&f, "prefix 'model.language_model'"));
  teardown(&f);
}
END_TEST

START_TEST(hf_config_own_plan) {
  fixture f;
  setup_reg(&f, NULL);
  f.model = model_from_json(
      "{\"architectures\": [\"FooForCausalLM\"], \"model_type\": \"foo\", "
      "\"base_model_tp_plan\": {\"blocks.*.attn.qkv\": \"colwise\", "
      "\"blocks.*.attn.out\": \"rowwise\"}, "
      "\"tp_plan\": {\"lm_head\": \"colwise_rep\"}}");
  select_ok(&f, 2, 0, NULL, NULL);
  ck_assert_int_eq(tpx_selection_source(f.sel), TPX_PLAN_SOURCE_HF);
  entry(&f, "model.blocks.*.attn.qkv");
  ck_assert_int_eq(entry(&f, "model.blocks.*.attn.out").style.kind,
                   TPX_STYLE_ROWWISE);
  ck_assert(has_trace(&f, "the config's own base_model_tp_plan"));
  teardown(&f);
}
END_TEST

START_TEST(hf_with_sp_is_an_error) {
  fixture f;
  setup_reg(&f, NULL);
  f.model = load_data("Llama-3.2-1B.json");
  select_ok(&f, 2, 1, NULL, "hf");
  ck_assert_int_eq(tpx_selection_source(f.sel), TPX_PLAN_SOURCE_CUSTOM);
  ck_assert(has_diag(&f, "sp-with-hf-plan", TPX_DIAG_ERROR, NULL));
  teardown(&f);
  /* At tp 1 no plan is applied upstream, so it cannot raise: information. */
  setup_reg(&f, NULL);
  f.model = load_data("Llama-3.2-1B.json");
  select_ok(&f, 1, 1, NULL, "hf");
  ck_assert(!has_diag(&f, "sp-with-hf-plan", TPX_DIAG_ERROR, NULL));
  ck_assert(
      has_diag(&f, "sp-with-hf-plan", TPX_DIAG_INFO, "not applied at tp 1"));
  teardown(&f);
}
END_TEST

/* Issue 26, cause 4: transformers 5.x builds every model's plan with
 * {"embed_tokens": "embedding_rowwise"} first (distributed/mixin.py) and
 * the class plan lm_head colwise_gather_output; NeMo Automodel 0.7.0
 * translates neither ("Unknown parallel style") and falls back to its
 * default plan, as tpx does by default, naming the style. `--plan hf`
 * applies the HF plan with both translated and says upstream differs. */
START_TEST(hf_transformers_5_falls_back) {
  static const char cfg[] =
      "{\"architectures\": [\"MistralForCausalLM\"], \"model_type\": "
      "\"mistral\", \"num_attention_heads\": 8, \"num_key_value_heads\": 4}";
  fixture f;
  setup_reg(&f, NULL);
  f.model = model_from_json(cfg);
  CHECK_OK(tpx_model_add_module(f.model, "model.embed_tokens",
                                TPX_MODULE_EMBEDDING, NULL, &e_));
  select_ok(&f, 2, 1, NULL, NULL);
  ck_assert_int_eq(tpx_selection_source(f.sel), TPX_PLAN_SOURCE_DEFAULT);
  ck_assert(has_diag(&f, "hf-style-unsupported", TPX_DIAG_WARNING,
                     "'lm_head': Hugging Face style 'colwise_gather_output'"));
  ck_assert(has_diag(&f, "hf-style-unsupported", TPX_DIAG_WARNING,
                     "embed_tokens embedding_rowwise"));
  /* the default plan takes sp, as upstream's does: no sp-with-hf-plan */
  ck_assert(!has_diag(&f, "sp-with-hf-plan", TPX_DIAG_ERROR, NULL));
  teardown(&f);

  setup_reg(&f, NULL);
  f.model = model_from_json(cfg);
  CHECK_OK(tpx_model_add_module(f.model, "model.embed_tokens",
                                TPX_MODULE_EMBEDDING, NULL, &e_));
  select_ok(&f, 2, 0, NULL, "hf");
  ck_assert_int_eq(tpx_selection_source(f.sel), TPX_PLAN_SOURCE_CUSTOM);
  ck_assert_str_eq(tpx_selection_function(f.sel), "get_hf_tp_shard_plan");
  /* embedding_rowwise: a vocab-sharded table behind a replicated input */
  tpx_plan_entry emb = entry(&f, "model.embed_tokens");
  ck_assert_int_eq(emb.style.kind, TPX_STYLE_ROWWISE);
  ck_assert_int_eq(emb.style.input_layouts.items[0].kind, TPX_REPLICATE);
  tpx_plan_entry first;
  CHECK_OK(tpx_plan_get(tpx_selection_plan(f.sel), 1, &first, &e_));
  ck_assert_str_eq(first.module, "model.embed_tokens"); /* after lm_head */
  ck_assert(has_diag(&f, "hf-style-translated", TPX_DIAG_INFO,
                     "'embedding_rowwise'"));
  ck_assert(has_diag(&f, "upstream-plan-differs", TPX_DIAG_INFO,
                     "would use its default base plan"));
  teardown(&f);

  /* A plan that names embed_tokens keeps its own style; a config tp_plan
   * replaces the class plan: Automodel translates it, the HF plan is used */
  setup_reg(&f, NULL);
  f.model = model_from_json(
      "{\"architectures\": [\"FooForCausalLM\"], \"model_type\": \"foo\", "
      "\"base_model_tp_plan\": {\"embed_tokens\": \"rowwise_rep\", "
      "\"layers.*.o\": \"rowwise\"}, \"tp_plan\": {\"lm_head\": "
      "\"colwise_rep\"}}");
  CHECK_OK(tpx_model_add_module(f.model, "model.embed_tokens",
                                TPX_MODULE_EMBEDDING, NULL, &e_));
  select_ok(&f, 2, 0, NULL, NULL);
  ck_assert_int_eq(tpx_selection_source(f.sel), TPX_PLAN_SOURCE_HF);
  teardown(&f);
}
END_TEST

/* --plan hf prefixes the base model's plan with the module that owns it
 * (get_hf_tp_shard_plan's _tp_plan_owner): GPT-NeoX's base model is
 * `gpt_neox`, not `model`, so the keys are gpt_neox.layers.*... as
 * transformers 5.25's model.tp_plan has them. */
START_TEST(hf_plan_base_model_prefix) {
  fixture f;
  setup_reg(&f, NULL);
  f.model = model_from_json("{\"architectures\": [\"GPTNeoXForCausalLM\"], "
                            "\"model_type\": \"gpt_neox\", "
                            "\"num_attention_heads\": 4}");
  static const char *const mods[] = {
      "gpt_neox.embed_in", "gpt_neox.layers.0.attention.dense", "lm_head"};
  const int64_t w[2] = {64, 64};
  for (size_t i = 0; i < 3; i++) {
    CHECK_OK(tpx_model_add_module(f.model, mods[i],
                                  i ? TPX_MODULE_LINEAR : TPX_MODULE_EMBEDDING,
                                  NULL, &e_));
    CHECK_OK(tpx_model_add_param(f.model, mods[i], "weight", w, 2,
                                 TPX_DTYPE_BF16, NULL, &e_));
  }
  select_ok(&f, 2, 0, NULL, "hf");
  ck_assert_int_ge(tpx_plan_find(tpx_selection_plan(f.sel),
                                 "gpt_neox.layers.*.attention.dense"),
                   0);
  ck_assert_int_ge(
      tpx_plan_find(tpx_selection_plan(f.sel), "gpt_neox.embed_in"), 0);
  ck_assert_int_lt(tpx_plan_find(tpx_selection_plan(f.sel),
                                 "model.layers.*.attention.dense"),
                   0);
  ck_assert(has_trace(&f, "prefix 'gpt_neox'"));
  teardown(&f);
}
END_TEST

/* A per-layer attribute (transformers 5.25's per_layer_config) that
 * Automodel 0.7.0 reads globally at tp > 1: upstream refuses
 * (AmbiguousGlobalPerLayerAttributeError), and so does tpx, naming it. The
 * head counts are read for every plan, head_dim only after a head-sharded
 * one; an entry equal to the global value is no per-layer attribute; with
 * allow_global_per_layer_attribute_access upstream reads the global value
 * and tpx only says so. */
#define PER_LAYER_CFG(extra, per)                                              \
  "{\"architectures\": [\"FooForCausalLM\"], \"model_type\": \"foo\", "        \
  "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": "     \
  "16" extra ", \"per_layer_config\": {" per "}}"
static void per_layer_case(const char *cfg, int64_t tp, const tpx_plan *custom,
                           tpx_diag_level level, const char *needle) {
  fixture f;
  setup_reg(&f, NULL);
  f.model = model_from_json(cfg);
  select_ok(&f, tp, 0, custom, NULL);
  if (needle)
    ck_assert_msg(has_diag(&f, "upstream-per-layer-config", level, needle),
                  "no %s diag '%s' for %s", level ? "error" : "info", needle,
                  cfg);
  else
    ck_assert_msg(
        !has_diag(&f, "upstream-per-layer-config", TPX_DIAG_ERROR, NULL) &&
            !has_diag(&f, "upstream-per-layer-config", TPX_DIAG_INFO, NULL),
        "unexpected upstream-per-layer-config for %s", cfg);
  teardown(&f);
}

START_TEST(upstream_per_layer_config) {
  const char *heads = PER_LAYER_CFG("", "\"0\": {\"num_attention_heads\": 64}");
  const char *kv = PER_LAYER_CFG("", "\"1\": {\"num_key_value_heads\": 8}");
  const char *hd = PER_LAYER_CFG("", "\"0\": {\"head_dim\": 512}");
  tpx_plan *mlp_only = NULL;
  static const char mlp_json[] =
      "{\"format\": \"tpx-plan/1\", \"entries\": [{\"module\": "
      "\"model.layers.*.mlp.down_proj\", \"style\": \"rowwise\"}]}";
  CHECK_OK(tpx_plan_from_json(mlp_json, sizeof mlp_json - 1, "test", &mlp_only,
                              &e_));
  per_layer_case(heads, 2, NULL, TPX_DIAG_ERROR,
                 "'num_attention_heads' is a per-layer attribute "
                 "(per_layer_config, layer 0: 64, global 4)");
  per_layer_case(heads, 2, NULL, TPX_DIAG_ERROR,
                 "AmbiguousGlobalPerLayerAttributeError");
  per_layer_case(heads, 2, mlp_only, TPX_DIAG_ERROR, "validate_tp_mesh");
  per_layer_case(kv, 2, mlp_only, TPX_DIAG_ERROR, "'num_key_value_heads'");
  per_layer_case(hd, 2, NULL, TPX_DIAG_ERROR, "'head_dim'");
  per_layer_case(hd, 2, mlp_only, 0, NULL); /* not head-sharded: not read */
  per_layer_case(heads, 1, NULL, 0, NULL);  /* tp 1: upstream reads nothing */
  per_layer_case(PER_LAYER_CFG("", "\"0\": {\"num_attention_heads\": 4.0}"), 2,
                 NULL, 0, NULL); /* equal to the global: dropped upstream */
  per_layer_case(PER_LAYER_CFG(", \"allow_global_per_layer_attribute_access\": "
                               "true",
                               "\"0\": {\"head_dim\": 512}"),
                 2, NULL, TPX_DIAG_INFO, "reads the global value");
  per_layer_case(
      "{\"architectures\": [\"FooForCausalLM\"], \"model_type\": "
      "\"foo\", \"text_config\": {\"num_attention_heads\": 4, "
      "\"per_layer_config\": {\"1\": {\"num_attention_heads\": 2}}}}",
      2, NULL, TPX_DIAG_ERROR,
      "(text_config.per_layer_config, layer 1: 2, global 4)");
  tpx_plan_destroy(mlp_only);
}
END_TEST

START_TEST(hf_style_unsupported_falls_to_default) {
  fixture f;
  setup_reg(&f, NULL);
  f.model = model_from_json(
      "{\"architectures\": [\"Phi3ForCausalLM\"], \"model_type\": \"phi3\", "
      "\"num_attention_heads\": 32, \"num_key_value_heads\": 32}");
  select_ok(&f, 2, 0, NULL, NULL);
  ck_assert_int_eq(tpx_selection_source(f.sel), TPX_PLAN_SOURCE_DEFAULT);
  ck_assert(has_diag(&f, "hf-style-unsupported", TPX_DIAG_WARNING,
                     "colwise_gather_output"));
  ck_assert(has_diag(&f, "default-plan-fallback", TPX_DIAG_WARNING, NULL));
  teardown(&f);
}
END_TEST

START_TEST(remote_code_without_plan) {
  fixture f;
  setup_reg(&f, NULL);
  f.model = model_from_json(
      "{\"architectures\": [\"CustomForCausalLM\"], \"model_type\": "
      "\"custom\", \"auto_map\": {\"AutoModelForCausalLM\": "
      "\"modeling_custom.CustomForCausalLM\"}}");
  select_ok(&f, 2, 0, NULL, NULL);
  ck_assert_int_eq(tpx_selection_source(f.sel), TPX_PLAN_SOURCE_DEFAULT);
  ck_assert(
      has_diag(&f, "remote-code-no-plan", TPX_DIAG_ERROR, "CustomForCausalLM"));
  /* the three remedies */
  ck_assert(has_diag(&f, "remote-code-no-plan", TPX_DIAG_ERROR, "plugin"));
  ck_assert(has_diag(&f, "remote-code-no-plan", TPX_DIAG_ERROR,
                     "base_model_tp_plan"));
  ck_assert(has_diag(&f, "remote-code-no-plan", TPX_DIAG_ERROR, "custom plan"));
  teardown(&f);
  /* At tp=1 it is fine. */
  setup_reg(&f, NULL);
  f.model = model_from_json(
      "{\"architectures\": [\"CustomForCausalLM\"], \"auto_map\": {}}");
  select_ok(&f, 1, 0, NULL, NULL);
  ck_assert_uint_eq(tpx_diag_count_at_least(f.diags, TPX_DIAG_WARNING), 0);
  teardown(&f);
}
END_TEST

START_TEST(default_base_plan) {
  fixture f;
  setup_reg(&f, NULL);
  f.model = model_from_json("{\"architectures\": [\"UnknownLM\"]}");
  select_ok(&f, 1, _i, NULL, NULL);
  ck_assert_int_eq(tpx_selection_source(f.sel), TPX_PLAN_SOURCE_DEFAULT);
  const tpx_plan *p = tpx_selection_plan(f.sel);
  ck_assert_uint_eq(tpx_plan_size(p), _i ? 14 : 11);
  tpx_plan_entry e;
  CHECK_OK(tpx_plan_get(p, 0, &e, &e_));
  ck_assert_str_eq(e.module, "model.embed_tokens");
  ck_assert_int_eq(e.style.kind, TPX_STYLE_VOCAB_PARALLEL_EMBEDDING);
  ck_assert_int_eq(e.optional, 0);
  /* Only the fused, variant-only keys are optional (default base plan order,
   * docs/SEMANTICS.md "Family plans":
   * embed, q, k, v, qkv, o, gate_up, up, gate, down, lm_head). */
  for (size_t i = 0; i < tpx_plan_size(p); i++) {
    CHECK_OK(tpx_plan_get(p, i, &e, &e_));
    int fused = strcmp(e.module, "model.layers.*.self_attn.qkv_proj") == 0 ||
                strcmp(e.module, "model.layers.*.mlp.gate_up_proj") == 0;
    ck_assert_msg(e.optional == fused, "entry %zu '%s': optional=%d", i,
                  e.module, e.optional);
    if (fused)
      ck_assert(i == 4 || i == 6);
  }
  CHECK_OK(tpx_plan_get(p, 10, &e, &e_));
  ck_assert_str_eq(e.module, "lm_head");
  ck_assert_int_eq(e.style.output_layouts.items[0].kind, TPX_REPLICATE);
  if (_i) {
    ck_assert_int_eq(e.style.input_layouts.items[0].kind, TPX_SHARD);
    ck_assert_int_eq(e.style.input_layouts.items[0].dim, 1);
    CHECK_OK(tpx_plan_get(p, 13, &e, &e_));
    ck_assert_str_eq(e.module, "model.layers.*.post_attention_layernorm");
    ck_assert_int_eq(e.style.kind, TPX_STYLE_SEQUENCE_PARALLEL);
    tpx_plan_entry o = entry(&f, "model.layers.*.self_attn.o_proj");
    ck_assert_int_eq(o.style.output_layouts.items[0].dim, 1);
    ck_assert_int_eq(o.style.use_local_output, 0);
  }
  ck_assert(has_trace(&f, "default: used the default base plan"));

  /* A model with separate projections (no qkv_proj / gate_up_proj): the
   * last-resort plan gives no unmatched-key error, only infos for the two
   * optional fused keys. */
  static const char *const mods[] = {"model.embed_tokens",
                                     "model.layers.0.self_attn.q_proj",
                                     "model.layers.0.self_attn.k_proj",
                                     "model.layers.0.self_attn.v_proj",
                                     "model.layers.0.self_attn.o_proj",
                                     "model.layers.0.mlp.gate_proj",
                                     "model.layers.0.mlp.up_proj",
                                     "model.layers.0.mlp.down_proj",
                                     "model.layers.0.input_layernorm",
                                     "model.layers.0.post_attention_layernorm",
                                     "model.norm",
                                     "lm_head"};
  for (size_t i = 0; i < sizeof mods / sizeof mods[0]; i++) {
    int64_t w[2] = {16, 16};
    tpx_module_kind k = strstr(mods[i], "norm")    ? TPX_MODULE_NORM
                        : strstr(mods[i], "embed") ? TPX_MODULE_EMBEDDING
                                                   : TPX_MODULE_LINEAR;
    CHECK_OK(tpx_model_add_module(f.model, mods[i], k, NULL, &e_));
    CHECK_OK(tpx_model_add_param(f.model, mods[i], "weight", w,
                                 k == TPX_MODULE_NORM ? 1 : 2, TPX_DTYPE_BF16,
                                 NULL, &e_));
  }
  tpx_diag_list *md = NULL;
  tpx_match *mt = NULL;
  CHECK_OK(tpx_diag_list_create(&md, &e_));
  CHECK_OK(tpx_match_plan(p, f.model, &mt, md, &e_));
  ck_assert_uint_eq(tpx_diag_count_at_least(md, TPX_DIAG_ERROR), 0);
  size_t infos = 0;
  for (size_t i = 0; i < tpx_diag_count(md); i++) {
    tpx_diag d;
    CHECK_OK(tpx_diag_get(md, i, &d, &e_));
    if (d.level == TPX_DIAG_INFO && strcmp(d.code, "unmatched-key") == 0)
      infos++;
  }
  ck_assert_uint_eq(infos, 2);
  tpx_match_destroy(mt);
  tpx_diag_list_destroy(md);
  teardown(&f);
}
END_TEST

/* Index of the first trace line holding `needle`, or -1. */
static long trace_at(const fixture *f, const char *needle) {
  for (size_t i = 0; i < tpx_selection_trace_size(f->sel); i++)
    if (strstr(tpx_selection_trace(f->sel, i), needle))
      return (long)i;
  return -1;
}

/* NeMo Automodel 0.7.0 runs validate_tp_mesh at tp > 1 before it chooses
 * the plan, for every plan, head-sharded or not
 * (tests/data/upstream/validate_tp_mesh): 6 heads at tp 4 are its error,
 * with its message, on every path: a custom MLP-only plan, a named plan,
 * Phi-3's optimized plan (its fused qkv_proj rowwise), `--plan hf` on
 * GPT-NeoX (attention.query_key_value, not self_attn.*), the default plan.
 * At tp 2 the same head counts pass. */
static void validate_case(const char *plugin, const char *json,
                          const tpx_plan *custom, const char *plan_name,
                          const char *step) {
  for (int64_t tp = 2; tp <= 4; tp += 2) {
    fixture f;
    setup_reg(&f, plugin);
    f.model = model_from_json(json);
    if (strstr(json, "GPTNeoX")) {
      const int64_t w[2] = {48, 48};
      CHECK_OK(tpx_model_add_module(f.model,
                                    "gpt_neox.layers.0.attention."
                                    "query_key_value",
                                    TPX_MODULE_LINEAR, NULL, &e_));
      CHECK_OK(tpx_model_add_param(f.model,
                                   "gpt_neox.layers.0.attention."
                                   "query_key_value",
                                   "weight", w, 2, TPX_DTYPE_BF16, NULL, &e_));
    }
    select_ok(&f, tp, 0, custom, plan_name);
    ck_assert_msg(has_trace(&f, step), "%s: no trace '%s'", json, step);
    ck_assert_int_eq(has_diag(&f, "heads-not-divisible", TPX_DIAG_ERROR,
                              "num_key_value_heads (6) must be divisible by "
                              "TP size (4)"),
                     tp == 4);
    ck_assert_int_eq(has_diag(&f, "heads-not-divisible", TPX_DIAG_ERROR, NULL),
                     tp == 4);
    long v = trace_at(&f, "validate_tp_mesh: "), p = trace_at(&f, step);
    ck_assert_msg(v >= 0 && v < p, "validate_tp_mesh after the plan (%ld, %ld)",
                  v, p);
    ck_assert(has_trace(&f, "before the plan is chosen, for every plan"));
    teardown(&f);
  }
}

START_TEST(validate_tp_mesh_every_plan) {
  const char *llama = "{\"architectures\": [\"LlamaForCausalLM\"], "
                      "\"model_type\": \"llama\", \"num_attention_heads\": 6, "
                      "\"num_key_value_heads\": 6}";
  static const char mlp_json[] =
      "{\"format\": \"tpx-plan/1\", \"entries\": [{\"module\": "
      "\"model.layers.*.mlp.down_proj\", \"style\": \"rowwise\"}]}";
  tpx_plan *mlp_only = NULL;
  CHECK_OK(tpx_plan_from_json(mlp_json, sizeof mlp_json - 1, "test", &mlp_only,
                              &e_));
  validate_case(NULL, llama, mlp_only, NULL, "custom: used the given plan");
  tpx_plan_destroy(mlp_only);
  validate_case(fixture_path("TPX_BUILD_DIR", "plugins/llama/libtpx_llama.so"),
                llama, NULL, "llama_nemotron_super_tp_plan",
                "named plan 'llama_nemotron_super_tp_plan': used");
  validate_case(fixture_path("TPX_BUILD_DIR", "plugins/phi/libtpx_phi.so"),
                "{\"architectures\": [\"Phi3ForCausalLM\"], \"model_type\": "
                "\"phi3\", \"num_attention_heads\": 6, "
                "\"num_key_value_heads\": 6}",
                NULL, NULL, "function phi3");
  validate_case(NULL,
                "{\"architectures\": [\"GPTNeoXForCausalLM\"], "
                "\"model_type\": \"gpt_neox\", \"num_attention_heads\": 6}",
                NULL, "hf", "hf: used");
  validate_case(NULL,
                "{\"architectures\": [\"UnknownLM\"], \"num_attention_heads\": "
                "6, \"num_key_value_heads\": 6}",
                NULL, NULL, "default");
}
END_TEST

/* The NemotronH strategy skips validate_tp_mesh (its own flow, which the
 * nemotron plugin declares); the Default strategy runs it for the same
 * head counts. */
START_TEST(nemotron_h_skips_validate_tp_mesh) {
  static const char *const archs[] = {"NemotronHForCausalLM",
                                      "LlamaForCausalLM"};
  for (int i = 0; i < 2; i++) {
    fixture f;
    char json[256];
    setup_reg(&f, fixture_path("TPX_BUILD_DIR",
                               "plugins/nemotron/libtpx_nemotron.so"));
    snprintf(json, sizeof json,
             "{\"architectures\": [\"%s\"], \"num_attention_heads\": 8, "
             "\"num_key_value_heads\": 2}",
             archs[i]);
    f.model = model_from_json(json);
    select_ok(&f, 4, 0, NULL, NULL);
    ck_assert_int_eq(has_diag(&f, "heads-not-divisible", TPX_DIAG_ERROR, NULL),
                     i == 1);
    ck_assert_int_eq(has_trace(&f, "validate_tp_mesh: skipped (the "
                                   "NemotronHForCausalLM strategy"),
                     i == 0);
    teardown(&f);
  }
}
END_TEST

/* The llama plugin, which declares the Nemotron-Flash lm_head traits. */
#define LLAMA_PLUGIN                                                           \
  fixture_path("TPX_BUILD_DIR", "plugins/llama/libtpx_llama.so")

/* Nemotron-Flash: lm_head kept only with a sharded output. The fix-up is
 * the llama plugin's declaration (lm_head_sharded_only traits), matched by
 * model_type, architecture or _name_or_path whatever plugin serves the
 * model; without that plugin nothing is removed. */
START_TEST(nemotron_flash_lm_head) {
  fixture f;
  setup_reg(&f, LLAMA_PLUGIN);
  f.model =
      model_from_json("{\"architectures\": [\"SomethingLM\"], \"model_type\": "
                      "\"nemotron_flash\"}");
  static const char *const docs[2] = {
      "{\"format\": \"tpx-plan/1\", \"entries\": [{\"module\": \"lm_head\", "
      "\"style\": \"colwise\"}, {\"module\": \"language_model.lm_head\", "
      "\"style\": \"colwise\", \"output_layouts\": [\"replicate\"]}]}",
      "{\"format\": \"tpx-plan/1\", \"entries\": [{\"module\": \"lm_head\", "
      "\"style\": \"colwise\", \"output_layouts\": [\"replicate\"]}]}"};
  tpx_plan *custom = NULL;
  CHECK_OK(tpx_plan_from_json(docs[_i], strlen(docs[_i]), "c", &custom, &e_));
  select_ok(&f, 1, 0, custom, NULL);
  const tpx_plan *p = tpx_selection_plan(f.sel);
  if (_i == 0) {
    ck_assert_int_ge(tpx_plan_find(p, "lm_head"), 0);
    ck_assert_int_lt(tpx_plan_find(p, "language_model.lm_head"), 0);
  } else {
    ck_assert_uint_eq(tpx_plan_size(p), 0);
  }
  ck_assert(has_trace(&f, "nemotron-flash"));
  tpx_plan_destroy(custom);
  teardown(&f);
  /* Detected by _name_or_path too; default plan's lm_head (replicated
   * output) goes. */
  setup_reg(&f, LLAMA_PLUGIN);
  f.model = model_from_json("{\"architectures\": [\"X\"], \"_name_or_path\": "
                            "\"nvidia/Nemotron-Flash-1B\"}");
  select_ok(&f, 1, 0, NULL, NULL);
  ck_assert_int_lt(tpx_plan_find(tpx_selection_plan(f.sel), "lm_head"), 0);
  teardown(&f);
  /* And by the architecture; a plain model keeps its lm_head. */
  setup_reg(&f, LLAMA_PLUGIN);
  f.model = model_from_json("{\"architectures\": [\"Y\", "
                            "\"NemotronFlashForCausalLM\"]}");
  select_ok(&f, 1, 0, NULL, NULL);
  ck_assert_int_lt(tpx_plan_find(tpx_selection_plan(f.sel), "lm_head"), 0);
  teardown(&f);
  setup_reg(&f, LLAMA_PLUGIN);
  /* (a head class: transformers' NemotronConfig plan, bundled, gets the
   * class plan's lm_head colwise_gather_output, so the default plan is
   * chosen, as upstream chooses it) */
  f.model = model_from_json("{\"architectures\": [\"NemotronForCausalLM\"], "
                            "\"model_type\": \"nemotron\"}");
  select_ok(&f, 1, 0, NULL, NULL);
  ck_assert_int_ge(tpx_plan_find(tpx_selection_plan(f.sel), "lm_head"), 0);
  teardown(&f);
}
END_TEST

/* Issue 26: `--plan hf` translates embedding_colwise (EmbeddingParallel
 * with shard_dim 1: the table's hidden dim sharded, the output gathered)
 * and drops local_params (the parameters are placed by their own entries);
 * the styles tpx cannot place exactly are refused naming key, style and
 * why. */
START_TEST(hf_transformers_more_styles) {
  fixture f;
  setup_reg(&f, NULL);
  f.model = model_from_json(
      "{\"architectures\": [\"FooModel\"], \"model_type\": \"foo\", "
      "\"base_model_tp_plan\": {\"layers.*.ple\": \"embedding_colwise\", "
      "\"layers.*.self_attn\": \"local_params\", \"layers.*.o\": "
      "\"rowwise\"}}");
  select_ok(&f, 2, 0, NULL, "hf");
  tpx_plan_entry ple = entry(&f, "model.layers.*.ple");
  ck_assert_int_eq(ple.style.kind, TPX_STYLE_COLWISE);
  ck_assert_int_eq(ple.style.output_layouts.items[0].kind, TPX_REPLICATE);
  ck_assert_int_lt(
      tpx_plan_find(tpx_selection_plan(f.sel), "model.layers.*.self_attn"), 0);
  ck_assert(has_diag(&f, "hf-style-translated", TPX_DIAG_INFO,
                     "'embedding_colwise'"));
  ck_assert(has_diag(&f, "hf-style-skipped", TPX_DIAG_INFO,
                     "'local_params' is dropped: transformers places no "
                     "parameter"));
  teardown(&f);

  static const struct {
    const char *style, *why;
  } refused[] = {
      {"packed_colwise", "_StridedShard(split_factor 2)"},
      {"packed_rowwise", "each rank holding its chunk of both halves"},
      {"moe_tp_experts", "fused 3-D expert parameters"},
      {"grouped_gemm", "fused 3-D expert parameters"},
      {"mla_kv_a_proj", "the rope slice"},
      {"unit_colwise", "2-D unit mesh"},
  };
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    char cfg[256], want[128];
    snprintf(cfg, sizeof cfg,
             "{\"architectures\": [\"FooModel\"], \"model_type\": "
             "\"foo\", \"base_model_tp_plan\": {\"layers.*.x\": \"%s\"}}",
             refused[i].style);
    setup_reg(&f, NULL);
    f.model = model_from_json(cfg);
    tpx_select_options o = TPX_SELECT_OPTIONS_INIT;
    o.tp_size = 2;
    o.plan_name = "hf";
    tpx_error e = {0};
    ck_assert_int_eq(tpx_select_plan(f.reg, f.model, &o, &f.sel, f.diags, &e),
                     TPX_UNSUPPORTED);
    snprintf(want, sizeof want,
             "plan key 'model.layers.*.x': transformers style '%s'",
             refused[i].style);
    ck_assert_msg(strstr(e.message, want), "%s", e.message);
    ck_assert_msg(strstr(e.message, refused[i].why), "%s", e.message);
    teardown(&f);
  }
}
END_TEST

/* The Diffusers model classes' own _tp_plan, bundled: a class with no
 * plugin and no config plan gets it in the HF step, keys from the root,
 * translated as upstream translates them. QwenImage's and QwenImage21's
 * are all style strings; Flux's and Flux2's hold packed styles, which
 * upstream cannot translate either (default plan then). */
START_TEST(diffusers_class_plans) {
  static const struct {
    const char *cls;
    int usable;
    size_t entries; /* with the optional model.embed_tokens */
    const char *key, *packed;
  } cases[] = {
      {"QwenImageTransformer2DModel", 1, 13, "transformer_blocks.*.attn.to_q",
       NULL},
      {"QwenImage21Transformer2DModel", 1, 8,
       "transformer_blocks.*.img_mlp.gate_layer", NULL},
      {"FluxTransformer2DModel", 0, 0, NULL, "packed_rowwise"},
      {"Flux2Transformer2DModel", 0, 0, NULL, "packed_colwise"},
  };
  char json[256];
  fixture f;
  setup_reg(&f, NULL);
  snprintf(json, sizeof json, "{\"_class_name\": \"%s\"}", cases[_i].cls);
  f.model = model_from_json(json);
  select_ok(&f, 2, 0, NULL, NULL);
  if (cases[_i].usable) {
    ck_assert_int_eq(tpx_selection_source(f.sel), TPX_PLAN_SOURCE_HF);
    ck_assert_uint_eq(tpx_plan_size(tpx_selection_plan(f.sel)),
                      cases[_i].entries);
    tpx_plan_entry e = entry(&f, cases[_i].key);
    ck_assert_int_eq(e.style.kind, TPX_STYLE_COLWISE);
    ck_assert(!e.optional);
    ck_assert(entry(&f, "model.embed_tokens").optional);
    ck_assert(has_trace(&f, "._tp_plan (the model class's own plan"));
  } else {
    ck_assert_int_eq(tpx_selection_source(f.sel), TPX_PLAN_SOURCE_DEFAULT);
    ck_assert(has_diag(&f, "hf-style-unsupported", TPX_DIAG_WARNING,
                       cases[_i].packed));
  }
  teardown(&f);
  /* A class with none: the HF step says which classes have one. */
  setup_reg(&f, NULL);
  f.model = model_from_json("{\"_class_name\": \"WanTransformer3DModel\"}");
  select_ok(&f, 1, 0, NULL, NULL);
  ck_assert_int_eq(tpx_selection_source(f.sel), TPX_PLAN_SOURCE_DEFAULT);
  ck_assert(has_trace(&f, "no bundled _tp_plan"));
  teardown(&f);
}
END_TEST

START_TEST(bad_arguments) {
  fixture f;
  setup_reg(&f, NULL);
  f.model = model_from_json("{}");
  tpx_select_options o = TPX_SELECT_OPTIONS_INIT;
  tpx_error e = {0};
  ck_assert_int_eq(tpx_select_plan(f.reg, NULL, &o, &f.sel, f.diags, &e),
                   TPX_INVALID_ARGUMENT);
  ck_assert_int_eq(tpx_select_plan(f.reg, f.model, &o, &f.sel, NULL, NULL),
                   TPX_INVALID_ARGUMENT);
  o.tp_size = 0;
  tpx_error e2 = {0};
  ck_assert_int_eq(tpx_select_plan(f.reg, f.model, &o, &f.sel, f.diags, &e2),
                   TPX_INVALID_ARGUMENT);
  ASSERT_CONTAINS(e2.message, "tp_size=0");
  o.tp_size = 1;
  o.sequence_parallel = 2;
  ck_assert_int_eq(tpx_select_plan(f.reg, f.model, &o, &f.sel, f.diags, NULL),
                   TPX_INVALID_ARGUMENT);
  o.sequence_parallel = 0;
  o.struct_size = 4;
  ck_assert_int_eq(tpx_select_plan(f.reg, f.model, &o, &f.sel, f.diags, NULL),
                   TPX_INVALID_ARGUMENT);
  ck_assert_ptr_null(f.sel);
  /* No registry at all: HF / default still work; no architecture. */
  o.struct_size = sizeof o;
  CHECK_OK(tpx_select_plan(NULL, f.model, &o, &f.sel, f.diags, &e_));
  ck_assert_int_eq(tpx_selection_source(f.sel), TPX_PLAN_SOURCE_DEFAULT);
  ck_assert(has_trace(&f, "plugin: skipped (the config has no architectures)"));
  /* NULL accessors */
  ck_assert_ptr_null(tpx_selection_plan(NULL));
  ck_assert_uint_eq(tpx_selection_trace_size(NULL), 0);
  ck_assert_ptr_null(tpx_selection_trace(f.sel, 9999));
  ck_assert_ptr_null(tpx_selection_fsdp_unit(f.sel, 0, NULL));
  tpx_selection_destroy(NULL);
  teardown(&f);
}
END_TEST

/* Issue 28 D13: a selection made for one tp applied on a mesh with another
 * is refused, naming both sizes and the fix (it used to shard 2 KV heads
 * over tp 4 without a word); the same tp, or tp 1 on a mesh without a tp
 * dim, is accepted. */
START_TEST(selection_tp_must_match_mesh) {
  fixture f;
  setup_reg(&f, NULL);
  f.model = model_from_json(
      "{\"architectures\": [\"Qwen2ForCausalLM\"], \"model_type\": "
      "\"qwen2\", \"num_attention_heads\": 14, \"num_key_value_heads\": 2, "
      "\"hidden_size\": 896}");
  select_ok(&f, 2, 0, NULL, NULL);
  ck_assert_int_eq(tpx_selection_tp_size(f.sel), 2);
  ck_assert_int_eq(tpx_selection_tp_size(NULL), 0);
  const char *dims[] = {"dp_shard", "tp"};
  const int64_t sizes[] = {1, 4}, sizes2[] = {2, 2};
  const char *dims1[] = {"dp_shard"};
  const int64_t sizes1[] = {4};
  tpx_mesh *m4 = NULL, *m2 = NULL, *m1 = NULL;
  CHECK_OK(tpx_mesh_create(dims, sizes, 2, &m4, &e_));
  CHECK_OK(tpx_mesh_create(dims, sizes2, 2, &m2, &e_));
  CHECK_OK(tpx_mesh_create(dims1, sizes1, 1, &m1, &e_));
  tpx_sharding_options so = TPX_SHARDING_OPTIONS_INIT;
  so.selection = f.sel;
  tpx_sharding *sh = NULL;
  tpx_error e = {0};
  ck_assert_int_eq(tpx_sharding_create(f.model, NULL, m4, &so, &sh, &e),
                   TPX_INVALID_ARGUMENT);
  ck_assert_ptr_null(sh);
  ASSERT_CONTAINS(e.message, "selection was made for tp 2");
  ASSERT_CONTAINS(e.message, "\"tp\" has size 4");
  ASSERT_CONTAINS(e.message, "tp_size = 4");
  tpx_error e1 = {0};
  ck_assert_int_eq(tpx_sharding_create(f.model, NULL, m1, &so, &sh, &e1),
                   TPX_INVALID_ARGUMENT);
  ASSERT_CONTAINS(e1.message, "no tp dim");
  CHECK_OK(tpx_sharding_create(f.model, NULL, m2, &so, &sh, &e_));
  tpx_sharding_destroy(sh);
  sh = NULL;
  /* tp 1 on a mesh without a tp dim */
  tpx_selection_destroy(f.sel);
  f.sel = NULL;
  select_ok(&f, 1, 0, NULL, NULL);
  so.selection = f.sel;
  CHECK_OK(tpx_sharding_create(f.model, NULL, m1, &so, &sh, &e_));
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(m4);
  tpx_mesh_destroy(m2);
  tpx_mesh_destroy(m1);
  teardown(&f);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("plugin-select");
  TCase *tc = tcase_create("select");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, plugin_plan_with_capabilities);
  tcase_add_test(tc, strategy_bad_key);
  tcase_add_test(tc, strategy_bad_mp);
  tcase_add_test(tc, custom_plan_wins);
  tcase_add_test(tc, named_plan);
  tcase_add_test(tc, qualified_name_matches);
  tcase_add_test(tc, plugin_refuses_falls_back_to_hf);
  tcase_add_test(tc, plugin_fails_falls_back);
  tcase_add_loop_test(tc, hf_bundled_tables, 0,
                      sizeof hf_cases / sizeof hf_cases[0]);
  tcase_add_test(tc, hf_vlm_prefix);
  tcase_add_test(tc, hf_config_own_plan);
  tcase_add_test(tc, hf_with_sp_is_an_error);
  tcase_add_test(tc, hf_style_unsupported_falls_to_default);
  tcase_add_test(tc, hf_transformers_5_falls_back);
  tcase_add_test(tc, upstream_per_layer_config);
  tcase_add_test(tc, hf_plan_base_model_prefix);
  tcase_add_test(tc, remote_code_without_plan);
  tcase_add_loop_test(tc, default_base_plan, 0, 2);
  tcase_add_loop_test(tc, nemotron_flash_lm_head, 0, 2);
  tcase_add_loop_test(tc, diffusers_class_plans, 0, 4);
  tcase_add_test(tc, hf_transformers_more_styles);
  tcase_add_test(tc, bad_arguments);
  tcase_add_test(tc, selection_tp_must_match_mesh);
  tcase_add_test(tc, nemotron_h_skips_validate_tp_mesh);
  tcase_add_test(tc, validate_tp_mesh_every_plan);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(suite()); }
