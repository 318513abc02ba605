/* test_hf.c — Hugging Face tp-plan strings (docs/SEMANTICS.md "Plans and
 * matching": every accepted, skipped and rejected string) and whole HF
 * plans (the same section: prefixing, the
 * added embed_tokens, the lm_head special case, dict-update order), on the
 * real plans copied into tests/data/plan/hf/. */
#include <check.h>

#include "plan_test.h"
#include "tpx/diag.h"
#include "tpx/plan.h"

enum { ACCEPT, SKIP, REJECT };

typedef struct hf_case {
  const char *s;
  int outcome;
  tpx_style_kind kind; /* ACCEPT */
  const char *in, *out;
} hf_case;

static const hf_case table[] = {
    {"colwise", ACCEPT, TPX_STYLE_COLWISE, "replicate", "shard(-1)"},
    {"rowwise", ACCEPT, TPX_STYLE_ROWWISE, "shard(-1)", "replicate"},
    {"colwise_rep", ACCEPT, TPX_STYLE_COLWISE, "replicate", "replicate"},
    {"rowwise_rep", ACCEPT, TPX_STYLE_ROWWISE, "replicate", "replicate"},
    {"sequence_parallel", ACCEPT, TPX_STYLE_SEQUENCE_PARALLEL, NULL, NULL},
    {"replicated_with_grad_allreduce", SKIP, 0, NULL, NULL},
    {"ep_router", SKIP, 0, NULL, NULL},
    {"ep_experts", SKIP, 0, NULL, NULL},
    {"ep_anything", SKIP, 0, NULL, NULL},
    {"local_colwise", SKIP, 0, NULL, NULL},
    {"local_rowwise", SKIP, 0, NULL, NULL},
    {"gather", SKIP, 0, NULL, NULL},
    {"colwise_gather_output", REJECT, 0, NULL, NULL},
    {"rowwise_split_input", REJECT, 0, NULL, NULL},
    {"packed_colwise", REJECT, 0, NULL, NULL},
    {"packed_rowwise", REJECT, 0, NULL, NULL},
    {"embedding_rowwise", REJECT, 0, NULL, NULL},
    {"embedding_colwise", REJECT, 0, NULL, NULL},
    {"local", REJECT, 0, NULL, NULL},
    {"local_packed_rowwise", REJECT, 0, NULL, NULL},
    {"replicate", REJECT, 0, NULL, NULL},
    {"grouped_gemm", REJECT, 0, NULL, NULL},
    {"moe_tp_experts", REJECT, 0, NULL, NULL},
    {"moe_identity_expert", REJECT, 0, NULL, NULL},
    {"megamoe_router", REJECT, 0, NULL, NULL},
    {"megamoe_experts", REJECT, 0, NULL, NULL},
    {"mla_kv_a_proj", REJECT, 0, NULL, NULL},
    {"all_reduce", REJECT, 0, NULL, NULL},
    {"isolated", REJECT, 0, NULL, NULL},
    {"Colwise", REJECT, 0, NULL, NULL}, /* case-sensitive */
    {"ep", REJECT, 0, NULL, NULL},      /* "ep_" prefix only */
    {"", REJECT, 0, NULL, NULL},
};
#define NTABLE (sizeof table / sizeof table[0])

static void assert_layout(const tpx_layout_list *l, const char *want) {
  ck_assert_int_eq(l->count, 1);
  char buf[64];
  tpx_placement_format(l->items[0], buf, sizeof buf);
  ck_assert_str_eq(buf, want);
}

START_TEST(test_translate_table) {
  const hf_case *c = &table[_i];
  tpx_style s;
  int skip = -1;
  tpx_error e = {0};
  tpx_status st =
      tpx_plan_translate_hf_style("model.layers.*.x", c->s, &s, &skip, &e);
  switch (c->outcome) {
  case ACCEPT:
    ck_assert_int_eq(st, TPX_OK);
    ck_assert_int_eq(skip, 0);
    ck_assert_int_eq(s.kind, c->kind);
    if (c->in) {
      assert_layout(&s.input_layouts, c->in);
      assert_layout(&s.output_layouts, c->out);
      ck_assert_int_eq(s.use_local_output, 1);
    } else {
      tpx_style d = tpx_style_default(TPX_STYLE_SEQUENCE_PARALLEL);
      ck_assert(tpx_style_equal(&s, &d));
    }
    ck_assert_int_eq(tpx_style_validate(&s, NULL), TPX_OK);
    break;
  case SKIP:
    ck_assert_int_eq(st, TPX_OK);
    ck_assert_int_eq(skip, 1);
    break;
  case REJECT: {
    ck_assert_int_eq(st, TPX_UNSUPPORTED);
    char want[128];
    snprintf(want, sizeof want, "Hugging Face style '%s'", c->s);
    ck_assert_ptr_nonnull(strstr(e.message, want));
    ck_assert_ptr_nonnull(strstr(e.message, "plan key 'model.layers.*.x'"));
    break;
  }
  }
}
END_TEST

