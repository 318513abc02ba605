/* test_moe.c — the tpx_moe plugin (MixtralForCausalLM through its Hugging
 * Face class; Qwen3-MoE is the automodel_moe plugin's since issue 27):
 * config-only skeletons against the published parameter total
 * (Mixtral-8x7B-v0.1: 46,702,792,704, also what transformers 5.24 builds,
 * tests/data/families/moe/meta_totals.py) and the tiny config; get_plan's
 * refusal and the host's fallback to upstream's path (the bundled
 * transformers-5 HF plan, unusable, then the default base plan); the fused
 * experts replicated over tp and sharded on dim 0 by FSDP; and a checkpoint
 * storing experts one by one giving the same module tree and per-rank bytes as
 * the skeleton (folded onto the fused tensors), with malformed checkpoints
 * refused. */
#include <check.h>
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fam_util.h"
#include "tpx/registry.h"
#include "tpx/sharding.h"

#define FAM "moe"

START_TEST(test_abi) { fam_check_abi(FAM); }
END_TEST

START_TEST(test_published_totals) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *mx = fam_model(reg, FAM, "Mixtral-8x7B-v0.1.config.json", 1);
  ck_assert_int_eq(tpx_model_total_params(mx), 46702792704LL);
  /* Mixtral: 8 experts of 14336 over 4096; router [8, 4096]. */
  fam_assert_param(mx, "model.layers.31.mlp.gate.weight", 8, 4096);
  fam_assert_param(mx, "model.layers.0.self_attn.k_proj.weight", 1024, 4096);
  fam_assert_param(mx, "lm_head.weight", 32000, 4096);
  fam_assert_no_param(mx, "model.layers.0.mlp.gate_proj.weight");
  fam_assert_module(mx, "model.rotary_emb", TPX_MODULE_ROTARY);
  tpx_model_destroy(mx);
  tpx_registry_destroy(reg);
}
END_TEST

static void assert_3d(const tpx_model *m, const char *fqn, int64_t a, int64_t b,
                      int64_t c) {
  tpx_param_info p;
  tpx_error err = {0};
  int64_t i = tpx_model_find_param(m, fqn);
  ck_assert_msg(i >= 0, "no parameter %s", fqn);
  ck_assert_int_eq(tpx_model_param(m, i, &p, &err), TPX_OK);
  ck_assert_int_eq(p.ndim, 3);
  ck_assert_msg(p.shape[0] == a && p.shape[1] == b && p.shape[2] == c,
                "%s is [%lld, %lld, %lld], expected [%lld, %lld, %lld]", fqn,
                (long long)p.shape[0], (long long)p.shape[1],
                (long long)p.shape[2], (long long)a, (long long)b,
                (long long)c);
}

START_TEST(test_fused_experts) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *mx = fam_model(reg, FAM, "Mixtral-8x7B-v0.1.config.json", 1);
  tpx_model *tm = fam_model(reg, FAM, "mixtral-tiny.config.json", 1);
  assert_3d(mx, "model.layers.0.mlp.experts.gate_up_proj", 8, 28672, 4096);
  assert_3d(mx, "model.layers.0.mlp.experts.down_proj", 8, 4096, 14336);
  /* Tiny totals: what transformers 5.24 builds (meta_totals.py). */
  ck_assert_int_eq(tpx_model_total_params(tm), 185664);
  {
    static const char *const bad[][2] = {
        {"{\"architectures\": [\"MixtralForCausalLM\"], \"hidden_size\": 8, "
         "\"num_hidden_layers\": 1, \"num_attention_heads\": 2, "
         "\"intermediate_size\": 8, \"vocab_size\": 10, "
         "\"num_local_experts\": 0}",
         "experts (0)"},
        {"{\"architectures\": [\"MixtralForCausalLM\"], \"hidden_size\": 8}",
         "num_hidden_layers"}};
    size_t k;
    for (k = 0; k < sizeof bad / sizeof bad[0]; k++) {
      tpx_model *b = fam_model_json(bad[k][0]);
      tpx_error err = {0};
      ck_assert_int_ne(tpx_registry_build_skeleton(reg, b, &err), TPX_OK);
      ck_assert_msg(strstr(err.message, bad[k][1]) != NULL, "%s", err.message);
      tpx_model_destroy(b);
    }
  }
  tpx_model_destroy(mx);
  tpx_model_destroy(tm);
  tpx_registry_destroy(reg);
}
END_TEST

