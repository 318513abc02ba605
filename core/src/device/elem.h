/* device/elem.h — the element kernels on host memory (private): reductions
 * and fan-out copies (elem_reduce.c), the 16-bit float conversions
 * (elem_bits.h, shared with the cuda kernels) and the checkpoint's dtype
 * conversions (elem_convert.c). One floor below comm/ and checkpoint/:
 * it knows dtypes and reduce ops, nothing of communicators or files.
 *
 * Reductions: f16 / bf16 accumulate in f32, f32 in f32, f64 in f64, signed
 * and unsigned integers in 64-bit two's complement (sums wrap); avg divides
 * the final sum once. The order of the sources is the order of
 * accumulation, so results are deterministic. Used by the local backend
 * (which reduces straight out of every rank's buffer), the mpi backend
 * (16-bit types and avg) and the host memory space.
 *
 * Not a collective: no synchronisation happens here. Not the memory-space
 * kernels either (device/kernels.h: those take buffers of any space). */
#ifndef TPX_DEVICE_ELEM_H
#define TPX_DEVICE_ELEM_H

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
                      int nsrc, size_t count, tpx_dtype dtype, tpx_reduce_op op,
                      int64_t avg_div, int stream);

/* Copy `bytes` from src to each of ndst destinations (one read of src per
 * block, kept in cache). A destination equal to src is skipped. */
void tpx__copy_into(void *const *dsts, int ndst, const void *src, size_t bytes,
                    int stream);

/* buf[i] /= div in place (for backends without a native avg). */
void tpx__divide(void *buf, size_t count, tpx_dtype dtype, int64_t div);

/* 16-bit float conversions (round to nearest even, NaN kept). */
float tpx__f16_to_f32(uint16_t h);
uint16_t tpx__f32_to_f16(float f);
float tpx__bf16_to_f32(uint16_t h);
uint16_t tpx__f32_to_bf16(float f);

/* The checkpoint's conversions (elem_convert.c): f64 / f32 / f16 / bf16 /
 * f8_e4m3 / f8_e5m2 to f64 / f32 / f16 / bf16, and plain copies between
 * equal dtypes. 1 when from -> to is one of them. */
int tpx__elem_can_convert(tpx_dtype from, tpx_dtype to);
/* dst[i] = (to) src[i] for i < count (any alignment); TPX_UNSUPPORTED
 * naming both dtypes when tpx__elem_can_convert says no. */
tpx_status tpx__elem_convert(void *dst, tpx_dtype to, const void *src,
                             tpx_dtype from, size_t count, tpx_error *err);

#endif /* TPX_DEVICE_ELEM_H */
