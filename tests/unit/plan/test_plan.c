/* test_plan.c — tpx_plan: dict-update semantics, get/find/remove/clone,
 * tpx-plan/1 JSON (defaults on input, normalized byte-exact output against a
 * golden file) and every bad-input case as a data folder
 * tests/data/plan/bad/<case>/{plan.json,expected}. */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "plan_test.h"
#include "tpx/plan.h"

static tpx_plan *new_plan(void) {
  tpx_plan *p = NULL;
  CHECK_OK(tpx_plan_create(&p, &e_));
  ck_assert_ptr_nonnull(p);
  return p;
}

static tpx_style sp(void) {
  return tpx_style_default(TPX_STYLE_SEQUENCE_PARALLEL);
}
static tpx_style col(void) { return tpx_style_default(TPX_STYLE_COLWISE); }
static tpx_style row(void) { return tpx_style_default(TPX_STYLE_ROWWISE); }

static void assert_keys(const tpx_plan *p, const char *const *keys, size_t n) {
  ck_assert_uint_eq(tpx_plan_size(p), n);
  for (size_t i = 0; i < n; i++) {
    tpx_plan_entry e;
    CHECK_OK(tpx_plan_get(p, i, &e, &e_));
    ck_assert_str_eq(e.module, keys[i]);
    ck_assert_int_eq(tpx_plan_find(p, keys[i]), (int64_t)i);
  }
}

START_TEST(test_set_get_find) {
  tpx_plan *p = new_plan();
  ck_assert_uint_eq(tpx_plan_size(p), 0);
  ck_assert_int_eq(tpx_plan_find(p, "x"), -1);
  CHECK_OK(tpx_plan_set(p, "model.embed_tokens", (tpx_style[]){row()}, 0, &e_));
  tpx_style s = col();
  CHECK_OK(tpx_plan_set(p, "model.layers.*.self_attn.q_proj", &s, 1, &e_));
  CHECK_OK(tpx_plan_set(p, "", (tpx_style[]){sp()}, 0, &e_)); /* the root */
  const char *keys[] = {"model.embed_tokens", "model.layers.*.self_attn.q_proj",
                        ""};
  assert_keys(p, keys, 3);
  tpx_plan_entry e;
  CHECK_OK(tpx_plan_get(p, 1, &e, &e_));
  ck_assert(tpx_style_equal(&e.style, &s));
  ck_assert_int_eq(e.optional, 1);
  CHECK_FAILS(tpx_plan_get(p, 3, &e, &e_), TPX_OUT_OF_RANGE, "3");
  ck_assert_int_eq(tpx_plan_find(p, "model"), -1);
  ck_assert_int_eq(tpx_plan_find(NULL, "model"), -1);
  ck_assert_uint_eq(tpx_plan_size(NULL), 0);
  tpx_plan_destroy(p);
  tpx_plan_destroy(NULL);
}
END_TEST

