/* test_plugin_common.c — plugins/common (tpxp_*) against a mock host that
 * records every call: ABI negotiation and registration, architecture
 * matching, get_plan request checks, formatting, config reads with defaults
 * and errors (one at a time and as typed tables), plan rules, skeleton
 * builders and rows, the per-architecture dispatch table. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpxp_common.h"

/* ---- the mock host: a context that records calls ---- */

#define MAXREC 64
struct tpx_plugin_ctx {
  char error[TPXP_MSG_MAX];
  int n_entries;
  tpx_plugin_entry entries[MAXREC];
  char modules[MAXREC][TPXP_FQN_MAX];
  char in[MAXREC][32], out[MAXREC][32];
  int n_params;
  char params[MAXREC][TPXP_FQN_MAX];
  int64_t shapes[MAXREC][4];
  int ndims[MAXREC];
  char tie_from[TPXP_FQN_MAX], tie_to[TPXP_FQN_MAX];
  int n_modules;
  char skel_modules[MAXREC][TPXP_FQN_MAX];
  char kinds[MAXREC][16];
};

/* Config: a few keys; "bad.*" keys have the wrong type. */
static int m_get_int(tpx_plugin_ctx *c, const char *path, int64_t *out) {
  static const struct {
    const char *k;
    int64_t v;
  } t[] = {{"num_hidden_layers", 2},   {"hidden_size", 64},
           {"num_attention_heads", 4}, {"intermediate_size", 128},
           {"vocab_size", 100},        {"text_config.hidden_size", 32}};
  size_t i;
  (void)c;
  if (strncmp(path, "bad.", 4) == 0)
    return TPX_PLUGIN_TYPE_MISMATCH;
  for (i = 0; i < sizeof t / sizeof t[0]; i++)
    if (strcmp(t[i].k, path) == 0) {
      *out = t[i].v;
      return TPX_PLUGIN_OK;
    }
  return TPX_PLUGIN_NOT_FOUND;
}
static int m_get_bool(tpx_plugin_ctx *c, const char *path, int *out) {
  (void)c;
  if (strncmp(path, "bad.", 4) == 0)
    return TPX_PLUGIN_TYPE_MISMATCH;
  if (strcmp(path, "tie_word_embeddings") == 0) {
    *out = 1;
    return TPX_PLUGIN_OK;
  }
  return TPX_PLUGIN_NOT_FOUND;
}
static int m_get_float(tpx_plugin_ctx *c, const char *path, double *out) {
  (void)c;
  if (strcmp(path, "x") == 0) {
    *out = 2.5;
    return TPX_PLUGIN_OK;
  }
  return TPX_PLUGIN_NOT_FOUND;
}
static int m_get_string(tpx_plugin_ctx *c, const char *path, const char **out) {
  (void)c;
  if (strcmp(path, "model_type") == 0) {
    *out = "llama";
    return TPX_PLUGIN_OK;
  }
  return strncmp(path, "bad.", 4) == 0 ? TPX_PLUGIN_TYPE_MISMATCH
                                       : TPX_PLUGIN_NOT_FOUND;
}
/* The keys the top level holds, "nullkey" with a JSON null value. */
static const char *const k_top[] = {"num_hidden_layers", "hidden_size",
                                    "vocab_size", "nullkey"};
