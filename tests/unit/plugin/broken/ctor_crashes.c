/* ctor_crashes.c — an ELF constructor that crashes (SIGSEGV) while the file
 * is dlopen'd, before register_parallel_strategy is ever called. */
#include <signal.h>

#include "fixture.h"

__attribute__((constructor)) static void crash_on_load(void) {
  /* Die by the signal even under AddressSanitizer (see register_crashes). */
  signal(SIGSEGV, SIG_DFL);
  raise(SIGSEGV);
}

TPX_PLUGIN_EXPORT int register_parallel_strategy(const tpx_plugin_host *host,
                                                 tpx_plugin_info *info) {
  return fixture_register(host, info, "ctor_crashes");
}

TPX_PLUGIN_EXPORT int get_plan(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
                               const tpx_plugin_plan_request *req) {
  (void)req;
  return fixture_add(h, ctx, "lm_head", "colwise");
}
