/* describe.c — the loaded plugins' family traits about a model's class
 * (model/family_view.h: layer lists, head-count section, HF inner model,
 * wrapped model, block configs), onto the model
 * (tpx_registry_describe_model) or into a struct of the caller's
 * (selection, for a model that was given none). Any loaded plugin's
 * declaration about the class counts, in load order. Not the loader's
 * check of their form (loader.c). */
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
