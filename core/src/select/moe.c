/* select/moe.c — expert parallelism at plan selection (docs/SEMANTICS.md
 * "Expert parallelism"): which architectures upstream serves with NeMo
 * Automodel 0.7.0's own MoE implementation (trait moe_custom), their
 * routed-expert parameters (trait expert_param), and what upstream refuses
 * for them, each refusal an error diagnostic carrying upstream's own
 * message:
 *  - tp > 1 at ep > 1 without a registered plan (the plugin's own, unless
 *    it names its function get_hf_tp_shard_plan...: the class's _tp_plan, or
 *    a custom / named one): "No safe tensor-parallel plan is registered
 *    ...";
 *  - tp > 1 on such a model (any ep): a plan key that targets experts or
 *    the router, or that matches no module (upstream's
 *    _validate_moe_tp_plan);
 *  - ep > 1 on a model that is not a custom MoE model ("MoE models must
 *    expose moe_config ...");
 *  - an expert count ep does not divide ("n_routed_experts E must be
 *    divisible by expert_parallel_degree ep").
 * As upstream raises the first of these and stops, only the first is
 * reported. The ep that does not divide the world is the mesh's refusal
 * (tpx_mesh_create_moe), not selection's.
 *
 * Not the placements (core/src/shard) and not trait parsing in general
 * (traits.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "select/select_internal.h"
#include "tpx/match.h"

static const char *bare(const char *arch) {
  const char *dot = arch ? strrchr(arch, '.') : NULL;
  return dot ? dot + 1 : (arch ? arch : "");
}

/* upstream's _is_unsafe_moe_tp_module_path: a path through the experts or
 * the router, or whose leaf is the whole MoE block. */
