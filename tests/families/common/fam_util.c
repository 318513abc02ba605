/* fam_util.c — helpers of the family-plugin tests; see fam_util.h. */
#include "fam_util.h"

#include <check.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpx/layout.h"
#include "tpx/mesh.h"
#include "tpx/sharding.h"

const char *fam_data_path(char *buf, size_t size, const char *family,
                          const char *file) {
  const char *src = getenv("TPX_SOURCE_DIR");
  ck_assert_msg(src != NULL, "TPX_SOURCE_DIR is not set");
  snprintf(buf, size, "%s/tests/data/families/%s/%s", src, family, file);
  return buf;
}

tpx_registry *fam_registry(const char *family) {
  char path[1024];
  const char *build = getenv("TPX_BUILD_DIR");
  tpx_registry *reg = NULL;
  tpx_error err = {0};
  ck_assert_msg(build != NULL, "TPX_BUILD_DIR is not set");
  snprintf(path, sizeof path, "%s/plugins/%s/libtpx_%s.so", build, family,
           family);
  ck_assert_int_eq(tpx_registry_create(&reg, &err), TPX_OK);
  ck_assert_msg(tpx_registry_load_file(reg, path, &err) == TPX_OK,
                "loading %s: %s", path, err.message);
  ck_assert_uint_eq(tpx_registry_num_plugins(reg), 1);
  return reg;
}

tpx_model *fam_model(tpx_registry *reg, const char *family, const char *file,
                     int skeleton) {
  char path[1024];
  tpx_model *model = NULL;
  tpx_error err = {0};
  fam_data_path(path, sizeof path, family, file);
  ck_assert_msg(tpx_model_load_config(path, &model, &err) == TPX_OK,
                "loading %s: %s", path, err.message);
  if (skeleton)
    ck_assert_msg(tpx_registry_build_skeleton(reg, model, &err) == TPX_OK,
                  "skeleton of %s: %s", path, err.message);
  return model;
}

tpx_model *fam_model_json(const char *json) {
  tpx_model *model = NULL;
  tpx_error err = {0};
  ck_assert_int_eq(tpx_model_create(&model, &err), TPX_OK);
  ck_assert_msg(
      tpx_model_set_config(model, json, strlen(json), "inline", &err) == TPX_OK,
      "inline config: %s", err.message);
  return model;
}

int fam_plan(tpx_registry *reg, const tpx_model *model, const char *arch,
             const char *plan_name, int sp, int64_t tp, tpx_plan **out,
             char *msg, size_t msg_size) {
  tpx_error err = {0};
  tpx_status st;
  *out = NULL;
  st = tpx_registry_get_plan(reg, 0, model, arch, plan_name, sp, tp, out, &err);
  if (msg != NULL && msg_size > 0)
    snprintf(msg, msg_size, "%s", err.message);
  return (int)st;
}

char *fam_plan_json(const tpx_plan *plan) {
  char *text = NULL;
  tpx_error err = {0};
  ck_assert_msg(tpx_plan_to_json(plan, 0, &text, &err) == TPX_OK,
                "plan to json: %s", err.message);
  return text;
}

void fam_assert_plan_golden(const tpx_plan *plan, const char *family,
                            const char *golden) {
  char path[1024];
  tpx_plan *want = NULL;
  tpx_error err = {0};
  char *a, *b;
  fam_data_path(path, sizeof path, family, golden);
  ck_assert_msg(tpx_plan_load(path, &want, &err) == TPX_OK, "golden %s: %s",
                path, err.message);
  a = fam_plan_json(plan);
  b = fam_plan_json(want);
  if (strcmp(a, b) != 0)
    fprintf(stderr, "plan mismatch against %s\n got: %s\nwant: %s\n", golden, a,
            b);
  ck_assert_msg(strcmp(a, b) == 0, "plan differs from golden %s", golden);
  free(a);
  free(b);
  tpx_plan_destroy(want);
}

void fam_check_plan(tpx_registry *reg, const tpx_model *model, const char *arch,
                    const char *plan_name, int sp, const char *family,
                    const char *golden) {
  char msg[512];
  tpx_plan *plan = NULL;
  int st = fam_plan(reg, model, arch, plan_name, sp, 2, &plan, msg, sizeof msg);
  ck_assert_msg(st == TPX_OK, "plan for %s (named %s, sp=%d) failed: %s", arch,
                plan_name != NULL ? plan_name : "-", sp, msg);
  fam_assert_plan_golden(plan, family, golden);
  tpx_plan_destroy(plan);
}

