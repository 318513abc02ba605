/* plan_shard.c — a selection applied to a (dp_replicate, dp_shard, tp)
 * mesh, shared by the report and the mesh advisor. The selection is handed
 * to tpx_sharding_create whole (tpx_sharding_options.selection): the plan,
 * FSDP units, fp32 parameters and the strategy's mixed-precision default
 * all come from it there. */
#include "plan_extra.h"

tpx_status plan_mesh(int64_t dpr, int64_t dps, int64_t tp, tpx_mesh **out,
                     tpx_error *err) {
  const char *names[3] = {"dp_replicate", "dp_shard", "tp"};
  int64_t sizes[3] = {dpr, dps, tp};
  return tpx_mesh_create(names, sizes, 3, out, err);
}

tpx_status plan_shard(const tpx_model *model, const tpx_selection *sel,
                      const tpx_mesh *mesh, int fsdp, tpx_sharding **out,
                      tpx_error *err) {
  tpx_sharding_options opts = TPX_SHARDING_OPTIONS_INIT;
  opts.fsdp = fsdp;
  opts.selection = sel;
  return tpx_sharding_create(model, NULL, mesh, &opts, out, err);
}
