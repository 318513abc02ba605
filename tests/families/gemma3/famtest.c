/* famtest.c — see famtest.h. */
#include "famtest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpx/diag.h"
#include "tpx/error.h"
#include "tpx/harness.h"
#include "tpx/mesh.h"
#include "tpx/sharding.h"

static const char *env_or(const char *name, const char *dflt) {
  const char *v = getenv(name);
  return v != NULL && v[0] != '\0' ? v : dflt;
}

tpx_registry *ft_registry(const char *family) {
  char path[1024];
  tpx_registry *reg = NULL;
  tpx_error err = {0};
  snprintf(path, sizeof path, "%s/plugins/%s/libtpx_%s.so",
           env_or("TPX_BUILD_DIR", "."), family, family);
  ck_assert_int_eq(tpx_registry_create(&reg, &err), TPX_OK);
  if (tpx_registry_load_file(reg, path, &err) != TPX_OK)
    ck_abort_msg("loading %s: %s", path, err.message);
  ck_assert_uint_eq(tpx_registry_num_plugins(reg), 1);
  return reg;
}

const char *ft_data(const char *family, const char *file) {
  static char path[1024];
  snprintf(path, sizeof path, "%s/tests/data/families/%s/%s",
           env_or("TPX_SOURCE_DIR", "."), family, file);
  return path;
}

tpx_model *ft_config(const char *family, const char *file) {
  tpx_model *m = NULL;
  tpx_error err = {0};
  const char *path = ft_data(family, file);
  if (tpx_model_load_config(path, &m, &err) != TPX_OK)
    ck_abort_msg("loading %s: %s", path, err.message);
  return m;
}

tpx_model *ft_skeleton(const tpx_registry *reg, const char *family,
                       const char *file) {
  tpx_model *m = ft_config(family, file);
  tpx_error err = {0};
  if (tpx_registry_build_skeleton(reg, m, &err) != TPX_OK)
    ck_abort_msg("skeleton of %s/%s: %s", family, file, err.message);
  return m;
}

tpx_plan *ft_plan(const tpx_registry *reg, const tpx_model *model,
                  const char *arch, int sp, int64_t tp, tpx_status *st,
                  char *msg, size_t msg_size) {
  tpx_plan *plan = NULL;
  tpx_error err = {0};
  int64_t idx = tpx_registry_find(reg, arch);
  tpx_status s;
  ck_assert_msg(idx >= 0, "no plugin serves '%s'", arch);
  s = tpx_registry_get_plan(reg, (size_t)idx, model, arch, NULL, sp, tp, &plan,
                            &err);
  if (st != NULL)
    *st = s;
  if (msg != NULL && msg_size > 0)
    snprintf(msg, msg_size, "%s", s == TPX_OK ? "" : err.message);
  if (s != TPX_OK) {
    tpx_plan_destroy(plan);
    return NULL;
  }
  return plan;
}

tpx_plan *ft_plan_ok(const tpx_registry *reg, const tpx_model *model,
                     const char *arch, int sp, int64_t tp) {
  char msg[1024];
  tpx_status st = TPX_OK;
  tpx_plan *plan = ft_plan(reg, model, arch, sp, tp, &st, msg, sizeof msg);
  ck_assert_msg(plan != NULL, "%s sp=%d tp=%lld: %s", arch, sp, (long long)tp,
                msg);
  return plan;
}

