/* extra_symbols.c — a working plugin that also exports symbols that are not
 * part of the ABI (it forgot -fvisibility=hidden). Loads fine; the harness
 * lists the extra exports. */
#include "fixture.h"

TPX_PLUGIN_EXPORT int tpxtest_helper_function(void);
TPX_PLUGIN_EXPORT int tpxtest_helper_function(void) { return 7; }
TPX_PLUGIN_EXPORT const int tpxtest_global_table[4] = {1, 2, 3, 4};

TPX_PLUGIN_EXPORT int register_parallel_strategy(const tpx_plugin_host *host,
                                                 tpx_plugin_info *info) {
  return fixture_register(host, info, "extra-symbols");
}

TPX_PLUGIN_EXPORT int get_plan(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
                               const tpx_plugin_plan_request *req) {
  (void)req;
  return fixture_add(h, ctx, "lm_head", "colwise");
}
