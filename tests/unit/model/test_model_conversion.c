/* tests/unit/model/test_model_conversion.c — the rule engine over
 * transformers' conversion table (core/src/model/conversion.c): renames,
 * converters (expert index, source, target), buffers, lookahead, and the
 * embedded table's version. */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "model/conversion.h"

static tpx__conv *open_type(const char *type) {
  tpx__conv *c = NULL;
  tpx_error err = {0};
  ck_assert_int_eq(tpx__conv_open(type, NULL, &c, &err), TPX_OK);
  ck_assert_msg(c != NULL, "no rules for %s", type);
  return c;
}

START_TEST(test_version_and_unknown_type) {
  ck_assert_str_eq(tpx__conv_version, "5.25.0");
  tpx__conv *c = (tpx__conv *)1;
  ck_assert_int_eq(tpx__conv_open("no_such_type", NULL, &c, NULL), TPX_OK);
  ck_assert_ptr_null(c);
  ck_assert_int_eq(tpx__conv_open(NULL, NULL, &c, NULL), TPX_OK);
  ck_assert_ptr_null(c);
}
END_TEST

START_TEST(test_rename_chain) {
  tpx__conv *c = open_type("exaone");
  char buf[256];
  ck_assert_int_eq(
      tpx__conv_rename(c, "transformer.h.12.attn.attention.out_proj.weight",
                       buf, sizeof buf),
      1);
  /* two rules in a row: .attn.attention. -> .self_attn., then out_proj */
  ck_assert_str_eq(buf, "model.layers.12.self_attn.o_proj.weight");
  ck_assert_int_eq(tpx__conv_rename(c, "lm_head.weight", buf, sizeof buf), 0);
  ck_assert_str_eq(buf, "lm_head.weight");
  ck_assert_int_eq(tpx__conv_rename(c, "transformer.h.0.ln_1.weight", buf, 8),
                   -1);
  tpx__conv_free(c);
  c = open_type("gpt_neox");
  ck_assert_int_eq(tpx__conv_rename(c, "embed_out.weight", buf, sizeof buf), 1);
  ck_assert_str_eq(buf, "lm_head.weight");
  /* anchored: not in the middle of a name */
  ck_assert_int_eq(tpx__conv_rename(c, "x.embed_out.weight", buf, sizeof buf),
                   0);
  tpx__conv_free(c);
}
END_TEST

/* minicpm5_moe's q_proj -> q_gate_proj: the lookahead keeps q_proj_x. */
START_TEST(test_rename_lookahead) {
  tpx__conv *c = open_type("minicpm5_moe");
  char buf[256];
  ck_assert_int_eq(tpx__conv_rename(c, "model.layers.0.self_attn.q_proj.weight",
                                    buf, sizeof buf),
                   1);
  ck_assert_str_eq(buf, "model.layers.0.self_attn.q_gate_proj.weight");
  ck_assert_int_eq(tpx__conv_rename(c, "model.layers.0.self_attn.q_projx.w",
                                    buf, sizeof buf),
                   0);
  tpx__conv_free(c);
}
END_TEST

START_TEST(test_convert_experts) {
  tpx__conv *c = open_type("qwen2_moe");
  char buf[256];
  int rule = -1, source = -1;
  int64_t index = -2;
  ck_assert_int_eq(
      tpx__conv_convert(c, "model.layers.3.mlp.experts.17.up_proj.weight", 0,
                        buf, sizeof buf, &rule, &source, &index),
      1);
  ck_assert_str_eq(buf, "model.layers.3.mlp.experts.gate_up_proj");
  ck_assert_int_eq(source, 1); /* up is the rule's second source */
  ck_assert_int_eq(index, 17);
  int dim = -1;
  ck_assert_int_eq(tpx__conv_op(c, rule, 0, &dim), TPX__CONV_MERGE);
  ck_assert_int_eq(dim, 0);
  ck_assert_int_eq(tpx__conv_op(c, rule, 1, &dim), TPX__CONV_CONCAT);
  ck_assert_int_eq(dim, 1);
  ck_assert_int_eq(tpx__conv_op(c, rule, 2, &dim), 0);
  ck_assert_uint_eq(tpx__conv_num_sources(c, rule), 2);
  ck_assert_int_eq(
      tpx__conv_convert(c, "model.layers.3.mlp.experts.4.down_proj.weight", 0,
                        buf, sizeof buf, &rule, &source, &index),
      1);
  ck_assert_str_eq(buf, "model.layers.3.mlp.experts.down_proj");
  ck_assert_int_eq(index, 4);
  ck_assert_int_eq(tpx__conv_convert(c, "model.layers.3.mlp.gate.weight", 0,
                                     buf, sizeof buf, &rule, &source, &index),
                   0);
  tpx__conv_free(c);
}
END_TEST

