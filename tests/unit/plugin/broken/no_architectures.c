/* no_architectures.c — registration answers OK with an empty architecture
 * list (the plugin would serve nothing). */
#include "fixture.h"

static const char *const none[] = {NULL};

TPX_PLUGIN_EXPORT int register_parallel_strategy(const tpx_plugin_host *host,
                                                 tpx_plugin_info *info) {
  int rc = fixture_register(host, info, "no-architectures");
  info->architectures = none;
  return rc;
}

TPX_PLUGIN_EXPORT int get_plan(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
                               const tpx_plugin_plan_request *req) {
  (void)req;
  return fixture_add(h, ctx, "lm_head", "colwise");
}
