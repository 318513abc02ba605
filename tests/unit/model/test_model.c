/* test_model.c — the module tree builder, queries and totals (model.c),
 * and the private string hash map (strmap.c). */
#include <check.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/strmap.h"
#include "tpx/model.h"

static tpx_model *new_model(void) {
  tpx_model *m = NULL;
  tpx_error err = {0};
  ck_assert_int_eq(tpx_model_create(&m, &err), TPX_OK);
  ck_assert_ptr_nonnull(m);
  return m;
}

static int64_t add_param(tpx_model *m, const char *mod, const char *name,
                         int64_t d0, int64_t d1, tpx_dtype dt) {
  tpx_error err = {0};
  int64_t shape[2] = {d0, d1};
  int64_t idx = -1;
  tpx_status st =
      tpx_model_add_param(m, mod, name, shape, d1 < 0 ? 1 : 2, dt, &idx, &err);
  ck_assert_msg(st == TPX_OK, "%s", err.message);
  return idx;
}

START_TEST(test_empty_model) {
  tpx_model *m = new_model();
  ck_assert_uint_eq(tpx_model_num_modules(m), 1);
  ck_assert_str_eq(tpx_model_module_fqn(m, 0), "");
  ck_assert_int_eq(tpx_model_module_kind(m, 0), TPX_MODULE_CONTAINER);
  ck_assert_int_eq(tpx_model_module_parent(m, 0), -1);
  ck_assert_int_eq(tpx_model_find_module(m, ""), 0);
  ck_assert_uint_eq(tpx_model_num_params(m), 0);
  ck_assert_int_eq(tpx_model_total_params(m), 0);
  ck_assert_int_eq(tpx_model_total_bytes(m), 0);
  ck_assert_uint_eq(tpx_model_num_architectures(m), 0);
  ck_assert_ptr_null(tpx_model_architecture(m, 0));
  ck_assert_ptr_null(tpx_model_source(m));
  ck_assert_ptr_null(tpx_model_module_fqn(m, 1));
  ck_assert_ptr_null(tpx_model_module_fqn(m, -1));
  ck_assert_int_eq(tpx_model_module_child(m, 0, 0), -1);
  tpx_model_destroy(m);
  tpx_model_destroy(NULL);
}
END_TEST

START_TEST(test_parents_auto_created) {
  tpx_model *m = new_model();
  tpx_error err = {0};
  int64_t idx = -1;
  ck_assert_int_eq(tpx_model_add_module(m, "model.layers.0.self_attn.q_proj",
                                        TPX_MODULE_LINEAR, &idx, &err),
                   TPX_OK);
  ck_assert_uint_eq(tpx_model_num_modules(m), 6);
  static const char *chain[] = {"model", "model.layers", "model.layers.0",
                                "model.layers.0.self_attn"};
  int64_t parent = 0;
  for (size_t i = 0; i < 4; i++) {
    int64_t k = tpx_model_find_module(m, chain[i]);
    ck_assert_int_ge(k, 1);
    ck_assert_int_eq(tpx_model_module_kind(m, k), TPX_MODULE_CONTAINER);
    ck_assert_int_eq(tpx_model_module_parent(m, k), parent);
    ck_assert_uint_eq(tpx_model_module_num_children(m, parent), 1);
    ck_assert_int_eq(tpx_model_module_child(m, parent, 0), k);
    parent = k;
  }
  ck_assert_int_eq(tpx_model_module_parent(m, idx), parent);
  ck_assert_int_eq(tpx_model_module_kind(m, idx), TPX_MODULE_LINEAR);
  ck_assert_str_eq(tpx_model_module_fqn(m, idx),
                   "model.layers.0.self_attn.q_proj");
  /* A container later declared as a leaf kind takes that kind. */
  int64_t again = -1;
  ck_assert_int_eq(
      tpx_model_add_module(m, "model.layers", TPX_MODULE_OTHER, &again, &err),
      TPX_OK);
  ck_assert_int_eq(again, tpx_model_find_module(m, "model.layers"));
  ck_assert_int_eq(tpx_model_module_kind(m, again), TPX_MODULE_OTHER);
  ck_assert_uint_eq(tpx_model_num_modules(m), 6);
  tpx_model_destroy(m);
}
END_TEST

