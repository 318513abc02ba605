/* plan/plan_internal.h — private access to plan entries for the plan area
 * (JSON, HF translation, matching): borrowed key / canonical style without
 * copying, and a set that skips validation for already-canonical styles.
 * Not public API. */
#ifndef TPX_PLAN_PLAN_INTERNAL_H
#define TPX_PLAN_PLAN_INTERNAL_H

#include <stddef.h>

#include "tpx/plan.h"

/* `canon` must come from tpx__style_canonical and be valid; `module` a valid
 * key. *replaced (may be NULL) tells whether the key existed. */
tpx_status tpx__plan_set_nocheck(tpx_plan *plan, const char *module,
                                 const tpx_style *canon, int optional,
                                 int *replaced, tpx_error *err);

/* Unchecked accessors; index < tpx_plan_size(plan). */
const char *tpx__plan_key(const tpx_plan *plan, size_t index);
const tpx_style *tpx__plan_style(const tpx_plan *plan, size_t index);
int tpx__plan_optional(const tpx_plan *plan, size_t index);

#endif /* TPX_PLAN_PLAN_INTERNAL_H */
