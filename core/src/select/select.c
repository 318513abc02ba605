/* select/select.c — plan selection (docs/SEMANTICS.md "Plan selection"):
 * custom plan > named plugin plan > the plugin's plan for the architecture
 * > the Hugging Face plan > the default base plan, then the post-processing
 * plugins declare (traits.c), with validate_tp_mesh first at tp > 1 for
 * every plan (NeMo Automodel 0.7.0), and the plugin's validate / FSDP
 * unit / fp32 / strategy capabilities. One function per numbered step;
 * tpx_select_plan runs them in order.
 *
 * Every step taken or skipped is written to the selection's trace, so
 * `tpx plan` can say why a plan was chosen. Problems go to the caller's
 * diagnostics; the call fails only when no plan can be produced at all.
 *
 * Not the registry (plugin/registry.c), not the selection's queries
 * (selection.c) and not plan application. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "model/config.h"
#include "model/expert_fold.h"
#include "model/family_view.h"
#include "select/select_internal.h"
#include "tpx/validate.h"

static int set_str(char **dst, const char *src) {
  free(*dst);
  *dst = src ? strdup(src) : NULL;
  return src && !*dst ? -1 : 0;
}

static int is_remote_code(json_t *root) {
  return root && json_object_get(root, "auto_map") != NULL;
}

/* The default base plan on a model with fused MoE experts (Mixtral,
 * Qwen3-MoE, ...): its dense-MLP keys resolve to nothing in an MoE layer,
 * which torch's parallelize_module only warns about, so they are made
 * optional (info, not an error) and one warning says what that leaves:
 * experts and router replicated over tp, FSDP sharding the expert dim. */
static tpx_status moe_default_fixup(tpx_selection *sel, const tpx_model *model,
                                    const char *arch, tpx_diag_list *diags,
                                    tpx_error *err) {
  static const char *const keys[] = {"model.layers.*.mlp.up_proj",
                                     "model.layers.*.mlp.gate_proj",
                                     "model.layers.*.mlp.down_proj"};
  if (tpx__expert_fold_note(model) == NULL)
    return TPX_OK;
  for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
    int64_t i = tpx_plan_find(sel->plan, keys[k]);
    if (i < 0)
      continue;
    tpx_plan_entry e;
    tpx_status s = tpx_plan_get(sel->plan, (size_t)i, &e, err);
    if (s == TPX_OK)
      s = tpx_plan_set(sel->plan, keys[k], &e.style, 1, err);
    if (s != TPX_OK)
      return s;
  }
  tpx__sel_trace(sel, "moe: the default plan's MLP keys are optional on fused "
                      "experts (torch warns that they cannot be resolved)");
  tpx_status s = tpx_diag_add(
      diags, TPX_DIAG_WARNING, "moe-experts-replicated", arch ? arch : "",
      "expected with the default plan: upstream has no expert-parallel plan "
      "for this class; budget the replicated experts (see the memory "
      "section) or use a plan with expert parallelism",
      "the default base plan's MLP keys match no module in the MoE layers "
      "(torch's parallelize_module warns and skips them): the fused experts "
      "and the router stay replicated over tp, FSDP shards the experts on "
      "dim 0 (the expert dim)");
  return s == TPX_OK ? TPX_OK : tpx_error_set(err, s, "out of memory");
}

/* Ask plugin `p` for a plan; fills sel on success. *refused tells why not. */
static tpx_status try_plugin(tpx_selection *sel, const tpx__plugin *p,
                             const tpx_model *model, const char *arch,
                             const char *plan_name, int sp, int64_t tp,
                             int *refused, tpx_error *err) {
  tpx_plan *plan = NULL;
  char *function = NULL;
  tpx_status s = tpx__plugin_get_plan(p, model, arch, plan_name, sp, tp, &plan,
                                      &function, refused, err);
  if (s != TPX_OK)
    return s;
  tpx_plan_destroy(sel->plan);
  sel->plan = plan;
  if (set_str(&sel->plugin_name, tpx__plugin_name(p)) ||
      set_str(&sel->plugin_path, tpx__plugin_path(p))) {
    free(function);
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  }
  free(sel->function);
  sel->function = function;
  if (!sel->function &&
      set_str(&sel->function, plan_name ? plan_name : tpx__plugin_name(p)))
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  return TPX_OK;
}