START_TEST(test_translate_args) {
  tpx_style s;
  int skip;
  CHECK_FAILS(tpx_plan_translate_hf_style("k", NULL, &s, &skip, &e_),
              TPX_INVALID_ARGUMENT, "NULL");
  CHECK_FAILS(tpx_plan_translate_hf_style("k", "colwise", &s, NULL, &e_),
              TPX_INVALID_ARGUMENT, "NULL");
}
END_TEST

/* ---- whole plans from the real files ---- */

typedef struct file_case {
  const char *file;
  const char *error; /* substring, or NULL when it translates */
  int skipped;       /* info diagnostics expected */
} file_case;

static const file_case files[] = {
    {"LlamaConfig.json", NULL, 0},
    {"Qwen2Config.json", NULL, 0},
    {"Qwen3Config.json", NULL, 2},
    {"Qwen3Config.v4_1f3ae2b.json", NULL, 0},
    {"MistralConfig.json", NULL, 0},
    {"Gemma3TextConfig.json", NULL, 0},
    {"PhiConfig.json", NULL, 0},
    {"MixtralConfig.v4_block_sparse_moe.json", NULL, 0},
    {"MixtralConfig.json",
     "plan key 'model.layers.*.mlp.experts.gate_up_proj': Hugging Face style "
     "'packed_colwise'",
     0},
    {"Phi3Config.json",
     "plan key 'model.layers.*.self_attn.qkv_proj': Hugging Face style "
     "'colwise_gather_output'",
     0},
};
#define NFILES (sizeof files / sizeof files[0])

/* Expected normalized plan: tests/data/plan/hf/expected/<file>. */
START_TEST(test_from_hf_files) {
  const file_case *c = &files[_i];
  char rel[256], path[1024];
  snprintf(rel, sizeof rel, "hf/%s", c->file);
  size_t len;
  char *json = read_text(plan_data_path(path, sizeof path, rel), &len);
  ck_assert_msg(json != NULL, "cannot read %s", path);
  tpx_diag_list *diags = NULL;
  CHECK_OK(tpx_diag_list_create(&diags, &e_));
  tpx_plan *p = (tpx_plan *)1;
  tpx_error e = {0};
  tpx_status st = tpx_plan_from_hf(json, len, "model", &p, diags, &e);
  if (c->error) {
    ck_assert_int_eq(st, TPX_UNSUPPORTED);
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(e.message, c->error) != NULL, "%s: %s", c->file,
                  e.message);
  } else {
    ck_assert_msg(st == TPX_OK, "%s: %s", c->file, e.message);
    ck_assert_uint_eq(tpx_diag_count(diags), (size_t)c->skipped);
    for (size_t i = 0; i < tpx_diag_count(diags); i++) {
      tpx_diag d;
      CHECK_OK(tpx_diag_get(diags, i, &d, &e_));
      ck_assert_int_eq(d.level, TPX_DIAG_INFO);
      ck_assert_str_eq(d.code, "hf-style-skipped");
      ck_assert_ptr_nonnull(
          strstr(d.message, "replicated_with_grad_allreduce"));
    }
    char *out = NULL;
    CHECK_OK(tpx_plan_to_json(p, 2, &out, &e_));
    snprintf(rel, sizeof rel, "hf/expected/%s", c->file);
    char *want = read_text(plan_data_path(path, sizeof path, rel), NULL);
    ck_assert_msg(want != NULL, "cannot read %s", path);
    ck_assert_msg(strcmp(out, want) == 0, "%s translates to:\n%s", c->file,
                  out);
    /* the added embedding is last, rowwise with a replicated input */
    tpx_plan_entry en;
    CHECK_OK(tpx_plan_get(p, tpx_plan_size(p) - 1, &en, &e_));
    ck_assert_str_eq(en.module, "model.embed_tokens");
    free(out);
    free(want);
    tpx_plan_destroy(p);
  }
  tpx_diag_list_destroy(diags);
  free(json);
}
END_TEST