START_TEST(test_child_order_is_insertion_order) {
  tpx_model *m = new_model();
  tpx_error err = {0};
  /* Deliberately not alphabetical, and parents reached through deep adds. */
  static const char *adds[] = {
      "model.embed_tokens",
      "model.layers.1.mlp",
      "model.layers.0.self_attn",
      "model.layers.10",
      "model.layers.2",
      "model.norm",
      "lm_head",
      "model.layers.0.mlp",
  };
  for (size_t i = 0; i < sizeof adds / sizeof *adds; i++)
    ck_assert_int_eq(
        tpx_model_add_module(m, adds[i], TPX_MODULE_OTHER, NULL, &err), TPX_OK);
  static const struct {
    const char *parent;
    const char *children[5];
  } want[] = {
      {"", {"model", "lm_head"}},
      {"model", {"model.embed_tokens", "model.layers", "model.norm"}},
      {"model.layers",
       {"model.layers.1", "model.layers.0", "model.layers.10",
        "model.layers.2"}},
      {"model.layers.0", {"model.layers.0.self_attn", "model.layers.0.mlp"}},
  };
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
    int64_t p = tpx_model_find_module(m, want[i].parent);
    ck_assert_int_ge(p, 0);
    size_t n = 0;
    while (n < 5 && want[i].children[n]) n++;
    ck_assert_uint_eq(tpx_model_module_num_children(m, p), n);
    for (size_t c = 0; c < n; c++)
      ck_assert_str_eq(tpx_model_module_fqn(m, tpx_model_module_child(m, p, c)),
                       want[i].children[c]);
  }
  tpx_model_destroy(m);
}
END_TEST

START_TEST(test_bad_module_names) {
  static const char *bad[] = {".a", "a.", "a..b", ".", "..", "a.b..c.d"};
  tpx_model *m = new_model();
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    tpx_error err = {0};
    ck_assert_int_eq(
        tpx_model_add_module(m, bad[i], TPX_MODULE_LINEAR, NULL, &err),
        TPX_INVALID_ARGUMENT);
    ck_assert_msg(strstr(err.message, bad[i]) != NULL, "%s", err.message);
    ck_assert_msg(strstr(err.message, "empty") != NULL, "%s", err.message);
    int64_t shape[1] = {4};
    tpx_error err2 = {0};
    ck_assert_int_eq(tpx_model_add_param(m, bad[i], "weight", shape, 1,
                                         TPX_DTYPE_F32, NULL, &err2),
                     TPX_INVALID_ARGUMENT);
  }
  ck_assert_uint_eq(tpx_model_num_modules(m), 1);
  ck_assert_uint_eq(tpx_model_num_params(m), 0);
  tpx_error err = {0};
  ck_assert_int_eq(
      tpx_model_add_module(m, "a", (tpx_module_kind)17, NULL, &err),
      TPX_INVALID_ARGUMENT);
  ck_assert_int_eq(
      tpx_model_add_module(NULL, "a", TPX_MODULE_LINEAR, NULL, NULL),
      TPX_INVALID_ARGUMENT);
  tpx_model_destroy(m);
}
END_TEST