/* A diagnostic that could not be added (out of memory) fails selection. */
static tpx_status diag_failed(tpx_status s, tpx_error *err) {
  return tpx_error_set(err, s, "out of memory adding a diagnostic");
}

/* The HF step; TPX_OK with sel->plan set, or TPX_NOT_FOUND / TPX_UNSUPPORTED
 * with `why` filled (the plan is then unusable and selection goes on). */
static tpx_status try_hf(tpx_selection *sel, const tpx_model *model,
                         const char *arch, const char *prefix,
                         tpx__hf_mode mode, int sp, int64_t tp,
                         tpx_diag_list *diags, char *why, size_t why_size,
                         tpx_error *err) {
  char what[512];
  tpx_plan *plan = NULL;
  tpx_error herr = {0};
  tpx_status s = tpx__hf_plan_for_model(model, arch, prefix, mode, &plan, what,
                                        sizeof what, diags, &herr);
  if (s == TPX_NO_MEMORY)
    return tpx_error_set(err, s, "%s", herr.message);
  if (s != TPX_OK) {
    snprintf(why, why_size, "%s", herr.message);
    if (s == TPX_UNSUPPORTED && mode == TPX__HF_AUTOMODEL) {
      tpx_status d = tpx_diag_add(
          diags, TPX_DIAG_WARNING, "hf-style-unsupported", arch ? arch : "",
          "expected with transformers 5: NeMo Automodel 0.7.0 falls back to "
          "its default base plan here too; `--plan hf` applies the Hugging "
          "Face plan with transformers' styles translated, or provide a "
          "custom plan (--plan FILE) or a plugin",
          "the Hugging Face plan (%s) cannot be used, so the default base "
          "plan is (as upstream's get_hf_tp_shard_plan raises \"Unknown "
          "parallel style\" and it falls back): %s",
          what, herr.message);
      if (d != TPX_OK)
        return diag_failed(d, err);
    }
    tpx__sel_trace(sel, "hf: not used: %s", herr.message);
    return s == TPX_UNSUPPORTED ? TPX_UNSUPPORTED : TPX_NOT_FOUND;
  }
  if (tpx_plan_size(plan) == 0) {
    tpx_plan_destroy(plan);
    snprintf(why, why_size, "the Hugging Face plan (%.400s) is empty", what);
    tpx__sel_trace(sel, "hf: not used: %s", why);
    return TPX_NOT_FOUND;
  }
  tpx_plan_destroy(sel->plan);
  sel->plan = plan;
  sel->source = TPX_PLAN_SOURCE_HF;
  if (set_str(&sel->function, "get_hf_tp_shard_plan"))
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  tpx__sel_trace(sel, "hf: used %s (%zu entries)", what, tpx_plan_size(plan));
  if (sp) {
    /* Upstream raises only where it builds the plan, at tp > 1; at tp 1 no
     * plan is applied (docs/SEMANTICS.md "Plan selection"). */
    tpx_status d = tpx_diag_add(
        diags, tp > 1 ? TPX_DIAG_ERROR : TPX_DIAG_INFO, "sp-with-hf-plan",
        arch ? arch : "",
        "turn sequence parallelism off, or use a plugin or custom plan that "
        "supports it",
        "%ssequence parallelism is not supported with a Hugging Face tp plan "
        "(%s); the plan is shown without sequence-parallel styles",
        tp > 1 ? ""
               : "not applied at tp 1 (upstream applies no plan when "
                 "tp is 1; this error would matter at tp > 1): ",
        what);
    if (d != TPX_OK)
      return diag_failed(d, err);
    tpx__sel_trace(sel,
                   "hf: sequence parallelism requested, which the HF "
                   "plan does not support (%s sp-with-hf-plan)",
                   tp > 1 ? "error" : "at tp 1 only information:");
  }
  return TPX_OK;
}

/* A capability call `what` that failed with status `s` (the plugin's words
 * in cerr): out of memory stops the selection; anything else becomes a
 * plugin-failed warning and TPX_OK. */
