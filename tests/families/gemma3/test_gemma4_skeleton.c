/* test_gemma4_skeleton.c — the Gemma4ForConditionalGeneration skeleton of the
 * gemma3 plugin through the real host: the published gemma-4-31B-it
 * checkpoint (31,273,088,876 elements in 1,188 tensors, lm_head tied), the
 * synthetic dense, E-series and MoE configs (names, shapes, heterogeneous
 * full-attention layers, per-layer embeddings, experts), kv-shared and
 * double-wide layers, the audio tower and clipped linears from inline
 * configs, bad input, the plan at tp 2 matching the tree, and the
 * conformance harness on the Gemma4 configs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "famtest.h"
#include "tpx/diag.h"

#define FAM "gemma3"
#define ARCH "Gemma4ForConditionalGeneration"
#define LM "model.language_model."

/* A model from inline config text plus its skeleton; on failure returns NULL
 * and copies the error message. */
static tpx_model *inline_skeleton(const tpx_registry *reg, const char *json,
                                  char *msg, size_t size) {
  tpx_model *m = NULL;
  tpx_error err = {0};
  ck_assert_int_eq(tpx_model_create(&m, NULL), TPX_OK);
  ck_assert_int_eq(
      tpx_model_set_config(m, json, strlen(json), "inline.json", NULL), TPX_OK);
  if (tpx_registry_build_skeleton(reg, m, &err) != TPX_OK) {
    snprintf(msg, size, "%s", err.message);
    ck_assert_uint_eq(tpx_model_num_params(m), 0);
    tpx_model_destroy(m);
    return NULL;
  }
  return m;
}

static void assert_absent(const tpx_model *m, const char *fqn) {
  ck_assert_msg(tpx_model_find_param(m, fqn) < 0, "unexpected '%s'", fqn);
}

/* ---- gemma-4-31B-it (published) ---- */

