/* test_model_config.c — HF config.json loading (config.c): the real configs
 * under tests/data/model/configs, Python-style Infinity/NaN, VLM nesting,
 * path lookups, typed reads and their errors. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/config.h"
#include "model/config_attrs.h"
#include "tpx/model.h"

static char *data_path(const char *rel) {
  const char *root = getenv("TPX_SOURCE_DIR");
  ck_assert_msg(root != NULL, "TPX_SOURCE_DIR is not set");
  size_t n = strlen(root) + strlen(rel) + 32;
  char *p = malloc(n);
  snprintf(p, n, "%s/tests/data/model/%s", root, rel);
  return p;
}

static tpx_model *load(const char *rel) {
  char *path = data_path(rel);
  tpx_model *m = NULL;
  tpx_error err = {0};
  tpx_status st = tpx_model_load_config(path, &m, &err);
  ck_assert_msg(st == TPX_OK, "%s: %s", path, err.message);
  ck_assert_str_eq(tpx_model_source(m), path);
  free(path);
  return m;
}

/* Facts read off the real configs. */
static const struct {
  const char *dir, *arch, *model_type, *torch_dtype;
  int64_t heads, kv_heads, layers, hidden, vocab;
  int tie; /* -1: absent */
  double rope_theta;
} real[] = {
    {"Llama-3.2-1B", "LlamaForCausalLM", "llama", "bfloat16", 32, 8, 16, 2048,
     128256, 1, 500000.0},
    {"Qwen2.5-0.5B", "Qwen2ForCausalLM", "qwen2", "bfloat16", 14, 2, 24, 896,
     151936, 1, 1000000.0},
    {"Qwen3-0.6B", "Qwen3ForCausalLM", "qwen3", "bfloat16", 16, 8, 28, 1024,
     151936, 1, 1000000.0},
    {"Qwen3-30B-A3B", "Qwen3MoeForCausalLM", "qwen3_moe", "bfloat16", 32, 4, 48,
     2048, 151936, 0, 1000000.0},
    {"Mixtral-8x7B-v0.1", "MixtralForCausalLM", "mixtral", "bfloat16", 32, 8,
     32, 4096, 32000, 0, 1000000.0},
    {"gemma-3-1b-it", "Gemma3ForCausalLM", "gemma3_text", "bfloat16", 4, 1, 26,
     1152, 262144, -1, 1000000.0},
    {"phi-2", "PhiForCausalLM", "phi", "float16", 32, 32, 32, 2560, 51200, 0,
     10000.0},
    {"Falcon-H1-0.5B", "FalconH1ForCausalLM", "falcon_h1", "bfloat16", 8, 2, 36,
     1024, 32784, 0, -1.0},
};

