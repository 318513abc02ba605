/* unknown_style.c — get_plan adds an entry with a style that does not exist
 * and ignores the TPX_PLUGIN_INVALID it gets back. */
#include "fixture.h"

TPX_PLUGIN_EXPORT int register_parallel_strategy(const tpx_plugin_host *host,
                                                 tpx_plugin_info *info) {
  return fixture_register(host, info, "unknown-style");
}

TPX_PLUGIN_EXPORT int get_plan(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
                               const tpx_plugin_plan_request *req) {
  (void)req;
  fixture_add(h, ctx, "model.layers.*.mlp.up_proj", "colwise");
  fixture_add(h, ctx, "model.layers.*.mlp.down_proj", "diagonalwise");
  return TPX_PLUGIN_OK;
}