START_TEST(test_31b_totals) {
  tpx_registry *reg = ft_registry(FAM);
  tpx_model *m = ft_skeleton(reg, FAM, "gemma-4-31B-it.json");
  /* 1,188 checkpoint tensors + the tied lm_head */
  ck_assert_uint_eq(tpx_model_num_params(m), 1188 + 1);
  ck_assert_int_eq(tpx_model_total_params(m), 31273088876LL);
  ck_assert_int_eq(tpx_model_total_bytes(m), 2 * 31273088876LL);
  ft_assert_tied(m, "lm_head.weight", LM "embed_tokens.weight");
  ft_assert_param(m, LM "embed_tokens.weight", 262144, 5376, -1);
  ft_assert_param(m, LM "norm.weight", 5376, -1, -1);
  /* 50 sliding layers keep v_proj; the 10 full ones (k_eq_v) have none */
  ck_assert_uint_eq(ft_count_suffix(m, "self_attn.v_proj.weight"), 50);
  ck_assert_uint_eq(ft_count_suffix(m, "self_attn.k_proj.weight"), 60);
  ck_assert_uint_eq(ft_count_suffix(m, ".layer_scalar"), 60);
  ck_assert_uint_eq(ft_count_suffix(m, "_layernorm.weight"), 60 * 4 + 27 * 4);
  ck_assert_int_eq(ft_kind(m, LM "layers"), TPX_MODULE_CONTAINER);
  ck_assert_int_eq(
      tpx_model_module_num_children(m, tpx_model_find_module(m, LM "layers")),
      60);
  ck_assert_int_eq(ft_kind(m, LM "rotary_emb"), TPX_MODULE_ROTARY);
  ck_assert_int_eq(ft_kind(m, LM "embed_tokens"), TPX_MODULE_EMBEDDING);
  ck_assert_int_eq(ft_kind(m, LM "layers.0.self_attn.v_norm"), TPX_MODULE_NORM);
  assert_absent(m, LM "layers.0.self_attn.v_norm.weight");
  /* no E-series or MoE tensors, no audio */
  ck_assert_int_eq(tpx_model_find_module(m, LM "embed_tokens_per_layer"), -1);
  ck_assert_int_eq(tpx_model_find_module(m, "model.audio_tower"), -1);
  ck_assert_uint_eq(ft_count_suffix(m, "router.proj.weight"), 0);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

START_TEST(test_31b_layers) {
  tpx_registry *reg = ft_registry(FAM);
  tpx_model *m = ft_skeleton(reg, FAM, "gemma-4-31B-it.json");
  /* sliding layer: head_dim 256, 32 q heads, 16 kv heads */
  static const char *const sliding[] = {"layer_scalar",
                                        "self_attn.q_proj.weight",
                                        "self_attn.q_norm.weight",
                                        "self_attn.k_norm.weight",
                                        "self_attn.k_proj.weight",
                                        "self_attn.v_proj.weight",
                                        "self_attn.o_proj.weight",
                                        "mlp.gate_proj.weight",
                                        "mlp.up_proj.weight",
                                        "mlp.down_proj.weight",
                                        "input_layernorm.weight",
                                        "post_attention_layernorm.weight",
                                        "pre_feedforward_layernorm.weight",
                                        "post_feedforward_layernorm.weight"};
  /* full layer: global_head_dim 512, 4 global kv heads, keys are values */
  static const char *const full[] = {"layer_scalar",
                                     "self_attn.q_proj.weight",
                                     "self_attn.q_norm.weight",
                                     "self_attn.k_norm.weight",
                                     "self_attn.k_proj.weight",
                                     "self_attn.o_proj.weight",
                                     "mlp.gate_proj.weight",
                                     "mlp.up_proj.weight",
                                     "mlp.down_proj.weight",
                                     "input_layernorm.weight",
                                     "post_attention_layernorm.weight",
                                     "pre_feedforward_layernorm.weight",
                                     "post_feedforward_layernorm.weight"};
  ft_assert_param_order(m, LM "layers.4.", sliding,
                        sizeof sliding / sizeof sliding[0]);
  ft_assert_param_order(m, LM "layers.59.", full, sizeof full / sizeof full[0]);
  ft_assert_param(m, LM "layers.0.layer_scalar", 1, -1, -1);
  ft_assert_param(m, LM "layers.0.self_attn.q_proj.weight", 8192, 5376, -1);
  ft_assert_param(m, LM "layers.0.self_attn.k_proj.weight", 4096, 5376, -1);
  ft_assert_param(m, LM "layers.0.self_attn.v_proj.weight", 4096, 5376, -1);
  ft_assert_param(m, LM "layers.0.self_attn.o_proj.weight", 5376, 8192, -1);
  ft_assert_param(m, LM "layers.0.self_attn.q_norm.weight", 256, -1, -1);
  ft_assert_param(m, LM "layers.5.self_attn.q_proj.weight", 16384, 5376, -1);
  ft_assert_param(m, LM "layers.5.self_attn.k_proj.weight", 2048, 5376, -1);
  ft_assert_param(m, LM "layers.5.self_attn.o_proj.weight", 5376, 16384, -1);
  ft_assert_param(m, LM "layers.5.self_attn.k_norm.weight", 512, -1, -1);
  assert_absent(m, LM "layers.5.self_attn.v_proj.weight");
  ft_assert_param(m, LM "layers.30.mlp.gate_proj.weight", 21504, 5376, -1);
  ft_assert_param(m, LM "layers.30.mlp.down_proj.weight", 5376, 21504, -1);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

START_TEST(test_31b_vision) {
  tpx_registry *reg = ft_registry(FAM);
  tpx_model *m = ft_skeleton(reg, FAM, "gemma-4-31B-it.json");
  const char *V = "model.vision_tower.";
  char f[256];
  tpx_param_info pi;
  /* the tower comes first, its own standardize buffers before children */
  ck_assert_int_eq(tpx_model_param(m, 0, &pi, NULL), TPX_OK);
  ck_assert_str_eq(pi.fqn, "model.vision_tower.std_bias");
  ck_assert_int_eq(pi.dtype, TPX_DTYPE_BF16);
  ft_assert_param(m, "model.vision_tower.std_scale", 1152, -1, -1);
  snprintf(f, sizeof f, "%spatch_embedder.position_embedding_table", V);
  ft_assert_param(m, f, 2, 10240, 1152);
  snprintf(f, sizeof f, "%spatch_embedder.input_proj.weight", V);
  ft_assert_param(m, f, 1152, 768, -1);
  snprintf(f, sizeof f, "%sencoder.layers.26.self_attn.q_proj.linear.weight",
           V);
  ft_assert_param(m, f, 1152, 1152, -1);
  snprintf(f, sizeof f, "%sencoder.layers.26.self_attn.k_norm.weight", V);
  ft_assert_param(m, f, 72, -1, -1);
  snprintf(f, sizeof f, "%sencoder.layers.0.mlp.down_proj.linear.weight", V);
  ft_assert_param(m, f, 1152, 4304, -1);
  /* use_clipped_linears is false: no clip bounds */
  snprintf(f, sizeof f, "%sencoder.layers.0.mlp.down_proj.input_min", V);
  assert_absent(m, f);
  ck_assert_uint_eq(ft_count_suffix(m, ".linear.weight"), 27 * 7);
  ft_assert_param(m, "model.embed_vision.embedding_projection.weight", 5376,
                  1152, -1);
  ck_assert_int_eq(
      ft_kind(m, "model.embed_vision.embedding_pre_projection_norm"),
      TPX_MODULE_NORM);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* ---- synthetic configs ---- */

typedef struct total_case {
  const char *config;
  int64_t total;
  size_t tensors; /* including the tied lm_head */
} total_case;

/* Totals recomputed by hand from the modeling code's shapes. */
static const total_case totals[] = {
    {"gemma4-dense.json", 553005702LL, 6 * 14 + 2 + 16 * 13 + 2 + 1 + 1},
    {"gemma4-e-series.json", 932882693LL, 5 * 17 + 2 + 3 + 1},
    {"gemma4-moe.json", 3067154692LL, 4 * 22 + 2 + 1},
};

START_TEST(test_synthetic_totals) {
  const total_case *c = &totals[_i];
  tpx_registry *reg = ft_registry(FAM);
  tpx_model *m = ft_skeleton(reg, FAM, c->config);
  ck_assert_int_eq(tpx_model_total_params(m), c->total);
  ck_assert_uint_eq(tpx_model_num_params(m), c->tensors);
  ft_assert_tied(m, "lm_head.weight", LM "embed_tokens.weight");
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

START_TEST(test_dense_shapes) {
  tpx_registry *reg = ft_registry(FAM);
  tpx_model *m = ft_skeleton(reg, FAM, "gemma4-dense.json");
  /* no attention_k_eq_v: the full layer keeps num_key_value_heads (8) and
   * v_proj, but takes global_head_dim (default 512) */
  ft_assert_param(m, LM "layers.0.self_attn.q_proj.weight", 1024, 1024, -1);
  ft_assert_param(m, LM "layers.0.self_attn.k_proj.weight", 512, 1024, -1);
  ft_assert_param(m, LM "layers.5.self_attn.q_proj.weight", 8192, 1024, -1);
  ft_assert_param(m, LM "layers.5.self_attn.k_proj.weight", 4096, 1024, -1);
  ft_assert_param(m, LM "layers.5.self_attn.v_proj.weight", 4096, 1024, -1);
  ft_assert_param(m, LM "layers.5.self_attn.q_norm.weight", 512, -1, -1);
  /* hidden_size_per_layer_input 0: no per-layer embeddings */
  ck_assert_int_eq(tpx_model_find_module(m, LM "embed_tokens_per_layer"), -1);
  assert_absent(m, LM "layers.0.per_layer_input_gate.weight");
  /* vision_config with defaults but its hidden size */
  ft_assert_param(m,
                  "model.vision_tower.encoder.layers.15.self_attn.q_proj."
                  "linear.weight",
                  768, 768, -1);
  ft_assert_param(m, "model.embed_vision.embedding_projection.weight", 1024,
                  768, -1);
  assert_absent(m, "model.vision_tower.std_bias");
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

START_TEST(test_eseries_shapes) {
  tpx_registry *reg = ft_registry(FAM);
  tpx_model *m = ft_skeleton(reg, FAM, "gemma4-e-series.json");
  static const char *const tail[] = {"embed_tokens_per_layer.weight",
                                     "per_layer_model_projection.weight",
                                     "per_layer_projection_norm.weight"};
  int64_t n = (int64_t)tpx_model_num_params(m);
  int64_t i;
  tpx_param_info pi;
  ft_assert_param(m, LM "embed_tokens_per_layer.weight", 262144, 5 * 256, -1);
  ft_assert_param(m, LM "per_layer_model_projection.weight", 5 * 256, 1536, -1);
  ft_assert_param(m, LM "per_layer_projection_norm.weight", 256, -1, -1);
  ck_assert_int_eq(ft_kind(m, LM "embed_tokens_per_layer"),
                   TPX_MODULE_EMBEDDING);
  ck_assert_uint_eq(ft_count_suffix(m, "per_layer_input_gate.weight"), 5);
  ft_assert_param(m, LM "layers.2.per_layer_input_gate.weight", 256, 1536, -1);
  ft_assert_param(m, LM "layers.2.per_layer_projection.weight", 1536, 256, -1);
  ft_assert_param(m, LM "layers.2.post_per_layer_input_norm.weight", 1536, -1,
                  -1);
  ft_assert_param(m, LM "layers.4.self_attn.q_proj.weight", 8 * 512, 1536, -1);
  ft_assert_param(m, LM "layers.4.self_attn.k_proj.weight", 2 * 512, 1536, -1);
  /* the text model's per-layer tensors follow norm; then lm_head */
  for (i = 0; i < 3; i++) {
    ck_assert_int_eq(tpx_model_param(m, n - 4 + i, &pi, NULL), TPX_OK);
    ck_assert_str_eq(pi.fqn + strlen(LM), tail[i]);
  }
  ck_assert_int_eq(tpx_model_param(m, n - 5, &pi, NULL), TPX_OK);
  ck_assert_str_eq(pi.fqn, LM "norm.weight");
  ck_assert_int_eq(tpx_model_find_module(m, "model.vision_tower"), -1);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

START_TEST(test_moe_shapes) {
  tpx_registry *reg = ft_registry(FAM);
  tpx_model *m = ft_skeleton(reg, FAM, "gemma4-moe.json");
  static const char *const moe_tail[] = {"router.scale",
                                         "router.per_expert_scale",
                                         "router.proj.weight",
                                         "experts.gate_up_proj",
                                         "experts.down_proj",
                                         "post_feedforward_layernorm_1.weight",
                                         "post_feedforward_layernorm_2.weight",
                                         "pre_feedforward_layernorm_2.weight"};
  size_t i, n = 0;
  char prefix[128];
  ft_assert_param(m, LM "layers.1.router.scale", 2048, -1, -1);
  ft_assert_param(m, LM "layers.1.router.per_expert_scale", 128, -1, -1);
  ft_assert_param(m, LM "layers.1.router.proj.weight", 128, 2048, -1);
  ft_assert_param(m, LM "layers.1.experts.gate_up_proj", 128, 2 * 704, 2048);
  ft_assert_param(m, LM "layers.1.experts.down_proj", 128, 2048, 704);
  /* the dense MLP stays, intermediate_size at its default 9216 */
  ft_assert_param(m, LM "layers.1.mlp.up_proj.weight", 9216, 2048, -1);
  /* hidden_size_per_layer_input null: no per-layer embeddings */
  ck_assert_int_eq(tpx_model_find_module(m, LM "embed_tokens_per_layer"), -1);
  /* the MoE tensors end each layer, in registration order */
  snprintf(prefix, sizeof prefix, "%slayers.3.", LM);
  for (i = 0; i < tpx_model_num_params(m); i++) {
    tpx_param_info pi;
    ck_assert_int_eq(tpx_model_param(m, (int64_t)i, &pi, NULL), TPX_OK);
    if (strncmp(pi.fqn, prefix, strlen(prefix)) == 0)
      n++;
  }
  {
    int64_t idx = tpx_model_find_param(m, LM "layers.3.router.scale");
    tpx_param_info pi;
    ck_assert_uint_eq(n, 22);
    for (i = 0; i < sizeof moe_tail / sizeof moe_tail[0]; i++) {
      ck_assert_int_eq(tpx_model_param(m, idx + (int64_t)i, &pi, NULL), TPX_OK);
      ck_assert_str_eq(pi.fqn + strlen(prefix), moe_tail[i]);
    }
  }
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* ---- inline configs: kv sharing, double-wide MLP, audio, clipping ---- */

static const char kv_shared_audio[] =
    "{\"architectures\": [\"" ARCH "\"], \"torch_dtype\": \"bfloat16\","
    " \"tie_word_embeddings\": false,"
    " \"text_config\": {\"hidden_size\": 64, \"intermediate_size\": 128,"
    "  \"num_hidden_layers\": 4, \"num_attention_heads\": 2,"
    "  \"num_key_value_heads\": 1, \"head_dim\": 16, \"global_head_dim\": 32,"
    "  \"vocab_size\": 100, \"vocab_size_per_layer_input\": 100,"
    "  \"hidden_size_per_layer_input\": 8, \"num_kv_shared_layers\": 2,"
    "  \"use_double_wide_mlp\": true,"
    "  \"layer_types\": [\"sliding_attention\", \"full_attention\","
    "                    \"sliding_attention\", \"sliding_attention\"]},"
    " \"vision_config\": {\"hidden_size\": 48, \"intermediate_size\": 96,"
    "  \"num_hidden_layers\": 1, \"num_attention_heads\": 3,"
    "  \"num_key_value_heads\": 3, \"head_dim\": 16, \"patch_size\": 4,"
    "  \"position_embedding_size\": 10, \"use_clipped_linears\": true},"
    " \"audio_config\": {\"hidden_size\": 32, \"num_hidden_layers\": 2,"
    "  \"num_attention_heads\": 4, \"subsampling_conv_channels\": [16, 8],"
    "  \"conv_kernel_size\": 5, \"output_proj_dims\": 24}}";

START_TEST(test_kv_shared_double_wide) {
  tpx_registry *reg = ft_registry(FAM);
  char msg[512] = "";
  tpx_model *m = inline_skeleton(reg, kv_shared_audio, msg, sizeof msg);
  ck_assert_msg(m != NULL, "%s", msg);
  /* layers 2 and 3 reuse earlier keys and values: no k/v tensors, and a
   * double-wide MLP */
  ft_assert_param(m, LM "layers.1.self_attn.k_proj.weight", 32, 64, -1);
  ft_assert_param(m, LM "layers.1.self_attn.q_proj.weight", 64, 64, -1);
  ft_assert_param(m, LM "layers.1.mlp.up_proj.weight", 128, 64, -1);
  assert_absent(m, LM "layers.2.self_attn.k_proj.weight");
  assert_absent(m, LM "layers.2.self_attn.v_proj.weight");
  assert_absent(m, LM "layers.3.self_attn.k_norm.weight");
  ft_assert_param(m, LM "layers.3.self_attn.q_norm.weight", 32, -1, -1);
  ft_assert_param(m, LM "layers.2.self_attn.q_norm.weight", 16, -1, -1);
  /* the last layer is forced to full attention */
  ft_assert_param(m, LM "layers.3.self_attn.q_proj.weight", 64, 64, -1);
  ft_assert_param(m, LM "layers.2.self_attn.q_proj.weight", 32, 64, -1);
  ft_assert_param(m, LM "layers.2.mlp.gate_proj.weight", 256, 64, -1);
  ft_assert_param(m, LM "layers.3.mlp.down_proj.weight", 64, 256, -1);
  ck_assert_uint_eq(ft_count_suffix(m, "self_attn.k_proj.weight"), 2);
  /* untied head */
  ft_assert_param(m, "lm_head.weight", 100, 64, -1);
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

START_TEST(test_audio_and_clipping) {
  tpx_registry *reg = ft_registry(FAM);
  char msg[512] = "";
  tpx_model *m = inline_skeleton(reg, kv_shared_audio, msg, sizeof msg);
  const char *A = "model.audio_tower.";
  char f[256];
  int64_t idx;
  tpx_param_info pi;
  static const char *const ffw[] = {
      "ffw_layer_1.input_min",     "ffw_layer_1.input_max",
      "ffw_layer_1.output_min",    "ffw_layer_1.output_max",
      "ffw_layer_1.linear.weight", "ffw_layer_2.input_min",
      "ffw_layer_2.input_max",     "ffw_layer_2.output_min",
      "ffw_layer_2.output_max",    "ffw_layer_2.linear.weight",
      "pre_layer_norm.weight",     "post_layer_norm.weight"};
  ck_assert_msg(m != NULL, "%s", msg);
  snprintf(f, sizeof f, "%ssubsample_conv_projection.layer0.conv.weight", A);
  idx = tpx_model_find_param(m, f);
  ck_assert_int_ge(idx, 0);
  ck_assert_int_eq(tpx_model_param(m, idx, &pi, NULL), TPX_OK);
  ck_assert_int_eq(pi.ndim, 4);
  ck_assert_int_eq(pi.shape[0], 16);
  ck_assert_int_eq(pi.shape[1], 1);
  ck_assert_int_eq(pi.shape[2], 3);
  ck_assert_int_eq(pi.shape[3], 3);
  snprintf(f, sizeof f, "%ssubsample_conv_projection.layer1.conv.weight", A);
  ck_assert_int_eq(tpx_model_param(m, tpx_model_find_param(m, f), &pi, NULL),
                   TPX_OK);
  ck_assert_int_eq(pi.shape[0], 8);
  ck_assert_int_eq(pi.shape[1], 16);
  snprintf(f, sizeof f, "%ssubsample_conv_projection.layer1.norm.weight", A);
  ft_assert_param(m, f, 8, -1, -1);
  snprintf(f, sizeof f, "%ssubsample_conv_projection.input_proj_linear.weight",
           A);
  ft_assert_param(m, f, 32, (16 / 4) * 8, -1);
  snprintf(f, sizeof f, "%slayers.1.self_attn.per_dim_scale", A);
  ft_assert_param(m, f, 8, -1, -1);
  snprintf(f, sizeof f, "%slayers.1.self_attn.relative_k_proj.weight", A);
  ft_assert_param(m, f, 32, 32, -1);
  snprintf(f, sizeof f, "%slayers.1.self_attn.post.linear.weight", A);
  ft_assert_param(m, f, 32, 32, -1);
  snprintf(f, sizeof f, "%slayers.1.lconv1d.linear_start.linear.weight", A);
  ft_assert_param(m, f, 64, 32, -1);
  snprintf(f, sizeof f, "%slayers.1.lconv1d.depthwise_conv1d.weight", A);
  ft_assert_param(m, f, 32, 1, 5);
  snprintf(f, sizeof f, "%slayers.0.feed_forward2.ffw_layer_1.input_max", A);
  ft_assert_param(m, f, -1, -1, -1); /* a 0-d clip bound */
  snprintf(f, sizeof f, "%slayers.0.feed_forward1.", A);
  ft_assert_param_order(m, f, ffw, sizeof ffw / sizeof ffw[0]);
  snprintf(f, sizeof f, "%soutput_proj.weight", A);
  ft_assert_param(m, f, 24, 32, -1);
  snprintf(f, sizeof f, "%soutput_proj.bias", A);
  ft_assert_param(m, f, 24, -1, -1);
  ft_assert_param(m, "model.embed_audio.embedding_projection.weight", 64, 24,
                  -1);
  /* one output_min per clippable linear: 10 per audio layer, 7 per vision
   * layer */
  ck_assert_uint_eq(ft_count_suffix(m, ".output_min"), 2 * 10 + 7);
  ft_assert_param(m,
                  "model.vision_tower.encoder.layers.0.self_attn.o_proj."
                  "output_min",
                  -1, -1, -1);
  ft_assert_param(m, "model.vision_tower.patch_embedder.input_proj.weight", 48,
                  3 * 4 * 4, -1);
  /* Gemma4Model order: vision tower, language model, audio tower, then the
   * embedders; the untied lm_head last */
  {
    int64_t v = tpx_model_find_module(m, "model.vision_tower");
    int64_t l = tpx_model_find_module(m, "model.language_model");
    int64_t a = tpx_model_find_module(m, "model.audio_tower");
    int64_t ev = tpx_model_find_module(m, "model.embed_vision");
    int64_t ea = tpx_model_find_module(m, "model.embed_audio");
    ck_assert(v >= 0 && v < l && l < a && a < ev && ev < ea);
  }
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* ---- bad input ---- */

typedef struct bad_case {
  const char *json, *needle;
} bad_case;

static const bad_case bad[] = {
    {"{\"architectures\": [\"" ARCH "\"], \"text_config\": {"
     "\"num_hidden_layers\": 3, \"layer_types\": [\"full_attention\"]}}",
     "layer_types"},
    {"{\"architectures\": [\"" ARCH "\"], \"text_config\": {"
     "\"num_hidden_layers\": 1, \"layer_types\": [\"chunked_attention\"]}}",
     "chunked_attention"},
    {"{\"architectures\": [\"" ARCH "\"], \"text_config\": {"
     "\"enable_moe_block\": true, \"num_experts\": 4}}",
     "moe_intermediate_size"},
    {"{\"architectures\": [\"" ARCH "\"], \"text_config\": {"
     "\"hidden_size\": \"wide\"}}",
     "hidden_size"},
    {"{\"architectures\": [\"" ARCH "\"], \"text_config\": {"
     "\"num_attention_heads\": 0}}",
     "heads 0"},
    {"{\"architectures\": [\"" ARCH "\"], \"vision_config\": {"
     "\"patch_size\": 0}}",
     "vision_config"},
    {"{\"architectures\": [\"" ARCH "\"], \"audio_config\": {"
     "\"subsampling_conv_channels\": [128]}}",
     "subsampling_conv_channels"},
};

START_TEST(test_bad_config) {
  tpx_registry *reg = ft_registry(FAM);
  char msg[512] = "";
  tpx_model *m = inline_skeleton(reg, bad[_i].json, msg, sizeof msg);
  ck_assert_msg(m == NULL, "case %d built a skeleton", _i);
  ck_assert_msg(strstr(msg, bad[_i].needle) != NULL, "case %d: %s", _i, msg);
  tpx_registry_destroy(reg);
}
END_TEST

/* Absent keys take Gemma4TextConfig's defaults: 30 layers (full every 6th),
 * and per-layer embeddings (hidden_size_per_layer_input defaults to 256). */
START_TEST(test_defaults) {
  tpx_registry *reg = ft_registry(FAM);
  char msg[512] = "";
  tpx_model *m = inline_skeleton(
      reg, "{\"architectures\": [\"" ARCH "\"], \"text_config\": {}}", msg,
      sizeof msg);
  ck_assert_msg(m != NULL, "%s", msg);
  ck_assert_int_eq(
      tpx_model_module_num_children(m, tpx_model_find_module(m, LM "layers")),
      30);
  ft_assert_param(m, LM "layers.4.self_attn.q_proj.weight", 8 * 256, 2304, -1);
  ft_assert_param(m, LM "layers.5.self_attn.q_proj.weight", 8 * 512, 2304, -1);
  ft_assert_param(m, LM "embed_tokens_per_layer.weight", 262144, 30 * 256, -1);
  ft_assert_tied(m, "lm_head.weight", LM "embed_tokens.weight");
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* ---- the plan against the tree ---- */

static const char *const plan_configs[] = {
    "gemma-4-31B-it.json", "gemma4-dense.json", "gemma4-e-series.json"};

START_TEST(test_plan_keys_match_tp2) {
  tpx_registry *reg = ft_registry(FAM);
  tpx_model *m = ft_skeleton(reg, FAM, plan_configs[_i]);
  tpx_plan *plan = ft_plan_ok(reg, m, ARCH, 0, 2);
  ck_assert_int_eq(ft_select_diag(reg, m, 0, 2, "unmatched-key"), -1);
  ck_assert_int_eq(ft_select_diag(reg, m, 0, 2, "plugin-refused"), -1);
  ck_assert_int_eq(ft_select_diag(reg, m, 0, 2, "heads-not-divisible"), -1);
  tpx_plan_destroy(plan);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* The published 31B at tp 2: no diagnostic at all (tied embedding and
 * colwise lm_head agree). */
START_TEST(test_31b_tp2_clean) {
  tpx_registry *reg = ft_registry(FAM);
  tpx_model *m = ft_skeleton(reg, FAM, "gemma-4-31B-it.json");
  ck_assert_int_eq(ft_select_diag(reg, m, 0, 2, "tied-embeddings"), -1);
  ck_assert_int_eq(ft_select_diag(reg, m, 0, 2, "default-plan-fallback"), -1);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* The conformance harness with the Gemma4 configs whose plans it accepts
 * (the E-series plan drops lm_head while it stays tied to the sharded
 * embedding; the harness flags that tie, see the report). */
START_TEST(test_check_plugin_gemma4) {
  static const char *const files[] = {"gemma-4-31B-it.json",
                                      "gemma4-dense.json", "gemma4-moe.json"};
  ft_assert_harness(FAM, files, sizeof files / sizeof files[0]);
}
END_TEST

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

static Suite *gemma4_suite(void) {
  Suite *s = suite_create("gemma4-skeleton");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_31b_totals);
  tcase_add_test(tc, test_31b_layers);
  tcase_add_test(tc, test_31b_vision);
  tcase_add_loop_test(tc, test_synthetic_totals, 0, N(totals));
  tcase_add_test(tc, test_dense_shapes);
  tcase_add_test(tc, test_eseries_shapes);
  tcase_add_test(tc, test_moe_shapes);
  tcase_add_test(tc, test_kv_shared_double_wide);
  tcase_add_test(tc, test_audio_and_clipping);
  tcase_add_loop_test(tc, test_bad_config, 0, N(bad));
  tcase_add_test(tc, test_defaults);
  tcase_add_loop_test(tc, test_plan_keys_match_tp2, 0, N(plan_configs));
  tcase_add_test(tc, test_31b_tp2_clean);
  tcase_add_test(tc, test_check_plugin_gemma4);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(gemma4_suite());
  int failed;
  srunner_run_all(sr, CK_NORMAL);
  failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