START_TEST(test_real_configs) {
  char rel[128];
  snprintf(rel, sizeof rel, "configs/%s/config.json", real[_i].dir);
  tpx_model *m = load(rel);
  tpx_error err = {0};
  ck_assert_uint_eq(tpx_model_num_architectures(m), 1);
  ck_assert_str_eq(tpx_model_architecture(m, 0), real[_i].arch);
  int64_t v = 0;
  ck_assert_int_eq(tpx_model_config_int(m, "num_attention_heads", &v, &err),
                   TPX_OK);
  ck_assert_int_eq(v, real[_i].heads);
  ck_assert_int_eq(tpx_model_config_int(m, "num_key_value_heads", &v, &err),
                   TPX_OK);
  ck_assert_int_eq(v, real[_i].kv_heads);
  ck_assert_int_eq(tpx_model_config_int(m, "num_hidden_layers", &v, &err),
                   TPX_OK);
  ck_assert_int_eq(v, real[_i].layers);
  ck_assert_int_eq(tpx_model_config_int(m, "hidden_size", &v, &err), TPX_OK);
  ck_assert_int_eq(v, real[_i].hidden);
  ck_assert_int_eq(tpx_model_config_int(m, "vocab_size", &v, &err), TPX_OK);
  ck_assert_int_eq(v, real[_i].vocab);
  const char *s = NULL;
  ck_assert_int_eq(tpx_model_config_string(m, "model_type", &s, &err), TPX_OK);
  ck_assert_str_eq(s, real[_i].model_type);
  ck_assert_int_eq(tpx_model_config_string(m, "torch_dtype", &s, &err), TPX_OK);
  ck_assert_str_eq(s, real[_i].torch_dtype);
  int tie = -5;
  tpx_status st = tpx_model_config_bool(m, "tie_word_embeddings", &tie, &err);
  if (real[_i].tie < 0) {
    ck_assert_int_eq(st, TPX_NOT_FOUND);
  } else {
    ck_assert_msg(st == TPX_OK, "%s", err.message);
    ck_assert_int_eq(tie, real[_i].tie);
  }
  if (real[_i].rope_theta > 0) {
    tpx_error e2 = {0};
    double theta = 0;
    ck_assert_int_eq(tpx_model_config_float(m, "rope_theta", &theta, &e2),
                     TPX_OK);
    ck_assert_double_eq(theta, real[_i].rope_theta);
  }
  ck_assert_uint_eq(tpx_model_num_modules(m), 1);
  ck_assert_uint_eq(tpx_model_num_params(m), 0);
  tpx_model_destroy(m);
}
END_TEST

START_TEST(test_llama_nested_and_nulls) {
  tpx_model *m = load("configs/Llama-3.2-1B/config.json");
  tpx_error err = {0};
  double f = 0;
  ck_assert_int_eq(tpx_model_config_float(m, "rope_scaling.factor", &f, &err),
                   TPX_OK);
  ck_assert_double_eq(f, 32.0);
  /* An integral float reads as an int. */
  int64_t i = 0;
  ck_assert_int_eq(tpx_model_config_int(m, "rope_scaling.factor", &i, &err),
                   TPX_OK);
  ck_assert_int_eq(i, 32);
  const char *s;
  ck_assert_int_eq(
      tpx_model_config_string(m, "rope_scaling.rope_type", &s, &err), TPX_OK);
  ck_assert_str_eq(s, "llama3");
  /* An int reads as a float. */
  ck_assert_int_eq(tpx_model_config_float(m, "hidden_size", &f, &err), TPX_OK);
  ck_assert_double_eq(f, 2048.0);
  tpx_model_destroy(m);

  m = load("configs/gemma-3-1b-it/config.json");
  tpx_error e2 = {0};
  ck_assert_int_eq(tpx_model_config_float(m, "rope_scaling", &f, &e2),
                   TPX_NOT_FOUND); /* "rope_scaling": null */
  ck_assert_msg(strstr(e2.message, "rope_scaling"), "%s", e2.message);
  /* eos_token_id is a list. */
  tpx_error e3 = {0};
  ck_assert_int_eq(tpx_model_config_int(m, "eos_token_id[1]", &i, &e3), TPX_OK);
  ck_assert_int_eq(i, 106);
  ck_assert_int_eq(tpx_model_config_int(m, "eos_token_id", &i, &e3),
                   TPX_INVALID_ARGUMENT);
  ck_assert_msg(strstr(e3.message, "eos_token_id") &&
                    strstr(e3.message, "a list"),
                "%s", e3.message);
  tpx_model_destroy(m);
}
END_TEST

