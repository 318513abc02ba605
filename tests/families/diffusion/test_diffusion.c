/* test_diffusion.c — the tpx_diffusion plugin through the real host:
 * selection by the config's "_class_name" (Diffusers configs have no
 * "architectures"), the plans of the strategies of docs/SEMANTICS.md "Family
 * plans" (Wan's fixed TP calls, Hunyuan / LTX2 without TP, QwenImage's
 * Default flow to the Diffusers class's own _tp_plan, bundled by the host),
 * the strategy properties (mixed-precision defaults, activation
 * checkpointing), validate_tp_mesh only where the flow runs it, the
 * QwenImage block check, skeletons checked
 * parameter by parameter against Diffusers 0.42.1 (params.txt written by
 * tests/data/families/diffusion/gen_params.py from the same configs with 2
 * layers) and full-size totals, and per-rank bytes that add up to the
 * checkpoint's total. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>
#include <jansson.h>

#include "fam_util.h"
#include "tpx/fsdp.h"
#include "tpx/mesh.h"
#include "tpx/plan.h"
#include "tpx/registry.h"
#include "tpx/sharding.h"
#include "tpx/validate.h"

#define FAM "diffusion"
#define WAN "WanTransformer3DModel"
#define HY "HunyuanVideo15Transformer3DModel"
#define LTX "LTX2VideoTransformer3DModel"
#define QI "QwenImageTransformer2DModel"

static const struct {
  const char *file, *arch;
  int64_t params; /* full-size parameter total */
  int64_t elt;    /* bytes per element of the checkpoint dtype */
} models[] = {
    /* No exact published count (the model card says 1.3B); Diffusers
     * 0.42.1 counts 1,418,996,800, which matches the published float32
     * transformer file of 5.68 GB. */
    {"Wan2.1-T2V-1.3B.config.json", WAN, 1418996800LL, 4},
    /* The model card says 8.3B; no exact published count: Diffusers
     * 0.42.1's count. */
    {"HunyuanVideo-1.5-480p_t2v.config.json", HY, 8326608160LL, 2},
    /* Config reconstructed from Diffusers 0.42.1 defaults (the LTX-2 19B
     * release); no exact published count for the transformer alone:
     * Diffusers' count. */
    {"LTX-2.config.json", LTX, 18876174592LL, 2},
    /* Published: Qwen/Qwen-Image's transformer, 20,430,401,088 parameters
     * (bfloat16, 40.86 GB over 9 safetensors shards). */
    {"Qwen-Image.config.json", QI, 20430401088LL, 2},
};
#define NMODELS (sizeof models / sizeof models[0])

static const struct {
  const char *config, *params;
} structures[] = {
    {"Wan2.1-T2V-1.3B.config.json", "Wan2.1-T2V-1.3B.params.txt"},
    {"HunyuanVideo-1.5-480p_t2v.config.json",
     "HunyuanVideo-1.5-480p_t2v.params.txt"},
    {"LTX-2.config.json", "LTX-2.params.txt"},
    {"Qwen-Image.config.json", "Qwen-Image.params.txt"},
    {"variant-wan-i2v.config.json", "variant-wan-i2v.params.txt"},
    {"variant-hunyuan-meanflow.config.json",
     "variant-hunyuan-meanflow.params.txt"},
    {"variant-ltx23.config.json", "variant-ltx23.params.txt"},
    {"variant-qwenimage-t-cond.config.json",
     "variant-qwenimage-t-cond.params.txt"},
};

/* The fixture config with its num_layers replaced (-1: kept). */
static tpx_model *config_with_layers(tpx_registry *reg, const char *file,
                                     int64_t layers, int skeleton) {
  char path[1024];
  json_error_t je;
  fam_data_path(path, sizeof path, FAM, file);
  json_t *cfg = json_load_file(path, 0, &je);
  ck_assert_msg(cfg != NULL, "%s: %s", path, je.text);
  if (layers >= 0)
    json_object_set_new(cfg, "num_layers", json_integer(layers));
  char *text = json_dumps(cfg, 0);
  json_decref(cfg);
  tpx_model *m = fam_model_json(text);
  free(text);
  tpx_error err = {0};
  if (skeleton)
    ck_assert_msg(tpx_registry_build_skeleton(reg, m, &err) == TPX_OK,
                  "skeleton of %s: %s", file, err.message);
  return m;
}