static int m_has(tpx_plugin_ctx *c, const char *path) {
  int64_t v;
  const char *str;
  (void)c;
  return m_get_int(c, path, &v) == TPX_PLUGIN_OK ||
         m_get_string(c, path, &str) == TPX_PLUGIN_OK;
}
static int m_length(tpx_plugin_ctx *c, const char *path, int64_t *n) {
  (void)c;
  if (path[0] != '\0')
    return TPX_PLUGIN_NOT_FOUND;
  *n = (int64_t)(sizeof k_top / sizeof k_top[0]);
  return TPX_PLUGIN_OK;
}
static int m_key(tpx_plugin_ctx *c, const char *path, int64_t i,
                 const char **out) {
  (void)c;
  if (path[0] != '\0' || i < 0 || i >= 4)
    return TPX_PLUGIN_NOT_FOUND;
  *out = k_top[i];
  return TPX_PLUGIN_OK;
}
static int m_set_error(tpx_plugin_ctx *c, const char *msg) {
  if (c->error[0] == '\0')
    snprintf(c->error, sizeof c->error, "%s", msg);
  return TPX_PLUGIN_OK;
}
static int m_plan_add(tpx_plugin_ctx *c, const tpx_plugin_entry *e) {
  int i = c->n_entries;
  if (strcmp(e->style, "bogus") == 0)
    return TPX_PLUGIN_INVALID;
  ck_assert_int_lt(i, MAXREC);
  c->entries[i] = *e;
  snprintf(c->modules[i], TPXP_FQN_MAX, "%s", e->module);
  snprintf(c->in[i], 32, "%s", e->n_input_layouts ? e->input_layouts[0] : "-");
  snprintf(c->out[i], 32, "%s",
           e->n_output_layouts ? e->output_layouts[0] : "-");
  c->n_entries++;
  return TPX_PLUGIN_OK;
}
static int m_add_module(tpx_plugin_ctx *c, const char *fqn, const char *kind) {
  int i = c->n_modules++;
  snprintf(c->skel_modules[i], TPXP_FQN_MAX, "%s", fqn);
  snprintf(c->kinds[i], 16, "%s", kind);
  return TPX_PLUGIN_OK;
}
static int m_add_param(tpx_plugin_ctx *c, const char *mod, const char *name,
                       const int64_t *shape, int32_t ndim, const char *dtype) {
  int i = c->n_params++, k;
  (void)dtype;
  snprintf(c->params[i], TPXP_FQN_MAX, "%s.%s", mod, name);
  for (k = 0; k < ndim; k++) c->shapes[i][k] = shape[k];
  c->ndims[i] = ndim;
  return TPX_PLUGIN_OK;
}
static int m_tie(tpx_plugin_ctx *c, const char *a, const char *b) {
  snprintf(c->tie_from, sizeof c->tie_from, "%s", a);
  snprintf(c->tie_to, sizeof c->tie_to, "%s", b);
  return TPX_PLUGIN_OK;
}

static tpx_plugin_host mock_host(void) {
  tpx_plugin_host h;
  memset(&h, 0, sizeof h);
  h.struct_size = sizeof h;
  h.abi_min = TPX_PLUGIN_ABI_VERSION(1, 0);
  h.abi_max = TPX_PLUGIN_ABI_VERSION(1, 0);
  h.set_error = m_set_error;
  h.config_get_int = m_get_int;
  h.config_get_bool = m_get_bool;
  h.config_get_float = m_get_float;
  h.config_get_string = m_get_string;
  h.config_has = m_has;
  h.config_get_length = m_length;
  h.config_get_key = m_key;
  h.plan_add = m_plan_add;
  h.skeleton_add_module = m_add_module;
  h.skeleton_add_param = m_add_param;
  h.skeleton_tie = m_tie;
  return h;
}

static tpx_plugin_ctx *new_ctx(void) {
  tpx_plugin_ctx *c = calloc(1, sizeof *c);
  ck_assert_ptr_nonnull(c);
  return c;
}

/* ---- tests ---- */

static const struct {
  uint32_t lo, hi;
  int st;
} k_abi[] = {
    {TPX_PLUGIN_ABI_VERSION(1, 0), TPX_PLUGIN_ABI_VERSION(1, 0), 0},
    {TPX_PLUGIN_ABI_VERSION(1, 0), TPX_PLUGIN_ABI_VERSION(1, 7), 0},
    /* the answer must be inside the host's range: a host speaking only 1.9
     * (or 1.1 and up) has no version a 1.0 plugin implements */
    {TPX_PLUGIN_ABI_VERSION(1, 9), TPX_PLUGIN_ABI_VERSION(1, 9), 5},
    {TPX_PLUGIN_ABI_VERSION(1, 1), TPX_PLUGIN_ABI_VERSION(2, 0), 5},
    {TPX_PLUGIN_ABI_VERSION(0, 1), TPX_PLUGIN_ABI_VERSION(5, 0), 0},
    {TPX_PLUGIN_ABI_VERSION(2, 0), TPX_PLUGIN_ABI_VERSION(2, 5), 5},
    {TPX_PLUGIN_ABI_VERSION(0, 0), TPX_PLUGIN_ABI_VERSION(0, 65535), 5},
    {TPX_PLUGIN_ABI_VERSION(2, 0), TPX_PLUGIN_ABI_VERSION(1, 0), 5},
};

START_TEST(test_negotiate) {
  tpx_plugin_host h = mock_host();
  tpx_plugin_info info;
  memset(&info, 0, sizeof info);
  h.abi_min = k_abi[_i].lo;
  h.abi_max = k_abi[_i].hi;
  ck_assert_int_eq(tpxp_negotiate(&h, &info), k_abi[_i].st);
  ck_assert_uint_eq(info.abi_version,
                    k_abi[_i].st == 0 ? TPX_PLUGIN_ABI_CURRENT : 0);
}
END_TEST

