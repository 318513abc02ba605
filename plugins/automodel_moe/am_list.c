/* am_list.c — the config's per-layer lists (mlp_only_layers, mlp_layer_types,
 * layer_types), read by the layer rules of am_config.c and am_laguna.c. */
#include "am.h"

/* 1 when the integer list at `key` holds i. */
int am_list_has(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                const char *key, int64_t i, int *has) {
  int64_t n = 0, j, v;
  char p[64];
  int st = host->config_get_length(ctx, key, &n);
  *has = 0;
  if (st == TPX_PLUGIN_NOT_FOUND)
    return TPX_PLUGIN_OK;
  if (st != TPX_PLUGIN_OK)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "automodel_moe: config %s must be a list of layer "
                     "indices",
                     key);
  for (j = 0; j < n; j++) {
    tpxp_fmt(p, sizeof p, "%s[%lld]", key, (long long)j);
    TPXP_CHK(tpxp_cfg_int_req(host, ctx, p, &v));
    if (v == i)
      *has = 1;
  }
  return TPX_PLUGIN_OK;
}

/* The string at "<key>[i]", or NULL when the list is absent. */
int am_list_str(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                const char *key, int64_t i, const char **out) {
  char p[64];
  *out = NULL;
  if (!host->config_has(ctx, key))
    return TPX_PLUGIN_OK;
  tpxp_fmt(p, sizeof p, "%s[%lld]", key, (long long)i);
  return tpxp_cfg_str_opt(host, ctx, p, NULL, out);
}
