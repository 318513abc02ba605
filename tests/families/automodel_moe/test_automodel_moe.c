/* test_automodel_moe.c — the tpx_automodel_moe plugin (NeMo Automodel
 * 0.7.0's own MoE classes): every tiny config recorded from Automodel
 * (tests/data/upstream_moe/<family>/) gives exactly the parameters
 * Automodel's class has (names, shapes, dtypes, tied); Qwen3-30B-A3B's
 * published total under Automodel's names; which layers are MoE from each
 * family's keys; the traits (moe_custom, expert_param, name_alias) and the
 * plan refusal; config errors named; a checkpoint's router
 * e_score_correction_bias recorded as a buffer (trait buffer), under
 * Automodel's name whatever the family's checkpoint calls it. */
#include <check.h>
#include <dlfcn.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fam_util.h"
#include "tpx/plugin.h"
#include "tpx/registry.h"

#define FAM "automodel_moe"

static const char *const k_families[] = {
    "deepseek_v3",   "deepseek_v32", "ernie4_5_moe", "glm4_moe",
    "glm4_moe_lite", "glm_moe_dsa",  "gpt_oss",      "minimax_m2",
    "qwen3_moe",     "qwen3_next",   "ling_v2",      "qwen3_omni_moe",
    "kimi_k25_vl"};

START_TEST(test_abi) { fam_check_abi(FAM); }
END_TEST

static const char *dtype_short(tpx_dtype d) {
  switch (d) {
  case TPX_DTYPE_BF16: return "bf16";
  case TPX_DTYPE_F32: return "f32";
  case TPX_DTYPE_F16: return "f16";
  default: return "?";
  }
}

/* The skeleton of a recorded tiny config against golden.json's dp4_ep1
 * parameters: same names, shapes and dtypes, nothing more, same ties. */
START_TEST(test_tiny_goldens) {
  const char *fam = k_families[_i];
  const char *src = getenv("TPX_SOURCE_DIR");
  char path[1024];
  json_error_t je;
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = NULL;
  tpx_error err = {0};
  json_t *g, *params, *p, *tied;
  size_t k, n = 0;
  ck_assert_ptr_nonnull(src);
  snprintf(path, sizeof path, "%s/tests/data/upstream_moe/%s/config.json", src,
           fam);
  ck_assert_int_eq(tpx_model_load_config(path, &m, &err), TPX_OK);
  ck_assert_msg(tpx_registry_build_skeleton(reg, m, &err) == TPX_OK, "%s: %s",
                fam, err.message);
  snprintf(path, sizeof path, "%s/tests/data/upstream_moe/%s/golden.json", src,
           fam);
  g = json_load_file(path, 0, &je);
  ck_assert_msg(g != NULL, "%s: %s", path, je.text);
  params = json_object_get(
      json_object_get(json_object_get(g, "cases"), "dp4_ep1"), "parameters");
  tied = json_object_get(
      json_object_get(json_object_get(g, "cases"), "dp4_ep1"), "tied");
  json_array_foreach(params, k, p) {
    const char *name = json_string_value(json_object_get(p, "name"));
    json_t *shape = json_object_get(p, "shape");
    tpx_param_info info;
    int64_t i = tpx_model_find_param(m, name);
    size_t d;
    ck_assert_msg(i >= 0, "%s: no parameter %s", fam, name);
    ck_assert_int_eq(tpx_model_param(m, i, &info, &err), TPX_OK);
    ck_assert_int_eq(info.ndim, (int)json_array_size(shape));
    for (d = 0; d < json_array_size(shape); d++)
      ck_assert_msg(info.shape[d] ==
                        json_integer_value(json_array_get(shape, d)),
                    "%s: %s dim %zu", fam, name, d);
    ck_assert_str_eq(dtype_short(info.dtype),
                     json_string_value(json_object_get(p, "dtype")));
    n++;
  }
  /* Nothing beyond upstream's parameters but its tied aliases. */
  ck_assert_int_eq(fam_count_untied(m), (int64_t)n);
  {
    const char *alias;
    json_t *target;
    json_object_foreach(tied, alias, target) {
      fam_assert_tied(m, alias, json_string_value(target));
    }
  }
  json_decref(g);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* Qwen3-30B-A3B under Automodel's class: the published total (the same
 * elements as transformers' class, fused the other way round). */
START_TEST(test_qwen3_30b) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *qw = fam_model(reg, "moe", "Qwen3-30B-A3B.config.json", 1);
  ck_assert_int_eq(tpx_model_total_params(qw), 30532122624LL);
  ck_assert_int_eq(tpx_model_total_bytes(qw), 2 * 30532122624LL);
  fam_assert_param(qw, "model.layers.47.mlp.gate.weight", 128, 2048);
  fam_assert_param(qw, "model.layers.0.self_attn.q_norm.weight", 128, -1);
  fam_assert_no_param(qw, "model.layers.5.mlp.experts.gate_up_proj");
  {
    tpx_param_info p;
    tpx_error err = {0};
    int64_t i = tpx_model_find_param(
        qw, "model.layers.5.mlp.experts.gate_and_up_projs");
    ck_assert_int_ge(i, 0);
    ck_assert_int_eq(tpx_model_param(qw, i, &p, &err), TPX_OK);
    ck_assert_int_eq(p.shape[0], 128);
    ck_assert_int_eq(p.shape[1], 2048);
    ck_assert_int_eq(p.shape[2], 1536);
    i = tpx_model_find_param(qw, "model.layers.5.mlp.experts.down_projs");
    ck_assert_int_eq(tpx_model_param(qw, i, &p, &err), TPX_OK);
    ck_assert_int_eq(p.shape[1], 768);
    ck_assert_int_eq(p.shape[2], 2048);
  }
  tpx_model_destroy(qw);
  tpx_registry_destroy(reg);
}
END_TEST

/* Which layers are MoE: Qwen3's mlp_only_layers (and the old num_experts
 * key), transformers 5.25's num_local_experts, ERNIE's start / end /
 * interval, GLM-Lite's mlp_layer_types. */