START_TEST(test_negotiate_null) {
  tpx_plugin_host h = mock_host();
  tpx_plugin_info info;
  ck_assert_int_eq(tpxp_negotiate(NULL, &info), TPX_PLUGIN_INVALID);
  ck_assert_int_eq(tpxp_negotiate(&h, NULL), TPX_PLUGIN_INVALID);
}
END_TEST

/* tpxp_register fills info from the descriptor only when negotiation
 * succeeds; on failure info keeps what it had. */
START_TEST(test_register) {
  static const char *const archs[] = {"AForCausalLM", NULL};
  static const char *const plans[] = {"p", NULL};
  static const tpxp_plugin_desc d = {"fam", "9.9.9", "a family",
                                     archs, plans,   NULL};
  tpx_plugin_host h = mock_host();
  tpx_plugin_info info;
  memset(&info, 0, sizeof info);
  ck_assert_int_eq(tpxp_register(&h, &info, &d), TPX_PLUGIN_OK);
  ck_assert_uint_eq(info.abi_version, TPX_PLUGIN_ABI_CURRENT);
  ck_assert_str_eq(info.name, "fam");
  ck_assert_str_eq(info.version, "9.9.9");
  ck_assert_str_eq(info.description, "a family");
  ck_assert_ptr_eq(info.architectures, archs);
  ck_assert_ptr_eq(info.plan_names, plans);
  memset(&info, 0, sizeof info);
  h.abi_min = h.abi_max = TPX_PLUGIN_ABI_VERSION(2, 0);
  ck_assert_int_eq(tpxp_register(&h, &info, &d), TPX_PLUGIN_ABI_UNSUPPORTED);
  ck_assert_uint_eq(info.abi_version, 0);
  ck_assert_ptr_null(info.name);
  ck_assert_ptr_null(info.architectures);
  ck_assert_ptr_null(info.plan_names);
  ck_assert_int_eq(tpxp_register(NULL, &info, &d), TPX_PLUGIN_INVALID);
  ck_assert_int_eq(tpxp_register(&h, NULL, &d), TPX_PLUGIN_INVALID);
}
END_TEST

/* The get_plan opening checks and the not-served refusal, with their exact
 * messages. */
START_TEST(test_plain_request) {
  tpx_plugin_host h = mock_host();
  tpx_plugin_ctx *c = new_ctx();
  tpx_plugin_plan_request r;
  memset(&r, 0, sizeof r);
  ck_assert_int_eq(tpxp_plain_plan_request(NULL, c, &r, "fam"),
                   TPX_PLUGIN_INVALID);
  ck_assert_str_eq(c->error, "");
  ck_assert_int_eq(tpxp_plain_plan_request(&h, c, NULL, "fam"),
                   TPX_PLUGIN_INVALID);
  ck_assert_str_eq(c->error, "fam: malformed plan request");
  c->error[0] = '\0';
  ck_assert_int_eq(tpxp_plain_plan_request(&h, c, &r, "fam"),
                   TPX_PLUGIN_INVALID);
  ck_assert_str_eq(c->error, "fam: malformed plan request");
  c->error[0] = '\0';
  r.struct_size = sizeof r;
  ck_assert_int_eq(tpxp_plain_plan_request(&h, c, &r, "fam"), TPX_PLUGIN_OK);
  ck_assert_str_eq(c->error, "");
  r.plan_name = "x";
  ck_assert_int_eq(tpxp_plain_plan_request(&h, c, &r, "fam"),
                   TPX_PLUGIN_REFUSED);
  ck_assert_str_eq(c->error, "fam: no named plan 'x' (this plugin has none)");
  c->error[0] = '\0';
  ck_assert_int_eq(tpxp_not_served(&h, c, "fam", "BForCausalLM"),
                   TPX_PLUGIN_REFUSED);
  ck_assert_str_eq(c->error,
                   "fam: architecture 'BForCausalLM' is not served by this "
                   "plugin");
  c->error[0] = '\0';
  ck_assert_int_eq(tpxp_not_served(&h, c, "fam", NULL), TPX_PLUGIN_REFUSED);
  ck_assert_str_eq(c->error,
                   "fam: architecture '(null)' is not served by this plugin");
  free(c);
}
END_TEST

