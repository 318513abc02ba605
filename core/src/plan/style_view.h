/* plan/style_view.h — the style helpers other areas build styles with
 * (select/default_plan.c). The style families and canonical form stay in
 * plan/style_internal.h, which only core/src/plan/ includes. */
#ifndef TPX_PLAN_STYLE_VIEW_H
#define TPX_PLAN_STYLE_VIEW_H

#include "tpx/plan.h"

/* A layout list holding the one placement `p`. */
tpx_layout_list tpx__layout_one(tpx_placement p);

#endif /* TPX_PLAN_STYLE_VIEW_H */
