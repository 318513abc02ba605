/* cp_diags.c — what a sharding says about its context-parallel and
 * data-parallel mesh (docs/SEMANTICS.md "Context parallelism"): cp without
 * FSDP, FSDP that does not shard over cp, the CP-aware linear-attention
 * modules that receive the cp mesh, and the pure-replication mesh upstream
 * refuses. Diagnostics only: nothing here changes a placement. */
#include <string.h>

#include "base/fqn.h"
#include "model/model_view.h"
#include "shard/shard_internal.h"

static tpx_status add_failed(tpx_status st, tpx_error *err) {
  return st == TPX_OK ? TPX_OK : tpx__shard_oom(err, "diagnostics");
}

/* 1 when module m is a gated delta-net linear attention: named linear_attn
 * and holding the decay parameters A_log and dt_bias itself. */
static int is_delta_net(const tpx_model *model, int64_t m, size_t np) {
  const char *fqn = tpx_model_module_fqn(model, m);
  if (!fqn || strcmp(tpx__fqn_last_atom(fqn), "linear_attn") != 0)
    return 0;
  int has_a = 0, has_dt = 0;
  for (size_t p = 0; p < np; p++) {
    tpx_param_info pi;
    if (tpx_model_param(model, (int64_t)p, &pi, NULL) != TPX_OK ||
        pi.module != m)
      continue;
    has_a |= strcmp(pi.name, "A_log") == 0;
    has_dt |= strcmp(pi.name, "dt_bias") == 0;
  }
  return has_a && has_dt;
}

/* Upstream's Qwen3.5 strategy hands the cp mesh to every CP-aware gated
 * delta-net module: the report names them. */
static tpx_status linear_attention(tpx_sharding *sh, tpx_error *err) {
  size_t nm = sh->num_modules, np = sh->num_params, count = 0;
  int64_t first = -1, last = -1;
  for (size_t m = 1; m < nm; m++)
    if (is_delta_net(sh->model, (int64_t)m, np)) {
      if (first < 0)
        first = (int64_t)m;
      last = (int64_t)m;
      count++;
    }
  if (count == 0)
    return TPX_OK;
  return add_failed(
      tpx_diag_add(sh->diags, TPX_DIAG_INFO, "cp-linear-attention",
                   tpx_model_module_fqn(sh->model, first),
                   "nothing to do in the plan: upstream's Qwen3.5 "
                   "strategy hands these modules the cp mesh itself",
                   "%zu gated delta-net linear-attention module%s (%s%s%s) "
                   "receive the cp mesh of %lld ranks, as upstream's "
                   "CP-aware CPAwareGatedDeltaNet does",
                   count, count > 1 ? "s" : "",
                   tpx_model_module_fqn(sh->model, first),
                   count > 1 ? " .. " : "",
                   count > 1 ? tpx_model_module_fqn(sh->model, last) : "",
                   (long long)sh->cp),
      err);
}

tpx_status tpx__cp_diags(tpx_sharding *sh, tpx_error *err) {
  tpx_status st = TPX_OK;
  int64_t dp_shard =
      sh->dps_dim >= 0 ? tpx_mesh_dim_size(sh->mesh, sh->dps_dim) : 1;
  if (sh->opts.fsdp && sh->dpr > 1 && dp_shard == 1)
    st = tpx_diag_add(sh->diags, TPX_DIAG_INFO, "upstream-refuses-mesh",
                      "dp_replicate",
                      "use dp_shard > 1 (HSDP) to run it upstream; tpx "
                      "plans it as pure replication",
                      "dp_replicate %lld is the whole data-parallel size "
                      "(dp_shard 1): upstream would refuse this mesh "
                      "(\"DDP usecase is not supported by FSDP2\")",
                      (long long)sh->dpr);
  if (st == TPX_OK && sh->cp > 1 && !sh->opts.fsdp)
    st = tpx_diag_add(sh->diags, TPX_DIAG_WARNING, "cp-without-fsdp", "cp",
                      "keep FSDP on (drop --no-fsdp) or use cp 1",
                      "context parallelism (cp %lld) without FSDP: upstream "
                      "runs cp only under FSDP2 (its DDP path refuses it)",
                      (long long)sh->cp);
  int fsdp_has_cp =
      sh->cp_dim >= sh->dps_dim && sh->cp_dim < sh->dps_dim + sh->dps_ndims;
  if (st == TPX_OK && sh->cp > 1 && sh->opts.fsdp && !fsdp_has_cp)
    st = tpx_diag_add(sh->diags, TPX_DIAG_WARNING, "cp-not-in-fsdp", "cp",
                      "shard over the flattened view: dp_shard_dim "
                      "\"dp_shard_cp\" (tpx_mesh_create_fsdp2 makes it)",
                      "FSDP shards over '%s' only, so the %lld cp ranks "
                      "hold the same shards; upstream shards over "
                      "dp_shard_cp",
                      sh->fsdp_mesh[0] ? sh->fsdp_mesh : "(none)",
                      (long long)sh->cp);
  if (st != TPX_OK)
    return add_failed(st, err);
  return sh->cp > 1 ? linear_attention(sh, err) : TPX_OK;
}
