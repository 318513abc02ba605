/* stdout_noise.c — a correct plugin that printf()s to stdout while loading
 * and in get_plan, which used to land in `tpx plan --format json`. */
#include <stdio.h>

#include "fixture.h"

__attribute__((constructor)) static void noise_on_load(void) {
  printf("stdout_noise: constructor says hello\n");
}

TPX_PLUGIN_EXPORT int register_parallel_strategy(const tpx_plugin_host *host,
                                                 tpx_plugin_info *info) {
  printf("stdout_noise: registering\n");
  return fixture_register(host, info, "stdout_noise");
}

TPX_PLUGIN_EXPORT int get_plan(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
                               const tpx_plugin_plan_request *req) {
  (void)req;
  printf("stdout_noise: planning {not json\n");
  return fixture_add(h, ctx, "lm_head", "colwise");
}
