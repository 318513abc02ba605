/* tpx/tensor.h — a caller's buffer as the runtime sees it: this rank's local
 * piece of a tensor (pointer, dtype, local shape).
 *
 * A plain value: tpx never allocates, owns or frees `data`. The buffer is
 * contiguous and row-major, in the memory space of the mesh communicator
 * the call takes (tpx_comm_memspace): host memory on the local and mpi
 * backends, CUDA device memory on nccl. The runtime decides what to do from
 * dtype and shapes only and moves data only through that space's copies
 * and kernels, never by reading it on the host (docs/RUNTIME.md "Device
 * memory").
 *
 * Which global slice the piece is (its placements) is not stored here: the
 * calls that take a tensor say which layout they expect it in. */
#ifndef TPX_TENSOR_H
#define TPX_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/dtype.h"
#include "tpx/error.h"
#include "tpx/layout.h" /* TPX_MAX_TENSOR_DIMS */

TPX_BEGIN_DECLS

typedef struct tpx_tensor { /* a caller buffer, this rank's local piece */
  void *data;               /* contiguous, row-major; may be NULL if empty */
  tpx_dtype dtype;
  int ndim;                           /* 0..TPX_MAX_TENSOR_DIMS */
  int64_t shape[TPX_MAX_TENSOR_DIMS]; /* local shape; shape[ndim..] unused */
} tpx_tensor;

/* A tensor over `data` with `shape[ndim]` (shape may be NULL when ndim is
 * 0). ndim is clamped to 0..TPX_MAX_TENSOR_DIMS; tpx_tensor_check reports
 * bad values. */
TPX_API tpx_tensor tpx_tensor_make(void *data, tpx_dtype dtype, int ndim,
                                   const int64_t *shape);

/* Number of elements (product of the shape; 1 for ndim 0), or -1 when t is
 * NULL or its ndim / shape are invalid. */
TPX_API int64_t tpx_tensor_numel(const tpx_tensor *t);
/* numel * element size, or -1 as tpx_tensor_numel (or an invalid dtype). */
TPX_API int64_t tpx_tensor_nbytes(const tpx_tensor *t);

/* TPX_OK when t is usable: non-NULL, ndim in 0..TPX_MAX_TENSOR_DIMS, every
 * dim >= 0, a valid dtype, and data non-NULL unless it has 0 elements.
 * Otherwise TPX_INVALID_ARGUMENT with a message naming `what` (e.g. "logits")
 * and the fault. */
TPX_API tpx_status tpx_tensor_check(const tpx_tensor *t, const char *what,
                                    tpx_error *err);

/* Write "[2, 5, 64] f32" into buf (always NUL-terminated when size > 0);
 * returns the length it needed, as snprintf. For error messages. */
TPX_API int tpx_tensor_format_shape(const tpx_tensor *t, char *buf,
                                    size_t size);

TPX_END_DECLS

#endif /* TPX_TENSOR_H */
