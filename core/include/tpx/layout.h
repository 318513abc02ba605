/* tpx/layout.h — which slice of a tensor each rank holds.
 *
 * The one function every part of tpx asks (memory report, checkpoint
 * slicing, runtime, redistribution): given a tensor's global shape, a mesh
 * and one placement per mesh dim, the offset and length along every tensor
 * dim that a rank holds.
 *
 * Semantics (spec: torch DTensor / FSDP2):
 *  - Shard(d) over a mesh dim of size w splits the current piece of dim d as
 *    torch.chunk: chunk = ceil(n / w); index i holds [i*chunk,
 * min(n,(i+1)*chunk)) of the piece; trailing indices may be short or empty
 * (offset clamps to n).
 *  - Mesh dims apply left to right (DTensor's default order).
 *  - StridedShard(d, k) on a mesh dim is applied after the later mesh dims
 *    that shard d (FSDP2 over TP: TP splits first, then FSDP splits the
 *    TP-local piece).
 *  - Joined dims (placement.h) extend the placement of the nearest earlier
 *    non-Joined mesh dim: the run splits as one mesh dim of the product
 *    size, the rank's index being row-major over the run (FSDP2 over the
 *    flattened dp_shard_cp: one torch.chunk into dp_shard*cp pieces, not a
 *    chunk over dp_shard and then over cp).
 *  - Replicate and Partial do not split.
 */
#ifndef TPX_LAYOUT_H
#define TPX_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/dtype.h"
#include "tpx/error.h"
#include "tpx/mesh.h"
#include "tpx/placement.h"

TPX_BEGIN_DECLS

#define TPX_MAX_TENSOR_DIMS 8

/* A box in the global tensor: dims [offset[i], offset[i] + length[i]). */
typedef struct tpx_slice {
  int ndim;
  int64_t offset[TPX_MAX_TENSOR_DIMS];
  int64_t length[TPX_MAX_TENSOR_DIMS];
} tpx_slice;

/* One split of a length-n extent over w parts: index i gets [*off, *off+*len).
 * torch.chunk rule. n >= 0, w >= 1, 0 <= i < w; otherwise TPX_OUT_OF_RANGE. */
TPX_API tpx_status tpx_layout_chunk(int64_t n, int64_t w, int64_t i,
                                    int64_t *off, int64_t *len, tpx_error *err);

/* The slice `rank` holds of a tensor with global `shape[ndim]` laid out with
 * `placements[tpx_mesh_ndim(mesh)]`. ndim 0..TPX_MAX_TENSOR_DIMS; every dim
 * >= 0; shard dims in range. Errors name the offending dim or placement. */
TPX_API tpx_status tpx_layout_local_slice(const int64_t *shape, int ndim,
                                          const tpx_mesh *mesh,
                                          const tpx_placement *placements,
                                          int64_t rank, tpx_slice *out,
                                          tpx_error *err);

/* Number of elements in a slice (product of lengths; 1 for ndim 0). */
TPX_API int64_t tpx_slice_numel(const tpx_slice *slice);
/* Bytes of a slice of the given dtype. */
TPX_API int64_t tpx_slice_nbytes(const tpx_slice *slice, tpx_dtype dtype);

/* FSDP2's padded per-rank element count for its all-gather buffers: the
 * `local_shape` (the TP-local piece) split on dim 0 over `dp` ranks, each
 * rank padded to the full chunk: ceil(local_shape[0]/dp) * prod(rest).
 * ndim 0 counts as one element. */
TPX_API tpx_status tpx_layout_fsdp_padded_numel(const int64_t *local_shape,
                                                int ndim, int64_t dp,
                                                int64_t *out, tpx_error *err);

TPX_END_DECLS

#endif /* TPX_LAYOUT_H */
