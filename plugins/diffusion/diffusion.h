/* diffusion.h — the diffusion family plugin: Diffusers transformers, whose
 * config.json names its class in "_class_name" (WanTransformer3DModel,
 * HunyuanVideo15Transformer3DModel, LTX2VideoTransformer3DModel,
 * QwenImageTransformer2DModel). Shared declarations of the plan
 * (diffusion_plan.c), the skeleton helpers (diffusion_sk.c) and the one
 * skeleton file per model class. Includes only tpxp_common.h. */
#ifndef TPX_PLUGIN_DIFFUSION_H
#define TPX_PLUGIN_DIFFUSION_H

#include <stdint.h>

#include "tpxp_common.h"

/* ---- plans (diffusion_plan.c) ---- */
int dfx_wan_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                 const tpx_plugin_plan_request *req);

/* ---- skeleton helpers (diffusion_sk.c) ----
 * A builder that remembers the first failure: every call after it is a
 * no-op, so a skeleton is a flat list of calls and one status at the end. */
typedef struct dfx_sk {
  const tpx_plugin_host *host;
  tpx_plugin_ctx *ctx;
  const char *dtype; /* every parameter's dtype */
  int st;
} dfx_sk;

/* The family default dtype unless the config names torch_dtype. */
void dfx_sk_init(dfx_sk *s, const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                 const char *default_dtype);
void dfx_mod(dfx_sk *s, const char *kind, const char *fmt, ...)
    TPXP_PRINTF(3, 4);
/* nn.Linear(in, out) at the formatted FQN. */
void dfx_lin(dfx_sk *s, int64_t in, int64_t out, int bias, const char *fmt, ...)
    TPXP_PRINTF(5, 6);
/* A norm with weight [dim] (affine) and bias [dim] (bias). */
void dfx_norm(dfx_sk *s, int64_t dim, int affine, int bias, const char *fmt,
              ...) TPXP_PRINTF(5, 6);
/* A parameter of any rank on `module` ("" is the root). */
void dfx_param(dfx_sk *s, const char *module, const char *name, int ndim,
               const int64_t *shape);
/* Diffusers TimestepEmbedding / PixArtAlphaTextProjection: linear_1
 * in -> dim, linear_2 dim -> dim, both with bias, under `prefix`. */
void dfx_two_linear(dfx_sk *s, const char *prefix, int64_t in, int64_t dim);
/* Diffusers FeedForward under `prefix`: net.0.proj dim -> proj_out,
 * (net.1 dropout as an empty module when `dropout`), net.2 inner -> out. */
void dfx_ff(dfx_sk *s, const char *prefix, int64_t dim, int64_t proj_out,
            int64_t inner, int64_t out, int bias, int dropout);
/* Conv3d(in, out, kernel = stride = (kt, kh, kw)) with bias. */
void dfx_conv3d(dfx_sk *s, const char *fqn, int64_t in, int64_t out, int64_t kt,
                int64_t kh, int64_t kw);
/* out_channels-style reads: `absent` when the key is missing, `if_null`
 * when it is JSON null, else a size (1..2^31); a failure lands in s->st.
 * Every other key goes through tpxp_cfg_read. */
int64_t dfx_size_or(dfx_sk *s, const char *key, int64_t absent,
                    int64_t if_null);

/* ---- skeletons (one file each) ---- */
int dfx_wan_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                     const char *arch);
int dfx_hunyuan_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                         const char *arch);
int dfx_ltx2_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                      const char *arch);
int dfx_qwenimage_skeleton(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                           const char *arch);

#endif /* TPX_PLUGIN_DIFFUSION_H */
