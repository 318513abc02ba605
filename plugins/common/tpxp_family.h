/* tpxp_family.h — the per-architecture dispatch table of a
 * multi-architecture plugin and the one-line exported entry points that
 * forward to it (tpxp_family.c). */
#ifndef TPXP_FAMILY_H
#define TPXP_FAMILY_H

#include "tpxp_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- one dispatch table per plugin ----
 * A plugin serving several architectures lists them once, with what each
 * entry point does for it (the NCCL ext-net shape: one table, looked up by
 * name; no ABI change, the exported functions forward to tpxp_family_*). */
typedef int (*tpxp_req_fn)(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                           const tpx_plugin_plan_request *req);
typedef int (*tpxp_arch_fn)(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                            const char *architecture);

typedef struct tpxp_arch_ops {
  const char *bare;        /* bare class name (tpxp_arch_is) */
  tpxp_req_fn plan;        /* get_plan; NULL: not served */
  tpxp_arch_fn skeleton;   /* tpx_plugin_get_skeleton; NULL: not served */
  tpxp_req_fn validate;    /* tpx_plugin_validate; NULL: nothing to say */
  tpxp_arch_fn fsdp_units; /* tpx_plugin_fsdp_units; NULL: tpx's rule */
  tpxp_arch_fn fp32;       /* tpx_plugin_fp32_params; NULL: none */
  tpxp_arch_fn strategy;   /* tpx_plugin_strategy; NULL: nothing to set */
} tpxp_arch_ops;

typedef struct tpxp_family {
  const char *name; /* starts every message: "<name>: ..." */
  const tpxp_arch_ops *archs;
  size_t n_archs;
} tpxp_family;

/* The row serving `arch`, or NULL. */
const tpxp_arch_ops *tpxp_family_find(const tpxp_family *f, const char *arch);
/* The entry points. Each answers TPX_PLUGIN_INVALID for a NULL host and
 * refuses an architecture the table lacks (tpxp_not_served). get_plan first
 * runs tpxp_plain_plan_request; validate refuses a malformed request with
 * "<name>: malformed validate request". */
int tpxp_family_plan(const tpxp_family *f, const tpx_plugin_host *host,
                     tpx_plugin_ctx *ctx, const tpx_plugin_plan_request *req);
int tpxp_family_skeleton(const tpxp_family *f, const tpx_plugin_host *host,
                         tpx_plugin_ctx *ctx, const char *arch);
int tpxp_family_validate(const tpxp_family *f, const tpx_plugin_host *host,
                         tpx_plugin_ctx *ctx,
                         const tpx_plugin_plan_request *req);
int tpxp_family_fsdp_units(const tpxp_family *f, const tpx_plugin_host *host,
                           tpx_plugin_ctx *ctx, const char *arch);
int tpxp_family_fp32(const tpxp_family *f, const tpx_plugin_host *host,
                     tpx_plugin_ctx *ctx, const char *arch);
int tpxp_family_strategy(const tpxp_family *f, const tpx_plugin_host *host,
                         tpx_plugin_ctx *ctx, const char *arch);

/* Define one exported entry point that forwards to the family table `fam`
 * (a tpxp_family). A plugin writes one line per entry point it exports:
 * the optional ones it leaves out stay absent, as before. */
#define TPXP_EXPORT_GET_PLAN(fam)                                              \
  int get_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,               \
               const tpx_plugin_plan_request *req) {                           \
    return tpxp_family_plan(&(fam), host, ctx, req);                           \
  }
#define TPXP_EXPORT_SKELETON(fam)                                              \
  int tpx_plugin_get_skeleton(const tpx_plugin_host *host,                     \
                              tpx_plugin_ctx *ctx, const char *architecture) { \
    return tpxp_family_skeleton(&(fam), host, ctx, architecture);              \
  }
#define TPXP_EXPORT_VALIDATE(fam)                                              \
  int tpx_plugin_validate(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,    \
                          const tpx_plugin_plan_request *req) {                \
    return tpxp_family_validate(&(fam), host, ctx, req);                       \
  }
#define TPXP_EXPORT_FSDP_UNITS(fam)                                            \
  int tpx_plugin_fsdp_units(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,  \
                            const char *architecture) {                        \
    return tpxp_family_fsdp_units(&(fam), host, ctx, architecture);            \
  }
#define TPXP_EXPORT_FP32(fam)                                                  \
  int tpx_plugin_fp32_params(const tpx_plugin_host *host, tpx_plugin_ctx *ctx, \
                             const char *architecture) {                       \
    return tpxp_family_fp32(&(fam), host, ctx, architecture);                  \
  }
#define TPXP_EXPORT_STRATEGY(fam)                                              \
  int tpx_plugin_strategy(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,    \
                          const char *architecture) {                          \
    return tpxp_family_strategy(&(fam), host, ctx, architecture);              \
  }

#ifdef __cplusplus
}
#endif

#endif /* TPXP_FAMILY_H */
