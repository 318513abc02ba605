/* test_nemotron.c — the nemotron family plugin through the real host: the
 * NemotronHForCausalLM strategy plan (docs/SEMANTICS.md "Family plans": root
 * lm_head plus mixer.up_proj / down_proj of every MLP block of the hybrid
 * pattern, blocks under backbone. or model., sequence parallel refused), its
 * FSDP units (one per block) and fp32 parameters (MoE router bias), the
 * NemotronLabsDiffusionModel plan ("Family plans", prefix encoder, head
 * diffusion_head; sp off and on); skeletons of Nemotron-H-8B-Base-8K
 * (8,100,852,736 parameters), a MoE and a transformers-v5-style config and
 * Nemotron-Labs-Diffusion-3B (3,831,659,520); per-rank bytes for tp = 2, 4, 8;
 * bad patterns. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include <jansson.h>

#include <check.h>

#include "famtest.h"
#include "tpx/checkpoint.h"
#include "tpx/checkpoint_shard.h"
#include "tpx/diag.h"
#include "tpx/plugin.h"

#define FAM "nemotron"
#define NH "NemotronHForCausalLM"
#define ND "NemotronLabsDiffusionModel"
#define NH8B "Nemotron-H-8B-Base-8K.json"

START_TEST(test_registration) {
  tpx_registry *reg = ft_registry(FAM);
  tpx_plugin_desc d;
  ck_assert_int_eq(tpx_registry_plugin(reg, 0, &d, NULL), TPX_OK);
  ck_assert_str_eq(d.name, "nemotron");
  ck_assert_uint_eq(d.abi_version, TPX_PLUGIN_ABI_CURRENT);
  ck_assert_uint_eq(d.num_architectures, 2);
  ck_assert_str_eq(d.architectures[0], NH);
  ck_assert_str_eq(d.architectures[1], ND);
  ck_assert_int_eq(d.has_skeleton, 1);
  ck_assert_int_eq(d.has_fsdp_units, 1);
  ck_assert_int_eq(d.has_fp32_params, 1);
  ck_assert_int_eq(d.has_validate, 1);
  ck_assert_int_eq(tpx_registry_find(reg, NH), 0);
  ck_assert_int_eq(tpx_registry_find(reg, ND), 0);
  ck_assert_int_eq(tpx_registry_find(reg, "NemotronForCausalLM"), -1);
  tpx_registry_destroy(reg);
}
END_TEST

typedef struct plan_case {
  const char *config, *arch;
  int sp, skeleton;
  int64_t tp;
  const char *golden;
} plan_case;

static const plan_case plan_cases[] = {
    /* config only (empty tree): the published "backbone." layout */
    {NH8B, NH, 0, 0, 1, "plan-nemotron-h-8b.json"},
    {NH8B, NH, 0, 0, 2, "plan-nemotron-h-8b.json"},
    /* with the skeleton the tree has backbone.layers */
    {NH8B, NH, 0, 1, 8, "plan-nemotron-h-8b.json"},
    /* MoE and attention blocks stay replicated */
    {"nemotron-h-moe-tiny.json", NH, 0, 1, 4, "plan-nemotron-h-moe-tiny.json"},
    /* transformers v5 layers_block_type names */
    {"nemotron-h-v5-list.json", NH, 0, 0, 2, "plan-nemotron-h-v5-list.json"},
    {"Nemotron-Labs-Diffusion-3B.json", ND, 0, 0, 2, "plan-diffusion-sp0.json"},
    {"Nemotron-Labs-Diffusion-3B.json", ND, 1, 0, 4, "plan-diffusion-sp1.json"},
    {"Nemotron-Labs-Diffusion-3B.json", ND, 1, 1, 1, "plan-diffusion-sp1.json"},
};