START_TEST(test_arch_is) {
  ck_assert(tpxp_arch_is("LlamaForCausalLM", "LlamaForCausalLM"));
  ck_assert(tpxp_arch_is("a.b.LlamaForCausalLM", "LlamaForCausalLM"));
  ck_assert(!tpxp_arch_is("a.bLlamaForCausalLM", "LlamaForCausalLM"));
  ck_assert(!tpxp_arch_is("LlamaForCausalLM", "a.LlamaForCausalLM"));
  ck_assert(!tpxp_arch_is(".LlamaForCausalLMx", "LlamaForCausalLM"));
  ck_assert(!tpxp_arch_is("Qwen2ForCausalLM", "Qwen3ForCausalLM"));
  ck_assert(!tpxp_arch_is(NULL, "X"));
  ck_assert(!tpxp_arch_is("X", NULL));
}
END_TEST

START_TEST(test_fmt_and_path) {
  char b[8], p[64];
  ck_assert_int_eq(tpxp_fmt(b, sizeof b, "%s", "abc"), 0);
  ck_assert_str_eq(b, "abc");
  ck_assert_int_eq(tpxp_fmt(b, sizeof b, "%s", "abcdefghij"), -1);
  ck_assert_str_eq(b, "abcdefg");
  ck_assert_str_eq(tpxp_path(p, sizeof p, "", "k"), "k");
  ck_assert_str_eq(tpxp_path(p, sizeof p, NULL, "k"), "k");
  ck_assert_str_eq(tpxp_path(p, sizeof p, "text_config", "k"), "text_config.k");
}
END_TEST

START_TEST(test_fail_and_request) {
  tpx_plugin_host h = mock_host();
  tpx_plugin_ctx *c = new_ctx();
  tpx_plugin_plan_request r;
  ck_assert_int_eq(tpxp_fail(&h, c, TPX_PLUGIN_REFUSED, "x=%d", 3),
                   TPX_PLUGIN_REFUSED);
  ck_assert_str_eq(c->error, "x=3");
  memset(&r, 0, sizeof r);
  ck_assert(!tpxp_request_ok(NULL));
  ck_assert(!tpxp_request_ok(&r));
  r.struct_size = sizeof r;
  ck_assert(tpxp_request_ok(&r));
  free(c);
}
END_TEST

START_TEST(test_config_reads) {
  tpx_plugin_host h = mock_host();
  tpx_plugin_ctx *c = new_ctx();
  int64_t v = 0;
  int b = 0;
  double f = 0;
  const char *s = NULL;
  ck_assert_int_eq(tpxp_cfg_int_req(&h, c, "hidden_size", &v), 0);
  ck_assert_int_eq(v, 64);
  ck_assert_int_eq(tpxp_cfg_int_opt(&h, c, "nope", 7, &v), 0);
  ck_assert_int_eq(v, 7);
  ck_assert_int_eq(tpxp_cfg_bool_opt(&h, c, "nope", 1, &b), 0);
  ck_assert_int_eq(b, 1);
  ck_assert_int_eq(tpxp_cfg_float_opt(&h, c, "x", 0.0, &f), 0);
  ck_assert(f == 2.5);
  ck_assert_int_eq(tpxp_cfg_str_opt(&h, c, "model_type", NULL, &s), 0);
  ck_assert_str_eq(s, "llama");
  ck_assert_int_eq(tpxp_cfg_str_opt(&h, c, "nope", "d", &s), 0);
  ck_assert_str_eq(s, "d");
  ck_assert_str_eq(c->error, "");
  /* missing required key: the message names it */
  ck_assert_int_eq(tpxp_cfg_int_req(&h, c, "head_count", &v), TPX_PLUGIN_ERROR);
  ck_assert_ptr_nonnull(strstr(c->error, "'head_count' is missing"));
  c->error[0] = '\0';
  ck_assert_int_eq(tpxp_cfg_int_opt(&h, c, "bad.k", 1, &v), TPX_PLUGIN_ERROR);
  ck_assert_ptr_nonnull(strstr(c->error, "'bad.k' is not an integer"));
  c->error[0] = '\0';
  ck_assert_int_eq(tpxp_cfg_bool_opt(&h, c, "bad.b", 1, &b), TPX_PLUGIN_ERROR);
  ck_assert_ptr_nonnull(strstr(c->error, "not a boolean"));
  free(c);
}
END_TEST