static const char *const k_archs[] = {
    "MixtralForCausalLM",
    "transformers.models.mixtral.modeling_mixtral.MixtralForCausalLM"};

START_TEST(test_refuses_to_hf_flow) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *m = fam_model(reg, FAM, "mixtral-tiny.config.json", 0);
  fam_check_refused(reg, m, k_archs[_i], NULL, 0, "PARALLELIZE_FUNCTIONS");
  fam_check_refused(reg, m, k_archs[_i], NULL, 1, "default base plan");
  fam_check_refused(reg, m, k_archs[_i], "x_plan", 0, "x_plan");
  fam_check_refused(reg, m, "LlamaForCausalLM", NULL, 0, "not served");
  /* NeMo Automodel 0.7.0 trains Qwen3-MoE with its own class: the
   * automodel_moe plugin's, not this one's. */
  fam_check_refused(reg, m, "Qwen3MoeForCausalLM", NULL, 0, "not served");
  tpx_model_destroy(m);
  tpx_registry_destroy(reg);
}
END_TEST

/* Selection on the real configs: the plugin refuses, the host goes to the
 * HF plan (unusable: transformers 5's class plan lm_head
 * colwise_gather_output comes first, and both bundled plans hold
 * 'packed_colwise' too) and ends at the default base plan, as upstream
 * does. */
START_TEST(test_selection) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *mx = fam_model(reg, FAM, "Mixtral-8x7B-v0.1.config.json", 1);
  fam_check_selected(reg, mx, NULL, 0, 2, 1, FAM, NULL, "hf-style-unsupported",
                     "'lm_head': Hugging Face style 'colwise_gather_output'",
                     1);
  fam_check_selected(reg, mx, NULL, 0, 2, 1, FAM, NULL, "default-plan-fallback",
                     NULL, 1);
  /* 8 kv heads: tp 16 is the host's error, as validate_tp_mesh upstream. */
  fam_check_selected(reg, mx, NULL, 0, 16, 1, FAM, NULL, "heads-not-divisible",
                     "num_key_value_heads (8)", 1);
  tpx_model_destroy(mx);
  tpx_registry_destroy(reg);
}
END_TEST

/* The deliberate refusal says why the plugin declines and what happens
 * instead; its fix does not send the user to fix the plugin (issue 18
 * item 14). */
START_TEST(test_refusal_diag) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *mx = fam_model(reg, FAM, "Mixtral-8x7B-v0.1.config.json", 1);
  tpx_select_options o = TPX_SELECT_OPTIONS_INIT;
  tpx_selection *sel = NULL;
  tpx_diag_list *diags = NULL;
  tpx_error err = {0};
  size_t i, found = 0;
  o.tp_size = 2;
  ck_assert_int_eq(tpx_diag_list_create(&diags, &err), TPX_OK);
  ck_assert_msg(tpx_select_plan(reg, mx, &o, &sel, diags, &err) == TPX_OK,
                "select: %s", err.message);
  for (i = 0; i < tpx_diag_count(diags); i++) {
    tpx_diag d;
    ck_assert_int_eq(tpx_diag_get(diags, i, &d, &err), TPX_OK);
    if (strcmp(d.code, "plugin-refused") != 0)
      continue;
    found++;
    ck_assert_msg(strstr(d.fix, "fix the plugin") == NULL, "fix: %s", d.fix);
    ck_assert_msg(strstr(d.fix, "on purpose") != NULL, "fix: %s", d.fix);
    ck_assert_msg(strstr(d.fix, "Hugging Face plan") != NULL, "fix: %s", d.fix);
    ck_assert_msg(strstr(d.message, "declines") != NULL, "%s", d.message);
    ck_assert_msg(strstr(d.message, "the same path: the Hugging Face plan, "
                                    "then the default base plan") != NULL,
                  "%s", d.message);
  }
  ck_assert_uint_eq(found, 1);
  tpx_selection_destroy(sel);
  tpx_diag_list_destroy(diags);
  tpx_model_destroy(mx);
  tpx_registry_destroy(reg);
}
END_TEST

