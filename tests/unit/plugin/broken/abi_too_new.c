/* abi_too_new.c — speaks only ABI 2.0, which the host does not offer; it
 * says so (TPX_PLUGIN_ABI_UNSUPPORTED) and names its version. */
#include "fixture.h"

TPX_PLUGIN_EXPORT int register_parallel_strategy(const tpx_plugin_host *host,
                                                 tpx_plugin_info *info) {
  const uint32_t mine = TPX_PLUGIN_ABI_VERSION(2, 0);
  info->abi_version = mine;
  if (host->abi_max < mine)
    return TPX_PLUGIN_ABI_UNSUPPORTED;
  return fixture_register(host, info, "abi-too-new");
}

TPX_PLUGIN_EXPORT int get_plan(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
                               const tpx_plugin_plan_request *req) {
  (void)req;
  return fixture_add(h, ctx, "lm_head", "colwise");
}