/* Typed config tables: defaults, sizes, old names, the first failure. */
START_TEST(test_cfg_read) {
  tpx_plugin_host h = mock_host();
  tpx_plugin_ctx *c = new_ctx();
  int64_t layers = 0, heads = 0, renamed = 0, size = 0, bad = 0;
  int tie = 0;
  double x = 0;
  const char *mt = NULL, *dflt = NULL;
  const tpxp_key keys[] = {
      TPXP_KEY_I("num_hidden_layers", &layers, 9),
      TPXP_KEY_Z("absent_size", &size, 5),
      TPXP_KEY_I_OR("new_name", "num_attention_heads", &heads, 1),
      TPXP_KEY_I_OR("hidden_size", "vocab_size", &renamed, 1),
      TPXP_KEY_B("tie_word_embeddings", &tie, 0),
      TPXP_KEY_F("x", &x, 1.0),
      TPXP_KEY_S("model_type", &mt, NULL),
      TPXP_KEY_S("no_such_key", &dflt, "d"),
  };
  const tpxp_key sized[] = {TPXP_KEY_Z("num_hidden_layers", &size, 1),
                            TPXP_KEY_Z("hidden_size", &size, 1)};
  const tpxp_key small[] = {TPXP_KEY_Z("absent", &size, 0)};
  tpxp_key req = TPXP_KEY_I("required_absent", &bad, 0);
  const tpxp_key wrong[] = {TPXP_KEY_I("num_hidden_layers", &layers, 0),
                            TPXP_KEY_B("bad.flag", &tie, 0),
                            TPXP_KEY_I("never_read", &bad, 42)};
  ck_assert_int_eq(TPXP_CFG_READ(&h, c, "", keys), 0);
  ck_assert_int_eq(layers, 2);
  ck_assert_int_eq(size, 5);
  ck_assert_int_eq(heads, 4);    /* new name absent: the old one */
  ck_assert_int_eq(renamed, 64); /* new name present: it wins */
  ck_assert_int_eq(tie, 1);
  ck_assert(x == 2.5);
  ck_assert_str_eq(mt, "llama");
  ck_assert_str_eq(dflt, "d");
  ck_assert_int_eq(TPXP_CFG_READ(&h, c, "", sized), 0);
  ck_assert_int_eq(size, 64);
  /* a size of 0 (here the default) is refused, naming the key */
  ck_assert_int_eq(TPXP_CFG_READ(&h, c, "sec", small), TPX_PLUGIN_ERROR);
  ck_assert_str_eq(c->error, "config sec.absent = 0: expected a size in "
                             "1..2147483648");
  c->error[0] = '\0';
  req.required = 1;
  ck_assert_int_eq(tpxp_cfg_read(&h, c, "", &req, 1), TPX_PLUGIN_ERROR);
  ck_assert_ptr_nonnull(strstr(c->error, "'required_absent' is missing"));
  c->error[0] = '\0';
  ck_assert_int_eq(TPXP_CFG_READ(&h, c, "", wrong), TPX_PLUGIN_ERROR);
  ck_assert_ptr_nonnull(strstr(c->error, "'bad.flag' is not a boolean"));
  ck_assert_int_eq(bad, 0); /* stopped at the first failure */
  /* a key with a JSON null value is present, an absent one is not */
  ck_assert_int_eq(tpxp_cfg_key_present(&h, c, "", "nullkey"), 1);
  ck_assert_int_eq(tpxp_cfg_key_present(&h, c, "", "hidden_size"), 1);
  ck_assert_int_eq(tpxp_cfg_key_present(&h, c, "", "absent"), 0);
  ck_assert_int_eq(tpxp_cfg_key_present(&h, c, "text_config", "nullkey"), 0);
  free(c);
}
END_TEST

START_TEST(test_rules) {
  static const tpxp_rule rules[] = {
      TPXP_VOCAB("embed_tokens", .in = TPXP_R, .out = TPXP_S1,
                 .local = TPXP_KEEP_DTENSOR),
      TPXP_COL("layers.*.qkv_proj", .optional = 1),
      TPXP_COL("lm_head", .out = TPXP_SM1, .local = TPXP_KEEP_DTENSOR,
               .rooted = 1),
      TPXP_RULE("bogus", "x"),
      TPXP_COL("never"),
  };
  tpx_plugin_host h = mock_host();
  tpx_plugin_ctx *c = new_ctx();
  ck_assert_int_eq(tpxp_add_rules(&h, c, "model.language_model", rules, 5),
                   TPX_PLUGIN_INVALID);
  ck_assert_int_eq(c->n_entries, 3); /* stopped at the bad style */
  ck_assert_str_eq(c->modules[0], "model.language_model.embed_tokens");
  ck_assert_str_eq(c->in[0], "replicate");
  ck_assert_str_eq(c->out[0], "shard(1)");
  ck_assert_int_eq(c->entries[0].use_local_output, 0);
  ck_assert_str_eq(c->modules[1], "model.language_model.layers.*.qkv_proj");
  ck_assert_str_eq(c->in[1], "-");
  ck_assert_int_eq(c->entries[1].n_output_layouts, 0);
  ck_assert_int_eq(c->entries[1].optional, 1);
  ck_assert_int_eq(c->entries[1].use_local_output, TPX_PLUGIN_DEFAULT);
  ck_assert_int_eq(c->entries[1].sequence_dim, TPX_PLUGIN_DEFAULT);
  ck_assert_uint_eq(c->entries[1].struct_size, sizeof(tpx_plugin_entry));
  ck_assert_str_eq(c->modules[2], "lm_head"); /* rooted */
  c->n_entries = 0;
  ck_assert_int_eq(tpxp_add_rules(&h, c, "", rules, 1), 0);
  ck_assert_str_eq(c->modules[0], "embed_tokens");
  free(c);
}
END_TEST