static tpx_plan *hf2(const char *top, const char *inner, const char *prefix) {
  tpx_plan *p = NULL;
  tpx_error e = {0};
  tpx_status st = tpx_plan_from_hf_class_and_base(
      top, top ? strlen(top) : 0, inner, inner ? strlen(inner) : 0, prefix, &p,
      NULL, &e);
  ck_assert_msg(st == TPX_OK, "%s", e.message);
  return p;
}

static tpx_style get_style(const tpx_plan *p, const char *key) {
  int64_t i = tpx_plan_find(p, key);
  ck_assert_msg(i >= 0, "no key %s", key);
  tpx_plan_entry e;
  CHECK_OK(tpx_plan_get(p, (size_t)i, &e, &e_));
  return e.style;
}

START_TEST(test_lm_head_special_case) {
  tpx_plan *p = hf2("{\"lm_head\": \"colwise_rep\"}",
                    "{\"layers.*.mlp.up_proj\": \"colwise\"}", "model");
  ck_assert_uint_eq(tpx_plan_size(p), 3);
  ck_assert_int_eq(tpx_plan_find(p, "lm_head"), 0);
  ck_assert_int_eq(tpx_plan_find(p, "model.layers.*.mlp.up_proj"), 1);
  ck_assert_int_eq(tpx_plan_find(p, "model.embed_tokens"), 2);
  tpx_style want = tpx_style_default(TPX_STYLE_COLWISE);
  want.use_local_output = 0; /* vocab-sharded DTensor output */
  tpx_style got = get_style(p, "lm_head");
  ck_assert(tpx_style_equal(&got, &want));
  tpx_style rr = tpx_style_default(TPX_STYLE_ROWWISE);
  rr.input_layouts.items[0] = tpx_placement_replicate();
  got = get_style(p, "model.embed_tokens");
  ck_assert(tpx_style_equal(&got, &rr));
  tpx_plan_destroy(p);

  /* language_model.lm_head too; any other key keeps colwise_rep */
  p = hf2("{\"language_model.lm_head\": \"colwise_rep\", \"model.lm_head\": "
          "\"colwise_rep\", \"lm_head.x\": \"colwise_rep\"}",
          NULL, "model");
  got = get_style(p, "language_model.lm_head");
  ck_assert(tpx_style_equal(&got, &want));
  tpx_style rep = tpx_style_default(TPX_STYLE_COLWISE);
  rep.output_layouts.items[0] = tpx_placement_replicate();
  got = get_style(p, "model.lm_head");
  ck_assert(tpx_style_equal(&got, &rep));
  got = get_style(p, "lm_head.x");
  ck_assert(tpx_style_equal(&got, &rep));
  tpx_plan_destroy(p);

  /* lm_head with plain colwise is not special */
  p = hf2("{\"lm_head\": \"colwise\"}", NULL, "model");
  got = get_style(p, "lm_head");
  tpx_style c = tpx_style_default(TPX_STYLE_COLWISE);
  ck_assert(tpx_style_equal(&got, &c));
  tpx_plan_destroy(p);
}
END_TEST