static int unsafe_path(const char *path) {
  static const char *const atoms[] = {
      "experts", "gate_and_up_projs",  "down_projs",
      "router",  "shared_expert_gate", "gate"};
  const char *a = path;
  const char *leaf = strrchr(path, '.');
  leaf = leaf ? leaf + 1 : path;
  if (strcmp(leaf, "mlp") == 0 || strcmp(leaf, "moe") == 0)
    return 1;
  while (*a) {
    const char *dot = strchr(a, '.');
    size_t n = dot ? (size_t)(dot - a) : strlen(a);
    for (size_t k = 0; k < sizeof atoms / sizeof atoms[0]; k++)
      if (strlen(atoms[k]) == n && memcmp(a, atoms[k], n) == 0)
        return 1;
    if (!dot)
      break;
    a = dot + 1;
  }
  return 0;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* keys[0..n) sorted (as Python's sorted) and joined with ", " into a new
 * string, or NULL out of memory. */
static char *joined_sorted(const char **keys, size_t n) {
  size_t len = 1;
  qsort(keys, n, sizeof *keys, cmp_str);
  for (size_t i = 0; i < n; i++) len += strlen(keys[i]) + 2;
  char *s = malloc(len), *w = s;
  if (!s)
    return NULL;
  *w = '\0';
  for (size_t i = 0; i < n; i++)
    w += sprintf(w, "%s%s", i ? ", " : "", keys[i]);
  return s;
}

typedef struct moe_ctx {
  const tpx_model *model;
  const char *arch;
  const tpx_select_options *o;
  tpx_selection *sel;
  tpx_diag_list *diags;
  tpx_error *err;
  int refused; /* an error was added: upstream stops at its first */
} moe_ctx;

static tpx_status refuse(moe_ctx *c, const char *code, const char *fix,
                         const char *message) {
  c->refused = 1;
  tpx__sel_trace(c->sel, "moe: refused (%s), as NeMo Automodel 0.7.0 refuses",
                 code);
  tpx_status s = tpx_diag_add(c->diags, TPX_DIAG_ERROR, code,
                              c->arch ? c->arch : "", fix, "%s", message);
  return s == TPX_OK ? TPX_OK
                     : tpx_error_set(c->err, s, "out of memory (diagnostic)");
}

/* upstream's _validate_moe_tp_plan on the selected plan: keys that target
 * experts or the router (by name or by a module they match), then keys
 * that match no module. */
static tpx_status validate_tp_plan(moe_ctx *c) {
  const tpx_plan *plan = c->sel->plan;
  size_t n = tpx_plan_size(plan), nu = 0, nm = 0;
  if (n == 0)
    return refuse(c, "moe-tp-plan-empty",
                  "give a non-empty plan, or run with tp 1",
                  "The custom MoE tensor-parallel plan must be a non-empty "
                  "dictionary.");
  tpx_match *m = NULL;
  tpx_status s = tpx_match_plan(plan, c->model, &m, NULL, c->err);
  if (s != TPX_OK)
    return s;
  const char **unsafe = calloc(n, sizeof *unsafe);
  const char **unmatched = calloc(n, sizeof *unmatched);
  if (!unsafe || !unmatched) {
    s = tpx_error_set(c->err, TPX_NO_MEMORY, "out of memory");
    goto done;
  }
  for (size_t i = 0; i < n; i++) {
    tpx_plan_entry e;
    if ((s = tpx_plan_get(plan, i, &e, c->err)) != TPX_OK)
      goto done;
    if (unsafe_path(e.module)) {
      unsafe[nu++] = e.module;
      continue;
    }
    size_t k = tpx_match_entry_count(m, i);
    if (k == 0) {
      unmatched[nm++] = e.module;
      continue;
    }
    for (size_t j = 0; j < k; j++) {
      const char *fqn =
          tpx_model_module_fqn(c->model, tpx_match_entry_module(m, i, j));
      if (fqn && unsafe_path(fqn)) {
        unsafe[nu++] = e.module;
        break;
      }
    }
  }
  const int bad_unsafe = nu > 0;
  if (nu || nm) {
    char *list =
        joined_sorted(bad_unsafe ? unsafe : unmatched, bad_unsafe ? nu : nm);
    size_t len = list ? strlen(list) + 512 : 0;
    char *msg = list ? malloc(len) : NULL;
    if (!msg) {
      free(list);
      s = tpx_error_set(c->err, TPX_NO_MEMORY, "out of memory");
      goto done;
    }
    if (bad_unsafe)
      snprintf(msg, len,
               "Tensor parallelism must not target routed-expert parameters "
               "or router outputs because they are EP-owned or require "
               "global expert logits. Remove these paths from tp_shard_plan: "
               "%s. Shared-expert leaf modules remain supported.",
               list);
    else
      snprintf(msg, len,
               "Custom MoE tensor-parallel plan patterns must each match at "
               "least one concrete module; unmatched paths: %s.",
               list);
    s = refuse(c, bad_unsafe ? "moe-tp-plan-unsafe" : "moe-tp-plan-unmatched",
               bad_unsafe ? "remove those keys from the plan (experts are "
                            "EP-owned), or run with tp 1"
                          : "give a plan whose keys all match modules of "
                            "this model (--plan), or run with tp 1",
               msg);
    free(msg);
    free(list);
  }
done:
  free(unsafe);
  free(unmatched);
  tpx_match_destroy(m);
  return s;
}

/* upstream's _resolve_moe_tp_plan at ep > 1: only a registered plan (the
 * serving plugin's, as PARALLELIZE_FUNCTIONS) or tp_shard_plan (a custom
 * or named plan) is accepted, never the Hugging Face or default plan. */
static tpx_status check_tp(moe_ctx *c) {
  const int64_t tp = c->o->tp_size, ep = c->o->ep;
  if (tp <= 1)
    return TPX_OK;
  if (ep > 1 && c->o->sequence_parallel)
    return refuse(c, "moe-sequence-parallel", "run without --sp",
                  "sequence_parallel=True is not supported by the custom MoE "
                  "TP path yet; use sequence_parallel=False so replicated "
                  "router/attention activations remain correct.");
  tpx_plan_source src = c->sel->source;
  /* A plugin that gives the class's own _tp_plan names it as upstream's
   * get_hf_tp_shard_plan (the name may go on, "get_hf_tp_shard_plan (the
   * class _tp_plan)"): upstream's dense path (ep 1) uses that plan, the
   * MoE path (ep > 1) does not count it as registered. */
  const char *fn = c->sel->function;
  int registered = src == TPX_PLAN_SOURCE_CUSTOM ||
                   (src == TPX_PLAN_SOURCE_PLUGIN &&
                    !(fn && strncmp(fn, "get_hf_tp_shard_plan", 20) == 0));
  if (ep > 1 && !registered) {
    char msg[640];
    snprintf(msg, sizeof msg,
             "No safe tensor-parallel plan is registered for custom MoE "
             "model '%s' at tp_size=%lld. Register a non-expert plan in "
             "PARALLELIZE_FUNCTIONS or pass tp_shard_plan explicitly; routed "
             "experts must remain EP-owned.",
             bare(c->arch), (long long)tp);
    return refuse(c, "moe-tp-no-plan",
                  "run with tp 1, or pass a plan that leaves the experts "
                  "alone (--plan)",
                  msg);
  }
  return validate_tp_plan(c);
}

/* dim 0 of the first parameter an expert pattern matches, or -1. */
static int64_t expert_count(const tpx_model *model, const tpx_selection *sel) {
  size_t np = tpx_model_num_params(model);
  for (size_t p = 0; p < np; p++) {
    tpx_param_info pi;
    if (tpx_model_param(model, (int64_t)p, &pi, NULL) != TPX_OK || pi.ndim < 1)
      continue;
    for (size_t k = 0; k < sel->experts.count; k++)
      if (tpx_match_fqn(sel->experts.items[k], pi.fqn))
        return pi.shape[0];
  }
  return -1;
}

tpx_status tpx__sel_moe(const tpx_registry *reg, const tpx_model *model,
                        const char *arch, const tpx_select_options *o,
                        tpx_selection *sel, tpx_diag_list *diags,
                        tpx_error *err) {
  sel->ep = o->ep > 1 ? o->ep : 1;
  sel->moe_custom = tpx__sel_moe_custom(reg, arch);
  if (sel->moe_custom && tpx__sel_expert_patterns(reg, arch, &sel->experts))
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  moe_ctx c = {model, arch, o, sel, diags, err, 0};
  tpx_status s = TPX_OK;
  if (!sel->moe_custom && sel->ep <= 1) {
    tpx__sel_trace(sel,
                   "moe: not applicable (no plugin declares '%s' a "
                   "custom MoE architecture; ep 1)",
                   arch ? arch : "(none)");
    return TPX_OK;
  }
  if (sel->moe_custom)
    tpx__sel_trace(sel,
                   "moe: '%s' is a custom MoE architecture (trait "
                   "moe_custom), %zu expert parameter pattern(s), ep=%lld",
                   bare(arch), sel->experts.count, (long long)sel->ep);
  if (sel->moe_custom)
    s = check_tp(&c);
  if (s != TPX_OK || c.refused || sel->ep <= 1)
    return s;
  if (!sel->moe_custom)
    return refuse(&c, "moe-config-missing",
                  "run with ep 1: only models upstream serves with its own "
                  "MoE implementation (a plugin's moe_custom trait) have "
                  "expert parallelism",
                  "MoE models must expose moe_config on the inner, text, or "
                  "top-level model.");
  int64_t e = expert_count(model, sel);
  if (e > 0 && e % sel->ep != 0) {
    char msg[160];
    snprintf(msg, sizeof msg,
             "n_routed_experts %lld must be divisible by "
             "expert_parallel_degree %lld",
             (long long)e, (long long)sel->ep);
    return refuse(&c, "experts-not-divisible",
                  "choose an ep that divides the number of routed experts",
                  msg);
  }
  if (e > 0)
    tpx__sel_trace(sel, "moe: %lld routed experts, %lld per ep rank",
                   (long long)e, (long long)(e / sel->ep));
  return TPX_OK;
}