static tpx_status plugin_failed(tpx_selection *sel, tpx_diag_list *diags,
                                const tpx__plugin *p, const char *what,
                                tpx_status s, const tpx_error *cerr,
                                tpx_error *err) {
  if (s == TPX_NO_MEMORY)
    return tpx_error_set(err, s, "%s", cerr->message);
  if (tpx_diag_add(diags, TPX_DIAG_WARNING, "plugin-failed",
                   tpx__plugin_name(p), NULL, "%s", cerr->message) != TPX_OK)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  tpx__sel_trace(sel, "plugin '%s': %s failed: %s", tpx__plugin_name(p), what,
                 cerr->message);
  return TPX_OK;
}

/* The plugin's capabilities, collected onto the selection. Failures are
 * warnings: the plan is still good. */
static tpx_status plugin_capabilities(tpx_selection *sel, const tpx__plugin *p,
                                      const tpx_model *model, const char *arch,
                                      const tpx_select_options *o,
                                      tpx_diag_list *diags, tpx_error *err) {
  tpx_error cerr = {0};
  tpx_status s;
  tpx_plugin_desc d;
  tpx__plugin_desc_of(p, &d);
  if (d.has_validate) {
    size_t before = tpx_diag_count(diags);
    s = tpx__plugin_validate(p, model, arch, o->plan_name, o->sequence_parallel,
                             o->tp_size, diags, &cerr);
    if (s != TPX_OK) {
      s = plugin_failed(sel, diags, p, "validate", s, &cerr, err);
      if (s != TPX_OK)
        return s;
    } else {
      tpx__sel_trace(sel, "plugin '%s': validate ran (%zu diagnostics)",
                     tpx__plugin_name(p), tpx_diag_count(diags) - before);
    }
  }
  const tpx__plugin_op ops[3] = {TPX__OP_FSDP_UNITS, TPX__OP_FP32,
                                 TPX__OP_STRATEGY};
  const int has[3] = {d.has_fsdp_units, d.has_fp32_params,
                      tpx__plugin_has_strategy(p)};
  tpx__strvec *dst[3] = {&sel->units, &sel->fp32, &sel->strategy};
  const char *what[3] = {"FSDP units", "fp32 parameters",
                         "strategy properties"};
  for (int k = 0; k < 3; k++) {
    if (!has[k])
      continue;
    tpx__strvec v;
    tpx_error_clear(&cerr);
    s = tpx__plugin_strings(p, ops[k], model, arch, &v, &cerr);
    if (s != TPX_OK) {
      s = plugin_failed(sel, diags, p, what[k], s, &cerr, err);
      if (s != TPX_OK)
        return s;
      continue;
    }
    tpx__strvec_free(dst[k]);
    *dst[k] = v;
    tpx__sel_trace(sel, "plugin '%s': %zu %s", tpx__plugin_name(p), v.count,
                   what[k]);
  }
  return TPX_OK;
}

/* What the steps share. */
typedef struct step_ctx {
  const tpx_registry *reg;
  const tpx_model *model;
  tpx_select_options o;
  tpx_selection *sel;
  tpx_diag_list *diags;
  tpx_error *err;
  const char *arch;    /* config.architectures[0], or NULL */
  const char *matched; /* the registered name that matched arch */
  const tpx__plugin *arch_plugin;
  const tpx__plugin *cap_plugin; /* whose capabilities the selection gets */
  const char *cap_arch;
  int have_plan;
  int plugin_failed;  /* the plugin's get_plan failed or refused */
  int plugin_refused; /* ... on purpose (TPX_PLUGIN_REFUSED) */
  char plugin_why[TPX_ERROR_MESSAGE_SIZE];
  char hf_why[TPX_ERROR_MESSAGE_SIZE];
  /* The class's family facts: the model's own, else what the loaded
   * plugins declare (model/family_view.h). */
  tpx__family reg_family;
  const tpx__family *family;
  const char *hf_prefix; /* the HF tp plan's inner model */
  char hf_prefix_buf[128];
  int validate_skipped; /* the strategy has its own flow */
  int validate_failed;  /* validate_tp_mesh reported an error */
} step_ctx;

static tpx_status oom(step_ctx *c) {
  return tpx_error_set(c->err, TPX_NO_MEMORY, "out of memory");
}

/* The options checked and copied whole (a shorter struct_size keeps the
 * defaults of the fields it lacks). */
