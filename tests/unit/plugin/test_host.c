/* test_host.c — the host function table as a plugin sees it, through the
 * probe plugin (good.c built with -DGOOD_PROBE): config reads of every type
 * and their status codes, model queries, plan building with valid and
 * invalid entries, functions used outside their entry point, and the skeleton
 * a plugin builds (every parameter, dtype defaulting, ties). */
#include <stdint.h>

#include "plugin_test.h"
#include "tpx/plan.h"
#include "tpx/plugin.h"

#define PROBE_CONFIG                                                           \
  "{\"architectures\": [\"ProbeForCausalLM\"], \"model_type\": \"tpxtest\", "  \
  "\"num_attention_heads\": 32, \"two_float\": 2.0, \"rms_norm_eps\": "        \
  "1e-05, \"hidden_size\": 64, \"tie_word_embeddings\": true, "                \
  "\"null_value\": null, \"text_config\": {\"num_attention_heads\": 12, "      \
  "\"second\": 1, \"third\": [1]}, \"block_configs\": [{\"n_heads\": 3}, "     \
  "{\"n_heads\": 5}]}"

static char probe_result[4][2048];

/* Run the probe once; the plugin reports "name=code;" pairs as its refusal
 * message. */
static const char *probe(int part) {
  tpx_registry *r = NULL;
  CHECK_OK(tpx_registry_create(&r, &e_));
  CHECK_OK(tpx_registry_load_file(r, GOOD("libtpxtest_probe.so"), &e_));
  tpx_model *m = model_from_json(PROBE_CONFIG);
  CHECK_OK(tpx_model_add_module(m, "model.embed_tokens", TPX_MODULE_EMBEDDING,
                                NULL, &e_));
  CHECK_OK(tpx_model_add_module(m, "model.layers.0", TPX_MODULE_CONTAINER, NULL,
                                &e_));
  CHECK_OK(tpx_model_add_module(m, "model.layers.1", TPX_MODULE_CONTAINER, NULL,
                                &e_));
  CHECK_OK(tpx_model_add_module(m, "model.layers.2", TPX_MODULE_CONTAINER, NULL,
                                &e_));
  tpx_plan *p = NULL;
  tpx_error e = {0};
  tpx_status s =
      tpx_registry_get_plan(r, 0, m, "ProbeForCausalLM", NULL, 0, part, &p, &e);
  ck_assert_int_eq(s, TPX_PLUGIN);
  const char *at = strstr(e.message, "refused get_plan: ");
  ck_assert_ptr_nonnull(at);
  snprintf(probe_result[part - 1], sizeof probe_result[0], ";%s",
           at + strlen("refused get_plan: "));
  tpx_model_destroy(m);
  tpx_registry_destroy(r);
  return probe_result[part - 1];
}

static const struct {
  const char *name;
  int want;
} expect[] = {
    {"int", TPX_PLUGIN_OK},
    {"int_value", 32},
    {"int_from_float", TPX_PLUGIN_OK},
    {"int_from_frac", TPX_PLUGIN_TYPE_MISMATCH},
    {"float", TPX_PLUGIN_OK},
    {"float_x1e6", 10},
    {"float_from_int", TPX_PLUGIN_OK},
    {"bool", TPX_PLUGIN_OK},
    {"bool_value", 1},
    {"bool_mismatch", TPX_PLUGIN_TYPE_MISMATCH},
    {"string", TPX_PLUGIN_OK},
    {"string_is_test", 1},
    {"missing", TPX_PLUGIN_NOT_FOUND},
    {"null", TPX_PLUGIN_NOT_FOUND},
    {"nested", TPX_PLUGIN_OK},
    {"nested_value", 12},
    {"array_item", TPX_PLUGIN_OK},
    {"array_item_value", 5},
    {"length_array", TPX_PLUGIN_OK},
    {"length_array_value", 2},
    {"length_object", TPX_PLUGIN_OK},
    {"length_object_value", 3},
    {"key", TPX_PLUGIN_OK},
    {"key_is_second", 1},
    {"key_out_of_range", TPX_PLUGIN_NOT_FOUND},
    {"has", 1},
    {"has_not", 0},
    {"has_module", 1},
    {"children", 3},
    {"children_missing", -1},
    {"null_ctx", TPX_PLUGIN_INVALID},
    {"skeleton_in_get_plan", TPX_PLUGIN_INVALID},
    {"bad_style", TPX_PLUGIN_INVALID},
    {"bad_layout", TPX_PLUGIN_INVALID},
    {"bad_key", TPX_PLUGIN_INVALID},
    {"bad_local", TPX_PLUGIN_INVALID},
    {"sp_with_layouts", TPX_PLUGIN_INVALID},
    {"prep_in", TPX_PLUGIN_OK},
    {"none_in_colwise", TPX_PLUGIN_INVALID},
    {"good_add", TPX_PLUGIN_OK},
    {"json_add", TPX_PLUGIN_OK},
    {"json_bad", TPX_PLUGIN_INVALID},
    {"remove", TPX_PLUGIN_OK},
    {"remove_missing", TPX_PLUGIN_NOT_FOUND},
    {"function", TPX_PLUGIN_OK},
    {"diag_bad_code", TPX_PLUGIN_INVALID},
    {"fp32_in_get_plan", TPX_PLUGIN_INVALID},
    {"strategy_in_get_plan", TPX_PLUGIN_INVALID},
    {"has_add_source", 1},
    {"source_in_get_plan", TPX_PLUGIN_INVALID},
};

