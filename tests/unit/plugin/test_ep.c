/* test_ep.c — expert parallelism (docs/SEMANTICS.md "Expert parallelism"):
 * the test plugin's custom MoE architecture (tests/unit/plugin/moe, the
 * shapes of tests/data/upstream_moe/qwen3_moe) selected and sharded on
 * dp_shard 4 with ep 1, 2 and 4 is compared with what NeMo Automodel 0.7.0
 * did on the same tree (golden.json: every parameter's mesh, placements and
 * per-rank local shapes, per-rank parameter bytes, FSDP units), and
 * upstream's refusals come with upstream's messages. Then what the goldens
 * do not cover: world 8 with tp 2 (EP groups fold tp peers), ep = world,
 * and the library's argument checks. */
#include <stdint.h>

#include <jansson.h>

#include "plugin_test.h"
#include "tpx/fsdp.h"
#include "tpx/memory.h"
#include "tpx/mesh.h"
#include "tpx/placement.h"
#include "tpx/runtime.h"
#include "tpx/select.h"
#include "tpx/sharding.h"

#define MOE_PLUGIN fixture_path("TPX_TEST_MOE_DIR", "libtpxtest_ep.so")

/* tests/data/upstream_moe/qwen3_moe/config.json's sizes. */
#define MOE_CONFIG(arch, experts)                                              \
  "{\"architectures\": [\"" arch "\"], \"model_type\": \"qwen3_moe\", "        \
  "\"hidden_size\": 64, \"num_hidden_layers\": 3, \"vocab_size\": 512, "       \
  "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 16, " \
  "\"intermediate_size\": 128, \"moe_intermediate_size\": 32, "                \
  "\"num_local_experts\": " #experts ", \"num_experts_per_tok\": 2, "          \
  "\"dtype\": \"bfloat16\", \"tie_word_embeddings\": false}"

typedef struct fixture {
  tpx_registry *reg;
  tpx_model *model;
  tpx_diag_list *diags;
  tpx_selection *sel;
  tpx_mesh *mesh;
  tpx_sharding *sh;
} fixture;

static void setup(fixture *f, const char *config) {
  memset(f, 0, sizeof *f);
  CHECK_OK(tpx_registry_create(&f->reg, &e_));
  CHECK_OK(tpx_registry_load_file(f->reg, MOE_PLUGIN, &e_));
  CHECK_OK(tpx_registry_load_file(f->reg, GOOD("libtpxtest_good.so"), &e_));
  CHECK_OK(tpx_diag_list_create(&f->diags, &e_));
  f->model = model_from_json(config);
  CHECK_OK(tpx_registry_build_skeleton(f->reg, f->model, &e_));
}

static void teardown(fixture *f) {
  tpx_sharding_destroy(f->sh);
  tpx_mesh_destroy(f->mesh);
  tpx_selection_destroy(f->sel);
  tpx_diag_list_destroy(f->diags);
  tpx_model_destroy(f->model);
  tpx_registry_destroy(f->reg);
}

static void select_ep(fixture *f, int64_t tp, int64_t ep) {
  tpx_select_options o = TPX_SELECT_OPTIONS_INIT;
  o.tp_size = tp;
  o.ep = ep;
  CHECK_OK(tpx_select_plan(f->reg, f->model, &o, &f->sel, f->diags, &e_));
}

/* The error diagnostics' messages, or "" (static buffer). */
static const char *errors(const fixture *f) {
  static char buf[4096];
  buf[0] = '\0';
  for (size_t i = 0; i < tpx_diag_count(f->diags); i++) {
    tpx_diag d;
    if (tpx_diag_get(f->diags, i, &d, NULL) == TPX_OK &&
        d.level == TPX_DIAG_ERROR)
      snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "[%s] %s\n", d.code,
               d.message);
  }
  return buf;
}

