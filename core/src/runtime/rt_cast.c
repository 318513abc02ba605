/* runtime/rt_cast.c — dtype conversions between the runtime's buffers
 * (f32, bf16, f16; round to nearest even through the comm kernels'
 * converters). Not a general cast library: float dtypes only. */
#include <string.h>

#include "comm/reduce.h"
#include "runtime/rt_internal.h"

int tpx__rt_dtype_ok(tpx_dtype dt) {
  return dt == TPX_DTYPE_F32 || dt == TPX_DTYPE_BF16 || dt == TPX_DTYPE_F16;
}

static float get(const void *p, tpx_dtype dt, size_t i) {
  switch (dt) {
  case TPX_DTYPE_BF16:
    return tpx__bf16_to_f32(((const uint16_t *)p)[i]);
  case TPX_DTYPE_F16:
    return tpx__f16_to_f32(((const uint16_t *)p)[i]);
  default:
    return ((const float *)p)[i];
  }
}

void tpx__rt_convert(void *dst, tpx_dtype dd, const void *src, tpx_dtype sd,
                     size_t n) {
  if (n == 0) return;
  if (dd == sd) {
    memmove(dst, src, n * tpx_dtype_size(dd));
    return;
  }
  switch (dd) {
  case TPX_DTYPE_BF16:
    for (size_t i = 0; i < n; i++)
      ((uint16_t *)dst)[i] = tpx__f32_to_bf16(get(src, sd, i));
    break;
  case TPX_DTYPE_F16:
    for (size_t i = 0; i < n; i++)
      ((uint16_t *)dst)[i] = tpx__f32_to_f16(get(src, sd, i));
    break;
  default:
    for (size_t i = 0; i < n; i++) ((float *)dst)[i] = get(src, sd, i);
    break;
  }
}

void tpx__rt_add_f32(float *dst, const void *src, tpx_dtype sd, size_t n,
                     float div) {
  if (sd == TPX_DTYPE_F32) {
    const float *s = src;
    if (div == 1.0f)
      for (size_t i = 0; i < n; i++) dst[i] += s[i];
    else
      for (size_t i = 0; i < n; i++) dst[i] += s[i] / div;
    return;
  }
  for (size_t i = 0; i < n; i++) dst[i] += get(src, sd, i) / div;
}
