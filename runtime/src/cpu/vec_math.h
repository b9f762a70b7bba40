/*
 * vec_math.h: float32 math without library calls, for loops that must vectorize (GELU,
 * softmax, exp, erf). libm's expf and erff are one call per element, which no compiler vectorizes.
 *
 * Files that use these build with -fno-trapping-math (CMakeLists.txt): otherwise GCC keeps a
 * branch for each select below and the loops stay scalar.
 */
#ifndef EMBER_CPU_VEC_MATH_H
#define EMBER_CPU_VEC_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* exp(y) for y <= 0 (or NaN, which stays NaN): Cephes's expf, within about 1 ulp. A rounded
 * multiple n of ln 2 is taken out (ln 2 in two parts), a degree-6 polynomial covers the rest,
 * and 2^n goes in through the exponent bits. Below -87 the result is flushed to 0 (exp(-inf)
 * is 0: masked scores stay exactly 0 in a softmax). */
static inline float em_vexpf_nonpos(float y) {
  float c = y < -87.0f ? -87.0f : y;
  float n = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round to nearest */
  n = n == n ? n : 0.0f; /* NaN in: converting n to an integer would be undefined */
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

/* exp(x) for any x: the same, with 2^n applied in two halves so that n may reach 128 (x up to
 * 88.72); above that +inf, below -87 flushed to 0. */
static inline float em_vexpf(float x) {
  float c = x < -87.0f ? -87.0f : (x > 88.72f ? 88.72f : x);
  float n = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  n = n == n ? n : 0.0f; /* NaN in (p stays NaN): keep the integer conversion defined */
  float r = c - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t ni = (int32_t)n, h = ni >> 1;
  int32_t b1 = (h + 127) * (1 << 23), b2 = (ni - h + 127) * (1 << 23);
  float s1, s2;
  memcpy(&s1, &b1, sizeof s1);
  memcpy(&s2, &b2, sizeof s2);
  float v = p * s1 * s2;
  return x > 88.7228394f ? (float)INFINITY : (x < -87.0f ? 0.0f : v);
}

/* erf(x) within about 1.6 ulp (measured against double erf over [-10, 10]): an odd polynomial
 * in x below |x| = 0.9277, 1 - exp(polynomial in |x|) above, both evaluated and one selected
 * (the minimax fits published by N. Juffa). */
static inline float em_verff(float a) {
  float t = a < 0 ? -a : a, s = a * a;
  float r = -1.72853470e-5f * t + 3.83197126e-4f;
  float u = -3.88396438e-3f * t + 2.42546219e-2f;
  r = r * s + u;
  r = r * t + -1.06777877e-1f;
  r = r * t + -6.34846687e-1f;
  r = r * t + -1.28717512e-1f;
  r = r * t + -t;
  float big = 1.0f - em_vexpf_nonpos(r);
  big = a < 0 ? -big : big;
  float q = -5.96761703e-4f;
  q = q * s + 4.99119423e-3f;
  q = q * s + -2.67681349e-2f;
  q = q * s + 1.12819925e-1f;
  q = q * s + -3.76125336e-1f;
  q = q * s + 1.28379166e-1f;
  q = q * a + a;
  return t > 0.927734375f ? big : q;
}

#endif
