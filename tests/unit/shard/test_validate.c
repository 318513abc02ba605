/* test_validate.c — validate_tp_mesh, Nemotron-NAS, the head-sharded rule
 * and local head counts (docs/SEMANTICS.md "Plan selection"). */
#include "shard_fixture.h"
#include "tpx/registry.h"

/* A model of `json`, given what the bundled plugins declare about its
 * class (where a VLM keeps its head counts, DeciLM's block_configs): the
 * core knows no class by name (issue 30). */
static tpx_model *cfg_model(const char *json) {
  tpx_model *m = NULL;
  tpx_registry *reg = NULL;
  tpx_error e = {0};
  ck_assert_int_eq(tpx_model_create(&m, &e), TPX_OK);
  ck_assert_msg(tpx_model_set_config(m, json, strlen(json), "t", &e) == TPX_OK,
                "%s", e.message);
  ck_assert_int_eq(tpx_registry_create(&reg, &e), TPX_OK);
  ck_assert_int_eq(tpx_registry_load_default(reg, &e), TPX_OK);
  ck_assert_msg(tpx_registry_describe_model(reg, m, &e) == TPX_OK, "%s",
                e.message);
  tpx_registry_destroy(reg);
  return m;
}

typedef struct {
  const char *config;
  int64_t tp;
  int ok;
  const char *subject; /* first failing count */
  const char *valid;   /* listed tp sizes */
} heads_case;

static const heads_case heads_cases[] = {
    /* Llama-3-8B-like: 32 heads, 8 kv heads */
    {"{\"num_attention_heads\":32,\"num_key_value_heads\":8}", 1, 1, NULL,
     NULL},
    {"{\"num_attention_heads\":32,\"num_key_value_heads\":8}", 2, 1, NULL,
     NULL},
    {"{\"num_attention_heads\":32,\"num_key_value_heads\":8}", 8, 1, NULL,
     NULL},
    {"{\"num_attention_heads\":32,\"num_key_value_heads\":8}", 3, 0,
     "num_key_value_heads", "1, 2, 4, 8"},
    {"{\"num_attention_heads\":32,\"num_key_value_heads\":8}", 16, 0,
     "num_key_value_heads", "1, 2, 4, 8"},
    /* kv divisible, heads not: the second assertion */
    {"{\"num_attention_heads\":14,\"num_key_value_heads\":2}", 2, 1, NULL,
     NULL},
    {"{\"num_attention_heads\":6,\"num_key_value_heads\":4}", 4, 0,
     "num_attention_heads", "1, 2"},
    /* a missing head count is 0 and passes; a missing (or 0) kv count is
     * num_attention_heads, as upstream's getattr(config,
     * "num_key_value_heads", heads) or heads */
    {"{\"hidden_size\":64}", 7, 1, NULL, NULL},
    {"{\"num_attention_heads\":32}", 4, 1, NULL, NULL},
    {"{\"num_attention_heads\":30}", 4, 0, "num_key_value_heads",
     "1, 2, 3, 5, 6, 10, 15, 30"},
    {"{\"num_attention_heads\":6,\"num_key_value_heads\":0}", 4, 0,
     "num_key_value_heads", "1, 2, 3, 6"},
    /* VLM: heads from text_config */
    {"{\"architectures\":[\"Gemma3ForConditionalGeneration\"],"
     "\"text_config\":{\"num_attention_heads\":8,\"num_key_value_heads\":4}}",
     8, 0, "num_key_value_heads", "1, 2, 4"},
    {"{\"architectures\":[\"Gemma3ForConditionalGeneration\"],"
     "\"text_config\":{\"num_attention_heads\":8,\"num_key_value_heads\":4}}",
     4, 1, NULL, NULL},
    /* Regressions: any integer a config holds. gcd of INT64_MIN negated an
     * int64_t (UB); a huge prime head count made the "tp sizes that would
     * work" list walk every integer up to it (a hang). */
    {"{\"num_attention_heads\":999999999989}", 2, 0, "num_key_value_heads",
     "1 (none larger than 16777216 listed)"},
    {"{\"num_attention_heads\":9223372036854775807}", 2, 0,
     "num_key_value_heads", "1, 7, 49, 73, 127, 337, 511, 889, 2359"},
    /* upstream reads the config object: Gemma3TextConfig's defaults (8
     * heads, 4 kv heads) when text_config omits them */
    {"{\"architectures\":[\"Gemma3ForConditionalGeneration\"],"
     "\"text_config\":{\"model_type\":\"gemma3_text\"}}",
     8, 0, "num_key_value_heads", "1, 2, 4"},
    {"{\"architectures\":[\"Gemma3ForConditionalGeneration\"],"
     "\"text_config\":{\"model_type\":\"gemma3_text\"}}",
     4, 1, NULL, NULL},
    /* num_key_value_heads: null becomes num_attention_heads (__init__) */
    {"{\"num_attention_heads\":6,\"num_key_value_heads\":null}", 4, 0,
     "num_key_value_heads", "1, 2, 3, 6"},
    /* LlamaConfig's default kv is None, so absent means num_attention_heads */
    {"{\"model_type\":\"llama\",\"num_attention_heads\":6}", 4, 0,
     "num_key_value_heads", "1, 2, 3, 6"},
    /* not a VLM class: text_config is not read (torch reads the top level) */
    {"{\"architectures\":[\"FooForCausalLM\"],"
     "\"text_config\":{\"num_attention_heads\":7}}",
     2, 1, NULL, NULL},
};

