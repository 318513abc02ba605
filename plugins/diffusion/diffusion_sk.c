/* diffusion_sk.c — skeleton helpers of the diffusion plugin: a builder that
 * keeps the first failure, the Diffusers building blocks the four models
 * share (Linear, norms, TimestepEmbedding-style pairs, FeedForward, Conv3d
 * patch embeddings) and the out_channels read (absent, null or a size). Names
 * and shapes follow the Diffusers checkpoints (nn.Linear weight [out, in]). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "diffusion.h"

void dfx_sk_init(dfx_sk *s, const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                 const char *default_dtype) {
  const char *dt = NULL;
  s->host = host;
  s->ctx = ctx;
  s->st = TPX_PLUGIN_OK;
  /* A Diffusers config rarely names a dtype; the checkpoint's is the
   * family default (see the skeleton files). */
  if (host->config_get_string(ctx, "torch_dtype", &dt) == TPX_PLUGIN_OK &&
      dt != NULL)
    s->dtype = dt;
  else
    s->dtype = default_dtype;
}

static int vfqn(dfx_sk *s, char *buf, const char *fmt, va_list ap) {
  int n = vsnprintf(buf, TPXP_FQN_MAX, fmt, ap);
  if (n < 0 || n >= TPXP_FQN_MAX) {
    s->st = tpxp_fail(s->host, s->ctx, TPX_PLUGIN_ERROR,
                      "diffusion: a module name is longer than %d bytes",
                      TPXP_FQN_MAX - 1);
    return -1;
  }
  return 0;
}

/* The opening of every variadic builder: nothing to do once the builder
 * has failed; else format the FQN into `fqn`, and stop (the failure kept)
 * when it does not fit. */
#define DFX_BEGIN(s, fqn, fmt)                                                 \
  char fqn[TPXP_FQN_MAX];                                                      \
  do {                                                                         \
    va_list ap_;                                                               \
    int bad_;                                                                  \
    if ((s)->st != TPX_PLUGIN_OK)                                              \
      return;                                                                  \
    va_start(ap_, fmt);                                                        \
    bad_ = vfqn(s, fqn, fmt, ap_);                                             \
    va_end(ap_);                                                               \
    if (bad_)                                                                  \
      return;                                                                  \
  } while (0)

void dfx_mod(dfx_sk *s, const char *kind, const char *fmt, ...) {
  DFX_BEGIN(s, fqn, fmt);
  s->st = tpxp_sk_module(s->host, s->ctx, fqn, kind);
}

void dfx_lin(dfx_sk *s, int64_t in, int64_t out, int bias, const char *fmt,
             ...) {
  DFX_BEGIN(s, fqn, fmt);
  s->st = tpxp_sk_linear(s->host, s->ctx, fqn, in, out, bias, s->dtype);
}

/* A norm: weight (and bias) only when `affine`. */
void dfx_norm(dfx_sk *s, int64_t dim, int affine, int bias, const char *fmt,
              ...) {
  DFX_BEGIN(s, fqn, fmt);
  {
    const tpxp_sk_row rows[] = {
        TPXP_SK_MOD("", "norm"),
        TPXP_SK_WHEN(affine),
        TPXP_SK_PRM("", "weight", dim, -1),
        TPXP_SK_WHEN(affine && bias),
        TPXP_SK_PRM("", "bias", dim, -1),
    };
    s->st = TPXP_SK_ROWS(s->host, s->ctx, fqn, rows, s->dtype);
  }
}

void dfx_param(dfx_sk *s, const char *module, const char *name, int ndim,
               const int64_t *shape) {
  if (s->st == TPX_PLUGIN_OK)
    s->st = s->host->skeleton_add_param(s->ctx, module, name, shape,
                                        (int32_t)ndim, s->dtype);
}

void dfx_two_linear(dfx_sk *s, const char *prefix, int64_t in, int64_t dim) {
  dfx_lin(s, in, dim, 1, "%s.linear_1", prefix);
  dfx_lin(s, dim, dim, 1, "%s.linear_2", prefix);
}

void dfx_ff(dfx_sk *s, const char *prefix, int64_t dim, int64_t proj_out,
            int64_t inner, int64_t out, int bias, int dropout) {
  dfx_mod(s, "container", "%s.net.0", prefix);
  dfx_lin(s, dim, proj_out, bias, "%s.net.0.proj", prefix);
  if (dropout)
    dfx_mod(s, "other", "%s.net.1", prefix);
  dfx_lin(s, inner, out, bias, "%s.net.2", prefix);
}

void dfx_conv3d(dfx_sk *s, const char *fqn, int64_t in, int64_t out, int64_t kt,
                int64_t kh, int64_t kw) {
  int64_t w[5], b[1];
  w[0] = out;
  w[1] = in;
  w[2] = kt;
  w[3] = kh;
  w[4] = kw;
  b[0] = out;
  dfx_mod(s, "other", "%s", fqn);
  dfx_param(s, fqn, "weight", 5, w);
  dfx_param(s, fqn, "bias", 1, b);
}

int64_t dfx_size_or(dfx_sk *s, const char *key, int64_t absent,
                    int64_t if_null) {
  if (s->st != TPX_PLUGIN_OK)
    return absent;
  if (!s->host->config_has(s->ctx, key))
    return tpxp_cfg_key_present(s->host, s->ctx, "", key) ? if_null : absent;
  {
    int64_t v = absent;
    tpxp_key k = TPXP_KEY_Z(key, &v, absent);
    k.required = 1;
    s->st = tpxp_cfg_read(s->host, s->ctx, "", &k, 1);
    return s->st == TPX_PLUGIN_OK ? v : absent;
  }
}
