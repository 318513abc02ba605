/* mesh.c — named device mesh arithmetic (torch DeviceMesh): rank <-> coords in
 * row-major order, flattened views and the rank groups along a dim or view.
 *
 * Not a communicator and not a process group: no I/O, no global state. */
#include "base/grow.h"
#include "base/mesh_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Validate a dim / view name: non-empty and short enough for the fixed
 * buffers. `what` says which argument it was, for the message. */
static tpx_status check_name(const char *name, const char *what, int index,
                             tpx_error *err) {
  if (name == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "mesh: %s %d is NULL", what,
                         index);
  if (name[0] == '\0')
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "mesh: %s %d has an empty name", what, index);
  if (strlen(name) >= TPX_MESH_NAME_MAX)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "mesh: %s name \"%.40s...\" is too long (at most %d "
                         "characters)",
                         what, name, TPX_MESH_NAME_MAX - 1);
  return TPX_OK;
}

tpx_status tpx_mesh_create(const char *const *names, const int64_t *sizes,
                           int ndim, tpx_mesh **out, tpx_error *err) {
  if (out == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_mesh_create: out is NULL");
  *out = NULL;
  if (names == NULL || sizes == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_mesh_create: %s is NULL",
                         names == NULL ? "names" : "sizes");
  if (ndim < 1 || ndim > TPX_MESH_MAX_DIMS)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "mesh: ndim=%d is out of range (1..%d)", ndim,
                         TPX_MESH_MAX_DIMS);
  int64_t world = 1;
  for (int i = 0; i < ndim; i++) {
    tpx_status st = check_name(names[i], "dim", i, err);
    if (st != TPX_OK)
      return st;
    for (int j = 0; j < i; j++)
      if (strcmp(names[i], names[j]) == 0)
        return tpx_error_set(err, TPX_ALREADY_EXISTS,
                             "mesh: dim name \"%s\" is used twice (dims %d "
                             "and %d)",
                             names[i], j, i);
    if (sizes[i] < 1)
      return tpx_error_set(err, TPX_OUT_OF_RANGE,
                           "mesh: dim \"%s\" has size %lld; sizes must be >= 1",
                           names[i], (long long)sizes[i]);
    if (world > INT64_MAX / sizes[i])
      return tpx_error_set(err, TPX_OUT_OF_RANGE,
                           "mesh: world size overflows int64 at dim \"%s\" "
                           "(size %lld)",
                           names[i], (long long)sizes[i]);
    world *= sizes[i];
  }
  tpx_mesh *m = calloc(1, sizeof *m);
  if (m == NULL)
    return tpx_error_set(err, TPX_NO_MEMORY, "mesh: out of memory");
  m->ndim = ndim;
  m->world = world;
  int64_t stride = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    memcpy(m->names[i], names[i], strlen(names[i]) + 1);
    m->sizes[i] = sizes[i];
    m->strides[i] = stride;
    stride *= sizes[i];
  }
  *out = m;
  return TPX_OK;
}

void tpx_mesh_destroy(tpx_mesh *mesh) {
  if (mesh == NULL)
    return;
  free(mesh->views);
  free(mesh);
}

int tpx_mesh_ndim(const tpx_mesh *mesh) { return mesh ? mesh->ndim : 0; }

int64_t tpx_mesh_world_size(const tpx_mesh *mesh) {
  return mesh ? mesh->world : 0;
}

const char *tpx_mesh_dim_name(const tpx_mesh *mesh, int i) {
  if (mesh == NULL || i < 0 || i >= mesh->ndim)
    return NULL;
  return mesh->names[i];
}

int64_t tpx_mesh_dim_size(const tpx_mesh *mesh, int i) {
  if (mesh == NULL || i < 0 || i >= mesh->ndim)
    return 0;
  return mesh->sizes[i];
}

int tpx_mesh_dim_index(const tpx_mesh *mesh, const char *name) {
  if (mesh == NULL || name == NULL)
    return -1;
  for (int i = 0; i < mesh->ndim; i++)
    if (strcmp(mesh->names[i], name) == 0)
      return i;
  return -1;
}