START_TEST(test_abi) { fam_check_abi(FAM); }
END_TEST

START_TEST(test_registration) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_plugin_desc d;
  tpx_error err = {0};
  ck_assert_int_eq(tpx_registry_plugin(reg, 0, &d, &err), TPX_OK);
  ck_assert_str_eq(d.name, "diffusion");
  ck_assert_uint_eq(d.num_architectures, 4);
  ck_assert_str_eq(d.architectures[0], WAN);
  ck_assert_str_eq(d.architectures[1], HY);
  ck_assert_str_eq(d.architectures[2], LTX);
  ck_assert_str_eq(d.architectures[3], QI);
  ck_assert(d.has_skeleton && d.has_validate);
  ck_assert(!d.has_fsdp_units && !d.has_fp32_params);
  ck_assert_int_eq(tpx_registry_plugin_has_strategy(reg, 0), 1);
  ck_assert_int_eq(tpx_registry_plugin_has_strategy(reg, 1), 0);
  ck_assert_int_eq(tpx_registry_plugin_has_strategy(NULL, 0), 0);
  tpx_registry_destroy(reg);
}
END_TEST

/* The config's _class_name is the architecture, and selects the plugin. */
START_TEST(test_class_name_selects) {
  tpx_registry *reg = fam_registry(FAM);
  for (size_t i = 0; i < NMODELS; i++) {
    tpx_model *m = fam_model(reg, FAM, models[i].file, 0);
    ck_assert_uint_eq(tpx_model_num_architectures(m), 1);
    ck_assert_str_eq(tpx_model_architecture(m, 0), models[i].arch);
    ck_assert_int_eq(tpx_registry_find(reg, models[i].arch), 0);
    tpx_model_destroy(m);
  }
  tpx_registry_destroy(reg);
}
END_TEST

/* Every parameter Diffusers creates, with its shape, and nothing else. */
START_TEST(test_skeleton_matches_diffusers) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = config_with_layers(reg, structures[_i].config, 2, 1);
  char path[1024], line[512];
  fam_data_path(path, sizeof path, FAM, structures[_i].params);
  FILE *f = fopen(path, "r");
  ck_assert_msg(f != NULL, "%s", path);
  int64_t n = 0;
  while (fgets(line, sizeof line, f)) {
    char name[400], shape[100];
    ck_assert_int_eq(sscanf(line, "%399s %99s", name, shape), 2);
    int64_t p = tpx_model_find_param(m, name);
    ck_assert_msg(p >= 0, "%s: Diffusers has %s, the skeleton does not",
                  structures[_i].config, name);
    tpx_param_info pi;
    ck_assert_int_eq(tpx_model_param(m, p, &pi, NULL), TPX_OK);
    char got[100] = "";
    size_t len = 0;
    for (int d = 0; d < pi.ndim; d++)
      len += (size_t)snprintf(got + len, sizeof got - len, "%s%lld",
                              d ? "x" : "", (long long)pi.shape[d]);
    ck_assert_msg(strcmp(got, shape) == 0, "%s: %s is %s, Diffusers %s",
                  structures[_i].config, name, got, shape);
    n++;
  }
  fclose(f);
  ck_assert_msg(fam_count_untied(m) == n,
                "%s: %lld skeleton params, %lld in "
                "Diffusers",
                structures[_i].config, (long long)fam_count_untied(m),
                (long long)n);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

START_TEST(test_totals) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = fam_model(reg, FAM, models[_i].file, 1);
  ck_assert_int_eq(tpx_model_total_params(m), models[_i].params);
  ck_assert_int_eq(tpx_model_total_bytes(m),
                   models[_i].params * models[_i].elt);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

typedef struct {
  const char *key, *style;
} key_case;

static void check_keys(const tpx_plan *plan, const key_case *want, size_t n) {
  ck_assert_uint_eq(tpx_plan_size(plan), n);
  for (size_t i = 0; i < n; i++) {
    tpx_plan_entry e;
    ck_assert_int_eq(tpx_plan_get(plan, i, &e, NULL), TPX_OK);
    ck_assert_str_eq(e.module, want[i].key);
    ck_assert_str_eq(tpx_style_kind_name(e.style.kind), want[i].style);
    ck_assert_msg(e.optional, "%s is not optional", e.module);
  }
}

