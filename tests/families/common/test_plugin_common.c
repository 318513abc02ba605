/* test_plugin_common.c — plugins/common (tpxp_*) against a mock host that
 * records every call: ABI negotiation and registration, architecture
 * matching, get_plan request checks, formatting, config reads with defaults
 * and errors, plan rules, skeleton builders. */
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
  for (k = 0; k < ndim; k++)
    c->shapes[i][k] = shape[k];
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
  static const tpxp_plugin_desc d = {"fam", "9.9.9", "a family", archs,
                                     plans, NULL};
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

START_TEST(test_rules) {
  static const tpxp_rule rules[] = {
      {"embed_tokens", "vocab_parallel_embedding", TPXP_R, TPXP_S1, 0, 0, 0},
      {"layers.*.qkv_proj", "colwise", NULL, NULL, TPXP_DEF, 1, 0},
      {"lm_head", "colwise", NULL, TPXP_SM1, 0, 0, 1},
      {"x", "bogus", NULL, NULL, TPXP_DEF, 0, 0},
      {"never", "colwise", NULL, NULL, TPXP_DEF, 0, 0},
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
  tcase_add_test(tc, test_rules);
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
