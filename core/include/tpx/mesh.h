/* tpx/mesh.h — a named device mesh, as torch's DeviceMesh.
 *
 * A mesh is an n-D grid of ranks with one name and size per dim, e.g.
 * ("dp_replicate", "dp_shard", "tp") = (1, 2, 4). Ranks map to coordinates in
 * row-major order (the last dim varies fastest), as torch.arange(world)
 * .view(sizes) does. Flattened views (e.g. "dp_shard_cp" = dp_shard x cp)
 * can be added and then used wherever a dim name is accepted for groups.
 *
 * Not a communicator: a mesh is pure arithmetic, see tpx/comm.h for that. */
#ifndef TPX_MESH_H
#define TPX_MESH_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/error.h"

TPX_BEGIN_DECLS

#define TPX_MESH_MAX_DIMS 8
#define TPX_MESH_NAME_MAX 32 /* longest dim name, including the NUL */

typedef struct tpx_mesh tpx_mesh;

/* Create a mesh with `ndim` dims (1..TPX_MESH_MAX_DIMS). Names must be
 * non-empty, unique, shorter than TPX_MESH_NAME_MAX; sizes >= 1; the world
 * size must fit in int64. On success *out is a new mesh the caller destroys.
 */
TPX_API tpx_status tpx_mesh_create(const char *const *names,
                                   const int64_t *sizes, int ndim,
                                   tpx_mesh **out, tpx_error *err);
/* NULL is a no-op. */
TPX_API void tpx_mesh_destroy(tpx_mesh *mesh);

TPX_API int tpx_mesh_ndim(const tpx_mesh *mesh);
/* Product of all dim sizes. */
TPX_API int64_t tpx_mesh_world_size(const tpx_mesh *mesh);
/* Borrowed; valid while the mesh lives. NULL if i is out of range. */
TPX_API const char *tpx_mesh_dim_name(const tpx_mesh *mesh, int i);
/* Size of dim i; 0 if out of range. */
TPX_API int64_t tpx_mesh_dim_size(const tpx_mesh *mesh, int i);
/* Index of a real (not flattened) dim, or -1. */
TPX_API int tpx_mesh_dim_index(const tpx_mesh *mesh, const char *name);

/* Size of a dim or of a flattened view by name; TPX_NOT_FOUND names the
 * unknown dim. */
TPX_API tpx_status tpx_mesh_size_of(const tpx_mesh *mesh, const char *name,
                                    int64_t *out, tpx_error *err);

/* rank -> coords[ndim] (row-major). */
TPX_API tpx_status tpx_mesh_coords(const tpx_mesh *mesh, int64_t rank,
                                   int64_t *coords, tpx_error *err);
/* coords[ndim] -> rank. */
TPX_API tpx_status tpx_mesh_rank(const tpx_mesh *mesh, const int64_t *coords,
                                 int64_t *out, tpx_error *err);

/* Add a flattened view named `name` over existing real dims (in the given
 * order, which must be increasing mesh order, as torch's _flatten requires).
 * Its size is the product; its local rank is the row-major index of the
 * rank's coordinates in those dims. */
TPX_API tpx_status tpx_mesh_flatten(tpx_mesh *mesh, const char *name,
                                    const char *const *dims, int ndims,
                                    tpx_error *err);

/* The real dims a dim or flattened view `name` spans, in mesh order: up to
 * TPX_MESH_MAX_DIMS indices into dims, their count in *ndims (1 for a real
 * dim). TPX_NOT_FOUND names the unknown dim. */
TPX_API tpx_status tpx_mesh_view_dims(const tpx_mesh *mesh, const char *name,
                                      int *dims, int *ndims, tpx_error *err);

/* The ranks in `rank`'s group along dim (or flattened view) `name`, ordered by
 * their index in that group. `out` must hold the group size (see
 * tpx_mesh_size_of); *index_out (may be NULL) receives `rank`'s own index in
 * the group. */
TPX_API tpx_status tpx_mesh_group_ranks(const tpx_mesh *mesh, const char *name,
                                        int64_t rank, int64_t *out,
                                        int64_t *index_out, tpx_error *err);

/* Upstream's FSDP2 mesh (docs/SEMANTICS.md "Context parallelism"): dims
 * ("dp_replicate", "dp_shard", "cp", "tp") numbered as torch's
 * init_device_mesh (row-major, tp fastest), with the flattened views "dp"
 * (dp_replicate x dp_shard), "dp_shard_cp" (dp_shard x cp, what FSDP shards
 * over) and "dp_cp" (dp_replicate x dp_shard x cp, what the loss and the
 * grad norm average over). With cp == 1 the cp dim is left out, the
 * three-dim mesh tpx has always planned on, and the views span the dims
 * that remain. Sizes >= 1. */
TPX_API tpx_status tpx_mesh_create_fsdp2(int64_t dp_replicate, int64_t dp_shard,
                                         int64_t cp, int64_t tp, tpx_mesh **out,
                                         tpx_error *err);

/* Upstream's MoE mesh for expert parallelism `ep` (docs/SEMANTICS.md
 * "Expert parallelism"): the ranks of `main_mesh` (all of them: tpx models
 * no pipeline parallelism) in rank order, unflattened to dims
 * ("ep_shard", "ep") = (world / ep, ep), as NeMo Automodel 0.7.0's
 * _create_moe_mesh builds it: rank r has coordinates (r / ep, r % ep), an EP
 * group is ep consecutive ranks (it may fold tp peers). A rank's number is
 * the same on both meshes. TPX_INVALID_ARGUMENT with upstream's message
 * "non_pp_size=W must be a multiple of ep_size=E" when ep does not divide
 * the world size; ep >= 1 (ep 1 gives (world, 1), a mesh upstream does not
 * build). *out is a new mesh the caller destroys. */
TPX_API tpx_status tpx_mesh_create_moe(const tpx_mesh *main_mesh, int64_t ep,
                                       tpx_mesh **out, tpx_error *err);

TPX_END_DECLS

#endif /* TPX_MESH_H */
