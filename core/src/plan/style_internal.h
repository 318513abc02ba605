/* plan/style_internal.h — private helpers shared by the plan area: style
 * families (which fields a kind uses) and the canonical byte form of a
 * style. Not public API. */
#ifndef TPX_PLAN_STYLE_INTERNAL_H
#define TPX_PLAN_STYLE_INTERNAL_H

#include "plan/style_view.h"
#include "tpx/plan.h"

/* The family column of the style list (tpx_style_kind_traits). */
tpx_style_family tpx__style_family_of(tpx_style_kind kind);

/* Copy `in` with every field its kind does not use zeroed, "not given"
 * col/row layouts replaced by their defaults and booleans as 0/1, so equal
 * styles are memcmp-equal. `in` and `out` may not alias. */
void tpx__style_canonical(const tpx_style *in, tpx_style *out);

/* Validate a plan key: "" (the root) or dot-separated non-empty atoms.
 * The message names the key and the problem. */
tpx_status tpx__plan_key_validate(const char *key, tpx_error *err);

#endif /* TPX_PLAN_STYLE_INTERNAL_H */