START_TEST(test_nonfinite) {
  tpx_model *m = load("odd/nonfinite/config.json");
  tpx_error err = {0};
  double f = 0;
  ck_assert_int_eq(
      tpx_model_config_float(m, "max_position_embeddings", &f, &err), TPX_OK);
  ck_assert(isinf(f) && f > 0);
  ck_assert_int_eq(tpx_model_config_float(m, "min_value", &f, &err), TPX_OK);
  ck_assert(isinf(f) && f < 0);
  ck_assert_int_eq(tpx_model_config_float(m, "router_aux_loss", &f, &err),
                   TPX_OK);
  ck_assert(isnan(f));
  static const struct {
    const char *path;
    int kind; /* 0 finite, 1 +inf, -1 -inf, 2 nan */
    double value;
  } items[] = {
      {"values[0]", 0, 1.0},
      {"values[1]", 2, 0},
      {"values[2]", -1, 0},
      {"values[3]", 0, 2.5},
      {"values[4]", 1, 0},
      {"rope_scaling.high_freq_factor", 1, 0},
      {"nested.list[1].deep[1][1]", 2, 0},
      {"nested.list[1].deep[0][1]", 0, 20},
  };
  for (size_t k = 0; k < sizeof items / sizeof *items; k++) {
    tpx_error e = {0};
    ck_assert_msg(tpx_model_config_float(m, items[k].path, &f, &e) == TPX_OK,
                  "%s: %s", items[k].path, e.message);
    switch (items[k].kind) {
    case 0: ck_assert_double_eq(f, items[k].value); break;
    case 1: ck_assert(isinf(f) && f > 0); break;
    case -1: ck_assert(isinf(f) && f < 0); break;
    default: ck_assert(isnan(f));
    }
  }
  /* Text inside strings is untouched; a key named Infinity too. */
  const char *s;
  ck_assert_int_eq(tpx_model_config_string(m, "note", &s, &err), TPX_OK);
  ck_assert_str_eq(
      s, "Strings keep NaN, Infinity and -Infinity as text: \"NaN\" stays");
  ck_assert_int_eq(tpx_model_config_string(m, "Infinity", &s, &err), TPX_OK);
  ck_assert_str_eq(s, "key named Infinity");
  /* A non-finite number is neither an int nor a string. */
  tpx_error e1 = {0};
  int64_t i;
  ck_assert_int_eq(tpx_model_config_int(m, "max_position_embeddings", &i, &e1),
                   TPX_INVALID_ARGUMENT);
  ck_assert_msg(strstr(e1.message, "non-finite"), "%s", e1.message);
  tpx_error e2 = {0};
  ck_assert_int_eq(tpx_model_config_string(m, "router_aux_loss", &s, &e2),
                   TPX_INVALID_ARGUMENT);
  /* The private view agrees. */
  json_t *root = tpx__model_config(m);
  ck_assert_ptr_nonnull(root);
  json_t *v = tpx__config_lookup(root, "values[1]");
  ck_assert(tpx__config_is_nonfinite(v));
  ck_assert(tpx__config_number(v, &f) && isnan(f));
  ck_assert(!tpx__config_is_nonfinite(tpx__config_lookup(root, "note")));
  ck_assert_uint_eq(tpx_model_num_architectures(m), 2);
  ck_assert_str_eq(tpx_model_architecture(m, 0), "OddForCausalLM");
  ck_assert_str_eq(tpx_model_architecture(m, 1), "OddModel");
  tpx_model_destroy(m);
}
END_TEST

START_TEST(test_set_config_text) {
  static const struct {
    const char *text;
    const char *path;
    int kind; /* 1 +inf, -1 -inf, 2 nan, 0 value */
    double value;
  } cases[] = {
      {"{\"a\":Infinity}", "a", 1, 0},
      {"{\"a\":-Infinity}", "a", -1, 0},
      {"{\"a\":NaN}", "a", 2, 0},
      {"{\"a\":[NaN,NaN,Infinity]}", "a[2]", 1, 0},
      {"{\"a\":\t-Infinity\n}", "a", -1, 0},
      {"{\"a\":{\"b\":NaN},\"c\":1.5}", "c", 0, 1.5},
      {"{\"s\\\"NaN\":Infinity}", "s\"NaN", 1, 0},
      {"{\"a\":-1e308}", "a", 0, -1e308},
  };
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    tpx_model *m = NULL;
    tpx_error err = {0};
    ck_assert_int_eq(tpx_model_create(&m, &err), TPX_OK);
    ck_assert_msg(tpx_model_set_config(m, cases[k].text, strlen(cases[k].text),
                                       "inline", &err) == TPX_OK,
                  "%zu: %s", k, err.message);
    double f = 0;
    ck_assert_msg(tpx_model_config_float(m, cases[k].path, &f, &err) == TPX_OK,
                  "%zu: %s", k, err.message);
    if (cases[k].kind == 1)
      ck_assert(isinf(f) && f > 0);
    else if (cases[k].kind == -1)
      ck_assert(isinf(f) && f < 0);
    else if (cases[k].kind == 2)
      ck_assert(isnan(f));
    else
      ck_assert_double_eq(f, cases[k].value);
    tpx_model_destroy(m);
  }
}
END_TEST