START_TEST(test_sparse_layers) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_error err = {0};
  tpx_model *tq = fam_model(reg, "moe", "qwen3moe-tiny.config.json", 1);
  tpx_model *m;
  fam_assert_param(tq, "model.layers.2.mlp.gate_proj.weight", 96, 64);
  fam_assert_no_param(tq, "model.layers.2.mlp.gate.weight");
  fam_assert_param(tq, "model.layers.3.mlp.gate.weight", 6, 64);
  fam_assert_param(tq, "lm_head.weight", 100, 64);
  tpx_model_destroy(tq);
  m = fam_model_json(
      "{\"architectures\": [\"Qwen3MoeForCausalLM\"], \"hidden_size\": 64, "
      "\"intermediate_size\": 128, \"moe_intermediate_size\": 32, "
      "\"num_local_experts\": 4, \"num_hidden_layers\": 2, "
      "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
      "\"vocab_size\": 512, \"decoder_sparse_step\": 2}");
  ck_assert_msg(tpx_registry_build_skeleton(reg, m, &err) == TPX_OK, "%s",
                err.message);
  fam_assert_param(m, "model.layers.0.mlp.up_proj.weight", 128, 64);
  fam_assert_param(m, "model.layers.1.mlp.gate.weight", 4, 64);
  tpx_model_destroy(m);
  m = fam_model_json(
      "{\"architectures\": [\"Ernie4_5_MoeForCausalLM\"], \"hidden_size\": "
      "64, \"intermediate_size\": 128, \"moe_intermediate_size\": 32, "
      "\"moe_num_experts\": 4, \"moe_num_shared_experts\": 0, "
      "\"num_hidden_layers\": 4, \"num_attention_heads\": 4, "
      "\"vocab_size\": 512, \"moe_layer_start_index\": 1, "
      "\"moe_layer_end_index\": -1, \"moe_layer_interval\": 2, "
      "\"use_bias\": true}");
  ck_assert_msg(tpx_registry_build_skeleton(reg, m, &err) == TPX_OK, "%s",
                err.message);
  fam_assert_param(m, "model.layers.0.mlp.down_proj.bias", 64, -1);
  fam_assert_param(m, "model.layers.1.mlp.experts.down_proj_bias", 4, 64);
  fam_assert_param(m, "model.layers.2.mlp.gate_proj.weight", 128, 64);
  fam_assert_param(m, "model.layers.3.mlp.gate.weight", 4, 64);
  fam_assert_no_param(m, "model.layers.3.mlp.shared_experts.up_proj.weight");
  fam_assert_tied(m, "lm_head.weight", "model.embed_tokens.weight");
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

START_TEST(test_bad_configs) {
  static const char *const bad[][2] = {
      {"{\"architectures\": [\"Qwen3MoeForCausalLM\"], \"hidden_size\": 8, "
       "\"num_hidden_layers\": 1, \"num_attention_heads\": 2, "
       "\"intermediate_size\": 8, \"moe_intermediate_size\": 4, "
       "\"num_experts\": 2, \"vocab_size\": 10, \"mlp_only_layers\": \"0\"}",
       "mlp_only_layers"},
      {"{\"architectures\": [\"MiniMaxM2ForCausalLM\"], \"hidden_size\": 8, "
       "\"num_hidden_layers\": 1, \"num_attention_heads\": 2, "
       "\"intermediate_size\": 8, \"vocab_size\": 10, "
       "\"num_local_experts\": 0}",
       "num_local_experts"},
      {"{\"architectures\": [\"DeepseekV32ForCausalLM\"], \"hidden_size\": 8, "
       "\"num_hidden_layers\": 1, \"num_attention_heads\": 2, "
       "\"intermediate_size\": 8, \"moe_intermediate_size\": 4, "
       "\"n_routed_experts\": 2, \"vocab_size\": 10, \"q_lora_rank\": null}",
       "q_lora_rank"},
      {"{\"architectures\": [\"GptOssForCausalLM\"], \"hidden_size\": 8}",
       "num_hidden_layers"}};
  tpx_registry *reg = fam_registry(FAM);
  size_t k;
  for (k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    tpx_model *b = fam_model_json(bad[k][0]);
    tpx_error err = {0};
    ck_assert_int_ne(tpx_registry_build_skeleton(reg, b, &err), TPX_OK);
    ck_assert_msg(strstr(err.message, bad[k][1]) != NULL, "%s", err.message);
    tpx_model_destroy(b);
  }
  tpx_registry_destroy(reg);
}
END_TEST

/* Issue 27: Automodel's classes refuse the tie_word_embeddings their
 * tie_word_embeddings_support excludes (tools/upstream/tie_support.py),
 * read from the controlling flag (Qwen3-Omni: thinker_config's), with
 * upstream's message. No class the plugin serves accepts both. */
static void check_tie(tpx_registry *reg, const char *json, const char *want) {
  tpx_model *m = fam_model_json(json);
  tpx_error err = {0};
  int rc = tpx_registry_build_skeleton(reg, m, &err);
  if (want == NULL) {
    ck_assert_msg(rc == TPX_OK, "%s: %s", json, err.message);
  } else {
    ck_assert_int_ne(rc, TPX_OK);
    ck_assert_msg(strstr(err.message, want) != NULL, "%s", err.message);
  }
  tpx_model_destroy(m);
}

#define TIE_DSV3                                                               \
  "{\"architectures\": [\"DeepseekV3ForCausalLM\"], \"hidden_size\": 64, "     \
  "\"intermediate_size\": 128, \"moe_intermediate_size\": 32, "                \
  "\"n_routed_experts\": 4, \"num_hidden_layers\": 2, "                        \
  "\"num_attention_heads\": 4, \"vocab_size\": 512, \"q_lora_rank\": 32, "     \
  "\"kv_lora_rank\": 16, \"qk_nope_head_dim\": 8, \"qk_rope_head_dim\": 8, "   \
  "\"v_head_dim\": 8, \"first_k_dense_replace\": 1"
#define TIE_ERNIE                                                              \
  "{\"architectures\": [\"Ernie4_5_MoeForCausalLM\"], \"hidden_size\": "       \
  "64, \"intermediate_size\": 128, \"moe_intermediate_size\": 32, "            \
  "\"moe_num_experts\": 4, \"num_hidden_layers\": 2, "                         \
  "\"num_attention_heads\": 4, \"vocab_size\": 512"
#define TIE_OMNI                                                               \
  "{\"architectures\": [\"Qwen3OmniMoeForConditionalGeneration\"], "           \
  "\"thinker_config\": {\"text_config\": {\"hidden_size\": 64, "               \
  "\"intermediate_size\": 128, \"moe_intermediate_size\": 32, "                \
  "\"num_experts\": 4, \"num_hidden_layers\": 2, "                             \
  "\"num_attention_heads\": 4, \"vocab_size\": 512}"

START_TEST(test_tie_support) {
  static const char untied[] =
      "DeepseekV3ForCausalLM has separate input and output embeddings and "
      "does not support tie_word_embeddings=True. The Hugging Face default "
      "for this architecture is untied; set tie_word_embeddings=False.";
  static const char tied[] =
      "Ernie4_5_MoeForCausalLM ties its input and output embeddings and does "
      "not support tie_word_embeddings=False. The Hugging Face default for "
      "this architecture is tied; set tie_word_embeddings=True.";
  tpx_registry *reg = fam_registry(FAM);
  check_tie(reg, TIE_DSV3 ", \"tie_word_embeddings\": true}", untied);
  check_tie(reg, TIE_DSV3 ", \"tie_word_embeddings\": false}", NULL);
  check_tie(reg, TIE_DSV3 "}", NULL);
  check_tie(reg, TIE_ERNIE ", \"tie_word_embeddings\": false}", tied);
  check_tie(reg, TIE_ERNIE ", \"tie_word_embeddings\": true}", NULL);
  check_tie(reg, TIE_ERNIE "}", NULL);
  /* The thinker's flag controls (the whole config has none); the class
   * named is the one Automodel builds. */
  check_tie(reg, TIE_OMNI ", \"tie_word_embeddings\": true}}",
            "Qwen3OmniMoeThinkerForConditionalGeneration has separate input "
            "and output embeddings");
  check_tie(reg, TIE_OMNI "}}", NULL);
  tpx_registry_destroy(reg);
}
END_TEST

