/* muse_glimmer.h — MuseGlimmerForConditionalGeneration in the mistral
 * plugin: skeleton and strategy check (muse_glimmer.c); the plan is built in
 * mistral.c from the Ministral3 table. Plugin-internal. */
#ifndef TPX_MISTRAL_MUSE_GLIMMER_H
#define TPX_MISTRAL_MUSE_GLIMMER_H

#include <stdint.h>

#include "tpxp_common.h"

/* 1 if `arch` names MuseGlimmerForConditionalGeneration (bare or
 * qualified). */
int muse_glimmer_is(const char *arch);
/* The native (Automodel) module tree with transformers' shapes. */
int muse_glimmer_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx);
/* The strategy's limit: tp must divide the KV-head count (error
 * diagnostic otherwise); with sequence parallelism, upstream's warning that
 * it is ignored (a sequence-parallel-ignored warning). */
int muse_glimmer_validate(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                          int sequence_parallel, int64_t tp_size);

#endif /* TPX_MISTRAL_MUSE_GLIMMER_H */
