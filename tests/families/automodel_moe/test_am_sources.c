/* test_am_sources.c — the automodel_moe plugin's checkpoint sources of the
 * fused experts, seen through a host table of this test's own (the ABI as a
 * third-party host would offer it, with skeleton_add_source): for every
 * recorded family (tests/data/upstream_moe/<family>/), the sources of each
 * gate_and_up_projs / down_projs are exactly the Hugging Face tensors its
 * state-dict adapter reads (hf_names.json), each box's shape is the
 * tensor's (transposed), and the boxes tile the parameter without overlap.
 * A host without skeleton_add_source (older struct, or NULL) gets the same
 * skeleton and no call. */
#include <check.h>
#include <dlfcn.h>
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpx/plugin.h"

static const char *const k_families[] = {
    "deepseek_v3",   "deepseek_v32",  "ernie4_5_moe", "glm4_moe",
    "glm4_moe_lite", "glm_moe_dsa",   "gpt_oss",      "minimax_m2",
    "qwen3_moe",     "qwen3_next",    "ling_v2",      "laguna",
    "mimo_v2_flash", "mimo_v2",       "mimo_v25",     "hy_v3",
    "mistral4",      "minimax_m3_vl", "inkling",      "step3p7",
    "step3p6"};

/* What the plugin told this host. */
struct tpx_plugin_ctx {
  json_t *config;
  json_t *params;  /* name -> [shape] */
  json_t *sources; /* param -> [{name, start, len, transpose}] */
  int n_source_calls;
  char error[512];
};

static json_t *lookup(json_t *root, const char *path) {
  char buf[256], *tok, *save = NULL;
  json_t *v = root;
  snprintf(buf, sizeof buf, "%s", path);
  for (tok = strtok_r(buf, ".", &save); tok && v;
       tok = strtok_r(NULL, ".", &save)) {
    char *br = strchr(tok, '[');
    if (br)
      *br = '\0';
    v = json_object_get(v, tok);
    while (br && v) {
      v = json_array_get(v, (size_t)strtol(br + 1, NULL, 10));
      br = strchr(br + 1, '[');
    }
  }
  return json_is_null(v) ? NULL : v;
}

static int h_set_error(tpx_plugin_ctx *c, const char *m) {
  if (!c->error[0])
    snprintf(c->error, sizeof c->error, "%s", m);
  return TPX_PLUGIN_OK;
}
static void h_log(tpx_plugin_ctx *c, int l, const char *m) {
  (void)c, (void)l, (void)m;
}
static int h_has(tpx_plugin_ctx *c, const char *p) {
  return lookup(c->config, p) != NULL;
}
static int h_int(tpx_plugin_ctx *c, const char *p, int64_t *o) {
  json_t *v = lookup(c->config, p);
  if (!v)
    return TPX_PLUGIN_NOT_FOUND;
  if (!json_is_integer(v))
    return TPX_PLUGIN_TYPE_MISMATCH;
  *o = json_integer_value(v);
  return TPX_PLUGIN_OK;
}
static int h_float(tpx_plugin_ctx *c, const char *p, double *o) {
  json_t *v = lookup(c->config, p);
  if (!v)
    return TPX_PLUGIN_NOT_FOUND;
  if (!json_is_number(v))
    return TPX_PLUGIN_TYPE_MISMATCH;
  *o = json_number_value(v);
  return TPX_PLUGIN_OK;
}
static int h_bool(tpx_plugin_ctx *c, const char *p, int *o) {
  json_t *v = lookup(c->config, p);
  if (!v)
    return TPX_PLUGIN_NOT_FOUND;
  if (!json_is_boolean(v))
    return TPX_PLUGIN_TYPE_MISMATCH;
  *o = json_is_true(v);
  return TPX_PLUGIN_OK;
}
static int h_str(tpx_plugin_ctx *c, const char *p, const char **o) {
  json_t *v = lookup(c->config, p);
  if (!v)
    return TPX_PLUGIN_NOT_FOUND;
  if (!json_is_string(v))
    return TPX_PLUGIN_TYPE_MISMATCH;
  *o = json_string_value(v);
  return TPX_PLUGIN_OK;
}
static int h_len(tpx_plugin_ctx *c, const char *p, int64_t *o) {
  json_t *v = lookup(c->config, p);
  if (!v)
    return TPX_PLUGIN_NOT_FOUND;
  if (json_is_array(v))
    *o = (int64_t)json_array_size(v);
  else if (json_is_object(v))
    *o = (int64_t)json_object_size(v);
  else
    return TPX_PLUGIN_TYPE_MISMATCH;
  return TPX_PLUGIN_OK;
}
static int h_key(tpx_plugin_ctx *c, const char *p, int64_t i, const char **o) {
  (void)c, (void)p, (void)i, (void)o;
  return TPX_PLUGIN_NOT_FOUND;
}
static int h_module(tpx_plugin_ctx *c, const char *f, const char *k) {
  (void)c, (void)f, (void)k;
  return TPX_PLUGIN_OK;
}
static int h_param(tpx_plugin_ctx *c, const char *mod, const char *name,
                   const int64_t *shape, int32_t nd, const char *dt) {
  char fqn[512];
  json_t *s = json_array();
  int32_t i;
  (void)dt;
  snprintf(fqn, sizeof fqn, "%s%s%s", mod, mod[0] ? "." : "", name);
  for (i = 0; i < nd; i++) json_array_append_new(s, json_integer(shape[i]));
  json_object_set_new(c->params, fqn, s);
  return TPX_PLUGIN_OK;
}
static int h_tie(tpx_plugin_ctx *c, const char *a, const char *b) {
  (void)c, (void)a, (void)b;
  return TPX_PLUGIN_OK;
}
static json_t *ints(const int64_t *v, int32_t n) {
  json_t *a = json_array();
  int32_t i;
  for (i = 0; i < n; i++) json_array_append_new(a, json_integer(v[i]));
  return a;
}
static int h_source(tpx_plugin_ctx *c, const char *param, const char *name,
                    const int64_t *start, const int64_t *len, int32_t nd,
                    int32_t tr) {
  json_t *list = json_object_get(c->sources, param);
  c->n_source_calls++;
  if (!json_object_get(c->params, param))
    return h_set_error(c, "source of an unknown parameter");
  if (!list) {
    list = json_array();
    json_object_set_new(c->sources, param, list);
  }
  json_array_append_new(list, json_pack("{s:s,s:o,s:o,s:i}", "name", name,
                                        "start", ints(start, nd), "len",
                                        ints(len, nd), "transpose", tr));
  return TPX_PLUGIN_OK;
}

