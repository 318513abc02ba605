/* plugin/select.c — plan selection (spec/plans.md §4.1, §4.2, §4.5): custom
 * plan > named plugin plan > the plugin's plan for the architecture > the
 * Hugging Face plan > the default base plan, then the Nemotron-Flash lm_head
 * post-processing, validate_tp_mesh when the plan shards attention heads
 * (NeMo Automodel 0.7.0), and the plugin's validate / FSDP-unit / fp32
 * capabilities.
 *
 * Every step taken or skipped is written to the selection's trace, so
 * `tpx plan` can say why a plan was chosen. Problems go to the caller's
 * diagnostics; the call fails only when no plan can be produced at all.
 *
 * Not the registry (registry.c) and not plan application. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "model/config.h"
#include "model/expert_fold.h"
#include "plugin/plugin_internal.h"
#include "tpx/validate.h"

struct tpx_selection {
  tpx_plan *plan;
  tpx_plan_source source;
  char *plugin_name, *plugin_path, *function;
  tpx__strvec trace;
  tpx__strvec fp32;
  tpx__strvec units; /* ints: reshard_after_forward, -1 = tpx's rule */
  tpx__strvec strategy; /* "key=value" */
};

const char *tpx_plan_source_name(tpx_plan_source source) {
  switch (source) {
  case TPX_PLAN_SOURCE_CUSTOM: return "custom";
  case TPX_PLAN_SOURCE_PLUGIN: return "plugin";
  case TPX_PLAN_SOURCE_HF: return "hf";
  case TPX_PLAN_SOURCE_DEFAULT: return "default";
  }
  return "unknown";
}

void tpx_selection_destroy(tpx_selection *sel) {
  if (!sel)
    return;
  tpx_plan_destroy(sel->plan);
  free(sel->plugin_name);
  free(sel->plugin_path);
  free(sel->function);
  tpx__strvec_free(&sel->trace);
  tpx__strvec_free(&sel->fp32);
  tpx__strvec_free(&sel->units);
  tpx__strvec_free(&sel->strategy);
  free(sel);
}