/* No plan: upstream registers none for its custom MoE classes. */
START_TEST(test_refuses_plan) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = fam_model(reg, "moe", "qwen3moe-tiny.config.json", 0);
  fam_check_refused(reg, m, "Qwen3MoeForCausalLM", NULL, 0,
                    "registers no tensor-parallel plan");
  fam_check_refused(reg, m, "DeepseekV3ForCausalLM", NULL, 1, "own MoE class");
  fam_check_refused(reg, m, "MixtralForCausalLM", NULL, 1, "not served");
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* ERNIE-4.5-MoE: its class's _tp_plan through get_hf_tp_shard_plan, as
 * upstream plans it at ep 1 (lm_head colwise to Shard(-1), then
 * embed_tokens rowwise with replicated input). */
START_TEST(test_ernie_plan) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = fam_model(reg, "moe", "qwen3moe-tiny.config.json", 0);
  tpx_plan *plan = NULL;
  tpx_plan_entry e;
  tpx_error err = {0};
  char msg[256];
  ck_assert_int_eq(fam_plan(reg, m, "Ernie4_5_MoeForCausalLM", NULL, 0, 2,
                            &plan, msg, sizeof msg),
                   TPX_OK);
  ck_assert_uint_eq(tpx_plan_size(plan), 2);
  ck_assert_int_eq(tpx_plan_get(plan, 0, &e, &err), TPX_OK);
  ck_assert_str_eq(e.module, "lm_head");
  ck_assert_int_eq(e.style.kind, TPX_STYLE_COLWISE);
  ck_assert_int_eq(tpx_plan_get(plan, 1, &e, &err), TPX_OK);
  ck_assert_str_eq(e.module, "model.embed_tokens");
  ck_assert_int_eq(e.style.kind, TPX_STYLE_ROWWISE);
  tpx_plan_destroy(plan);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* The renames of the state-dict adapters reach the model as name aliases
 * (GPT-OSS: three), so headers under the checkpoint's names match. */