void ft_assert_golden(const tpx_plan *plan, const char *family,
                      const char *golden) {
  tpx_plan *want = NULL;
  tpx_error err = {0};
  char *a = NULL, *b = NULL;
  size_t i, n;
  const char *path = ft_data(family, golden);
  if (tpx_plan_load(path, &want, &err) != TPX_OK)
    ck_abort_msg("golden %s: %s", path, err.message);
  n = tpx_plan_size(want);
  for (i = 0; i < n && i < tpx_plan_size(plan); i++) {
    tpx_plan_entry ge, pe;
    ck_assert_int_eq(tpx_plan_get(want, i, &ge, NULL), TPX_OK);
    ck_assert_int_eq(tpx_plan_get(plan, i, &pe, NULL), TPX_OK);
    ck_assert_msg(strcmp(ge.module, pe.module) == 0,
                  "%s entry %zu: key '%s', want '%s'", golden, i, pe.module,
                  ge.module);
    ck_assert_msg(tpx_style_equal(&ge.style, &pe.style),
                  "%s entry %zu (%s): style differs (%s vs want %s)", golden, i,
                  pe.module, tpx_style_kind_name(pe.style.kind),
                  tpx_style_kind_name(ge.style.kind));
    ck_assert_int_eq(ge.optional, pe.optional);
  }
  ck_assert_msg(tpx_plan_size(plan) == n, "%s: %zu entries, want %zu", golden,
                tpx_plan_size(plan), n);
  ck_assert_int_eq(tpx_plan_to_json(plan, 0, &a, NULL), TPX_OK);
  ck_assert_int_eq(tpx_plan_to_json(want, 0, &b, NULL), TPX_OK);
  ck_assert_str_eq(a, b);
  free(a);
  free(b);
  tpx_plan_destroy(want);
}

void ft_assert_param(const tpx_model *m, const char *fqn, int64_t d0,
                     int64_t d1, int64_t d2) {
  int64_t want[3], idx = tpx_model_find_param(m, fqn);
  int nd = 0, i;
  tpx_param_info pi;
  want[0] = d0;
  want[1] = d1;
  want[2] = d2;
  while (nd < 3 && want[nd] >= 0) nd++;
  ck_assert_msg(idx >= 0, "no parameter '%s'", fqn);
  ck_assert_int_eq(tpx_model_param(m, idx, &pi, NULL), TPX_OK);
  ck_assert_msg(pi.ndim == nd, "%s: ndim %d, want %d", fqn, pi.ndim, nd);
  for (i = 0; i < nd; i++)
    ck_assert_msg(pi.shape[i] == want[i], "%s: dim %d is %lld, want %lld", fqn,
                  i, (long long)pi.shape[i], (long long)want[i]);
}

void ft_assert_tied(const tpx_model *m, const char *fqn, const char *target) {
  int64_t idx = tpx_model_find_param(m, fqn),
          t = tpx_model_find_param(m, target);
  tpx_param_info pi;
  ck_assert_msg(idx >= 0 && t >= 0, "no '%s' or '%s'", fqn, target);
  ck_assert_int_eq(tpx_model_param(m, idx, &pi, NULL), TPX_OK);
  ck_assert_msg(pi.tied_to == t, "%s is not tied to %s", fqn, target);
}

size_t ft_count_suffix(const tpx_model *m, const char *suffix) {
  size_t i, n = 0, ls = strlen(suffix);
  for (i = 0; i < tpx_model_num_params(m); i++) {
    tpx_param_info pi;
    size_t lf;
    ck_assert_int_eq(tpx_model_param(m, (int64_t)i, &pi, NULL), TPX_OK);
    lf = strlen(pi.fqn);
    if (lf >= ls && strcmp(pi.fqn + lf - ls, suffix) == 0)
      n++;
  }
  return n;
}

void ft_assert_param_order(const tpx_model *m, const char *prefix,
                           const char *const *names, size_t n) {
  size_t i, k = 0, lp = strlen(prefix);
  for (i = 0; i < tpx_model_num_params(m); i++) {
    tpx_param_info pi;
    ck_assert_int_eq(tpx_model_param(m, (int64_t)i, &pi, NULL), TPX_OK);
    if (strncmp(pi.fqn, prefix, lp) != 0)
      continue;
    ck_assert_msg(k < n, "unexpected parameter '%s' (after %zu of %zu)", pi.fqn,
                  k, n);
    ck_assert_msg(strcmp(pi.fqn + lp, names[k]) == 0,
                  "parameter %zu under '%s' is '%s', want '%s%s'", k, prefix,
                  pi.fqn, prefix, names[k]);
    k++;
  }
  ck_assert_msg(k == n, "%zu parameters under '%s', want %zu", k, prefix, n);
}