/* The three values of a rule's `local`: left out is the style's default. */
START_TEST(test_rule_local) {
  static const tpxp_rule r[] = {
      TPXP_ROW("a"),
      TPXP_ROW("b", .local = TPXP_KEEP_DTENSOR),
      TPXP_SEQ_AG("c", .local = TPXP_TO_LOCAL),
  };
  tpx_plugin_host h = mock_host();
  tpx_plugin_ctx *c = new_ctx();
  ck_assert_int_eq(tpxp_rule_local(&r[0]), TPX_PLUGIN_DEFAULT);
  ck_assert_int_eq(tpxp_rule_local(&r[1]), 0);
  ck_assert_int_eq(tpxp_rule_local(&r[2]), 1);
  ck_assert_int_eq(TPXP_ADD_RULES(&h, c, "p", r), 0);
  ck_assert_int_eq(c->n_entries, 3);
  ck_assert_int_eq(c->entries[0].use_local_output, TPX_PLUGIN_DEFAULT);
  ck_assert_int_eq(c->entries[1].use_local_output, 0);
  ck_assert_int_eq(c->entries[2].use_local_output, 1);
  ck_assert_str_eq(c->modules[2], "p.c");
  free(c);
}
END_TEST

/* Skeleton rows: every kind, the prefix rules, the dtype fallback, the
 * first failure stops the table. */
START_TEST(test_sk_rows) {
  tpx_plugin_host h = mock_host();
  tpx_plugin_ctx *c = new_ctx();
  const tpxp_sk_row rows[] = {
      TPXP_SK_MOD("", "other"),     TPXP_SK_PRM("", "A_log", 8, -1),
      TPXP_SK_LIN("proj", 3, 5, 1), TPXP_SK_NRM("norm", 7, 0),
      TPXP_SK_EMB("emb", 11, 4),
  };
  const tpxp_sk_row bad[] = {
      TPXP_SK_NRM("n", 2, 0), {.suffix = "z"}, TPXP_SK_NRM("never", 2, 0)};
  const tpxp_sk_row when[] = {
      TPXP_SK_WHEN(0),
      TPXP_SK_NRM("skipped", 2, 0),
      TPXP_SK_WHEN(7),
      TPXP_SK_NRM("kept", 2, 0),
      TPXP_SK_NRM("plain", 2, 0),
      TPXP_SK_WHEN(0), /* last: skips nothing past the end */
  };
  ck_assert_int_eq(TPXP_SK_ROWS(&h, c, "m.x", rows, NULL), 0);
  ck_assert_str_eq(c->skel_modules[0], "m.x");
  ck_assert_str_eq(c->kinds[0], "other");
  ck_assert_str_eq(c->params[0], "m.x.A_log");
  ck_assert_int_eq(c->ndims[0], 1);
  ck_assert_int_eq(c->shapes[0][0], 8);
  ck_assert_str_eq(c->params[1], "m.x.proj.weight");
  ck_assert_int_eq(c->shapes[1][0], 5); /* [out, in] */
  ck_assert_int_eq(c->shapes[1][1], 3);
  ck_assert_str_eq(c->params[2], "m.x.proj.bias");
  ck_assert_str_eq(c->params[3], "m.x.norm.weight");
  ck_assert_str_eq(c->params[4], "m.x.emb.weight");
  ck_assert_int_eq(c->shapes[4][0], 11);
  ck_assert_int_eq(c->n_params, 5);
  /* no prefix: suffixes are whole FQNs */
  c->n_params = c->n_modules = 0;
  ck_assert_int_eq(tpxp_sk_rows(&h, c, "", rows + 2, 1, NULL), 0);
  ck_assert_str_eq(c->params[0], "proj.weight");
  c->n_params = c->n_modules = 0;
  ck_assert_int_eq(TPXP_SK_ROWS(&h, c, "q", bad, NULL), TPX_PLUGIN_ERROR);
  ck_assert_int_eq(c->n_params, 1);
  ck_assert_ptr_nonnull(strstr(c->error, "skeleton row q.z: unknown kind"));
  /* conditional rows */
  c->n_params = c->n_modules = 0;
  ck_assert_int_eq(TPXP_SK_ROWS(&h, c, "w", when, NULL), 0);
  ck_assert_int_eq(c->n_params, 2);
  ck_assert_str_eq(c->params[0], "w.kept.weight");
  ck_assert_str_eq(c->params[1], "w.plain.weight");
  free(c);
}
END_TEST

