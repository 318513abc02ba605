/* tpxp_family.c — the per-architecture dispatch table of a multi-architecture
 * plugin (tpxp_family.h): find the row for a class name and
 * forward an entry point to it, with the opening checks every entry point
 * shares. No state. */
#include "tpxp_common.h"

const tpxp_arch_ops *tpxp_family_find(const tpxp_family *f, const char *arch) {
  size_t i;
  for (i = 0; i < f->n_archs; i++)
    if (tpxp_arch_is(arch, f->archs[i].bare))
      return &f->archs[i];
  return NULL;
}

int tpxp_family_plan(const tpxp_family *f, const tpx_plugin_host *host,
                     tpx_plugin_ctx *ctx, const tpx_plugin_plan_request *req) {
  const tpxp_arch_ops *a;
  int st = tpxp_plain_plan_request(host, ctx, req, f->name);
  if (st != TPX_PLUGIN_OK)
    return st;
  a = tpxp_family_find(f, req->architecture);
  if (a == NULL || a->plan == NULL)
    return tpxp_not_served(host, ctx, f->name, req->architecture);
  return a->plan(host, ctx, req);
}

int tpxp_family_validate(const tpxp_family *f, const tpx_plugin_host *host,
                         tpx_plugin_ctx *ctx,
                         const tpx_plugin_plan_request *req) {
  const tpxp_arch_ops *a;
  if (host == NULL)
    return TPX_PLUGIN_INVALID;
  if (!tpxp_request_ok(req))
    return tpxp_fail(host, ctx, TPX_PLUGIN_INVALID,
                     "%s: malformed validate request", f->name);
  a = tpxp_family_find(f, req->architecture);
  if (a == NULL)
    return tpxp_not_served(host, ctx, f->name, req->architecture);
  return a->validate != NULL ? a->validate(host, ctx, req) : TPX_PLUGIN_OK;
}

/* Forward an entry point that takes the architecture alone to `fn`, the
 * member of the row `a` it stands for; `required`: a NULL member refuses
 * (else it means "nothing to do"). */
static int forward(const tpxp_family *f, const tpx_plugin_host *host,
                   tpx_plugin_ctx *ctx, const char *arch,
                   const tpxp_arch_ops *a, tpxp_arch_fn fn, int required) {
  if (host == NULL)
    return TPX_PLUGIN_INVALID;
  if (a == NULL || (fn == NULL && required))
    return tpxp_not_served(host, ctx, f->name, arch);
  return fn != NULL ? fn(host, ctx, arch) : TPX_PLUGIN_OK;
}

/* The entry points that take the architecture alone: `member` is the row's
 * function they forward to, `required` as in forward(). */
#define BY_ARCH(name, member, required)                                        \
  int name(const tpxp_family *f, const tpx_plugin_host *host,                  \
           tpx_plugin_ctx *ctx, const char *arch) {                            \
    const tpxp_arch_ops *a = tpxp_family_find(f, arch);                        \
    return forward(f, host, ctx, arch, a, a ? a->member : NULL, required);     \
  }
BY_ARCH(tpxp_family_skeleton, skeleton, 1)
BY_ARCH(tpxp_family_fsdp_units, fsdp_units, 0)
BY_ARCH(tpxp_family_fp32, fp32, 0)
BY_ARCH(tpxp_family_strategy, strategy, 0)
