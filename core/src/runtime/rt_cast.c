/* runtime/rt_cast.c — which dtypes the runtime's buffers may have (f32,
 * bf16, f16). The conversions are memory-space kernels
 * (device/memspace.h: convert, add_f32; host loops in device/host_kernels.c). */
#include "runtime/rt_internal.h"

int tpx__rt_dtype_ok(tpx_dtype dt) {
  return dt == TPX_DTYPE_F32 || dt == TPX_DTYPE_BF16 || dt == TPX_DTYPE_F16;
}