void fam_check_refused(tpx_registry *reg, const tpx_model *model,
                       const char *arch, const char *plan_name, int sp,
                       const char *needle) {
  fam_check_refused_tp(reg, model, arch, plan_name, sp, 2, needle);
}

void fam_check_refused_tp(tpx_registry *reg, const tpx_model *model,
                          const char *arch, const char *plan_name, int sp,
                          int64_t tp, const char *needle) {
  char msg[512];
  tpx_plan *plan = NULL;
  int st =
      fam_plan(reg, model, arch, plan_name, sp, tp, &plan, msg, sizeof msg);
  ck_assert_msg(st != TPX_OK, "plan for %s at tp=%lld was not refused", arch,
                (long long)tp);
  ck_assert_ptr_null(plan);
  ck_assert_msg(strstr(msg, needle) != NULL, "refusal message '%s' lacks '%s'",
                msg, needle);
}

void fam_check_plan_any_tp(tpx_registry *reg, const tpx_model *model,
                           const char *arch, const char *plan_name, int sp,
                           int64_t tp, const char *family, const char *golden) {
  static const int64_t refs[] = {1, 2};
  char msg[512];
  tpx_plan *plan = NULL;
  int st =
      fam_plan(reg, model, arch, plan_name, sp, tp, &plan, msg, sizeof msg);
  ck_assert_msg(st == TPX_OK, "plan for %s (named %s, sp=%d) at tp=%lld: %s",
                arch, plan_name != NULL ? plan_name : "-", sp, (long long)tp,
                msg);
  char *got = fam_plan_json(plan);
  if (golden != NULL)
    fam_assert_plan_golden(plan, family, golden);
  tpx_plan_destroy(plan);
  for (size_t i = 0; i < sizeof refs / sizeof refs[0]; i++) {
    tpx_plan *ref = NULL;
    st = fam_plan(reg, model, arch, plan_name, sp, refs[i], &ref, msg,
                  sizeof msg);
    ck_assert_msg(st == TPX_OK, "plan for %s at tp=%lld: %s", arch,
                  (long long)refs[i], msg);
    char *want = fam_plan_json(ref);
    ck_assert_msg(strcmp(got, want) == 0,
                  "plan for %s (sp=%d) at tp=%lld differs from tp=%lld:\n%s\n"
                  "vs\n%s",
                  arch, sp, (long long)tp, (long long)refs[i], got, want);
    free(want);
    tpx_plan_destroy(ref);
  }
  free(got);
}

void fam_assert_param(const tpx_model *model, const char *fqn, int64_t d0,
                      int64_t d1) {
  tpx_param_info info;
  tpx_error err = {0};
  int64_t i = tpx_model_find_param(model, fqn);
  ck_assert_msg(i >= 0, "parameter %s missing", fqn);
  ck_assert_int_eq(tpx_model_param(model, i, &info, &err), TPX_OK);
  ck_assert_msg(info.ndim == (d1 < 0 ? 1 : 2), "%s: ndim %d", fqn, info.ndim);
  ck_assert_msg(info.shape[0] == d0, "%s: dim0 %lld != %lld", fqn,
                (long long)info.shape[0], (long long)d0);
  if (d1 >= 0)
    ck_assert_msg(info.shape[1] == d1, "%s: dim1 %lld != %lld", fqn,
                  (long long)info.shape[1], (long long)d1);
}

void fam_assert_no_param(const tpx_model *model, const char *fqn) {
  ck_assert_msg(tpx_model_find_param(model, fqn) < 0,
                "parameter %s should not exist", fqn);
}

void fam_assert_tied(const tpx_model *model, const char *fqn,
                     const char *target_fqn) {
  tpx_param_info info;
  tpx_error err = {0};
  int64_t i = tpx_model_find_param(model, fqn);
  int64_t t = tpx_model_find_param(model, target_fqn);
  ck_assert_msg(i >= 0 && t >= 0, "%s / %s missing", fqn, target_fqn);
  ck_assert_int_eq(tpx_model_param(model, i, &info, &err), TPX_OK);
  ck_assert_msg(info.tied_to == t, "%s is not tied to %s", fqn, target_fqn);
}