static tpx_status check_options(const tpx_select_options *opts,
                                tpx_select_options *o, tpx_error *err) {
  if (opts->struct_size < sizeof(size_t) + sizeof(int64_t))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_select_plan: opts->struct_size=%zu is too small "
                         "(use TPX_SELECT_OPTIONS_INIT)",
                         opts->struct_size);
  tpx_select_options def = TPX_SELECT_OPTIONS_INIT;
  *o = def;
  memcpy(o, opts,
         opts->struct_size < sizeof *o ? opts->struct_size : sizeof *o);
  o->struct_size = sizeof *o;
  if (o->tp_size < 1)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tp_size=%lld; it must be >= 1",
                         (long long)o->tp_size);
  if (o->ep < 0)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "ep=%lld; it must be >= 1",
                         (long long)o->ep);
  if (o->ep == 0)
    o->ep = 1;
  if (o->sequence_parallel != 0 && o->sequence_parallel != 1)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "sequence_parallel=%d; it must be 0 or 1",
                         o->sequence_parallel);
  return TPX_OK;
}

/* 0. A strategy with its own flow ignores tp_shard_plan: the plugin's plan
 * stands (the plugin declares it, docs/PLUGIN_ABI.md "Traits"). */
static tpx_status step_own_flow(step_ctx *c) {
  if (!(c->o.custom || c->o.plan_name) || !tpx__sel_own_flow(c->reg, c->arch))
    return TPX_OK;
  tpx_status s = tpx_diag_add(
      c->diags, TPX_DIAG_WARNING, "custom-plan-ignored", c->arch,
      "drop the custom / named plan; this strategy always applies its own",
      "the %s strategy ignores tp_shard_plan: the %s plan given is not "
      "applied",
      c->arch, c->o.custom ? "custom" : "named");
  if (s != TPX_OK)
    return oom(c);
  tpx__sel_trace(c->sel,
                 "custom/named plan: ignored (the %s strategy "
                 "ignores tp_shard_plan)",
                 c->arch);
  c->o.custom = NULL;
  c->o.plan_name = NULL;
  return TPX_OK;
}

/* 1. custom plan */
static tpx_status step_custom(step_ctx *c) {
  tpx_selection *sel = c->sel;
  if (!c->o.custom) {
    tpx__sel_trace(sel, "custom: none given");
    return TPX_OK;
  }
  tpx_status s = tpx_plan_clone(c->o.custom, &sel->plan, c->err);
  if (s != TPX_OK)
    return s;
  sel->source = TPX_PLAN_SOURCE_CUSTOM;
  if (set_str(&sel->function, "custom"))
    return oom(c);
  tpx__sel_trace(sel,
                 "custom: used the given plan (%zu entries); it is not "
                 "validated against the architecture",
                 tpx_plan_size(c->o.custom));
  if (c->o.plan_name)
    tpx__sel_trace(sel, "named plan '%s': skipped (a custom plan wins)",
                   c->o.plan_name);
  c->have_plan = 1;
  return TPX_OK;
}

/* 2a. the named plan "hf": the Hugging Face plan with transformers' own
 * styles translated, whatever upstream would choose (which is said). */
static tpx_status step_named_hf(step_ctx *c) {
  char why[TPX_ERROR_MESSAGE_SIZE];
  tpx_status s = try_hf(c->sel, c->model, c->arch, c->hf_prefix,
                        TPX__HF_TRANSFORMERS, c->o.sequence_parallel,
                        c->o.tp_size, c->diags, why, sizeof why, c->err);
  if (s == TPX_NOT_FOUND || s == TPX_UNSUPPORTED)
    return tpx_error_set(c->err, s, "--plan hf: %s", why);
  if (s != TPX_OK)
    return s;
  c->sel->source = TPX_PLAN_SOURCE_CUSTOM;
  c->have_plan = 1;
  /* What upstream would choose instead: the plugin's (Automodel's
   * optimized) plan, else the HF plan only if Automodel translates it. */
  tpx_plan *probe = NULL;
  char what[512];
  tpx_error perr = {0};
  s = c->arch_plugin ? TPX_OK
                     : tpx__hf_plan_for_model(c->model, c->arch, c->hf_prefix,
                                              TPX__HF_AUTOMODEL, &probe, what,
                                              sizeof what, NULL, &perr);
  tpx_plan_destroy(probe);
  if (s == TPX_NO_MEMORY)
    return tpx_error_set(c->err, s, "%s", perr.message);
  if (s == TPX_OK && !c->arch_plugin)
    return TPX_OK;
  s = tpx_diag_add(
      c->diags, TPX_DIAG_INFO, "upstream-plan-differs", c->arch ? c->arch : "",
      "drop --plan hf to plan what upstream plans",
      "--plan hf applies the Hugging Face plan; NeMo Automodel 0.7.0 with "
      "transformers 5.25 would use %s%s%s",
      c->arch_plugin ? "the plugin's plan (its optimized plan for the class)"
                     : "its default base plan: ",
      c->arch_plugin ? "" : perr.message, "");
  if (s != TPX_OK)
    return oom(c);
  tpx__sel_trace(c->sel, "named plan 'hf': differs from upstream's choice "
                         "(upstream-plan-differs)");
  return TPX_OK;
}

