/* grandchild.c — get_plan forks a process that lives on for 10 s (holding
 * every file descriptor it inherited, the result pipe of an isolated call
 * included) and then returns a correct plan at once. */
#include <unistd.h>

#include "fixture.h"

TPX_PLUGIN_EXPORT int register_parallel_strategy(const tpx_plugin_host *host,
                                                 tpx_plugin_info *info) {
  return fixture_register(host, info, "grandchild");
}

TPX_PLUGIN_EXPORT int get_plan(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
                               const tpx_plugin_plan_request *req) {
  (void)req;
  if (fork() == 0) {
    sleep(10);
    _exit(0);
  }
  return fixture_add(h, ctx, "lm_head", "colwise");
}
