/* falcon_h1.h — private declarations of the falcon_h1 plugin (not exported,
 * not an ABI header). */
#ifndef TPX_FALCON_H1_PRIVATE_H
#define TPX_FALCON_H1_PRIVATE_H

#include "tpx/plugin.h"

/* FalconH1ForCausalLM skeleton from the config (falcon_h1_skeleton.c). */
int falcon_h1_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx);

#endif /* TPX_FALCON_H1_PRIVATE_H */
