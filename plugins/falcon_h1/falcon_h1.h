/* falcon_h1.h — private declarations of the falcon_h1 plugin (not exported,
 * not an ABI header). */
#ifndef TPX_FALCON_H1_PRIVATE_H
#define TPX_FALCON_H1_PRIVATE_H

#include <stdint.h>

#include "tpx/plugin.h"

/* num_key_value_heads as FalconH1Config resolves it: absent -> 8, null ->
 * num_attention_heads (`heads`). */
int falcon_h1_kv_heads(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                       int64_t heads, int64_t *kv);

/* FalconH1ForCausalLM skeleton from the config (falcon_h1_skeleton.c). */
int falcon_h1_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                       const char *arch);

#endif /* TPX_FALCON_H1_PRIVATE_H */
