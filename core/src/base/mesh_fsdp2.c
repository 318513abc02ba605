/* mesh_fsdp2.c — the standard named mesh of upstream's FSDP2 setup,
 * (dp_replicate, dp_shard, cp, tp) with its flattened views dp,
 * dp_shard_cp and dp_cp, so that every caller (tpx plan, tpx shard,
 * tpx-train, a trainer) builds the same one (docs/SEMANTICS.md "Context
 * parallelism"). Arithmetic only, as mesh.c. */
#include "tpx/mesh.h"

#include <stddef.h>

tpx_status tpx_mesh_create_fsdp2(int64_t dp_replicate, int64_t dp_shard,
                                 int64_t cp, int64_t tp, tpx_mesh **out,
                                 tpx_error *err) {
  if (out == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_mesh_create_fsdp2: out is NULL");
  *out = NULL;
  if (cp < 1)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "mesh: dim \"cp\" has size %lld; sizes must be >= 1",
                         (long long)cp);
  /* At cp 1 the cp dim is left out: the mesh (and every rank's coordinates)
   * stay what they were before cp existed. */
  int with_cp = cp > 1;
  const char *names[4] = {"dp_replicate", "dp_shard", "cp", "tp"};
  int64_t sizes[4] = {dp_replicate, dp_shard, cp, tp};
  if (!with_cp) {
    names[2] = "tp";
    sizes[2] = tp;
  }
  tpx_mesh *mesh = NULL;
  tpx_status st = tpx_mesh_create(names, sizes, with_cp ? 4 : 3, &mesh, err);
  const char *dp[2] = {"dp_replicate", "dp_shard"};
  const char *dsc[2] = {"dp_shard", "cp"};
  const char *dpc[3] = {"dp_replicate", "dp_shard", "cp"};
  if (st == TPX_OK)
    st = tpx_mesh_flatten(mesh, "dp", dp, 2, err);
  if (st == TPX_OK)
    st = tpx_mesh_flatten(mesh, "dp_shard_cp", dsc, with_cp ? 2 : 1, err);
  if (st == TPX_OK)
    st = tpx_mesh_flatten(mesh, "dp_cp", dpc, with_cp ? 3 : 2, err);
  if (st != TPX_OK) {
    tpx_mesh_destroy(mesh);
    return st;
  }
  *out = mesh;
  return TPX_OK;
}