/* ---- the dispatch table ---- */
static int d_plan(const tpx_plugin_host *h, tpx_plugin_ctx *c,
                  const tpx_plugin_plan_request *r) {
  (void)r;
  return tpxp_add(h, c, "planned", "colwise", NULL, NULL, TPXP_DEF, 0);
}
static int d_skel(const tpx_plugin_host *h, tpx_plugin_ctx *c, const char *a) {
  (void)a;
  return tpxp_sk_module(h, c, "skel", "other");
}
static int d_fail(const tpx_plugin_host *h, tpx_plugin_ctx *c, const char *a) {
  return tpxp_fail(h, c, TPX_PLUGIN_ERROR, "fp32 of %s", a);
}
static const tpxp_arch_ops k_ops[] = {
    {.bare = "AForCausalLM",
     .plan = d_plan,
     .skeleton = d_skel,
     .fp32 = d_fail},
    {.bare = "BModel"},
};
static const tpxp_family k_fam = {"fam", k_ops, 2};

START_TEST(test_family) {
  tpx_plugin_host h = mock_host();
  tpx_plugin_ctx *c = new_ctx();
  tpx_plugin_plan_request req;
  memset(&req, 0, sizeof req);
  req.struct_size = sizeof req;
  req.architecture = "pkg.mod.AForCausalLM";
  ck_assert_ptr_eq(tpxp_family_find(&k_fam, "AForCausalLM"), &k_ops[0]);
  ck_assert_ptr_eq(tpxp_family_find(&k_fam, "x.BModel"), &k_ops[1]);
  ck_assert_ptr_null(tpxp_family_find(&k_fam, "CModel"));
  ck_assert_ptr_null(tpxp_family_find(&k_fam, NULL));
  ck_assert_int_eq(tpxp_family_plan(&k_fam, &h, c, &req), 0);
  ck_assert_str_eq(c->modules[0], "planned");
  ck_assert_int_eq(tpxp_family_skeleton(&k_fam, &h, c, req.architecture), 0);
  ck_assert_str_eq(c->skel_modules[0], "skel");
  /* members left out: validate / fsdp / strategy have nothing to do */
  ck_assert_int_eq(tpxp_family_validate(&k_fam, &h, c, &req), 0);
  ck_assert_int_eq(tpxp_family_fsdp_units(&k_fam, &h, c, "AForCausalLM"), 0);
  ck_assert_int_eq(tpxp_family_strategy(&k_fam, &h, c, "BModel"), 0);
  ck_assert_int_eq(tpxp_family_fp32(&k_fam, &h, c, "BModel"), 0);
  ck_assert_str_eq(c->error, "");
  /* a member's failure passes through */
  ck_assert_int_eq(tpxp_family_fp32(&k_fam, &h, c, "AForCausalLM"),
                   TPX_PLUGIN_ERROR);
  ck_assert_str_eq(c->error, "fp32 of AForCausalLM");
  /* BModel has no plan and no skeleton: refused like an unknown class */
  c->error[0] = '\0';
  req.architecture = "BModel";
  ck_assert_int_eq(tpxp_family_plan(&k_fam, &h, c, &req), TPX_PLUGIN_REFUSED);
  ck_assert_str_eq(c->error,
                   "fam: architecture 'BModel' is not served by this plugin");
  c->error[0] = '\0';
  ck_assert_int_eq(tpxp_family_skeleton(&k_fam, &h, c, "BModel"),
                   TPX_PLUGIN_REFUSED);
  c->error[0] = '\0';
  ck_assert_int_eq(tpxp_family_fsdp_units(&k_fam, &h, c, "CModel"),
                   TPX_PLUGIN_REFUSED);
  ck_assert_ptr_nonnull(strstr(c->error, "'CModel' is not served"));
  /* the opening checks */
  ck_assert_int_eq(tpxp_family_skeleton(&k_fam, NULL, c, "AForCausalLM"),
                   TPX_PLUGIN_INVALID);
  ck_assert_int_eq(tpxp_family_plan(&k_fam, NULL, c, &req), TPX_PLUGIN_INVALID);
  c->error[0] = '\0';
  ck_assert_int_eq(tpxp_family_validate(&k_fam, &h, c, NULL),
                   TPX_PLUGIN_INVALID);
  ck_assert_str_eq(c->error, "fam: malformed validate request");
  c->error[0] = '\0';
  req.architecture = "AForCausalLM";
  req.plan_name = "other";
  ck_assert_int_eq(tpxp_family_plan(&k_fam, &h, c, &req), TPX_PLUGIN_REFUSED);
  ck_assert_ptr_nonnull(strstr(c->error, "no named plan 'other'"));
  free(c);
}
END_TEST

