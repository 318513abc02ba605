/* bad_traits.c — registration declares a trait with a space in it
 * (tpx_plugin_info.traits holds "key=value" strings without spaces). */
#include <stddef.h>

#include "fixture.h"

static const char *const traits[] = {"own_flow=Broken ForCausalLM", NULL};

TPX_PLUGIN_EXPORT int register_parallel_strategy(const tpx_plugin_host *host,
                                                 tpx_plugin_info *info) {
  int rc = fixture_register(host, info, "bad_traits");
  if (info->struct_size > offsetof(tpx_plugin_info, traits))
    info->traits = traits;
  return rc;
}

TPX_PLUGIN_EXPORT int get_plan(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
                               const tpx_plugin_plan_request *req) {
  (void)req;
  return fixture_add(h, ctx, "lm_head", "colwise");
}
