/* test_match.c — plan keys against a builder-made model with torch >= 2.9
 * parallelize_module semantics: per-atom fnmatch (`*`, `?`, `[...]`, never
 * across a dot, Python's rules for the corner cases), the root key "", match
 * order, unmatched required / optional keys, duplicate matches
 * (core/src/plan/match.c). */
#include <check.h>
#include <time.h>

#include "plan_test.h"
#include "tpx/diag.h"
#include "tpx/match.h"
#include "tpx/model.h"
#include "tpx/plan.h"

#define NLAYERS 12
#define NEXPERTS 12

/* model.embed_tokens, model.layers.{0..11}.{self_attn.{q,k,v,o}_proj,
 * mlp.{gate,up,down}_proj, mlp.experts.{0..11}.w1, input_layernorm},
 * model.norm, lm_head — in that insertion order. */
static tpx_model *build_model(void) {
  tpx_model *m = NULL;
  CHECK_OK(tpx_model_create(&m, &e_));
  int64_t shape[2] = {64, 32};
  CHECK_OK(tpx_model_add_module(m, "model.embed_tokens", TPX_MODULE_EMBEDDING,
                                NULL, &e_));
  CHECK_OK(tpx_model_add_param(m, "model.embed_tokens", "weight", shape, 2,
                               TPX_DTYPE_BF16, NULL, &e_));
  static const char *const attn[] = {"q_proj", "k_proj", "v_proj", "o_proj"};
  static const char *const mlp[] = {"gate_proj", "up_proj", "down_proj"};
  char fqn[128];
  for (int l = 0; l < NLAYERS; l++) {
    for (int i = 0; i < 4; i++) {
      snprintf(fqn, sizeof fqn, "model.layers.%d.self_attn.%s", l, attn[i]);
      CHECK_OK(tpx_model_add_module(m, fqn, TPX_MODULE_LINEAR, NULL, &e_));
      CHECK_OK(tpx_model_add_param(m, fqn, "weight", shape, 2, TPX_DTYPE_BF16,
                                   NULL, &e_));
    }
    for (int i = 0; i < 3; i++) {
      snprintf(fqn, sizeof fqn, "model.layers.%d.mlp.%s", l, mlp[i]);
      CHECK_OK(tpx_model_add_module(m, fqn, TPX_MODULE_LINEAR, NULL, &e_));
    }
    for (int x = 0; x < NEXPERTS; x++) {
      snprintf(fqn, sizeof fqn, "model.layers.%d.mlp.experts.%d.w1", l, x);
      CHECK_OK(tpx_model_add_module(m, fqn, TPX_MODULE_LINEAR, NULL, &e_));
    }
    snprintf(fqn, sizeof fqn, "model.layers.%d.input_layernorm", l);
    CHECK_OK(tpx_model_add_module(m, fqn, TPX_MODULE_NORM, NULL, &e_));
  }
  CHECK_OK(tpx_model_add_module(m, "model.norm", TPX_MODULE_NORM, NULL, &e_));
  CHECK_OK(tpx_model_add_module(m, "lm_head", TPX_MODULE_LINEAR, NULL, &e_));
  return m;
}

typedef struct entry_spec {
  const char *key;
  int optional;
} entry_spec;

static tpx_plan *make_plan(const entry_spec *e, size_t n) {
  tpx_plan *p = NULL;
  CHECK_OK(tpx_plan_create(&p, &e_));
  tpx_style s = tpx_style_default(TPX_STYLE_COLWISE);
  for (size_t i = 0; i < n; i++)
    CHECK_OK(tpx_plan_set(p, e[i].key, &s, e[i].optional, &e_));
  return p;
}

/* Match one key; return the matched FQNs joined with ' '. */
static char *match_one(tpx_model *m, const char *key, size_t *count) {
  entry_spec es = {key, 1};
  tpx_plan *p = make_plan(&es, 1);
  tpx_match *mt = NULL;
  CHECK_OK(tpx_match_plan(p, m, &mt, NULL, &e_));
  size_t n = tpx_match_entry_count(mt, 0);
  *count = n;
  size_t cap = 64 + n * 64, len = 0;
  char *out = calloc(1, cap);
  for (size_t i = 0; i < n; i++) {
    int64_t mod = tpx_match_entry_module(mt, 0, i);
    ck_assert_int_eq(tpx_match_module_entry(mt, mod), 0);
    const char *f = tpx_model_module_fqn(m, mod);
    len += (size_t)snprintf(out + len, cap - len, "%s%s", i ? " " : "",
                            f[0] ? f : "<root>");
  }
  tpx_match_destroy(mt);
  tpx_plan_destroy(p);
  return out;
}