/* Selection, then the (dp_replicate, dp_shard, tp) mesh and the sharding
 * with the selection handed over whole (its ep included). */
static tpx_status plan(fixture *f, int64_t dp, int64_t tp, int64_t ep,
                       tpx_error *err) {
  select_ep(f, tp, ep);
  ck_assert_msg(errors(f)[0] == '\0', "%s", errors(f));
  CHECK_OK(tpx_mesh_create_fsdp2(1, dp, 1, tp, &f->mesh, &e_));
  tpx_sharding_options o = TPX_SHARDING_OPTIONS_INIT;
  o.selection = f->sel;
  return tpx_sharding_create(f->model, NULL, f->mesh, &o, &f->sh, err);
}

static json_t *golden_case(const char *name) {
  char path[1024];
  json_error_t je;
  snprintf(path, sizeof path,
           "%s/tests/data/upstream_moe/qwen3_moe/golden.json",
           getenv("TPX_SOURCE_DIR") ? getenv("TPX_SOURCE_DIR") : ".");
  json_t *root = json_load_file(path, 0, &je);
  ck_assert_msg(root != NULL, "%s: %s", path, je.text);
  json_t *c =
      json_incref(json_object_get(json_object_get(root, "cases"), name));
  json_decref(root);
  ck_assert_ptr_nonnull(c);
  return c;
}

/* One parameter against its golden record: mesh, the placement on every
 * dim of its mesh (absent in the golden = replicate), local shapes. */
static void check_param(const fixture *f, int64_t p, json_t *g) {
  tpx_param_info pi;
  tpx_param_sharding ps;
  CHECK_OK(tpx_model_param(f->model, p, &pi, &e_));
  CHECK_OK(tpx_sharding_param(f->sh, p, &ps, &e_));
  const char *name = json_string_value(json_object_get(g, "name"));
  ck_assert_str_eq(pi.fqn, name);
  const tpx_mesh *mesh = tpx_sharding_param_mesh(f->sh, p);
  const char *want_mesh = json_string_value(json_object_get(g, "mesh"));
  ck_assert_msg((mesh == tpx_sharding_moe_mesh(f->sh)) ==
                    (strcmp(want_mesh, "moe") == 0),
                "%s: mesh, want %s", name, want_mesh);
  json_t *gpl = json_object_get(g, "placements");
  for (int d = 0; d < tpx_mesh_ndim(mesh); d++) {
    char got[64];
    tpx_placement_format(ps.placements[d], got, sizeof got);
    json_t *w = json_object_get(gpl, tpx_mesh_dim_name(mesh, d));
    const char *want = w ? json_string_value(w) : "replicate";
    ck_assert_msg(strcmp(got, want) == 0, "%s on %s: %s, want %s", name,
                  tpx_mesh_dim_name(mesh, d), got, want);
  }
  json_t *shapes = json_object_get(g, "local_shapes");
  for (size_t r = 0; r < json_array_size(shapes); r++) {
    tpx_slice sl;
    CHECK_OK(tpx_sharding_local_slice(f->sh, p, (int64_t)r, &sl, &e_));
    json_t *want = json_array_get(shapes, r);
    ck_assert_int_eq((int)json_array_size(want), sl.ndim);
    for (int d = 0; d < sl.ndim; d++)
      ck_assert_msg(
          sl.length[d] == json_integer_value(json_array_get(want, (size_t)d)),
          "%s rank %zu dim %d: %lld", name, r, d, (long long)sl.length[d]);
  }
}

/* Units with parameters (upstream's recorder lists those), as
 * "fqn|dim|count" lines compared as sets. */
