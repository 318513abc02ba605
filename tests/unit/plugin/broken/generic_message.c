/* generic_message.c — like the SDK template used to: a plan entry the host
 * refuses (a layout that is not one), then a generic set_error ("the host
 * refused a plan entry (see the log)") and TPX_PLUGIN_ERROR. The host's own
 * reason, naming key and style, must reach the user. */
#include <string.h>

#include "fixture.h"

TPX_PLUGIN_EXPORT int register_parallel_strategy(const tpx_plugin_host *host,
                                                 tpx_plugin_info *info) {
  return fixture_register(host, info, "generic_message");
}

TPX_PLUGIN_EXPORT int get_plan(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
                               const tpx_plugin_plan_request *req) {
  (void)req;
  static const char *const bad[] = {"bogus"};
  tpx_plugin_entry e;
  memset(&e, 0, sizeof e);
  e.struct_size = sizeof e;
  e.module = "model.layers.*.mlp.down_proj";
  e.style = "rowwise";
  e.input_layouts = bad;
  e.n_input_layouts = 1;
  e.use_local_output = TPX_PLUGIN_DEFAULT;
  e.sequence_dim = TPX_PLUGIN_DEFAULT;
  if (h->plan_add(ctx, &e) != TPX_PLUGIN_OK) {
    h->set_error(ctx, "the host refused a plan entry (see the log)");
    return TPX_PLUGIN_ERROR;
  }
  return TPX_PLUGIN_OK;
}