/* hrm_text: Chunk splits one tensor into several targets. */
START_TEST(test_convert_chunk_targets) {
  tpx__conv *c = open_type("hrm_text");
  char buf[256];
  int rule, source;
  int64_t index;
  ck_assert_int_eq(
      tpx__conv_convert(c, "model.layers.0.mlp.gate_up_proj.weight", 1, buf,
                        sizeof buf, &rule, &source, &index),
      1);
  ck_assert_str_eq(buf, "model.layers.0.mlp.up_proj.weight");
  ck_assert_uint_eq(tpx__conv_num_targets(c, rule), 2);
  int dim;
  ck_assert_int_eq(tpx__conv_op(c, rule, 0, &dim), TPX__CONV_CHUNK);
  tpx__conv_free(c);
}
END_TEST

/* Split: each target's size from the config (a product of attributes, or
 * the rest of the source); -1 where the config lacks one. */
START_TEST(test_split_sizes) {
  const char *json =
      "{\"r\":[{\"c\":1,\"s\":[[\"in_proj\",\"w\"]],\"g\":[0],"
      "\"t\":[\"in_proj_qkv\",\"in_proj_z\",\"in_proj_b\"],"
      "\"ops\":[[\"Split\",0]],"
      "\"z\":[\"rest\",[[1,\"nv\",\"dv\"]],[[2,\"nv\"],[1,\"nk\"]]]}],"
      "\"b\":[],\"x\":0}";
  tpx__conv *c = NULL;
  ck_assert_int_eq(tpx__conv_open("t", json, &c, NULL), TPX_OK);
  char buf[64];
  int rule, source, dim;
  int64_t index;
  ck_assert_int_eq(tpx__conv_convert(c, "l.0.in_proj.weight", 2, buf,
                                     sizeof buf, &rule, &source, &index),
                   1);
  ck_assert_str_eq(buf, "l.0.in_proj_b.weight");
  ck_assert_int_eq(tpx__conv_op(c, rule, 0, &dim), TPX__CONV_SPLIT);
  json_t *cfg = json_loads("{\"nv\": 4, \"dv\": 16, \"nk\": 3.0}", 0, NULL);
  ck_assert_int_eq(tpx__conv_split_size(c, rule, 0, cfg), -2);
  ck_assert_int_eq(tpx__conv_split_size(c, rule, 1, cfg), 64);
  ck_assert_int_eq(tpx__conv_split_size(c, rule, 2, cfg), 11);
  ck_assert_int_eq(tpx__conv_split_size(c, rule, 3, cfg), -1);
  json_object_del(cfg, "dv");
  ck_assert_int_eq(tpx__conv_split_size(c, rule, 1, cfg), -1);
  json_decref(cfg);
  tpx__conv_free(c);
}
END_TEST

START_TEST(test_buffers) {
  tpx__conv *c = open_type("deepseek_v3");
  ck_assert(tpx__conv_is_buffer(
      c, "model.layers.61.mlp.gate.e_score_correction_bias"));
  ck_assert(!tpx__conv_is_buffer(c, "model.layers.61.mlp.gate.weight"));
  ck_assert(!tpx__conv_is_buffer(
      c, "model.layers.61.mlp.gate.e_score_correction_bias.x"));
  tpx__conv_free(c);
}
END_TEST

/* The engine also runs on a caller's table (the layout the generator
 * writes). */
START_TEST(test_own_table) {
  const char *json =
      "{\"r\":[{\"c\":0,\"s\":[[\"(q|k)_norm\",\"w\"]],\"g\":[0],"
      "\"t\":[\"\\\\1_layernorm\"],\"ops\":[]}],\"b\":[\"a.*.beta\"],\"x\":2}";
  tpx__conv *c = NULL;
  ck_assert_int_eq(tpx__conv_open("t", json, &c, NULL), TPX_OK);
  char buf[64];
  ck_assert_int_eq(tpx__conv_rename(c, "l.0.k_norm.weight", buf, sizeof buf),
                   1);
  ck_assert_str_eq(buf, "l.0.k_layernorm.weight");
  ck_assert_int_eq(tpx__conv_rename(c, "l.0.k_norms", buf, sizeof buf), 0);
  ck_assert(tpx__conv_is_buffer(c, "a.3.beta"));
  ck_assert_uint_eq(tpx__conv_num_skipped(c), 2);
  tpx__conv_free(c);
  tpx_error err = {0};
  ck_assert_int_eq(
      tpx__conv_open("t", "{\"r\":[{\"c\":0,\"s\":[[\"(\",\"\"]]}]}", &c, &err),
      TPX_INTERNAL);
  ck_assert_ptr_null(c);
  ck_assert_ptr_nonnull(strstr(err.message, "'t'"));
}
END_TEST

static Suite *conv_suite(void) {
  Suite *s = suite_create("model_conversion");
  TCase *tc = tcase_create("conversion");
  tcase_add_test(tc, test_version_and_unknown_type);
  tcase_add_test(tc, test_rename_chain);
  tcase_add_test(tc, test_rename_lookahead);
  tcase_add_test(tc, test_convert_experts);
  tcase_add_test(tc, test_convert_chunk_targets);
  tcase_add_test(tc, test_split_sizes);
  tcase_add_test(tc, test_buffers);
  tcase_add_test(tc, test_own_table);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(conv_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? 0 : 1;
}