static void check_units(const fixture *f, json_t *want) {
  size_t n = tpx_sharding_num_fsdp_units(f->sh), seen = 0;
  for (size_t u = 0; u < n; u++) {
    tpx_fsdp_unit fu;
    CHECK_OK(tpx_sharding_fsdp_unit(f->sh, u, &fu, &e_));
    if (fu.num_params == 0)
      continue;
    seen++;
    const char *dim = tpx_sharding_fsdp_unit_dim(f->sh, u);
    int found = 0;
    for (size_t i = 0; i < json_array_size(want) && !found; i++) {
      json_t *w = json_array_get(want, i);
      found = strcmp(json_string_value(json_array_get(w, 0)), fu.fqn) == 0 &&
              strcmp(json_string_value(json_array_get(json_array_get(w, 1), 0)),
                     dim) == 0 &&
              (size_t)json_integer_value(json_array_get(w, 2)) == fu.num_params;
    }
    ck_assert_msg(found, "unit '%s' over %s with %zu params not upstream's",
                  fu.fqn, dim, fu.num_params);
  }
  ck_assert_int_eq(seen, json_array_size(want));
}

static void check_golden(int64_t ep) {
  char name[32];
  snprintf(name, sizeof name, "dp4_ep%lld", (long long)ep);
  json_t *g = golden_case(name);
  fixture f;
  setup(&f, MOE_CONFIG("TpxMoeForCausalLM", 8));
  CHECK_OK(plan(&f, 4, 1, ep, &e_));
  ck_assert_int_eq(tpx_sharding_ep_size(f.sh), ep);
  json_t *moe = json_object_get(g, "moe_mesh");
  const tpx_mesh *mm = tpx_sharding_moe_mesh(f.sh);
  ck_assert_int_eq(mm != NULL, !json_is_null(moe));
  if (mm) {
    json_t *sizes = json_object_get(moe, "sizes");
    ck_assert_int_eq(tpx_mesh_ndim(mm), 2);
    ck_assert_str_eq(tpx_mesh_dim_name(mm, 0), "ep_shard");
    ck_assert_str_eq(tpx_mesh_dim_name(mm, 1), "ep");
    for (int d = 0; d < 2; d++)
      ck_assert_int_eq(tpx_mesh_dim_size(mm, d),
                       json_integer_value(json_array_get(sizes, (size_t)d)));
    json_t *coords = json_object_get(g, "coordinates");
    for (int64_t r = 0; r < 4; r++) {
      int64_t c[2];
      CHECK_OK(tpx_mesh_coords(mm, r, c, &e_));
      json_t *w = json_object_get(json_array_get(coords, (size_t)r), "moe");
      ck_assert_int_eq(c[0], json_integer_value(json_array_get(w, 0)));
      ck_assert_int_eq(c[1], json_integer_value(json_array_get(w, 1)));
    }
  }
  json_t *params = json_object_get(g, "parameters");
  ck_assert_int_eq(tpx_model_num_params(f.model), json_array_size(params));
  for (size_t p = 0; p < json_array_size(params); p++)
    check_param(&f, (int64_t)p, json_array_get(params, p));
  json_t *bytes = json_object_get(g, "per_rank_param_bytes");
  for (int64_t r = 0; r < 4; r++)
    ck_assert_int_eq(tpx_sharding_rank_param_bytes(f.sh, r),
                     json_integer_value(json_array_get(bytes, (size_t)r)));
  check_units(&f, json_object_get(g, "fsdp_units"));
  teardown(&f);
  json_decref(g);
}

START_TEST(golden_dp4_ep1) { check_golden(1); }
END_TEST

START_TEST(golden_dp4_ep2) { check_golden(2); }
END_TEST

START_TEST(golden_dp4_ep4) { check_golden(4); }
END_TEST

/* The golden's refusal message, read from the file. */
static const char *golden_refusal(const char *name) {
  static char buf[1024];
  json_t *g = golden_case(name);
  snprintf(buf, sizeof buf, "%s",
           json_string_value(
               json_object_get(json_object_get(g, "refused"), "message")));
  json_decref(g);
  return buf;
}

