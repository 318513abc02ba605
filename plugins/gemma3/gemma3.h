/* gemma3.h — private declarations shared by the gemma3 plugin's files.
 *
 * The plugin serves Gemma3ForCausalLM (prefix "model"),
 * Gemma3ForConditionalGeneration (prefix "model.language_model", a SigLIP
 * vision tower and projector left replicated) and Gemma4ForConditionalGeneration
 * (the model-registered strategy plan of NeMo Automodel HEAD). Not an ABI
 * header: nothing here is exported. */
#ifndef TPX_GEMMA3_PRIVATE_H
#define TPX_GEMMA3_PRIVATE_H

#include "tpx/plugin.h"

/* Which model class an architecture string names. */
typedef enum gemma3_kind {
  GEMMA3_NONE = 0,
  GEMMA3_CAUSAL_LM,  /* Gemma3ForCausalLM */
  GEMMA3_COND_GEN,   /* Gemma3ForConditionalGeneration */
  GEMMA4_COND_GEN    /* Gemma4ForConditionalGeneration */
} gemma3_kind;

gemma3_kind gemma3_kind_of(const char *architecture);

/* _parallelize_gemma3 (plans.md §3.11): the same plan at every tp (the
 * Default strategy's validate_tp_mesh, §4.5, is the host's). */
int gemma3_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                gemma3_kind kind, int sequence_parallel, int64_t tp_size);
/* The Gemma4 strategy: refusals at tp > 1, then _gemma4_tp_plan (§3.14). */
int gemma4_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                int sequence_parallel, int64_t tp_size);

/* tpx_plugin_validate for Gemma4: the strategy's refusals (MoE, head
 * counts) as error diagnostics, so they stay visible when the host falls
 * back to another plan source after get_plan refused. */
int gemma4_validate(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    int64_t tp_size);

/* Skeletons: Gemma3 text stack (+ SigLIP tower and projector for the VLM). */
int gemma3_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    gemma3_kind kind);
/* Gemma4ForConditionalGeneration: text stack (dense, E-series, MoE,
 * kv-shared layers), vision and audio towers and their embedders
 * (gemma4_skeleton.c). */
int gemma4_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx);

#endif /* TPX_GEMMA3_PRIVATE_H */