START_TEST(test_set_config_replaces) {
  tpx_model *m = NULL;
  tpx_error err = {0};
  ck_assert_int_eq(tpx_model_create(&m, &err), TPX_OK);
  const char *a = "{\"architectures\":[\"A\",\"B\"],\"x\":1}";
  ck_assert_int_eq(tpx_model_set_config(m, a, strlen(a), "a.json", &err),
                   TPX_OK);
  ck_assert_str_eq(tpx_model_source(m), "a.json");
  /* A failed replacement keeps the old config and architectures. */
  const char *bad = "{\"architectures\":\"C\"}";
  tpx_error e2 = {0};
  ck_assert_int_eq(tpx_model_set_config(m, bad, strlen(bad), "bad.json", &e2),
                   TPX_INVALID_ARGUMENT);
  ck_assert_msg(strstr(e2.message, "bad.json"), "%s", e2.message);
  ck_assert_uint_eq(tpx_model_num_architectures(m), 2);
  int64_t v = 0;
  ck_assert_int_eq(tpx_model_config_int(m, "x", &v, &err), TPX_OK);
  ck_assert_int_eq(v, 1);
  ck_assert_str_eq(tpx_model_source(m), "a.json");
  const char *b = "{\"architectures\":[\"C\"],\"y\":2}";
  ck_assert_int_eq(tpx_model_set_config(m, b, strlen(b), "b.json", &err),
                   TPX_OK);
  ck_assert_uint_eq(tpx_model_num_architectures(m), 1);
  ck_assert_str_eq(tpx_model_architecture(m, 0), "C");
  ck_assert_int_eq(tpx_model_config_int(m, "x", &v, NULL), TPX_NOT_FOUND);
  ck_assert_int_eq(tpx_model_config_int(m, "y", &v, NULL), TPX_OK);
  /* No "architectures": the list stays. */
  const char *c = "{\"z\":3}";
  ck_assert_int_eq(tpx_model_set_config(m, c, strlen(c), NULL, &err), TPX_OK);
  ck_assert_uint_eq(tpx_model_num_architectures(m), 1);
  tpx_model_destroy(m);
}
END_TEST

/* A Diffusers component config has "_class_name" instead of "architectures";
 * "architectures" wins when both are there; a malformed one is an error. */