/* ep 3 and ep 8 on 4 ranks: the MoE mesh refuses, in upstream's words. */
START_TEST(refuse_ep_not_dividing_world) {
  const int64_t eps[2] = {3, 8};
  const char *cases[2] = {"dp4_ep3", "dp4_ep8"};
  for (int i = 0; i < 2; i++) {
    fixture f;
    tpx_error err = {0};
    setup(&f, MOE_CONFIG("TpxMoeForCausalLM", 24));
    ck_assert_int_eq(plan(&f, 4, 1, eps[i], &err), TPX_INVALID_ARGUMENT);
    ck_assert_str_eq(err.message, golden_refusal(cases[i]));
    tpx_mesh *m = NULL;
    tpx_error e2 = {0};
    ck_assert_int_eq(tpx_mesh_create_moe(f.mesh, eps[i], &m, &e2),
                     TPX_INVALID_ARGUMENT);
    ck_assert_ptr_null(m);
    ck_assert_str_eq(e2.message, golden_refusal(cases[i]));
    teardown(&f);
  }
}
END_TEST

static void check_refused(const char *config, int64_t tp, int64_t ep,
                          const char *code, const char *message) {
  fixture f;
  setup(&f, config);
  select_ep(&f, tp, ep);
  char want[2048];
  snprintf(want, sizeof want, "[%s] %s\n", code, message);
  ck_assert_str_eq(errors(&f), want);
  teardown(&f);
}

START_TEST(refuse_experts_not_divisible) {
  check_refused(MOE_CONFIG("TpxMoeForCausalLM", 6), 1, 4,
                "experts-not-divisible", golden_refusal("dp4_ep4_e6"));
}
END_TEST

START_TEST(refuse_tp_at_ep1_unmatched_keys) {
  check_refused(MOE_CONFIG("TpxMoeForCausalLM", 8), 2, 1,
                "moe-tp-plan-unmatched", golden_refusal("dp2_tp2_ep1"));
}
END_TEST

START_TEST(refuse_tp_at_ep2_no_registered_plan) {
  /* upstream names its class; ours is TpxMoeForCausalLM */
  char want[1024];
  snprintf(want, sizeof want, "%s", golden_refusal("dp2_tp2_ep2"));
  char *q = strstr(want, "'Qwen3MoeForCausalLM'");
  ck_assert_ptr_nonnull(q);
  char msg[1024];
  snprintf(msg, sizeof msg, "%.*s'TpxMoeForCausalLM'%s", (int)(q - want), want,
           q + strlen("'Qwen3MoeForCausalLM'"));
  check_refused(MOE_CONFIG("TpxMoeForCausalLM", 8), 2, 2, "moe-tp-no-plan",
                msg);
}
END_TEST

START_TEST(refuse_dense_model_at_ep2) {
  check_refused(TEST_CONFIG(""), 1, 2, "moe-config-missing",
                "MoE models must expose moe_config on the inner, text, or "
                "top-level model.");
}
END_TEST

/* A plan key on the experts is refused at any ep (upstream's
 * _validate_moe_tp_plan), with upstream's message. */
START_TEST(refuse_custom_plan_on_experts) {
  fixture f;
  setup(&f, MOE_CONFIG("TpxMoeForCausalLM", 8));
  tpx_plan *p = NULL;
  CHECK_OK(tpx_plan_create(&p, &e_));
  tpx_style col = tpx_style_default(TPX_STYLE_COLWISE);
  CHECK_OK(tpx_plan_set(p, "model.layers.*.self_attn.q_proj", &col, 0, &e_));
  CHECK_OK(tpx_plan_set(p, "model.layers.*.mlp.gate", &col, 0, &e_));
  tpx_select_options o = TPX_SELECT_OPTIONS_INIT;
  o.tp_size = 2;
  o.ep = 2;
  o.custom = p;
  CHECK_OK(tpx_select_plan(f.reg, f.model, &o, &f.sel, f.diags, &e_));
  ck_assert_str_eq(errors(&f),
                   "[moe-tp-plan-unsafe] Tensor parallelism must not target "
                   "routed-expert parameters or router outputs because they "
                   "are EP-owned or require global expert logits. Remove "
                   "these paths from tp_shard_plan: model.layers.*.mlp.gate. "
                   "Shared-expert leaf modules remain supported.\n");
  tpx_plan_destroy(p);
  teardown(&f);
}
END_TEST