static const tpx__mesh_view *find_view(const tpx_mesh *mesh, const char *name) {
  for (int i = 0; i < mesh->nviews; i++)
    if (strcmp(mesh->views[i].name, name) == 0)
      return &mesh->views[i];
  return NULL;
}

/* Resolve a dim or view name to the list of real dims it spans. */
static tpx_status resolve(const tpx_mesh *mesh, const char *name, int *dims,
                          int *ndims, int64_t *size, tpx_error *err) {
  int i = tpx_mesh_dim_index(mesh, name);
  if (i >= 0) {
    dims[0] = i;
    *ndims = 1;
    *size = mesh->sizes[i];
    return TPX_OK;
  }
  const tpx__mesh_view *v = find_view(mesh, name);
  if (v == NULL) {
    /* List the names that do exist: the usual cause is a typo or a view
     * that was never flattened. */
    char known[256];
    size_t used = 0;
    known[0] = '\0';
    for (int k = 0; k < mesh->ndim + mesh->nviews && used < sizeof known; k++) {
      const char *n =
          k < mesh->ndim ? mesh->names[k] : mesh->views[k - mesh->ndim].name;
      int w =
          snprintf(known + used, sizeof known - used, "%s%s", k ? ", " : "", n);
      if (w < 0)
        break;
      used += (size_t)w;
    }
    return tpx_error_set(err, TPX_NOT_FOUND,
                         "mesh: no dim or flattened view named \"%.64s\" "
                         "(known: %s)",
                         name, known);
  }
  memcpy(dims, v->dims, sizeof(int) * (size_t)v->ndims);
  *ndims = v->ndims;
  *size = v->size;
  return TPX_OK;
}

tpx_status tpx_mesh_size_of(const tpx_mesh *mesh, const char *name,
                            int64_t *out, tpx_error *err) {
  if (mesh == NULL || name == NULL || out == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_mesh_size_of: %s is NULL",
                         mesh == NULL   ? "mesh"
                         : name == NULL ? "name"
                                        : "out");
  int dims[TPX_MESH_MAX_DIMS], nd;
  return resolve(mesh, name, dims, &nd, out, err);
}

tpx_status tpx_mesh_view_dims(const tpx_mesh *mesh, const char *name, int *dims,
                              int *ndims, tpx_error *err) {
  if (mesh == NULL || name == NULL || dims == NULL || ndims == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_mesh_view_dims: a NULL argument");
  int64_t size;
  return resolve(mesh, name, dims, ndims, &size, err);
}

tpx_status tpx_mesh_coords(const tpx_mesh *mesh, int64_t rank, int64_t *coords,
                           tpx_error *err) {
  if (mesh == NULL || coords == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_mesh_coords: %s is NULL",
                         mesh == NULL ? "mesh" : "coords");
  if (rank < 0 || rank >= mesh->world)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "mesh: rank %lld is out of range [0, %lld)",
                         (long long)rank, (long long)mesh->world);
  for (int i = 0; i < mesh->ndim; i++) {
    coords[i] = rank / mesh->strides[i];
    rank %= mesh->strides[i];
  }
  return TPX_OK;
}

tpx_status tpx_mesh_rank(const tpx_mesh *mesh, const int64_t *coords,
                         int64_t *out, tpx_error *err) {
  if (mesh == NULL || coords == NULL || out == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT, "tpx_mesh_rank: %s is NULL",
                         mesh == NULL     ? "mesh"
                         : coords == NULL ? "coords"
                                          : "out");
  int64_t r = 0;
  for (int i = 0; i < mesh->ndim; i++) {
    if (coords[i] < 0 || coords[i] >= mesh->sizes[i])
      return tpx_error_set(err, TPX_OUT_OF_RANGE,
                           "mesh: coordinate %lld on dim \"%s\" is out of "
                           "range [0, %lld)",
                           (long long)coords[i], mesh->names[i],
                           (long long)mesh->sizes[i]);
    r += coords[i] * mesh->strides[i];
  }
  *out = r;
  return TPX_OK;
}