void fam_assert_module(const tpx_model *model, const char *fqn,
                       tpx_module_kind kind) {
  int64_t m = tpx_model_find_module(model, fqn);
  ck_assert_msg(m >= 0, "module %s missing", fqn);
  ck_assert_msg(tpx_model_module_kind(model, m) == kind,
                "module %s has kind %s, want %s", fqn,
                tpx_module_kind_name(tpx_model_module_kind(model, m)),
                tpx_module_kind_name(kind));
}

int64_t fam_count_untied(const tpx_model *model) {
  size_t i, n = tpx_model_num_params(model);
  int64_t c = 0;
  for (i = 0; i < n; i++) {
    tpx_param_info info;
    tpx_error err = {0};
    ck_assert_int_eq(tpx_model_param(model, (int64_t)i, &info, &err), TPX_OK);
    if (info.tied_to < 0)
      c++;
  }
  return c;
}

/* Per-atom fnmatch of a plan key against a module FQN. */
static int key_matches(const char *key, const char *fqn) {
  char k[512], f[512];
  char *ks, *fs, *ka, *fa;
  snprintf(k, sizeof k, "%s", key);
  snprintf(f, sizeof f, "%s", fqn);
  ka = strtok_r(k, ".", &ks);
  fa = strtok_r(f, ".", &fs);
  while (ka != NULL && fa != NULL) {
    if (fnmatch(ka, fa, 0) != 0)
      return 0;
    ka = strtok_r(NULL, ".", &ks);
    fa = strtok_r(NULL, ".", &fs);
  }
  return ka == NULL && fa == NULL;
}

/* The shard dim the plan implies for one parameter, or -1 (replicated). */
static int implied_shard_dim(const tpx_model *model, const tpx_plan *plan,
                             const tpx_param_info *p) {
  const char *mod = tpx_model_module_fqn(model, p->module);
  tpx_module_kind kind = tpx_model_module_kind(model, p->module);
  size_t i, n = tpx_plan_size(plan);
  int is_weight = strcmp(p->name, "weight") == 0;
  int is_bias = strcmp(p->name, "bias") == 0;
  for (i = 0; i < n; i++) {
    tpx_plan_entry e;
    tpx_error err = {0};
    ck_assert_int_eq(tpx_plan_get(plan, i, &e, &err), TPX_OK);
    if (!key_matches(e.module, mod))
      continue;
    switch (e.style.kind) {
    case TPX_STYLE_COLWISE:
      if (kind == TPX_MODULE_EMBEDDING)
        return is_weight ? 1 : -1;
      if (kind == TPX_MODULE_LINEAR)
        return is_weight || is_bias ? 0 : -1;
      return -1;
    case TPX_STYLE_ROWWISE:
    case TPX_STYLE_VOCAB_PARALLEL_EMBEDDING:
      if (kind == TPX_MODULE_EMBEDDING)
        return is_weight ? 0 : -1;
      if (kind == TPX_MODULE_LINEAR)
        return is_weight ? 1 : -1;
      return -1;
    default: return -1;
    }
  }
  return -1;
}

int64_t fam_expected_rank_bytes(const tpx_model *model, const tpx_plan *plan,
                                int64_t tp, int64_t rank) {
  size_t i, n = tpx_model_num_params(model);
  int64_t total = 0;
  for (i = 0; i < n; i++) {
    tpx_param_info p;
    tpx_error err = {0};
    int64_t numel = 1, d;
    int dim, k;
    ck_assert_int_eq(tpx_model_param(model, (int64_t)i, &p, &err), TPX_OK);
    if (p.tied_to >= 0)
      continue;
    dim = tp > 1 ? implied_shard_dim(model, plan, &p) : -1;
    for (k = 0; k < p.ndim; k++) {
      d = p.shape[k];
      if (k == dim) { /* torch.chunk: ceil split, trailing may be short */
        int64_t chunk = (d + tp - 1) / tp, lo = rank * chunk;
        int64_t hi = lo + chunk;
        if (lo > d)
          lo = d;
        if (hi > d)
          hi = d;
        d = hi - lo;
      }
      numel *= d;
    }
    total += numel * (int64_t)tpx_dtype_size(p.dtype);
  }
  return total;
}