START_TEST(heads_table) {
  const heads_case *c = &heads_cases[_i];
  tpx_model *m = cfg_model(c->config);
  tpx_diag_list *d = NULL;
  ck_assert_int_eq(tpx_diag_list_create(&d, NULL), TPX_OK);
  ck_assert_int_eq(tpx_validate_tp_mesh(m, c->tp, d, NULL), TPX_OK);
  size_t nerr = fx_count(d, TPX_DIAG_ERROR, "heads-not-divisible");
  ck_assert_msg(nerr == (c->ok ? 0u : 1u), "case %d: %zu errors", _i, nerr);
  if (!c->ok) {
    tpx_diag g;
    ck_assert_int_eq(tpx_diag_get(d, 0, &g, NULL), TPX_OK);
    ck_assert_str_eq(g.subject, c->subject);
    ck_assert_msg(strstr(g.message, c->valid) != NULL, "%s", g.message);
    ck_assert_msg(strstr(g.fix, c->valid) != NULL, "%s", g.fix);
    char tp[32];
    snprintf(tp, sizeof tp, "TP size (%lld)", (long long)c->tp);
    ck_assert_msg(strstr(g.message, tp) != NULL, "%s", g.message);
  }
  tpx_diag_list_destroy(d);
  tpx_model_destroy(m);
}
END_TEST

/* Head counts of 0 or less (kv: less than 0) are upstream's "Invalid
 * attention head counts for <class>." whatever tp > 1
 * (tests/data/upstream/validate_tp_mesh/cases.json, config_cases); the
 * negative ones used to be heads-not-divisible. Regression: a kv count of
 * INT64_MIN no longer reaches the gcd (it negated an int64_t). */
typedef struct {
  const char *config;
  int64_t tp;
  const char *needle; /* in heads-invalid's message; NULL: no error */
} invalid_case;

static const invalid_case invalid_cases[] = {
    {"{\"architectures\":[\"FooForCausalLM\"],\"num_attention_heads\":0}", 2,
     "Invalid attention head counts for FooForCausalLM."},
    {"{\"num_attention_heads\":-6,\"num_key_value_heads\":4}", 4,
     "Invalid attention head counts for the model."},
    {"{\"num_attention_heads\":3,"
     "\"num_key_value_heads\":-9223372036854775808}",
     2, "num_key_value_heads=-9223372036854775808"},
    {"{\"num_attention_heads\":0}", 1, NULL}, /* tp 1: nothing is read */
    {"{\"hidden_size\":64}", 2, NULL},        /* no head count: passes */
};

