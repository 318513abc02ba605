/* test_falcon_h1.c — the falcon_h1 family plugin through the real host: the
 * _parallelize_falcon_h1 plan (docs/SEMANTICS.md "Family plans": feed_forward
 * MLP names, Mamba2 mixer replicated, sp ignored, lm_head gathered to
 * Replicate) for both served names, the Falcon-H1-0.5B skeleton (521,411,104
 * parameters, the published 0.52B; Mamba shapes from mamba_d_ssm / n_heads /
 * d_state / n_groups / d_conv), per-rank bytes for tp = 2, 4, 8 and bad
 * configs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "famtest.h"
#include "tpx/plugin.h"

#define FAM "falcon_h1"
#define QF                                                                     \
  "transformers.models.falcon_h1.modeling_falcon_h1.FalconH1ForCausalLM"

START_TEST(test_registration) {
  tpx_registry *reg = ft_registry(FAM);
  tpx_plugin_desc d;
  ck_assert_int_eq(tpx_registry_plugin(reg, 0, &d, NULL), TPX_OK);
  ck_assert_str_eq(d.name, "falcon_h1");
  ck_assert_uint_eq(d.abi_version, TPX_PLUGIN_ABI_CURRENT);
  ck_assert_uint_eq(d.num_architectures, 2);
  ck_assert_str_eq(d.architectures[0], QF);
  ck_assert_str_eq(d.architectures[1], "FalconH1ForCausalLM");
  ck_assert_int_eq(d.has_skeleton, 1);
  ck_assert_int_eq(d.has_fsdp_units, 0);
  ck_assert_int_eq(tpx_registry_find(reg, "FalconH1ForCausalLM"), 0);
  ck_assert_int_eq(tpx_registry_find(reg, QF), 0);
  ck_assert_int_eq(tpx_registry_find(reg, "FalconForCausalLM"), -1);
  tpx_registry_destroy(reg);
}
END_TEST

typedef struct plan_case {
  const char *arch;
  int sp;
  int64_t tp;
} plan_case;

/* One plan whatever sp and tp are. */
static const plan_case plan_cases[] = {
    {"FalconH1ForCausalLM", 0, 1},
    {"FalconH1ForCausalLM", 1, 2},
    {QF, 0, 2},
    {QF, 1, 1},
};

