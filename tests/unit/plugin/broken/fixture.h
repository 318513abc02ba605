/* fixture.h — shared bits of the deliberately broken test plugins: a valid
 * registration and a valid one-entry get_plan, so each fixture breaks
 * exactly one thing. Header-only; every fixture is its own .so. */
#ifndef TPX_TEST_BROKEN_FIXTURE_H
#define TPX_TEST_BROKEN_FIXTURE_H

#include <string.h>

#define TPX_PLUGIN_DECLARE_ENTRY_POINTS
#include "tpx/plugin.h"

static const char *const fixture_archs[] = {"BrokenForCausalLM", NULL};

static inline int fixture_register(const tpx_plugin_host *host,
                                   tpx_plugin_info *info, const char *name) {
  (void)host;
  info->abi_version = TPX_PLUGIN_ABI_VERSION(1, 0);
  info->name = name;
  info->version = "0.0.1";
  info->architectures = fixture_archs;
  return TPX_PLUGIN_OK;
}

static inline int fixture_add(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
                              const char *module, const char *style) {
  tpx_plugin_entry e;
  memset(&e, 0, sizeof e);
  e.struct_size = sizeof e;
  e.module = module;
  e.style = style;
  e.use_local_output = TPX_PLUGIN_DEFAULT;
  e.sequence_dim = TPX_PLUGIN_DEFAULT;
  return h->plan_add(ctx, &e);
}

#endif
