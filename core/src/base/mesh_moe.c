/* mesh_moe.c — upstream's second mesh for expert parallelism: the ranks of
 * the main mesh (tpx models no pipeline parallelism, so every rank is a
 * non-pipeline rank) flattened in rank order and unflattened to
 * ("ep_shard", "ep") = (world / ep, ep), as NeMo Automodel 0.7.0's
 * _create_moe_mesh builds it (docs/SEMANTICS.md "Expert parallelism"). An
 * EP group is therefore `ep` consecutive ranks, which may fold tp peers of
 * the main mesh into one EP group. Arithmetic only, as mesh.c. */
#include "tpx/mesh.h"

#include <stddef.h>

tpx_status tpx_mesh_create_moe(const tpx_mesh *main_mesh, int64_t ep,
                               tpx_mesh **out, tpx_error *err) {
  if (out == NULL || main_mesh == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_mesh_create_moe: main_mesh or out is NULL");
  *out = NULL;
  int64_t world = tpx_mesh_world_size(main_mesh);
  if (ep < 1)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "mesh: ep has size %lld; sizes must be >= 1",
                         (long long)ep);
  /* Upstream's own words (mesh_utils.py), which also cover ep > world. */
  if (world % ep != 0)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "non_pp_size=%lld must be a multiple of ep_size=%lld",
                         (long long)world, (long long)ep);
  const char *names[2] = {"ep_shard", "ep"};
  int64_t sizes[2] = {world / ep, ep};
  return tpx_mesh_create(names, sizes, 2, out, err);
}