/* 2. named plan: upstream raises when it fails, so there is no fallback */
static tpx_status step_named(step_ctx *c) {
  tpx_selection *sel = c->sel;
  if (c->have_plan)
    return TPX_OK;
  if (!c->o.plan_name) {
    tpx__sel_trace(sel, "named plan: none requested");
    return TPX_OK;
  }
  if (strcmp(c->o.plan_name, "hf") == 0)
    return step_named_hf(c);
  int64_t ni = tpx__registry_find_plan_name(c->reg, c->o.plan_name);
  if (ni < 0)
    return tpx_error_set(c->err, TPX_NOT_FOUND,
                         "named plan '%s' is not served by any loaded plugin "
                         "(see `tpx plugins` for the named plans)",
                         c->o.plan_name);
  const tpx__plugin *np = tpx__registry_at(c->reg, (size_t)ni);
  tpx_plugin_desc nd;
  tpx__plugin_desc_of(np, &nd);
  const char *narch = np == c->arch_plugin && c->matched ? c->matched
                      : c->arch                          ? c->arch
                                                         : nd.architectures[0];
  int refused = 0;
  tpx_status s =
      try_plugin(sel, np, c->model, narch, c->o.plan_name,
                 c->o.sequence_parallel, c->o.tp_size, &refused, c->err);
  if (s != TPX_OK)
    return s;
  sel->source = TPX_PLAN_SOURCE_CUSTOM;
  tpx__sel_trace(sel,
                 "named plan '%s': used, from plugin '%s' (%s), %zu "
                 "entries",
                 c->o.plan_name, tpx__plugin_name(np), tpx__plugin_path(np),
                 tpx_plan_size(sel->plan));
  if (!c->cap_plugin) {
    c->cap_plugin = np;
    c->cap_arch = narch;
  }
  c->have_plan = 1;
  return TPX_OK;
}

/* 3. the plugin for the architecture; a refusal or failure falls back to
 * the HF plan, as upstream does */
static tpx_status step_plugin(step_ctx *c) {
  tpx_selection *sel = c->sel;
  if (c->have_plan) {
    tpx__sel_trace(sel,
                   "plugin: not asked for the architecture's plan (the "
                   "%s plan was chosen)",
                   c->o.custom ? "custom" : "named");
    return TPX_OK;
  }
  if (!c->arch) {
    tpx__sel_trace(sel, "plugin: skipped (the config has no architectures)");
    return TPX_OK;
  }
  const tpx__plugin *p = c->arch_plugin;
  if (!p) {
    tpx__sel_trace(sel, "plugin: none of the %zu loaded plugins serves '%s'",
                   c->reg ? tpx_registry_num_plugins(c->reg) : (size_t)0,
                   c->arch);
    return TPX_OK;
  }
  tpx_plugin_desc pd;
  tpx__plugin_desc_of(p, &pd);
  int refused = 0;
  tpx_error perr = {0};
  tpx_status s =
      try_plugin(sel, p, c->model, c->matched, NULL, c->o.sequence_parallel,
                 c->o.tp_size, &refused, &perr);
  if (s == TPX_NO_MEMORY)
    return tpx_error_set(c->err, s, "%s", perr.message);
  if (s == TPX_OK) {
    sel->source = TPX_PLAN_SOURCE_PLUGIN;
    tpx__sel_trace(sel,
                   "plugin: used '%s' %s (%s) for '%s' (function %s, "
                   "%zu entries)",
                   pd.name, pd.version, pd.path, c->matched, sel->function,
                   tpx_plan_size(sel->plan));
    c->have_plan = 1;
    return TPX_OK;
  }
  /* The diagnostic waits for the fallback's outcome (step_fallback). */
  c->plugin_failed = 1;
  c->plugin_refused = refused;
  snprintf(c->plugin_why, sizeof c->plugin_why, "%s", perr.message);
  tpx__sel_trace(sel,
                 "plugin: '%s' %s: %s; falling back to the HF plan, as "
                 "upstream does",
                 tpx__plugin_name(p), refused ? "refused" : "failed",
                 perr.message);
  return TPX_OK;
}

