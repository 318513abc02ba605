/* malformed_key.c — get_plan adds a key with an empty atom ("a..b") and
 * ignores the TPX_PLUGIN_INVALID it gets back. */
#include "fixture.h"

TPX_PLUGIN_EXPORT int register_parallel_strategy(const tpx_plugin_host *host,
                                                 tpx_plugin_info *info) {
  return fixture_register(host, info, "malformed-key");
}

TPX_PLUGIN_EXPORT int get_plan(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
                               const tpx_plugin_plan_request *req) {
  (void)req;
  fixture_add(h, ctx, "model..layers.*.mlp.up_proj", "colwise");
  return TPX_PLUGIN_OK;
}