tpx_module_kind ft_kind(const tpx_model *m, const char *fqn) {
  int64_t idx = tpx_model_find_module(m, fqn);
  ck_assert_msg(idx >= 0, "no module '%s'", fqn);
  return tpx_model_module_kind(m, idx);
}

int64_t ft_rank_bytes(const tpx_model *m, const tpx_plan *plan, int64_t tp,
                      int64_t rank) {
  const char *names[1] = {"tp"};
  int64_t sizes[1], bytes;
  tpx_mesh *mesh = NULL;
  tpx_sharding *sh = NULL;
  tpx_sharding_options opts = TPX_SHARDING_OPTIONS_INIT;
  tpx_error err = {0};
  sizes[0] = tp;
  if (tpx_mesh_create(names, sizes, 1, &mesh, &err) != TPX_OK)
    ck_abort_msg("mesh: %s", err.message);
  opts.fsdp = 0;
  if (tpx_sharding_create(m, plan, mesh, &opts, &sh, &err) != TPX_OK)
    ck_abort_msg("sharding tp=%lld: %s", (long long)tp, err.message);
  bytes = tpx_sharding_rank_param_bytes(sh, rank);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  return bytes;
}

static void harness_once(const char *path, const char *const *configs,
                         size_t n) {
  tpx_harness_options o = TPX_HARNESS_OPTIONS_INIT;
  tpx_harness_result *r = NULL;
  tpx_error err = {0};
  char fails[4096] = "";
  size_t i, len;
  o.configs = configs;
  o.num_configs = n;
  if (tpx_harness_run(path, &o, &r, &err) != TPX_OK)
    ck_abort_msg("harness on %s: %s", path, err.message);
  for (i = 0; i < tpx_harness_num_checks(r); i++) {
    tpx_harness_check c;
    ck_assert_int_eq(tpx_harness_check_get(r, i, &c, NULL), TPX_OK);
    len = strlen(fails);
    if (!c.passed && len < sizeof fails - 1)
      snprintf(fails + len, sizeof fails - len, "[%s: %s] ", c.name, c.detail);
  }
  ck_assert_msg(tpx_harness_num_failed(r) == 0 && tpx_harness_num_checks(r) > 0,
                "%s: %zu of %zu checks failed: %s", path,
                tpx_harness_num_failed(r), tpx_harness_num_checks(r), fails);
  tpx_harness_result_destroy(r);
}

void ft_assert_harness(const char *family, const char *const *files,
                       size_t num_files) {
  char path[1024], bufs[8][1024];
  const char *configs[8];
  size_t i;
  ck_assert_uint_le(num_files, 8);
  snprintf(path, sizeof path, "%s/plugins/%s/libtpx_%s.so",
           env_or("TPX_BUILD_DIR", "."), family, family);
  harness_once(path, NULL, 0);
  for (i = 0; i < num_files; i++) {
    snprintf(bufs[i], sizeof bufs[i], "%s", ft_data(family, files[i]));
    configs[i] = bufs[i];
  }
  if (num_files > 0)
    harness_once(path, configs, num_files);
}