START_TEST(test_skeleton_builders) {
  tpx_plugin_host h = mock_host();
  tpx_plugin_ctx *c = new_ctx();
  tpxp_decoder d;
  memset(&d, 0, sizeof d);
  ck_assert_int_eq(tpxp_sk_linear(&h, c, "a.b", 3, 5, 1, NULL), 0);
  ck_assert_str_eq(c->params[0], "a.b.weight");
  ck_assert_int_eq(c->shapes[0][0], 5); /* [out, in] */
  ck_assert_int_eq(c->shapes[0][1], 3);
  ck_assert_str_eq(c->params[1], "a.b.bias");
  ck_assert_int_eq(c->ndims[1], 1);
  ck_assert_str_eq(c->kinds[0], "linear");
  ck_assert_int_eq(tpxp_sk_lm_head(&h, c, "lm_head", 4, 9, 0, 1,
                                   "model.embed_tokens.weight", NULL),
                   0);
  ck_assert_str_eq(c->tie_from, "lm_head.weight");
  ck_assert_str_eq(c->tie_to, "model.embed_tokens.weight");
  ck_assert_int_eq(c->n_params, 2); /* tied: no new tensor */
  /* decoder keys with defaults */
  ck_assert_int_eq(tpxp_decoder_read(&h, c, "", 0, &d), 0);
  ck_assert_int_eq(d.kv_heads, 4);  /* = heads */
  ck_assert_int_eq(d.head_dim, 16); /* hidden / heads */
  ck_assert_int_eq(d.tie, 1);       /* set in the config */
  ck_assert_int_eq(d.qkv_bias, 0);
  d.prefix = "model";
  d.rotary = 1;
  c->n_params = c->n_modules = 0;
  ck_assert_int_eq(tpxp_sk_decoder(&h, c, &d), 0);
  /* embed + 2 * (4 attn + 3 mlp + 2 norms) + norm */
  ck_assert_int_eq(c->n_params, 1 + 2 * 9 + 1);
  ck_assert_str_eq(c->params[1], "model.layers.0.self_attn.q_proj.weight");
  ck_assert_str_eq(c->skel_modules[c->n_modules - 1], "model.rotary_emb");
  ck_assert_str_eq(c->kinds[c->n_modules - 1], "rotary");
  /* a section without the keys fails naming the key */
  ck_assert_int_eq(tpxp_decoder_read(&h, c, "text_config", 0, &d),
                   TPX_PLUGIN_ERROR);
  ck_assert_ptr_nonnull(strstr(c->error, "text_config.num_hidden_layers"));
  free(c);
}
END_TEST

static Suite *common_suite(void) {
  Suite *s = suite_create("families-common");
  TCase *tc = tcase_create("tpxp");
  tcase_add_loop_test(tc, test_negotiate, 0,
                      (int)(sizeof k_abi / sizeof k_abi[0]));
  tcase_add_test(tc, test_negotiate_null);
  tcase_add_test(tc, test_register);
  tcase_add_test(tc, test_plain_request);
  tcase_add_test(tc, test_arch_is);
  tcase_add_test(tc, test_fmt_and_path);
  tcase_add_test(tc, test_fail_and_request);
  tcase_add_test(tc, test_config_reads);
  tcase_add_test(tc, test_cfg_read);
  tcase_add_test(tc, test_rules);
  tcase_add_test(tc, test_rule_local);
  tcase_add_test(tc, test_sk_rows);
  tcase_add_test(tc, test_family);
  tcase_add_test(tc, test_skeleton_builders);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(common_suite());
  int failed;
  srunner_run_all(sr, CK_NORMAL);
  failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