START_TEST(test_params_and_duplicates) {
  tpx_model *m = new_model();
  tpx_error err = {0};
  int64_t w = add_param(m, "model.layers.0.mlp.up_proj", "weight", 8192, 2048,
                        TPX_DTYPE_BF16);
  int64_t b = add_param(m, "model.layers.0.mlp.up_proj", "bias", 8192, -1,
                        TPX_DTYPE_BF16);
  ck_assert_int_eq(w, 0);
  ck_assert_int_eq(b, 1);
  int64_t mod = tpx_model_find_module(m, "model.layers.0.mlp.up_proj");
  ck_assert_int_eq(tpx_model_module_kind(m, mod), TPX_MODULE_OTHER);
  ck_assert_int_eq(
      tpx_model_module_kind(m, tpx_model_find_module(m, "model.layers.0.mlp")),
      TPX_MODULE_CONTAINER);
  tpx_param_info info;
  ck_assert_int_eq(tpx_model_param(m, w, &info, &err), TPX_OK);
  ck_assert_str_eq(info.fqn, "model.layers.0.mlp.up_proj.weight");
  ck_assert_str_eq(info.name, "weight");
  ck_assert_int_eq(info.module, mod);
  ck_assert_int_eq(info.ndim, 2);
  ck_assert_int_eq(info.shape[0], 8192);
  ck_assert_int_eq(info.shape[1], 2048);
  ck_assert_int_eq(info.dtype, TPX_DTYPE_BF16);
  ck_assert_int_eq(info.tied_to, -1);
  ck_assert_int_eq(tpx_model_find_param(m, "model.layers.0.mlp.up_proj.bias"),
                   b);
  ck_assert_int_eq(tpx_model_find_param(m, "model.layers.0.mlp.up_proj"), -1);

  /* Duplicate: an error naming the parameter, and nothing changes. */
  int64_t shape[1] = {3};
  ck_assert_int_eq(tpx_model_add_param(m, "model.layers.0.mlp.up_proj", "bias",
                                       shape, 1, TPX_DTYPE_F32, NULL, &err),
                   TPX_ALREADY_EXISTS);
  ck_assert_msg(strstr(err.message, "model.layers.0.mlp.up_proj.bias"), "%s",
                err.message);
  ck_assert_uint_eq(tpx_model_num_params(m), 2);

  /* A parameter on the root module. */
  tpx_error e2 = {0};
  ck_assert_int_eq(
      tpx_model_add_param(m, "", "scale", NULL, 0, TPX_DTYPE_F32, NULL, &e2),
      TPX_OK);
  ck_assert_int_ge(tpx_model_find_param(m, "scale"), 0);
  /* An existing leaf module keeps its kind when a parameter is added. */
  ck_assert_int_eq(
      tpx_model_add_module(m, "model.norm", TPX_MODULE_NORM, NULL, &e2),
      TPX_OK);
  add_param(m, "model.norm", "weight", 2048, -1, TPX_DTYPE_F32);
  ck_assert_int_eq(
      tpx_model_module_kind(m, tpx_model_find_module(m, "model.norm")),
      TPX_MODULE_NORM);
  tpx_error e3 = {0};
  ck_assert_int_eq(tpx_model_param(m, 99, &info, &e3), TPX_OUT_OF_RANGE);
  ck_assert_int_eq(tpx_model_param(m, -1, &info, NULL), TPX_OUT_OF_RANGE);
  tpx_model_destroy(m);
}
END_TEST

START_TEST(test_bad_params) {
  static const struct {
    const char *module, *name;
    int64_t shape[TPX_MAX_TENSOR_DIMS + 1];
    int ndim;
    int dtype;
    tpx_status want;
    const char *msg;
  } cases[] = {
      {"a", "w", {-1}, 1, TPX_DTYPE_F32, TPX_OUT_OF_RANGE, "a.w"},
      {"a", "w", {4, -2}, 2, TPX_DTYPE_F32, TPX_OUT_OF_RANGE, "[4, -2]"},
      {"a",
       "w",
       {1LL << 40, 1LL << 40},
       2,
       TPX_DTYPE_F32,
       TPX_OUT_OF_RANGE,
       "too large"},
      {"a",
       "w",
       {1},
       TPX_MAX_TENSOR_DIMS + 1,
       TPX_DTYPE_F32,
       TPX_INVALID_ARGUMENT,
       "ndim"},
      {"a", "w", {1}, -1, TPX_DTYPE_F32, TPX_INVALID_ARGUMENT, "ndim"},
      {"a", "w", {1}, 1, TPX_DTYPE_INVALID, TPX_INVALID_ARGUMENT, "dtype"},
      {"a", "w", {1}, 1, TPX_DTYPE_COUNT, TPX_INVALID_ARGUMENT, "dtype"},
      {"a", "x.w", {1}, 1, TPX_DTYPE_F32, TPX_INVALID_ARGUMENT, "x.w"},
      {"a", "", {1}, 1, TPX_DTYPE_F32, TPX_INVALID_ARGUMENT, "non-empty"},
      {"a..b", "w", {1}, 1, TPX_DTYPE_F32, TPX_INVALID_ARGUMENT, "a..b"},
  };
  tpx_model *m = new_model();
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    tpx_error err = {0};
    tpx_status st = tpx_model_add_param(m, cases[i].module, cases[i].name,
                                        cases[i].shape, cases[i].ndim,
                                        (tpx_dtype)cases[i].dtype, NULL, &err);
    ck_assert_msg(st == cases[i].want, "case %zu: %s (%s)", i,
                  tpx_status_name(st), err.message);
    ck_assert_msg(strstr(err.message, cases[i].msg) != NULL,
                  "case %zu: '%s' lacks '%s'", i, err.message, cases[i].msg);
  }
  ck_assert_uint_eq(tpx_model_num_params(m), 0);
  ck_assert_uint_eq(tpx_model_num_modules(m), 1);
  tpx_model_destroy(m);
}
END_TEST

