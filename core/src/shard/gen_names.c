/* gen_names.c — module names generalised over their layer indices
 * (tpx__fqn_generalize), kept once each in the order first seen, and the
 * count of modules behind one: how partial_grad.c and qk_norm.c give one
 * diagnostic per group of identical layers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fqn.h"
#include "base/grow.h"
#include "model/model_view.h"
#include "shard/shard_internal.h"

int tpx__gen_names_add(tpx__gen_names *set, const tpx_sharding *sh, int64_t m,
                       char gen[TPX__GEN_NAME_MAX]) {
  tpx__fqn_generalize(tpx_model_module_fqn(sh->model, m), gen,
                      TPX__GEN_NAME_MAX);
  for (size_t k = 0; k < set->count; k++)
    if (strcmp(set->names[k], gen) == 0)
      return 0;
  if (TPX_GROW(set->names, set->cap, set->count + 1, 8))
    return -1;
  snprintf(set->names[set->count++], sizeof set->names[0], "%s", gen);
  return 1;
}

size_t tpx__gen_names_count(const tpx_sharding *sh, const char *gen,
                            int (*keep)(const tpx_sharding *, int64_t)) {
  size_t count = 0;
  for (size_t m = 0; m < sh->num_modules; m++) {
    char g2[TPX__GEN_NAME_MAX];
    tpx__fqn_generalize(tpx_model_module_fqn(sh->model, (int64_t)m), g2,
                        sizeof g2);
    count += strcmp(g2, gen) == 0 && (!keep || keep(sh, (int64_t)m));
  }
  return count;
}

void tpx__gen_names_free(tpx__gen_names *set) {
  free(set->names);
  set->names = NULL;
  set->count = set->cap = 0;
}