START_TEST(test_diffusers_class_name) {
  static const struct {
    const char *json;
    tpx_status st;
    const char *arch; /* NULL: no architecture */
  } cases[] = {
      {"{\"_class_name\":\"WanTransformer3DModel\",\"num_layers\":30}", TPX_OK,
       "WanTransformer3DModel"},
      {"{\"architectures\":[\"A\"],\"_class_name\":\"B\"}", TPX_OK, "A"},
      {"{\"architectures\":null,\"_class_name\":\"B\"}", TPX_OK, "B"},
      {"{\"_class_name\":null}", TPX_OK, NULL},
      {"{\"_class_name\":\"\"}", TPX_INVALID_ARGUMENT, NULL},
      {"{\"_class_name\":[\"B\"]}", TPX_INVALID_ARGUMENT, NULL},
      {"{\"_class_name\":\"A\\u0000B\"}", TPX_INVALID_ARGUMENT, NULL},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    tpx_model *m = NULL;
    tpx_error err = {0};
    ck_assert_int_eq(tpx_model_create(&m, &err), TPX_OK);
    tpx_status st = tpx_model_set_config(m, cases[k].json,
                                         strlen(cases[k].json), "t.json", &err);
    ck_assert_msg(st == cases[k].st, "case %zu: %d (%s)", k, st, err.message);
    if (st != TPX_OK) {
      ck_assert_msg(strstr(err.message, "_class_name") &&
                        strstr(err.message, "t.json"),
                    "case %zu: %s", k, err.message);
    } else if (cases[k].arch) {
      ck_assert_uint_eq(tpx_model_num_architectures(m), 1);
      ck_assert_str_eq(tpx_model_architecture(m, 0), cases[k].arch);
    } else {
      ck_assert_uint_eq(tpx_model_num_architectures(m), 0);
    }
    tpx_model_destroy(m);
  }
}
END_TEST

START_TEST(test_lookup_paths) {
  tpx_model *m = load("odd/nonfinite/config.json");
  json_t *root = tpx__model_config(m);
  static const struct {
    const char *path;
    int found;
    int64_t value; /* checked when >= 0 and an integer */
  } cases[] = {
      {"block_configs[3].attention.n_heads_in_group", 1, 16},
      {"block_configs[0].attention.n_heads_in_group", 1, 8},
      {"block_configs[1].attention.n_heads_in_group", 1, -1}, /* json null */
      {"block_configs[4].attention.n_heads_in_group", 0, -1},
      {"text_config.num_attention_heads", 1, 16},
      {"vision_config.hidden_size", 1, 64},
      {"text_config.missing", 0, -1},
      {"nested.list[1].deep[0][0]", 1, 10},
      {"nested.list[1].deep[0]", 1, -1},
      {"nested.list[0].n", 1, 1},
      {"", 1, -1},
      {"text_config.", 0, -1},
      {".text_config", 0, -1},
      {"text_config..num_attention_heads", 0, -1},
      {"[0]", 0, -1},
      {"block_configs[]", 0, -1},
      {"block_configs[x]", 0, -1},
      {"block_configs[0", 0, -1},
      {"block_configs[0]x", 0, -1},
      {"block_configs.0", 0, -1},
      {"text_config[0]", 0, -1},
      {"num_heads_float[0]", 0, -1},
      {"block_configs[99999999999999999999999]", 0, -1},
  };
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    json_t *v = tpx__config_lookup(root, cases[k].path);
    ck_assert_msg((v != NULL) == cases[k].found, "path '%s'", cases[k].path);
    if (v != NULL && cases[k].value >= 0) {
      int64_t i = -1;
      ck_assert_msg(tpx__config_integer(v, &i), "path '%s'", cases[k].path);
      ck_assert_int_eq(i, cases[k].value);
    }
  }
  ck_assert(json_is_null(
      tpx__config_lookup(root, "block_configs[1].attention.n_heads_in_group")));
  ck_assert_ptr_eq(tpx__config_lookup(root, ""), root);
  ck_assert_ptr_null(tpx__config_lookup(NULL, "a"));
  ck_assert_ptr_null(tpx__config_lookup(root, NULL));
  tpx_model_destroy(m);
}
END_TEST