START_TEST(test_tie_and_totals) {
  tpx_model *m = new_model();
  tpx_error err = {0};
  int64_t emb =
      add_param(m, "model.embed_tokens", "weight", 1000, 64, TPX_DTYPE_BF16);
  add_param(m, "model.norm", "weight", 64, -1, TPX_DTYPE_F32);
  /* lm_head.weight does not exist yet: created with the target's shape. */
  ck_assert_int_eq(
      tpx_model_tie(m, "lm_head.weight", "model.embed_tokens.weight", &err),
      TPX_OK);
  int64_t head = tpx_model_find_param(m, "lm_head.weight");
  ck_assert_int_ge(head, 0);
  tpx_param_info info;
  ck_assert_int_eq(tpx_model_param(m, head, &info, &err), TPX_OK);
  ck_assert_int_eq(info.tied_to, emb);
  ck_assert_int_eq(info.ndim, 2);
  ck_assert_int_eq(info.shape[0], 1000);
  ck_assert_int_eq(info.shape[1], 64);
  ck_assert_int_eq(info.dtype, TPX_DTYPE_BF16);
  ck_assert_int_eq(tpx_model_param(m, emb, &info, &err), TPX_OK);
  ck_assert_int_eq(info.tied_to, -1);
  /* The tied tensor counts once. */
  ck_assert_int_eq(tpx_model_total_params(m), 1000 * 64 + 64);
  ck_assert_int_eq(tpx_model_total_bytes(m), 1000 * 64 * 2 + 64 * 4);

  /* A tie to a tied parameter resolves to the storage. */
  ck_assert_int_eq(tpx_model_tie(m, "extra.weight", "lm_head.weight", &err),
                   TPX_OK);
  ck_assert_int_eq(
      tpx_model_param(m, tpx_model_find_param(m, "extra.weight"), &info, &err),
      TPX_OK);
  ck_assert_int_eq(info.tied_to, emb);
  ck_assert_int_eq(tpx_model_total_params(m), 1000 * 64 + 64);
  tpx_model_destroy(m);
}
END_TEST

START_TEST(test_tie_errors) {
  tpx_model *m = new_model();
  add_param(m, "model.embed_tokens", "weight", 1000, 64, TPX_DTYPE_BF16);
  add_param(m, "lm_head", "weight", 1000, 32, TPX_DTYPE_BF16);
  add_param(m, "other", "weight", 1000, 64, TPX_DTYPE_F32);
  tpx_error err = {0};
  ck_assert_int_eq(
      tpx_model_tie(m, "lm_head.weight", "model.embed_tokens.weight", &err),
      TPX_INVALID_ARGUMENT);
  ck_assert_msg(strstr(err.message, "[1000, 32]") &&
                    strstr(err.message, "[1000, 64]") &&
                    strstr(err.message, "lm_head.weight"),
                "%s", err.message);
  tpx_error e2 = {0};
  ck_assert_int_eq(
      tpx_model_tie(m, "other.weight", "model.embed_tokens.weight", &e2),
      TPX_INVALID_ARGUMENT);
  ck_assert_msg(strstr(e2.message, "F32") && strstr(e2.message, "BF16"), "%s",
                e2.message);
  tpx_error e3 = {0};
  ck_assert_int_eq(tpx_model_tie(m, "lm_head.weight", "missing.weight", &e3),
                   TPX_NOT_FOUND);
  ck_assert_msg(strstr(e3.message, "missing.weight"), "%s", e3.message);
  tpx_error e4 = {0};
  ck_assert_int_eq(tpx_model_tie(m, "model.embed_tokens.weight",
                                 "model.embed_tokens.weight", &e4),
                   TPX_INVALID_ARGUMENT);
  /* The failures changed nothing. */
  for (size_t i = 0; i < tpx_model_num_params(m); i++) {
    tpx_param_info info;
    ck_assert_int_eq(tpx_model_param(m, (int64_t)i, &info, NULL), TPX_OK);
    ck_assert_int_eq(info.tied_to, -1);
  }
  ck_assert_uint_eq(tpx_model_num_params(m), 3);
  tpx_model_destroy(m);
}
END_TEST

