/* model/aliases.h — the way back through a model's name aliases
 * (aliases.c): the name a canonical tensor name has under one rule's alias
 * side, for readers that look a parameter up in a checkpoint stored under
 * the other naming. Not public. */
#ifndef TPX_MODEL_ALIASES_H
#define TPX_MODEL_ALIASES_H

#include <stddef.h>

#include "tpx/model.h"

/* Rule `rule`'s alias-side name of `canonical` into buf: 1 when the
 * rule's canonical side matches the leading atoms of `canonical` and the
 * alias name comes back to `canonical` through the rules (the first rule
 * that matches a name applies); 0 when not; -1 when buf is too small. */
int tpx__model_alias_name(const tpx_model *model, size_t rule,
                          const char *canonical, char *buf, size_t size);

#endif /* TPX_MODEL_ALIASES_H */