START_TEST(test_set_rejects) {
  tpx_plan *p = new_plan();
  static const struct {
    const char *key, *needle;
  } bad[] = {
      {"a..b", "empty atom"},
      {".a", "leading '.'"},
      {"a.", "trailing '.'"},
      {".", "leading '.'"},
      {"model..layers.*", "'model..layers.*'"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    CHECK_FAILS(tpx_plan_set(p, bad[i].key, (tpx_style[]){col()}, 0, &e_),
                TPX_INVALID_ARGUMENT, bad[i].needle);
  tpx_style s = col();
  s.input_layouts.count = 2;
  CHECK_FAILS(tpx_plan_set(p, "m.q", &s, 0, &e_), TPX_INVALID_ARGUMENT,
              "plan key 'm.q' (colwise): input_layouts: colwise takes exactly "
              "one layout, got 2");
  CHECK_FAILS(tpx_plan_set(p, NULL, &s, 0, &e_), TPX_INVALID_ARGUMENT, "NULL");
  ck_assert_uint_eq(tpx_plan_size(p), 0); /* nothing half-added */
  tpx_plan_destroy(p);
}
END_TEST

/* The sequence-parallel override pattern: base plan sp0, then sp1 updates
 * it. Existing keys keep their position with the new style; new keys are
 * appended — Python dict.update. */
START_TEST(test_dict_update_order) {
  tpx_plan *base = new_plan(), *ov = new_plan();
  CHECK_OK(
      tpx_plan_set(base, "model.embed_tokens", (tpx_style[]){row()}, 0, &e_));
  CHECK_OK(tpx_plan_set(base, "model.layers.*.self_attn.q_proj",
                        (tpx_style[]){col()}, 0, &e_));
  CHECK_OK(tpx_plan_set(base, "model.norm", (tpx_style[]){col()}, 0, &e_));
  CHECK_OK(tpx_plan_set(base, "lm_head", (tpx_style[]){col()}, 0, &e_));
  tpx_style spag =
      tpx_style_default(TPX_STYLE_SEQUENCE_PARALLEL_ALLGATHER_ACTIVATION);
  CHECK_OK(tpx_plan_set(ov, "model.layers.*.input_layernorm", &spag, 0, &e_));
  CHECK_OK(tpx_plan_set(ov, "model.norm", (tpx_style[]){sp()}, 1, &e_));
  CHECK_OK(
      tpx_plan_set(ov, "model.embed_tokens", (tpx_style[]){col()}, 0, &e_));
  CHECK_OK(tpx_plan_update(base, ov, &e_));
  const char *keys[] = {"model.embed_tokens", "model.layers.*.self_attn.q_proj",
                        "model.norm", "lm_head",
                        "model.layers.*.input_layernorm"};
  assert_keys(base, keys, 5);
  tpx_plan_entry e;
  CHECK_OK(tpx_plan_get(base, 0, &e, &e_));
  ck_assert(tpx_style_equal(&e.style, (tpx_style[]){col()}));
  CHECK_OK(tpx_plan_get(base, 2, &e, &e_));
  ck_assert(tpx_style_equal(&e.style, (tpx_style[]){sp()}));
  ck_assert_int_eq(e.optional, 1);
  CHECK_OK(tpx_plan_get(base, 4, &e, &e_));
  ck_assert(tpx_style_equal(&e.style, &spag));
  /* set on an existing key replaces in place too */
  CHECK_OK(tpx_plan_set(base, "lm_head", (tpx_style[]){row()}, 0, &e_));
  assert_keys(base, keys, 5);
  CHECK_OK(tpx_plan_get(base, 3, &e, &e_));
  ck_assert(tpx_style_equal(&e.style, (tpx_style[]){row()}));
  /* self-update is a no-op */
  CHECK_OK(tpx_plan_update(base, base, &e_));
  assert_keys(base, keys, 5);
  tpx_plan_destroy(base);
  tpx_plan_destroy(ov);
}
END_TEST

START_TEST(test_remove_and_clone) {
  tpx_plan *p = new_plan();
  char key[64];
  for (int i = 0; i < 100; i++) {
    snprintf(key, sizeof key, "model.layers.%d.mlp", i);
    CHECK_OK(tpx_plan_set(
        p, key, i % 2 ? (tpx_style[]){col()} : (tpx_style[]){row()}, 0, &e_));
  }
  tpx_plan *c = NULL;
  CHECK_OK(tpx_plan_clone(p, &c, &e_));
  CHECK_OK(tpx_plan_remove(p, "model.layers.0.mlp", &e_));
  CHECK_OK(tpx_plan_remove(p, "model.layers.50.mlp", &e_));
  CHECK_FAILS(tpx_plan_remove(p, "model.layers.50.mlp", &e_), TPX_NOT_FOUND,
              "'model.layers.50.mlp'");
  ck_assert_uint_eq(tpx_plan_size(p), 98);
  ck_assert_int_eq(tpx_plan_find(p, "model.layers.1.mlp"), 0);
  ck_assert_int_eq(tpx_plan_find(p, "model.layers.51.mlp"), 49);
  ck_assert_int_eq(tpx_plan_find(p, "model.layers.99.mlp"), 97);
  tpx_plan_entry e;
  CHECK_OK(tpx_plan_get(p, 49, &e, &e_));
  ck_assert_str_eq(e.module, "model.layers.51.mlp");
  ck_assert(tpx_style_equal(&e.style, (tpx_style[]){col()}));
  /* the clone is independent */
  ck_assert_uint_eq(tpx_plan_size(c), 100);
  ck_assert_int_eq(tpx_plan_find(c, "model.layers.50.mlp"), 50);
  tpx_plan_destroy(p);
  CHECK_OK(tpx_plan_get(c, 0, &e, &e_));
  ck_assert_str_eq(e.module, "model.layers.0.mlp");
  tpx_plan_destroy(c);
}
END_TEST

/* Many entries: the key index and style interning keep this linear. */
START_TEST(test_many_entries) {
  tpx_plan *p = new_plan();
  char key[64];
  const int n = 50000;
  for (int i = 0; i < n; i++) {
    snprintf(key, sizeof key, "model.layers.%d.mlp.experts.%d.w1", i / 256,
             i % 256);
    CHECK_OK(tpx_plan_set(
        p, key, (i % 3) ? (tpx_style[]){col()} : (tpx_style[]){row()}, 0, &e_));
  }
  ck_assert_uint_eq(tpx_plan_size(p), (size_t)n);
  ck_assert_int_eq(tpx_plan_find(p, "model.layers.100.mlp.experts.7.w1"),
                   100 * 256 + 7);
  char *json = NULL;
  CHECK_OK(tpx_plan_to_json(p, 0, &json, &e_));
  tpx_plan *q = NULL;
  CHECK_OK(tpx_plan_from_json(json, strlen(json), "big", &q, &e_));
  ck_assert_uint_eq(tpx_plan_size(q), (size_t)n);
  free(json);
  tpx_plan_destroy(q);
  tpx_plan_destroy(p);
}
END_TEST

/* ---- JSON ---- */

static char *data(const char *rel, size_t *len) {
  char path[1024];
  char *t = read_text(plan_data_path(path, sizeof path, rel), len);
  ck_assert_msg(t != NULL, "cannot read %s", path);
  return t;
}

/* The golden file is in normalized form: loading and writing it back is
 * byte-exact; the minimal file (defaults omitted) normalizes to it. */
START_TEST(test_json_golden_round_trip) {
  size_t glen;
  char *golden = data("golden.json", &glen);
  char path[1024];
  const char *inputs[] = {"golden.json", "minimal.json"};
  for (size_t i = 0; i < 2; i++) {
    tpx_plan *p = NULL;
    CHECK_OK(
        tpx_plan_load(plan_data_path(path, sizeof path, inputs[i]), &p, &e_));
    char *out = NULL;
    CHECK_OK(tpx_plan_to_json(p, 2, &out, &e_));
    ck_assert_msg(strcmp(out, golden) == 0, "%s normalizes to:\n%s", inputs[i],
                  out);
    free(out);
    tpx_plan_destroy(p);
  }
  free(golden);
}
END_TEST

START_TEST(test_json_defaults_and_optional) {
  const char *doc =
      "{\"format\": \"tpx-plan/1\", \"entries\": ["
      "{\"module\": \"a\", \"style\": \"colwise\"},"
      "{\"module\": \"b\", \"style\": \"rowwise\", \"optional\": false},"
      "{\"module\": \"c\", \"style\": \"sequence_parallel\", \"optional\": "
      "true},"
      "{\"module\": \"d\", \"style\": \"colwise\", \"input_layouts\": "
      "\"shard(0)\", \"output_layouts\": null}"
      "]}";
  tpx_plan *p = NULL;
  CHECK_OK(tpx_plan_from_json(doc, strlen(doc), NULL, &p, &e_));
  tpx_plan_entry e;
  CHECK_OK(tpx_plan_get(p, 0, &e, &e_));
  ck_assert(tpx_style_equal(&e.style, (tpx_style[]){col()}));
  ck_assert_int_eq(e.optional, 0);
  CHECK_OK(tpx_plan_get(p, 2, &e, &e_));
  ck_assert(tpx_style_equal(&e.style, (tpx_style[]){sp()}));
  ck_assert_int_eq(e.optional, 1);
  CHECK_OK(tpx_plan_get(p, 3, &e, &e_));
  tpx_style want = col();
  want.input_layouts.items[0] = tpx_placement_shard(0);
  ck_assert(tpx_style_equal(&e.style, &want));
  char *out = NULL;
  CHECK_OK(tpx_plan_to_json(p, 0, &out, &e_));
  ck_assert_str_eq(
      out,
      "{\"format\":\"tpx-plan/1\",\"entries\":["
      "{\"module\":\"a\",\"style\":\"colwise\",\"input_layouts\":["
      "\"replicate\"],\"output_layouts\":[\"shard(-1)\"],\"use_local_output\":"
      "true},"
      "{\"module\":\"b\",\"style\":\"rowwise\",\"input_layouts\":["
      "\"shard(-1)\"],\"output_layouts\":[\"replicate\"],\"use_local_output\":"
      "true},"
      "{\"module\":\"c\",\"style\":\"sequence_parallel\",\"sequence_dim\":1,"
      "\"use_local_output\":false,\"optional\":true},"
      "{\"module\":\"d\",\"style\":\"colwise\",\"input_layouts\":["
      "\"shard(0)\"],\"output_layouts\":[\"shard(-1)\"],\"use_local_output\":"
      "true}]}");
  free(out);
  tpx_plan_destroy(p);
}
END_TEST

START_TEST(test_json_empty_plan_and_args) {
  const char *doc = "{\"format\": \"tpx-plan/1\", \"entries\": []}";
  tpx_plan *p = NULL;
  CHECK_OK(tpx_plan_from_json(doc, strlen(doc), NULL, &p, &e_));
  ck_assert_uint_eq(tpx_plan_size(p), 0);
  char *out = NULL;
  CHECK_OK(tpx_plan_to_json(p, 0, &out, &e_));
  ck_assert_str_eq(out, "{\"format\":\"tpx-plan/1\",\"entries\":[]}");
  free(out);
  CHECK_FAILS(tpx_plan_to_json(p, -1, &out, &e_), TPX_OUT_OF_RANGE, "indent");
  tpx_plan_destroy(p);
  CHECK_FAILS(tpx_plan_load("/nonexistent/plan.json", &p, &e_), TPX_NOT_FOUND,
              "/nonexistent/plan.json");
  ck_assert_ptr_null(p);
  /* a FIFO is refused at once, never waited on; so is a directory */
  char fifo[] = "/tmp/tpx-plan-fifo-XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(fifo));
  char path[64];
  snprintf(path, sizeof path, "%s/plan.json", fifo);
  ck_assert_int_eq(mkfifo(path, 0600), 0);
  CHECK_FAILS(tpx_plan_load(path, &p, &e_), TPX_INVALID_ARGUMENT,
              "not a regular file (a FIFO)");
  CHECK_FAILS(tpx_plan_load(fifo, &p, &e_), TPX_INVALID_ARGUMENT,
              "not a regular file (a directory)");
  unlink(path);
  rmdir(fifo);
  ck_assert_ptr_null(p);
  /* `len` bounds the text: the closing brace is cut off */
  CHECK_FAILS(tpx_plan_from_json(doc, strlen(doc) - 1, "cut.json", &p, &e_),
              TPX_PARSE, "cut.json: invalid JSON");
  CHECK_FAILS(tpx_plan_from_json(NULL, 0, NULL, &p, &e_), TPX_INVALID_ARGUMENT,
              "NULL");
}
END_TEST

/* The writer prints exactly what jansson's json_dumps would for the same
 * document (indent 0..4), including string escaping of odd keys. */
START_TEST(test_json_writer_matches_jansson) {
  size_t len;
  char *golden = data("golden.json", &len);
  tpx_plan *p = NULL;
  CHECK_OK(tpx_plan_from_json(golden, len, "golden", &p, &e_));
  const char *odd[] = {"we\"ird.k\\ey", "tab\there.x", "ctl\x01.y",
                       "caf\xc3\xa9.*", "a/b.c"};
  for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++)
    CHECK_OK(tpx_plan_set(p, odd[i], (tpx_style[]){sp()}, (int)(i % 2), &e_));
  for (int indent = 0; indent <= 4; indent++) {
    char *mine = NULL;
    CHECK_OK(tpx_plan_to_json(p, indent, &mine, &e_));
    json_error_t je;
    json_t *v = json_loads(mine, 0, &je);
    ck_assert_msg(v != NULL, "indent %d: not JSON: %s", indent, je.text);
    char *ref = json_dumps(
        v, JSON_PRESERVE_ORDER | (indent ? JSON_INDENT(indent) : JSON_COMPACT));
    size_t rl = strlen(ref);
    ck_assert_uint_eq(strlen(mine), rl + (indent ? 1 : 0));
    ck_assert_msg(strncmp(mine, ref, rl) == 0, "indent %d differs:\n%s\n%s",
                  indent, mine, ref);
    /* and it reads back to the same plan */
    tpx_plan *q = NULL;
    CHECK_OK(tpx_plan_from_json(mine, strlen(mine), NULL, &q, &e_));
    ck_assert_uint_eq(tpx_plan_size(q), tpx_plan_size(p));
    for (size_t i = 0; i < tpx_plan_size(p); i++) {
      tpx_plan_entry a, b;
      CHECK_OK(tpx_plan_get(p, i, &a, &e_));
      CHECK_OK(tpx_plan_get(q, i, &b, &e_));
      ck_assert_str_eq(a.module, b.module);
      ck_assert(tpx_style_equal(&a.style, &b.style));
      ck_assert_int_eq(a.optional, b.optional);
    }
    tpx_plan_destroy(q);
    free(ref);
    json_decref(v);
    free(mine);
  }
  tpx_plan_destroy(p);
  free(golden);
}
END_TEST

/* Every strict prefix of a valid document fails cleanly, and so does every
 * single-byte corruption to a few hostile bytes: no crash, no half plan. */
START_TEST(test_json_truncations_and_corruptions) {
  size_t len;
  char *golden = data("golden.json", &len);
  while (len && (golden[len - 1] == '\n' || golden[len - 1] == ' ')) len--;
  for (size_t cut = 0; cut < len; cut++) {
    tpx_plan *p = (tpx_plan *)1;
    tpx_error e = {0};
    tpx_status st = tpx_plan_from_json(golden, cut, "t.json", &p, &e);
    ck_assert_msg(st != TPX_OK, "prefix of %zu bytes parsed", cut);
    ck_assert_ptr_null(p);
    ck_assert(strncmp(e.message, "t.json: ", 8) == 0);
  }
  const char hostile[] = {'\0', '"', '{', ']', '.', '9', 'x', '\x80'};
  char *copy = malloc(len);
  for (size_t i = 0; i < len; i += 3) {
    for (size_t h = 0; h < sizeof hostile; h++) {
      memcpy(copy, golden, len);
      copy[i] = hostile[h];
      tpx_plan *p = NULL;
      tpx_error e = {0};
      if (tpx_plan_from_json(copy, len, NULL, &p, &e) == TPX_OK) {
        ck_assert_ptr_nonnull(p); /* e.g. a digit inside "shard(-1)" */
        tpx_plan_destroy(p);
      } else {
        ck_assert_ptr_null(p);
        ck_assert(e.message[0] != '\0');
      }
    }
  }
  free(copy);
  free(golden);
}
END_TEST

/* ---- data-driven bad input ---- */

#define MAX_CASES 128
static char *bad_cases[MAX_CASES];
static int n_bad_cases;

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void scan_bad_cases(void) {
  char path[1024];
  DIR *d = opendir(plan_data_path(path, sizeof path, "bad"));
  if (!d)
    return;
  struct dirent *de;
  while ((de = readdir(d)) && n_bad_cases < MAX_CASES) {
    if (de->d_name[0] == '.')
      continue;
    bad_cases[n_bad_cases++] = strdup(de->d_name);
  }
  closedir(d);
  qsort(bad_cases, (size_t)n_bad_cases, sizeof bad_cases[0], cmp_str);
}

START_TEST(test_bad_case_count) { ck_assert_int_ge(n_bad_cases, 30); }
END_TEST

START_TEST(test_bad_case) {
  const char *name = bad_cases[_i];
  char rel[512], path[1024];
  snprintf(rel, sizeof rel, "bad/%s/expected", name);
  char *expected = rstrip(data(rel, NULL));
  ck_assert_msg(expected[0] != '\0', "%s: empty expected", name);
  snprintf(rel, sizeof rel, "bad/%s/plan.json", name);
  plan_data_path(path, sizeof path, rel);
  tpx_plan *p = (tpx_plan *)1;
  tpx_error e = {0};
  tpx_status st = tpx_plan_load(path, &p, &e);
  ck_assert_msg(st != TPX_OK, "%s: loaded without error", name);
  ck_assert_ptr_null(p);
  ck_assert_int_eq(e.status, st);
  ck_assert_msg(strncmp(e.message, path, strlen(path)) == 0,
                "%s: message does not start with the path: %s", name,
                e.message);
  ck_assert_msg(strstr(e.message, expected) != NULL,
                "%s: message \"%s\" lacks \"%s\"", name, e.message, expected);
  free(expected);
}
END_TEST

static Suite *plan_suite(void) {
  Suite *s = suite_create("plan");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_set_get_find);
  tcase_add_test(tc, test_set_rejects);
  tcase_add_test(tc, test_dict_update_order);
  tcase_add_test(tc, test_remove_and_clone);
  tcase_add_test(tc, test_many_entries);
  suite_add_tcase(s, tc);
  TCase *tj = tcase_create("json");
  tcase_add_test(tj, test_json_golden_round_trip);
  tcase_add_test(tj, test_json_defaults_and_optional);
  tcase_add_test(tj, test_json_empty_plan_and_args);
  tcase_add_test(tj, test_json_writer_matches_jansson);
  tcase_add_test(tj, test_json_truncations_and_corruptions);
  tcase_add_test(tj, test_bad_case_count);
  tcase_add_loop_test(tj, test_bad_case, 0, n_bad_cases);
  suite_add_tcase(s, tj);
  return s;
}

int main(void) {
  scan_bad_cases();
  int rc = run_suite(plan_suite());
  for (int i = 0; i < n_bad_cases; i++) free(bad_cases[i]);
  return rc;
}
