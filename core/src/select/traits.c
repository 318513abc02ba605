/* select/traits.c — what loaded plugins declare about the upstream
 * strategies they serve beyond their plans (tpx_plugin_info.traits,
 * docs/PLUGIN_ABI.md "Traits"): strategies with their own flow, the
 * lm_head post-processing some families get after selection, and the
 * strategies that sum partial gradients of tp replicas, the architectures
 * upstream serves with its own MoE implementation and their routed-expert
 * parameters (moe_custom, expert_param). The core
 * knows no model class: a family's plugin names it.
 *
 * Not plugin loading (plugin/loader.c copies the declarations) and not the
 * selection steps (select.c). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "model/config.h"
#include "select/select_internal.h"
#include "select/select_view.h"

static const char *bare_name(const char *arch) {
  const char *dot = strrchr(arch, '.');
  return dot ? dot + 1 : arch;
}

/* The value of trait `t` when its key is `key` ("key=value"), else NULL. */
static const char *trait_value(const char *t, const char *key) {
  size_t n = strlen(key);
  return strncmp(t, key, n) == 0 && t[n] == '=' ? t + n + 1 : NULL;
}

int tpx__sel_plugin_own_flow(const tpx__plugin *p, const char *arch) {
  for (size_t k = 0; p && arch && k < tpx__plugin_num_traits(p); k++) {
    const char *v = trait_value(tpx__plugin_trait(p, k), "own_flow");
    if (v && strcmp(bare_name(v), bare_name(arch)) == 0)
      return 1;
  }
  return 0;
}

int tpx__sel_own_flow(const tpx_registry *reg, const char *arch) {
  if (!reg || !arch)
    return 0;
  for (size_t i = 0; i < tpx_registry_num_plugins(reg); i++)
    if (tpx__sel_plugin_own_flow(tpx__registry_at(reg, i), arch))
      return 1;
  return 0;
}

int tpx__sel_tp_grad_sync(const tpx__plugin *p, const char *arch) {
  for (size_t k = 0; p && arch && k < tpx__plugin_num_traits(p); k++) {
    const char *v = trait_value(tpx__plugin_trait(p, k), "tp_grad_sync");
    if (v && strcmp(bare_name(v), bare_name(arch)) == 0)
      return 1;
  }
  return 0;
}

int tpx__sel_moe_custom(const tpx_registry *reg, const char *arch) {
  for (size_t i = 0; reg && arch && i < tpx_registry_num_plugins(reg); i++) {
    const tpx__plugin *p = tpx__registry_at(reg, i);
    for (size_t k = 0; p && k < tpx__plugin_num_traits(p); k++) {
      const char *v = trait_value(tpx__plugin_trait(p, k), "moe_custom");
      if (v && strcmp(bare_name(v), bare_name(arch)) == 0)
        return 1;
    }
  }
  return 0;
}

/* expert_param=<architecture>:<pattern>: the architecture ends at the
 * first ':' (class names hold none; the qualified ones use dots). */
int tpx__sel_expert_patterns(const tpx_registry *reg, const char *arch,
                             tpx__strvec *out) {
  for (size_t i = 0; reg && arch && i < tpx_registry_num_plugins(reg); i++) {
    const tpx__plugin *p = tpx__registry_at(reg, i);
    for (size_t k = 0; p && k < tpx__plugin_num_traits(p); k++) {
      const char *v = trait_value(tpx__plugin_trait(p, k), "expert_param");
      const char *colon = v ? strchr(v, ':') : NULL;
      if (!colon || !colon[1])
        continue;
      char a[256];
      size_t n = (size_t)(colon - v);
      if (n >= sizeof a)
        continue;
      memcpy(a, v, n);
      a[n] = '\0';
      if (strcmp(bare_name(a), bare_name(arch)) == 0 &&
          tpx__strvec_push(out, colon + 1, 0) != 0)
        return -1;
    }
  }
  return 0;
}

static int contains_nocase(const char *hay, const char *needle) {
  size_t n = strlen(needle);
  for (; *hay; hay++) {
    size_t i = 0;
    while (i < n && hay[i] &&
           tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i]))
      i++;
    if (i == n)
      return 1;
  }
  return n == 0;
}

static const char *config_string(const tpx_model *model, const char *key) {
  json_t *root = tpx__model_config(model);
  json_t *v = root ? json_object_get(root, key) : NULL;
  return v && json_is_string(v) ? json_string_value(v) : NULL;
}

/* 1 when `model` matches one lm_head_sharded_only value. */
static int model_matches(const tpx_model *model, const char *match) {
  const char *v;
  if (strncmp(match, "arch:", 5) == 0) {
    for (size_t i = 0; i < tpx_model_num_architectures(model); i++)
      if (strcmp(bare_name(tpx_model_architecture(model, i)),
                 bare_name(match + 5)) == 0)
        return 1;
    return 0;
  }
  if (strncmp(match, "model_type:", 11) == 0) {
    v = config_string(model, "model_type");
    return v && strcmp(v, match + 11) == 0;
  }
  if (strncmp(match, "name_or_path:", 13) == 0) {
    v = config_string(model, "_name_or_path");
    return v && match[13] && contains_nocase(v, match + 13);
  }
  return 0; /* an unknown form: ignored, like an unknown key */
}

static int lm_head_declared(const tpx_registry *reg, const tpx_model *model) {
  for (size_t i = 0; reg && i < tpx_registry_num_plugins(reg); i++) {
    const tpx__plugin *p = tpx__registry_at(reg, i);
    for (size_t k = 0; p && k < tpx__plugin_num_traits(p); k++) {
      const char *v =
          trait_value(tpx__plugin_trait(p, k), "lm_head_sharded_only");
      if (v && model_matches(model, v))
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

/* Upstream removes an lm_head whose output is not sharded for these
 * families: the model's own head computes the logits (docs/SEMANTICS.md
 * "Plan selection"). */
tpx_status tpx__sel_lm_head_fixup(const tpx_registry *reg,
                                  const tpx_model *model, tpx_selection *sel,
                                  tpx_error *err) {
  static const char *const keys[] = {"lm_head", "language_model.lm_head"};
  if (!lm_head_declared(reg, model))
    return TPX_OK;
  for (size_t k = 0; k < 2; k++) {
    int64_t i = tpx_plan_find(sel->plan, keys[k]);
    if (i < 0)
      continue;
    tpx_plan_entry e;
    tpx_status s = tpx_plan_get(sel->plan, (size_t)i, &e, err);
    if (s != TPX_OK)
      return s;
    if (outputs_shard(&e.style)) {
      tpx__sel_trace(sel,
                     "nemotron-flash: key '%s' kept (its output is "
                     "sharded)",
                     keys[k]);
      continue;
    }
    s = tpx_plan_remove(sel->plan, keys[k], err);
    if (s != TPX_OK)
      return s;
    tpx__sel_trace(sel,
                   "nemotron-flash: key '%s' removed (its output is "
                   "not sharded; the model's own head computes the logits)",
                   keys[k]);
  }
  return TPX_OK;
}
