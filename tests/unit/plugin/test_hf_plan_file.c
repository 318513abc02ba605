/* test_hf_plan_file.c — a Hugging Face tp_plan given as a file: recognised
 * (a non-empty object of strings without "format") or not; keys relative to
 * the base model prefixed as transformers does for the architecture (model
 * for CausalLM, model.language_model for a VLM), keys from the root kept;
 * skipped strings reported, unsupported ones an error naming file, key and
 * string. */
#include <unistd.h>

#include "plugin_test.h"
#include "tpx/plan.h"

static char g_dir[] = "/tmp/tpx-hfplan-XXXXXX";

static const char *write_file(const char *name, const char *text) {
  static char path[8][512];
  static int next;
  char *p = path[next++ % 8];
  snprintf(p, 512, "%s/%s", g_dir, name);
  FILE *f = fopen(p, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
  return p;
}

static const struct {
  const char *text;
  int is_hf;
} kinds[] = {
    {"{\"layers.*.mlp.up_proj\": \"colwise\", \"lm_head\": \"colwise_rep\"}",
     1},
    {"{\"format\": \"tpx-plan/1\", \"entries\": []}", 0},
    {"{\"layers.*.mlp.up_proj\": {\"style\": \"colwise\"}}", 1},
    {"{\"entries\": []}", 0},
    {"[\"colwise\"]", 0},
    {"{}", 0},
    {"{\"a\": \"colwise\"", 0},
    {"", 0},
};

START_TEST(recognises_hf_plans) {
  ck_assert_ptr_nonnull(mkdtemp(g_dir));
  const char *p = write_file("plan.json", kinds[_i].text);
  ck_assert_int_eq(tpx_plan_file_is_hf(p), kinds[_i].is_hf);
  ck_assert_int_eq(tpx_plan_file_is_hf("/nonexistent/plan.json"), 0);
  ck_assert_int_eq(tpx_plan_file_is_hf(NULL), 0);
  unlink(p);
  rmdir(g_dir);
}
END_TEST

/* A model whose root holds `inner` (dotted) and lm_head. */
static tpx_model *model_with(const char *arch, const char *inner) {
  char cfg[256];
  snprintf(cfg, sizeof cfg, "{\"architectures\": [\"%s\"]}", arch);
  tpx_model *m = model_from_json(cfg);
  char fqn[256];
  snprintf(fqn, sizeof fqn, "%s.layers.0.mlp.up_proj", inner);
  CHECK_OK(tpx_model_add_module(m, fqn, TPX_MODULE_LINEAR, NULL, &e_));
  CHECK_OK(tpx_model_add_module(m, "lm_head", TPX_MODULE_LINEAR, NULL, &e_));
  /* the inner model is what the class's plugin declares (hf_prefix) */
  tpx_registry *reg = NULL;
  CHECK_OK(tpx_registry_create(&reg, &e_));
  CHECK_OK(tpx_registry_load_default(reg, &e_));
  CHECK_OK(tpx_registry_describe_model(reg, m, &e_));
  tpx_registry_destroy(reg);
  return m;
}

static int has_key(const tpx_plan *p, const char *key) {
  for (size_t i = 0; i < tpx_plan_size(p); i++) {
    tpx_plan_entry e;
    if (tpx_plan_get(p, i, &e, NULL) == TPX_OK && strcmp(e.module, key) == 0)
      return 1;
  }
  return 0;
}

START_TEST(prefixes_like_transformers) {
  ck_assert_ptr_nonnull(mkdtemp(g_dir));
  const char *path = write_file(
      "hf.json", "{\"layers.*.mlp.up_proj\": \"colwise\", \"layers.*.mlp.x\": "
                 "\"gather\", \"lm_head\": \"colwise_rep\"}");
  static const struct {
    const char *arch, *inner, *want;
  } cases[] = {
      {"LlamaForCausalLM", "model", "model.layers.*.mlp.up_proj"},
      {"LlavaForConditionalGeneration", "model.language_model",
       "model.language_model.layers.*.mlp.up_proj"},
  };
  for (size_t c = 0; c < 2; c++) {
    tpx_model *m = model_with(cases[c].arch, cases[c].inner);
    tpx_diag_list *dl = NULL;
    CHECK_OK(tpx_diag_list_create(&dl, &e_));
    tpx_plan *p = NULL;
    char how[512];
    CHECK_OK(tpx_plan_load_hf(path, m, &p, dl, how, sizeof how, &e_));
    ck_assert(has_key(p, cases[c].want));
    ck_assert(has_key(p, "lm_head"));
    char emb[128];
    snprintf(emb, sizeof emb, "%s.embed_tokens",
             strcmp(cases[c].inner, "model") == 0 ? "model"
                                                  : "model.language_model");
    ck_assert(has_key(p, emb)); /* added as rowwise_rep, as Automodel does */
    ck_assert_uint_eq(tpx_plan_size(p), 3);
    ck_assert_ptr_nonnull(strstr(how, "1 key(s) from the model's root"));
    ck_assert_ptr_nonnull(strstr(how, "2 relative to the base model"));
    ck_assert_uint_eq(tpx_diag_count(dl), 1);
    tpx_diag d;
    CHECK_OK(tpx_diag_get(dl, 0, &d, &e_));
    ck_assert_str_eq(d.code, "hf-style-skipped");
    tpx_plan_destroy(p);
    tpx_diag_list_destroy(dl);
    tpx_model_destroy(m);
  }
  unlink(path);
  rmdir(g_dir);
}
END_TEST

START_TEST(errors_name_the_file_and_key) {
  ck_assert_ptr_nonnull(mkdtemp(g_dir));
  tpx_model *m = model_with("LlamaForCausalLM", "model");
  tpx_plan *p = NULL;
  tpx_error e = {0};
  const char *bad = write_file(
      "bad.json", "{\"layers.*.mlp.up_proj\": \"local_packed_rowwise\"}");
  ck_assert_int_eq(tpx_plan_load_hf(bad, m, &p, NULL, NULL, 0, &e),
                   TPX_UNSUPPORTED);
  ck_assert_ptr_null(p);
  ASSERT_CONTAINS(e.message, bad);
  ASSERT_CONTAINS(e.message, "'model.layers.*.mlp.up_proj'");
  ASSERT_CONTAINS(e.message,
                  "'local_packed_rowwise' has no faithful translation");
  tpx_error e2 = {0};
  const char *tpxplan = write_file("tpx.json", "{\"format\": \"tpx-plan/1\"}");
  ck_assert_int_eq(tpx_plan_load_hf(tpxplan, m, &p, NULL, NULL, 0, &e2),
                   TPX_INVALID_ARGUMENT);
  ASSERT_CONTAINS(e2.message, "not a Hugging Face tp_plan");
  tpx_error e3 = {0};
  const char *num = write_file("num.json", "{\"lm_head\": 3}");
  ck_assert_int_eq(tpx_plan_load_hf(num, m, &p, NULL, NULL, 0, &e3),
                   TPX_INVALID_ARGUMENT);
  ASSERT_CONTAINS(e3.message, "key 'lm_head'");
  tpx_error e4 = {0};
  ck_assert_int_eq(
      tpx_plan_load_hf("/nonexistent/x.json", m, &p, NULL, NULL, 0, &e4),
      TPX_NOT_FOUND);
  ASSERT_CONTAINS(e4.message, "/nonexistent/x.json");
  ck_assert_int_eq(tpx_plan_load_hf(NULL, m, &p, NULL, NULL, 0, NULL),
                   TPX_INVALID_ARGUMENT);
  unlink(bad);
  unlink(tpxplan);
  unlink(num);
  rmdir(g_dir);
  tpx_model_destroy(m);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("plugin-hf-plan-file");
  TCase *tc = tcase_create("hf");
  tcase_add_loop_test(tc, recognises_hf_plans, 0,
                      (int)(sizeof kinds / sizeof kinds[0]));
  tcase_add_test(tc, prefixes_like_transformers);
  tcase_add_test(tc, errors_name_the_file_and_key);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(suite()); }
