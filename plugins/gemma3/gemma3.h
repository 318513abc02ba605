/* gemma3.h — private declarations shared by the gemma3 plugin's files.
 *
 * The plugin serves Gemma3ForCausalLM (prefix "model"),
 * Gemma3ForConditionalGeneration (prefix "model.language_model", a SigLIP
 * vision tower and projector left replicated) and
 * Gemma4ForConditionalGeneration (the model-registered strategy plan of NeMo
 * Automodel HEAD). Not an ABI header: nothing here is exported. */
#ifndef TPX_GEMMA3_PRIVATE_H
#define TPX_GEMMA3_PRIVATE_H

#include "tpx/plugin.h"

/* Which model class an architecture string names. */
/* The entry points per architecture (the gemma3 family's dispatch table
 * in gemma3_plugin.c). */
int gemma3_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                const tpx_plugin_plan_request *req);
int gemma4_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                const tpx_plugin_plan_request *req);

int gemma4_validate(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    const tpx_plugin_plan_request *req);

int gemma3_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    const char *arch);
int gemma4_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    const char *arch);

#endif /* TPX_GEMMA3_PRIVATE_H */