static tpx_plugin_host make_host(size_t size, int with_source) {
  tpx_plugin_host h;
  memset(&h, 0, sizeof h);
  h.struct_size = size;
  h.abi_min = h.abi_max = TPX_PLUGIN_ABI_CURRENT;
  h.host_version = "test";
  h.log = h_log;
  h.set_error = h_set_error;
  h.config_has = h_has;
  h.config_get_int = h_int;
  h.config_get_float = h_float;
  h.config_get_bool = h_bool;
  h.config_get_string = h_str;
  h.config_get_length = h_len;
  h.config_get_key = h_key;
  h.skeleton_add_module = h_module;
  h.skeleton_add_param = h_param;
  h.skeleton_tie = h_tie;
  h.skeleton_add_source = with_source ? h_source : NULL;
  return h;
}

static json_t *load(const char *fam, const char *file) {
  char path[1024];
  json_error_t je;
  json_t *j;
  snprintf(path, sizeof path, "%s/tests/data/upstream_moe/%s/%s",
           getenv("TPX_SOURCE_DIR"), fam, file);
  j = json_load_file(path, 0, &je);
  ck_assert_msg(j != NULL, "%s: %s", path, je.text);
  return j;
}

/* Build the skeleton of `fam`'s recorded config through host `h`. */
static void build(const tpx_plugin_host *h, const char *fam,
                  tpx_plugin_ctx *c) {
  char path[1024];
  void *so;
  tpx_plugin_skeleton_fn fn;
  memset(c, 0, sizeof *c);
  c->config = load(fam, "config.json");
  c->params = json_object();
  c->sources = json_object();
  snprintf(path, sizeof path,
           "%s/plugins/automodel_moe/libtpx_automodel_moe.so",
           getenv("TPX_BUILD_DIR"));
  so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  ck_assert_msg(so != NULL, "%s", dlerror());
  *(void **)(&fn) = dlsym(so, TPX_PLUGIN_SKELETON_SYMBOL);
  ck_assert_ptr_nonnull(*(void **)(&fn));
  ck_assert_msg(fn(h, c,
                   json_string_value(json_array_get(
                       json_object_get(c->config, "architectures"), 0))) ==
                    TPX_PLUGIN_OK,
                "%s: %s", fam, c->error);
  dlclose(so);
}