typedef struct key_case {
  const char *key;
  size_t count;
  const char *first; /* FQN of the first match, or NULL */
  const char *last;
} key_case;

static const key_case keys[] = {
    {"model.layers.*.self_attn.q_proj", NLAYERS,
     "model.layers.0.self_attn.q_proj", "model.layers.11.self_attn.q_proj"},
    {"model.layers.*", NLAYERS, "model.layers.0", "model.layers.11"},
    /* '*' never crosses a dot */
    {"model.*.q_proj", 0, NULL, NULL},
    {"model.layers.*.q_proj", 0, NULL, NULL},
    {"*", 2, "model", "lm_head"},
    {"*.*", 3, "model.embed_tokens", "model.norm"},
    {"model.layers.?.mlp", 10, "model.layers.0.mlp", "model.layers.9.mlp"},
    {"model.layers.??.mlp", 2, "model.layers.10.mlp", "model.layers.11.mlp"},
    {"model.layers.[02].mlp", 2, "model.layers.0.mlp", "model.layers.2.mlp"},
    {"model.layers.[!0-4].mlp", 5, "model.layers.5.mlp", "model.layers.9.mlp"},
    {"model.layers.1[01].mlp", 2, "model.layers.10.mlp", "model.layers.11.mlp"},
    {"model.layers.0.mlp.experts.*.w1", NEXPERTS,
     "model.layers.0.mlp.experts.0.w1", "model.layers.0.mlp.experts.11.w1"},
    {"model.layers.*.mlp.*_proj", 3 * NLAYERS, "model.layers.0.mlp.gate_proj",
     "model.layers.11.mlp.down_proj"},
    {"model.layers.*.*.*_proj", 7 * NLAYERS, "model.layers.0.self_attn.q_proj",
     "model.layers.11.mlp.down_proj"},
    {"model.layers.*.mlp.experts.1?.w1", 2 * NLAYERS,
     "model.layers.0.mlp.experts.10.w1", "model.layers.11.mlp.experts.11.w1"},
    {"*_head", 1, "lm_head", "lm_head"},
    {"lm_head", 1, "lm_head", "lm_head"},
    {"LM_HEAD", 0, NULL, NULL},        /* case-sensitive */
    {"lm_head.weight", 0, NULL, NULL}, /* parameters are not modules */
    {"", 1, "<root>", "<root>"},
    {"model.layers.12", 0, NULL, NULL},
    {"model.layers.*.mlp.experts.*.w1", NLAYERS *NEXPERTS,
     "model.layers.0.mlp.experts.0.w1", "model.layers.11.mlp.experts.11.w1"},
};
#define NKEYS (sizeof keys / sizeof keys[0])

START_TEST(test_key_table) {
  const key_case *c = &keys[_i];
  tpx_model *m = build_model();
  size_t n;
  char *got = match_one(m, c->key, &n);
  ck_assert_msg(n == c->count, "'%s': %zu matches (%s), want %zu", c->key, n,
                got, c->count);
  if (c->first) {
    char want_start[256];
    snprintf(want_start, sizeof want_start, "%s", c->first);
    ck_assert_msg(
        strncmp(got, want_start, strlen(want_start)) == 0 &&
            (got[strlen(want_start)] == ' ' || got[strlen(want_start)] == '\0'),
        "'%s': first match of %s", c->key, got);
    size_t gl = strlen(got), ll = strlen(c->last);
    ck_assert_msg(gl >= ll && strcmp(got + gl - ll, c->last) == 0,
                  "'%s': last match of %s", c->key, got);
  }
  free(got);
  tpx_model_destroy(m);
}
END_TEST

/* Matches come in torch's walk order: depth-first, children in insertion
 * order. */
START_TEST(test_match_order) {
  tpx_model *m = build_model();
  size_t n;
  char *got = match_one(m, "model.layers.1?.*.[go]*", &n);
  ck_assert_str_eq(got, "model.layers.10.self_attn.o_proj "
                        "model.layers.10.mlp.gate_proj "
                        "model.layers.11.self_attn.o_proj "
                        "model.layers.11.mlp.gate_proj");
  free(got);
  tpx_model_destroy(m);
}
END_TEST

typedef struct atom_case {
  const char *pat, *name;
  int want;
} atom_case;