START_TEST(test_typed_reads) {
  tpx_model *m = load("odd/nonfinite/config.json");
  int64_t i = 0;
  double f = 0;
  int b = -1;
  const char *s = NULL;
  tpx_error err = {0};
  ck_assert_int_eq(tpx_model_config_int(m, "num_heads_float", &i, &err),
                   TPX_OK);
  ck_assert_int_eq(i, 32);
  ck_assert_int_eq(tpx_model_config_bool(m, "tie_word_embeddings", &b, &err),
                   TPX_OK);
  ck_assert_int_eq(b, 1);
  ck_assert_int_eq(
      tpx_model_config_bool(m, "block_configs[1].attention.no_op", &b, &err),
      TPX_OK);
  ck_assert_int_eq(b, 1);
  static const struct {
    int type; /* 0 int, 1 float, 2 bool, 3 string */
    const char *path;
    tpx_status want;
    const char *msg;
  } bad[] = {
      {0, "almost_int", TPX_INVALID_ARGUMENT, "a real number"},
      {0, "model_type", TPX_INVALID_ARGUMENT, "a string"},
      {0, "rope_scaling", TPX_INVALID_ARGUMENT, "an object"},
      {0, "tie_word_embeddings", TPX_INVALID_ARGUMENT, "a boolean"},
      {1, "model_type", TPX_INVALID_ARGUMENT, "expected a number"},
      {2, "num_heads_float", TPX_INVALID_ARGUMENT, "true or false"},
      {3, "num_heads_float", TPX_INVALID_ARGUMENT, "expected a string"},
      {0, "no_such_key", TPX_NOT_FOUND, "no_such_key"},
      {1, "block_configs[1].attention.n_heads_in_group", TPX_NOT_FOUND,
       "n_heads_in_group"},
      {3, "text_config[", TPX_NOT_FOUND, "text_config["},
  };
  for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
    tpx_error e = {0};
    tpx_status st;
    switch (bad[k].type) {
    case 0: st = tpx_model_config_int(m, bad[k].path, &i, &e); break;
    case 1: st = tpx_model_config_float(m, bad[k].path, &f, &e); break;
    case 2: st = tpx_model_config_bool(m, bad[k].path, &b, &e); break;
    default: st = tpx_model_config_string(m, bad[k].path, &s, &e);
    }
    ck_assert_msg(st == bad[k].want, "case %zu: %s", k, tpx_status_name(st));
    ck_assert_msg(strstr(e.message, bad[k].msg), "case %zu: '%s' lacks '%s'", k,
                  e.message, bad[k].msg);
    ck_assert_msg(strstr(e.message, "config.json"), "case %zu: '%s'", k,
                  e.message);
  }
  tpx_model_destroy(m);

  /* A model without config. */
  tpx_model *empty = NULL;
  ck_assert_int_eq(tpx_model_create(&empty, NULL), TPX_OK);
  tpx_error e = {0};
  ck_assert_int_eq(tpx_model_config_int(empty, "a", &i, &e), TPX_NOT_FOUND);
  ck_assert_ptr_null(tpx__model_config(empty));
  tpx_model_destroy(empty);
}
END_TEST

START_TEST(test_integral_floats) {
  static const struct {
    double d;
    int ok;
    int64_t v;
  } cases[] = {
      {2.0, 1, 2},
      {-3.0, 1, -3},
      {0.0, 1, 0},
      {2.5, 0, 0},
      {1e18, 1, 1000000000000000000LL},
      {1e19, 0, 0},
      {-9223372036854775808.0, 1, INT64_MIN},
      {9223372036854775808.0, 0, 0},
  };
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    json_t *r = json_real(cases[k].d);
    int64_t v = 0;
    ck_assert_int_eq(tpx__config_integer(r, &v), cases[k].ok);
    if (cases[k].ok)
      ck_assert_int_eq(v, cases[k].v);
    json_decref(r);
  }
}
END_TEST

/* Bounds on what a config may cost: a file of NaN tokens (each a 16-byte
 * sentinel and a jansson string) is refused past 4096 of them; a 100 000-
 * character architecture name is refused without being echoed whole; a
 * config value quoted back as JSON shows NaN, never the sentinel. */
