/* describe.c — one plugin's family traits about a model's class
 * (model/family_view.h: layer lists, head-count section, HF inner model,
 * wrapped model, block configs) onto the model, as tpx_model_add_trait
 * parses them. The registry (registry.c) runs it over every loaded plugin.
 * Not the loader's check of their form (loader.c). */
#include <string.h>

#include "model/family_view.h"
#include "plugin/plugin_internal.h"

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
