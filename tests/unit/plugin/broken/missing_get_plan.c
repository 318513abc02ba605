/* missing_get_plan.c — registers fine but does not export get_plan. */
#include "fixture.h"

TPX_PLUGIN_EXPORT int register_parallel_strategy(const tpx_plugin_host *host,
                                                 tpx_plugin_info *info) {
  return fixture_register(host, info, "missing-get-plan");
}
