/* plan_shard.c — a selection's plan applied to a (dp_replicate, dp_shard,
 * tp) mesh: the sharding options from what the plugin chose (FSDP units,
 * fp32 parameters), shared by the report and the mesh advisor. */
#include <stdlib.h>

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
  /* The strategy's mixed-precision default (Wan bf16/f32/f32, Hunyuan and
   * LTX-2 output bf16, ...) over tpx's. */
  tpx_mp_policy mp = {opts.param_dtype, opts.reduce_dtype, opts.output_dtype};
  tpx_status mst = tpx_selection_strategy_mp(sel, &mp, err);
  if (mst != TPX_OK) return mst;
  opts.param_dtype = mp.param_dtype;
  opts.reduce_dtype = mp.reduce_dtype;
  opts.output_dtype = mp.output_dtype;
  size_t nu = tpx_selection_num_fsdp_units(sel);
  size_t nf = tpx_selection_num_fp32(sel);
  const char **units = calloc(nu ? nu : 1, sizeof *units);
  int *reshard = calloc(nu ? nu : 1, sizeof *reshard);
  const char **fp32 = calloc(nf ? nf : 1, sizeof *fp32);
  tpx_status st;
  if (!units || !reshard || !fp32) {
    st = tpx_error_set(err, TPX_NO_MEMORY, "out of memory");
    goto out;
  }
  for (size_t i = 0; i < nu; i++)
    units[i] = tpx_selection_fsdp_unit(sel, i, &reshard[i]);
  opts.num_fsdp_units = nu;
  opts.fsdp_units = nu ? units : NULL;
  opts.fsdp_unit_reshard = nu ? reshard : NULL;
  for (size_t i = 0; i < nf; i++) fp32[i] = tpx_selection_fp32(sel, i);
  opts.num_fp32_params = nf;
  opts.fp32_params = nf ? fp32 : NULL;
  st = tpx_sharding_create(model, tpx_selection_plan(sel), mesh, &opts, out,
                           err);
out:
  free(units);
  free(reshard);
  free(fp32);
  return st;
}