void fam_check_rank_bytes(const tpx_model *model, const tpx_plan *plan) {
  static const int64_t tps[] = {2, 4, 8};
  size_t t;
  for (t = 0; t < sizeof tps / sizeof tps[0]; t++) {
    const char *names[] = {"tp"};
    tpx_mesh *mesh = NULL;
    tpx_sharding *sh = NULL;
    tpx_sharding_options opts = TPX_SHARDING_OPTIONS_INIT;
    tpx_error err = {0};
    int64_t r, sum = 0;
    opts.fsdp = 0;
    ck_assert_int_eq(tpx_mesh_create(names, &tps[t], 1, &mesh, &err), TPX_OK);
    ck_assert_msg(tpx_sharding_create(model, plan, mesh, &opts, &sh, &err) ==
                      TPX_OK,
                  "sharding tp=%lld: %s", (long long)tps[t], err.message);
    for (r = 0; r < tps[t]; r++) {
      int64_t want = fam_expected_rank_bytes(model, plan, tps[t], r);
      int64_t got = tpx_sharding_rank_param_bytes(sh, r);
      ck_assert_msg(got == want, "tp=%lld rank %lld: %lld bytes, expected %lld",
                    (long long)tps[t], (long long)r, (long long)got,
                    (long long)want);
      sum += got;
    }
    /* Sharding never loses bytes: the ranks together hold at least the
     * model once. */
    ck_assert_int_ge(sum, tpx_model_total_bytes(model));
    tpx_sharding_destroy(sh);
    tpx_mesh_destroy(mesh);
  }
}

int fam_diags_have(const tpx_diag_list *diags, const char *code,
                   const char *needle) {
  size_t i, n = tpx_diag_count(diags);
  for (i = 0; i < n; i++) {
    tpx_diag d;
    tpx_error err = {0};
    if (tpx_diag_get(diags, i, &d, &err) != TPX_OK)
      continue;
    if (strcmp(d.code, code) == 0 &&
        (needle == NULL || strstr(d.message, needle) != NULL))
      return 1;
  }
  return 0;
}

size_t fam_diags_count(const tpx_diag_list *diags, const char *code,
                       const char *needle) {
  size_t i, n = tpx_diag_count(diags), hits = 0;
  for (i = 0; i < n; i++) {
    tpx_diag d;
    tpx_error err = {0};
    if (tpx_diag_get(diags, i, &d, &err) != TPX_OK)
      continue;
    if (strcmp(d.code, code) == 0 &&
        (needle == NULL || strstr(d.message, needle) != NULL))
      hits++;
  }
  return hits;
}

void fam_check_selected(tpx_registry *reg, const tpx_model *model,
                        const char *plan_name, int sp, int64_t tp, int refused,
                        const char *family, const char *golden,
                        const char *code, const char *needle, size_t n_code) {
  tpx_select_options o = TPX_SELECT_OPTIONS_INIT;
  tpx_selection *sel = NULL;
  tpx_diag_list *diags = NULL;
  tpx_error err = {0};
  o.tp_size = tp;
  o.sequence_parallel = sp;
  o.plan_name = plan_name;
  ck_assert_int_eq(tpx_diag_list_create(&diags, &err), TPX_OK);
  ck_assert_msg(tpx_select_plan(reg, model, &o, &sel, diags, &err) == TPX_OK,
                "select at tp=%lld: %s", (long long)tp, err.message);
  ck_assert_msg(!fam_diags_have(diags, "plugin-failed", NULL),
                "tp=%lld: the plugin failed", (long long)tp);
  if (refused) {
    ck_assert_msg(fam_diags_count(diags, "plugin-refused", NULL) == 1,
                  "tp=%lld: want one plugin-refused diagnostic", (long long)tp);
    ck_assert_int_ne(tpx_selection_source(sel), TPX_PLAN_SOURCE_PLUGIN);
  } else {
    ck_assert_msg(!fam_diags_have(diags, "plugin-refused", NULL),
                  "tp=%lld: the plugin refused", (long long)tp);
    ck_assert_int_eq(tpx_selection_source(sel), plan_name != NULL
                                                    ? TPX_PLAN_SOURCE_CUSTOM
                                                    : TPX_PLAN_SOURCE_PLUGIN);
  }
  if (golden != NULL)
    fam_assert_plan_golden(tpx_selection_plan(sel), family, golden);
  if (code != NULL)
    ck_assert_msg(fam_diags_count(diags, code, needle) == n_code,
                  "tp=%lld: %zu diagnostics '%s' with '%s', want %zu",
                  (long long)tp, fam_diags_count(diags, code, needle), code,
                  needle != NULL ? needle : "", n_code);
  for (size_t i = 0; i < tpx_diag_count(diags); i++) {
    tpx_diag d;
    if (tpx_diag_get(diags, i, &d, &err) == TPX_OK &&
        strcmp(d.code, "heads-not-divisible") == 0)
      ck_assert_msg(d.level == TPX_DIAG_ERROR,
                    "tp=%lld: heads-not-divisible is not an error: %s",
                    (long long)tp, d.message);
  }
  tpx_selection_destroy(sel);
  tpx_diag_list_destroy(diags);
}

