/* describe.c — what the loaded plugins give a model: the serving plugin's
 * skeleton and name aliases (tpx_registry_build_skeleton), and every
 * plugin's family traits about the model's class (model/family_view.h:
 * layer lists, head-count section, HF inner model, wrapped model, block
 * configs), onto the model (tpx_registry_describe_model) or into a struct
 * of the caller's (selection, for a model that was given none). Any loaded
 * plugin's declaration about the class counts, in load order. Not the
 * loader's check of their form (loader.c) nor the registry's lookups
 * (registry.c). */
#include <string.h>

#include "model/family_view.h"
#include "plugin/plugin_internal.h"

tpx_status tpx__registry_family(const tpx_registry *reg, const char *arch,
                                tpx__family *out, tpx_error *err) {
  for (size_t i = 0; reg && arch && i < tpx_registry_num_plugins(reg); i++) {
    const tpx__plugin *p = tpx__registry_at(reg, i);
    for (size_t k = 0; p && k < p->num_traits; k++) {
      if (!tpx__family_is_trait(p->traits[k]))
        continue;
      tpx_status st = tpx__family_add(out, p->traits[k], arch, NULL, err);
      if (st != TPX_OK)
        return st;
    }
  }
  return TPX_OK;
}

tpx_status tpx__plugin_describe_model(const tpx__plugin *p, tpx_model *model,
                                      tpx_error *err) {
  const char *arch = tpx_model_architecture(model, 0);
  for (size_t k = 0; p && arch && k < p->num_traits; k++) {
    int mine = 0;
    if (!tpx__family_is_trait(p->traits[k]) ||
        tpx__family_add(NULL, p->traits[k], arch, &mine, NULL) != TPX_OK ||
        !mine)
      continue;
    tpx_status st = tpx_model_add_trait(model, p->traits[k], err);
    if (st != TPX_OK)
      return st;
  }
  return TPX_OK;
}

tpx_status tpx_registry_describe_model(const tpx_registry *reg,
                                       tpx_model *model, tpx_error *err) {
  if (!reg || !model)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_registry_describe_model: registry or model is "
                         "NULL");
  for (size_t i = 0; i < tpx_registry_num_plugins(reg); i++) {
    tpx_status st =
        tpx__plugin_describe_model(tpx__registry_at(reg, i), model, err);
    if (st != TPX_OK)
      return st;
  }
  return TPX_OK;
}

/* The serving plugin's name aliases for `arch` (traits
 * "name_alias=<class>:<alias>=<canonical>", docs/PLUGIN_ABI.md) onto the
 * model, so safetensors headers under either naming match it. */
static tpx_status add_name_aliases(const tpx__plugin *p, tpx_model *model,
                                   const char *arch, tpx_error *err) {
  static const char key[] = "name_alias=";
  const char *dot = strrchr(arch, '.');
  const char *bare = dot ? dot + 1 : arch;
  size_t bl = strlen(bare);
  for (size_t k = 0; k < p->num_traits; k++) {
    const char *t = p->traits[k];
    if (strncmp(t, key, sizeof key - 1) != 0)
      continue;
    t += sizeof key - 1;
    const char *colon = strchr(t, ':'), *eq = colon ? strchr(colon, '=') : 0;
    if (!eq || (size_t)(colon - t) != bl || strncmp(t, bare, bl) != 0)
      continue;
    char alias[512];
    size_t al = (size_t)(eq - colon - 1);
    if (al >= sizeof alias)
      continue;
    memcpy(alias, colon + 1, al);
    alias[al] = '\0';
    tpx_status st = tpx_model_add_name_alias(model, alias, eq + 1, err);
    if (st != TPX_OK)
      return st;
  }
  return TPX_OK;
}

tpx_status tpx_registry_build_skeleton(const tpx_registry *reg,
                                       tpx_model *model, tpx_error *err) {
  if (!reg || !model)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_registry_build_skeleton: registry or model is "
                         "NULL");
  const char *arch = tpx_model_architecture(model, 0);
  if (!arch)
    return tpx_error_set(err, TPX_NOT_FOUND,
                         "the model has no architecture (config.json has no "
                         "\"architectures\"), so no plugin can build its "
                         "skeleton");
  const char *matched = NULL;
  int64_t i = tpx__registry_find_arch(reg, arch, &matched);
  if (i < 0)
    return tpx_error_set(err, TPX_NOT_FOUND,
                         "no plugin serves architecture '%s' (see `tpx "
                         "plugins`); load the model's tensors from its "
                         "safetensors files instead",
                         arch);
  const tpx__plugin *p = tpx__registry_at(reg, (size_t)i);
  tpx_status st = tpx__plugin_skeleton(p, model, matched, err);
  if (st == TPX_OK)
    st = add_name_aliases(p, model, arch, err);
  return st == TPX_OK ? tpx_registry_describe_model(reg, model, err) : st;
}