START_TEST(test_plans) {
  const plan_case *c = &plan_cases[_i];
  tpx_registry *reg = ft_registry(FAM);
  tpx_model *m = c->skeleton ? ft_skeleton(reg, FAM, c->config)
                             : ft_config(FAM, c->config);
  tpx_plan *plan = ft_plan_ok(reg, m, c->arch, c->sp, c->tp);
  ft_assert_golden(plan, FAM, c->golden);
  tpx_plan_destroy(plan);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* NemotronH skips validate_tp_mesh (any tp gets its plan); the diffusion
 * model runs under the Default strategy: at tp 16 (8 kv heads) its plan
 * function, which never looks at tp, gives the same plan, selection picks
 * it, and the host's validate_tp_mesh reports heads-not-divisible once. */
START_TEST(test_heads_at_tp16) {
  tpx_registry *reg = ft_registry(FAM);
  tpx_model *h = ft_config(FAM, NH8B);
  tpx_model *d = ft_skeleton(reg, FAM, "Nemotron-Labs-Diffusion-3B.json");
  tpx_plan *plan = ft_plan_ok(reg, h, NH, 0, 16);
  ft_assert_golden(plan, FAM, "plan-nemotron-h-8b.json");
  tpx_plan_destroy(plan);
  plan = ft_plan_ok(reg, d, ND, 0, 16);
  ft_assert_golden(plan, FAM, "plan-diffusion-sp0.json");
  tpx_plan_destroy(plan);
  ft_assert_plan_any_tp(reg, d, ND, 0, 16);
  ft_assert_plan_any_tp(reg, d, ND, 1, 16);
  ft_assert_selected_plugin(reg, d, 0, 16, FAM, "plan-diffusion-sp0.json", 1,
                            "num_key_value_heads (8) must be divisible by TP "
                            "size (16)");
  ft_assert_selected_plugin(reg, d, 1, 16, FAM, "plan-diffusion-sp1.json", 1,
                            NULL);
  tpx_model_destroy(d);
  tpx_model_destroy(h);
  tpx_registry_destroy(reg);
}
END_TEST

/* A model whose blocks live under model.layers (native Nemotron-V3 /
 * transformers v5 tree) gets model.-prefixed keys. */
START_TEST(test_plan_model_prefix) {
  tpx_registry *reg = ft_registry(FAM);
  tpx_model *m = ft_config(FAM, NH8B);
  tpx_plan *plan;
  tpx_plan_entry e;
  ck_assert_int_eq(tpx_model_add_module(m, "model.layers.0.mixer",
                                        TPX_MODULE_CONTAINER, NULL, NULL),
                   TPX_OK);
  plan = ft_plan_ok(reg, m, NH, 0, 2);
  ck_assert_uint_eq(tpx_plan_size(plan), 1 + 2 * 24);
  ck_assert_int_eq(tpx_plan_get(plan, 1, &e, NULL), TPX_OK);
  ck_assert_str_eq(e.module, "model.layers.1.mixer.up_proj");
  ck_assert_int_eq(e.style.kind, TPX_STYLE_COLWISE);
  ck_assert_int_eq(tpx_plan_get(plan, 48, &e, NULL), TPX_OK);
  ck_assert_str_eq(e.module, "model.layers.51.mixer.down_proj");
  ck_assert_int_eq(e.style.kind, TPX_STYLE_ROWWISE);
  tpx_plan_destroy(plan);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

START_TEST(test_sequence_parallel_refused) {
  tpx_registry *reg = ft_registry(FAM);
  tpx_model *m = ft_config(FAM, _i == 0 ? NH8B : "nemotron-h-moe-tiny.json");
  char msg[1024];
  tpx_status st = TPX_OK;
  tpx_plan *plan = ft_plan(reg, m, NH, 1, 2, &st, msg, sizeof msg);
  ck_assert_ptr_null(plan);
  ck_assert_int_eq(st, TPX_PLUGIN);
  ck_assert_msg(strstr(msg, "refused") != NULL, "%s", msg);
  ck_assert_msg(strstr(msg, "Sequence parallelism is not supported for "
                            "NemotronHForCausalLM") != NULL,
                "%s", msg);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* The refusal also arrives as an error diagnostic through
 * tpx_plugin_validate, and a tied head gets a warning. */
START_TEST(test_validate_diagnostics) {
  tpx_registry *reg = ft_registry(FAM);
  tpx_model *m = ft_skeleton(reg, FAM, NH8B);
  tpx_model *t = NULL;
  static const char tied[] =
      "{\"architectures\": [\"NemotronHForCausalLM\"], "
      "\"hybrid_override_pattern\": \"M-\", \"tie_word_embeddings\": true}";
  ck_assert_int_eq(
      ft_select_diag(reg, m, 1, 2, "sequence-parallel-unsupported"),
      TPX_DIAG_ERROR);
  ck_assert_int_eq(
      ft_select_diag(reg, m, 0, 2, "sequence-parallel-unsupported"), -1);
  ck_assert_int_eq(ft_select_diag(reg, m, 0, 2, "tied-lm-head-not-retied"), -1);
  ck_assert_int_eq(tpx_model_create(&t, NULL), TPX_OK);
  ck_assert_int_eq(
      tpx_model_set_config(t, tied, sizeof tied - 1, "tied.json", NULL),
      TPX_OK);
  ck_assert_int_eq(ft_select_diag(reg, t, 0, 2, "tied-lm-head-not-retied"),
                   TPX_DIAG_WARNING);
  ck_assert_int_eq(ft_select_diag(reg, t, 0, 1, "tied-lm-head-not-retied"), -1);
  tpx_model_destroy(t);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

typedef struct bad_case {
  const char *json, *needle;
} bad_case;

static const bad_case bad_cases[] = {
    {"{\"architectures\": [\"NemotronHForCausalLM\"], "
     "\"hybrid_override_pattern\": \"M-X*\"}",
     "hybrid_override_pattern[2] is 'X'"},
    {"{\"architectures\": [\"NemotronHForCausalLM\"], \"layers_block_type\": "
     "[\"mamba\", \"conv\"]}",
     "layers_block_type[1]"},
};

/* A bad pattern fails the plan and the skeleton alike, naming the key. */
START_TEST(test_bad_pattern) {
  const bad_case *c = &bad_cases[_i];
  tpx_registry *reg = ft_registry(FAM);
  tpx_model *m = NULL;
  tpx_error err = {0};
  char msg[1024];
  tpx_status st = TPX_OK;
  ck_assert_int_eq(tpx_model_create(&m, NULL), TPX_OK);
  ck_assert_int_eq(
      tpx_model_set_config(m, c->json, strlen(c->json), "bad.json", NULL),
      TPX_OK);
  ck_assert_ptr_null(ft_plan(reg, m, NH, 0, 2, &st, msg, sizeof msg));
  ck_assert_int_eq(st, TPX_PLUGIN);
  ck_assert_msg(strstr(msg, c->needle) != NULL, "'%s' lacks '%s'", msg,
                c->needle);
  ck_assert_int_ne(tpx_registry_build_skeleton(reg, m, &err), TPX_OK);
  ck_assert_msg(strstr(err.message, c->needle) != NULL, "'%s' lacks '%s'",
                err.message, c->needle);
  ck_assert_uint_eq(tpx_model_num_params(m), 0);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

START_TEST(test_skeleton_8b) {
  tpx_registry *reg = ft_registry(FAM);
  tpx_model *m = ft_skeleton(reg, FAM, NH8B);
  int64_t li;
  tpx_param_info pi;
  ck_assert_int_eq(tpx_model_total_params(m), 8100852736LL);
  ck_assert_int_eq(tpx_model_total_bytes(m), 2 * 8100852736LL);
  ft_assert_param(m, "backbone.embeddings.weight", 131072, 4096, -1);
  ft_assert_param(m, "backbone.layers.0.norm.weight", 4096, -1, -1);
  /* Mamba2: in_proj 2*8192 + 2*8*128 + 128 = 18560 rows */
  ft_assert_param(m, "backbone.layers.0.mixer.in_proj.weight", 18560, 4096, -1);
  ft_assert_param(m, "backbone.layers.0.mixer.conv1d.weight", 10240, 1, 4);
  ft_assert_param(m, "backbone.layers.0.mixer.conv1d.bias", 10240, -1, -1);
  ft_assert_param(m, "backbone.layers.0.mixer.A_log", 128, -1, -1);
  ft_assert_param(m, "backbone.layers.0.mixer.D", 128, -1, -1);
  ft_assert_param(m, "backbone.layers.0.mixer.dt_bias", 128, -1, -1);
  ft_assert_param(m, "backbone.layers.0.mixer.norm.weight", 8192, -1, -1);
  ft_assert_param(m, "backbone.layers.0.mixer.out_proj.weight", 4096, 8192, -1);
  ft_assert_param(m, "backbone.layers.1.mixer.up_proj.weight", 21504, 4096, -1);
  ft_assert_param(m, "backbone.layers.1.mixer.down_proj.weight", 4096, 21504,
                  -1);
  ft_assert_param(m, "backbone.layers.7.mixer.q_proj.weight", 4096, 4096, -1);
  ft_assert_param(m, "backbone.layers.7.mixer.k_proj.weight", 1024, 4096, -1);
  ft_assert_param(m, "backbone.layers.40.mixer.o_proj.weight", 4096, 4096, -1);
  ft_assert_param(m, "backbone.norm_f.weight", 4096, -1, -1);
  ft_assert_param(m, "lm_head.weight", 131072, 4096, -1);
  li = tpx_model_find_param(m, "lm_head.weight");
  ck_assert_int_eq(tpx_model_param(m, li, &pi, NULL), TPX_OK);
  ck_assert_int_eq(pi.tied_to, -1);
  ck_assert_uint_eq(ft_count_suffix(m, "mixer.A_log"), 24);
  ck_assert_uint_eq(ft_count_suffix(m, "mixer.up_proj.weight"), 24);
  ck_assert_uint_eq(ft_count_suffix(m, "mixer.q_proj.weight"), 4);
  ck_assert_uint_eq(ft_count_suffix(m, ".norm.weight"), 52 + 24);
  ck_assert_int_eq(ft_kind(m, "backbone.layers.0.mixer"), TPX_MODULE_OTHER);
  ck_assert_int_eq(ft_kind(m, "backbone.layers.0.mixer.norm"), TPX_MODULE_NORM);
  ck_assert_int_eq(ft_kind(m, "backbone.embeddings"), TPX_MODULE_EMBEDDING);
  /* parameter order as torch's named_parameters(): the Mamba2 mixer's own
   * dt_bias / A_log / D before its submodules; MLP and attention blocks */
  {
    static const char *const mamba_block[] = {
        "norm.weight",          "mixer.dt_bias",
        "mixer.A_log",          "mixer.D",
        "mixer.conv1d.weight",  "mixer.conv1d.bias",
        "mixer.in_proj.weight", "mixer.norm.weight",
        "mixer.out_proj.weight"};
    static const char *const mlp_block[] = {
        "norm.weight", "mixer.up_proj.weight", "mixer.down_proj.weight"};
    static const char *const attn_block[] = {
        "norm.weight", "mixer.q_proj.weight", "mixer.k_proj.weight",
        "mixer.v_proj.weight", "mixer.o_proj.weight"};
    ft_assert_param_order(m, "backbone.layers.0.", mamba_block,
                          sizeof mamba_block / sizeof mamba_block[0]);
    ft_assert_param_order(m, "backbone.layers.1.", mlp_block,
                          sizeof mlp_block / sizeof mlp_block[0]);
    ft_assert_param_order(m, "backbone.layers.7.", attn_block,
                          sizeof attn_block / sizeof attn_block[0]);
  }
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

START_TEST(test_skeleton_moe_and_v5) {
  tpx_registry *reg = ft_registry(FAM);
  tpx_model *m = ft_skeleton(reg, FAM, "nemotron-h-moe-tiny.json");
  tpx_model *v5;
  int64_t bi;
  tpx_param_info pi;
  /* see SOURCE.txt: 2 Mamba, 2 MoE (4 experts + shared), 1 attention,
   * 1 MLP block */
  ck_assert_int_eq(tpx_model_total_params(m), 2570680);
  ft_assert_param(m, "backbone.layers.1.mixer.experts.3.up_proj.weight", 128,
                  256, -1);
  ft_assert_param(m, "backbone.layers.4.mixer.experts.0.down_proj.weight", 256,
                  128, -1);
  ft_assert_param(m, "backbone.layers.1.mixer.gate.weight", 4, 256, -1);
  ft_assert_param(m, "backbone.layers.1.mixer.shared_experts.up_proj.weight",
                  256, 256, -1);
  bi = tpx_model_find_param(m, "backbone.layers.4.mixer.gate."
                               "e_score_correction_bias");
  ck_assert_int_ge(bi, 0);
  ck_assert_int_eq(tpx_model_param(m, bi, &pi, NULL), TPX_OK);
  ck_assert_int_eq(pi.dtype, TPX_DTYPE_F32);
  ck_assert_int_eq(tpx_model_total_bytes(m), 2 * (2570680 - 8) + 4 * 8);
  ck_assert_uint_eq(ft_count_suffix(m, ".up_proj.weight"), 2 * 5 + 1);
  v5 = ft_skeleton(reg, FAM, "nemotron-h-v5-list.json");
  /* 355,928 + the untied 512 x 128 head */
  ck_assert_int_eq(tpx_model_total_params(v5), 421464);
  ft_assert_param(v5, "lm_head.weight", 512, 128, -1);
  ft_assert_param(v5, "backbone.layers.2.mixer.v_proj.weight", 64, 128, -1);
  ft_assert_param(v5, "backbone.layers.4.mixer.in_proj.weight", 292, 128, -1);
  tpx_model_destroy(v5);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

START_TEST(test_skeleton_diffusion) {
  tpx_registry *reg = ft_registry(FAM);
  tpx_model *m = ft_skeleton(reg, FAM, "Nemotron-Labs-Diffusion-3B.json");
  ck_assert_int_eq(tpx_model_total_params(m), 3831659520LL);
  ft_assert_param(m, "encoder.embed_tokens.weight", 131072, 3072, -1);
  ft_assert_param(m, "encoder.layers.25.self_attn.q_proj.weight", 4096, 3072,
                  -1);
  ft_assert_param(m, "encoder.layers.25.self_attn.k_proj.weight", 1024, 3072,
                  -1);
  ft_assert_param(m, "encoder.layers.0.mlp.gate_proj.weight", 9216, 3072, -1);
  ft_assert_param(m, "encoder.norm.weight", 3072, -1, -1);
  ft_assert_param(m, "diffusion_head.weight", 131072, 3072, -1);
  ck_assert_int_eq(ft_kind(m, "encoder.rotary_emb"), TPX_MODULE_ROTARY);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

typedef struct bytes_case {
  const char *config, *arch;
  int64_t tp, bytes;
} bytes_case;

/* bf16, 2 * (S / tp + R). Nemotron-H-8B: S = 4,764,729,344 (lm_head + 24
 * MLP blocks), R = 3,336,123,392 (embedding, Mamba and attention blocks,
 * norms). Diffusion-3B: S = 3,831,496,704, R = 162,816 (norms). */
static const bytes_case bytes_cases[] = {
    {NH8B, NH, 2, 11436976128LL},
    {NH8B, NH, 4, 9054611456LL},
    {NH8B, NH, 8, 7863429120LL},
    {"Nemotron-Labs-Diffusion-3B.json", ND, 2, 3831822336LL},
    {"Nemotron-Labs-Diffusion-3B.json", ND, 4, 1916073984LL},
    {"Nemotron-Labs-Diffusion-3B.json", ND, 8, 958199808LL},
};

START_TEST(test_rank_bytes) {
  const bytes_case *c = &bytes_cases[_i];
  tpx_registry *reg = ft_registry(FAM);
  tpx_model *m = ft_skeleton(reg, FAM, c->config);
  tpx_plan *plan = ft_plan_ok(reg, m, c->arch, 0, c->tp);
  ck_assert_int_eq(ft_rank_bytes(m, plan, c->tp, 0), c->bytes);
  ck_assert_int_eq(ft_rank_bytes(m, plan, c->tp, c->tp - 1), c->bytes);
  tpx_plan_destroy(plan);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* The per-rank bytes of `tpx plan` (the sharding takes the selection
 * whole, fp32 parameters included), tp only. Nemotron-H-8B: the plan-only
 * bytes of bytes_cases plus 2 bytes for each element of the 24 Mamba
 * mixers' A_log, D and dt_bias ([128] each), which are fp32 upstream and
 * replicated over tp: 24 * 3 * 128 * 2 = 18,432 (issue 18 item 1; before,
 * tpx counted them bf16 and these equalled bytes_cases). */
static const bytes_case fp32_bytes_cases[] = {
    {NH8B, NH, 2, 11436976128LL + 18432},
    {NH8B, NH, 4, 9054611456LL + 18432},
    {NH8B, NH, 8, 7863429120LL + 18432},
};

/* A tp-only sharding of m (no FSDP) under the selected plan. */
typedef struct tp_shard {
  tpx_selection *sel;
  tpx_diag_list *diags;
  tpx_mesh *mesh;
  tpx_sharding *sh;
} tp_shard;

static void tp_shard_make(tpx_registry *reg, tpx_model *m, int64_t tp,
                          tp_shard *t) {
  const char *names[1] = {"tp"};
  int64_t sizes[1] = {tp};
  tpx_select_options o = TPX_SELECT_OPTIONS_INIT;
  tpx_sharding_options so = TPX_SHARDING_OPTIONS_INIT;
  tpx_error err = {0};
  memset(t, 0, sizeof *t);
  o.tp_size = tp;
  ck_assert_int_eq(tpx_diag_list_create(&t->diags, &err), TPX_OK);
  ck_assert_msg(tpx_select_plan(reg, m, &o, &t->sel, t->diags, &err) == TPX_OK,
                "select: %s", err.message);
  ck_assert_int_eq(tpx_mesh_create(names, sizes, 1, &t->mesh, &err), TPX_OK);
  so.fsdp = 0;
  so.selection = t->sel;
  ck_assert_msg(tpx_sharding_create(m, tpx_selection_plan(t->sel), t->mesh, &so,
                                    &t->sh, &err) == TPX_OK,
                "sharding: %s", err.message);
}

static void tp_shard_free(tp_shard *t) {
  tpx_sharding_destroy(t->sh);
  tpx_mesh_destroy(t->mesh);
  tpx_selection_destroy(t->sel);
  tpx_diag_list_destroy(t->diags);
}

START_TEST(test_rank_bytes_fp32) {
  const bytes_case *c = &fp32_bytes_cases[_i];
  tpx_registry *reg = ft_registry(FAM);
  tpx_model *m = ft_skeleton(reg, FAM, c->config);
  tp_shard t;
  int64_t i;
  tp_shard_make(reg, m, c->tp, &t);
  for (i = 0; i < c->tp; i++)
    ck_assert_int_eq(tpx_sharding_rank_param_bytes(t.sh, i), c->bytes);
  tp_shard_free(&t);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* The name NeMo Automodel's own NemotronH class gives a checkpoint tensor:
 * model.* for backbone.*, and each Mamba mixer's A_log / D / dt_bias under
 * mixer._fp32_params. */
static void automodel_name(const char *fqn, char *out, size_t size) {
  static const char *const own[] = {".mixer.A_log", ".mixer.D",
                                    ".mixer.dt_bias"};
  const char *rest = fqn + 9;
  size_t k;
  if (strncmp(fqn, "backbone.", 9) != 0) { /* lm_head */
    snprintf(out, size, "%s", fqn);
    return;
  }
  for (k = 0; k < 3; k++) {
    const char *at = strstr(rest, own[k]);
    if (at != NULL && at[strlen(own[k])] == '\0') {
      snprintf(out, size, "model.%.*s.mixer._fp32_params.%s", (int)(at - rest),
               rest, own[k] + strlen(".mixer."));
      return;
    }
  }
  snprintf(out, size, "model.%s", rest);
}

/* A headers-only safetensors file (the data a sparse hole) holding every
 * stored parameter of `m` under Automodel's names. */
static void write_automodel_checkpoint(const tpx_model *m, const char *path) {
  json_t *hdr = json_object();
  int64_t off = 0;
  char name[512];
  size_t i, len, padded;
  unsigned char lb[8];
  char *text;
  FILE *f;
  for (i = 0; i < tpx_model_num_params(m); i++) {
    tpx_param_info p;
    tpx_error err = {0};
    json_t *shape = json_array();
    int64_t numel = 1;
    int d;
    ck_assert_int_eq(tpx_model_param(m, (int64_t)i, &p, &err), TPX_OK);
    if (p.tied_to >= 0) {
      json_decref(shape);
      continue;
    }
    for (d = 0; d < p.ndim; d++) {
      numel *= p.shape[d];
      json_array_append_new(shape, json_integer(p.shape[d]));
    }
    automodel_name(p.fqn, name, sizeof name);
    json_object_set_new(
        hdr, name,
        json_pack("{s:s,s:o,s:[I,I]}", "dtype",
                  p.dtype == TPX_DTYPE_F32 ? "F32" : "BF16", "shape", shape,
                  "data_offsets", (json_int_t)off,
                  (json_int_t)(off + tpx_dtype_size(p.dtype) * numel)));
    off += tpx_dtype_size(p.dtype) * numel;
  }
  text = json_dumps(hdr, JSON_COMPACT);
  json_decref(hdr);
  len = strlen(text);
  padded = (len + 7) / 8 * 8;
  f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  for (i = 0; i < 8; i++)
    lb[i] = (unsigned char)(((uint64_t)padded >> (8 * i)) & 0xff);
  ck_assert_int_eq(fwrite(lb, 1, 8, f), 8);
  ck_assert_int_eq(fwrite(text, 1, len, f), len);
  for (i = len; i < padded; i++) fputc(' ', f);
  fclose(f);
  free(text);
  ck_assert_int_eq(truncate(path, (off_t)(8 + padded + (size_t)off)), 0);
}

/* Removes the files of a flat directory, then it. */
static void remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *de;
  char p[512];
  while (d && (de = readdir(d)) != NULL)
    if (de->d_name[0] != '.' || de->d_name[1] > '.') {
      snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
      unlink(p);
    }
  if (d)
    closedir(d);
  rmdir(dir);
}

/* The checkpoint at `path`, stored under Automodel's names, read through
 * the aliases: every parameter found, sharded at tp 2 (rank files keep the
 * stored names) and merged back under them. */
static void shard_aliased(tpx_registry *reg, tpx_model *m, const char *path,
                          const char *dir) {
  tpx_checkpoint_reader *rd = NULL, *r0 = NULL;
  tpx_error err = {0};
  char out[300], merged[300], file[400];
  tp_shard t;
  ck_assert_int_eq(tpx_checkpoint_reader_create(path, NULL, &rd, &err), TPX_OK);
  ck_assert_msg(tpx_checkpoint_check_model(rd, m, &err) == TPX_OK, "%s",
                err.message);
  ck_assert_int_ge(
      tpx_checkpoint_param_tensor(
          rd, m, tpx_model_find_param(m, "backbone.norm_f.weight")),
      0);
  tp_shard_make(reg, m, 2, &t);
  snprintf(out, sizeof out, "%s/ranks", dir);
  snprintf(merged, sizeof merged, "%s/merged", dir);
  ck_assert_msg(tpx_shard_write(rd, t.sh, out, NULL, &err) == TPX_OK, "%s",
                err.message);
  snprintf(file, sizeof file, "%s/rank-00000-of-00002.safetensors", out);
  ck_assert_int_eq(tpx_checkpoint_reader_create(file, NULL, &r0, &err), TPX_OK);
  ck_assert_int_ge(tpx_checkpoint_find(r0, "model.norm_f.weight"), 0);
  ck_assert_int_lt(tpx_checkpoint_find(r0, "backbone.norm_f.weight"), 0);
  tpx_checkpoint_reader_destroy(r0);
  ck_assert_msg(tpx_shard_merge(out, merged, NULL, &err) == TPX_OK, "%s",
                err.message);
  ck_assert_int_eq(tpx_checkpoint_reader_create(merged, NULL, &r0, &err),
                   TPX_OK);
  ck_assert_uint_eq(tpx_checkpoint_num_tensors(r0),
                    tpx_checkpoint_num_tensors(rd));
  for (size_t i = 0; i < tpx_checkpoint_num_tensors(rd); i++) {
    tpx_checkpoint_tensor ct;
    ck_assert_int_eq(tpx_checkpoint_tensor_info(rd, i, &ct, NULL), TPX_OK);
    ck_assert_msg(tpx_checkpoint_find(r0, ct.name) >= 0, "%s not merged",
                  ct.name);
  }
  tpx_checkpoint_reader_destroy(r0);
  tpx_checkpoint_reader_destroy(rd);
  tp_shard_free(&t);
  remove_dir(out);
  remove_dir(merged);
}

/* Automodel's own names are aliases of the checkpoint's (issue 18 item 1):
 * the skeleton carries the plugin's two rules, a checkpoint written under
 * Automodel's names matches the skeleton tensor for tensor (nothing added),
 * and each name maps to the checkpoint's. */
START_TEST(test_automodel_names) {
  const char *cfg = _i == 0 ? NH8B : "nemotron-h-moe-tiny.json";
  tpx_registry *reg = ft_registry(FAM);
  tpx_model *m = ft_skeleton(reg, FAM, cfg);
  size_t params = tpx_model_num_params(m);
  int64_t bytes = tpx_model_total_bytes(m);
  const char *from = NULL, *to = NULL;
  char dir[] = "/tmp/tpx_nemotron_names_XXXXXX", path[256], buf[256];
  tpx_error err = {0};
  ck_assert_uint_eq(tpx_model_num_name_aliases(m), 2);
  ck_assert_int_eq(tpx_model_name_alias(m, 0, &from, &to, &err), TPX_OK);
  ck_assert_str_eq(from, "model.layers.*.mixer._fp32_params");
  ck_assert_str_eq(to, "backbone.layers.*.mixer");
  ck_assert_int_eq(tpx_model_name_alias(m, 1, &from, &to, &err), TPX_OK);
  ck_assert_str_eq(from, "model");
  ck_assert_str_eq(to, "backbone");
  ck_assert_int_eq(tpx_model_canonical_name(m,
                                            "model.layers.0.mixer."
                                            "_fp32_params.A_log",
                                            buf, sizeof buf),
                   1);
  ck_assert_str_eq(buf, "backbone.layers.0.mixer.A_log");
  ck_assert_int_eq(
      tpx_model_canonical_name(m, "model.embeddings.weight", buf, sizeof buf),
      1);
  ck_assert_str_eq(buf, "backbone.embeddings.weight");
  ck_assert_int_eq(
      tpx_model_canonical_name(m, "lm_head.weight", buf, sizeof buf), 0);
  ck_assert_str_eq(buf, "lm_head.weight");
  /* rules must be well formed */
  ck_assert_int_eq(tpx_model_add_name_alias(m, "a.*", "b", &err),
                   TPX_INVALID_ARGUMENT);
  ck_assert_int_eq(tpx_model_add_name_alias(m, "", "b", &err),
                   TPX_INVALID_ARGUMENT);
  ck_assert_int_ne(tpx_model_add_name_alias(m, "a..b", "c", &err), TPX_OK);
  ck_assert_uint_eq(tpx_model_num_name_aliases(m), 2);
  ck_assert_int_eq(tpx_model_name_alias(m, 2, &from, &to, &err),
                   TPX_OUT_OF_RANGE);
  ck_assert_int_eq(tpx_model_canonical_name(m, "model.a", buf, 4), -1);
  /* "modelx" is not the atom "model" */
  ck_assert_int_eq(tpx_model_canonical_name(m, "modelx.a", buf, sizeof buf), 0);
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  write_automodel_checkpoint(m, path);
  ck_assert_msg(tpx_model_add_safetensors(m, path, &err) == TPX_OK, "%s",
                err.message);
  ck_assert_uint_eq(tpx_model_num_params(m), params);
  ck_assert_int_eq(tpx_model_total_bytes(m), bytes);
  ck_assert_int_lt(tpx_model_find_param(m, "model.norm_f.weight"), 0);
  if (_i == 1) /* the tiny model: its bytes are written */
    shard_aliased(reg, m, path, dir);
  unlink(path);
  rmdir(dir);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* Neither hybrid_override_pattern nor layers_block_type: transformers'
 * default block types (mamba, moe, attention, mlp), so block 3 is the one
 * MLP block. */
START_TEST(test_default_pattern) {
  tpx_registry *reg = ft_registry(FAM);
  tpx_model *m = NULL;
  tpx_plan *plan;
  tpx_plan_entry e;
  static const char cfg[] =
      "{\"architectures\": [\"NemotronHForCausalLM\"], \"hidden_size\": 64}";
  ck_assert_int_eq(tpx_model_create(&m, NULL), TPX_OK);
  ck_assert_int_eq(tpx_model_set_config(m, cfg, sizeof cfg - 1, "d.json", NULL),
                   TPX_OK);
  plan = ft_plan_ok(reg, m, NH, 0, 2);
  ck_assert_uint_eq(tpx_plan_size(plan), 3);
  ck_assert_int_eq(tpx_plan_get(plan, 1, &e, NULL), TPX_OK);
  ck_assert_str_eq(e.module, "backbone.layers.3.mixer.up_proj");
  ck_assert_int_eq(tpx_plan_get(plan, 2, &e, NULL), TPX_OK);
  ck_assert_str_eq(e.module, "backbone.layers.3.mixer.down_proj");
  tpx_plan_destroy(plan);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* Selection carries the strategy's FSDP units (every block, reshard on)
 * and, with MoE blocks, the fp32 router bias. */
START_TEST(test_fsdp_units_and_fp32) {
  tpx_registry *reg = ft_registry(FAM);
  const char *cfg = _i == 0 ? NH8B : "nemotron-h-moe-tiny.json";
  size_t blocks = _i == 0 ? 52 : 6;
  tpx_model *m = ft_skeleton(reg, FAM, cfg);
  tpx_select_options opts = TPX_SELECT_OPTIONS_INIT;
  tpx_selection *sel = NULL;
  tpx_diag_list *diags = NULL;
  tpx_error err = {0};
  size_t i;
  opts.tp_size = 2;
  ck_assert_int_eq(tpx_diag_list_create(&diags, NULL), TPX_OK);
  if (tpx_select_plan(reg, m, &opts, &sel, diags, &err) != TPX_OK)
    ck_abort_msg("select: %s", err.message);
  ck_assert_int_eq(tpx_selection_source(sel), TPX_PLAN_SOURCE_PLUGIN);
  ck_assert_str_eq(tpx_selection_function(sel), "nemotron_h");
  ck_assert_uint_eq(tpx_selection_num_fsdp_units(sel), blocks);
  for (i = 0; i < blocks; i++) {
    char want[64];
    int reshard = -1;
    snprintf(want, sizeof want, "backbone.layers.%zu", i);
    ck_assert_str_eq(tpx_selection_fsdp_unit(sel, i, &reshard), want);
    ck_assert_int_eq(reshard, 1);
  }
  /* Every Mamba mixer's A_log, D and dt_bias are fp32 upstream (issue 18
   * item 1: Automodel's NemotronH class keeps them in _fp32_params); both
   * configs have Mamba blocks, the tiny one MoE blocks too. */
  ck_assert_uint_eq(tpx_selection_num_fp32(sel), _i == 0 ? 3 : 4);
  ck_assert_str_eq(tpx_selection_fp32(sel, 0), "backbone.layers.*.mixer.A_log");
  ck_assert_str_eq(tpx_selection_fp32(sel, 1), "backbone.layers.*.mixer.D");
  ck_assert_str_eq(tpx_selection_fp32(sel, 2),
                   "backbone.layers.*.mixer.dt_bias");
  if (_i == 1)
    ck_assert_str_eq(tpx_selection_fp32(sel, 3),
                     "backbone.layers.*.mixer.gate.e_score_correction_bias");
  tpx_selection_destroy(sel);
  tpx_diag_list_destroy(diags);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* NemotronHConfig: num_key_value_heads null means num_attention_heads,
 * absent means 8 (the host's config_has reports null as absent, so the
 * plugin looks at the keys themselves). */
typedef struct kv_case {
  const char *json;
  int64_t k_rows;
} kv_case;

#define NH_BASE                                                                \
  "\"architectures\": [\"NemotronHForCausalLM\"], \"torch_dtype\": "           \
  "\"bfloat16\", \"vocab_size\": 64, \"hidden_size\": 64, "                    \
  "\"intermediate_size\": 128, \"hybrid_override_pattern\": \"M*-\", "         \
  "\"num_attention_heads\": 4, \"head_dim\": 16, \"mamba_num_heads\": 4, "     \
  "\"mamba_head_dim\": 16, \"n_groups\": 1, \"ssm_state_size\": 8"

static const kv_case kv_cases[] = {
    {"{" NH_BASE ", \"num_key_value_heads\": null}", 4 * 16},
    {"{" NH_BASE "}", 8 * 16},
    {"{" NH_BASE ", \"num_key_value_heads\": 2}", 2 * 16},
};

START_TEST(test_kv_heads_null) {
  const kv_case *c = &kv_cases[_i];
  tpx_registry *reg = ft_registry(FAM);
  tpx_model *m = NULL;
  tpx_error err = {0};
  ck_assert_int_eq(tpx_model_create(&m, NULL), TPX_OK);
  ck_assert_int_eq(
      tpx_model_set_config(m, c->json, strlen(c->json), "kv.json", NULL),
      TPX_OK);
  ck_assert_msg(tpx_registry_build_skeleton(reg, m, &err) == TPX_OK, "%s",
                err.message);
  ft_assert_param(m, "backbone.layers.1.mixer.k_proj.weight", c->k_rows, 64,
                  -1);
  ft_assert_param(m, "backbone.layers.1.mixer.v_proj.weight", c->k_rows, 64,
                  -1);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* `tpx check-plugin` passes: the conformance harness on the synthetic
 * configs and on the real ones (skeleton, plan keys against it, heads,
 * ties, determinism, concurrency, capabilities). */
START_TEST(test_check_plugin) {
  static const char *const files[] = {
      "Nemotron-H-8B-Base-8K.json", "nemotron-h-moe-tiny.json",
      "nemotron-h-v5-list.json", "Nemotron-Labs-Diffusion-3B.json"};
  ft_assert_harness(FAM, files, sizeof files / sizeof files[0]);
}
END_TEST

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

static Suite *nemotron_suite(void) {
  Suite *s = suite_create("nemotron");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_registration);
  tcase_add_loop_test(tc, test_plans, 0, N(plan_cases));
  tcase_add_test(tc, test_plan_model_prefix);
  tcase_add_test(tc, test_heads_at_tp16);
  tcase_add_loop_test(tc, test_sequence_parallel_refused, 0, 2);
  tcase_add_test(tc, test_validate_diagnostics);
  tcase_add_loop_test(tc, test_bad_pattern, 0, N(bad_cases));
  tcase_add_test(tc, test_default_pattern);
  tcase_add_test(tc, test_skeleton_8b);
  tcase_add_loop_test(tc, test_kv_heads_null, 0, N(kv_cases));
  tcase_add_test(tc, test_skeleton_moe_and_v5);
  tcase_add_test(tc, test_skeleton_diffusion);
  tcase_add_loop_test(tc, test_rank_bytes, 0, N(bytes_cases));
  tcase_add_loop_test(tc, test_rank_bytes_fp32, 0, N(fp32_bytes_cases));
  tcase_add_loop_test(tc, test_automodel_names, 0, 2);
  tcase_add_loop_test(tc, test_fsdp_units_and_fp32, 0, 2);
  tcase_add_test(tc, test_check_plugin);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(nemotron_suite());
  int failed;
  srunner_run_all(sr, CK_NORMAL);
  failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