/* World 8 = dp_shard 4 x tp 2 with the planned architecture at ep 2: the
 * MoE mesh is (4, 2), each EP group a pair of tp peers [2k, 2k+1], so the
 * two tp ranks of one dp_shard hold different experts. */
START_TEST(world8_tp2_ep2_folds_tp_peers) {
  fixture f;
  setup(&f, MOE_CONFIG("TpxMoePlannedForCausalLM", 8));
  CHECK_OK(plan(&f, 4, 2, 2, &e_));
  const tpx_mesh *mm = tpx_sharding_moe_mesh(f.sh);
  ck_assert_int_eq(tpx_mesh_dim_size(mm, 0), 4);
  ck_assert_int_eq(tpx_mesh_dim_size(mm, 1), 2);
  int64_t p =
      tpx_model_find_param(f.model, "model.layers.1.mlp.experts.down_projs");
  ck_assert_int_ge(p, 0);
  ck_assert_ptr_eq(tpx_sharding_param_mesh(f.sh, p), mm);
  for (int64_t r = 0; r < 8; r++) {
    tpx_slice sl;
    CHECK_OK(tpx_sharding_local_slice(f.sh, p, r, &sl, &e_));
    /* [8, 32, 64]: experts 4*(r%2).. over ep, dim 1 over ep_shard 4 */
    ck_assert_int_eq(sl.offset[0], 4 * (r % 2));
    ck_assert_int_eq(sl.length[0], 4);
    ck_assert_int_eq(sl.offset[1], 8 * (r / 2));
    ck_assert_int_eq(sl.length[1], 8);
    ck_assert_int_eq(sl.length[2], 64);
  }
  /* attention stays on the main mesh, tp-sharded */
  int64_t q =
      tpx_model_find_param(f.model, "model.layers.0.self_attn.q_proj.weight");
  tpx_param_sharding ps;
  CHECK_OK(tpx_sharding_param(f.sh, q, &ps, &e_));
  ck_assert_ptr_eq(tpx_sharding_param_mesh(f.sh, q), f.mesh);
  ck_assert_int_eq(ps.placements[2].kind, TPX_SHARD);
  teardown(&f);
}
END_TEST

/* ep = world: no experts unit, expert parameters in no unit, whole experts
 * per rank; FSDP off keeps Shard(1) away too (no unit over ep_shard). */
