/* dtor_crashes.c — loads, registers and plans correctly, then crashes
 * (SIGSEGV) in an ELF destructor when it is dlclose'd. */
#include <signal.h>

#include "fixture.h"

__attribute__((destructor)) static void crash_on_unload(void) {
  signal(SIGSEGV, SIG_DFL);
  raise(SIGSEGV);
}

TPX_PLUGIN_EXPORT int register_parallel_strategy(const tpx_plugin_host *host,
                                                 tpx_plugin_info *info) {
  return fixture_register(host, info, "dtor_crashes");
}

TPX_PLUGIN_EXPORT int get_plan(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
                               const tpx_plugin_plan_request *req) {
  (void)req;
  return fixture_add(h, ctx, "lm_head", "colwise");
}
