/*
 * vec_math.h: float32 math without library calls, for loops that must vectorize (GELU,
 * softmax). libm's expf and erff are one call per element, which no compiler vectorizes.
 *
 * Files that use these build with -fno-trapping-math (CMakeLists.txt): otherwise GCC keeps a
 * branch for each select below and the loops stay scalar.
 */
#ifndef EMBER_CPU_VEC_MATH_H
#define EMBER_CPU_VEC_MATH_H

#include <stdint.h>
#include <string.h>

/* exp(y) for y <= 0 (or NaN, which stays NaN): Cephes's expf, within about 1 ulp. A rounded
 * multiple n of ln 2 is taken out (ln 2 in two parts), a degree-6 polynomial covers the rest,
 * and 2^n goes in through the exponent bits. Below -87 the result is flushed to 0 (exp(-inf)
 * is 0: masked scores stay exactly 0 in a softmax). */
static inline float em_vexpf_nonpos(float y) {
  float c = y < -87.0f ? -87.0f : y;
  float n = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round to nearest */
  float r = c - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t bits = ((int32_t)n + 127) * (1 << 23);
  float scale;
  memcpy(&scale, &bits, sizeof scale);
  return y < -87.0f ? 0.0f : p * scale;
}

#endif