START_TEST(ep_world_and_fsdp_off) {
  fixture f;
  setup(&f, MOE_CONFIG("TpxMoeForCausalLM", 8));
  CHECK_OK(plan(&f, 4, 1, 4, &e_));
  int64_t p = tpx_model_find_param(
      f.model, "model.layers.2.mlp.experts.gate_and_up_projs");
  tpx_param_sharding ps;
  CHECK_OK(tpx_sharding_param(f.sh, p, &ps, &e_));
  ck_assert_int_eq(ps.fsdp_unit, -1);
  teardown(&f);

  setup(&f, MOE_CONFIG("TpxMoeForCausalLM", 8));
  select_ep(&f, 1, 2);
  CHECK_OK(tpx_mesh_create_fsdp2(1, 4, 1, 1, &f.mesh, &e_));
  tpx_sharding_options o = TPX_SHARDING_OPTIONS_INIT;
  o.selection = f.sel;
  o.fsdp = 0;
  CHECK_OK(tpx_sharding_create(f.model, NULL, f.mesh, &o, &f.sh, &e_));
  CHECK_OK(tpx_sharding_param(f.sh, p, &ps, &e_));
  ck_assert_int_eq(ps.placements[0].kind, TPX_REPLICATE);
  ck_assert_int_eq(ps.placements[1].kind, TPX_SHARD);
  /* ep 2 without the selection: the options' own ep and patterns */
  tpx_sharding_destroy(f.sh);
  f.sh = NULL;
  const char *pat[1] = {"model.layers.*.mlp.experts.down_projs"};
  tpx_sharding_options o2 = TPX_SHARDING_OPTIONS_INIT;
  o2.ep = 2;
  o2.num_expert_params = 1;
  o2.expert_params = pat;
  CHECK_OK(tpx_sharding_create(f.model, NULL, f.mesh, &o2, &f.sh, &e_));
  int64_t d =
      tpx_model_find_param(f.model, "model.layers.0.mlp.experts.down_projs");
  ck_assert_ptr_eq(tpx_sharding_param_mesh(f.sh, d),
                   tpx_sharding_moe_mesh(f.sh));
  ck_assert_ptr_eq(tpx_sharding_param_mesh(f.sh, p), f.mesh);
  ck_assert_ptr_null(tpx_sharding_param_mesh(f.sh, 100000));
  /* patterns that match nothing: a warning, nothing on the MoE mesh */
  tpx_sharding_destroy(f.sh);
  f.sh = NULL;
  const char *none[1] = {"model.layers.*.mlp.nothing"};
  o2.expert_params = none;
  CHECK_OK(tpx_sharding_create(f.model, NULL, f.mesh, &o2, &f.sh, &e_));
  ck_assert_ptr_eq(tpx_sharding_param_mesh(f.sh, d), f.mesh);
  int warned = 0;
  const tpx_diag_list *dl = tpx_sharding_diagnostics(f.sh);
  for (size_t i = 0; i < tpx_diag_count(dl); i++) {
    tpx_diag dg;
    if (tpx_diag_get(dl, i, &dg, NULL) == TPX_OK &&
        strcmp(dg.code, "ep-no-experts") == 0)
      warned = dg.level == TPX_DIAG_WARNING;
  }
  ck_assert(warned);
  /* the runtime runs ep > 1 (tests/unit/runtime/test_rt_ep.c); without a
   * mesh comm it refuses the call, not the ep */
  tpx_runtime *rt = NULL;
  tpx_error rerr = {0};
  ck_assert_int_eq(tpx_runtime_create(f.sh, NULL, NULL, &rt, &rerr),
                   TPX_INVALID_ARGUMENT);
  ck_assert_ptr_null(strstr(rerr.message, "ep 1 only"));
  teardown(&f);
}
END_TEST

/* Memory and traffic at ep 2 (docs/MEMORY.md "Expert parallelism"), S = 128
 * tokens, H 64, bf16, k 2, 3 MoE layers: one layer's dispatch buffers
 * 2·128·(2·64·2 + 12·2 + 1), the saved gathered tokens 3·1·128·(64·2 + 4·2)
 * more activations than at ep 1, the token exchange 3·1·128·(6·64·2 + 16·2
 * + 1) bytes sent per step; nothing of it at ep 1. */