/* 4. the Hugging Face plan */
static tpx_status step_hf(step_ctx *c) {
  if (c->have_plan) {
    tpx__sel_trace(c->sel, "hf: not needed (the %s plan was chosen)",
                   tpx_plan_source_name(c->sel->source));
    return TPX_OK;
  }
  if (tpx__sel_moe_custom(c->reg, c->arch)) {
    /* NeMo Automodel's own MoE class is not transformers': the config's
     * (or model_type's) Hugging Face plan is not its plan. */
    tpx__sel_trace(c->sel,
                   "hf: skipped ('%s' is served by upstream's own MoE "
                   "implementation, trait moe_custom: the config's "
                   "Hugging Face plan is not that class's)",
                   c->arch);
    snprintf(c->hf_why, sizeof c->hf_why,
             "a custom MoE architecture has no Hugging Face plan");
    return TPX_OK;
  }
  tpx_status s = try_hf(c->sel, c->model, c->arch, c->hf_prefix,
                        TPX__HF_AUTOMODEL, c->o.sequence_parallel, c->o.tp_size,
                        c->diags, c->hf_why, sizeof c->hf_why, c->err);
  if (s == TPX_OK)
    c->have_plan = 1;
  else if (s != TPX_NOT_FOUND && s != TPX_UNSUPPORTED)
    return s;
  return TPX_OK;
}

/* 5a. the default plan at tp > 1 is a warning, or an error for custom code
 * (auto_map) that torch's redistribute cannot run */
static tpx_status default_plan_diag(step_ctx *c) {
  const char *arch = c->arch ? c->arch : "(unknown class)";
  json_t *root = tpx__model_config(c->model);
  tpx_status s;
  if (c->o.tp_size <= 1)
    return TPX_OK;
  if (is_remote_code(root)) {
    s = tpx_diag_add(
        c->diags, TPX_DIAG_ERROR, "remote-code-no-plan", c->arch ? c->arch : "",
        "1) install a tpx plugin serving this architecture (TPX_PLUGIN_PATH); "
        "2) give the config a base_model_tp_plan with recognised styles "
        "(colwise, rowwise, colwise_rep, rowwise_rep); 3) pass a custom "
        "plan (--plan FILE or a named plan); or run with tp=1",
        "'%s' is custom code (config has auto_map) with %s and no usable "
        "Hugging Face tp plan (%s); the default base plan would create "
        "DTensor placements without shard_order metadata, which trips an "
        "internal assert in torch's redistribute",
        arch, c->plugin_failed ? "a failing plugin" : "no plugin", c->hf_why);
    if (s != TPX_OK)
      return oom(c);
    tpx__sel_trace(c->sel,
                   "default: custom code (auto_map) at tp=%lld with "
                   "no plugin and no HF plan is an error "
                   "(remote-code-no-plan); the default plan is shown for "
                   "reference",
                   (long long)c->o.tp_size);
    return TPX_OK;
  }
  s = tpx_diag_add(c->diags, TPX_DIAG_WARNING, "default-plan-fallback",
                   c->arch ? c->arch : "",
                   "install a plugin for this architecture or pass a custom "
                   "plan",
                   "no plugin or Hugging Face plan for '%s'; using the "
                   "generic default base plan, whose keys may not match "
                   "this model",
                   arch);
  return s == TPX_OK ? TPX_OK : oom(c);
}

