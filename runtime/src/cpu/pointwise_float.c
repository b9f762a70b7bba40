/*
 * pointwise_float.c: the float32 and float64 loops of the unary and binary ops, and their
 * tables. float16 and bfloat16 reuse the float32 loops through em_pw_half_loop.
 *
 * Each op is written once, in the X-macro lists below, over a local type T; <tgmath.h> picks
 * expf or exp from T, so one expression serves both widths. The loops come from the
 * generators in pointwise.h: contiguous and scalar-broadcast runs are plain indexed loops the
 * compiler vectorizes (the arithmetic, comparisons, min/max, the roundings), others are strided
 * loops. (sqrt would vectorize too, but only with -fno-math-errno, which the build does not set.)
 */

#include <tgmath.h>

#include "pointwise.h"
#include "vec_math.h"

/* ---- helpers with PyTorch's semantics ---- */

/* Python's floor division, as PyTorch computes it (c10::div_floor_floating): exact for
 * integral quotients, IEEE results when b is zero. */
#define FLOAT_HELPERS(SN, T)                                                                  \
  static inline T SN##h_floordiv(T a, T b) {                                                   \
    if (b == 0) return a / b;                                                                 \
    T mod = fmod(a, b);                                                                       \
    T div = (a - mod) / b;                                                                    \
    if (mod != 0 && (b < 0) != (mod < 0)) div -= 1;                                           \
    if (div == 0) return copysign((T)0, a / b);                                               \
    T fl = floor(div);                                                                        \
    if (div - fl > (T)0.5) fl += 1;                                                           \
    return fl;                                                                                \
  }                                                                                           \
  /* Python's modulo: the result takes the sign of the divisor. */                            \
  static inline T SN##h_remainder(T a, T b) {                                                  \
    T mod = fmod(a, b);                                                                       \
    if (mod != 0 && (b < 0) != (mod < 0)) mod += b;                                           \
    return mod;                                                                               \
  }
FLOAT_HELPERS(f32, float)
FLOAT_HELPERS(f64, double)
#define FLOORDIV(a, b) _Generic((T)0, float: f32h_floordiv, double: f64h_floordiv)(a, b)
#define REMAINDER(a, b) _Generic((T)0, float: f32h_remainder, double: f64h_remainder)(a, b)

/* float32 GELU without library calls, so that the loop vectorizes: libm's erff one element
 * at a time made gelu 10x slower than PyTorch's. 1 + erf(x / sqrt 2) comes from erfc(|z|) as
 * Abramowitz & Stegun 7.1.26 writes it (t = 1 / (1 + p |z|), a degree-5 polynomial in t times
 * exp(-z^2); absolute error below 1.5e-7, PyTorch's vectorized erf is the same formula), taken
 * as erfc itself for x < 0 so that the far negative tail keeps its relative accuracy; exp is
 * vec_math.h's. */