/* The selected plan applied on dp_shard x tp. */
static tpx_sharding *shard(tpx_registry *reg, const tpx_model *m, int64_t dp,
                           int64_t tp, tpx_mesh **mesh_out) {
  const char *names[] = {"dp_shard", "tp"};
  int64_t sizes[2];
  tpx_select_options o = TPX_SELECT_OPTIONS_INIT;
  tpx_selection *sel = NULL;
  tpx_diag_list *diags = NULL;
  tpx_sharding_options so = TPX_SHARDING_OPTIONS_INIT;
  tpx_sharding *sh = NULL;
  tpx_error err = {0};
  sizes[0] = dp;
  sizes[1] = tp;
  o.tp_size = tp;
  ck_assert_int_eq(tpx_diag_list_create(&diags, &err), TPX_OK);
  ck_assert_msg(tpx_select_plan(reg, m, &o, &sel, diags, &err) == TPX_OK,
                "select: %s", err.message);
  ck_assert_int_eq(tpx_selection_source(sel), TPX_PLAN_SOURCE_DEFAULT);
  ck_assert_int_eq(tpx_mesh_create(names, sizes, 2, mesh_out, &err), TPX_OK);
  ck_assert_msg(tpx_sharding_create(m, tpx_selection_plan(sel), *mesh_out, &so,
                                    &sh, &err) == TPX_OK,
                "sharding: %s", err.message);
  tpx_selection_destroy(sel);
  tpx_diag_list_destroy(diags);
  return sh;
}

static void placement_is(const tpx_sharding *sh, const tpx_model *m,
                         const char *fqn, tpx_placement_kind dp_kind,
                         int dp_dim, tpx_placement_kind tp_kind) {
  tpx_param_sharding ps;
  tpx_error err = {0};
  int64_t i = tpx_model_find_param(m, fqn);
  ck_assert_msg(i >= 0, "no parameter %s", fqn);
  ck_assert_int_eq(tpx_sharding_param(sh, i, &ps, &err), TPX_OK);
  ck_assert_msg(ps.placements[0].kind == dp_kind, "%s: dp placement", fqn);
  if (dp_kind == TPX_SHARD)
    ck_assert_int_eq(ps.placements[0].dim, dp_dim);
  ck_assert_msg(ps.placements[1].kind == tp_kind, "%s: tp placement", fqn);
  ck_assert_ptr_null(ps.plan_key);
}

START_TEST(test_fsdp_layout) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *mx = fam_model(reg, FAM, "Mixtral-8x7B-v0.1.config.json", 1);
  tpx_mesh *mesh = NULL;
  tpx_sharding *sh = shard(reg, mx, 4, 2, &mesh);
  tpx_slice sl;
  tpx_error err = {0};
  int64_t r, sum = 0, gi;
  /* Experts and router: no plan key, replicated over tp, Shard(0) over
   * dp_shard (the expert dim for the fused tensors). */
  placement_is(sh, mx, "model.layers.31.mlp.experts.gate_up_proj", TPX_SHARD, 0,
               TPX_REPLICATE);
  placement_is(sh, mx, "model.layers.31.mlp.experts.down_proj", TPX_SHARD, 0,
               TPX_REPLICATE);
  placement_is(sh, mx, "model.layers.31.mlp.gate.weight", TPX_SHARD, 0,
               TPX_REPLICATE);
  /* 8 experts over 4 dp ranks: 2 each, whatever the tp rank. */
  gi = tpx_model_find_param(mx, "model.layers.31.mlp.experts.gate_up_proj");
  for (r = 0; r < 8; r++) {
    ck_assert_int_eq(tpx_sharding_local_slice(sh, gi, r, &sl, &err), TPX_OK);
    ck_assert_int_eq(sl.length[0], 2);
    ck_assert_int_eq(sl.length[1], 28672);
    ck_assert_int_eq(sl.length[2], 4096);
  }
  /* Every byte is held once per tp-replica group at most: the dp ranks of
   * one tp rank together hold at least the model's share. */
  for (r = 0; r < 8; r++) sum += tpx_sharding_rank_param_bytes(sh, r);
  ck_assert_int_ge(sum, tpx_model_total_bytes(mx));
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_model_destroy(mx);
  tpx_registry_destroy(reg);
}
END_TEST

/* ---- checkpoints storing experts one by one ---- */

static char g_dir[512];

static void make_dir(void) {
  const char *base = getenv("TMPDIR");
  snprintf(g_dir, sizeof g_dir, "%s/tpx-moe-XXXXXX", base ? base : "/tmp");
  ck_assert_ptr_nonnull(mkdtemp(g_dir));
}

static void remove_dir(void) {
  char p[1024];
  snprintf(p, sizeof p, "%s/model.safetensors", g_dir);
  unlink(p);
  rmdir(g_dir);
}