START_TEST(test_config_bounds) {
  enum { N = 5000 };
  char *text = malloc(N * 4 + 64);
  ck_assert_ptr_nonnull(text);
  size_t n = (size_t)sprintf(text, "{\"a\": [");
  for (int i = 0; i < N; i++)
    n += (size_t)sprintf(text + n, "%sNaN", i ? "," : "");
  sprintf(text + n, "]}");
  tpx_model *m = NULL;
  tpx_error err = {0};
  ck_assert_int_eq(tpx_model_create(&m, &err), TPX_OK);
  ck_assert_int_eq(tpx_model_set_config(m, text, strlen(text), "bomb", &err),
                   TPX_PARSE);
  ck_assert_str_eq(err.message,
                   "bomb: more than 4096 Infinity / NaN values; a config "
                   "holds a few");
  /* 4096 are fine */
  n = (size_t)sprintf(text, "{\"a\": [");
  for (int i = 0; i < 4096; i++)
    n += (size_t)sprintf(text + n, "%sNaN", i ? "," : "");
  sprintf(text + n, "]}");
  tpx_error ok = {0};
  ck_assert_int_eq(tpx_model_set_config(m, text, strlen(text), "many", &ok),
                   TPX_OK);
  free(text);

  enum { L = 100000 };
  char *big = malloc(L + 64);
  ck_assert_ptr_nonnull(big);
  n = (size_t)sprintf(big, "{\"architectures\": [\"");
  memset(big + n, 'X', L);
  sprintf(big + n + L, "\"]}");
  tpx_error e2 = {0};
  ck_assert_int_eq(tpx_model_set_config(m, big, strlen(big), "long", &e2),
                   TPX_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(e2.message, "is 100000 characters long"));
  ck_assert_uint_lt(strlen(e2.message), 200);
  free(big);

  json_t *root = NULL;
  const char *nan_plan = "{\"p\": {\"x\": NaN, \"y\": -Infinity}}";
  ck_assert_int_eq(
      tpx__config_parse(nan_plan, strlen(nan_plan), "t", &root, &err), TPX_OK);
  char *dumped = tpx__config_dumps(json_object_get(root, "p"));
  ck_assert_str_eq(dumped, "{\"x\":NaN,\"y\":-Infinity}");
  free(dumped);
  json_decref(root);
  tpx_model_destroy(m);
}
END_TEST

/* A bare NaN / Infinity where a key stands is not JSON: refused with
 * jansson's message, never a key holding the internal sentinel (which
 * dumped back as NaN, or showed as an empty key). Values stay accepted. */
/* Issue 26, cause 5: transformers 5.25 writes Qwen3-MoE's expert count as
 * num_local_experts (attribute_map num_experts -> num_local_experts), older
 * releases num_experts; both names answer, as transformers' config does,
 * in a nested text_config too, and a key present is never overwritten. */
START_TEST(test_attribute_map_aliases) {
  static const char *const cfgs[] = {
      "{\"model_type\": \"qwen3_moe\", \"num_local_experts\": 4}",
      "{\"model_type\": \"qwen3_moe\", \"num_experts\": 4}",
      "{\"model_type\": \"x\", \"text_config\": {\"model_type\": "
      "\"qwen3_moe\", \"num_local_experts\": 4}}",
  };
  static const char *const keys[][2] = {
      {"num_experts", "num_local_experts"},
      {"num_experts", "num_local_experts"},
      {"text_config.num_experts", "text_config.num_local_experts"},
  };
  for (size_t i = 0; i < 3; i++) {
    tpx_model *m = NULL;
    tpx_error err = {0};
    ck_assert_int_eq(tpx_model_create(&m, &err), TPX_OK);
    ck_assert_int_eq(
        tpx_model_set_config(m, cfgs[i], strlen(cfgs[i]), NULL, &err), TPX_OK);
    for (size_t k = 0; k < 2; k++) {
      int64_t v = 0;
      ck_assert_msg(tpx_model_config_int(m, keys[i][k], &v, &err) == TPX_OK,
                    "%s in %s: %s", keys[i][k], cfgs[i], err.message);
      ck_assert_int_eq(v, 4);
    }
    tpx_model_destroy(m);
  }
  /* both present, different: each keeps its own */
  tpx_model *m = NULL;
  tpx_error err = {0};
  const char *both = "{\"model_type\": \"mixtral\", \"num_experts\": 2, "
                     "\"num_local_experts\": 8}";
  ck_assert_int_eq(tpx_model_create(&m, &err), TPX_OK);
  ck_assert_int_eq(tpx_model_set_config(m, both, strlen(both), NULL, &err),
                   TPX_OK);
  int64_t v = 0;
  ck_assert_int_eq(tpx_model_config_int(m, "num_local_experts", &v, &err),
                   TPX_OK);
  ck_assert_int_eq(v, 8);
  tpx_model_destroy(m);
  /* the table is transformers 5.25's, the version the HF tables follow */
  ck_assert_str_eq(tpx__config_attr_version, "5.25.0");
  ck_assert_uint_gt(tpx__num_config_attrs, 100);
  for (size_t i = 1; i < tpx__num_config_attrs; i++)
    ck_assert_int_le(strcmp(tpx__config_attrs[i - 1].model_type,
                            tpx__config_attrs[i].model_type),
                     0);
}
END_TEST

