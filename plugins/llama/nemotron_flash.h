/* nemotron_flash.h — private declaration of the llama plugin's
 * Nemotron-Flash skeleton (nemotron_flash_skeleton.c). Not an ABI header. */
#ifndef TPX_LLAMA_NEMOTRON_FLASH_H
#define TPX_LLAMA_NEMOTRON_FLASH_H

#include "tpx/plugin.h"

/* NemotronFlashForCausalLM: every parameter from the config (hybrid
 * DeltaNet / Mamba2 / attention / FFN layers, memory tokens). */
int nemotron_flash_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx);

#endif /* TPX_LLAMA_NEMOTRON_FLASH_H */