START_TEST(invalid_counts) {
  const invalid_case *c = &invalid_cases[_i];
  tpx_model *m = cfg_model(c->config);
  tpx_diag_list *d = NULL;
  ck_assert_int_eq(tpx_diag_list_create(&d, NULL), TPX_OK);
  ck_assert_int_eq(tpx_validate_tp_mesh(m, c->tp, d, NULL), TPX_OK);
  ck_assert_uint_eq(fx_count(d, TPX_DIAG_ERROR, "heads-invalid"),
                    c->needle ? 1u : 0u);
  ck_assert_uint_eq(tpx_diag_count_at_least(d, TPX_DIAG_ERROR),
                    c->needle ? 1u : 0u);
  if (c->needle)
    ck_assert_msg(strstr(fx_msg(d, "heads-invalid"), c->needle) != NULL,
                  "case %d: %s", _i, fx_msg(d, "heads-invalid"));
  tpx_diag_list_destroy(d);
  tpx_model_destroy(m);
}
END_TEST

typedef struct {
  const char *blocks;
  int64_t layers, tp;
  const char *code; /* expected error code or NULL */
  const char *needle;
} nas_case;

#define NAS_HEAD                                                               \
  "{\"architectures\":[\"DeciLMForCausalLM\"],\"model_type\":"                 \
  "\"nemotron-nas\",\"num_attention_heads\":64,\"num_key_value_heads\":3,"

static const nas_case nas_cases[] = {
    /* kv = 64/8 = 8 per layer; num_key_value_heads=3 at top is ignored */
    {"[{\"attention\":{\"n_heads_in_group\":8}},"
     "{\"attention\":{\"n_heads_in_group\":8}}]",
     2, 4, NULL, NULL},
    /* layer 1: kv = 64/32 = 2, not divisible by 4 */
    {"[{\"attention\":{\"n_heads_in_group\":8}},"
     "{\"attention\":{\"n_heads_in_group\":32}}]",
     2, 4, "heads-not-divisible", "layer 1"},
    /* replace_with_linear and no_op layers pass */
    {"[{\"attention\":{\"replace_with_linear\":true}},"
     "{\"attention\":{\"n_heads_in_group\":null,\"no_op\":true}}]",
     2, 8, NULL, NULL},
    /* neither: error */
    {"[{\"attention\":{\"n_heads_in_group\":null,\"no_op\":false}}]", 1, 2,
     "nemotron-nas-invalid", "layer 0"},
    /* too few block configs */
    {"[{\"attention\":{\"n_heads_in_group\":8}}]", 3, 2, "nemotron-nas-invalid",
     "number of block configs (num_hidden_layers=3, 1 block configs)"},
    /* heads not divisible */
    {"[{\"attention\":{\"n_heads_in_group\":8}}]", 1, 3, "heads-not-divisible",
     "num_attention_heads"},
    /* a negative group size is arithmetic, not a crash */
    {"[{\"attention\":{\"n_heads_in_group\":-1}}]", 1, 2, NULL, NULL},
};

START_TEST(nemotron_nas) {
  const nas_case *c = &nas_cases[_i];
  char json[1024];
  snprintf(json, sizeof json,
           NAS_HEAD "\"num_hidden_layers\":%lld,"
                    "\"block_configs\":%s}",
           (long long)c->layers, c->blocks);
  tpx_model *m = cfg_model(json);
  tpx_diag_list *d = NULL;
  ck_assert_int_eq(tpx_diag_list_create(&d, NULL), TPX_OK);
  ck_assert_int_eq(tpx_validate_tp_mesh(m, c->tp, d, NULL), TPX_OK);
  size_t nerr = tpx_diag_count_at_least(d, TPX_DIAG_ERROR);
  if (!c->code) {
    ck_assert_msg(nerr == 0, "case %d: %s", _i,
                  fx_msg(d, "heads-not-divisible"));
  } else {
    ck_assert_uint_eq(nerr, 1);
    ck_assert_msg(strstr(fx_msg(d, c->code), c->needle) != NULL, "case %d: %s",
                  _i, fx_msg(d, c->code));
  }
  tpx_diag_list_destroy(d);
  tpx_model_destroy(m);
}
END_TEST