static inline float f32h_gelu(float x) {
  float z = x * 0.70710678118654752440f, az = z < 0 ? -z : z;
  float t = 1.0f / (1.0f + 0.3275911f * az);
  float poly = t * (0.254829592f +
                    t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
  float q = poly * em_vexpf_nonpos(-z * z); /* erfc(|z|) */
  return 0.5f * x * (x < 0 ? q : 2.0f - q);
}
/* float32 loops on vec_math.h, compiled for AVX-512, AVX2 and the baseline and chosen when
 * the library loads: the polynomials vectorize, so the width decides their speed. libm's expf
 * and erff, one call per element, made exp 4x and erf 15x slower than the loops below. */
#define F32_VEC_UNARY(NAME, FN)                                                               \
  __attribute__((target_clones("avx512f", "avx2", "default")))                                \
  static void NAME(char **p, const int64_t *s, int64_t n, void *vctx) {                      \
    (void)vctx;                                                                               \
    if (s[0] == (int64_t)sizeof(float) && s[1] == (int64_t)sizeof(float)) {                  \
      float *o = (float *)p[0];                                                               \
      const float *xs = (const float *)p[1];                                                  \
      for (int64_t i = 0; i < n; i++) o[i] = FN(xs[i]);                                       \
      return;                                                                                 \
    }                                                                                         \
    for (int64_t i = 0; i < n; i++)                                                           \
      *(float *)(p[0] + i * s[0]) = FN(*(const float *)(p[1] + i * s[1]));                    \
  }
F32_VEC_UNARY(f32_gelu, f32h_gelu)
F32_VEC_UNARY(f32_exp, em_vexpf)
F32_VEC_UNARY(f32_erf, em_verff)
EM_PW_UNARY(f64_exp, double, double, double, exp(x))
EM_PW_UNARY(f64_erf, double, double, double, erf(x))
EM_PW_UNARY(f64_gelu, double, double, double, 0.5 * x * (1 + erf(x * 0.70710678118654752440)))

/* ---- the ops ---- */

/* Unary ops whose output has the input's dtype. */
#define FLOAT_UNARY(X)                                                                        \
  X(EM_NEG, neg, -x)                                                                          \
  X(EM_ABS, abs, fabs(x))                                                                     \
  X(EM_SIGN, sign, (T)((x > 0) - (x < 0))) /* sign(NaN) = 0, as in PyTorch */                 \
  X(EM_LOG, log, log(x))                                                                      \
  X(EM_LOG1P, log1p, log1p(x))                                                                \
  X(EM_EXPM1, expm1, expm1(x))                                                                \
  X(EM_SQRT, sqrt, sqrt(x))                                                                   \
  X(EM_RSQRT, rsqrt, (T)1 / sqrt(x))                                                          \
  X(EM_SIN, sin, sin(x))                                                                      \
  X(EM_COS, cos, cos(x))                                                                      \
  X(EM_TAN, tan, tan(x))                                                                      \
  X(EM_TANH, tanh, tanh(x))                                                                   \
  X(EM_SIGMOID, sigmoid, (T)1 / ((T)1 + exp(-x)))                                             \
  X(EM_RELU, relu, x < 0 ? (T)0 : x) /* NaN and -0 stay, as in PyTorch (clamp_min) */          \
  X(EM_GELU_TANH, gelu_tanh,                                                                  \
    (T)0.5 * x * ((T)1 + tanh((T)0.79788456080286535588 * (x + (T)0.044715 * x * x * x))))    \
  X(EM_SILU, silu, x / ((T)1 + exp(-x)))                                                      \
  X(EM_SOFTPLUS, softplus, x > (T)20 ? x : log1p(exp(x))) /* beta 1, threshold 20 */          \
  X(EM_FLOOR, floor, floor(x))                                                                \
  X(EM_CEIL, ceil, ceil(x))                                                                   \
  X(EM_ROUND, round, rint(x)) /* half to even in the default rounding mode */                 \
  X(EM_TRUNC, trunc, trunc(x))                                                                \
  X(EM_RECIPROCAL, reciprocal, (T)1 / x)                                                      \
  X(EM_SQUARE, square, x * x)

/* Unary ops with a bool output. */
#define FLOAT_PREDICATES(X)                                                                   \
  X(EM_ISNAN, isnan, x != x)                                                                  \
  X(EM_ISINF, isinf, fabs(x) == (T)INFINITY)                                                  \
  X(EM_ISFINITE, isfinite, fabs(x) < (T)INFINITY)                                             \
  X(EM_LOGICAL_NOT, logical_not, x == 0)

#define FLOAT_BINARY(X)                                                                       \
  X(EM_ADD, add, a + b)                                                                       \
  X(EM_PW_ADD_ALPHA, add_alpha, a + (T)alpha * b)                                             \
  X(EM_SUB, sub, a - b)                                                                       \
  X(EM_MUL, mul, a * b)                                                                       \
  X(EM_DIV, div, a / b)                                                                       \
  X(EM_FLOOR_DIVIDE, floor_divide, FLOORDIV(a, b))                                            \
  X(EM_POW, pow, pow(a, b))                                                                   \
  X(EM_FMOD, fmod, fmod(a, b))                                                                \
  X(EM_REMAINDER, remainder, REMAINDER(a, b))                                                 \
  X(EM_MAXIMUM, maximum, (a > b || a != a) ? a : b) /* NaN on either side wins */             \
  X(EM_MINIMUM, minimum, (a < b || a != a) ? a : b)                                           \
  X(EM_ATAN2, atan2, atan2(a, b))

#define FLOAT_COMPARE(X)                                                                      \
  X(EM_EQ, eq, a == b)                                                                        \
  X(EM_NE, ne, a != b)                                                                        \
  X(EM_LT, lt, a < b)                                                                         \
  X(EM_LE, le, a <= b)                                                                        \
  X(EM_GT, gt, a > b)                                                                         \
  X(EM_GE, ge, a >= b)                                                                        \
  X(EM_LOGICAL_AND, logical_and, (a != 0) & (b != 0))                                         \
  X(EM_LOGICAL_OR, logical_or, (a != 0) | (b != 0))                                           \
  X(EM_LOGICAL_XOR, logical_xor, (a != 0) != (b != 0))

/* ---- instantiation: one function per (width, op), named f32_exp, f64_add, ... ---- */
#define F32_U(E, N, EXPR) EM_PW_UNARY(f32_##N, float, float, float, EXPR)
#define F64_U(E, N, EXPR) EM_PW_UNARY(f64_##N, double, double, double, EXPR)
#define F32_P(E, N, EXPR) EM_PW_UNARY(f32_##N, float, float, uint8_t, EXPR)
#define F64_P(E, N, EXPR) EM_PW_UNARY(f64_##N, double, double, uint8_t, EXPR)
#define F32_B(E, N, EXPR) EM_PW_BINARY(f32_##N, float, float, float, EXPR)
#define F64_B(E, N, EXPR) EM_PW_BINARY(f64_##N, double, double, double, EXPR)
#define F32_C(E, N, EXPR) EM_PW_BINARY(f32_##N, float, float, uint8_t, EXPR)
#define F64_C(E, N, EXPR) EM_PW_BINARY(f64_##N, double, double, uint8_t, EXPR)
FLOAT_UNARY(F32_U)
FLOAT_UNARY(F64_U)
FLOAT_PREDICATES(F32_P)
FLOAT_PREDICATES(F64_P)
FLOAT_BINARY(F32_B)
FLOAT_BINARY(F64_B)
FLOAT_COMPARE(F32_C)
FLOAT_COMPARE(F64_C)

#define F32_ENTRY(E, N, EXPR) [E] = f32_##N,
#define F64_ENTRY(E, N, EXPR) [E] = f64_##N,
static const em_cpu_loop f32_unary[EM_NUM_UNARY] = {FLOAT_UNARY(F32_ENTRY)
                                                        FLOAT_PREDICATES(F32_ENTRY)
                                                        [EM_GELU] = f32_gelu, [EM_EXP] = f32_exp,
                                                        [EM_ERF] = f32_erf};
static const em_cpu_loop f64_unary[EM_NUM_UNARY] = {FLOAT_UNARY(F64_ENTRY)
                                                        FLOAT_PREDICATES(F64_ENTRY)
                                                        [EM_GELU] = f64_gelu, [EM_EXP] = f64_exp,
                                                        [EM_ERF] = f64_erf};
static const em_cpu_loop f32_binary[EM_PW_NUM_BINARY] = {FLOAT_BINARY(F32_ENTRY)
                                                             FLOAT_COMPARE(F32_ENTRY)};
static const em_cpu_loop f64_binary[EM_PW_NUM_BINARY] = {FLOAT_BINARY(F64_ENTRY)
                                                             FLOAT_COMPARE(F64_ENTRY)};

em_cpu_loop em_pw_float_unary(em_dtype d, em_unary_op op) {
  if ((unsigned)op >= EM_NUM_UNARY) return NULL;
  if (op >= EM_ASIN) return em_pw_special_unary(d, op);
  if (d == EM_FLOAT32) return f32_unary[op];
  if (d == EM_FLOAT64) return f64_unary[op];
  return NULL;
}

em_cpu_loop em_pw_float_binary(em_dtype d, int op) {
  if ((unsigned)op >= EM_PW_NUM_BINARY) return NULL;
  if (d == EM_FLOAT32) return f32_binary[op];
  if (d == EM_FLOAT64) return f64_binary[op];
  return NULL;
}
