/* get_plan_null_write.c — registers fine, then writes through a NULL
 * pointer in get_plan with almost no memory in use: a plain crash, which
 * the host must not blame on memory (issue 28 C15). */
#include <signal.h>

#include "fixture.h"

/* A real fault, also in sanitizer builds: no UBSan null check, no ASan
 * shadow check, and the default SIGSEGV action instead of ASan's handler
 * (which would turn the crash into exit(1)). */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 8 ||               \
    defined(__clang__)
#define NO_SANITIZE __attribute__((no_sanitize("address", "undefined")))
#else
#define NO_SANITIZE
#endif

TPX_PLUGIN_EXPORT int register_parallel_strategy(const tpx_plugin_host *host,
                                                 tpx_plugin_info *info) {
  return fixture_register(host, info, "get-plan-null-write");
}

NO_SANITIZE TPX_PLUGIN_EXPORT int get_plan(const tpx_plugin_host *h,
                                           tpx_plugin_ctx *ctx,
                                           const tpx_plugin_plan_request *req) {
  (void)h;
  (void)ctx;
  signal(SIGSEGV, SIG_DFL);
  volatile int *volatile p = (volatile int *)0;
  *p = (int)req->tp_size;
  return TPX_PLUGIN_OK;
}
