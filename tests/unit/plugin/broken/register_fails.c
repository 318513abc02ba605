/* register_fails.c — registration fails; the plugin logs why. */
#include "fixture.h"

TPX_PLUGIN_EXPORT int register_parallel_strategy(const tpx_plugin_host *host,
                                                 tpx_plugin_info *info) {
  (void)info;
  host->log(NULL, TPX_PLUGIN_LOG_ERROR,
            "cannot initialise: the frobnicator table is missing");
  return TPX_PLUGIN_ERROR;
}

TPX_PLUGIN_EXPORT int get_plan(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
                               const tpx_plugin_plan_request *req) {
  (void)req;
  return fixture_add(h, ctx, "lm_head", "colwise");
}