START_TEST(memory_and_traffic_over_ep) {
  tpx_memory m1, m2;
  tpx_traffic t1, t2;
  tpx_memory_options mo = TPX_MEMORY_OPTIONS_INIT;
  mo.seq = 128;
  fixture f;
  setup(&f, MOE_CONFIG("TpxMoeForCausalLM", 8));
  CHECK_OK(plan(&f, 4, 1, 1, &e_));
  CHECK_OK(tpx_memory_rank(f.sh, &mo, 0, &m1, &e_));
  CHECK_OK(tpx_traffic_rank(f.sh, &mo, 0, &t1, &e_));
  teardown(&f);
  setup(&f, MOE_CONFIG("TpxMoeForCausalLM", 8));
  CHECK_OK(plan(&f, 4, 1, 2, &e_));
  CHECK_OK(tpx_memory_rank(f.sh, &mo, 0, &m2, &e_));
  CHECK_OK(tpx_traffic_rank(f.sh, &mo, 0, &t2, &e_));
  ck_assert_int_eq(m1.moe_dispatch, 0);
  ck_assert_int_eq(t1.ep, 0);
  ck_assert_int_eq(m2.moe_dispatch, 2 * 128 * (2 * 64 * 2 + 12 * 2 + 1));
  ck_assert_int_eq(m2.activations - m1.activations,
                   m2.moe_dispatch + 3 * 1 * 128 * (64 * 2 + 4 * 2));
  ck_assert_int_eq(t2.ep, 3 * 1 * 128 * (6 * 64 * 2 + 16 * 2 + 1));
  ck_assert_int_eq(t2.total, t2.tp + t2.fsdp + t2.cp + t2.ep);
  /* the parameters are the same bytes per rank (upstream's goldens), the
   * padded state too: 8 experts split evenly either way */
  ck_assert_int_eq(m2.params, m1.params);
  teardown(&f);
  /* activation checkpointing keeps only the one layer's buffers */
  mo.activation_checkpointing = 1;
  setup(&f, MOE_CONFIG("TpxMoeForCausalLM", 8));
  CHECK_OK(plan(&f, 4, 1, 1, &e_));
  CHECK_OK(tpx_memory_rank(f.sh, &mo, 0, &m1, &e_));
  teardown(&f);
  setup(&f, MOE_CONFIG("TpxMoeForCausalLM", 8));
  CHECK_OK(plan(&f, 4, 1, 2, &e_));
  CHECK_OK(tpx_memory_rank(f.sh, &mo, 0, &m2, &e_));
  ck_assert_int_eq(m2.activations - m1.activations, m2.moe_dispatch);
  teardown(&f);
}
END_TEST

/* The experts' FSDP traffic: at ep 4 (no experts unit) an expert parameter
 * is neither gathered nor reduced, so the FSDP bytes are those of the other
 * parameters alone; at ep 2 its unit gathers over ep_shard 2. */
START_TEST(fsdp_traffic_of_experts) {
  tpx_traffic t4, t2;
  tpx_memory_options mo = TPX_MEMORY_OPTIONS_INIT;
  fixture f;
  setup(&f, MOE_CONFIG("TpxMoeForCausalLM", 8));
  CHECK_OK(plan(&f, 4, 1, 4, &e_));
  CHECK_OK(tpx_traffic_rank(f.sh, &mo, 0, &t4, &e_));
  /* no expert unit: every unit is over dp_shard 4 */
  int64_t want = 0, grads = 0;
  for (size_t u = 0; u < tpx_sharding_num_fsdp_units(f.sh); u++) {
    tpx_fsdp_unit fu;
    CHECK_OK(tpx_sharding_fsdp_unit(f.sh, u, &fu, &e_));
    ck_assert_str_eq(tpx_sharding_fsdp_unit_dim(f.sh, u), "dp_shard");
    int64_t g = tpx_sharding_fsdp_unit_gathered_bytes(f.sh, u, 0);
    want += (!fu.is_root && fu.reshard_after_forward ? 2 : 1) * g * 3 / 4;
  }
  /* f32 gradients of the non-expert parameters: bf16 bytes x 2 */
  for (int64_t p = 0; p < (int64_t)tpx_model_num_params(f.model); p++) {
    tpx_slice sl;
    if (tpx_sharding_param_mesh(f.sh, p) != f.mesh)
      continue;
    CHECK_OK(tpx_sharding_local_slice(f.sh, p, 0, &sl, &e_));
    grads += tpx_slice_nbytes(&sl, TPX_DTYPE_F32);
  }
  ck_assert_int_eq(t4.fsdp, want + 3 * grads);
  teardown(&f);
  setup(&f, MOE_CONFIG("TpxMoeForCausalLM", 8));
  CHECK_OK(plan(&f, 4, 1, 2, &e_));
  CHECK_OK(tpx_traffic_rank(f.sh, &mo, 0, &t2, &e_));
  size_t experts_units = 0;
  for (size_t u = 0; u < tpx_sharding_num_fsdp_units(f.sh); u++)
    experts_units +=
        strcmp(tpx_sharding_fsdp_unit_dim(f.sh, u), "ep_shard") == 0;
  ck_assert_int_eq(experts_units, 3);
  ck_assert_int_gt(t2.fsdp, t4.fsdp);
  /* upstream's MoE parallelizer reshards nothing after forward by default
   * (MoEParallelizerConfig.reshard_after_forward False): every unit stays
   * gathered, the peak holds them all */
  int64_t all = tpx_sharding_rank_param_bytes(f.sh, 1);
  for (size_t u = 0; u < tpx_sharding_num_fsdp_units(f.sh); u++) {
    tpx_fsdp_unit fu;
    CHECK_OK(tpx_sharding_fsdp_unit(f.sh, u, &fu, &e_));
    ck_assert_int_eq(fu.reshard_after_forward, 0);
    all += tpx_sharding_fsdp_unit_gathered_bytes(f.sh, u, 1);
  }
  ck_assert_int_eq(tpx_sharding_rank_peak_bytes(f.sh, 1), all);
  teardown(&f);
}
END_TEST

