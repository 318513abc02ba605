/* loss_exp_ref.h — the loss kernels' exp and order of summation written
 * plainly (one element at a time, no vectors), as core/src/device/
 * host_kernels.c ("the vocab-parallel loss") and the cuda kernels must both
 * follow it; test_memspace.c holds the host kernels against it bit for
 * bit.
 *
 * exp(x), f32: x raised to -100 (a NaN x too); n = round(x / ln2) by adding
 * and subtracting 1.5 * 2^23; r = x - n * ln2 (ln2 in two parts); e^r by
 * Horner's rule over the Taylor coefficients 1/7! .. 1/1!, 1; times 2^n
 * built in the exponent bits, 0 below the normal range.
 * sum_exp of a row: blocks of 8 terms v0..v7 summed in f32 as
 * ((v0 + v4) + (v1 + v5)) + ((v2 + v6) + (v3 + v7)), each block's sum
 * added to an f64 in block order, then the tail's terms one by one. */
#ifndef TPX_TESTS_LOSS_EXP_REF_H
#define TPX_TESTS_LOSS_EXP_REF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline float ler_exp(float x) {
  static const float coef[8] = {1.0f / 5040.0f, 1.0f / 720.0f, 1.0f / 120.0f,
                                1.0f / 24.0f,   1.0f / 6.0f,   0.5f,
                                1.0f,           1.0f};
  const float shifter = 12582912.0f;
  if (!(x > -100.0f))
    x = -100.0f;
  float t = x * 1.44269504088896341f + shifter;
  float n = t - shifter;
  float r = x - n * 0.693145751953125f - n * 1.428606765330187e-06f;
  float p = coef[0];
  for (int k = 1; k < 8; k++) p = p * r + coef[k];
  int32_t tb, sb;
  memcpy(&tb, &t, sizeof tb);
  memcpy(&sb, &shifter, sizeof sb);
  int32_t e = tb - sb + 127;
  if (e < 0)
    e = 0;
  e <<= 23;
  float scale;
  memcpy(&scale, &e, sizeof scale);
  return p * scale;
}

static inline double ler_sum_exp(const float *z, size_t len, float m) {
  double s = 0;
  size_t j = 0;
  for (; j + 8 <= len; j += 8) {
    float v[8];
    for (int l = 0; l < 8; l++) v[l] = ler_exp(z[j + l] - m);
    float lo = (v[0] + v[4]) + (v[1] + v[5]);
    float hi = (v[2] + v[6]) + (v[3] + v[7]);
    s += (double)(lo + hi);
  }
  for (; j < len; j++) s += (double)ler_exp(z[j] - m);
  return s;
}

#endif /* TPX_TESTS_LOSS_EXP_REF_H */