START_TEST(test_plan) {
  const plan_case *c = &plan_cases[_i];
  tpx_registry *reg = ft_registry(FAM);
  tpx_model *m = ft_config(FAM, "Falcon-H1-0.5B.json");
  tpx_plan *plan = ft_plan_ok(reg, m, c->arch, c->sp, c->tp);
  ft_assert_golden(plan, FAM, "plan-falcon_h1.json");
  /* no key reaches into the Mamba branch */
  {
    size_t i;
    for (i = 0; i < tpx_plan_size(plan); i++) {
      tpx_plan_entry e;
      ck_assert_int_eq(tpx_plan_get(plan, i, &e, NULL), TPX_OK);
      ck_assert_ptr_null(strstr(e.module, "mamba"));
      ck_assert_int_ne(e.style.kind, TPX_STYLE_SEQUENCE_PARALLEL);
    }
  }
  tpx_plan_destroy(plan);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* 8 heads, 2 kv heads: at tp 4, 8 and 3 _parallelize_falcon_h1 (which never
 * looks at tp) gives the same plan, selection picks it, and the host's
 * validate_tp_mesh (Default strategy) reports heads-not-divisible once, as
 * an error. */
START_TEST(test_heads_indivisible) {
  static const int64_t tps[] = {4, 8, 3};
  tpx_registry *reg = ft_registry(FAM);
  tpx_model *m = ft_skeleton(reg, FAM, "Falcon-H1-0.5B.json");
  char want[128];
  tpx_plan *plan = ft_plan_ok(reg, m, "FalconH1ForCausalLM", _i % 2, tps[_i]);
  ft_assert_golden(plan, FAM, "plan-falcon_h1.json");
  tpx_plan_destroy(plan);
  ft_assert_plan_any_tp(reg, m, "FalconH1ForCausalLM", _i % 2, tps[_i]);
  snprintf(want, sizeof want,
           "num_key_value_heads (2) must be divisible by TP size (%lld)",
           (long long)tps[_i]);
  ft_assert_selected_plugin(reg, m, _i % 2, tps[_i], FAM, "plan-falcon_h1.json",
                            1, want);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* Both the trimmed fixture (no mamba_d_ssm) and the one carrying
 * mamba_d_ssm = 1536 give the same model. */
static const char *const skel_configs[] = {"Falcon-H1-0.5B.json",
                                           "Falcon-H1-0.5B-d_ssm.json"};

START_TEST(test_skeleton) {
  tpx_registry *reg = ft_registry(FAM);
  tpx_model *m = ft_skeleton(reg, FAM, skel_configs[_i]);
  /* conv_dim = 1536 + 2 * 1 * 128 = 1792; in_proj = 1536 + 1792 + 24 */
  ck_assert_int_eq(tpx_model_total_params(m), 521411104LL);
  ck_assert_int_eq(tpx_model_total_bytes(m), 2 * 521411104LL);
  /* per layer: 3 MLP + conv w/b + in_proj + dt_bias/A_log/D + out_proj +
   * 4 attention + 2 norms = 16; + embed, final norm, lm_head */
  ck_assert_uint_eq(tpx_model_num_params(m), 36 * 16 + 3);
  ft_assert_param(m, "model.embed_tokens.weight", 32784, 1024, -1);
  ft_assert_param(m, "lm_head.weight", 32784, 1024, -1);
  ft_assert_param(m, "model.layers.0.mamba.in_proj.weight", 3352, 1024, -1);
  ft_assert_param(m, "model.layers.0.mamba.conv1d.weight", 1792, 1, 4);
  ft_assert_param(m, "model.layers.0.mamba.conv1d.bias", 1792, -1, -1);
  ft_assert_param(m, "model.layers.0.mamba.dt_bias", 24, -1, -1);
  ft_assert_param(m, "model.layers.0.mamba.A_log", 24, -1, -1);
  ft_assert_param(m, "model.layers.0.mamba.D", 24, -1, -1);
  ft_assert_param(m, "model.layers.35.mamba.out_proj.weight", 1024, 1536, -1);
  ck_assert_int_eq(tpx_model_find_param(m, "model.layers.0.mamba.norm.weight"),
                   -1); /* mamba_rms_norm false */
  ck_assert_int_eq(tpx_model_find_param(m, "model.layers.0.mamba.in_proj.bias"),
                   -1);
  ft_assert_param(m, "model.layers.5.self_attn.q_proj.weight", 512, 1024, -1);
  ft_assert_param(m, "model.layers.5.self_attn.k_proj.weight", 128, 1024, -1);
  ft_assert_param(m, "model.layers.5.self_attn.o_proj.weight", 1024, 512, -1);
  ft_assert_param(m, "model.layers.9.feed_forward.gate_proj.weight", 2048, 1024,
                  -1);
  ft_assert_param(m, "model.layers.9.feed_forward.down_proj.weight", 1024, 2048,
                  -1);
  ft_assert_param(m, "model.layers.9.input_layernorm.weight", 1024, -1, -1);
  ft_assert_param(m, "model.layers.9.pre_ff_layernorm.weight", 1024, -1, -1);
  ft_assert_param(m, "model.final_layernorm.weight", 1024, -1, -1);
  {
    int64_t li = tpx_model_find_param(m, "lm_head.weight");
    tpx_param_info pi;
    ck_assert_int_eq(tpx_model_param(m, li, &pi, NULL), TPX_OK);
    ck_assert_int_eq(pi.tied_to, -1); /* untied */
  }
  ck_assert_int_eq(ft_kind(m, "model.rotary_emb"), TPX_MODULE_ROTARY);
  ck_assert_int_eq(ft_kind(m, "model.layers.0.mamba.in_proj"),
                   TPX_MODULE_LINEAR);
  ck_assert_int_eq(ft_kind(m, "model.layers.0.mamba"), TPX_MODULE_OTHER);
  /* module order inside a layer: feed_forward, mamba, self_attn, norms */
  {
    int64_t l0 = tpx_model_find_module(m, "model.layers.0");
    static const char *const order[] = {
        "model.layers.0.feed_forward", "model.layers.0.mamba",
        "model.layers.0.self_attn", "model.layers.0.input_layernorm",
        "model.layers.0.pre_ff_layernorm"};
    size_t i;
    ck_assert_uint_eq(tpx_model_module_num_children(m, l0), 5);
    for (i = 0; i < 5; i++)
      ck_assert_str_eq(
          tpx_model_module_fqn(m, tpx_model_module_child(m, l0, i)), order[i]);
  }
  /* parameter order as torch's named_parameters(): FalconH1Mixer's own
   * dt_bias / A_log / D come before its conv1d, in_proj and out_proj */
  {
    static const char *const params[] = {"feed_forward.gate_proj.weight",
                                         "feed_forward.up_proj.weight",
                                         "feed_forward.down_proj.weight",
                                         "mamba.dt_bias",
                                         "mamba.A_log",
                                         "mamba.D",
                                         "mamba.conv1d.weight",
                                         "mamba.conv1d.bias",
                                         "mamba.in_proj.weight",
                                         "mamba.out_proj.weight",
                                         "self_attn.q_proj.weight",
                                         "self_attn.k_proj.weight",
                                         "self_attn.v_proj.weight",
                                         "self_attn.o_proj.weight",
                                         "input_layernorm.weight",
                                         "pre_ff_layernorm.weight"};
    ft_assert_param_order(m, "model.layers.0.", params,
                          sizeof params / sizeof params[0]);
  }
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

typedef struct bytes_case {
  int64_t tp, bytes;
} bytes_case;

/* bf16, 2 * (S / tp + R): S = 340,819,968 (embedding, lm_head, attention
 * and MLP weights), R = 180,591,136 (the Mamba branch 36 x 5,014,344 plus
 * the norms). */
static const bytes_case bytes_cases[] = {
    {2, 702002240LL}, {4, 531592256LL}, {8, 446387264LL}};

START_TEST(test_rank_bytes) {
  const bytes_case *c = &bytes_cases[_i];
  tpx_registry *reg = ft_registry(FAM);
  tpx_model *m = ft_skeleton(reg, FAM, "Falcon-H1-0.5B.json");
  /* the plan is the same at every tp (tp 4 and 8 fail validate_tp_mesh for
   * the heads), so it is taken at tp 1 and its placements applied at c->tp */
  tpx_plan *plan = ft_plan_ok(reg, m, "FalconH1ForCausalLM", 0, 1);
  ck_assert_int_eq(ft_rank_bytes(m, plan, c->tp, 0), c->bytes);
  ck_assert_int_eq(ft_rank_bytes(m, plan, c->tp, c->tp - 1), c->bytes);
  tpx_plan_destroy(plan);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

typedef struct bad_case {
  const char *json, *needle;
} bad_case;

static const bad_case bad_cases[] = {
    /* heads * head_dim != d_ssm: transformers refuses this config */
    {"{\"architectures\": [\"FalconH1ForCausalLM\"], \"hidden_size\": 64, "
     "\"mamba_d_ssm\": 100, \"mamba_n_heads\": 8, \"mamba_d_head\": 16}",
     "mamba_d_ssm 100"},
    {"{\"architectures\": [\"FalconH1ForCausalLM\"], \"mamba_d_head\": "
     "\"big\"}",
     "mamba_d_head"},
    {"{\"architectures\": [\"FalconH1ForCausalLM\"], \"num_attention_heads\": "
     "0}",
     "num_attention_heads"},
};

START_TEST(test_bad_config) {
  const bad_case *c = &bad_cases[_i];
  tpx_registry *reg = ft_registry(FAM);
  tpx_model *m = NULL;
  tpx_error err = {0};
  ck_assert_int_eq(tpx_model_create(&m, NULL), TPX_OK);
  ck_assert_int_eq(
      tpx_model_set_config(m, c->json, strlen(c->json), "bad.json", NULL),
      TPX_OK);
  ck_assert_int_ne(tpx_registry_build_skeleton(reg, m, &err), TPX_OK);
  ck_assert_msg(strstr(err.message, c->needle) != NULL, "'%s' lacks '%s'",
                err.message, c->needle);
  ck_assert_uint_eq(tpx_model_num_params(m), 0);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* null is not absent: FalconH1Config resolves num_key_value_heads: null
 * to num_attention_heads (absent: 8) and mamba_d_ssm: null to
 * mamba_expand * hidden_size (absent: 1024). The host's config_has reports
 * null as absent, so the plugin must look at the keys themselves. */
typedef struct null_case {
  const char *json;
  const char *param;
  int64_t rows, cols;
  int64_t tp_ok; /* a tp the head counts allow (0: not checked) */
} null_case;

#define NULL_BASE                                                              \
  "\"architectures\": [\"FalconH1ForCausalLM\"], \"torch_dtype\": "            \
  "\"bfloat16\", \"vocab_size\": 256, \"hidden_size\": 64, "                   \
  "\"intermediate_size\": 128, \"num_hidden_layers\": 2, \"head_dim\": 16, "   \
  "\"mamba_n_heads\": 4, \"mamba_d_state\": 8, \"mamba_n_groups\": 1, "        \
  "\"mamba_expand\": 2, "

static const null_case null_cases[] = {
    /* kv null -> 16 heads: k_proj 16 * 16 rows; tp 16 divides both */
    {"{" NULL_BASE "\"num_attention_heads\": 16, \"num_key_value_heads\": "
     "null, \"mamba_d_ssm\": 64}",
     "model.layers.1.self_attn.k_proj.weight", 256, 64, 16},
    /* kv absent -> 8 */
    {"{" NULL_BASE "\"num_attention_heads\": 16, \"mamba_d_ssm\": 64}",
     "model.layers.1.self_attn.k_proj.weight", 128, 64, 8},
    /* d_ssm null -> 2 * 64 = 128 (d_head auto 32): out_proj [64, 128] */
    {"{" NULL_BASE "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
     "\"mamba_d_ssm\": null, \"mamba_d_head\": \"auto\"}",
     "model.layers.0.mamba.out_proj.weight", 64, 128, 0},
    /* in_proj: d_ssm 128 + conv_dim (128 + 2 * 8) + 4 heads = 276 rows */
    {"{" NULL_BASE "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
     "\"mamba_d_ssm\": null}",
     "model.layers.0.mamba.in_proj.weight", 276, 64, 0},
};

START_TEST(test_null_config_values) {
  const null_case *c = &null_cases[_i];
  tpx_registry *reg = ft_registry(FAM);
  tpx_model *m = NULL;
  tpx_error err = {0};
  ck_assert_int_eq(tpx_model_create(&m, NULL), TPX_OK);
  ck_assert_int_eq(
      tpx_model_set_config(m, c->json, strlen(c->json), "null.json", NULL),
      TPX_OK);
  ck_assert_msg(tpx_registry_build_skeleton(reg, m, &err) == TPX_OK, "%s",
                err.message);
  ft_assert_param(m, c->param, c->rows, c->cols, -1);
  if (c->tp_ok > 0) {
    /* the plan never looks at tp: the same at tp_ok and at 2 * tp_ok,
     * which does not divide the kv heads (validate_tp_mesh is the host's;
     * it reads a null count as absent, 0) */
    ft_assert_plan_any_tp(reg, m, "FalconH1ForCausalLM", 0, 2 * c->tp_ok);
  }
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* `tpx check-plugin` passes: the conformance harness on the synthetic
 * configs and on the real ones (skeleton, plan keys against it, heads,
 * ties, determinism, concurrency, capabilities). */
START_TEST(test_check_plugin) {
  static const char *const files[] = {"Falcon-H1-0.5B.json",
                                      "Falcon-H1-0.5B-d_ssm.json"};
  ft_assert_harness(FAM, files, sizeof files / sizeof files[0]);
}
END_TEST

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

static Suite *falcon_h1_suite(void) {
  Suite *s = suite_create("falcon_h1");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_registration);
  tcase_add_loop_test(tc, test_plan, 0, N(plan_cases));
  tcase_add_loop_test(tc, test_heads_indivisible, 0, 3);
  tcase_add_loop_test(tc, test_skeleton, 0, N(skel_configs));
  tcase_add_loop_test(tc, test_rank_bytes, 0, N(bytes_cases));
  tcase_add_loop_test(tc, test_bad_config, 0, N(bad_cases));
  tcase_add_loop_test(tc, test_null_config_values, 0, N(null_cases));
  tcase_add_test(tc, test_check_plugin);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(falcon_h1_suite());
  int failed;
  srunner_run_all(sr, CK_NORMAL);
  failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
