/*
 * pointwise_special.c: the float32 and float64 loops of the inverse trigonometric and
 * hyperbolic functions, log2/log10/exp2, and the special functions (erfc, erfinv, lgamma,
 * digamma), with PyTorch's values at the edges of their domains.
 *
 * libm has all but erfinv and digamma; those two are written here in double, and float32
 * computes them in double and rounds once (at least as accurate as PyTorch's float32 forms).
 * pointwise_float.c hands these ops over to em_pw_special_unary.
 */
#include <math.h>

#include "pointwise.h"

/* digamma as PyTorch defines it at the poles: -inf at +0 (+inf at -0), NaN at the negative
 * integers. Negative x reflect (digamma(1 - x) - pi / tan(pi x), with tan's argument reduced
 * to (-1/2, 1/2] first so that it stays exact); positive x climb to 10 by
 * digamma(x) = digamma(x + 1) - 1/x, then the asymptotic series. */
static double sp_digamma(double x) {
  if (x == 0) return copysign(INFINITY, -x);
  double r = 0;
  if (x < 0) {
    if (x == trunc(x)) return NAN;
    if (isinf(x)) return NAN;
    double frac = x - round(x);
    r = -M_PI / tan(M_PI * frac);
    x = 1 - x;
  }
  while (x < 10) {
    r -= 1 / x;
    x += 1;
  }
  if (isinf(x)) return r + x;
  double f = 1 / (x * x);
  double t = f * (-1.0 / 12 + f * (1.0 / 120 + f * (-1.0 / 252 + f * (1.0 / 240 +
             f * (-1.0 / 132 + f * (691.0 / 32760 + f * (-1.0 / 12)))))));
  return r + log(x) - 0.5 / x + t;
}

/* erfinv: M. Giles' single-precision approximation ("Approximating the erfinv function",
 * 2010), then two Newton steps on erf (erfc beyond |y| = 1/2, where 1 - |y| is exact), which
 * give double precision. */
static double sp_erfinv(double y) {
  if (!(y >= -1 && y <= 1)) return NAN;
  if (y == 1) return INFINITY;
  if (y == -1) return -INFINITY;
  if (y == 0) return y;
  double w = -log((1 - y) * (1 + y)), p;
  if (w < 5) {
    w -= 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
  } else {
    w = sqrt(w) - 3;
    p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
  }
  double a = fabs(y), x = p * a, q = 1 - a;
  for (int k = 0; k < 2; k++) {
    double err = a > 0.5 ? q - erfc(x) : erf(x) - a;
    x -= err / (1.1283791670955126 * exp(-x * x));
  }
  return copysign(x, y);
}

/* lgamma without the global signgam (the loops run on several threads). */
static double sp_lgamma(double x) {
  int sign;
  return lgamma_r(x, &sign);
}
static float sp_lgammaf(float x) {
  int sign;
  return lgammaf_r(x, &sign);
}

#define SPECIAL(X)                                                                            \
  X(EM_ASIN, asin, asin(x), asinf(x))                                                         \
  X(EM_ACOS, acos, acos(x), acosf(x))                                                         \
  X(EM_ATAN, atan, atan(x), atanf(x))                                                         \
  X(EM_SINH, sinh, sinh(x), sinhf(x))                                                         \
  X(EM_COSH, cosh, cosh(x), coshf(x))                                                         \
  X(EM_ASINH, asinh, asinh(x), asinhf(x))                                                     \
  X(EM_ACOSH, acosh, acosh(x), acoshf(x))                                                     \
  X(EM_ATANH, atanh, atanh(x), atanhf(x))                                                     \
  X(EM_LOG2, log2, log2(x), log2f(x))                                                         \
  X(EM_LOG10, log10, log10(x), log10f(x))                                                     \
  X(EM_EXP2, exp2, exp2(x), exp2f(x))                                                         \
  X(EM_ERFC, erfc, erfc(x), erfcf(x))                                                         \
  X(EM_ERFINV, erfinv, sp_erfinv(x), (float)sp_erfinv(x))                                     \
  X(EM_LGAMMA, lgamma, sp_lgamma(x), sp_lgammaf(x))                                           \
  X(EM_DIGAMMA, digamma, sp_digamma(x), (float)sp_digamma(x))

#define SP_LOOPS(E, N, D, F)                                                                  \
  EM_PW_UNARY(f32_##N, float, float, float, F)                                                \
  EM_PW_UNARY(f64_##N, double, double, double, D)
SPECIAL(SP_LOOPS)

#define SP_F32(E, N, D, F) [E - EM_ASIN] = f32_##N,
#define SP_F64(E, N, D, F) [E - EM_ASIN] = f64_##N,
static const em_cpu_loop f32_special[EM_NUM_UNARY - EM_ASIN] = {SPECIAL(SP_F32)};
static const em_cpu_loop f64_special[EM_NUM_UNARY - EM_ASIN] = {SPECIAL(SP_F64)};

em_cpu_loop em_pw_special_unary(em_dtype d, em_unary_op op) {
  if (op < EM_ASIN || op >= EM_NUM_UNARY) return NULL;
  if (d == EM_FLOAT32) return f32_special[op - EM_ASIN];
  if (d == EM_FLOAT64) return f64_special[op - EM_ASIN];
  return NULL;
}
