/* register_crashes.c — crashes (SIGSEGV) inside register_parallel_strategy.
 * Only the harness (which forks) can survive loading it. */
#include <signal.h>

#include "fixture.h"

TPX_PLUGIN_EXPORT int register_parallel_strategy(const tpx_plugin_host *host,
                                                 tpx_plugin_info *info) {
  (void)host;
  (void)info;
  /* Die by the signal even under AddressSanitizer, whose own SIGSEGV
   * handler would turn the crash into exit(1). */
  signal(SIGSEGV, SIG_DFL);
  raise(SIGSEGV);
  return TPX_PLUGIN_ERROR;
}

TPX_PLUGIN_EXPORT int get_plan(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
                               const tpx_plugin_plan_request *req) {
  (void)req;
  return fixture_add(h, ctx, "lm_head", "colwise");
}