/* What to write instead of the skeleton's fused tensors. */
typedef enum {
  CK_PER_EXPERT,  /* experts.{e}.gate_proj / up_proj / down_proj.weight */
  CK_MIXTRAL_OLD, /* block_sparse_moe.experts.{e}.w1 / w3 / w2, .gate */
  CK_BAD_SHAPE,   /* expert 1's up_proj one row short */
  CK_MISSING      /* the last expert's down_proj left out */
} ck_kind;

static void add_tensor(json_t *hdr, const char *name, const int64_t *shape,
                       int ndim, int64_t *off) {
  json_t *sh = json_array();
  int64_t numel = 1;
  for (int d = 0; d < ndim; d++) {
    numel *= shape[d];
    json_array_append_new(sh, json_integer(shape[d]));
  }
  json_object_set_new(hdr, name,
                      json_pack("{s:s,s:o,s:[I,I]}", "dtype", "BF16", "shape",
                                sh, "data_offsets", (json_int_t)*off,
                                (json_int_t)(*off + 2 * numel)));
  *off += 2 * numel;
}

/* Write <g_dir>/model.safetensors from the skeleton `m`: every stored
 * parameter as is, except the fused experts (and, for CK_MIXTRAL_OLD, the
 * router), which are written one expert at a time. The data section is a
 * sparse hole (only headers are read). */
static void write_checkpoint(const tpx_model *m, ck_kind kind) {
  json_t *hdr = json_object();
  int64_t off = 0;
  char path[1024], name[512], pre[400];
  for (size_t i = 0; i < tpx_model_num_params(m); i++) {
    tpx_param_info p;
    tpx_error err = {0};
    ck_assert_int_eq(tpx_model_param(m, (int64_t)i, &p, &err), TPX_OK);
    if (p.tied_to >= 0)
      continue;
    size_t n = strlen(p.fqn);
    const char *tail = NULL;
    if (p.ndim == 3 && strstr(p.fqn, ".experts.gate_up_proj"))
      tail = ".experts.gate_up_proj";
    else if (p.ndim == 3 && strstr(p.fqn, ".experts.down_proj"))
      tail = ".experts.down_proj";
    int old = kind == CK_MIXTRAL_OLD;
    if (tail == NULL) {
      const char *g = strstr(p.fqn, ".mlp.gate.weight");
      if (old && g != NULL && g[strlen(".mlp.gate.weight")] == '\0') {
        snprintf(name, sizeof name, "%.*s.block_sparse_moe.gate.weight",
                 (int)(g - p.fqn), p.fqn);
        add_tensor(hdr, name, p.shape, p.ndim, &off);
      } else {
        add_tensor(hdr, p.fqn, p.shape, p.ndim, &off);
      }
      continue;
    }
    /* "<layer>.mlp" + tail: the prefix for per-expert names. */
    snprintf(pre, sizeof pre, "%.*s", (int)(n - strlen(tail)), p.fqn);
    if (old) {
      char *mlp = strstr(pre, ".mlp");
      ck_assert_ptr_nonnull(mlp);
      snprintf(mlp, sizeof pre - (size_t)(mlp - pre), ".block_sparse_moe");
    }
    for (int64_t e = 0; e < p.shape[0]; e++) {
      int64_t s2[2];
      if (strcmp(tail, ".experts.down_proj") == 0) {
        if (kind == CK_MISSING && e == p.shape[0] - 1)
          continue;
        s2[0] = p.shape[1];
        s2[1] = p.shape[2];
        snprintf(name, sizeof name, "%s.experts.%lld.%s.weight", pre,
                 (long long)e, old ? "w2" : "down_proj");
        add_tensor(hdr, name, s2, 2, &off);
        continue;
      }
      s2[0] = p.shape[1] / 2;
      s2[1] = p.shape[2];
      snprintf(name, sizeof name, "%s.experts.%lld.%s.weight", pre,
               (long long)e, old ? "w1" : "gate_proj");
      add_tensor(hdr, name, s2, 2, &off);
      if (kind == CK_BAD_SHAPE && e == 1)
        s2[0]--;
      snprintf(name, sizeof name, "%s.experts.%lld.%s.weight", pre,
               (long long)e, old ? "w3" : "up_proj");
      add_tensor(hdr, name, s2, 2, &off);
    }
  }
  char *text = json_dumps(hdr, JSON_COMPACT);
  json_decref(hdr);
  size_t len = strlen(text), padded = (len + 7) / 8 * 8;
  unsigned char lb[8];
  snprintf(path, sizeof path, "%s/model.safetensors", g_dir);
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  for (int i = 0; i < 8; i++)
    lb[i] = (unsigned char)(((uint64_t)padded >> (8 * i)) & 0xff);
  ck_assert_int_eq(fwrite(lb, 1, 8, f), 8);
  ck_assert_int_eq(fwrite(text, 1, len, f), len);
  for (size_t i = len; i < padded; i++) fputc(' ', f);
  fclose(f);
  free(text);
  ck_assert_int_eq(truncate(path, (off_t)(8 + padded + (size_t)off)), 0);
}