/* A plugin plan named get_hf_tp_shard_plan is the class's own _tp_plan
 * (ERNIE-4.5-MoE's): upstream's dense path takes it at tp 2 ep 1, its MoE
 * path does not count it as registered at ep 2. */
START_TEST(class_plan_at_ep1_only) {
  static const char *cfg =
      "{\"architectures\": [\"TpxMoePlannedForCausalLM\"], "
      "\"hidden_size\": 64, \"num_hidden_layers\": 2, \"vocab_size\": 512, "
      "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
      "\"moe_intermediate_size\": 32, \"num_local_experts\": 8, "
      "\"tpxtest_class_plan\": true}";
  fixture f;
  setup(&f, cfg);
  select_ep(&f, 2, 1);
  ck_assert_str_eq(errors(&f), "");
  ck_assert_str_eq(tpx_selection_function(f.sel),
                   "get_hf_tp_shard_plan (the class _tp_plan)");
  teardown(&f);
  setup(&f, cfg);
  select_ep(&f, 2, 2);
  ASSERT_CONTAINS(errors(&f), "[moe-tp-no-plan] No safe tensor-parallel plan "
                              "is registered for custom MoE model "
                              "'TpxMoePlannedForCausalLM' at tp_size=2.");
  teardown(&f);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("ep");
  TCase *tc = tcase_create("ep");
  tcase_add_test(tc, golden_dp4_ep1);
  tcase_add_test(tc, golden_dp4_ep2);
  tcase_add_test(tc, golden_dp4_ep4);
  tcase_add_test(tc, refuse_ep_not_dividing_world);
  tcase_add_test(tc, refuse_experts_not_divisible);
  tcase_add_test(tc, refuse_tp_at_ep1_unmatched_keys);
  tcase_add_test(tc, refuse_tp_at_ep2_no_registered_plan);
  tcase_add_test(tc, refuse_dense_model_at_ep2);
  tcase_add_test(tc, refuse_custom_plan_on_experts);
  tcase_add_test(tc, world8_tp2_ep2_folds_tp_peers);
  tcase_add_test(tc, ep_world_and_fsdp_off);
  tcase_add_test(tc, memory_and_traffic_over_ep);
  tcase_add_test(tc, fsdp_traffic_of_experts);
  tcase_add_test(tc, class_plan_at_ep1_only);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(suite()); }