int ft_select_diag(const tpx_registry *reg, const tpx_model *m, int sp,
                   int64_t tp, const char *code) {
  tpx_select_options opts = TPX_SELECT_OPTIONS_INIT;
  tpx_selection *sel = NULL;
  tpx_diag_list *diags = NULL;
  tpx_error err = {0};
  int level = -1;
  size_t i;
  opts.tp_size = tp;
  opts.sequence_parallel = sp;
  ck_assert_int_eq(tpx_diag_list_create(&diags, NULL), TPX_OK);
  if (tpx_select_plan(reg, m, &opts, &sel, diags, &err) != TPX_OK)
    ck_abort_msg("select sp=%d tp=%lld: %s", sp, (long long)tp, err.message);
  for (i = 0; i < tpx_diag_count(diags); i++) {
    tpx_diag d;
    ck_assert_int_eq(tpx_diag_get(diags, i, &d, NULL), TPX_OK);
    if (strcmp(d.code, code) == 0) {
      level = (int)d.level;
      break;
    }
  }
  tpx_selection_destroy(sel);
  tpx_diag_list_destroy(diags);
  return level;
}

void ft_assert_plan_any_tp(const tpx_registry *reg, const tpx_model *m,
                           const char *arch, int sp, int64_t tp) {
  static const int64_t refs[] = {1, 2};
  tpx_plan *plan = ft_plan_ok(reg, m, arch, sp, tp);
  char *got = NULL;
  size_t i;
  ck_assert_int_eq(tpx_plan_to_json(plan, 0, &got, NULL), TPX_OK);
  for (i = 0; i < sizeof refs / sizeof refs[0]; i++) {
    tpx_plan *ref = ft_plan_ok(reg, m, arch, sp, refs[i]);
    char *want = NULL;
    ck_assert_int_eq(tpx_plan_to_json(ref, 0, &want, NULL), TPX_OK);
    ck_assert_msg(strcmp(got, want) == 0,
                  "%s sp=%d: the plan at tp=%lld differs from tp=%lld", arch,
                  sp, (long long)tp, (long long)refs[i]);
    free(want);
    tpx_plan_destroy(ref);
  }
  free(got);
  tpx_plan_destroy(plan);
}

void ft_assert_selected_plugin(const tpx_registry *reg, const tpx_model *m,
                               int sp, int64_t tp, const char *family,
                               const char *golden, size_t n_heads,
                               const char *needle) {
  tpx_select_options opts = TPX_SELECT_OPTIONS_INIT;
  tpx_selection *sel = NULL;
  tpx_diag_list *diags = NULL;
  tpx_error err = {0};
  size_t i, heads = 0;
  int first = 1;
  opts.tp_size = tp;
  opts.sequence_parallel = sp;
  ck_assert_int_eq(tpx_diag_list_create(&diags, NULL), TPX_OK);
  if (tpx_select_plan(reg, m, &opts, &sel, diags, &err) != TPX_OK)
    ck_abort_msg("select sp=%d tp=%lld: %s", sp, (long long)tp, err.message);
  ck_assert_msg(tpx_selection_source(sel) == TPX_PLAN_SOURCE_PLUGIN,
                "sp=%d tp=%lld: the plugin's plan was not selected", sp,
                (long long)tp);
  for (i = 0; i < tpx_diag_count(diags); i++) {
    tpx_diag d;
    ck_assert_int_eq(tpx_diag_get(diags, i, &d, NULL), TPX_OK);
    ck_assert_msg(strcmp(d.code, "plugin-refused") != 0 &&
                      strcmp(d.code, "plugin-failed") != 0,
                  "sp=%d tp=%lld: %s: %s", sp, (long long)tp, d.code,
                  d.message);
    if (strcmp(d.code, "heads-not-divisible") != 0)
      continue;
    heads++;
    ck_assert_int_eq(d.level, TPX_DIAG_ERROR);
    if (first && needle != NULL)
      ck_assert_msg(strstr(d.message, needle) != NULL, "'%s' lacks '%s'",
                    d.message, needle);
    first = 0;
  }
  ck_assert_msg(heads == n_heads,
                "sp=%d tp=%lld: %zu heads-not-divisible diagnostics, want %zu",
                sp, (long long)tp, heads, n_heads);
  if (golden != NULL)
    ft_assert_golden(tpx_selection_plan(sel), family, golden);
  tpx_selection_destroy(sel);
  tpx_diag_list_destroy(diags);
}