static void done(tpx_plugin_ctx *c) {
  json_decref(c->config);
  json_decref(c->params);
  json_decref(c->sources);
}

static int64_t at(json_t *a, size_t i) {
  return json_integer_value(json_array_get(a, i));
}

/* The boxes of `srcs` lie in `shape`, do not overlap and cover it. */
static void check_tiling(const char *param, json_t *shape, json_t *srcs) {
  size_t i, j, d, nd = json_array_size(shape);
  int64_t numel = 1, sum = 0;
  for (d = 0; d < nd; d++) numel *= at(shape, d);
  for (i = 0; i < json_array_size(srcs); i++) {
    json_t *s = json_array_get(srcs, i);
    json_t *st = json_object_get(s, "start"), *ln = json_object_get(s, "len");
    int64_t vol = 1;
    for (d = 0; d < nd; d++) {
      ck_assert_msg(at(st, d) >= 0 && at(st, d) + at(ln, d) <= at(shape, d),
                    "%s: box %zu outside on dim %zu", param, i, d);
      vol *= at(ln, d);
    }
    sum += vol;
    for (j = 0; j < i; j++) {
      json_t *o = json_array_get(srcs, j);
      json_t *os = json_object_get(o, "start"), *ol = json_object_get(o, "len");
      int apart = 0;
      for (d = 0; d < nd; d++)
        apart |= at(st, d) + at(ln, d) <= at(os, d) ||
                 at(os, d) + at(ol, d) <= at(st, d);
      ck_assert_msg(apart, "%s: boxes %zu and %zu overlap", param, j, i);
    }
  }
  ck_assert_msg(sum == numel, "%s: boxes cover %lld of %lld", param,
                (long long)sum, (long long)numel);
}

