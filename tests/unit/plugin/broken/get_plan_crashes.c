/* get_plan_crashes.c — registers fine, then crashes (SIGSEGV) in get_plan. */
#include <signal.h>

#include "fixture.h"

TPX_PLUGIN_EXPORT int register_parallel_strategy(const tpx_plugin_host *host,
                                                 tpx_plugin_info *info) {
  return fixture_register(host, info, "get-plan-crashes");
}

TPX_PLUGIN_EXPORT int get_plan(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
                               const tpx_plugin_plan_request *req) {
  (void)h;
  (void)ctx;
  (void)req;
  /* Die by the signal even under AddressSanitizer, whose own SIGSEGV
   * handler would turn the crash into exit(1). */
  signal(SIGSEGV, SIG_DFL);
  raise(SIGSEGV);
  return TPX_PLUGIN_OK;
}