START_TEST(test_embed_tokens_and_order) {
  /* an existing embed_tokens entry is kept where it is, not duplicated */
  tpx_plan *p = hf2(NULL,
                    "{\"embed_tokens\": \"colwise\", \"norm\": "
                    "\"sequence_parallel\"}",
                    "model.language_model");
  ck_assert_uint_eq(tpx_plan_size(p), 2);
  ck_assert_int_eq(tpx_plan_find(p, "model.language_model.embed_tokens"), 0);
  ck_assert_int_eq(tpx_plan_find(p, "model.language_model.norm"), 1);
  tpx_plan_destroy(p);
  /* the inner plan overrides the class plan in place (dict update) */
  p = hf2("{\"model.norm\": \"colwise\", \"lm_head\": \"colwise_rep\"}",
          "{\"layers.*.q\": \"colwise\", \"norm\": \"sequence_parallel\"}",
          "model");
  const char *keys[] = {"model.norm", "lm_head", "model.layers.*.q",
                        "model.embed_tokens"};
  ck_assert_uint_eq(tpx_plan_size(p), 4);
  for (size_t i = 0; i < 4; i++)
    ck_assert_int_eq(tpx_plan_find(p, keys[i]), (int64_t)i);
  tpx_style got = get_style(p, "model.norm");
  tpx_style want = tpx_style_default(TPX_STYLE_SEQUENCE_PARALLEL);
  ck_assert(tpx_style_equal(&got, &want));
  tpx_plan_destroy(p);
  /* no prefix: keys as they are; a skipped key is dropped */
  p = hf2(NULL, "{\"a.b\": \"gather\", \"a.c\": \"rowwise\"}", "");
  ck_assert_uint_eq(tpx_plan_size(p), 2);
  ck_assert_int_eq(tpx_plan_find(p, "a.c"), 0);
  ck_assert_int_eq(tpx_plan_find(p, "embed_tokens"), 1);
  ck_assert_int_eq(tpx_plan_find(p, "a.b"), -1);
  tpx_plan_destroy(p);
  /* only skipped keys: the plan still holds the embedding */
  p = hf2(NULL, "{\"layers.*.mlp.experts\": \"ep_router\"}", "model");
  ck_assert_uint_eq(tpx_plan_size(p), 1);
  tpx_plan_destroy(p);
}
END_TEST

START_TEST(test_from_hf_errors) {
  tpx_plan *p = (tpx_plan *)1;
  const char *empty = "{}";
  CHECK_FAILS(tpx_plan_from_hf(empty, 2, "model", &p, NULL, &e_), TPX_NOT_FOUND,
              "tp plan is empty");
  ck_assert_ptr_null(p);
  CHECK_FAILS(
      tpx_plan_from_hf_class_and_base(NULL, 0, NULL, 0, "model", &p, NULL, &e_),
      TPX_NOT_FOUND, "empty");
  const char *nonstr = "{\"layers.*.q\": 1}";
  CHECK_FAILS(tpx_plan_from_hf(nonstr, strlen(nonstr), "model", &p, NULL, &e_),
              TPX_INVALID_ARGUMENT,
              "plan key 'model.layers.*.q': Hugging Face style must be a "
              "string");
  const char *trunc = "{\"layers.*.q\": \"colw";
  CHECK_FAILS(tpx_plan_from_hf(trunc, strlen(trunc), "model", &p, NULL, &e_),
              TPX_PARSE, "inner-model tp plan: invalid JSON");
  const char *arr = "[\"colwise\"]";
  CHECK_FAILS(tpx_plan_from_hf_class_and_base(arr, strlen(arr), NULL, 0,
                                              "model", &p, NULL, &e_),
              TPX_INVALID_ARGUMENT,
              "model-class tp plan: expected a JSON "
              "object");
  const char *badkey = "{\"layers..q\": \"colwise\"}";
  CHECK_FAILS(tpx_plan_from_hf(badkey, strlen(badkey), "model", &p, NULL, &e_),
              TPX_INVALID_ARGUMENT, "empty atom");
  const char *dup = "{\"a\": \"colwise\", \"a\": \"rowwise\"}";
  CHECK_FAILS(tpx_plan_from_hf(dup, strlen(dup), "model", &p, NULL, &e_),
              TPX_PARSE, "duplicate");
  const char *rej = "{\"a\": \"colwise\", \"b\": \"local\"}";
  CHECK_FAILS(tpx_plan_from_hf(rej, strlen(rej), "model", &p, NULL, &e_),
              TPX_UNSUPPORTED,
              "plan key 'model.b': Hugging Face style 'local'");
  ck_assert_ptr_null(p);
  CHECK_FAILS(tpx_plan_from_hf(NULL, 0, "model", &p, NULL, &e_),
              TPX_INVALID_ARGUMENT, "NULL");
}
END_TEST

static Suite *hf_suite(void) {
  Suite *s = suite_create("hf");
  TCase *tc = tcase_create("core");
  tcase_add_loop_test(tc, test_translate_table, 0, (int)NTABLE);
  tcase_add_test(tc, test_translate_args);
  tcase_add_loop_test(tc, test_from_hf_files, 0, (int)NFILES);
  tcase_add_test(tc, test_lm_head_special_case);
  tcase_add_test(tc, test_embed_tokens_and_order);
  tcase_add_test(tc, test_from_hf_errors);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(hf_suite()); }
