/* device/elem_convert.c — element conversions on the way in and out of
 * checkpoints (device/elem.h): f64/f32/f16/bf16/f8_e4m3/f8_e5m2 to
 * f64/f32/f16/bf16 (through f32, or f64 for f64 sources; rounding to
 * nearest even by the 16-bit helpers of elem_bits.h), and plain copies
 * between equal dtypes. Not a general cast library: no integer or f8
 * targets. The public face is tpx_checkpoint_convert
 * (checkpoint/convert_api.c). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "device/elem.h"

static int is_source(tpx_dtype d) {
  return d == TPX_DTYPE_F64 || d == TPX_DTYPE_F32 || d == TPX_DTYPE_F16 ||
         d == TPX_DTYPE_BF16 || d == TPX_DTYPE_F8_E4M3 ||
         d == TPX_DTYPE_F8_E5M2;
}

static int is_target(tpx_dtype d) {
  return d == TPX_DTYPE_F64 || d == TPX_DTYPE_F32 || d == TPX_DTYPE_F16 ||
         d == TPX_DTYPE_BF16;
}

int tpx__elem_can_convert(tpx_dtype from, tpx_dtype to) {
  return (from == to && tpx_dtype_size(from) > 0) ||
         (is_source(from) && is_target(to));
}

/* float8_e4m3fn: bias 7, no infinities, S.1111.111 is NaN. */
static float e4m3_to_f32(uint8_t b) {
  int sign = b >> 7, exp = (b >> 3) & 0xf, man = b & 7;
  float v;
  if (exp == 0xf && man == 7)
    return NAN;
  if (exp == 0)
    v = ldexpf((float)man, -9); /* subnormal: man/8 * 2^-6 */
  else
    v = ldexpf(1.0f + (float)man / 8.0f, exp - 7);
  return sign ? -v : v;
}

/* float8_e5m2 is the top byte of an IEEE half. */
static float e5m2_to_f32(uint8_t b) {
  return tpx__f16_to_f32((uint16_t)(b << 8));
}

static float load_f32(const void *src, tpx_dtype from, size_t i,
                      const float *lut) {
  switch (from) {
  case TPX_DTYPE_F32: {
    float f;
    memcpy(&f, (const char *)src + 4 * i, 4);
    return f;
  }
  case TPX_DTYPE_F16: {
    uint16_t h;
    memcpy(&h, (const char *)src + 2 * i, 2);
    return tpx__f16_to_f32(h);
  }
  case TPX_DTYPE_BF16: {
    uint16_t h;
    memcpy(&h, (const char *)src + 2 * i, 2);
    return tpx__bf16_to_f32(h);
  }
  default: /* f8: through the table */ return lut[((const uint8_t *)src)[i]];
  }
}

tpx_status tpx__elem_convert(void *dst, tpx_dtype to, const void *src,
                             tpx_dtype from, size_t count, tpx_error *err) {
  if (!tpx__elem_can_convert(from, to))
    return tpx_error_set(err, TPX_UNSUPPORTED,
                         "cannot convert %s to %s (targets f64/f32/f16/bf16 "
                         "from floating types, or the same dtype)",
                         tpx_dtype_short_name(from), tpx_dtype_short_name(to));
  if (count == 0)
    return TPX_OK;
  if (from == to) {
    memmove(dst, src, count * tpx_dtype_size(from));
    return TPX_OK;
  }
  if (from == TPX_DTYPE_BF16 && to == TPX_DTYPE_F32) {
    /* the common load (bf16 checkpoint, f32 master weights): a shift */
    for (size_t i = 0; i < count; i++) {
      uint16_t h;
      memcpy(&h, (const char *)src + 2 * i, 2); /* any alignment */
      uint32_t u = (uint32_t)h << 16;
      memcpy((char *)dst + 4 * i, &u, 4);
    }
    return TPX_OK;
  }
  float lut[256];
  if (from == TPX_DTYPE_F8_E4M3 || from == TPX_DTYPE_F8_E5M2)
    for (int b = 0; b < 256; b++)
      lut[b] = from == TPX_DTYPE_F8_E4M3 ? e4m3_to_f32((uint8_t)b)
                                         : e5m2_to_f32((uint8_t)b);
  char *out = dst;
  const char *in = src;
  for (size_t i = 0; i < count; i++) {
    double d;
    if (from == TPX_DTYPE_F64)
      memcpy(&d, in + 8 * i, 8);
    else
      d = load_f32(src, from, i, lut);
    switch (to) {
    case TPX_DTYPE_F64: memcpy(out + 8 * i, &d, 8); break;
    case TPX_DTYPE_F32: {
      float f = (float)d;
      memcpy(out + 4 * i, &f, 4);
      break;
    }
    case TPX_DTYPE_F16: {
      uint16_t h = tpx__f32_to_f16((float)d);
      memcpy(out + 2 * i, &h, 2);
      break;
    }
    default: {
      uint16_t h = tpx__f32_to_bf16((float)d);
      memcpy(out + 2 * i, &h, 2);
      break;
    }
    }
  }
  return TPX_OK;
}
