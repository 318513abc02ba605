/* nemotron_plugin.c — registration and entry points of the nemotron family
 * plugin. Dispatches by architecture to NemotronH (nemotron_h.c,
 * nemotron_h_skeleton.c) and Nemotron-Labs-Diffusion (nemotron_diffusion.c).
 * Both are reached by bare class name upstream: NemotronH through the
 * strategy registry, the diffusion model through PARALLELIZE_FUNCTIONS. */
#include "nemotron.h"

#include "tpxp_common.h"

static const char *const nemotron_architectures[] = {
    "NemotronHForCausalLM", "NemotronLabsDiffusionModel", NULL};

enum { NEM_NONE, NEM_H, NEM_DIFFUSION };

static int kind_of(const char *arch) {
  if (tpxp_arch_is(arch, "NemotronHForCausalLM"))
    return NEM_H;
  if (tpxp_arch_is(arch, "NemotronLabsDiffusionModel"))
    return NEM_DIFFUSION;
  return NEM_NONE;
}

static int not_served(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                      const char *arch) {
  return tpxp_not_served(host, ctx, "nemotron", arch);
}

/* NemotronH's strategy has its own flow: no validate_tp_mesh, and
 * tp_shard_plan ignored. */
static const char *const nemotron_traits[] = {
    "own_flow=NemotronHForCausalLM", NULL};

TPX_PLUGIN_EXPORT int register_parallel_strategy(const tpx_plugin_host *host,
                                                 tpx_plugin_info *info) {
  static const tpxp_plugin_desc desc = {
      .name = "nemotron",
      .version = "1.0.0",
      .description =
          "NemotronH hybrid Mamba2/attention/MLP strategy (lm_head + MLP "
          "blocks; sequence parallel refused) and Nemotron-Labs-Diffusion",
      .architectures = nemotron_architectures,
      .plans = NULL,
      .traits = nemotron_traits,
  };
  return tpxp_register(host, info, &desc);
}

TPX_PLUGIN_EXPORT int get_plan(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                               const tpx_plugin_plan_request *req) {
  int st = tpxp_plain_plan_request(host, ctx, req, "nemotron");
  if (st != TPX_PLUGIN_OK)
    return st;
  switch (kind_of(req->architecture)) {
  case NEM_H:
    return nemotron_h_plan(host, ctx, req);
  case NEM_DIFFUSION:
    return nemotron_diffusion_plan(host, ctx, req->sequence_parallel,
                                   req->tp_size);
  default:
    return not_served(host, ctx, req->architecture);
  }
}

TPX_PLUGIN_EXPORT int tpx_plugin_get_skeleton(const tpx_plugin_host *host,
                                              tpx_plugin_ctx *ctx,
                                              const char *architecture) {
  if (host == NULL)
    return TPX_PLUGIN_INVALID;
  switch (kind_of(architecture)) {
  case NEM_H:
    return nemotron_h_skeleton(host, ctx);
  case NEM_DIFFUSION:
    return nemotron_diffusion_skeleton(host, ctx);
  default:
    return not_served(host, ctx, architecture);
  }
}

/* NemotronH: sequence parallelism refused and a tied head left unsynced,
 * as diagnostics (the diffusion model has nothing beyond validate_tp_mesh,
 * which the host runs). */
TPX_PLUGIN_EXPORT int tpx_plugin_validate(const tpx_plugin_host *host,
                                          tpx_plugin_ctx *ctx,
                                          const tpx_plugin_plan_request *req) {
  if (host == NULL)
    return TPX_PLUGIN_INVALID;
  if (!tpxp_request_ok(req))
    return tpxp_fail(host, ctx, TPX_PLUGIN_INVALID,
                     "nemotron: malformed validate request");
  switch (kind_of(req->architecture)) {
  case NEM_H:
    return nemotron_h_validate(host, ctx, req);
  case NEM_DIFFUSION:
    return TPX_PLUGIN_OK;
  default:
    return not_served(host, ctx, req->architecture);
  }
}

/* NemotronH wraps every decoder block as its own FSDP unit; the diffusion
 * model uses tpx's default rule (no units listed). */
TPX_PLUGIN_EXPORT int tpx_plugin_fsdp_units(const tpx_plugin_host *host,
                                            tpx_plugin_ctx *ctx,
                                            const char *architecture) {
  if (host == NULL)
    return TPX_PLUGIN_INVALID;
  switch (kind_of(architecture)) {
  case NEM_H:
    return nemotron_h_fsdp_units(host, ctx);
  case NEM_DIFFUSION:
    return TPX_PLUGIN_OK;
  default:
    return not_served(host, ctx, architecture);
  }
}

TPX_PLUGIN_EXPORT int tpx_plugin_fp32_params(const tpx_plugin_host *host,
                                             tpx_plugin_ctx *ctx,
                                             const char *architecture) {
  if (host == NULL)
    return TPX_PLUGIN_INVALID;
  switch (kind_of(architecture)) {
  case NEM_H:
    return nemotron_h_fp32_params(host, ctx);
  case NEM_DIFFUSION:
    return TPX_PLUGIN_OK;
  default:
    return not_served(host, ctx, architecture);
  }
}