START_TEST(host_function_status) {
  char needle[128];
  snprintf(needle, sizeof needle, ";%s=%d;", expect[_i].name, expect[_i].want);
  int found = 0;
  for (int part = 1; part <= 4; part++)
    found |= strstr(probe(part), needle) != NULL;
  ck_assert_msg(found,
                "probe results \"%s\" / \"%s\" / \"%s\" / \"%s\" lack \"%s\"",
                probe_result[0], probe_result[1], probe_result[2],
                probe_result[3], needle);
}
END_TEST

START_TEST(skeleton_built) {
  tpx_registry *r = NULL;
  CHECK_OK(tpx_registry_create(&r, &e_));
  CHECK_OK(tpx_registry_load_file(r, GOOD("libtpxtest_good.so"), &e_));
  tpx_model *m = model_from_json(TEST_CONFIG(""));
  CHECK_OK(tpx_registry_build_skeleton(r, m, &e_));
  /* root, model, embed, layers, 2 x (layer, self_attn, mlp, 6 linears,
   * norm), norm, lm_head */
  ck_assert_uint_eq(tpx_model_num_modules(m), 1 + 1 + 1 + 1 + 2 * 10 + 2);
  int64_t q = tpx_model_find_param(m, "model.layers.1.self_attn.k_proj.weight");
  ck_assert_int_ge(q, 0);
  tpx_param_info pi;
  CHECK_OK(tpx_model_param(m, q, &pi, &e_));
  ck_assert_int_eq(pi.ndim, 2);
  ck_assert_int_eq(pi.shape[0], 32); /* 4 kv heads x head_dim 8 */
  ck_assert_int_eq(pi.shape[1], 64);
  ck_assert_int_eq(pi.dtype, TPX_DTYPE_BF16); /* NULL dtype: the config's */
  CHECK_OK(tpx_model_param(m, tpx_model_find_param(m, "model.norm.weight"), &pi,
                           &e_));
  ck_assert_int_eq(pi.dtype, TPX_DTYPE_F32);
  int64_t head = tpx_model_find_param(m, "lm_head.weight");
  ck_assert_int_ge(head, 0);
  CHECK_OK(tpx_model_param(m, head, &pi, &e_));
  ck_assert_int_eq(pi.tied_to,
                   tpx_model_find_param(m, "model.embed_tokens.weight"));
  ck_assert_int_eq(
      tpx_model_module_kind(m, tpx_model_find_module(m, "model.embed_tokens")),
      TPX_MODULE_EMBEDDING);
  tpx_model_destroy(m);
  tpx_registry_destroy(r);
}
END_TEST