START_TEST(test_sources_match_adapter) {
  const char *fam = k_families[_i];
  tpx_plugin_host h = make_host(sizeof(tpx_plugin_host), 1);
  tpx_plugin_ctx c;
  json_t *hf = load(fam, "hf_names.json");
  json_t *to_hf = json_object_get(hf, "to_hf"), *tensors, *t;
  json_t *shapes = json_object();
  const char *param;
  json_t *srcs;
  size_t i;
  int fused = 0;
  build(&h, fam, &c);
  tensors = json_object_get(hf, "hf_tensors");
  json_array_foreach(tensors, i, t) {
    json_object_set(shapes, json_string_value(json_array_get(t, 0)),
                    json_array_get(t, 2));
  }
  /* Every fused expert tensor the adapter splits has sources: exactly the
   * tensors it reads, each of the box's shape transposed. */
  json_object_foreach(to_hf, param, t) {
    size_t n = json_array_size(t);
    if (strstr(param, ".mlp.experts.") && n == 1 &&
        json_object_get(c.sources, param) != NULL) {
      /* Mistral-4: one stored tensor in transformers' layout, the whole
       * box transposed. */
      json_t *s = json_array_get(json_object_get(c.sources, param), 0);
      const char *name = json_string_value(json_object_get(s, "name"));
      json_t *ln = json_object_get(s, "len");
      json_t *want = json_object_get(shapes, name);
      fused++;
      ck_assert_uint_eq(json_array_size(json_object_get(c.sources, param)), 1);
      ck_assert_str_eq(name, json_string_value(json_array_get(t, 0)));
      ck_assert_ptr_nonnull(want);
      ck_assert_int_eq(json_integer_value(json_object_get(s, "transpose")), 1);
      ck_assert_int_eq(at(ln, 0), at(want, 0));
      ck_assert_int_eq(at(ln, 1), at(want, 2));
      ck_assert_int_eq(at(ln, 2), at(want, 1));
      check_tiling(param, json_object_get(c.params, param),
                   json_object_get(c.sources, param));
      continue;
    }
    if (!strstr(param, ".mlp.experts.") || n < 2)
      continue;
    fused++;
    srcs = json_object_get(c.sources, param);
    ck_assert_msg(srcs != NULL, "%s: %s has no sources", fam, param);
    ck_assert_uint_eq(json_array_size(srcs), n);
    for (i = 0; i < n; i++) {
      json_t *s = json_array_get(srcs, i);
      const char *name = json_string_value(json_object_get(s, "name"));
      json_t *ln = json_object_get(s, "len");
      json_t *want = json_object_get(shapes, name);
      size_t k, found = 0;
      json_array_foreach(t, k, want) {
        found |= strcmp(json_string_value(want), name) == 0;
      }
      ck_assert_msg(found, "%s: source %s of %s is not the adapter's", fam,
                    name, param);
      want = json_object_get(shapes, name);
      ck_assert_msg(want != NULL, "%s: %s not in hf_tensors", fam, name);
      ck_assert_int_eq(json_integer_value(json_object_get(s, "transpose")), 1);
      ck_assert_int_eq(at(ln, 0), 1);
      {
        /* Expert e's tensors at index e; gate rows first, then up. */
        json_t *st = json_object_get(s, "start");
        const char *e = strstr(name, ".experts.");
        ck_assert_ptr_nonnull(e);
        ck_assert_int_eq(at(st, 0), strtol(e + 9, NULL, 10));
        if (strstr(name, ".gate_proj.") || strstr(name, ".w1."))
          ck_assert_int_eq(at(st, 2), 0);
        if (strstr(name, ".up_proj.") || strstr(name, ".w3."))
          ck_assert_int_eq(at(st, 2), at(ln, 2));
      }
      ck_assert_int_eq(at(ln, 2), at(want, 0));
      ck_assert_int_eq(at(ln, 1), at(want, 1));
    }
    check_tiling(param, json_object_get(c.params, param), srcs);
  }
  /* Any other source (Inkling: tensors stored transposed or renamed per
   * index; Step-3.7: experts stored as whole [E, ...] tensors, MTP blocks
   * under other layer numbers) is a tensor the adapter names for the
   * parameter, each box that whole tensor (its last two dims swapped where
   * transposed), the boxes tiling the parameter. */
  json_object_foreach(c.sources, param, srcs) {
    json_t *names = json_object_get(to_hf, param), *s, *nm;
    size_t j, k;
    if (strstr(param, ".mlp.experts.")) /* counted above */
      continue;
    ck_assert_msg(json_array_size(srcs) == json_array_size(names), "%s: %s",
                  fam, param);
    json_array_foreach(srcs, j, s) {
      json_t *ln = json_object_get(s, "len"), *want;
      const char *name = json_string_value(json_object_get(s, "name"));
      size_t nd = json_array_size(ln), found = 0;
      int tr = (int)json_integer_value(json_object_get(s, "transpose"));
      json_array_foreach(names, k, nm) {
        found |= strcmp(json_string_value(nm), name) == 0;
      }
      ck_assert_msg(found, "%s: %s reads %s", fam, param, name);
      want = json_object_get(shapes, name);
      ck_assert_ptr_nonnull(want);
      for (i = 0; i < nd; i++) {
        size_t w = tr && i + 2 >= nd ? 2 * nd - 3 - i : i;
        ck_assert_msg(at(ln, i) == at(want, w), "%s: %s dim %zu", fam, param,
                      i);
      }
    }
    check_tiling(param, json_object_get(c.params, param), srcs);
    fused++;
  }
  ck_assert_int_eq((int)json_object_size(c.sources), fused);
  if (strcmp(fam, "gpt_oss") == 0)
    ck_assert_int_eq(c.n_source_calls, 0);
  else
    ck_assert_int_gt(fused, 0);
  json_decref(shapes);
  json_decref(hf);
  done(&c);
}
END_TEST

/* A host without skeleton_add_source: the same parameters, no call. */
START_TEST(test_older_host) {
  tpx_plugin_host full = make_host(sizeof(tpx_plugin_host), 1);
  tpx_plugin_host none = make_host(sizeof(tpx_plugin_host), 0);
  tpx_plugin_host old =
      make_host(offsetof(tpx_plugin_host, skeleton_add_source), 1);
  tpx_plugin_ctx a, b, o;
  build(&full, "deepseek_v3", &a);
  build(&none, "deepseek_v3", &b);
  build(&old, "deepseek_v3", &o);
  ck_assert_int_gt(a.n_source_calls, 0);
  ck_assert_int_eq(b.n_source_calls, 0);
  ck_assert_int_eq(o.n_source_calls, 0);
  ck_assert(json_equal(a.params, b.params));
  ck_assert(json_equal(a.params, o.params));
  done(&a);
  done(&b);
  done(&o);
}
END_TEST

int main(void) {
  Suite *s = suite_create("automodel-moe-sources");
  TCase *tc = tcase_create("sources");
  SRunner *sr;
  int failed;
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_sources_match_adapter, 0,
                      (int)(sizeof k_families / sizeof k_families[0]));
  tcase_add_test(tc, test_older_host);
  suite_add_tcase(s, tc);
  sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