/* Python fnmatch.fnmatchcase results for the same pairs. */
static const atom_case atoms[] = {
    {"q_proj", "q_proj", 1},
    {"q_proj", "Q_proj", 0},
    {"*", "", 1},
    {"*", "anything", 1},
    {"?", "", 0},
    {"?", "a", 1},
    {"?", "ab", 0},
    {"?", "\xc3\xa9", 1},
    {"??", "\xc3\xa9", 0},
    {"a*b*c", "aXbYc", 1},
    {"a*b*c", "aXbY", 0},
    {"a*b*c", "abc", 1},
    {"*proj", "q_proj", 1},
    {"*proj*", "proj", 1},
    {"**", "x", 1},
    {"[abc]", "b", 1},
    {"[abc]", "d", 0},
    {"[a-c]", "b", 1},
    {"[c-a]", "b", 0},
    {"[!a-c]", "d", 1},
    {"[!a-c]", "b", 0},
    {"[^a]", "^", 1},
    {"[^a]", "b", 0},
    {"[a-]", "-", 1},
    {"[]]", "]", 1},
    {"[!]]", "a", 1},
    {"[!]]", "]", 0},
    {"[", "[", 1},
    {"a[", "a[", 1},
    {"[ab", "[ab", 1},
    {"a\\b", "a\\b", 1},
    {"\\*", "\\x", 1},
    {"\\*", "*", 0},
    {"[\\]", "\\", 1},
    {"*[0-9]", "w10", 1},
    {"w[0-9]", "w10", 0},
    {"[0-9]*", "10", 1},
    {"[é]", "\xc3\xa9", 1},
    {"layers", "layer", 0},
};
#define NATOMS (sizeof atoms / sizeof atoms[0])

START_TEST(test_atom_table) {
  const atom_case *c = &atoms[_i];
  ck_assert_msg(tpx_match_atom(c->pat, c->name) == c->want,
                "fnmatch('%s', '%s') should be %d", c->name, c->pat, c->want);
}
END_TEST

static tpx_diag get_diag(tpx_diag_list *l, size_t i) {
  tpx_diag d;
  CHECK_OK(tpx_diag_get(l, i, &d, &e_));
  return d;
}

