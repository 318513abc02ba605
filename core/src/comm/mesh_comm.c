/* mesh_comm.c — a world communicator bound to a mesh, plus one sub-group
 * communicator per mesh dim (split with tpx_mesh_group_ranks).
 *
 * Not a backend: splitting is delegated to the world's backend. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_impl.h"

struct tpx_mesh_comm {
  tpx_comm *world;      /* borrowed */
  const tpx_mesh *mesh; /* borrowed */
  int ndim;
  tpx_comm *dims[TPX_MESH_MAX_DIMS]; /* owned */
};

tpx_status tpx_comm_split_mesh_dim(tpx_comm *world, const tpx_mesh *mesh,
                                   const char *dim, tpx_comm **out,
                                   tpx_error *err) {
  if (out)
    *out = NULL;
  if (!world || !mesh || !dim || !out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "split_mesh_dim: %s is NULL",
                         !world  ? "world"
                         : !mesh ? "mesh"
                         : !dim  ? "dim"
                                 : "out");
  if (tpx_mesh_world_size(mesh) != world->size)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "split_mesh_dim: the mesh has %lld ranks but the "
                         "%s world has %d",
                         (long long)tpx_mesh_world_size(mesh),
                         world->iface->name, world->size);
  int64_t gsize = 0, index = 0;
  tpx_status st = tpx_mesh_size_of(mesh, dim, &gsize, err);
  if (st != TPX_OK)
    return st;
  int64_t *group = malloc((size_t)gsize * sizeof *group);
  if (!group)
    return tpx_error_set(err, TPX_NO_MEMORY, "split_mesh_dim: %lld ranks",
                         (long long)gsize);
  st = tpx_mesh_group_ranks(mesh, dim, world->rank, group, &index, err);
  if (st == TPX_OK)
    st = world->iface->split(world, group, (int)gsize, (int)index, out, err);
  free(group);
  if (st == TPX_OK) {
    (*out)->timeout_s = world->timeout_s;
    snprintf((*out)->dim, sizeof(*out)->dim, "%s", dim);
  }
  return st;
}

tpx_status tpx_mesh_comm_create(tpx_comm *world, const tpx_mesh *mesh,
                                tpx_mesh_comm **out, tpx_error *err) {
  if (out)
    *out = NULL;
  if (!world || !mesh || !out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "mesh_comm_create: %s is NULL",
                         !world  ? "world"
                         : !mesh ? "mesh"
                                 : "out");
  tpx_mesh_comm *mc = calloc(1, sizeof *mc);
  if (!mc)
    return tpx_error_set(err, TPX_NO_MEMORY, "mesh_comm_create");
  mc->world = world;
  mc->mesh = mesh;
  mc->ndim = tpx_mesh_ndim(mesh);
  for (int i = 0; i < mc->ndim; i++) {
    tpx_status st = tpx_comm_split_mesh_dim(
        world, mesh, tpx_mesh_dim_name(mesh, i), &mc->dims[i], err);
    if (st != TPX_OK) {
      tpx_mesh_comm_destroy(mc);
      return st;
    }
  }
  *out = mc;
  return TPX_OK;
}

void tpx_mesh_comm_destroy(tpx_mesh_comm *mc) {
  if (!mc)
    return;
  for (int i = 0; i < mc->ndim; i++) tpx_comm_destroy(mc->dims[i]);
  free(mc);
}

tpx_comm *tpx_mesh_comm_world(const tpx_mesh_comm *mc) {
  return mc ? mc->world : NULL;
}
tpx_comm *tpx_mesh_comm_dim(const tpx_mesh_comm *mc, int dim) {
  if (!mc || dim < 0 || dim >= mc->ndim)
    return NULL;
  return mc->dims[dim];
}
const tpx_mesh *tpx_mesh_comm_mesh(const tpx_mesh_comm *mc) {
  return mc ? mc->mesh : NULL;
}

tpx_status tpx__mesh_comm_check(tpx_mesh_comm *mc, const tpx_mesh *mesh,
                                const char *what, tpx_error *err) {
  if (!mc)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "%s: mesh comm is NULL",
                         what);
  const tpx_mesh *b = mc->mesh;
  int same = b && tpx_mesh_ndim(mesh) == tpx_mesh_ndim(b);
  for (int m = 0; same && m < tpx_mesh_ndim(mesh); m++)
    same = tpx_mesh_dim_size(mesh, m) == tpx_mesh_dim_size(b, m) &&
           strcmp(tpx_mesh_dim_name(mesh, m), tpx_mesh_dim_name(b, m)) == 0;
  if (!same)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "%s: the mesh comm's mesh differs from the "
                         "sharding's mesh (dims, names or sizes)",
                         what);
  return TPX_OK;
}
