/* select/select_view.h — what other folders may ask of plan selection
 * beyond the public API: whether a plugin declares that the strategy for an
 * architecture has its own flow (docs/PLUGIN_ABI.md "Traits"), which skips
 * validate_tp_mesh. Used by the conformance harness. */
#ifndef TPX_SELECT_VIEW_H
#define TPX_SELECT_VIEW_H

#include "plugin/plugin_view.h"

/* 1 when plugin p declares own_flow for `arch` (bare class names), else 0. */
int tpx__sel_plugin_own_flow(const tpx__plugin *p, const char *arch);

#endif /* TPX_SELECT_VIEW_H */