START_TEST(test_nonfinite_key_refused) {
  static const char *const bad[] = {
      "{\"architectures\": [\"X\"], NaN: 1}",
      "{\"p\": {NaN : \"colwise\"}}",
      "{\"p\": {\n  -Infinity\n: 1}}",
      "{Infinity:2}",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    json_t *root = NULL;
    tpx_error err = {0};
    ck_assert_int_eq(
        tpx__config_parse(bad[i], strlen(bad[i]), "k.json", &root, &err),
        TPX_PARSE);
    ck_assert_ptr_null(root);
    ck_assert_msg(strstr(err.message, "k.json: invalid JSON") &&
                      !strstr(err.message, "tpx:"),
                  "%s", err.message);
  }
  json_t *root = NULL;
  tpx_error err = {0};
  const char *ok = "{\"NaN\": NaN, \"a\": [Infinity , NaN]}";
  ck_assert_int_eq(tpx__config_parse(ok, strlen(ok), "ok", &root, &err),
                   TPX_OK);
  char *dumped = tpx__config_dumps(root);
  ck_assert_str_eq(dumped, "{\"NaN\":NaN,\"a\":[Infinity,NaN]}");
  free(dumped);
  json_decref(root);
}
END_TEST

START_TEST(test_load_missing_file) {
  tpx_model *m = (tpx_model *)1;
  tpx_error err = {0};
  ck_assert_int_eq(
      tpx_model_load_config("/nonexistent/dir/config.json", &m, &err),
      TPX_NOT_FOUND);
  ck_assert_ptr_null(m);
  ck_assert_msg(strstr(err.message, "/nonexistent/dir/config.json"), "%s",
                err.message);
  char *dir = data_path("configs");
  tpx_error e2 = {0};
  ck_assert_int_ne(tpx_model_load_config(dir, &m, &e2), TPX_OK);
  ck_assert_msg(strstr(e2.message, dir), "%s", e2.message);
  free(dir);
}
END_TEST

static Suite *config_suite(void) {
  Suite *s = suite_create("model_config");
  TCase *tc = tcase_create("config");
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, test_real_configs, 0, sizeof real / sizeof *real);
  tcase_add_test(tc, test_llama_nested_and_nulls);
  tcase_add_test(tc, test_nonfinite);
  tcase_add_test(tc, test_set_config_text);
  tcase_add_test(tc, test_set_config_replaces);
  tcase_add_test(tc, test_diffusers_class_name);
  tcase_add_test(tc, test_lookup_paths);
  tcase_add_test(tc, test_typed_reads);
  tcase_add_test(tc, test_integral_floats);
  tcase_add_test(tc, test_load_missing_file);
  tcase_add_test(tc, test_config_bounds);
  tcase_add_test(tc, test_nonfinite_key_refused);
  tcase_add_test(tc, test_attribute_map_aliases);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(config_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? 0 : 1;
}