START_TEST(skeleton_refusal_leaves_model_untouched) {
  tpx_registry *r = NULL;
  CHECK_OK(tpx_registry_create(&r, &e_));
  CHECK_OK(tpx_registry_load_file(r, GOOD("libtpxtest_good.so"), &e_));
  tpx_model *m = model_from_json(
      "{\"architectures\": [\"TestForCausalLM\"], \"hidden_size\": 64}");
  tpx_error e = {0};
  ck_assert_int_eq(tpx_registry_build_skeleton(r, m, &e), TPX_PLUGIN);
  ASSERT_CONTAINS(e.message, "refused tpx_plugin_get_skeleton");
  ASSERT_CONTAINS(e.message, "config lacks hidden_size");
  ck_assert_uint_eq(tpx_model_num_modules(m), 1);
  tpx_model_destroy(m);
  /* No plugin for the architecture; no architecture at all. */
  tpx_model *other = model_from_json("{\"architectures\": [\"NopeLM\"]}");
  tpx_error e2 = {0};
  ck_assert_int_eq(tpx_registry_build_skeleton(r, other, &e2), TPX_NOT_FOUND);
  ASSERT_CONTAINS(e2.message, "no plugin serves architecture 'NopeLM'");
  tpx_model_destroy(other);
  tpx_model *none = model_from_json("{}");
  tpx_error e3 = {0};
  ck_assert_int_eq(tpx_registry_build_skeleton(r, none, &e3), TPX_NOT_FOUND);
  ASSERT_CONTAINS(e3.message, "no architecture");
  tpx_model_destroy(none);
  tpx_registry_destroy(r);
}
END_TEST

START_TEST(plan_entry_fields) {
  tpx_registry *r = NULL;
  CHECK_OK(tpx_registry_create(&r, &e_));
  CHECK_OK(tpx_registry_load_file(r, GOOD("libtpxtest_good.so"), &e_));
  tpx_model *m = model_from_json(TEST_CONFIG(""));
  tpx_plan *p = NULL;
  CHECK_OK(tpx_registry_get_plan(r, 0, m, NULL, NULL, 1, 2, &p, &e_));
  tpx_plan_entry en;
  /* plan_add_json entry */
  CHECK_OK(tpx_plan_get(p, (size_t)tpx_plan_find(p, "model.norm"), &en, &e_));
  ck_assert_int_eq(en.style.kind, TPX_STYLE_SEQUENCE_PARALLEL);
  ck_assert_int_eq(en.style.sequence_dim, 1);
  /* defaults filled in */
  CHECK_OK(tpx_plan_get(
      p, (size_t)tpx_plan_find(p, "model.layers.*.self_attn.q_proj"), &en,
      &e_));
  ck_assert_int_eq(en.style.kind, TPX_STYLE_COLWISE);
  ck_assert_int_eq(en.style.use_local_output, 1);
  ck_assert_int_eq(en.style.output_layouts.items[0].kind, TPX_SHARD);
  ck_assert_int_eq(en.style.output_layouts.items[0].dim, -1);
  /* explicit layouts */
  CHECK_OK(tpx_plan_get(p, (size_t)tpx_plan_find(p, "model.embed_tokens"), &en,
                        &e_));
  ck_assert_int_eq(en.style.kind, TPX_STYLE_VOCAB_PARALLEL_EMBEDDING);
  ck_assert_int_eq(en.style.input_layouts.items[0].kind, TPX_REPLICATE);
  ck_assert_int_eq(en.style.output_layouts.items[0].dim, 1);
  ck_assert_int_eq(en.style.use_local_output, 0);
  /* The order is the plugin's insertion order. */
  CHECK_OK(tpx_plan_get(p, 0, &en, &e_));
  ck_assert_str_eq(en.module, "model.embed_tokens");
  tpx_plan_destroy(p);
  /* Named plan. */
  CHECK_OK(tpx_registry_get_plan(r, 0, m, NULL, "tpxtest_named_plan", 0, 2, &p,
                                 &e_));
  CHECK_OK(tpx_plan_get(p, (size_t)tpx_plan_find(p, "lm_head"), &en, &e_));
  ck_assert_int_eq(en.style.output_layouts.items[0].kind, TPX_REPLICATE);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
  tpx_registry_destroy(r);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("plugin-host");
  TCase *tc = tcase_create("host");
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, host_function_status, 0,
                      sizeof expect / sizeof expect[0]);
  tcase_add_test(tc, skeleton_built);
  tcase_add_test(tc, skeleton_refusal_leaves_model_untouched);
  tcase_add_test(tc, plan_entry_fields);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(suite()); }
