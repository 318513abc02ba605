/* tpxp_moe.c — skeleton pieces of transformers' mixture-of-experts blocks
 * (fused 3-D experts, top-k router) and the get_plan answer for an
 * architecture upstream serves through the Hugging Face plan, shared by the
 * moe, qwen and deepseek plugins. Shapes follow transformers 5 (the
 * MixtralExperts / Qwen3MoeExperts / DeepseekV4Experts parameters). Not the
 * per-expert checkpoint layout: the host's safetensors reader folds that
 * onto these tensors. */
#include "tpxp_common.h"

int tpxp_sk_fused_experts(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                          const char *fqn, int64_t experts, int64_t hidden,
                          int64_t intermediate, const char *dtype) {
  int64_t shape[3];
  int st;
  if (experts <= 0 || hidden <= 0 || intermediate <= 0)
    return tpxp_fail(host, ctx, TPX_PLUGIN_ERROR,
                     "%s: experts (%lld), hidden (%lld) and intermediate "
                     "(%lld) sizes must be positive",
                     fqn, (long long)experts, (long long)hidden,
                     (long long)intermediate);
  if ((st = tpxp_sk_module(host, ctx, fqn, "other")) != TPX_PLUGIN_OK)
    return st;
  shape[0] = experts;
  shape[1] = 2 * intermediate;
  shape[2] = hidden;
  if ((st = host->skeleton_add_param(ctx, fqn, "gate_up_proj", shape, 3,
                                     dtype)) != TPX_PLUGIN_OK)
    return st;
  shape[1] = hidden;
  shape[2] = intermediate;
  return host->skeleton_add_param(ctx, fqn, "down_proj", shape, 3, dtype);
}

int tpxp_sk_router(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                   const char *fqn, int64_t experts, int64_t hidden,
                   const char *dtype) {
  const tpxp_sk_row rows[] = {
      TPXP_SK_MOD("", "other"),
      TPXP_SK_PRM("", "weight", experts, hidden),
  };
  return TPXP_SK_ROWS(host, ctx, fqn, rows, dtype);
}

int tpxp_refuse_to_hf_flow(const tpx_plugin_host *host, tpx_plugin_ctx *ctx,
                           const char *family, const char *arch,
                           const char *what) {
  return tpxp_fail(
      host, ctx, TPX_PLUGIN_REFUSED,
      "%s: '%s' has no plan function upstream (not in "
      "PARALLELIZE_FUNCTIONS), so Automodel uses the default base plan: "
      "get_hf_tp_shard_plan cannot translate its transformers-5 styles (%s; "
      "ValueError 'Unknown parallel style'); this plugin gives the skeleton "
      "only",
      family, arch != NULL ? arch : "(null)", what);
}
