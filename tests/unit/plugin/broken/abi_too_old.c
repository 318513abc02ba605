/* abi_too_old.c — a sloppy plugin built for ABI 0.9: it ignores the host's
 * range and answers TPX_PLUGIN_OK with a version the host does not speak. */
#include "fixture.h"

TPX_PLUGIN_EXPORT int register_parallel_strategy(const tpx_plugin_host *host,
                                                 tpx_plugin_info *info) {
  int rc = fixture_register(host, info, "abi-too-old");
  info->abi_version = TPX_PLUGIN_ABI_VERSION(0, 9);
  return rc;
}

TPX_PLUGIN_EXPORT int get_plan(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
                               const tpx_plugin_plan_request *req) {
  (void)req;
  return fixture_add(h, ctx, "lm_head", "colwise");
}