START_TEST(test_retie_moves_dependents) {
  /* b -> a, then a -> c: b must follow to c (ties point at storage). */
  tpx_model *m = new_model();
  int64_t a = add_param(m, "a", "w", 4, 4, TPX_DTYPE_F32);
  add_param(m, "c", "w", 4, 4, TPX_DTYPE_F32);
  tpx_error err = {0};
  ck_assert_int_eq(tpx_model_tie(m, "b.w", "a.w", &err), TPX_OK);
  ck_assert_int_eq(tpx_model_tie(m, "a.w", "c.w", &err), TPX_OK);
  int64_t c = tpx_model_find_param(m, "c.w");
  tpx_param_info info;
  tpx_model_param(m, tpx_model_find_param(m, "b.w"), &info, NULL);
  ck_assert_int_eq(info.tied_to, c);
  tpx_model_param(m, a, &info, NULL);
  ck_assert_int_eq(info.tied_to, c);
  ck_assert_int_eq(tpx_model_total_params(m), 16);
  /* c -> b would be a cycle onto itself. */
  ck_assert_int_eq(tpx_model_tie(m, "c.w", "b.w", &err), TPX_INVALID_ARGUMENT);
  tpx_model_destroy(m);
}
END_TEST

START_TEST(test_totals_by_dtype) {
  static const struct {
    tpx_dtype dt;
    int64_t size;
  } cases[] = {
      {TPX_DTYPE_F64, 8},     {TPX_DTYPE_F32, 4},     {TPX_DTYPE_F16, 2},
      {TPX_DTYPE_BF16, 2},    {TPX_DTYPE_F8_E4M3, 1}, {TPX_DTYPE_F8_E5M2, 1},
      {TPX_DTYPE_F8_E8M0, 1}, {TPX_DTYPE_I64, 8},     {TPX_DTYPE_I32, 4},
      {TPX_DTYPE_I16, 2},     {TPX_DTYPE_I8, 1},      {TPX_DTYPE_U64, 8},
      {TPX_DTYPE_U32, 4},     {TPX_DTYPE_U16, 2},     {TPX_DTYPE_U8, 1},
      {TPX_DTYPE_BOOL, 1},
  };
  tpx_model *m = new_model();
  int64_t want_bytes = 0, want_params = 0;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char mod[32];
    snprintf(mod, sizeof mod, "m%zu", i);
    add_param(m, mod, "w", 3, (int64_t)i + 1, cases[i].dt);
    want_params += 3 * ((int64_t)i + 1);
    want_bytes += 3 * ((int64_t)i + 1) * cases[i].size;
  }
  /* Scalars and empty tensors. */
  tpx_error err = {0};
  ck_assert_int_eq(
      tpx_model_add_param(m, "s", "scalar", NULL, 0, TPX_DTYPE_F32, NULL, &err),
      TPX_OK);
  int64_t zero[2] = {0, 7};
  ck_assert_int_eq(
      tpx_model_add_param(m, "s", "empty", zero, 2, TPX_DTYPE_F32, NULL, &err),
      TPX_OK);
  ck_assert_int_eq(tpx_model_total_params(m), want_params + 1);
  ck_assert_int_eq(tpx_model_total_bytes(m), want_bytes + 4);
  tpx_model_destroy(m);
}
END_TEST