static void trace(tpx_selection *sel, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void trace(tpx_selection *sel, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  (void)tpx__strvec_push(&sel->trace, buf, 0); /* a lost line is harmless */
}

static int set_str(char **dst, const char *src) {
  free(*dst);
  *dst = src ? strdup(src) : NULL;
  return src && !*dst ? -1 : 0;
}

static int is_remote_code(json_t *root) {
  return root && json_object_get(root, "auto_map") != NULL;
}

/* plans.md §4.1 _is_nemotron_flash_config. */
static int is_nemotron_flash(const tpx_model *model, json_t *root) {
  json_t *mt = root ? json_object_get(root, "model_type") : NULL;
  if (mt && json_is_string(mt) &&
      strcmp(json_string_value(mt), "nemotron_flash") == 0)
    return 1;
  for (size_t i = 0; i < tpx_model_num_architectures(model); i++)
    if (strcmp(tpx_model_architecture(model, i), "NemotronFlashForCausalLM") ==
        0)
      return 1;
  json_t *np = root ? json_object_get(root, "_name_or_path") : NULL;
  if (np && json_is_string(np)) {
    const char *s = json_string_value(np);
    size_t n = strlen(s);
    char *low = malloc(n + 1);
    if (low) {
      for (size_t i = 0; i <= n; i++)
        low[i] = (char)tolower((unsigned char)s[i]);
      int hit = strstr(low, "nemotron-flash") != NULL;
      free(low);
      if (hit)
        return 1;
    }
  }
  return 0;
}

static int outputs_shard(const tpx_style *st) {
  for (int32_t i = 0; i < st->output_layouts.count; i++)
    if (!st->output_layouts.is_none[i] &&
        (st->output_layouts.items[i].kind == TPX_SHARD ||
         st->output_layouts.items[i].kind == TPX_STRIDED_SHARD))
      return 1;
  return 0;
}

static tpx_status nemotron_flash_fixup(tpx_selection *sel, tpx_error *err) {
  static const char *const keys[] = {"lm_head", "language_model.lm_head"};
  for (size_t k = 0; k < 2; k++) {
    int64_t i = tpx_plan_find(sel->plan, keys[k]);
    if (i < 0)
      continue;
    tpx_plan_entry e;
    tpx_status s = tpx_plan_get(sel->plan, (size_t)i, &e, err);
    if (s != TPX_OK)
      return s;
    if (outputs_shard(&e.style)) {
      trace(sel, "nemotron-flash: key '%s' kept (its output is sharded)",
            keys[k]);
      continue;
    }
    s = tpx_plan_remove(sel->plan, keys[k], err);
    if (s != TPX_OK)
      return s;
    trace(sel, "nemotron-flash: key '%s' removed (its output is not "
          "sharded; the model's own head computes the logits)", keys[k]);
  }
  return TPX_OK;
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
  trace(sel, "moe: the default plan's MLP keys are optional on fused "
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
  if (set_str(&sel->plugin_name, p->name) ||
      set_str(&sel->plugin_path, p->path)) {
    free(function);
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  }
  free(sel->function);
  sel->function = function;
  if (!sel->function && set_str(&sel->function, plan_name ? plan_name
                                                          : p->name))
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
                         const char *arch, int sp, tpx_diag_list *diags,
                         char *why, size_t why_size, tpx_error *err) {
  char what[256];
  tpx_plan *plan = NULL;
  tpx_error herr = {0};
  tpx_status s = tpx__hf_plan_for_model(model, arch, &plan, what, sizeof what,
                                        diags, &herr);
  if (s == TPX_NO_MEMORY)
    return tpx_error_set(err, s, "%s", herr.message);
  if (s != TPX_OK) {
    snprintf(why, why_size, "%s", herr.message);
    if (s == TPX_UNSUPPORTED) {
      tpx_status d = tpx_diag_add(
          diags, TPX_DIAG_WARNING, "hf-style-unsupported",
          arch ? arch : "", "provide a custom plan (--plan FILE) or a plugin",
          "the Hugging Face plan (%s) cannot be used: %s", what,
          herr.message);
      if (d != TPX_OK)
        return diag_failed(d, err);
    }
    trace(sel, "hf: not used: %s", herr.message);
    return s == TPX_UNSUPPORTED ? TPX_UNSUPPORTED : TPX_NOT_FOUND;
  }
  if (tpx_plan_size(plan) == 0) {
    tpx_plan_destroy(plan);
    snprintf(why, why_size, "the Hugging Face plan (%s) is empty", what);
    trace(sel, "hf: not used: %s", why);
    return TPX_NOT_FOUND;
  }
  tpx_plan_destroy(sel->plan);
  sel->plan = plan;
  sel->source = TPX_PLAN_SOURCE_HF;
  if (set_str(&sel->function, "get_hf_tp_shard_plan"))
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  trace(sel, "hf: used %s (%zu entries)", what, tpx_plan_size(plan));
  if (sp) {
    tpx_status d = tpx_diag_add(
        diags, TPX_DIAG_ERROR, "sp-with-hf-plan", arch ? arch : "",
        "turn sequence parallelism off, or use a plugin or custom plan that "
        "supports it",
        "sequence parallelism is not supported with a Hugging Face tp plan "
        "(%s); the plan is shown without sequence-parallel styles", what);
    if (d != TPX_OK)
      return diag_failed(d, err);
    trace(sel, "hf: sequence parallelism requested, which the HF plan does "
          "not support (error sp-with-hf-plan)");
  }
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
  if (p->validate_fn) {
    size_t before = tpx_diag_count(diags);
    s = tpx__plugin_validate(p, model, arch, o->plan_name,
                             o->sequence_parallel, o->tp_size, diags, &cerr);
    if (s == TPX_NO_MEMORY)
      return tpx_error_set(err, s, "%s", cerr.message);
    if (s != TPX_OK) {
      if (tpx_diag_add(diags, TPX_DIAG_WARNING, "plugin-failed", p->name,
                       NULL, "%s", cerr.message) != TPX_OK)
        return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
      trace(sel, "plugin '%s': validate failed: %s", p->name, cerr.message);
    } else {
      trace(sel, "plugin '%s': validate ran (%zu diagnostics)", p->name,
            tpx_diag_count(diags) - before);
    }
  }
  const tpx__plugin_op ops[3] = {TPX__OP_FSDP_UNITS, TPX__OP_FP32,
                                 TPX__OP_STRATEGY};
  const int has[3] = {p->fsdp_fn != NULL, p->fp32_fn != NULL,
                      p->strategy_fn != NULL};
  tpx__strvec *dst[3] = {&sel->units, &sel->fp32, &sel->strategy};
  const char *what[3] = {"FSDP units", "fp32 parameters",
                         "strategy properties"};
  for (int k = 0; k < 3; k++) {
    if (!has[k])
      continue;
    tpx__strvec v;
    tpx_error_clear(&cerr);
    s = tpx__plugin_strings(p, ops[k], model, arch, &v, &cerr);
    if (s == TPX_NO_MEMORY)
      return tpx_error_set(err, s, "%s", cerr.message);
    if (s != TPX_OK) {
      if (tpx_diag_add(diags, TPX_DIAG_WARNING, "plugin-failed", p->name,
                       NULL, "%s", cerr.message) != TPX_OK)
        return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
      trace(sel, "plugin '%s': %s failed: %s", p->name, what[k],
            cerr.message);
      continue;
    }
    tpx__strvec_free(dst[k]);
    *dst[k] = v;
    trace(sel, "plugin '%s': %zu %s", p->name, v.count, what[k]);
  }
  return TPX_OK;
}

/* Upstream strategies (PARALLELIZATION_STRATEGIES, keyed by the bare class
 * name) with their own flow: they never call validate_tp_mesh and ignore
 * tp_shard_plan (a custom or named plan). */
static int own_flow_strategy(const char *arch) {
  static const char *const skip[] = {
      "NemotronHForCausalLM", "WanTransformer3DModel",
      "HunyuanVideo15Transformer3DModel", "LTX2VideoTransformer3DModel"};
  if (!arch)
    return 0;
  const char *dot = strrchr(arch, '.');
  const char *bare = dot ? dot + 1 : arch;
  for (size_t i = 0; i < sizeof skip / sizeof skip[0]; i++)
    if (strcmp(bare, skip[i]) == 0)
      return 1;
  return 0;
}

tpx_status tpx_select_plan(const tpx_registry *reg, const tpx_model *model,
                           const tpx_select_options *opts, tpx_selection **out,
                           tpx_diag_list *diags, tpx_error *err) {
  if (out)
    *out = NULL;
  if (!model || !opts || !out || !diags)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_select_plan: model, opts, out or diags is NULL");
  if (opts->struct_size < sizeof(size_t) + sizeof(int64_t))
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_select_plan: opts->struct_size=%zu is too small "
                         "(use TPX_SELECT_OPTIONS_INIT)",
                         opts->struct_size);
  tpx_select_options o = TPX_SELECT_OPTIONS_INIT;
  memcpy(&o, opts,
         opts->struct_size < sizeof o ? opts->struct_size : sizeof o);
  o.struct_size = sizeof o;
  if (o.tp_size < 1)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tp_size=%lld; it must be >= 1", (long long)o.tp_size);
  if (o.sequence_parallel != 0 && o.sequence_parallel != 1)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "sequence_parallel=%d; it must be 0 or 1",
                         o.sequence_parallel);
  const int sp = o.sequence_parallel;
  const int64_t tp = o.tp_size;

  tpx_selection *sel = calloc(1, sizeof *sel);
  if (!sel)
    return tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
  tpx_status s = TPX_OK;
  json_t *root = tpx__model_config(model);
  const char *arch = tpx_model_architecture(model, 0);
  trace(sel, "request: architecture %s, tp=%lld, sequence_parallel=%s",
        arch ? arch : "(none)", (long long)tp, sp ? "on" : "off");

  const char *matched = NULL;
  int64_t ai = reg ? tpx__registry_find_arch(reg, arch, &matched) : -1;
  const tpx__plugin *arch_plugin =
      ai >= 0 ? tpx__registry_at(reg, (size_t)ai) : NULL;
  const tpx__plugin *cap_plugin = arch_plugin;
  const char *cap_arch = matched;
  int have_plan = 0;

  /* An own-flow strategy ignores tp_shard_plan: the plugin's plan stands. */
  if ((o.custom || o.plan_name) && own_flow_strategy(arch)) {
    s = tpx_diag_add(diags, TPX_DIAG_WARNING, "custom-plan-ignored", arch,
                     "drop the custom / named plan; this strategy always "
                     "applies its own",
                     "the %s strategy ignores tp_shard_plan: the %s plan "
                     "given is not applied",
                     arch, o.custom ? "custom" : "named");
    if (s != TPX_OK) {
      tpx_error_set(err, s, "out of memory");
      goto fail;
    }
    trace(sel, "custom/named plan: ignored (the %s strategy ignores "
          "tp_shard_plan)", arch);
    o.custom = NULL;
    o.plan_name = NULL;
  }

  /* 1. custom plan */
  if (o.custom) {
    s = tpx_plan_clone(o.custom, &sel->plan, err);
    if (s != TPX_OK)
      goto fail;
    sel->source = TPX_PLAN_SOURCE_CUSTOM;
    if (set_str(&sel->function, "custom")) {
      s = tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
      goto fail;
    }
    trace(sel, "custom: used the given plan (%zu entries); it is not "
          "validated against the architecture", tpx_plan_size(o.custom));
    if (o.plan_name)
      trace(sel, "named plan '%s': skipped (a custom plan wins)", o.plan_name);
    have_plan = 1;
  } else {
    trace(sel, "custom: none given");
  }

  /* 2. named plan */
  if (!have_plan && o.plan_name) {
    int64_t ni = tpx__registry_find_plan_name(reg, o.plan_name);
    if (ni < 0) {
      s = tpx_error_set(err, TPX_NOT_FOUND,
                        "named plan '%s' is not served by any loaded plugin "
                        "(see `tpx plugins` for the named plans)",
                        o.plan_name);
      goto fail;
    }
    const tpx__plugin *np = tpx__registry_at(reg, (size_t)ni);
    const char *narch = np == arch_plugin && matched ? matched
                        : arch                      ? arch
                                                    : np->archs[0];
    int refused = 0;
    s = try_plugin(sel, np, model, narch, o.plan_name, sp, tp, &refused, err);
    if (s != TPX_OK)
      goto fail; /* upstream raises; a named plan has no fallback */
    sel->source = TPX_PLAN_SOURCE_CUSTOM;
    trace(sel, "named plan '%s': used, from plugin '%s' (%s), %zu entries",
          o.plan_name, np->name, np->path, tpx_plan_size(sel->plan));
    if (!cap_plugin) {
      cap_plugin = np;
      cap_arch = narch;
    }
    have_plan = 1;
  } else if (!have_plan) {
    trace(sel, "named plan: none requested");
  }

  /* 3. the plugin for the architecture */
  int plugin_failed = 0;
  if (have_plan) {
    trace(sel, "plugin: not asked for the architecture's plan (the %s plan "
          "was chosen)", o.custom ? "custom" : "named");
  } else {
    if (!arch) {
      trace(sel, "plugin: skipped (the config has no architectures)");
    } else if (!arch_plugin) {
      trace(sel, "plugin: none of the %zu loaded plugins serves '%s'",
            reg ? tpx_registry_num_plugins(reg) : (size_t)0, arch);
    } else {
      int refused = 0;
      tpx_error perr = {0};
      s = try_plugin(sel, arch_plugin, model, matched, NULL, sp, tp, &refused,
                     &perr);
      if (s == TPX_NO_MEMORY) {
        tpx_error_set(err, s, "%s", perr.message);
        goto fail;
      }
      if (s == TPX_OK) {
        sel->source = TPX_PLAN_SOURCE_PLUGIN;
        trace(sel, "plugin: used '%s' %s (%s) for '%s' (function %s, %zu "
              "entries)", arch_plugin->name, arch_plugin->version,
              arch_plugin->path, matched, sel->function,
              tpx_plan_size(sel->plan));
        have_plan = 1;
      } else {
        plugin_failed = 1;
        s = tpx_diag_add(diags, TPX_DIAG_WARNING,
                         refused ? "plugin-refused" : "plugin-failed",
                         arch_plugin->name,
                         "fix the plugin, or pass a custom plan",
                         "%s; falling back to the Hugging Face plan",
                         perr.message);
        if (s != TPX_OK) {
          tpx_error_set(err, s, "out of memory");
          goto fail;
        }
        trace(sel, "plugin: '%s' %s: %s; falling back to the HF plan, as "
              "upstream does", arch_plugin->name,
              refused ? "refused" : "failed", perr.message);
      }
    }
  }

  /* 4. the Hugging Face plan */
  char hf_why[TPX_ERROR_MESSAGE_SIZE] = "";
  if (have_plan) {
    trace(sel, "hf: not needed (the %s plan was chosen)",
          tpx_plan_source_name(sel->source));
  } else {
    s = try_hf(sel, model, arch, sp, diags, hf_why, sizeof hf_why, err);
    if (s == TPX_OK)
      have_plan = 1;
    else if (s != TPX_NOT_FOUND && s != TPX_UNSUPPORTED)
      goto fail;
    s = TPX_OK;
  }

  /* 5. the default base plan */
  if (have_plan) {
    trace(sel, "default: not needed");
  } else {
    if (tp > 1 && is_remote_code(root)) {
      s = tpx_diag_add(
          diags, TPX_DIAG_ERROR, "remote-code-no-plan", arch ? arch : "",
          "1) install a tpx plugin serving this architecture (TPX_PLUGIN_PATH); "
          "2) give the config a base_model_tp_plan with recognised styles "
          "(colwise, rowwise, colwise_rep, rowwise_rep); 3) pass a custom "
          "plan (--plan FILE or a named plan); or run with tp=1",
          "'%s' is custom code (config has auto_map) with %s and no usable "
          "Hugging Face tp plan (%s); the default base plan would create "
          "DTensor placements without shard_order metadata, which trips an "
          "internal assert in torch's redistribute",
          arch ? arch : "(unknown class)",
          plugin_failed ? "a failing plugin" : "no plugin", hf_why);
      if (s != TPX_OK) {
        tpx_error_set(err, s, "out of memory");
        goto fail;
      }
      trace(sel, "default: custom code (auto_map) at tp=%lld with no plugin "
            "and no HF plan is an error (remote-code-no-plan); the default "
            "plan is shown for reference", (long long)tp);
    } else if (tp > 1) {
      s = tpx_diag_add(diags, TPX_DIAG_WARNING, "default-plan-fallback",
                       arch ? arch : "",
                       "install a plugin for this architecture or pass a "
                       "custom plan",
                       "no plugin or Hugging Face plan for '%s'; using the "
                       "generic default base plan, whose keys may not match "
                       "this model",
                       arch ? arch : "(unknown class)");
      if (s != TPX_OK) {
        tpx_error_set(err, s, "out of memory");
        goto fail;
      }
    }
    s = tpx__default_base_plan(sp, &sel->plan, err);
    if (s != TPX_OK)
      goto fail;
    sel->source = TPX_PLAN_SOURCE_DEFAULT;
    if (set_str(&sel->function, "default_base_plan")) {
      s = tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
      goto fail;
    }
    trace(sel, "default: used the default base plan%s (%zu entries)",
          sp ? " with sequence-parallel overrides" : "",
          tpx_plan_size(sel->plan));
    s = moe_default_fixup(sel, model, arch, diags, err);
    if (s != TPX_OK)
      goto fail;
  }

  /* Post-processing, for every source. */
  if (is_nemotron_flash(model, root)) {
    s = nemotron_flash_fixup(sel, err);
    if (s != TPX_OK)
      goto fail;
  }
  trace(sel, "moe guard: not applicable (no Automodel MoE modules in a "
        "Hugging Face model tree)");

  /* validate_tp_mesh: NeMo Automodel 0.7.0 runs it after plan selection and
   * only when the plan shards attention heads (plans.md §4.6's test), so a
   * plan that shards MLPs alone or keeps attention replicated places no
   * head-count constraint; strategies with their own flow never run it
   * (plans.md §4.9). Earlier releases ran it before selection, always. */
  if (tp <= 1) {
    trace(sel, "validate_tp_mesh: skipped (tp=1)");
  } else if (own_flow_strategy(arch)) {
    trace(sel, "validate_tp_mesh: skipped (the %s strategy does not run it)",
          arch);
  } else if (!tpx_plan_is_head_sharded(sel->plan)) {
    trace(sel, "validate_tp_mesh: skipped (the plan does not shard attention "
          "heads; Automodel 0.7.0 validates only plans that do)");
  } else {
    size_t before = tpx_diag_count(diags);
    s = tpx_validate_tp_mesh(model, tp, diags, err);
    if (s != TPX_OK)
      goto fail;
    size_t n = tpx_diag_count(diags) - before;
    if (n)
      trace(sel, "validate_tp_mesh: %zu problem(s) for tp=%lld (see "
            "diagnostics)", n, (long long)tp);
    else
      trace(sel, "validate_tp_mesh: head counts fit tp=%lld", (long long)tp);
  }

  if (cap_plugin) {
    s = plugin_capabilities(sel, cap_plugin, model, cap_arch, &o, diags, err);
    if (s != TPX_OK)
      goto fail;
  }
  trace(sel, "selected: %s plan%s%s (%zu entries)",
        tpx_plan_source_name(sel->source), sel->function ? ", function " : "",
        sel->function ? sel->function : "", tpx_plan_size(sel->plan));
  *out = sel;
  return TPX_OK;
fail:
  tpx_selection_destroy(sel);
  return s;
}

