/* tpx/redistribute.h — move a tensor from one layout to another.
 *
 * A layout is one placement per mesh dim (tpx/placement.h) of a tensor with
 * a global shape; tpx_layout_local_slice says which box of it every rank
 * holds, and this module asks it for every offset. Redistribution runs the
 * collectives DTensor runs:
 *   Shard(d)  -> Replicate  all-gather along d (any d; uneven pieces padded)
 *   Partial   -> Replicate  all-reduce (the Partial's op)
 *   Partial   -> Shard(d)   reduce-scatter along d
 *   Replicate -> Shard(d)   local slice, no communication
 *   Shard(a)  -> Shard(b)   all-to-all
 *   Replicate -> Partial    local: sum keeps values on index 0 of the group
 *                           and zeroes the others (exact for integers too);
 *                           avg / max / min keep the value everywhere
 *   Shard     -> Partial    all-gather, then as Replicate -> Partial
 * Mesh dims whose moves do not interact are done one by one with the
 * collective above on that dim's sub-group. When one tensor dim is sharded
 * by several mesh dims and one of them changes (nested sharding), the
 * affected shards are first gathered right to left, then the target is
 * applied left to right; the result is the same, with more traffic.
 * StridedShard placements are not supported (TPX_UNSUPPORTED).
 *
 * Buffers are this rank's local box, contiguous, row-major, in `dtype`, in
 * the mesh comm's memory space (host on local / mpi, device on nccl;
 * tpx_comm_memspace); they are moved only by that space's copies.
 * Collective over the mesh world: every
 * rank calls it with the same shape, dtype and placements. */
#ifndef TPX_REDISTRIBUTE_H
#define TPX_REDISTRIBUTE_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/comm.h"
#include "tpx/dtype.h"
#include "tpx/error.h"
#include "tpx/layout.h"
#include "tpx/placement.h"

TPX_BEGIN_DECLS

/* Redistribute `src` (this rank's box under src_pl, numel from
 * tpx_layout_local_slice) into `dst` (this rank's box under dst_pl).
 * src_pl / dst_pl have tpx_mesh_ndim(mesh) entries; negative shard dims are
 * normalised against ndim. src and dst must not overlap. */
TPX_API tpx_status tpx_redistribute(tpx_mesh_comm *mc, const int64_t *shape,
                                    int ndim, tpx_dtype dtype,
                                    const tpx_placement *src_pl,
                                    const void *src,
                                    const tpx_placement *dst_pl, void *dst,
                                    tpx_error *err);

TPX_END_DECLS

#endif /* TPX_REDISTRIBUTE_H */