#include <dlfcn.h>

#include "tpx/plugin.h"

void fam_check_abi(const char *family) {
  static const struct {
    uint32_t lo, hi;
    int ok;
  } cases[] = {
      {TPX_PLUGIN_ABI_VERSION(1, 0), TPX_PLUGIN_ABI_VERSION(1, 7), 1},
      {TPX_PLUGIN_ABI_VERSION(0, 0), TPX_PLUGIN_ABI_VERSION(1, 0), 1},
      {TPX_PLUGIN_ABI_VERSION(1, 0), TPX_PLUGIN_ABI_VERSION(2, 0), 1},
      {TPX_PLUGIN_ABI_VERSION(1, 0), TPX_PLUGIN_ABI_VERSION(1, 0), 1},
      /* a host insisting on minor 1.3+: no version a 1.0 plugin implements
       * (answering 1.0 would be outside the host's range) */
      {TPX_PLUGIN_ABI_VERSION(1, 3), TPX_PLUGIN_ABI_VERSION(2, 0), 0},
      {TPX_PLUGIN_ABI_VERSION(1, 1), TPX_PLUGIN_ABI_VERSION(1, 7), 0},
      {TPX_PLUGIN_ABI_VERSION(2, 0), TPX_PLUGIN_ABI_VERSION(3, 0), 0},
      {TPX_PLUGIN_ABI_VERSION(0, 0), TPX_PLUGIN_ABI_VERSION(0, 9), 0},
  };
  char path[1024];
  const char *build = getenv("TPX_BUILD_DIR");
  void *h;
  tpx_plugin_register_fn reg;
  size_t i;
  ck_assert_ptr_nonnull(build);
  snprintf(path, sizeof path, "%s/plugins/%s/libtpx_%s.so", build, family,
           family);
  h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  ck_assert_msg(h != NULL, "dlopen %s: %s", path, dlerror());
  *(void **)(&reg) = dlsym(h, TPX_PLUGIN_REGISTER_SYMBOL);
  ck_assert_ptr_nonnull(*(void **)(&reg));
  ck_assert_ptr_nonnull(dlsym(h, TPX_PLUGIN_GET_PLAN_SYMBOL));
  for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tpx_plugin_host host;
    tpx_plugin_info info;
    int st;
    memset(&host, 0, sizeof host);
    memset(&info, 0, sizeof info);
    host.struct_size = sizeof host;
    host.abi_min = cases[i].lo;
    host.abi_max = cases[i].hi;
    host.host_version = "test";
    info.struct_size = sizeof info;
    st = reg(&host, &info);
    if (cases[i].ok) {
      ck_assert_int_eq(st, TPX_PLUGIN_OK);
      ck_assert_uint_eq(info.abi_version, TPX_PLUGIN_ABI_CURRENT);
      ck_assert_str_eq(info.name, family);
      ck_assert_ptr_nonnull(info.architectures);
      ck_assert_ptr_nonnull(info.architectures[0]);
    } else {
      ck_assert_int_eq(st, TPX_PLUGIN_ABI_UNSUPPORTED);
    }
  }
  dlclose(h);
}
