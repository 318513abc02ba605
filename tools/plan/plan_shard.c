/* plan_shard.c — a selection applied to a (dp_replicate, dp_shard, [cp,] tp)
 * mesh, shared by the report and the mesh advisor. The selection is handed
 * to tpx_sharding_create whole (tpx_sharding_options.selection): the plan,
 * FSDP units, fp32 parameters and the strategy's mixed-precision default
 * all come from it there. */
#include "plan_extra.h"

tpx_status plan_mesh(int64_t dpr, int64_t dps, int64_t cp, int64_t tp,
                     tpx_mesh **out, tpx_error *err) {
  return tpx_mesh_create_fsdp2(dpr, dps, cp > 1 ? cp : 1, tp, out, err);
}

tpx_status plan_shard(const tpx_model *model, const tpx_selection *sel,
                      const tpx_mesh *mesh, int fsdp, tpx_sharding **out,
                      tpx_error *err) {
  tpx_sharding_options opts = TPX_SHARDING_OPTIONS_INIT;
  opts.fsdp = fsdp;
  opts.selection = sel;
  /* Upstream shards over dp_shard_cp; at cp 1 that is dp_shard itself,
   * named so to keep the reports of cp-less meshes as they were. */
  if (tpx_mesh_dim_index(mesh, "cp") >= 0)
    opts.dp_shard_dim = "dp_shard_cp";
  return tpx_sharding_create(model, NULL, mesh, &opts, out, err);
}
