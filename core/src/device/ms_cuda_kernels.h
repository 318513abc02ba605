/* device/ms_cuda_kernels.h — the cuda memory space's kernel table
 * (ms_cuda_kernels.cu, compiled by nvcc; only when TPX_HAVE_CUDA_KERNELS).
 * Its entries have the signatures of device/kernels.h and are reached only
 * through the checked wrappers there. */
#ifndef TPX_DEVICE_MS_CUDA_KERNELS_H
#define TPX_DEVICE_MS_CUDA_KERNELS_H

#include "device/kernels.h"

TPX_BEGIN_DECLS

/* Not exported from libtpx (nvcc ignores meson's visibility option). */
#if defined(__GNUC__)
__attribute__((visibility("hidden")))
#endif
extern const tpx__ms_kernels tpx__ms_cuda_kernels;

TPX_END_DECLS

#endif /* TPX_DEVICE_MS_CUDA_KERNELS_H */