START_TEST(test_unmatched_required_and_optional) {
  tpx_model *m = build_model();
  entry_spec es[] = {
      {"model.layers.*.self_attn.qkv_proj", 0},
      {"model.layers.*.self_attn.qkv_proj.x", 1},
      {"model.layer.*.mlp", 0},
      {"transformer.h.*", 0},
      {"lm_head.x", 0},
      {"model.norm", 0},
  };
  tpx_plan *p = make_plan(es, sizeof es / sizeof es[0]);
  tpx_diag_list *dl = NULL;
  CHECK_OK(tpx_diag_list_create(&dl, &e_));
  tpx_match *mt = NULL;
  CHECK_OK(tpx_match_plan(p, m, &mt, dl, &e_));
  ck_assert_uint_eq(tpx_diag_count(dl), 5);
  /* torch's parallelize_module warns and skips such a key (issue 26,
   * cause 3): a warning, never an error */
  ck_assert_uint_eq(tpx_diag_count_at_least(dl, TPX_DIAG_ERROR), 0);
  ck_assert_uint_eq(tpx_diag_count_at_least(dl, TPX_DIAG_WARNING), 4);

  tpx_diag d = get_diag(dl, 0);
  ck_assert_int_eq(d.level, TPX_DIAG_WARNING);
  ck_assert_str_eq(d.code, "unmatched-key");
  ck_assert_str_eq(d.subject, "model.layers.*.self_attn.qkv_proj");
  ck_assert_ptr_nonnull(
      strstr(d.message, "'model.layers.*.self_attn.qkv_proj'"));
  ck_assert_ptr_nonnull(strstr(d.message, "atom 'qkv_proj' (atom 5 of 5)"));
  ck_assert_ptr_nonnull(
      strstr(d.message, "no child of 'model.layers.0.self_attn'"));
  ck_assert_ptr_nonnull(strstr(d.fix, "'model.layers.*.self_attn.q_proj'"));
  ck_assert_ptr_nonnull(strstr(d.fix, "'model.layers.*.self_attn.k_proj'"));
  ck_assert_ptr_nonnull(strstr(d.fix, "optional"));
  ck_assert_ptr_nonnull(strstr(d.message, "stays replicated over tp"));

  d = get_diag(dl, 1); /* optional: info, same code */
  ck_assert_int_eq(d.level, TPX_DIAG_INFO);
  ck_assert_str_eq(d.code, "unmatched-key");
  ck_assert_ptr_nonnull(strstr(d.message, "atom 'qkv_proj'"));

  d = get_diag(dl, 2);
  ck_assert_ptr_nonnull(strstr(d.message, "no child of 'model' matches atom "
                                          "'layer' (atom 2 of 4)"));
  ck_assert_ptr_nonnull(strstr(d.fix, "'model.layers.*.mlp'"));

  d = get_diag(dl, 3);
  ck_assert_ptr_nonnull(strstr(
      d.message, "no child of the root module matches atom 'transformer'"));

  d = get_diag(dl, 4); /* a leaf has no children to suggest */
  ck_assert_ptr_nonnull(
      strstr(d.message, "no child of 'lm_head' matches atom 'x'"));
  ck_assert_ptr_nonnull(strstr(d.fix, "'lm_head' has no submodules"));

  ck_assert_uint_eq(tpx_match_entry_count(mt, 0), 0);
  ck_assert_uint_eq(tpx_match_entry_count(mt, 5), 1);
  ck_assert_int_eq(tpx_match_entry_module(mt, 5, 0),
                   tpx_model_find_module(m, "model.norm"));
  tpx_match_destroy(mt);
  tpx_diag_list_destroy(dl);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

/* The deepest failing atom is reported even when shallower paths also fail:
 * only layer 3 has a qkv_proj-like fused module. */
START_TEST(test_unmatched_deepest_atom) {
  tpx_model *m = NULL;
  CHECK_OK(tpx_model_create(&m, &e_));
  CHECK_OK(tpx_model_add_module(m, "a.b.c", TPX_MODULE_LINEAR, NULL, &e_));
  CHECK_OK(tpx_model_add_module(m, "a.x", TPX_MODULE_LINEAR, NULL, &e_));
  entry_spec es[] = {{"a.*.c.d", 0}};
  tpx_plan *p = make_plan(es, 1);
  tpx_diag_list *dl = NULL;
  CHECK_OK(tpx_diag_list_create(&dl, &e_));
  tpx_match *mt = NULL;
  CHECK_OK(tpx_match_plan(p, m, &mt, dl, &e_));
  ck_assert_uint_eq(tpx_diag_count(dl), 1);
  tpx_diag d = get_diag(dl, 0);
  ck_assert_ptr_nonnull(strstr(d.message, "no child of 'a.b.c' matches atom "
                                          "'d' (atom 4 of 4)"));
  tpx_match_destroy(mt);
  tpx_diag_list_destroy(dl);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

/* "closest existing" names only modules that exist: a sibling under
 * which the rest of the key exists is suggested with that rest; one under
 * which it does not, as the module alone (Mixtral's block_sparse_moe has no
 * up_proj: 'model.layers.*.block_sparse_moe.up_proj' must not be offered). */
static const struct {
  const char *key;
  const char *want; /* a suggestion that must be offered */
  const char *never;
} hint_cases[] = {
    {"model.layers.*.moe.up_proj", "'model.layers.*.mlp.up_proj'",
     "self_attn.up_proj"},
    {"model.layers.*.feed_forward.w3", "'model.layers.*.mlp'", ".w3'"},
    {"model.layers.*.mlp.experts.*.w2", "'model.layers.*.mlp.experts.*.w1'",
     NULL},
    {"model.layers.*.self_attn.qkv_proj", "'model.layers.*.self_attn.q_proj'",
     NULL},
    {"model.layer.*.mlp", "'model.layers.*.mlp'", NULL},
};

START_TEST(test_unmatched_hints_exist) {
  tpx_model *m = build_model();
  entry_spec es = {hint_cases[_i].key, 0};
  tpx_plan *p = make_plan(&es, 1);
  tpx_diag_list *dl = NULL;
  CHECK_OK(tpx_diag_list_create(&dl, &e_));
  tpx_match *mt = NULL;
  CHECK_OK(tpx_match_plan(p, m, &mt, dl, &e_));
  ck_assert_uint_eq(tpx_diag_count(dl), 1);
  tpx_diag d = get_diag(dl, 0);
  ck_assert_msg(strstr(d.fix, hint_cases[_i].want) != NULL, "%s: fix '%s'",
                hint_cases[_i].key, d.fix);
  if (hint_cases[_i].never)
    ck_assert_msg(strstr(d.fix, hint_cases[_i].never) == NULL, "%s: fix '%s'",
                  hint_cases[_i].key, d.fix);
  /* every quoted suggestion matches at least one module */
  const char *q = strstr(d.fix, "closest existing: ");
  ck_assert_ptr_nonnull(q);
  const char *end = strchr(q, ';');
  int n = 0;
  for (const char *a = strchr(q, '\''); a && a < end; a = strchr(a, '\'')) {
    const char *b = strchr(a + 1, '\'');
    ck_assert_ptr_nonnull(b);
    char sug[256];
    snprintf(sug, sizeof sug, "%.*s", (int)(b - a - 1), a + 1);
    size_t count = 0;
    free(match_one(m, sug, &count));
    ck_assert_msg(count > 0, "%s: suggestion '%s' matches nothing",
                  hint_cases[_i].key, sug);
    n++;
    a = b + 1;
  }
  ck_assert_int_gt(n, 0);
  tpx_match_destroy(mt);
  tpx_diag_list_destroy(dl);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

START_TEST(test_duplicate_match) {
  tpx_model *m = build_model();
  entry_spec es[] = {
      {"model.layers.*.mlp.up_proj", 0},
      {"model.layers.*.mlp.*_proj", 0},
      {"model.layers.1.mlp", 0},
      {"model.layers.*.mlp", 0},
      {"", 0},
  };
  tpx_plan *p = make_plan(es, sizeof es / sizeof es[0]);
  tpx_diag_list *dl = NULL;
  CHECK_OK(tpx_diag_list_create(&dl, &e_));
  tpx_match *mt = NULL;
  CHECK_OK(tpx_match_plan(p, m, &mt, dl, &e_));
  ck_assert_uint_eq(tpx_match_entry_total(mt), 5);
  /* one diagnostic per pair of entries */
  ck_assert_uint_eq(tpx_diag_count(dl), 2);
  tpx_diag d = get_diag(dl, 0);
  ck_assert_int_eq(d.level, TPX_DIAG_ERROR);
  ck_assert_str_eq(d.code, "duplicate-match");
  ck_assert_str_eq(d.subject, "model.layers.*.mlp.*_proj");
  ck_assert_ptr_nonnull(
      strstr(d.message, "'model.layers.*.mlp.up_proj' (entry 0)"));
  ck_assert_ptr_nonnull(
      strstr(d.message, "'model.layers.*.mlp.*_proj' (entry 1)"));
  ck_assert_ptr_nonnull(
      strstr(d.message, "module 'model.layers.0.mlp.up_proj'"));
  ck_assert_ptr_nonnull(strstr(d.message, "(and 11 more modules)"));
  d = get_diag(dl, 1);
  ck_assert_ptr_nonnull(strstr(d.message, "'model.layers.1.mlp' (entry 2)"));
  ck_assert_ptr_nonnull(strstr(d.message, "'model.layers.*.mlp' (entry 3)"));
  ck_assert_ptr_nonnull(strstr(d.message, "module 'model.layers.1.mlp';"));
  /* the first entry wins in module_entry */
  int64_t up1 = tpx_model_find_module(m, "model.layers.1.mlp.up_proj");
  int64_t gate1 = tpx_model_find_module(m, "model.layers.1.mlp.gate_proj");
  int64_t mlp1 = tpx_model_find_module(m, "model.layers.1.mlp");
  int64_t mlp2 = tpx_model_find_module(m, "model.layers.2.mlp");
  ck_assert_int_eq(tpx_match_module_entry(mt, up1), 0);
  ck_assert_int_eq(tpx_match_module_entry(mt, gate1), 1);
  ck_assert_int_eq(tpx_match_module_entry(mt, mlp1), 2);
  ck_assert_int_eq(tpx_match_module_entry(mt, mlp2), 3);
  ck_assert_int_eq(tpx_match_module_entry(mt, 0), 4); /* root */
  ck_assert_int_eq(
      tpx_match_module_entry(mt, tpx_model_find_module(m, "model.norm")), -1);
  /* every entry still lists all its matches */
  ck_assert_uint_eq(tpx_match_entry_count(mt, 1), 3 * NLAYERS);
  ck_assert_uint_eq(tpx_match_entry_count(mt, 3), NLAYERS);
  tpx_match_destroy(mt);
  tpx_diag_list_destroy(dl);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

START_TEST(test_args_and_bounds) {
  tpx_model *m = build_model();
  tpx_plan *p = make_plan(NULL, 0);
  tpx_match *mt = (tpx_match *)1;
  CHECK_FAILS(tpx_match_plan(NULL, m, &mt, NULL, &e_), TPX_INVALID_ARGUMENT,
              "NULL");
  ck_assert_ptr_null(mt);
  CHECK_FAILS(tpx_match_plan(p, NULL, &mt, NULL, &e_), TPX_INVALID_ARGUMENT,
              "NULL");
  CHECK_FAILS(tpx_match_plan(p, m, NULL, NULL, &e_), TPX_INVALID_ARGUMENT,
              "NULL");
  CHECK_OK(tpx_match_plan(p, m, &mt, NULL, &e_)); /* empty plan */
  ck_assert_uint_eq(tpx_match_entry_total(mt), 0);
  ck_assert_uint_eq(tpx_match_entry_count(mt, 0), 0);
  ck_assert_int_eq(tpx_match_entry_module(mt, 0, 0), -1);
  ck_assert_int_eq(tpx_match_module_entry(mt, -1), -1);
  ck_assert_int_eq(tpx_match_module_entry(mt, 1 << 30), -1);
  ck_assert_int_eq(tpx_match_module_entry(mt, 1), -1);
  tpx_match_destroy(mt);
  tpx_match_destroy(NULL);
  ck_assert_uint_eq(tpx_match_entry_count(NULL, 0), 0);
  ck_assert_int_eq(tpx_match_entry_module(NULL, 0, 0), -1);
  ck_assert_int_eq(tpx_match_module_entry(NULL, 0), -1);
  ck_assert_int_eq(tpx_match_atom(NULL, "x"), 0);
  tpx_plan_destroy(p);
  /* an empty model (only the root): "" matches, anything else does not */
  tpx_model *empty = NULL;
  CHECK_OK(tpx_model_create(&empty, &e_));
  entry_spec es[] = {{"", 0}, {"model", 0}};
  p = make_plan(es, 2);
  tpx_diag_list *dl = NULL;
  CHECK_OK(tpx_diag_list_create(&dl, &e_));
  CHECK_OK(tpx_match_plan(p, empty, &mt, dl, &e_));
  ck_assert_uint_eq(tpx_match_entry_count(mt, 0), 1);
  ck_assert_uint_eq(tpx_match_entry_count(mt, 1), 0);
  ck_assert_uint_eq(tpx_diag_count(dl), 1);
  tpx_diag d = get_diag(dl, 0);
  ck_assert_ptr_nonnull(strstr(d.message, "no child of the root module"));
  tpx_match_destroy(mt);
  tpx_diag_list_destroy(dl);
  tpx_plan_destroy(p);
  tpx_model_destroy(empty);
  tpx_model_destroy(m);
}
END_TEST

/* A plan read from JSON, matched: the path a user's --plan takes. */
START_TEST(test_json_plan_on_model) {
  tpx_model *m = build_model();
  const char *doc =
      "{\"format\": \"tpx-plan/1\", \"entries\": ["
      "{\"module\": \"model.embed_tokens\", \"style\": \"rowwise\", "
      "\"input_layouts\": [\"replicate\"]},"
      "{\"module\": \"model.layers.*.self_attn.[qkv]_proj\", \"style\": "
      "\"colwise\"},"
      "{\"module\": \"model.layers.*.self_attn.o_proj\", \"style\": "
      "\"rowwise\"},"
      "{\"module\": \"model.layers.*.self_attn.qkv_proj\", \"style\": "
      "\"colwise\", \"optional\": true},"
      "{\"module\": \"lm_head\", \"style\": \"colwise\"}]}";
  tpx_plan *p = NULL;
  CHECK_OK(tpx_plan_from_json(doc, strlen(doc), NULL, &p, &e_));
  tpx_diag_list *dl = NULL;
  CHECK_OK(tpx_diag_list_create(&dl, &e_));
  tpx_match *mt = NULL;
  CHECK_OK(tpx_match_plan(p, m, &mt, dl, &e_));
  ck_assert_uint_eq(tpx_diag_count_at_least(dl, TPX_DIAG_WARNING), 0);
  ck_assert_uint_eq(tpx_diag_count(dl), 1); /* the optional qkv_proj */
  ck_assert_uint_eq(tpx_match_entry_count(mt, 1), 3 * NLAYERS);
  ck_assert_int_eq(tpx_match_entry_module(mt, 1, 2),
                   tpx_model_find_module(m, "model.layers.0.self_attn.v_proj"));
  tpx_match_destroy(mt);
  tpx_diag_list_destroy(dl);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

/* v_proj and o_proj are left out while q_proj / k_proj (same weight shape,
 * same parent) are sharded: one warning per layer stack, not per layer. */
START_TEST(test_replicated_by_omission) {
  tpx_model *m = build_model();
  entry_spec es[] = {{"model.layers.*.self_attn.q_proj", 0},
                     {"model.layers.*.self_attn.k_proj", 0}};
  tpx_plan *p = make_plan(es, 2);
  tpx_diag_list *dl = NULL;
  CHECK_OK(tpx_diag_list_create(&dl, &e_));
  tpx_match *mt = NULL;
  CHECK_OK(tpx_match_plan(p, m, &mt, dl, &e_));
  ck_assert_uint_eq(tpx_diag_count(dl), 2);
  tpx_diag d = get_diag(dl, 0);
  ck_assert_int_eq(d.level, TPX_DIAG_WARNING);
  ck_assert_str_eq(d.code, "replicated-by-omission");
  ck_assert_str_eq(d.subject, "model.layers.*.self_attn.v_proj.weight");
  ck_assert_ptr_nonnull(
      strstr(d.message,
             "parameter 'model.layers.0.self_attn.v_proj.weight' [64, 32]"));
  ck_assert_ptr_nonnull(strstr(d.message, "sibling "
                                          "'model.layers.0.self_attn.q_proj."
                                          "weight'"));
  ck_assert_ptr_nonnull(strstr(
      d.message, "sharded by 'model.layers.*.self_attn.q_proj' (colwise)"));
  ck_assert_ptr_nonnull(strstr(d.message, "(and 11 more like it)"));
  ck_assert_ptr_nonnull(strstr(d.fix, "'model.layers.*.self_attn.v_proj'"));
  d = get_diag(dl, 1);
  ck_assert_str_eq(d.subject, "model.layers.*.self_attn.o_proj.weight");
  tpx_match_destroy(mt);
  tpx_diag_list_destroy(dl);
  tpx_plan_destroy(p);

  /* a sequence-parallel sibling does not shard: no warning; a covered
   * module (any style) is not "omitted" */
  tpx_plan *q = NULL;
  CHECK_OK(tpx_plan_create(&q, &e_));
  tpx_style sp = tpx_style_default(TPX_STYLE_SEQUENCE_PARALLEL);
  tpx_style col = tpx_style_default(TPX_STYLE_COLWISE);
  CHECK_OK(tpx_plan_set(q, "model.layers.*.self_attn.q_proj", &sp, 0, &e_));
  CHECK_OK(
      tpx_plan_set(q, "model.layers.*.self_attn.[kvo]_proj", &col, 0, &e_));
  CHECK_OK(tpx_diag_list_create(&dl, &e_));
  CHECK_OK(tpx_match_plan(q, m, &mt, dl, &e_));
  ck_assert_uint_eq(tpx_diag_count(dl), 0);
  tpx_match_destroy(mt);
  tpx_diag_list_destroy(dl);
  tpx_plan_destroy(q);

  /* A key on an ancestor covers its submodules: with model.layers.*
   * sequence_parallel, o_proj (no key of its own, sibling q_proj colwise)
   * is placed by the layer key, so it is not replicated by omission. The
   * same plan without the layer key warns. */
  for (int with_layer_key = 0; with_layer_key < 2; with_layer_key++) {
    CHECK_OK(tpx_plan_create(&q, &e_));
    if (with_layer_key)
      CHECK_OK(tpx_plan_set(q, "model.layers.*", &sp, 0, &e_));
    CHECK_OK(
        tpx_plan_set(q, "model.layers.*.self_attn.[qkv]_proj", &col, 0, &e_));
    CHECK_OK(tpx_diag_list_create(&dl, &e_));
    CHECK_OK(tpx_match_plan(q, m, &mt, dl, &e_));
    size_t omitted = 0;
    for (size_t i = 0; i < tpx_diag_count(dl); i++)
      if (strcmp(get_diag(dl, i).code, "replicated-by-omission") == 0)
        omitted++;
    ck_assert_uint_eq(omitted, with_layer_key ? 0 : 1);
    if (!with_layer_key)
      ck_assert_str_eq(get_diag(dl, 0).subject,
                       "model.layers.*.self_attn.o_proj.weight");
    tpx_match_destroy(mt);
    tpx_diag_list_destroy(dl);
    tpx_plan_destroy(q);
  }
  tpx_model_destroy(m);
}
END_TEST

/* A very deep chain and a key as long: the walk does not recurse on the C
 * stack. */
START_TEST(test_deep_model) {
  enum { DEPTH = 20000 };
  char *fqn = malloc(2 * DEPTH + 1), *key = malloc(2 * DEPTH + 1);
  for (int i = 0; i < DEPTH; i++) {
    fqn[2 * i] = 'a';
    fqn[2 * i + 1] = '.';
    key[2 * i] = i % 2 ? '*' : '?';
    key[2 * i + 1] = '.';
  }
  fqn[2 * DEPTH - 1] = key[2 * DEPTH - 1] = '\0';
  tpx_model *m = NULL;
  CHECK_OK(tpx_model_create(&m, &e_));
  CHECK_OK(tpx_model_add_module(m, fqn, TPX_MODULE_LINEAR, NULL, &e_));
  entry_spec es[] = {{key, 0}};
  tpx_plan *p = make_plan(es, 1);
  tpx_match *mt = NULL;
  CHECK_OK(tpx_match_plan(p, m, &mt, NULL, &e_));
  ck_assert_uint_eq(tpx_match_entry_count(mt, 0), 1);
  ck_assert_int_eq(tpx_match_entry_module(mt, 0, 0),
                   tpx_model_find_module(m, fqn));
  tpx_match_destroy(mt);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
  free(fqn);
  free(key);
}
END_TEST

/* Issue 17, item 7: matching was quadratic in plan entries (100 000 took
 * 31.5 s). Two shapes of 100 000 entries: every key its own prefix (MoE
 * experts named one by one), and every key in one prefix group (one wide
 * module list, one literal last atom each). Each must match in well under
 * 2 s; the time is printed to the test log, the bound asserted is generous
 * for sanitizer builds on a loaded machine. */
static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

START_TEST(test_many_entries) {
  enum { N = 100000 };
  const int wide = _i == 1;
  const int layers = wide ? 1 : 100, per = N / layers;
  tpx_model *m = NULL;
  tpx_plan *p = NULL;
  CHECK_OK(tpx_model_create(&m, &e_));
  CHECK_OK(tpx_plan_create(&p, &e_));
  tpx_style s = tpx_style_default(TPX_STYLE_COLWISE);
  char fqn[128], key[128];
  for (int l = 0; l < layers; l++)
    for (int x = 0; x < per; x++) {
      snprintf(fqn, sizeof fqn,
               wide ? "model.layers.%d.mlp.p%d"
                    : "model.layers.%d.experts.%d.w1",
               l, x);
      CHECK_OK(tpx_model_add_module(m, fqn, TPX_MODULE_LINEAR, NULL, &e_));
      if (wide)
        snprintf(key, sizeof key, "model.layers.*.mlp.p%d", x);
      CHECK_OK(tpx_plan_set(p, wide ? key : fqn, &s, 0, &e_));
    }
  ck_assert_uint_eq(tpx_plan_size(p), N);
  tpx_diag_list *dl = NULL;
  CHECK_OK(tpx_diag_list_create(&dl, &e_));
  tpx_match *mt = NULL;
  double t0 = now_s();
  CHECK_OK(tpx_match_plan(p, m, &mt, dl, &e_));
  double dt = now_s() - t0;
  fprintf(stderr, "test_many_entries (%s): %d entries matched in %.3f s\n",
          wide ? "one prefix group" : "one group per key", N, dt);
  ck_assert_uint_eq(tpx_diag_count(dl), 0);
  for (size_t e = 0; e < N; e += 9973) {
    ck_assert_uint_eq(tpx_match_entry_count(mt, e), 1);
    ck_assert_int_eq(
        tpx_match_module_entry(mt, tpx_match_entry_module(mt, e, 0)),
        (int64_t)e);
  }
  ck_assert_msg(dt < 10.0, "%d entries took %.1f s", N, dt);
  tpx_match_destroy(mt);
  tpx_diag_list_destroy(dl);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

static Suite *match_suite(void) {
  Suite *s = suite_create("match");
  TCase *tc = tcase_create("core");
  tcase_add_loop_test(tc, test_key_table, 0, (int)NKEYS);
  tcase_add_test(tc, test_match_order);
  tcase_add_loop_test(tc, test_atom_table, 0, (int)NATOMS);
  tcase_add_test(tc, test_unmatched_required_and_optional);
  tcase_add_test(tc, test_unmatched_deepest_atom);
  tcase_add_loop_test(tc, test_unmatched_hints_exist, 0,
                      (int)(sizeof hint_cases / sizeof hint_cases[0]));
  tcase_add_test(tc, test_duplicate_match);
  tcase_add_test(tc, test_args_and_bounds);
  tcase_add_test(tc, test_json_plan_on_model);
  tcase_add_test(tc, test_replicated_by_omission);
  tcase_add_test(tc, test_deep_model);
  tcase_add_loop_test(tc, test_many_entries, 0, 2);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return run_suite(match_suite()); }