START_TEST(test_kind_names) {
  static const struct {
    tpx_module_kind kind;
    const char *name;
  } cases[] = {
      {TPX_MODULE_CONTAINER, "container"}, {TPX_MODULE_LINEAR, "linear"},
      {TPX_MODULE_EMBEDDING, "embedding"}, {TPX_MODULE_NORM, "norm"},
      {TPX_MODULE_ROTARY, "rotary"},       {TPX_MODULE_OTHER, "other"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    ck_assert_str_eq(tpx_module_kind_name(cases[i].kind), cases[i].name);
    tpx_module_kind k = TPX_MODULE_OTHER;
    ck_assert_int_eq(tpx_module_kind_parse(cases[i].name, &k, NULL), TPX_OK);
    ck_assert_int_eq(k, cases[i].kind);
  }
  ck_assert_str_eq(tpx_module_kind_name((tpx_module_kind)42), "invalid");
  tpx_error err = {0};
  tpx_module_kind k;
  ck_assert_int_eq(tpx_module_kind_parse("Linear", &k, &err), TPX_PARSE);
  ck_assert_msg(strstr(err.message, "'Linear'"), "%s", err.message);
}
END_TEST

START_TEST(test_architectures) {
  tpx_model *m = new_model();
  tpx_error err = {0};
  ck_assert_int_eq(tpx_model_add_architecture(m, "LlamaForCausalLM", &err),
                   TPX_OK);
  ck_assert_int_eq(tpx_model_add_architecture(m, "LlamaModel", &err), TPX_OK);
  ck_assert_int_eq(tpx_model_add_architecture(m, "LlamaForCausalLM", &err),
                   TPX_OK);
  ck_assert_uint_eq(tpx_model_num_architectures(m), 2);
  ck_assert_str_eq(tpx_model_architecture(m, 0), "LlamaForCausalLM");
  ck_assert_str_eq(tpx_model_architecture(m, 1), "LlamaModel");
  ck_assert_int_eq(tpx_model_add_architecture(m, "", &err),
                   TPX_INVALID_ARGUMENT);
  tpx_model_destroy(m);
}
END_TEST

/* Not a timed test (bench/ times things): a million parameters in a deep
 * MoE-like tree must build, be found and count correctly. */
START_TEST(test_million_params) {
  tpx_model *m = new_model();
  static const char *lin[3] = {"gate_proj", "up_proj", "down_proj"};
  char mod[96];
  const int layers = 1303, experts = 256;
  int64_t shape[2] = {64, 32};
  size_t n = 0;
  for (int l = 0; l < layers; l++)
    for (int x = 0; x < experts; x++)
      for (int k = 0; k < 3; k++) {
        snprintf(mod, sizeof mod, "model.layers.%d.mlp.experts.%d.%s", l, x,
                 lin[k]);
        tpx_error err = {0};
        ck_assert_int_eq(tpx_model_add_param(m, mod, "weight", shape, 2,
                                             TPX_DTYPE_BF16, NULL, &err),
                         TPX_OK);
        n++;
      }
  ck_assert_uint_ge(n, 1000000);
  ck_assert_uint_eq(tpx_model_num_params(m), n);
  ck_assert_int_eq(tpx_model_total_params(m), (int64_t)n * 64 * 32);
  ck_assert_int_eq(tpx_model_total_bytes(m), (int64_t)n * 64 * 32 * 2);
  int64_t layers_idx = tpx_model_find_module(m, "model.layers");
  ck_assert_uint_eq(tpx_model_module_num_children(m, layers_idx),
                    (size_t)layers);
  ck_assert_str_eq(
      tpx_model_module_fqn(m, tpx_model_module_child(m, layers_idx, 1000)),
      "model.layers.1000");
  for (int l = 0; l < layers; l += 97) {
    char fqn[128];
    snprintf(fqn, sizeof fqn, "model.layers.%d.mlp.experts.%d.up_proj.weight",
             l, (l * 7) % experts);
    int64_t p = tpx_model_find_param(m, fqn);
    ck_assert_int_ge(p, 0);
    tpx_param_info info;
    ck_assert_int_eq(tpx_model_param(m, p, &info, NULL), TPX_OK);
    ck_assert_str_eq(info.fqn, fqn);
    ck_assert_str_eq(info.name, "weight");
    char want_mod[128];
    snprintf(want_mod, sizeof want_mod,
             "model.layers.%d.mlp.experts.%d.up_proj", l, (l * 7) % experts);
    ck_assert_str_eq(tpx_model_module_fqn(m, info.module), want_mod);
    ck_assert_int_eq(tpx_model_module_kind(m, info.module), TPX_MODULE_OTHER);
    ck_assert_int_eq(
        tpx_model_find_module(m, tpx_model_module_fqn(m, info.module)),
        info.module);
  }
  ck_assert_int_eq(tpx_model_find_param(m, "model.layers.1303.mlp.experts.0."
                                           "up_proj.weight"),
                   -1);
  tpx_model_destroy(m);
}
END_TEST

/* ---- strmap ---- */

START_TEST(test_strmap_basic) {
  tpx__strmap map = TPX__STRMAP_INIT;
  int64_t v = 0;
  ck_assert_int_eq(tpx__strmap_find(&map, "x", 1, &v), 0);
  ck_assert_int_eq(tpx__strmap_get(&map, "x", -7), -7);
  ck_assert_int_eq(tpx__strmap_put(&map, "alpha", 5, 1, NULL), 0);
  ck_assert_int_eq(tpx__strmap_put(&map, "", 0, 2, NULL), 0);
  /* A prefix of a longer key is its own key. */
  const char *long_key = "alpha.beta";
  ck_assert_int_eq(tpx__strmap_put(&map, long_key, 10, 3, NULL), 0);
  ck_assert_int_eq(tpx__strmap_find(&map, long_key, 5, &v), 1);
  ck_assert_int_eq(v, 1);
  int64_t existing = 0;
  ck_assert_int_eq(tpx__strmap_put(&map, "alpha", 5, 99, &existing), 1);
  ck_assert_int_eq(existing, 1);
  ck_assert_int_eq(tpx__strmap_get(&map, "alpha", -1), 1);
  ck_assert_int_eq(tpx__strmap_set(&map, "alpha", 5, 42), 0);
  ck_assert_int_eq(tpx__strmap_get(&map, "alpha", -1), 42);
  ck_assert_int_eq(tpx__strmap_get(&map, "", -1), 2);
  ck_assert_uint_eq(tpx__strmap_count(&map), 3);
  tpx__strmap_free(&map);
  ck_assert_uint_eq(tpx__strmap_count(&map), 0);
  tpx__strmap_free(&map);
}
END_TEST

START_TEST(test_strmap_many) {
  enum { N = 200000 };
  char *keys = malloc((size_t)N * 16);
  ck_assert_ptr_nonnull(keys);
  tpx__strmap map;
  tpx__strmap_init(&map);
  for (int i = 0; i < N; i++) {
    snprintf(keys + (size_t)i * 16, 16, "k.%d", i);
    ck_assert_int_eq(tpx__strmap_put(&map, keys + (size_t)i * 16,
                                     strlen(keys + (size_t)i * 16), i, NULL),
                     0);
  }
  ck_assert_uint_eq(tpx__strmap_count(&map), N);
  for (int i = 0; i < N; i++)
    ck_assert_int_eq(tpx__strmap_get(&map, keys + (size_t)i * 16, -1), i);
  ck_assert_int_eq(tpx__strmap_get(&map, "k.200000", -1), -1);
  ck_assert_int_eq(tpx__strmap_get(&map, "k.", -1), -1);
  tpx__strmap_free(&map);
  free(keys);
}
END_TEST

/* Many parameters on one module (a safetensors header of flat names): past
 * the fan-out the module's names go into a map, so each addition and lookup
 * stays constant time (200 000 scanned each other's names: minutes), and
 * duplicates are still found, before and after the map is made. */
START_TEST(test_wide_module) {
  tpx_model *m = new_model();
  tpx_error err = {0};
  int64_t shape[1] = {1};
  char name[32], fqn[48];
  const int n = 200000;
  clock_t start = clock();
  for (int i = 0; i < n; i++) {
    snprintf(name, sizeof name, "t%d", i);
    ck_assert_int_eq(tpx_model_add_param(m, "flat", name, shape, 1,
                                         TPX_DTYPE_U8, NULL, &err),
                     TPX_OK);
    if (i == 3 || i == 20) { /* before and after the map */
      ck_assert_int_eq(tpx_model_add_param(m, "flat", "t1", shape, 1,
                                           TPX_DTYPE_U8, NULL, &err),
                       TPX_ALREADY_EXISTS);
      ck_assert_msg(strstr(err.message, "flat.t1"), "%s", err.message);
    }
  }
  ck_assert_uint_eq(tpx_model_num_params(m), (size_t)n);
  /* about a second of CPU even under the sanitizers; the scans took two
   * minutes */
  double cpu = (double)(clock() - start) / CLOCKS_PER_SEC;
  ck_assert_msg(cpu < 15, "200 000 parameters on one module took %.1f s", cpu);
  for (int i = 0; i < n; i += 997) {
    snprintf(fqn, sizeof fqn, "flat.t%d", i);
    ck_assert_int_eq(tpx_model_find_param(m, fqn), i);
  }
  ck_assert_int_eq(tpx_model_find_param(m, "flat.t200000"), -1);
  ck_assert_int_eq(tpx_model_find_param(m, "flat.t"), -1);
  /* the root module's own parameters, past the fan-out too */
  for (int i = 0; i < 20; i++) {
    snprintf(name, sizeof name, "r%d", i);
    ck_assert_int_eq(
        tpx_model_add_param(m, "", name, shape, 1, TPX_DTYPE_U8, NULL, &err),
        TPX_OK);
  }
  ck_assert_int_eq(tpx_model_find_param(m, "r19"), n + 19);
  ck_assert_int_eq(tpx_model_find_param(m, "r0"), n);
  tpx_model_destroy(m);
}
END_TEST

/* `tpx plan --dtype` through the library (issue 30: the CLI no longer
 * rewrites config.json itself). */
START_TEST(test_config_dtype) {
  tpx_model *m = NULL;
  tpx_error e = {0};
  const char *cfg = "{\"torch_dtype\": \"float32\", \"hidden_size\": 8}";
  ck_assert_int_eq(tpx_model_create(&m, &e), TPX_OK);
  ck_assert_int_eq(tpx_model_set_config_dtype(m, TPX_DTYPE_BF16, &e),
                   TPX_INVALID_ARGUMENT); /* no config yet */
  ck_assert_int_eq(tpx_model_set_config(m, cfg, strlen(cfg), "c", &e), TPX_OK);
  ck_assert_int_eq(tpx_model_set_config_dtype(m, TPX_DTYPE_BF16, &e), TPX_OK);
  const char *s = NULL;
  ck_assert_int_eq(tpx_model_config_string(m, "torch_dtype", &s, &e), TPX_OK);
  ck_assert_str_eq(s, "bfloat16");
  int64_t h = 0;
  ck_assert_int_eq(tpx_model_config_int(m, "hidden_size", &h, &e), TPX_OK);
  ck_assert_int_eq(h, 8);
  tpx_error_clear(&e);
  ck_assert_int_eq(tpx_model_set_config_dtype(m, TPX_DTYPE_I32, &e),
                   TPX_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(e.message, "floating-point"));
  ck_assert_int_eq(tpx_model_set_config_dtype(NULL, TPX_DTYPE_F16, NULL),
                   TPX_INVALID_ARGUMENT);
  tpx_model_destroy(m);
}
END_TEST

static Suite *model_suite(void) {
  Suite *s = suite_create("model");
  TCase *tc = tcase_create("builder");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_empty_model);
  tcase_add_test(tc, test_parents_auto_created);
  tcase_add_test(tc, test_child_order_is_insertion_order);
  tcase_add_test(tc, test_bad_module_names);
  tcase_add_test(tc, test_params_and_duplicates);
  tcase_add_test(tc, test_bad_params);
  tcase_add_test(tc, test_tie_and_totals);
  tcase_add_test(tc, test_tie_errors);
  tcase_add_test(tc, test_retie_moves_dependents);
  tcase_add_test(tc, test_totals_by_dtype);
  tcase_add_test(tc, test_kind_names);
  tcase_add_test(tc, test_architectures);
  tcase_add_test(tc, test_config_dtype);
  suite_add_tcase(s, tc);
  /* Alone, with room for sanitizer builds on a busy machine. */
  TCase *big = tcase_create("scale");
  tcase_set_timeout(big, 600);
  tcase_add_test(big, test_million_params);
  tcase_add_test(big, test_wide_module);
  suite_add_tcase(s, big);
  TCase *tm = tcase_create("strmap");
  tcase_set_timeout(tm, 120);
  tcase_add_test(tm, test_strmap_basic);
  tcase_add_test(tm, test_strmap_many);
  suite_add_tcase(s, tm);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(model_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? 0 : 1;
}
