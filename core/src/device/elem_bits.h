/* device/elem_bits.h — the f32 <-> bf16 / f16 conversions as integer bit
 * operations, one source for the host (elem_reduce.c's tpx__f32_to_bf16
 * etc., hence the host kernels) and the cuda kernels (ms_cuda_kernels.cu),
 * so both spaces convert bit for bit alike: round to nearest even, overflow to
 * inf, subnormals kept, NaN kept a NaN with its sign (f32 -> bf16 keeps the
 * payload's top bits and sets the quiet bit; f32 -> f16 gives sign | 0x7e00;
 * f16 / bf16 -> f32 keep the payload). CUDA's own __float2half_rn /
 * __half2float canonicalise NaN (0x7fff, sign dropped), so the kernels do
 * not use them. Part of the element-kernel module (device/elem.h). Not here:
 * reductions (elem_reduce.c). */
#ifndef TPX_DEVICE_ELEM_BITS_H
#define TPX_DEVICE_ELEM_BITS_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define TPX__HB static __host__ __device__ inline
#else
#define TPX__HB static inline
#endif

TPX__HB uint32_t tpx__hb_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

TPX__HB float tpx__hb_bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

TPX__HB float tpx__hb_bf16_to_f32(uint16_t h) {
  return tpx__hb_bits_f32((uint32_t)h << 16);
}

TPX__HB uint16_t tpx__hb_f32_to_bf16(float f) {
  uint32_t u = tpx__hb_f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it quiet and a NaN */
    return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
  return (uint16_t)(u >> 16);
}

TPX__HB float tpx__hb_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) /* inf / NaN */
    return tpx__hb_bits_f32(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    if (man == 0)
      return tpx__hb_bits_f32(sign);
    /* subnormal: value = man * 2^-24 (exact) */
    float v = (float)man * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  return tpx__hb_bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

TPX__HB uint16_t tpx__hb_f32_to_f16(float f) {
  uint32_t u = tpx__hb_f32_bits(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) /* NaN */
    return (uint16_t)(sign | 0x7e00u);
  if (a >= 0x477ff000u) /* rounds to >= 65520 -> inf */
    return (uint16_t)(sign | 0x7c00u);
  if (a < 0x38800000u) { /* below the smallest normal 2^-14: subnormal */
    /* round(a_value * 2^24) with ties to even, done in float exactly:
     * adding 0.5 (as 2^-1 * 2^24 scale) via the magic-number trick. */
    float v = tpx__hb_bits_f32(a) + 0.5f; /* 0.5 = 2^-1: ulp becomes 2^-24 */
    return (uint16_t)(sign |
                      (uint16_t)(tpx__hb_f32_bits(v) - tpx__hb_f32_bits(0.5f)));
  }
  uint32_t mant_odd = (a >> 13) & 1u;
  a += 0xfffu + mant_odd; /* round to nearest even at bit 13 */
  return (uint16_t)(sign | (uint16_t)((a - 0x38000000u) >> 13));
}

#undef TPX__HB

#endif /* TPX_DEVICE_ELEM_BITS_H */
