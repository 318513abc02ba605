/* tpxp_common.h — helpers shared by the bundled model-family plugins.
 *
 * A static, position-independent helper library linked into each family
 * plugin (plugins/<family>/). It wraps the host function table of
 * tpx/plugin.h. It is NOT part of the ABI and not visible outside a plugin
 * (hidden symbols); it keeps no state, so every helper is safe to call from
 * several threads with different ctx. Includes only tpx/plugin.h and
 * standard C headers. Prefix: tpxp_ (TPX Plugin). A plugin includes this
 * one header; the parts:
 *   tpxp_base.h      TPXP_CHK / TPXP_N_OF, registration, messages, config
 *                    reads (one at a time or as typed tables)
 *   tpxp_family.h    one dispatch table per plugin, TPXP_EXPORT_* lines
 *   tpxp_plan.h      rule rows (TPXP_COL / TPXP_ROW / ...), shared plans
 *   tpxp_skeleton.h  skeleton rows, layer stacks, decoder and MoE blocks
 * docs/PLUGINS.md "The bundled plugins' helpers" shows them in use. */
#ifndef TPXP_COMMON_H
#define TPXP_COMMON_H

#include "tpxp_base.h"
#include "tpxp_family.h"
#include "tpxp_plan.h"
#include "tpxp_skeleton.h"

#endif /* TPXP_COMMON_H */