typedef struct {
  const char *key;
  tpx_style_kind kind;
  int out_kind; /* -1 default, 0 replicate, 1 shard */
  int expect;
} hs_case;

static const hs_case hs_cases[] = {
    {"model.layers.*.self_attn.q_proj", TPX_STYLE_COLWISE, -1, 1},
    {"model.layers.*.self_attn.k_proj", TPX_STYLE_COLWISE, 1, 1},
    {"model.layers.*.self_attn.v_proj", TPX_STYLE_COLWISE, -1, 1},
    {"model.layers.*.self_attn.qkv_proj", TPX_STYLE_COLWISE, -1, 1},
    {"model.language_model.layers.*.self_attn.q_proj", TPX_STYLE_COLWISE, -1,
     1},
    /* Phi-3: rowwise qkv does not count */
    {"model.layers.*.self_attn.qkv_proj", TPX_STYLE_ROWWISE, -1, 0},
    /* colwise with Replicate output does not count */
    {"model.layers.*.self_attn.q_proj", TPX_STYLE_COLWISE, 0, 0},
    /* other keys do not count */
    {"model.layers.*.self_attn.o_proj", TPX_STYLE_COLWISE, -1, 0},
    {"model.layers.*.attn.q_proj", TPX_STYLE_COLWISE, -1, 0},
    {"model.layers.*.self_attn.q_proj.lora", TPX_STYLE_COLWISE, -1, 0},
};

START_TEST(head_sharded_rule) {
  const hs_case *c = &hs_cases[_i];
  tpx_plan *p = NULL;
  ck_assert_int_eq(tpx_plan_create(&p, NULL), TPX_OK);
  fx_set(p, "model.embed_tokens", TPX_STYLE_VOCAB_PARALLEL_EMBEDDING, 0);
  tpx_style s = tpx_style_default(c->kind);
  if (c->out_kind == 0)
    s.output_layouts.items[0] = tpx_placement_replicate();
  if (c->out_kind == 1)
    s.output_layouts.items[0] = tpx_placement_shard(-1);
  fx_set_style(p, c->key, &s);
  ck_assert_int_eq(tpx_plan_is_head_sharded(p), c->expect);
  tpx_plan_destroy(p);
}
END_TEST