/* Skeleton + checkpoint: the same tree, totals and per-rank bytes as the
 * skeleton alone. */
static void check_weights_equal(const char *config, ck_kind kind) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *sk = fam_model(reg, FAM, config, 1);
  tpx_model *wt = fam_model(reg, FAM, config, 1);
  tpx_mesh *m1 = NULL, *m2 = NULL;
  tpx_error err = {0};
  char path[1024];
  make_dir();
  write_checkpoint(sk, kind);
  snprintf(path, sizeof path, "%s/model.safetensors", g_dir);
  ck_assert_msg(tpx_model_add_safetensors(wt, path, &err) == TPX_OK, "%s",
                err.message);
  remove_dir();
  ck_assert_int_eq(tpx_model_num_params(wt), tpx_model_num_params(sk));
  ck_assert_int_eq(tpx_model_num_modules(wt), tpx_model_num_modules(sk));
  ck_assert_int_eq(tpx_model_total_params(wt), tpx_model_total_params(sk));
  ck_assert_int_eq(tpx_model_total_bytes(wt), tpx_model_total_bytes(sk));
  tpx_sharding *a = shard(reg, sk, 2, 2, &m1);
  tpx_sharding *b = shard(reg, wt, 2, 2, &m2);
  for (int64_t r = 0; r < 4; r++)
    ck_assert_int_eq(tpx_sharding_rank_param_bytes(a, r),
                     tpx_sharding_rank_param_bytes(b, r));
  tpx_sharding_destroy(a);
  tpx_sharding_destroy(b);
  tpx_mesh_destroy(m1);
  tpx_mesh_destroy(m2);
  tpx_model_destroy(sk);
  tpx_model_destroy(wt);
  tpx_registry_destroy(reg);
}

START_TEST(test_weights_per_expert) {
  check_weights_equal("mixtral-tiny.config.json", CK_PER_EXPERT);
  check_weights_equal("mixtral-tiny.config.json", CK_MIXTRAL_OLD);
}
END_TEST

static void check_weights_refused(ck_kind kind, const char *needle) {
  tpx_registry *reg = fam_registry(FAM);
  tpx_model *sk = fam_model(reg, FAM, "mixtral-tiny.config.json", 1);
  tpx_model *wt = fam_model(reg, FAM, "mixtral-tiny.config.json", 1);
  tpx_error err = {0};
  char path[1024];
  make_dir();
  write_checkpoint(sk, kind);
  snprintf(path, sizeof path, "%s/model.safetensors", g_dir);
  ck_assert_int_eq(tpx_model_add_safetensors(wt, path, &err), TPX_VALIDATION);
  remove_dir();
  ck_assert_msg(strstr(err.message, needle) != NULL, "message: %s",
                err.message);
  tpx_model_destroy(sk);
  tpx_model_destroy(wt);
  tpx_registry_destroy(reg);
}

START_TEST(test_weights_refused) {
  check_weights_refused(CK_BAD_SHAPE, "experts.1.up_proj.weight");
  check_weights_refused(CK_BAD_SHAPE, "rows [I, 2I)");
  check_weights_refused(CK_MISSING, "needs 4 (down_proj");
}
END_TEST

static Suite *moe_suite(void) {
  Suite *s = suite_create("families-moe");
  TCase *tc = tcase_create("moe");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_abi);
  tcase_add_test(tc, test_published_totals);
  tcase_add_test(tc, test_fused_experts);
  tcase_add_loop_test(tc, test_refuses_to_hf_flow, 0,
                      (int)(sizeof k_archs / sizeof k_archs[0]));
  tcase_add_test(tc, test_selection);
  tcase_add_test(tc, test_fsdp_layout);
  tcase_add_test(tc, test_weights_per_expert);
  tcase_add_test(tc, test_weights_refused);
  tcase_add_test(tc, test_refusal_diag);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(moe_suite());
  int failed;
  srunner_run_all(sr, CK_NORMAL);
  failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
