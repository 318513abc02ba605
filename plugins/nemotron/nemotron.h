/* nemotron.h — private declarations of the nemotron plugin (not exported,
 * not an ABI header).
 *
 * NemotronH (hybrid Mamba2 / attention / MLP / MoE blocks, one mixer per
 * block, the pattern in hybrid_override_pattern or layers_block_type) and
 * NemotronLabsDiffusionModel (a Ministral3 encoder with a diffusion head). */
#ifndef TPX_NEMOTRON_PRIVATE_H
#define TPX_NEMOTRON_PRIVATE_H

#include <stdint.h>

#include "tpx/plugin.h"

/* Most decoder blocks a NemotronH config may have here. */
#define NEMOTRON_H_MAX_BLOCKS 1024

/* Block kinds as hybrid_override_pattern spells them. */
#define NEMOTRON_H_MAMBA 'M'
#define NEMOTRON_H_ATTENTION '*'
#define NEMOTRON_H_MLP '-'
#define NEMOTRON_H_MOE 'E'

/* Read the block pattern into types[0..*n-1] (one char per block, NUL
 * terminated; `types` holds NEMOTRON_H_MAX_BLOCKS + 1). From
 * hybrid_override_pattern, else the layers_block_type (or layer_types)
 * list, whose names may be the remote-code ones (mamba, attention, mlp,
 * moe) or transformers v5's (linear_attention, full_attention). A config
 * with neither takes transformers' NemotronHConfig default (mamba, moe,
 * attention, mlp), with a warning. */
int nemotron_h_block_types(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                           char *types, int64_t *n);
/* "backbone" when the model tree has it (HF remote-code checkpoints), else
 * "model" when present (native Nemotron-V3 / transformers v5), else
 * "backbone" (an empty tree: the published checkpoints' layout). */
const char *nemotron_h_inner(const tpx_plugin_host *host, tpx_plugin_ctx *ctx);

int nemotron_h_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                    const tpx_plugin_plan_request *req);
int nemotron_h_validate(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                        const tpx_plugin_plan_request *req);
int nemotron_h_fsdp_units(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                          const char *arch);
int nemotron_h_fp32_params(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                           const char *arch);
int nemotron_h_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                        const char *arch);

int nemotron_diffusion_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                            const tpx_plugin_plan_request *req);
int nemotron_diffusion_skeleton(const tpx_plugin_host *host,
                                tpx_plugin_ctx *ctx, const char *arch);

#endif /* TPX_NEMOTRON_PRIVATE_H */