/* Wan: the fixed calls in upstream order, torch default layouts, the same
 * with sequence parallelism (ignored) and at any tp. */
START_TEST(test_wan_plan) {
  static const key_case want[] = {
      {"condition_embedder.text_embedder.linear_1", "colwise"},
      {"condition_embedder.text_embedder.linear_2", "rowwise"},
      {"condition_embedder.time_embedder.linear_1", "colwise"},
      {"condition_embedder.time_embedder.linear_2", "rowwise"},
      {"condition_embedder.time_proj", "colwise"},
      {"blocks.*.ffn.net.0.proj", "colwise"},
      {"blocks.*.ffn.net.2", "rowwise"},
      {"proj_out", "rowwise"},
  };
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = fam_model(reg, FAM, models[0].file, 1);
  for (int sp = 0; sp <= 1; sp++)
    for (int64_t tp = 2; tp <= 8; tp *= 2) {
      tpx_plan *plan = NULL;
      char msg[256];
      ck_assert_int_eq(
          fam_plan(reg, m, WAN, NULL, sp, tp, &plan, msg, sizeof msg), TPX_OK);
      check_keys(plan, want, sizeof want / sizeof want[0]);
      tpx_plan_entry e;
      ck_assert_int_eq(tpx_plan_get(plan, 7, &e, NULL), TPX_OK);
      tpx_style row = tpx_style_default(TPX_STYLE_ROWWISE);
      ck_assert(tpx_style_equal(&e.style, &row));
      tpx_plan_destroy(plan);
    }
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* The plan selection chooses for `m` at tp 4 (a copy). */
static tpx_plan *selected_plan(tpx_registry *reg, const tpx_model *m, int sp) {
  tpx_select_options o = TPX_SELECT_OPTIONS_INIT;
  tpx_selection *sel = NULL;
  tpx_diag_list *diags = NULL;
  tpx_plan *plan = NULL;
  tpx_error err = {0};
  o.tp_size = 4;
  o.sequence_parallel = sp;
  ck_assert_int_eq(tpx_diag_list_create(&diags, &err), TPX_OK);
  ck_assert_int_eq(tpx_select_plan(reg, m, &o, &sel, diags, &err), TPX_OK);
  ck_assert_int_eq(tpx_plan_clone(tpx_selection_plan(sel), &plan, &err),
                   TPX_OK);
  tpx_selection_destroy(sel);
  tpx_diag_list_destroy(diags);
  return plan;
}

/* Hunyuan and LTX2: no plan at any tp. QwenImage: the plugin declines (no
 * plan function upstream) and the Hugging Face step takes the Diffusers
 * class's own _tp_plan: every block's attention and MLP projections, keys
 * from the root, plus the optional model.embed_tokens the step adds; not
 * head-sharding (its keys are not self_attn.*), so validate_tp_mesh does
 * not run. */
START_TEST(test_other_plans) {
  tpx_registry *reg = fam_registry(FAM);
  for (size_t i = 1; i < NMODELS; i++) {
    tpx_model *m = fam_model(reg, FAM, models[i].file, 1);
    for (int sp = 0; sp <= 1; sp++) {
      tpx_plan *plan = NULL;
      char msg[TPX_ERROR_MESSAGE_SIZE]; /* the plugin's path comes first */
      if (strcmp(models[i].arch, QI) != 0) {
        ck_assert_int_eq(fam_plan(reg, m, models[i].arch, NULL, sp, 4, &plan,
                                  msg, sizeof msg),
                         TPX_OK);
        ck_assert_uint_eq(tpx_plan_size(plan), 0);
        tpx_plan_destroy(plan);
        continue;
      }
      ck_assert_int_eq(
          fam_plan(reg, m, models[i].arch, NULL, sp, 4, &plan, msg, sizeof msg),
          TPX_PLUGIN);
      ck_assert_ptr_nonnull(strstr(msg, "no plan function upstream"));
      plan = selected_plan(reg, m, sp);
      ck_assert_uint_eq(tpx_plan_size(plan), 13);
      static const char *const col[] = {
          "transformer_blocks.*.attn.to_q",
          "transformer_blocks.*.attn.to_k",
          "transformer_blocks.*.attn.to_v",
          "transformer_blocks.*.attn.add_q_proj",
          "transformer_blocks.*.attn.add_k_proj",
          "transformer_blocks.*.attn.add_v_proj",
          "transformer_blocks.*.img_mlp.net.0.proj",
          "transformer_blocks.*.txt_mlp.net.0.proj"};
      static const char *const row[] = {"transformer_blocks.*.attn.to_out.0",
                                        "transformer_blocks.*.attn.to_add_out",
                                        "transformer_blocks.*.img_mlp.net.2",
                                        "transformer_blocks.*.txt_mlp.net.2"};
      for (size_t k = 0; k < sizeof col / sizeof col[0]; k++) {
        tpx_plan_entry e;
        int64_t at = tpx_plan_find(plan, col[k]);
        ck_assert_msg(at >= 0, "no %s", col[k]);
        ck_assert_int_eq(tpx_plan_get(plan, (size_t)at, &e, NULL), TPX_OK);
        ck_assert_int_eq(e.style.kind, TPX_STYLE_COLWISE);
        ck_assert(!e.optional);
      }
      for (size_t k = 0; k < sizeof row / sizeof row[0]; k++) {
        tpx_plan_entry e;
        int64_t at = tpx_plan_find(plan, row[k]);
        ck_assert_msg(at >= 0, "no %s", row[k]);
        ck_assert_int_eq(tpx_plan_get(plan, (size_t)at, &e, NULL), TPX_OK);
        ck_assert_int_eq(e.style.kind, TPX_STYLE_ROWWISE);
        ck_assert(!e.optional);
      }
      tpx_plan_entry emb;
      ck_assert_int_eq(
          tpx_plan_get(plan, (size_t)tpx_plan_find(plan, "model.embed_tokens"),
                       &emb, NULL),
          TPX_OK);
      ck_assert(emb.optional);
      ck_assert(!tpx_plan_is_head_sharded(plan));
      tpx_plan_destroy(plan);
    }
    tpx_model_destroy(m);
  }
  tpx_registry_destroy(reg);
}
END_TEST

/* validate_tp_mesh: never in the Wan / Hunyuan / LTX2 flows (12 and 16
 * heads at tp=5 pass); QwenImage's strategy runs the generic flow, which
 * checks the head counts at tp > 1 before choosing any plan (NeMo
 * Automodel 0.7.0), so its 24 heads at tp=5 are an error, with upstream's
 * message (a Diffusers config has no num_key_value_heads: upstream reads
 * num_attention_heads for it), although its Diffusers plan does not shard
 * heads by upstream's test (no self_attn.* key). The strategies' silent
 * behaviours are diagnostics. */
START_TEST(test_selection) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *wan = fam_model(reg, FAM, models[0].file, 1);
  tpx_model *hy = fam_model(reg, FAM, models[1].file, 1);
  tpx_model *ltx = fam_model(reg, FAM, models[2].file, 1);
  tpx_model *qi = fam_model(reg, FAM, models[3].file, 1);
  fam_check_selected(reg, wan, NULL, 0, 5, 0, FAM, NULL, "heads-not-divisible",
                     NULL, 0);
  fam_check_selected(reg, wan, NULL, 1, 2, 0, FAM, NULL,
                     "sequence-parallel-ignored", NULL, 1);
  fam_check_selected(reg, hy, NULL, 0, 5, 0, FAM, NULL, "heads-not-divisible",
                     NULL, 0);
  fam_check_selected(reg, hy, NULL, 0, 4, 0, FAM, NULL, "no-tensor-parallel",
                     "Hunyuan", 1);
  fam_check_selected(reg, hy, NULL, 0, 1, 0, FAM, NULL, "no-tensor-parallel",
                     NULL, 0);
  fam_check_selected(reg, ltx, NULL, 0, 3, 0, FAM, NULL, "no-tensor-parallel",
                     "LTX2", 1);
  fam_check_selected(reg, qi, NULL, 0, 5, 1, FAM, NULL, "heads-not-divisible",
                     "num_key_value_heads (24) must be divisible by TP size "
                     "(5)",
                     1);
  fam_check_selected(reg, qi, NULL, 0, 4, 1, FAM, NULL, "heads-not-divisible",
                     NULL, 0);
  fam_check_selected(reg, qi, NULL, 0, 4, 1, FAM, NULL, "no-tensor-parallel",
                     NULL, 0);
  fam_check_selected(reg, qi, NULL, 0, 4, 1, FAM, NULL,
                     "qwenimage-blocks-invalid", NULL, 0);
  tpx_model_destroy(wan);
  tpx_model_destroy(hy);
  tpx_model_destroy(ltx);
  tpx_model_destroy(qi);
  tpx_registry_destroy(reg);
}
END_TEST

