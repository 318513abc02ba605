/* device/cuda_api.h — the CUDA runtime and NCCL headers, included with the
 * warnings they trip under -Wpedantic -Wstrict-prototypes silenced
 * (private; only when TPX_HAVE_NCCL). Used by comm/nccl.c, ms_cuda.c and the
 * nccl tests. */
#ifndef TPX_DEVICE_CUDA_API_H
#define TPX_DEVICE_CUDA_API_H

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#endif
#include <cuda_runtime_api.h>
#include <nccl.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

#endif /* TPX_DEVICE_CUDA_API_H */
