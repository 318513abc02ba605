/* tpxp_exports.h — prototypes of the plugin entry points (tpx/plugin.h), so
 * each family plugin defines them under -Wmissing-prototypes with default
 * visibility. A plugin defines the two required ones and any optional ones
 * it supports; declaring an optional one it does not define is harmless. */
#ifndef TPXP_EXPORTS_H
#define TPXP_EXPORTS_H

#include "tpx/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

TPX_PLUGIN_EXPORT int register_parallel_strategy(const tpx_plugin_host *host,
                                                 tpx_plugin_info *info);
TPX_PLUGIN_EXPORT int get_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                               const tpx_plugin_plan_request *req);
TPX_PLUGIN_EXPORT int tpx_plugin_get_skeleton(const tpx_plugin_host *host,
                                              tpx_plugin_ctx *ctx,
                                              const char *architecture);
TPX_PLUGIN_EXPORT int tpx_plugin_validate(const tpx_plugin_host *host,
                                          tpx_plugin_ctx *ctx,
                                          const tpx_plugin_plan_request *req);
TPX_PLUGIN_EXPORT int tpx_plugin_fsdp_units(const tpx_plugin_host *host,
                                            tpx_plugin_ctx *ctx,
                                            const char *architecture);
TPX_PLUGIN_EXPORT int tpx_plugin_fp32_params(const tpx_plugin_host *host,
                                             tpx_plugin_ctx *ctx,
                                             const char *architecture);

#ifdef __cplusplus
}
#endif

#endif /* TPXP_EXPORTS_H */