tpx_status tpx_mesh_flatten(tpx_mesh *mesh, const char *name,
                            const char *const *dims, int ndims,
                            tpx_error *err) {
  if (mesh == NULL || dims == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_mesh_flatten: %s is NULL",
                         mesh == NULL ? "mesh" : "dims");
  tpx_status st = check_name(name, "flattened view", 0, err);
  if (st != TPX_OK)
    return st;
  if (ndims < 1 || ndims > mesh->ndim)
    return tpx_error_set(err, TPX_OUT_OF_RANGE,
                         "mesh: flattened view \"%s\" over %d dims; expected "
                         "1..%d",
                         name, ndims, mesh->ndim);
  tpx__mesh_view v;
  memset(&v, 0, sizeof v);
  memcpy(v.name, name, strlen(name) + 1);
  v.ndims = ndims;
  v.size = 1;
  for (int i = 0; i < ndims; i++) {
    if (dims[i] == NULL)
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "mesh: flattened view \"%s\": dim %d is NULL", name,
                           i);
    int d = tpx_mesh_dim_index(mesh, dims[i]);
    if (d < 0)
      return tpx_error_set(err, TPX_NOT_FOUND,
                           "mesh: flattened view \"%s\": unknown dim \"%.64s\"",
                           name, dims[i]);
    if (i > 0 && d <= v.dims[i - 1])
      return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                           "mesh: flattened view \"%s\": dims must be distinct "
                           "and in mesh order (\"%s\" comes after \"%s\")",
                           name, dims[i], dims[i - 1]);
    v.dims[i] = d;
    v.size *= mesh->sizes[d]; /* <= world, cannot overflow */
  }
  if (tpx_mesh_dim_index(mesh, name) >= 0)
    return tpx_error_set(err, TPX_ALREADY_EXISTS,
                         "mesh: flattened view \"%s\" clashes with a mesh dim "
                         "of that name",
                         name);
  const tpx__mesh_view *old = find_view(mesh, name);
  if (old != NULL) {
    /* Flattening the same dims again under the same name is harmless (torch
     * returns the cached view); a different definition is an error. */
    if (old->ndims == v.ndims &&
        memcmp(old->dims, v.dims, sizeof(int) * (size_t)v.ndims) == 0)
      return TPX_OK;
    return tpx_error_set(err, TPX_ALREADY_EXISTS,
                         "mesh: flattened view \"%s\" already exists over "
                         "other dims",
                         name);
  }
  if (TPX_GROW(mesh->views, mesh->cap_views, (size_t)mesh->nviews + 1, 4))
    return tpx_error_set(err, TPX_NO_MEMORY,
                         "mesh: out of memory adding view \"%s\"", name);
  mesh->views[mesh->nviews++] = v;
  return TPX_OK;
}

tpx_status tpx_mesh_group_ranks(const tpx_mesh *mesh, const char *name,
                                int64_t rank, int64_t *out, int64_t *index_out,
                                tpx_error *err) {
  if (mesh == NULL || name == NULL || out == NULL)
    return tpx_error_set(err, TPX_INVALID_ARGUMENT,
                         "tpx_mesh_group_ranks: %s is NULL",
                         mesh == NULL   ? "mesh"
                         : name == NULL ? "name"
                                        : "out");
  int dims[TPX_MESH_MAX_DIMS], nd;
  int64_t size;
  tpx_status st = resolve(mesh, name, dims, &nd, &size, err);
  if (st != TPX_OK)
    return st;
  int64_t coords[TPX_MESH_MAX_DIMS];
  st = tpx_mesh_coords(mesh, rank, coords, err);
  if (st != TPX_OK)
    return st;
  /* The group varies the spanned dims and fixes the others; start from the
   * member whose spanned coordinates are all zero. */
  int64_t base = rank, index = 0;
  for (int k = 0; k < nd; k++) {
    base -= coords[dims[k]] * mesh->strides[dims[k]];
    index = index * mesh->sizes[dims[k]] + coords[dims[k]];
  }
  for (int64_t g = 0; g < size; g++) {
    /* Decode g row-major over the spanned dims (last varies fastest). */
    int64_t rem = g, r = base;
    for (int k = nd - 1; k >= 0; k--) {
      int64_t s = mesh->sizes[dims[k]];
      r += (rem % s) * mesh->strides[dims[k]];
      rem /= s;
    }
    out[g] = r;
  }
  if (index_out != NULL)
    *index_out = index;
  return TPX_OK;
}
