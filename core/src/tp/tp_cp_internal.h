/* tp/tp_cp_internal.h — what tp_cp.c shares with tp_cp_logprobs.c: the cp
 * size of a comm, its memory space, and the run-wise reorder between
 * "block after block" and "position order". Not for other areas. */
#ifndef TPX_TP_TP_CP_INTERNAL_H
#define TPX_TP_TP_CP_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "device/memspace.h"
#include "tpx/runtime_cp.h"

/* tpx_comm_size(cp), 1 for NULL. */
int64_t tpx__cp_size(const tpx_comm *cp);
/* The comm's memory space (the host space for NULL). */
const tpx__memspace *tpx__cp_ms(const tpx_comm *cp);
/* blocks [n][b][t][rb bytes] <-> seq [b][T][rb bytes]: element j of block
 * r is position index[r·t + j] of seq. to_seq 1 writes seq, 0 writes
 * blocks; runs of consecutive positions move as one 2-D copy each. */
tpx_status tpx__cp_reorder(const tpx__memspace *ms, void *blocks, void *seq,
                           int64_t T, const int64_t *index, int64_t n,
                           int64_t t, int64_t b, size_t rb, int to_seq,
                           tpx_error *err);

#endif /* TPX_TP_TP_CP_INTERNAL_H */
