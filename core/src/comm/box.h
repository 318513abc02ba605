/* comm/box.h — copying boxes (tpx_slice) between contiguous row-major
 * buffers (private; used by redistribute.c and the runtime's loading).
 *
 * A buffer "holding box B" stores the elements of B contiguously, row-major
 * with B.length as its shape. Not a layout function: offsets come from
 * tpx_layout_local_slice; this only moves bytes. */
#ifndef TPX_COMM_BOX_H
#define TPX_COMM_BOX_H

#include <stddef.h>

#include "device/memspace.h"
#include "tpx/layout.h"

/* The intersection of a and b (same ndim); lengths 0 when they miss. */
tpx_slice tpx__box_intersect(const tpx_slice *a, const tpx_slice *b);

/* Copy the elements of `part` (a sub-box of both) from a buffer holding
 * `from` into a buffer holding `to`. es = element size. The bytes move
 * through `ms` (`kind` says which side is host memory) as strided 2-D
 * copies, one per index of the outer dims, so the buffers may be device
 * memory. */
tpx_status tpx__box_copy(const tpx__memspace *ms, tpx__copy_kind kind,
                         void *to_buf, const tpx_slice *to,
                         const void *from_buf, const tpx_slice *from,
                         const tpx_slice *part, size_t es, tpx_error *err);

#endif /* TPX_COMM_BOX_H */