/* 5. the default base plan */
static tpx_status step_default(step_ctx *c) {
  tpx_selection *sel = c->sel;
  const int sp = c->o.sequence_parallel;
  if (c->have_plan) {
    tpx__sel_trace(sel, "default: not needed");
    return TPX_OK;
  }
  tpx_status s = default_plan_diag(c);
  if (s != TPX_OK)
    return s;
  s = tpx__default_base_plan(sp, &sel->plan, c->err);
  if (s != TPX_OK)
    return s;
  sel->source = TPX_PLAN_SOURCE_DEFAULT;
  if (set_str(&sel->function, "default_base_plan"))
    return oom(c);
  tpx__sel_trace(sel, "default: used the default base plan%s (%zu entries)",
                 sp ? " with sequence-parallel overrides" : "",
                 tpx_plan_size(sel->plan));
  return moe_default_fixup(sel, c->model, c->arch, c->diags, c->err);
}

/* 5b. The plugin's failure or refusal (step 3), once the plan that
 * replaced it is known. A refusal is the plugin declining on purpose (its
 * message says why), as upstream's plan function raises or is absent:
 * nothing to fix, a warning. A failure (an error status, a crash, a hang,
 * a bad plan) is an error: the plan asked for is not the one shown. */
static tpx_status step_fallback(step_ctx *c) {
  if (!c->plugin_failed)
    return TPX_OK;
  const tpx_selection *sel = c->sel;
  const int r = c->plugin_refused;
  /* A custom MoE architecture (trait moe_custom) has no registered plan
   * upstream either: declining is the expected answer, an info. */
  const tpx_diag_level lv = !r ? TPX_DIAG_ERROR
                            : tpx__sel_moe_custom(c->reg, c->arch)
                                ? TPX_DIAG_INFO
                                : TPX_DIAG_WARNING;
  tpx_status s = tpx_diag_add(
      c->diags, lv, r ? "plugin-refused" : "plugin-failed",
      tpx__plugin_path(c->arch_plugin),
      r ? "nothing to fix in the plugin: it declines this request on "
          "purpose; tpx goes on as upstream does (the Hugging Face plan, "
          "else the default plan); pass --plan to choose a plan yourself"
        : "fix or remove the plugin (`tpx check-plugin` tells more), or "
          "pass a plan yourself (--plan)",
      "%s; fell back to the %s plan%s%s%s", c->plugin_why,
      tpx_plan_source_name(sel->source), sel->function ? " (" : "",
      sel->function ? sel->function : "", sel->function ? ")" : "");
  return s == TPX_OK ? TPX_OK : oom(c);
}

/* 0b. validate_tp_mesh: NeMo Automodel 0.7.0 runs it at tp > 1 before it
 * chooses the plan, whatever the plan will be (custom, named, optimized,
 * HF or default; docs/SEMANTICS.md "Plan selection"); only strategies with
 * their own flow skip it. Its reads of per-layer head attributes come first
 * (per_layer.c): upstream raises there and never reaches the head counts. */
static tpx_status step_validate(step_ctx *c) {
  tpx_selection *sel = c->sel;
  const int64_t tp = c->o.tp_size;
  if (tp <= 1) {
    tpx__sel_trace(sel, "validate_tp_mesh: skipped (tp=1)");
    return TPX_OK;
  }
  if (tpx__sel_own_flow(c->reg, c->arch)) {
    tpx__sel_trace(sel,
                   "validate_tp_mesh: skipped (the %s strategy does "
                   "not run it)",
                   c->arch);
    c->validate_skipped = 1;
    return TPX_OK;
  }
  size_t before = tpx_diag_count(c->diags);
  size_t errors = tpx_diag_count_at_least(c->diags, TPX_DIAG_ERROR);
  tpx_status s = tpx__sel_per_layer(c->model, 0, c->diags, c->err);
  if (s != TPX_OK)
    return s;
  if (tpx_diag_count_at_least(c->diags, TPX_DIAG_ERROR) > errors) {
    tpx__sel_trace(sel, "validate_tp_mesh: a per-layer head attribute read "
                        "globally (see diagnostics); upstream stops there");
    c->validate_failed = 1;
    return TPX_OK;
  }
  s = tpx__validate_tp_mesh(c->model, c->family, tp, c->diags, c->err);
  if (s != TPX_OK)
    return s;
  size_t n = tpx_diag_count(c->diags) - before;
  c->validate_failed =
      tpx_diag_count_at_least(c->diags, TPX_DIAG_ERROR) > errors;
  if (n)
    tpx__sel_trace(sel,
                   "validate_tp_mesh: %zu problem(s) for tp=%lld (see "
                   "diagnostics; run before the plan is chosen, for every "
                   "plan)",
                   n, (long long)tp);
  else
    tpx__sel_trace(sel,
                   "validate_tp_mesh: head counts fit tp=%lld (run before "
                   "the plan is chosen, for every plan)",
                   (long long)tp);
  return TPX_OK;
}