START_TEST(head_counts) {
  tpx_model *m = cfg_model("{\"num_attention_heads\":32,"
                           "\"num_key_value_heads\":8,\"hidden_size\":4096}");
  tpx_plan *p = fx_llama_plan();
  tpx_head_counts hc = TPX_HEAD_COUNTS_INIT;
  ck_assert_int_eq(tpx_head_counts_after_tp(m, p, 4, &hc, NULL), TPX_OK);
  ck_assert_int_eq(hc.heads, 32);
  ck_assert_int_eq(hc.kv_heads, 8);
  ck_assert_int_eq(hc.head_dim, 128); /* hidden // heads */
  ck_assert_int_eq(hc.local_heads, 8);
  ck_assert_int_eq(hc.local_kv_heads, 2);
  ck_assert(hc.rewritten);
  /* tp 1: not rewritten */
  tpx_head_counts h1 = TPX_HEAD_COUNTS_INIT;
  ck_assert_int_eq(tpx_head_counts_after_tp(m, p, 1, &h1, NULL), TPX_OK);
  ck_assert(!h1.rewritten);
  ck_assert_int_eq(h1.local_heads, 32);
  /* explicit head_dim wins; no kv -> local kv = local heads */
  tpx_model *m2 = cfg_model("{\"num_attention_heads\":16,\"head_dim\":256,"
                            "\"hidden_size\":2048}");
  tpx_head_counts h2 = TPX_HEAD_COUNTS_INIT;
  ck_assert_int_eq(tpx_head_counts_after_tp(m2, p, 2, &h2, NULL), TPX_OK);
  ck_assert_int_eq(h2.head_dim, 256);
  ck_assert_int_eq(h2.local_heads, 8);
  ck_assert_int_eq(h2.local_kv_heads, 8);
  /* bad input */
  tpx_head_counts bad = {4, 0, 0, 0, 0, 0, 0};
  ck_assert_int_eq(tpx_head_counts_after_tp(m, p, 2, &bad, NULL),
                   TPX_INVALID_ARGUMENT);
  ck_assert_int_eq(tpx_head_counts_after_tp(m, p, 0, &hc, NULL),
                   TPX_INVALID_ARGUMENT);
  tpx_model_destroy(m2);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

/* Regression: Nemotron-NAS with num_attention_heads INT64_MIN (divisible
 * by every power of two) and n_heads_in_group -1 computed INT64_MIN / -1
 * (UB, SIGFPE on x86); the layer now reads as 0 KV heads. */
START_TEST(nemotron_nas_overflow) {
  tpx_model *m = cfg_model(
      "{\"architectures\":[\"DeciLMForCausalLM\"],\"model_type\":"
      "\"nemotron-nas\",\"num_attention_heads\":-9223372036854775808,"
      "\"num_hidden_layers\":1,"
      "\"block_configs\":[{\"attention\":{\"n_heads_in_group\":-1}}]}");
  tpx_diag_list *d = NULL;
  ck_assert_int_eq(tpx_diag_list_create(&d, NULL), TPX_OK);
  ck_assert_int_eq(tpx_validate_tp_mesh(m, 4, d, NULL), TPX_OK);
  ck_assert_uint_eq(tpx_diag_count_at_least(d, TPX_DIAG_ERROR), 0);
  tpx_diag_list_destroy(d);
  tpx_model_destroy(m);
}
END_TEST

START_TEST(validate_bad_args) {
  tpx_model *m = cfg_model("{}");
  tpx_diag_list *d = NULL;
  tpx_error e = {0};
  ck_assert_int_eq(tpx_diag_list_create(&d, NULL), TPX_OK);
  ck_assert_int_eq(tpx_validate_tp_mesh(NULL, 2, d, &e), TPX_INVALID_ARGUMENT);
  tpx_error_clear(&e);
  ck_assert_int_eq(tpx_validate_tp_mesh(m, 0, d, &e), TPX_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(e.message, "tp size 0"));
  ck_assert_int_eq(tpx_validate_tp_mesh(m, 2, NULL, NULL),
                   TPX_INVALID_ARGUMENT);
  ck_assert_int_eq(tpx_plan_is_head_sharded(NULL), 0);
  tpx_diag_list_destroy(d);
  tpx_model_destroy(m);
}
END_TEST

static Suite *validate_suite(void) {
  Suite *s = suite_create("validate");
  TCase *tc = tcase_create("validate");
  tcase_add_loop_test(tc, heads_table, 0,
                      (int)(sizeof heads_cases / sizeof heads_cases[0]));
  tcase_add_loop_test(tc, invalid_counts, 0,
                      (int)(sizeof invalid_cases / sizeof invalid_cases[0]));
  tcase_add_loop_test(tc, nemotron_nas, 0,
                      (int)(sizeof nas_cases / sizeof nas_cases[0]));
  tcase_add_loop_test(tc, head_sharded_rule, 0,
                      (int)(sizeof hs_cases / sizeof hs_cases[0]));
  tcase_add_test(tc, head_counts);
  tcase_add_test(tc, validate_bad_args);
  tcase_add_test(tc, nemotron_nas_overflow);
  suite_add_tcase(s, tc);
  return s;
}

FX_MAIN(validate_suite)
