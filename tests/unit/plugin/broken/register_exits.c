/* register_exits.c — calls exit(0) inside register_parallel_strategy. In
 * process this ended `tpx plan` with status 0 and no output; the load probe
 * must refuse it and name it. */
#include <stdlib.h>

#include "fixture.h"

TPX_PLUGIN_EXPORT int register_parallel_strategy(const tpx_plugin_host *host,
                                                 tpx_plugin_info *info) {
  (void)host;
  (void)info;
  exit(0);
}

TPX_PLUGIN_EXPORT int get_plan(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
                               const tpx_plugin_plan_request *req) {
  (void)req;
  return fixture_add(h, ctx, "lm_head", "colwise");
}