/* 6. After a head-sharded plan is applied, Automodel 0.7.0 updates the
 * attention head counts, reading more per-layer attributes (head_dim);
 * reached only when validate_tp_mesh passed (per_layer.c). */
static tpx_status step_head_update(step_ctx *c) {
  if (c->o.tp_size <= 1 || c->validate_skipped || c->validate_failed ||
      !tpx_plan_is_head_sharded(c->sel->plan))
    return TPX_OK;
  return tpx__sel_per_layer(c->model, 1, c->diags, c->err);
}

tpx_status tpx_select_plan(const tpx_registry *reg, const tpx_model *model,
                           const tpx_select_options *opts, tpx_selection **out,
                           tpx_diag_list *diags, tpx_error *err) {
  if (out)
    *out = NULL;
  if (!model || !opts || !out || !diags)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_select_plan: model, opts, out or diags is NULL");
  step_ctx c;
  memset(&c, 0, sizeof c);
  tpx_status s = check_options(opts, &c.o, err);
  if (s != TPX_OK)
    return s;
  c.sel = calloc(1, sizeof *c.sel);
  if (!c.sel)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  c.sel->tp_size = c.o.tp_size;
  c.reg = reg;
  c.model = model;
  c.diags = diags;
  c.err = err;
  c.arch = tpx_model_architecture(model, 0);
  tpx__sel_trace(c.sel,
                 "request: architecture %s, tp=%lld, ep=%lld, "
                 "sequence_parallel=%s",
                 c.arch ? c.arch : "(none)", (long long)c.o.tp_size,
                 (long long)c.o.ep, c.o.sequence_parallel ? "on" : "off");
  int64_t ai = reg ? tpx__registry_find_arch(reg, c.arch, &c.matched) : -1;
  c.arch_plugin = ai >= 0 ? tpx__registry_at(reg, (size_t)ai) : NULL;
  c.cap_plugin = c.arch_plugin;
  c.cap_arch = c.matched;
  s = tpx__registry_family(reg, c.arch, &c.reg_family, err);
  c.family = tpx__family_pick(tpx__model_family(model), &c.reg_family);
  c.hf_prefix = tpx__hf_prefix_for_model(
      model, c.family->hf_prefix, c.hf_prefix_buf, sizeof c.hf_prefix_buf);

  tpx_status (*const steps[])(step_ctx *) = {
      step_own_flow, step_validate, step_custom,  step_named,
      step_plugin,   step_hf,       step_default, step_fallback};
  for (size_t i = 0; s == TPX_OK && i < sizeof steps / sizeof steps[0]; i++)
    s = steps[i](&c);
  /* Post-processing, for every source. */
  if (s == TPX_OK)
    s = tpx__sel_lm_head_fixup(reg, model, c.sel, err);
  if (s == TPX_OK)
    s = tpx__sel_moe(reg, model, c.arch, &c.o, c.sel, diags, err);
  if (s == TPX_OK)
    s = step_head_update(&c);
  if (s == TPX_OK && c.cap_plugin)
    s = plugin_capabilities(c.sel, c.cap_plugin, model, c.cap_arch, &c.o, diags,
                            err);
  tpx__family_free(&c.reg_family);
  if (s != TPX_OK) {
    tpx_selection_destroy(c.sel);
    return s;
  }
  tpx_selection *sel = c.sel;
  if (sel->source == TPX_PLAN_SOURCE_PLUGIN &&
      tpx__sel_tp_grad_sync(c.arch_plugin, c.arch)) {
    sel->tp_grad_sync = 1;
    tpx__sel_trace(sel,
                   "plugin '%s': its strategy sums over tp the partial "
                   "gradients of replicated parameters (trait tp_grad_sync)",
                   tpx__plugin_name(c.arch_plugin));
  }
  tpx__sel_trace(sel, "selected: %s plan%s%s (%zu entries)",
                 tpx_plan_source_name(sel->source),
                 sel->function ? ", function " : "",
                 sel->function ? sel->function : "", tpx_plan_size(sel->plan));
  *out = sel;
  return TPX_OK;
}
