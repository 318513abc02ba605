/* get_plan_null_write.c — registers fine, then writes through a NULL
 * pointer in get_plan with almost no memory in use: a plain crash, which
 * the host must not blame on memory (issue 28 C15). */
#include "fixture.h"

TPX_PLUGIN_EXPORT int register_parallel_strategy(const tpx_plugin_host *host,
                                                 tpx_plugin_info *info) {
  return fixture_register(host, info, "get-plan-null-write");
}

TPX_PLUGIN_EXPORT int get_plan(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
                               const tpx_plugin_plan_request *req) {
  (void)h;
  (void)ctx;
  volatile int *volatile p = (volatile int *)0;
  *p = (int)req->tp_size;
  return TPX_PLUGIN_OK;
}