/* The QwenImageEdit strategy's block check: no blocks is an error. */
START_TEST(test_qwenimage_blocks) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = config_with_layers(reg, "Qwen-Image.config.json", 0, 1);
  fam_check_selected(reg, m, NULL, 0, 1, 1, FAM, NULL,
                     "qwenimage-blocks-invalid", "missing or empty", 1);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* The strategy properties the host acts on and reports. */
START_TEST(test_strategy) {
  static const char *const out_dtype[NMODELS] = {"f32", "bf16", "bf16", "f32"};
  static const char *const name[NMODELS] = {"Wan", "Hunyuan", "LTX2",
                                            "QwenImageEdit"};
  static const char *const ac[NMODELS] = {"blocks[i]", "transformer_blocks[i]",
                                          "transformer_blocks[i]",
                                          "transformer_blocks[i]"};
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = fam_model(reg, FAM, models[_i].file, 1);
  tpx_select_options o = TPX_SELECT_OPTIONS_INIT;
  tpx_selection *sel = NULL;
  tpx_diag_list *diags = NULL;
  tpx_error err = {0};
  o.tp_size = 2;
  ck_assert_int_eq(tpx_diag_list_create(&diags, &err), TPX_OK);
  ck_assert_int_eq(tpx_select_plan(reg, m, &o, &sel, diags, &err), TPX_OK);
  const char *v = tpx_selection_strategy_value(sel, "name");
  ck_assert_ptr_nonnull(v);
  ck_assert_msg(strncmp(v, name[_i], strlen(name[_i])) == 0, "%s", v);
  ck_assert_str_eq(tpx_selection_strategy_value(sel, "mp_param_dtype"), "bf16");
  ck_assert_str_eq(tpx_selection_strategy_value(sel, "mp_reduce_dtype"), "f32");
  ck_assert_str_eq(tpx_selection_strategy_value(sel, "mp_output_dtype"),
                   out_dtype[_i]);
  v = tpx_selection_strategy_value(sel, "activation_checkpointing");
  ck_assert_msg(v && strstr(v, "whole block") && strstr(v, ac[_i]), "%s",
                v ? v : "(none)");
  if (_i == 1 || _i == 2)
    ck_assert_ptr_nonnull(
        strstr(tpx_selection_strategy_value(sel, "tensor_parallel"), "none"));
  tpx_selection_destroy(sel);
  tpx_diag_list_destroy(diags);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

static tpx_sharding *shard(const tpx_model *m, const tpx_plan *plan, int64_t dp,
                           int64_t tp, tpx_mesh **mesh) {
  const char *names[2] = {"dp_shard", "tp"};
  int64_t sizes[2] = {dp, tp};
  tpx_error err = {0};
  tpx_sharding *sh = NULL;
  ck_assert_int_eq(tpx_mesh_create(names, sizes, 2, mesh, &err), TPX_OK);
  ck_assert_msg(tpx_sharding_create(m, plan, *mesh, NULL, &sh, &err) == TPX_OK,
                "%s", err.message);
  return sh;
}

/* FSDP over dp: the ranks' bytes add up to the checkpoint's total. With TP,
 * one rank of each tp group: the per-rank split of the TP-local pieces adds
 * up to what fam_expected_rank_bytes says the tp rank holds. */
START_TEST(test_rank_bytes) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = fam_model(reg, FAM, models[_i].file, 1);
  tpx_plan *plan = NULL;
  char msg[256];
  if (_i == 3) /* QwenImage: the host's Hugging Face step */
    plan = selected_plan(reg, m, 0);
  else
    ck_assert_int_eq(
        fam_plan(reg, m, models[_i].arch, NULL, 0, 2, &plan, msg, sizeof msg),
        TPX_OK);
  tpx_mesh *mesh = NULL;
  tpx_sharding *sh = shard(m, plan, 8, 1, &mesh);
  int64_t sum = 0;
  for (int64_t r = 0; r < 8; r++) sum += tpx_sharding_rank_param_bytes(sh, r);
  ck_assert_int_eq(sum, tpx_model_total_bytes(m));
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  sh = shard(m, plan, 3, 2, &mesh);
  for (int64_t t = 0; t < 2; t++) {
    int64_t got = 0;
    for (int64_t d = 0; d < 3; d++)
      got += tpx_sharding_rank_param_bytes(sh, d * 2 + t);
    ck_assert_int_eq(got, fam_expected_rank_bytes(m, plan, 2, t));
  }
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  if (_i == 0 || _i == 3) /* the TP split itself, tp = 2, 4, 8 */
    fam_check_rank_bytes(m, plan);
  else /* no TP: a tp rank holds the whole model */
    ck_assert_int_eq(fam_expected_rank_bytes(m, plan, 4, 3),
                     tpx_model_total_bytes(m));
  tpx_plan_destroy(plan);
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* FSDP units: the recursive rule on the Diffusers trees (Hunyuan's token
 * refiner blocks are a module list reached through plain modules; Wan I2V's
 * image-embedder FeedForward net, dropout included, too). */
START_TEST(test_fsdp_units) {
  tpx_registry *reg = fam_registry(FAM);
  static const struct {
    const char *file;
    size_t units;
    const char *first, *last_layer;
  } cases[] = {
      {"Wan2.1-T2V-1.3B.config.json", 31, "blocks.0", "blocks.29"},
      {"HunyuanVideo-1.5-480p_t2v.config.json", 57,
       "context_embedder.token_refiner.refiner_blocks.0",
       "transformer_blocks.53"},
      {"LTX-2.config.json", 49, "transformer_blocks.0",
       "transformer_blocks.47"},
      {"Qwen-Image.config.json", 61, "transformer_blocks.0",
       "transformer_blocks.59"},
      {"variant-wan-i2v.config.json", 6,
       "condition_embedder.image_embedder.ff.net.0", "blocks.1"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tpx_model *m = fam_model(reg, FAM, cases[i].file, 1);
    tpx_mesh *mesh = NULL;
    tpx_sharding *sh = shard(m, NULL, 2, 1, &mesh);
    tpx_fsdp_unit u;
    ck_assert_uint_eq(tpx_sharding_num_fsdp_units(sh), cases[i].units);
    ck_assert_int_eq(tpx_sharding_fsdp_unit(sh, 0, &u, NULL), TPX_OK);
    ck_assert_str_eq(u.fqn, cases[i].first);
    ck_assert_int_eq(tpx_sharding_fsdp_unit(sh, cases[i].units - 2, &u, NULL),
                     TPX_OK);
    ck_assert_str_eq(u.fqn, cases[i].last_layer);
    ck_assert_int_eq(u.reshard_after_forward, 0);
    tpx_sharding_destroy(sh);
    tpx_mesh_destroy(mesh);
    tpx_model_destroy(m);
  }
  tpx_registry_destroy(reg);
}
END_TEST

/* Own-flow strategies ignore tp_shard_plan (custom or named); the Default
 * subclass (QwenImage) applies a custom plan. */
START_TEST(test_custom_plan) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_plan *custom = NULL;
  tpx_error err = {0};
  tpx_style col = tpx_style_default(TPX_STYLE_COLWISE);
  ck_assert_int_eq(tpx_plan_create(&custom, &err), TPX_OK);
  ck_assert_int_eq(tpx_plan_set(custom, "proj_out", &col, 0, &err), TPX_OK);
  for (size_t i = 0; i < NMODELS; i++) {
    int own = strcmp(models[i].arch, QI) != 0;
    for (int named = 0; named <= own; named++) {
      tpx_model *m = fam_model(reg, FAM, models[i].file, 1);
      tpx_select_options o = TPX_SELECT_OPTIONS_INIT;
      tpx_selection *sel = NULL;
      tpx_diag_list *diags = NULL;
      o.tp_size = 2;
      o.custom = named ? NULL : custom;
      o.plan_name = named ? "llama_nemotron_super_tp_plan" : NULL;
      ck_assert_int_eq(tpx_diag_list_create(&diags, &err), TPX_OK);
      ck_assert_msg(tpx_select_plan(reg, m, &o, &sel, diags, &err) == TPX_OK,
                    "%s: %s", models[i].arch, err.message);
      ck_assert_uint_eq(fam_diags_count(diags, "custom-plan-ignored", NULL),
                        own ? 1 : 0);
      ck_assert_int_eq(tpx_selection_source(sel),
                       own ? TPX_PLAN_SOURCE_PLUGIN : TPX_PLAN_SOURCE_CUSTOM);
      tpx_selection_destroy(sel);
      tpx_diag_list_destroy(diags);
      tpx_model_destroy(m);
    }
  }
  tpx_plan_destroy(custom);
  tpx_registry_destroy(reg);
}
END_TEST

/* Bad configs: a message naming the key, never a crash. */
START_TEST(test_bad_configs) {
  static const char *const bad[] = {
      "{\"_class_name\": \"WanTransformer3DModel\", \"num_attention_heads\": "
      "-2}",
      "{\"_class_name\": \"WanTransformer3DModel\", \"num_layers\": -1}",
      "{\"_class_name\": \"HunyuanVideo15Transformer3DModel\", \"qk_norm\": "
      "\"l2\"}",
      "{\"_class_name\": \"HunyuanVideo15Transformer3DModel\", "
      "\"mlp_ratio\": \"x\"}",
      "{\"_class_name\": \"LTX2VideoTransformer3DModel\", \"activation_fn\": "
      "\"relu\"}",
      "{\"_class_name\": \"LTX2VideoTransformer3DModel\", \"qk_norm\": "
      "\"rms_norm\"}",
      "{\"_class_name\": \"QwenImageTransformer2DModel\", \"patch_size\": 0}",
      "{\"_class_name\": \"QwenImageTransformer2DModel\", \"out_channels\": "
      "\"16\"}",
  };
  static const char *const needle[] = {
      "num_attention_heads", "num_layers", "qk_norm",    "mlp_ratio",
      "activation_fn",       "qk_norm",    "patch_size", "out_channels"};
  tpx_registry *reg = fam_registry(FAM);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    tpx_model *m = fam_model_json(bad[i]);
    tpx_error err = {0};
    ck_assert_int_ne(tpx_registry_build_skeleton(reg, m, &err), TPX_OK);
    ck_assert_msg(strstr(err.message, needle[i]), "case %zu: %s", i,
                  err.message);
    tpx_model_destroy(m);
  }
  tpx_registry_destroy(reg);
}
END_TEST

static Suite *diffusion_suite(void) {
  Suite *s = suite_create("families-diffusion");
  TCase *tc = tcase_create("diffusion");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_abi);
  tcase_add_test(tc, test_registration);
  tcase_add_test(tc, test_class_name_selects);
  tcase_add_loop_test(tc, test_skeleton_matches_diffusers, 0,
                      (int)(sizeof structures / sizeof structures[0]));
  tcase_add_loop_test(tc, test_totals, 0, (int)NMODELS);
  tcase_add_test(tc, test_wan_plan);
  tcase_add_test(tc, test_other_plans);
  tcase_add_test(tc, test_selection);
  tcase_add_test(tc, test_qwenimage_blocks);
  tcase_add_loop_test(tc, test_strategy, 0, (int)NMODELS);
  tcase_add_loop_test(tc, test_rank_bytes, 0, (int)NMODELS);
  tcase_add_test(tc, test_fsdp_units);
  tcase_add_test(tc, test_custom_plan);
  tcase_add_test(tc, test_bad_configs);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(diffusion_suite());
  int failed;
  srunner_run_all(sr, CK_NORMAL);
  failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
