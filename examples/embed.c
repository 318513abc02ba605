/* embed.c — the README's embedding example: plan Llama-3.2-1B on tp=2 x
 * dp_shard=2 and print which slice of q_proj each rank holds. Built and run
 * as a test so the README never drifts from the API. */
#include <stdio.h>
#include <tpx/registry.h>
#include <tpx/select.h>
#include <tpx/sharding.h>
#include <tpx/tpx.h>

int main(int argc, char **argv) {
  const char *config =
      argc > 1 ? argv[1] : "tests/data/configs/Llama-3.2-1B/config.json";
  tpx_error err = {0};
  tpx_model *model = NULL;
  tpx_registry *reg = NULL;
  tpx_mesh *mesh = NULL;
  tpx_selection *sel = NULL;
  tpx_sharding *sh = NULL;
  tpx_diag_list *diags = NULL;
  const char *dims[] = {"dp_shard", "tp"};
  const int64_t sizes[] = {2, 2};
  tpx_select_options opts = TPX_SELECT_OPTIONS_INIT;
  opts.tp_size = 2;
  if (tpx_model_load_config(config, &model, &err) ||
      tpx_registry_create(&reg, &err) || tpx_registry_load_default(reg, &err) ||
      tpx_registry_build_skeleton(reg, model, &err) ||
      tpx_diag_list_create(&diags, &err) ||
      tpx_select_plan(reg, model, &opts, &sel, diags, &err) ||
      tpx_mesh_create(dims, sizes, 2, &mesh, &err)) {
    fprintf(stderr, "tpx: %s\n", err.message);
    return 1;
  }
  tpx_sharding_options so = TPX_SHARDING_OPTIONS_INIT;
  so.selection =
      sel; /* handed over whole: the plan, FSDP units, fp32 parameters */
  if (tpx_sharding_create(model, NULL, mesh, &so, &sh, &err)) {
    fprintf(stderr, "tpx: %s\n", err.message);
    return 1;
  }
  int64_t p =
      tpx_model_find_param(model, "model.layers.0.self_attn.q_proj.weight");
  for (int64_t rank = 0; rank < tpx_mesh_world_size(mesh); rank++) {
    tpx_slice s;
    tpx_sharding_local_slice(sh, p, rank, &s, NULL);
    printf("rank %lld: q_proj rows [%lld, %lld) cols [%lld, %lld), %lld bytes "
           "on this rank in all\n",
           (long long)rank, (long long)s.offset[0],
           (long long)(s.offset[0] + s.length[0]), (long long)s.offset[1],
           (long long)(s.offset[1] + s.length[1]),
           (long long)tpx_sharding_rank_param_bytes(sh, rank));
  }
  tpx_sharding_destroy(sh);
  tpx_selection_destroy(sel);
  tpx_diag_list_destroy(diags);
  tpx_mesh_destroy(mesh);
  tpx_registry_destroy(reg);
  tpx_model_destroy(model);
  return 0;
}
