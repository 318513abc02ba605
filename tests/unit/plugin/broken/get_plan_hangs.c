/* get_plan_hangs.c — registers fine, then never returns from get_plan. */
#include <unistd.h>

#include "fixture.h"

TPX_PLUGIN_EXPORT int register_parallel_strategy(const tpx_plugin_host *host,
                                                 tpx_plugin_info *info) {
  return fixture_register(host, info, "get-plan-hangs");
}

TPX_PLUGIN_EXPORT int get_plan(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
                               const tpx_plugin_plan_request *req) {
  (void)h;
  (void)ctx;
  (void)req;
  for (;;) pause();
  return TPX_PLUGIN_OK;
}
