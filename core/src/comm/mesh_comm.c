/* mesh_comm.c — a world communicator bound to a mesh, plus one sub-group
 * communicator per mesh dim (split with tpx_mesh_group_ranks), the
 * flattened views asked for (tpx_mesh_comm_view) and the clock of the
 * calls made over it (tpx_mesh_comm_time; clock.c).
 *
 * Not a backend: splitting is delegated to the world's backend. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_impl.h"

struct tpx_mesh_comm {
  tpx_comm *world;      /* borrowed */
  const tpx_mesh *mesh; /* borrowed */
  int ndim;
  tpx_comm *dims[TPX_MESH_MAX_DIMS]; /* owned */
  /* flattened views split on first request (owned), by name */
  int nviews;
  char view_names[TPX_MESH_MAX_DIMS][32];
  tpx_comm *views[TPX_MESH_MAX_DIMS];
  tpx__comm_clock clock;
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
    mc->dims[i]->clock = &mc->clock;
  }
  *out = mc;
  return TPX_OK;
}

void tpx_mesh_comm_destroy(tpx_mesh_comm *mc) {
  if (!mc)
    return;
  for (int i = 0; i < mc->ndim; i++) tpx_comm_destroy(mc->dims[i]);
  for (int i = 0; i < mc->nviews; i++) tpx_comm_destroy(mc->views[i]);
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

tpx_status tpx_mesh_comm_view(tpx_mesh_comm *mc, const char *name,
                              tpx_comm **out, tpx_error *err) {
  if (out)
    *out = NULL;
  if (!mc || !name || !out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "mesh_comm_view: %s is NULL",
                         !mc     ? "mesh comm"
                         : !name ? "name"
                                 : "out");
  int d = tpx_mesh_dim_index(mc->mesh, name);
  if (d >= 0) {
    *out = mc->dims[d];
    return TPX_OK;
  }
  for (int i = 0; i < mc->nviews; i++)
    if (strcmp(mc->view_names[i], name) == 0) {
      *out = mc->views[i];
      return TPX_OK;
    }
  if (mc->nviews == TPX_MESH_MAX_DIMS || strlen(name) >= 32)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "mesh_comm_view: cannot keep view '%s' (at most %d "
                         "views, names under 32 bytes)",
                         name, TPX_MESH_MAX_DIMS);
  /* the split checks the name against the mesh's dims and views */
  tpx_comm *c = NULL;
  tpx_status st = tpx_comm_split_mesh_dim(mc->world, mc->mesh, name, &c, err);
  if (st)
    return st;
  c->clock = &mc->clock;
  snprintf(mc->view_names[mc->nviews], 32, "%s", name);
  mc->views[mc->nviews++] = c;
  *out = c;
  return TPX_OK;
}

tpx__comm_clock *tpx__mesh_comm_clock(const tpx_mesh_comm *mc) {
  return mc ? (tpx__comm_clock *)&mc->clock : NULL;
}

tpx_status tpx_mesh_comm_time(const tpx_mesh_comm *mc, tpx_comm_time *out,
                              tpx_error *err) {
  if (!mc || !out)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "mesh_comm_time: %s is NULL",
                         !mc ? "mesh comm" : "out");
  /* the first tpx_comm_time ended at `calls`; the MoE fields came after */
  const size_t v1 = offsetof(tpx_comm_time, calls) + sizeof(int64_t);
  if (out->struct_size < v1)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "mesh_comm_time: out->struct_size %zu is smaller "
                         "than tpx_comm_time's first version (%zu); "
                         "initialise it with TPX_COMM_TIME_INIT",
                         out->struct_size, v1);
  const tpx__comm_clock *c = &mc->clock;
  out->tp_seconds = c->seconds[TPX__CLOCK_TP];
  out->cp_seconds = c->seconds[TPX__CLOCK_CP];
  out->runtime_seconds = c->seconds[TPX__CLOCK_RUNTIME];
  double moe = c->seconds[TPX__CLOCK_MOE];
  out->seconds = out->tp_seconds + out->cp_seconds + out->runtime_seconds + moe;
  out->calls = c->calls[TPX__CLOCK_TP] + c->calls[TPX__CLOCK_CP] +
               c->calls[TPX__CLOCK_RUNTIME] + c->calls[TPX__CLOCK_MOE];
#define COVERS(f)                                                              \
  (out->struct_size >= offsetof(tpx_comm_time, f) + sizeof out->f)
  if (COVERS(moe_seconds))
    out->moe_seconds = moe;
  if (COVERS(moe_calls))
    out->moe_calls = c->calls[TPX__CLOCK_MOE];
#undef COVERS
  return TPX_OK;
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