/* ---- accessors ------------------------------------------------------------ */

const tpx_plan *tpx_selection_plan(const tpx_selection *sel) {
  return sel ? sel->plan : NULL;
}
tpx_plan_source tpx_selection_source(const tpx_selection *sel) {
  return sel ? sel->source : TPX_PLAN_SOURCE_DEFAULT;
}
const char *tpx_selection_plugin_name(const tpx_selection *sel) {
  return sel ? sel->plugin_name : NULL;
}
const char *tpx_selection_plugin_path(const tpx_selection *sel) {
  return sel ? sel->plugin_path : NULL;
}
const char *tpx_selection_function(const tpx_selection *sel) {
  return sel ? sel->function : NULL;
}
size_t tpx_selection_trace_size(const tpx_selection *sel) {
  return sel ? sel->trace.count : 0;
}
const char *tpx_selection_trace(const tpx_selection *sel, size_t i) {
  return sel && i < sel->trace.count ? sel->trace.items[i] : NULL;
}
size_t tpx_selection_num_fp32(const tpx_selection *sel) {
  return sel ? sel->fp32.count : 0;
}
const char *tpx_selection_fp32(const tpx_selection *sel, size_t i) {
  return sel && i < sel->fp32.count ? sel->fp32.items[i] : NULL;
}
size_t tpx_selection_num_strategy(const tpx_selection *sel) {
  return sel ? sel->strategy.count : 0;
}
const char *tpx_selection_strategy(const tpx_selection *sel, size_t i) {
  return sel && i < sel->strategy.count ? sel->strategy.items[i] : NULL;
}
const char *const *tpx_selection_strategy_lines(const tpx_selection *sel) {
  return sel && sel->strategy.count
             ? (const char *const *)sel->strategy.items
             : NULL;
}
const char *tpx_selection_strategy_value(const tpx_selection *sel,
                                         const char *key) {
  size_t n = key ? strlen(key) : 0;
  for (size_t i = 0; sel && n && i < sel->strategy.count; i++)
    if (strncmp(sel->strategy.items[i], key, n) == 0 &&
        sel->strategy.items[i][n] == '=')
      return sel->strategy.items[i] + n + 1;
  return NULL;
}
tpx_status tpx_selection_strategy_mp(const tpx_selection *sel,
                                     tpx_mp_policy *mp, tpx_error *err) {
  static const char *const keys[3] = {"mp_param_dtype", "mp_reduce_dtype",
                                      "mp_output_dtype"};
  if (!mp)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_selection_strategy_mp: mp is NULL");
  tpx_dtype got[3] = {mp->param_dtype, mp->reduce_dtype, mp->output_dtype};
  for (int k = 0; k < 3; k++) {
    const char *v = tpx_selection_strategy_value(sel, keys[k]);
    if (!v)
      continue;
    if (strcmp(v, "none") == 0) {
      got[k] = TPX_DTYPE_INVALID;
      continue;
    }
    tpx_error e = {0};
    if (tpx_dtype_parse(v, &got[k], &e) != TPX_OK)
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "plugin '%s' gives strategy %s=%s: %s",
                           sel->plugin_name ? sel->plugin_name : "?", keys[k],
                           v, e.message);
  }
  mp->param_dtype = got[0];
  mp->reduce_dtype = got[1];
  mp->output_dtype = got[2];
  return TPX_OK;
}

size_t tpx_selection_num_fsdp_units(const tpx_selection *sel) {
  return sel ? sel->units.count : 0;
}
const char *tpx_selection_fsdp_unit(const tpx_selection *sel, size_t i,
                                    int *reshard_after_forward) {
  if (!sel || i >= sel->units.count)
    return NULL;
  if (reshard_after_forward)
    *reshard_after_forward = sel->units.ints[i];
  return sel->units.items[i];
}