START_TEST(test_name_aliases) {
  tpx_registry *reg = fam_registry(FAM);
  char path[1024];
  const char *src = getenv("TPX_SOURCE_DIR");
  tpx_model *m = NULL;
  tpx_error err = {0};
  char buf[256];
  snprintf(path, sizeof path, "%s/tests/data/upstream_moe/gpt_oss/config.json",
           src);
  ck_assert_int_eq(tpx_model_load_config(path, &m, &err), TPX_OK);
  ck_assert_int_eq(tpx_registry_build_skeleton(reg, m, &err), TPX_OK);
  ck_assert_uint_eq(tpx_model_num_name_aliases(m), 3);
  ck_assert_int_eq(tpx_model_canonical_name(m, "model.layers.2.mlp.router.bias",
                                            buf, sizeof buf),
                   1);
  ck_assert_str_eq(buf, "model.layers.2.mlp.gate.bias");
  ck_assert_int_eq(
      tpx_model_canonical_name(m, "model.layers.0.mlp.experts.gate_up_proj",
                               buf, sizeof buf),
      1);
  ck_assert_str_eq(buf, "model.layers.0.mlp.experts.gate_and_up_projs");
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

static void write_header(const char *path, const char *const *tensors,
                         size_t n);

/* Ling-V2 (BailingMoeV2, Automodel's own config class): use_qk_norm on
 * when absent (its config's default), use_qkv_bias for q/k/v and use_bias
 * for o_proj alone, first_k_dense_replace dense layers, num_shared_experts
 * x moe_intermediate_size shared experts; the adapter's renames as
 * aliases (word_embeddings, attention.dense, query_/key_layernorm); the
 * checkpoint's fused attention.query_key_value [q+2kv, H] read as the
 * three projections (a split source), not a parameter of its own. */
START_TEST(test_ling_v2) {
  static const char *const qkv[] = {
      "model.layers.1.attention.query_key_value.weight:F32:128,64"};
  const char *tmp = getenv("TMPDIR");
  char dir[512], path[1024];
  int64_t before;
  tpx_registry *reg = fam_registry(FAM);
  tpx_error err = {0};
  char buf[256];
  tpx_model *m = fam_model_json(
      "{\"architectures\": [\"BailingMoeV2ForCausalLM\"], \"model_type\": "
      "\"bailing_moe\", \"hidden_size\": 64, \"intermediate_size\": 128, "
      "\"moe_intermediate_size\": 32, \"num_experts\": 4, "
      "\"num_shared_experts\": 2, \"first_k_dense_replace\": 1, "
      "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
      "\"num_key_value_heads\": 2, \"head_dim\": 16, \"vocab_size\": 512, "
      "\"use_bias\": true}");
  ck_assert_msg(tpx_registry_build_skeleton(reg, m, &err) == TPX_OK, "%s",
                err.message);
  fam_assert_param(m, "model.layers.0.self_attn.q_norm.weight", 16, -1);
  fam_assert_param(m, "model.layers.0.self_attn.o_proj.bias", 64, -1);
  fam_assert_no_param(m, "model.layers.0.self_attn.q_proj.bias");
  fam_assert_no_param(m, "model.layers.0.mlp.up_proj.bias");
  fam_assert_param(m, "model.layers.0.mlp.up_proj.weight", 128, 64);
  fam_assert_param(m, "model.layers.1.mlp.gate.weight", 4, 64);
  fam_assert_param(m, "model.layers.1.mlp.shared_experts.up_proj.weight", 64,
                   64);
  ck_assert_int_eq(tpx_model_canonical_name(m, "model.word_embeddings.weight",
                                            buf, sizeof buf),
                   1);
  ck_assert_str_eq(buf, "model.embed_tokens.weight");
  ck_assert_int_eq(
      tpx_model_canonical_name(m, "model.layers.1.attention.dense.weight", buf,
                               sizeof buf),
      1);
  ck_assert_str_eq(buf, "model.layers.1.self_attn.o_proj.weight");
  ck_assert_int_eq(
      tpx_model_canonical_name(
          m, "model.layers.0.attention.key_layernorm.weight", buf, sizeof buf),
      1);
  ck_assert_str_eq(buf, "model.layers.0.self_attn.k_norm.weight");
  before = tpx_model_total_params(m);
  snprintf(dir, sizeof dir, "%s/tpx-am-XXXXXX", tmp ? tmp : "/tmp");
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  write_header(path, qkv, 1);
  ck_assert_msg(tpx_model_add_safetensors(m, path, &err) == TPX_OK, "%s",
                err.message);
  unlink(path);
  rmdir(dir);
  ck_assert_int_eq(tpx_model_total_params(m), before);
  fam_assert_no_param(m, "model.layers.1.attention.query_key_value.weight");
  tpx_model_destroy(m);
  m = fam_model_json(
      "{\"architectures\": [\"BailingMoeV2ForCausalLM\"], \"hidden_size\": "
      "64, \"moe_intermediate_size\": 32, \"num_experts\": 4, "
      "\"num_hidden_layers\": 1, \"first_k_dense_replace\": 0, "
      "\"num_attention_heads\": 4, \"vocab_size\": 512, \"use_qk_norm\": "
      "false, \"use_qkv_bias\": true}");
  ck_assert_msg(tpx_registry_build_skeleton(reg, m, &err) == TPX_OK, "%s",
                err.message);
  fam_assert_no_param(m, "model.layers.0.self_attn.q_norm.weight");
  fam_assert_param(m, "model.layers.0.self_attn.k_proj.bias", 64, -1);
  fam_assert_no_param(m, "model.layers.0.self_attn.o_proj.bias");
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* Laguna: per-layer query heads, g_proj per element or per head
 * (gating_types over gating), dense layers from mlp_layer_types when
 * mlp_only_layers is absent; what Automodel's class will not build. */
START_TEST(test_laguna) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_error err = {0};
  tpx_model *m = fam_model_json(
      "{\"architectures\": [\"LagunaForCausalLM\"], \"hidden_size\": 64, "
      "\"intermediate_size\": 128, \"moe_intermediate_size\": 32, "
      "\"num_experts\": 4, \"shared_expert_intermediate_size\": 48, "
      "\"num_hidden_layers\": 3, \"num_attention_heads\": 4, "
      "\"num_attention_heads_per_layer\": [4, 8, 4], "
      "\"num_key_value_heads\": 2, \"head_dim\": 16, \"vocab_size\": 512, "
      "\"gating\": true, \"gating_types\": [\"per-element\", \"per_head\", "
      "\"none\"], \"mlp_layer_types\": [\"sparse\", \"dense\", \"sparse\"], "
      "\"attention_bias\": true}");
  ck_assert_msg(tpx_registry_build_skeleton(reg, m, &err) == TPX_OK, "%s",
                err.message);
  fam_assert_param(m, "model.layers.0.self_attn.g_proj.weight", 64, 64);
  fam_assert_param(m, "model.layers.1.self_attn.q_proj.weight", 128, 64);
  fam_assert_param(m, "model.layers.1.self_attn.g_proj.weight", 8, 64);
  fam_assert_param(m, "model.layers.1.self_attn.o_proj.bias", 64, -1);
  fam_assert_no_param(m, "model.layers.1.self_attn.q_proj.bias");
  fam_assert_no_param(m, "model.layers.2.self_attn.g_proj.weight");
  fam_assert_param(m, "model.layers.0.mlp.gate.weight", 4, 64);
  fam_assert_param(m, "model.layers.0.mlp.shared_experts.up_proj.weight", 48,
                   64);
  fam_assert_param(m, "model.layers.1.mlp.up_proj.weight", 128, 64);
  fam_assert_param(m, "model.layers.2.mlp.gate.weight", 4, 64);
  tpx_model_destroy(m);
  m = fam_model_json(
      "{\"architectures\": [\"LagunaForCausalLM\"], \"hidden_size\": 64, "
      "\"intermediate_size\": 128, \"moe_intermediate_size\": 32, "
      "\"num_experts\": 4, \"num_hidden_layers\": 2, "
      "\"num_attention_heads\": 4, \"head_dim\": 16, \"vocab_size\": 512, "
      "\"swa_attention_sink_enabled\": true}");
  ck_assert_int_ne(tpx_registry_build_skeleton(reg, m, &err), TPX_OK);
  ck_assert_msg(strstr(err.message, "swa_attention_sink_enabled") != NULL, "%s",
                err.message);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* MiMo-V2: sliding-window layers (hybrid_layer_pattern 1) take the swa_*
 * sizes, v and o_proj the v head dim; moe_layer_freq (integers or
 * booleans) says which layers are MoE; MiMo-V2.5's class fuses q/k/v as
 * attention_projection_layout says, the Flash class never does; the sink
 * is a buffer rule. */
START_TEST(test_mimo) {
  static const char *const base =
      "\"hidden_size\": 64, \"intermediate_size\": 128, "
      "\"moe_intermediate_size\": 32, \"n_routed_experts\": 4, "
      "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
      "\"num_key_value_heads\": 2, \"head_dim\": 24, \"v_head_dim\": 8, "
      "\"swa_num_attention_heads\": 8, \"swa_num_key_value_heads\": 1, "
      "\"swa_head_dim\": 16, \"swa_v_head_dim\": 12, \"vocab_size\": 512, "
      "\"hybrid_layer_pattern\": [0, 1], \"moe_layer_freq\": [false, true], "
      "\"attention_projection_layout\": \"fused_qkv\", \"attention_bias\": "
      "true";
  static const char *const arch[] = {"MiMoV2FlashForCausalLM",
                                     "MiMoV25ForCausalLM", "HYV3ForCausalLM",
                                     "Mistral4ForCausalLM"};
  tpx_registry *reg = fam_registry(FAM);
  tpx_error err = {0};
  char json[1024];
  size_t k;
  for (k = 0; k < 2; k++) {
    tpx_model *m;
    snprintf(json, sizeof json, "{\"architectures\": [\"%s\"], %s}", arch[k],
             base);
    m = fam_model_json(json);
    ck_assert_msg(tpx_registry_build_skeleton(reg, m, &err) == TPX_OK, "%s",
                  err.message);
    if (k == 0) {
      fam_assert_param(m, "model.layers.0.self_attn.q_proj.weight", 96, 64);
      fam_assert_param(m, "model.layers.0.self_attn.v_proj.bias", 16, -1);
      fam_assert_param(m, "model.layers.1.self_attn.k_proj.weight", 16, 64);
      fam_assert_param(m, "model.layers.1.self_attn.v_proj.weight", 12, 64);
      fam_assert_no_param(m, "model.layers.1.self_attn.qkv_proj.weight");
    } else {
      fam_assert_param(m, "model.layers.0.self_attn.qkv_proj.weight",
                       96 + 48 + 16, 64);
      fam_assert_param(m, "model.layers.1.self_attn.qkv_proj.bias",
                       128 + 16 + 12, -1);
    }
    fam_assert_param(m, "model.layers.0.self_attn.o_proj.weight", 64, 32);
    fam_assert_no_param(m, "model.layers.0.self_attn.o_proj.bias");
    fam_assert_param(m, "model.layers.1.self_attn.o_proj.weight", 64, 96);
    fam_assert_param(m, "model.layers.0.mlp.up_proj.weight", 128, 64);
    fam_assert_param(m, "model.layers.1.mlp.gate.weight", 4, 64);
    ck_assert_uint_eq(tpx_model_num_buffer_rules(m), 2);
    tpx_model_destroy(m);
  }
  {
    tpx_model *m = fam_model_json(
        "{\"architectures\": [\"MiMoV2FlashForCausalLM\"], \"hidden_size\": "
        "64, \"moe_intermediate_size\": 32, \"n_routed_experts\": 4, "
        "\"num_hidden_layers\": 1, \"num_attention_heads\": 4, "
        "\"vocab_size\": 512}");
    ck_assert_int_ne(tpx_registry_build_skeleton(reg, m, &err), TPX_OK);
    ck_assert_msg(strstr(err.message, "moe_layer_freq") != NULL, "%s",
                  err.message);
    tpx_model_destroy(m);
  }
  tpx_registry_destroy(reg);
}
END_TEST

/* Hy3: the class defaults for absent keys (first layer dense, one shared
 * expert), attention_bias on all four projections, q/k norms; the
 * adapter's renames (router.gate, shared_mlp). Mistral-4: the checkpoint's
 * language_model. prefix as aliases. */
START_TEST(test_hy_v3_mistral4) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_error err = {0};
  char buf[256];
  char path[1024];
  const char *src = getenv("TPX_SOURCE_DIR");
  tpx_model *m = fam_model_json(
      "{\"architectures\": [\"HYV3ForCausalLM\"], \"hidden_size\": 64, "
      "\"intermediate_size\": 128, \"moe_intermediate_size\": 32, "
      "\"num_experts\": 4, \"num_hidden_layers\": 2, "
      "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
      "\"head_dim\": 16, \"vocab_size\": 512, \"attention_bias\": true}");
  ck_assert_msg(tpx_registry_build_skeleton(reg, m, &err) == TPX_OK, "%s",
                err.message);
  fam_assert_param(m, "model.layers.0.mlp.up_proj.weight", 128, 64);
  fam_assert_param(m, "model.layers.0.self_attn.o_proj.bias", 64, -1);
  fam_assert_param(m, "model.layers.0.self_attn.q_norm.weight", 16, -1);
  fam_assert_param(m, "model.layers.1.mlp.gate.weight", 4, 64);
  fam_assert_param(m, "model.layers.1.mlp.shared_experts.up_proj.weight", 32,
                   64);
  ck_assert_int_eq(
      tpx_model_canonical_name(
          m, "model.layers.1.mlp.shared_mlp.down_proj.weight", buf, sizeof buf),
      1);
  ck_assert_str_eq(buf, "model.layers.1.mlp.shared_experts.down_proj.weight");
  tpx_model_destroy(m);
  m = NULL;
  snprintf(path, sizeof path, "%s/tests/data/upstream_moe/mistral4/config.json",
           src);
  ck_assert_int_eq(tpx_model_load_config(path, &m, &err), TPX_OK);
  ck_assert_int_eq(tpx_registry_build_skeleton(reg, m, &err), TPX_OK);
  ck_assert_int_eq(tpx_model_canonical_name(
                       m,
                       "language_model.model.layers.2.self_attn.kv_b_proj."
                       "weight",
                       buf, sizeof buf),
                   1);
  ck_assert_str_eq(buf, "model.layers.2.self_attn.kv_b_proj.weight");
  ck_assert_int_eq(tpx_model_canonical_name(m, "language_model.lm_head.weight",
                                            buf, sizeof buf),
                   1);
  ck_assert_str_eq(buf, "lm_head.weight");
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

static void assert_canonical(const tpx_model *m, const char *ckpt,
                             const char *want) {
  char buf[256];
  ck_assert_msg(tpx_model_canonical_name(m, ckpt, buf, sizeof buf) == 1, "%s",
                ckpt);
  ck_assert_str_eq(buf, want);
}

static tpx_model *recorded(tpx_registry *reg, const char *fam) {
  char path[1024];
  tpx_model *m = NULL;
  tpx_error err = {0};
  snprintf(path, sizeof path, "%s/tests/data/upstream_moe/%s/config.json",
           getenv("TPX_SOURCE_DIR"), fam);
  ck_assert_int_eq(tpx_model_load_config(path, &m, &err), TPX_OK);
  ck_assert_msg(tpx_registry_build_skeleton(reg, m, &err) == TPX_OK, "%s: %s",
                fam, err.message);
  return m;
}

/* The multimodal classes: Qwen3-Omni-MoE's thinker (the text decoder from
 * thinker_config.text_config, no tower; the checkpoint under "thinker.")
 * and Kimi K2.5 (MoonViT and its projector, DeepSeek-V3 under
 * model.language_model; the checkpoint without the leading "model."). */
START_TEST(test_multimodal) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = recorded(reg, "qwen3_omni_moe");
  fam_assert_param(m, "model.layers.2.mlp.gate.weight", 8, 64);
  fam_assert_param(m, "model.layers.0.self_attn.k_norm.weight", 16, -1);
  fam_assert_no_param(m, "thinker.visual.patch_embed.proj.weight");
  assert_canonical(m, "thinker.model.layers.1.self_attn.q_proj.weight",
                   "model.layers.1.self_attn.q_proj.weight");
  assert_canonical(m, "thinker.lm_head.weight", "lm_head.weight");
  tpx_model_destroy(m);
  m = recorded(reg, "kimi_k25_vl");
  fam_assert_param(m, "model.vision_tower.encoder.blocks.1.wqkv.weight", 192,
                   64);
  fam_assert_param(m, "model.multi_modal_projector.linear_1.weight", 256, 256);
  fam_assert_param(m, "model.multi_modal_projector.linear_2.weight", 64, 256);
  fam_assert_param(m, "model.language_model.model.layers.1.mlp.gate.weight", 8,
                   64);
  fam_assert_param(m, "model.language_model.lm_head.weight", 512, 64);
  fam_assert_no_param(m, "model.language_model.model.layers.0.mlp.gate.weight");
  assert_canonical(m, "mm_projector.proj.2.bias",
                   "model.multi_modal_projector.linear_2.bias");
  assert_canonical(m, "vision_tower.encoder.final_layernorm.weight",
                   "model.vision_tower.encoder.final_layernorm.weight");
  assert_canonical(m, "language_model.model.layers.2.self_attn.o_proj.weight",
                   "model.language_model.model.layers.2.self_attn.o_proj."
                   "weight");
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* MiniMax-M3: moe_layer_freq picks dense or routed layers (the shared
 * experts beside mlp at the layer), sparse_attention_freq the layers with
 * an indexer; the MTP block is built as the last layer; the vision tower's
 * Conv3d patch embedding; the checkpoint's names under "language_model."
 * and block_sparse_moe; attention_output_gate refused as upstream
 * asserts. */
START_TEST(test_minimax_m3) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_error err = {0};
  tpx_model *m = recorded(reg, "minimax_m3_vl");
  fam_assert_param(m, "model.layers.0.mlp.gate_proj.weight", 96, 64);
  fam_assert_no_param(m, "model.layers.0.self_attn.indexer.index_q_proj."
                         "weight");
  fam_assert_param(m, "model.layers.1.self_attn.indexer.index_q_proj.weight",
                   32, 64);
  fam_assert_param(m, "model.layers.2.shared_experts.down_proj.weight", 64, 48);
  fam_assert_param(m, "model.mtp.layers.0.eh_proj.weight", 64, 128);
  fam_assert_param(m, "model.mtp.layers.0.transformer_layer.mlp.gate.weight", 8,
                   64);
  fam_assert_param(m, "vision_tower.patch_merge_mlp.linear_1.weight", 96, 256);
  {
    tpx_param_info info;
    int64_t i = tpx_model_find_param(
        m, "vision_tower.vision_model.embeddings.patch_embedding.weight");
    ck_assert_int_ge(i, 0);
    ck_assert_int_eq(tpx_model_param(m, i, &info, &err), TPX_OK);
    ck_assert_int_eq(info.ndim, 5);
    i = tpx_model_find_param(m, "model.layers.1.mlp.gate.weight");
    ck_assert_int_eq(tpx_model_param(m, i, &info, &err), TPX_OK);
    ck_assert_int_eq(info.dtype, TPX_DTYPE_F32);
  }
  assert_canonical(m,
                   "language_model.model.layers.1.block_sparse_moe.gate."
                   "weight",
                   "model.layers.1.mlp.gate.weight");
  assert_canonical(m,
                   "language_model.model.layers.2.self_attn.index_k_norm."
                   "weight",
                   "model.layers.2.self_attn.indexer.index_k_norm.weight");
  assert_canonical(m, "patch_merge_mlp.linear_2.bias",
                   "vision_tower.patch_merge_mlp.linear_2.bias");
  tpx_model_destroy(m);
  m = fam_model_json(
      "{\"architectures\": [\"MiniMaxM3SparseForConditionalGeneration\"], "
      "\"text_config\": {\"hidden_size\": 64, \"num_hidden_layers\": 1, "
      "\"num_attention_heads\": 4, \"vocab_size\": 128, "
      "\"intermediate_size\": 32, \"num_local_experts\": 4, "
      "\"attention_output_gate\": true}}");
  ck_assert_int_ne(tpx_registry_build_skeleton(reg, m, &err), TPX_OK);
  ck_assert_msg(strstr(err.message, "attention_output_gate") != NULL, "%s",
                err.message);
  tpx_model_destroy(m);
  /* use_qk_norm is read from text_config */
  m = fam_model_json(
      "{\"architectures\": [\"MiniMaxM3SparseForConditionalGeneration\"], "
      "\"text_config\": {\"hidden_size\": 64, \"num_hidden_layers\": 1, "
      "\"num_attention_heads\": 4, \"vocab_size\": 128, "
      "\"intermediate_size\": 32, \"num_local_experts\": 4, "
      "\"num_mtp_modules\": 0, \"use_qk_norm\": false}, "
      "\"vision_config\": {\"num_hidden_layers\": 0}}");
  ck_assert_msg(tpx_registry_build_skeleton(reg, m, &err) == TPX_OK, "%s",
                err.message);
  fam_assert_param(m, "model.layers.0.self_attn.q_proj.weight", 64, 64);
  fam_assert_no_param(m, "model.layers.0.self_attn.q_norm.weight");
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* Inkling: layer 0 dense (fused gate_up_proj), layer 1 sliding-window (the
 * swa_* sizes, sliding_window_size as the relative extent), the router's
 * shared rows and float32 correction bias; the vision stages as
 * Automodel plans them; the raw checkpoint's names. */
START_TEST(test_inkling) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = recorded(reg, "inkling");
  fam_assert_param(m, "model.language_model.layers.0.mlp.gate_up_proj", 64,
                   192);
  fam_assert_param(m, "model.language_model.layers.1.self_attn.q_proj.weight",
                   64, 64);
  fam_assert_param(m, "model.language_model.layers.1.self_attn.r_proj.weight",
                   64, 64);
  fam_assert_param(
      m, "model.language_model.layers.1.self_attn.rel_logits_proj.proj", 8,
      512);
  fam_assert_param(
      m, "model.language_model.layers.2.self_attn.rel_logits_proj.proj", 8, 64);
  fam_assert_param(m, "model.language_model.layers.2.mlp.gate.weight", 10, 64);
  fam_assert_param(m, "model.vision_tower.encoder_layers.0.projection.weight",
                   64, 48);
  fam_assert_param(m, "model.vision_tower.encoder_layers.1.projection.weight",
                   64, 512);
  fam_assert_no_param(m,
                      "model.vision_tower.encoder_layers.1.layer_norm.weight");
  fam_assert_param(
      m, "model.audio_tower.embed_audio_tokens.embed_audio_tokens.weight", 128,
      64);
  assert_canonical(m, "model.llm.layers.1.attn.wq_du.weight",
                   "model.language_model.layers.1.self_attn.q_proj.weight");
  assert_canonical(m, "model.llm.layers.2.mlp.gate.bias",
                   "model.language_model.layers.2.mlp.gate._fp32_params."
                   "e_score_correction_bias");
  assert_canonical(m, "model.llm.unembed.weight", "lm_head.weight");
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* Step-3.7 (and Step3p6 on the same class): layer 0 dense, layer 1 MoE
 * sliding-window (attention_other_setting's heads), the root's MTP block
 * (dense, sliding as mtp_layer_types says, its own shared head), the
 * perception encoder and projector; the checkpoint's names. */
START_TEST(test_step) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = recorded(reg, "step3p7");
  fam_assert_param(m, "model.language_model.layers.0.mlp.up_proj.weight", 96,
                   64);
  fam_assert_param(m, "model.language_model.layers.1.self_attn.q_proj.weight",
                   128, 64);
  fam_assert_param(m, "model.language_model.layers.1.moe.gate.weight", 8, 64);
  fam_assert_param(
      m, "model.language_model.layers.2.share_expert.down_proj.weight", 64, 48);
  fam_assert_param(m, "mtp.layers.0.self_attn.k_proj.weight", 64, 64);
  fam_assert_param(m, "mtp.layers.0.transformer.shared_head.output.weight", 128,
                   64);
  fam_assert_param(
      m, "model.vision_model.transformer.resblocks.1.mlp.c_fc.weight", 373, 64);
  fam_assert_param(m, "model.vit_large_projector.weight", 64, 256);
  assert_canonical(m, "model.layers.2.moe.router_bias",
                   "model.language_model.layers.2.moe.gate."
                   "e_score_correction_bias");
  assert_canonical(m, "vision_model.ln_pre.bias",
                   "model.vision_model.ln_pre.bias");
  tpx_model_destroy(m);
  m = recorded(reg, "step3p6");
  fam_assert_param(m, "mtp.layers.0.eh_proj.weight", 64, 128);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* GLM-5-Next: layer 0 linear attention (float32 A_log / dt_bias) and
 * dense, layers 1-2 DeepSeek sparse attention (no RoPE) and MoE; the
 * hyper-connections; the vision tower; the checkpoint's names; a RoPE dim
 * refused with the config class's message. */
START_TEST(test_glm5) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_error err = {0};
  tpx_model *m = recorded(reg, "glm5_next");
  fam_assert_param(m,
                   "model.language_model.layers.0.self_attn._fp32_params."
                   "dt_bias",
                   64, -1);
  fam_assert_param(m, "model.language_model.layers.0.self_attn.f_b_proj.weight",
                   64, 16);
  fam_assert_param(
      m, "model.language_model.layers.1.self_attn.kv_b_proj.weight", 128, 16);
  fam_assert_param(m,
                   "model.language_model.layers.2.self_attn.indexer."
                   "index_kpool_compress_gate",
                   16, 64);
  fam_assert_param(m, "model.language_model.layers.2.attn_hc.fn", 24, 256);
  fam_assert_param(m, "model.visual.merger.gate_proj.weight", 96, 64);
  assert_canonical(m, "model.language_model.layers.1.hc_ffn_scale",
                   "model.language_model.layers.1.ffn_hc._fp32_params.scale");
  tpx_model_destroy(m);
  m = fam_model_json(
      "{\"architectures\": [\"Glm5NextForConditionalGeneration\"], "
      "\"text_config\": {\"hidden_size\": 64, \"num_hidden_layers\": 1, "
      "\"num_attention_heads\": 4, \"num_key_value_heads\": 4, "
      "\"vocab_size\": 128, \"intermediate_size\": 96, "
      "\"moe_intermediate_size\": 32, \"n_routed_experts\": 4, "
      "\"qk_rope_head_dim\": 8}}");
  ck_assert_int_ne(tpx_registry_build_skeleton(reg, m, &err), TPX_OK);
  ck_assert_msg(strstr(err.message, "qk_rope_head_dim=0") != NULL, "%s",
                err.message);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

static int has_trait(const char *const *traits, const char *t) {
  for (; traits && *traits; traits++)
    if (strcmp(*traits, t) == 0)
      return 1;
  return 0;
}

/* Registration through dlopen: every architecture is moe_custom with its
 * routed experts declared expert parameters. */
START_TEST(test_traits) {
  static const char *const archs[] = {
      "DeepseekV3ForCausalLM",   "DeepseekV32ForCausalLM",
      "Qwen3MoeForCausalLM",     "Qwen3NextForCausalLM",
      "Glm4MoeForCausalLM",      "Glm4MoeLiteForCausalLM",
      "GlmMoeDsaForCausalLM",    "GptOssForCausalLM",
      "MiniMaxM2ForCausalLM",    "Ernie4_5_MoeForCausalLM",
      "BailingMoeV2ForCausalLM", "LagunaForCausalLM",
      "MiMoV2FlashForCausalLM",  "MiMoV2ForCausalLM",
      "MiMoV25ForCausalLM",      "HYV3ForCausalLM",
      "Mistral4ForCausalLM"};
  const char *build = getenv("TPX_BUILD_DIR");
  char path[1024], t[256];
  tpx_plugin_host host;
  tpx_plugin_info info;
  tpx_plugin_register_fn reg_fn;
  void *h;
  size_t k;
  ck_assert_ptr_nonnull(build);
  snprintf(path, sizeof path,
           "%s/plugins/automodel_moe/libtpx_automodel_moe.so", build);
  h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  ck_assert_msg(h != NULL, "%s", dlerror());
  *(void **)(&reg_fn) = dlsym(h, TPX_PLUGIN_REGISTER_SYMBOL);
  ck_assert_ptr_nonnull(*(void **)(&reg_fn));
  memset(&host, 0, sizeof host);
  host.struct_size = sizeof host;
  host.abi_min = host.abi_max = TPX_PLUGIN_ABI_CURRENT;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  ck_assert_int_eq(reg_fn(&host, &info), TPX_PLUGIN_OK);
  for (k = 0; k < sizeof archs / sizeof archs[0]; k++) {
    snprintf(t, sizeof t, "moe_custom=%s", archs[k]);
    ck_assert_msg(has_trait(info.traits, t), "%s", t);
    snprintf(t, sizeof t, "expert_param=%s:model.layers.*.mlp.experts.*",
             archs[k]);
    ck_assert_msg(has_trait(info.traits, t), "%s", t);
  }
  ck_assert(has_trait(info.traits, "name_alias=MiniMaxM2ForCausalLM:"
                                   "model.layers.*.block_sparse_moe="
                                   "model.layers.*.mlp"));
  ck_assert(has_trait(info.traits,
                      "moe_custom=Qwen3OmniMoeForConditionalGeneration"));
  ck_assert(has_trait(info.traits, "expert_param=Qwen3OmniMoeForConditional"
                                   "Generation:model.layers.*.mlp.experts.*"));
  ck_assert(
      has_trait(info.traits, "moe_custom=KimiK25VLForConditionalGeneration"));
  ck_assert(has_trait(info.traits,
                      "expert_param=KimiK25VLForConditionalGeneration:model."
                      "language_model.model.layers.*.mlp.experts.*"));
  ck_assert(
      has_trait(info.traits, "moe_custom=KimiK25ForConditionalGeneration"));
  ck_assert(has_trait(info.traits,
                      "moe_custom=MiniMaxM3SparseForConditionalGeneration"));
  ck_assert(
      has_trait(info.traits, "moe_custom=InklingForConditionalGeneration"));
  ck_assert(
      has_trait(info.traits, "moe_custom=Step3p6ForConditionalGeneration"));
  ck_assert(
      has_trait(info.traits, "moe_custom=Glm5NextForConditionalGeneration"));
  ck_assert(!has_trait(info.traits, "moe_custom=MixtralForCausalLM"));
  dlclose(h);
}
END_TEST

/* A header-only safetensors file of `n` tensors "name:DT:d0[,d1]" (data
 * zeros) at `path`. */
static void write_header(const char *path, const char *const *tensors,
                         size_t n) {
  json_t *h = json_object();
  int64_t off = 0;
  size_t k;
  char *text;
  uint64_t len;
  FILE *f;
  for (k = 0; k < n; k++) {
    char name[256], dt[8];
    long long d0 = 0, d1 = -1, bytes;
    json_t *t = json_object(), *shape = json_array();
    ck_assert(sscanf(tensors[k], "%255[^:]:%7[^:]:%lld,%lld", name, dt, &d0,
                     &d1) >= 3);
    json_array_append_new(shape, json_integer(d0));
    bytes = d0 * (strcmp(dt, "F32") == 0 ? 4 : 2);
    if (d1 >= 0) {
      json_array_append_new(shape, json_integer(d1));
      bytes *= d1;
    }
    json_object_set_new(t, "dtype", json_string(dt));
    json_object_set_new(t, "shape", shape);
    json_object_set_new(
        t, "data_offsets",
        json_pack("[I,I]", (json_int_t)off, (json_int_t)(off + bytes)));
    json_object_set_new(h, name, t);
    off += bytes;
  }
  text = json_dumps(h, JSON_COMPACT);
  len = strlen(text);
  f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(&len, 8, 1, f), 1);
  ck_assert_uint_eq(fwrite(text, 1, len, f), len);
  for (; off > 0; off--) fputc(0, f);
  fclose(f);
  free(text);
  json_decref(h);
}

/* The router's correction bias as each family's checkpoint stores it
 * (DeepSeek-V3: mlp.gate.e_score_correction_bias [E]; ERNIE:
 * mlp.moe_statics.e_score_correction_bias [1, E]; MiniMax-M2:
 * block_sparse_moe.e_score_correction_bias [E]; Ling-V2:
 * mlp.gate.expert_bias [E]; Laguna: mlp.experts.e_score_correction_bias
 * [E]; Hy3: mlp.expert_bias [E]; Mistral-4: under language_model.)
 * becomes buffer
 * model.layers.1.mlp.gate.e_score_correction_bias, not a parameter. */
START_TEST(test_buffer_from_checkpoint) {
  static const char *const cases[][3] = {
      {"deepseek_v3", "model.layers.1.mlp.gate.weight:BF16:8,64",
       "model.layers.1.mlp.gate.e_score_correction_bias:F32:8"},
      {"ernie4_5_moe", "model.layers.1.mlp.gate.weight:F32:8,64",
       "model.layers.1.mlp.moe_statics.e_score_correction_bias:F32:1,8"},
      {"minimax_m2", "model.layers.1.block_sparse_moe.gate.weight:F32:8,64",
       "model.layers.1.block_sparse_moe.e_score_correction_bias:F32:8"},
      {"ling_v2", "model.layers.1.mlp.gate.weight:BF16:8,64",
       "model.layers.1.mlp.gate.expert_bias:F32:8"},
      {"laguna", "model.layers.1.mlp.gate.weight:BF16:8,64",
       "model.layers.1.mlp.experts.e_score_correction_bias:F32:8"},
      {"hy_v3", "model.layers.1.mlp.router.gate.weight:BF16:8,64",
       "model.layers.1.mlp.expert_bias:F32:8"},
      {"mistral4", "language_model.model.layers.1.mlp.gate.weight:BF16:8,64",
       "language_model.model.layers.1.mlp.gate.e_score_correction_bias:F32:"
       "8"}};
  const char *src = getenv("TPX_SOURCE_DIR");
  const char *tmp = getenv("TMPDIR");
  char dir[512], path[1024];
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = NULL;
  tpx_error err = {0};
  const char *fqn = NULL;
  const int64_t *shape = NULL;
  int ndim = 0;
  tpx_dtype dt;
  int64_t before;
  snprintf(dir, sizeof dir, "%s/tpx-am-XXXXXX", tmp ? tmp : "/tmp");
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/tests/data/upstream_moe/%s/config.json", src,
           cases[_i][0]);
  ck_assert_int_eq(tpx_model_load_config(path, &m, &err), TPX_OK);
  ck_assert_int_eq(tpx_registry_build_skeleton(reg, m, &err), TPX_OK);
  ck_assert_uint_eq(tpx_model_num_buffer_rules(m), 1);
  ck_assert_str_eq(tpx_model_buffer_rule(m, 0),
                   "model.layers.*.mlp.gate.e_score_correction_bias");
  before = tpx_model_total_params(m);
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  write_header(path, &cases[_i][1], 2);
  ck_assert_msg(tpx_model_add_safetensors(m, path, &err) == TPX_OK, "%s",
                err.message);
  unlink(path);
  rmdir(dir);
  ck_assert_int_eq(tpx_model_total_params(m), before);
  fam_assert_no_param(m, "model.layers.1.mlp.gate.e_score_correction_bias");
  ck_assert_uint_eq(tpx_model_num_buffers(m), 1);
  ck_assert_int_eq(tpx_model_buffer(m, 0, &fqn, &shape, &ndim, &dt, &err),
                   TPX_OK);
  ck_assert_str_eq(fqn, "model.layers.1.mlp.gate.e_score_correction_bias");
  ck_assert_int_eq(shape[ndim - 1], 8);
  ck_assert_int_eq(dt, TPX_DTYPE_F32);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

START_TEST(test_buffer_rule_api) {
  tpx_model *m = fam_model_json("{}");
  tpx_error err = {0};
  ck_assert_int_eq(tpx_model_add_buffer_rule(NULL, "a", &err),
                   TPX_INVALID_ARGUMENT);
  ck_assert_int_ne(tpx_model_add_buffer_rule(m, "", &err), TPX_OK);
  ck_assert_int_ne(tpx_model_add_buffer_rule(m, "a..b", &err), TPX_OK);
  ck_assert_int_eq(tpx_model_add_buffer_rule(m, "a.*.b", &err), TPX_OK);
  ck_assert_uint_eq(tpx_model_num_buffer_rules(m), 1);
  ck_assert_ptr_null(tpx_model_buffer_rule(m, 1));
  ck_assert_uint_eq(tpx_model_num_buffer_rules(NULL), 0);
  tpx_model_destroy(m);
}
END_TEST

static Suite *automodel_moe_suite(void) {
  Suite *s = suite_create("families-automodel-moe");
  TCase *tc = tcase_create("automodel_moe");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_abi);
  tcase_add_loop_test(tc, test_tiny_goldens, 0,
                      (int)(sizeof k_families / sizeof k_families[0]));
  tcase_add_test(tc, test_qwen3_30b);
  tcase_add_test(tc, test_sparse_layers);
  tcase_add_test(tc, test_bad_configs);
  tcase_add_test(tc, test_refuses_plan);
  tcase_add_test(tc, test_tie_support);
  tcase_add_test(tc, test_ernie_plan);
  tcase_add_test(tc, test_name_aliases);
  tcase_add_test(tc, test_ling_v2);
  tcase_add_test(tc, test_laguna);
  tcase_add_test(tc, test_mimo);
  tcase_add_test(tc, test_hy_v3_mistral4);
  tcase_add_test(tc, test_multimodal);
  tcase_add_test(tc, test_minimax_m3);
  tcase_add_test(tc, test_inkling);
  tcase_add_test(tc, test_step);
  tcase_add_test(tc, test_glm5);
  tcase_add_test(tc, test_traits);
  tcase_add_loop_test(tc, test_buffer_from_checkpoint, 0, 7);
  tcase_add_test(tc, test_buffer_rule_api);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(automodel_moe_suite());
  int failed;
  srunner_run_all(sr, CK_NORMAL);
  failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
