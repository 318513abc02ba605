/* comm/reduce.h — element-wise reduction and copy kernels for host backends.
 *
 * Shared by the local backend (which reduces straight out of every rank's
 * buffer) and the mpi backend (16-bit types and avg). f16 / bf16 accumulate
 * in f32, f32 in f32, f64 in f64, signed and unsigned integers in 64-bit
 * two's complement (sums wrap); avg divides the final sum once. The order of
 * the sources is the order of accumulation, so results are deterministic.
 *
 * Not a collective: no synchronisation happens here. */
#ifndef TPX_COMM_REDUCE_H
#define TPX_COMM_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/dtype.h"
#include "tpx/error.h"
#include "tpx/placement.h"

/* TPX_OK when `op` can reduce `dtype` (every numeric type; not bool or f8),
 * else an error naming both. `what` names the call for the message. */
tpx_status tpx__reduce_check(const char *what, tpx_dtype dtype,
                             tpx_reduce_op op, tpx_error *err);

/* dsts[d][i] = op(srcs[0][i], ..., srcs[nsrc-1][i]) for i < count and every
 * d < ndst. A destination may alias a source at the same index (in place):
 * each block is read from all sources before it is written. AVG divides by
 * `avg_div`. `stream` asks for non-temporal stores (large outputs that will
 * not be read again soon by this core); an sfence follows them. */
void tpx__reduce_into(void *const *dsts, int ndst, const void *const *srcs,
                      int nsrc, size_t count, tpx_dtype dtype,
                      tpx_reduce_op op, int64_t avg_div, int stream);

/* Copy `bytes` from src to each of ndst destinations (one read of src per
 * block, kept in cache). A destination equal to src is skipped. */
void tpx__copy_into(void *const *dsts, int ndst, const void *src,
                    size_t bytes, int stream);

/* buf[i] /= div in place (for backends without a native avg). */
void tpx__divide(void *buf, size_t count, tpx_dtype dtype, int64_t div);

/* 16-bit float conversions (round to nearest even, NaN kept). */
float tpx__f16_to_f32(uint16_t h);
uint16_t tpx__f32_to_f16(float f);
float tpx__bf16_to_f32(uint16_t h);
uint16_t tpx__f32_to_bf16(float f);

#endif /* TPX_COMM_REDUCE_H */
