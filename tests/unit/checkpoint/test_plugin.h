/* test_plugin.h — what the checkpoint folder's test plugins share
 * (moe_plugin/moe.c, split_plugin/split.c; header-only, static inline):
 * registering for ABI 1.0 under a name, and a module with one parameter.
 * Included by test plugins only; not part of the SDK. */
#ifndef TPX_TESTS_CHECKPOINT_TEST_PLUGIN_H
#define TPX_TESTS_CHECKPOINT_TEST_PLUGIN_H

#include "tpx/plugin.h"

/* register_parallel_strategy's body: ABI 1.0 if the host speaks it, the
 * plugin's name, version 1.0.0, description and architectures (static
 * strings: the host copies them). */
static inline int tpxtest_register(const tpx_plugin_host *host,
                                   tpx_plugin_info *info, const char *name,
                                   const char *description,
                                   const char *const *architectures) {
  const uint32_t mine = TPX_PLUGIN_ABI_VERSION(1, 0);
  if (host->abi_min > mine || host->abi_max < mine ||
      TPX_PLUGIN_ABI_VERSION_MAJOR(host->abi_max) != 1)
    return TPX_PLUGIN_ABI_UNSUPPORTED;
  info->abi_version = mine;
  info->name = name;
  info->version = "1.0.0";
  info->description = description;
  info->architectures = architectures;
  return TPX_PLUGIN_OK;
}

/* Module mod of the given kind holding parameter `name` of shape
 * {a, b, c} cut to ndim dims; nonzero when the host refused either. */
static inline int tpxtest_param(const tpx_plugin_host *h, tpx_plugin_ctx *ctx,
                                const char *mod, const char *kind,
                                const char *name, int64_t a, int64_t b,
                                int64_t c, int ndim) {
  int64_t shape[3] = {a, b, c};
  int rc = h->skeleton_add_module(ctx, mod, kind);
  return rc | h->skeleton_add_param(ctx, mod, name, shape, ndim, NULL);
}

#endif
