/*
 * pointwise_int.c: the integer and bool loops of the unary and binary ops, and their tables.
 *
 * Integer arithmetic follows PyTorch and never has undefined behaviour, so UBSan stays quiet:
 *  - add, sub, mul, neg, abs, square and pow wrap around: they compute in an unsigned type of
 *    at least 32 bits (UT) and convert back (small types would otherwise promote to int, where
 *    65535 * 65535 overflows);
 *  - division and remainder by zero do not trap: the loop records EM_PW_DIV_ZERO and the entry
 *    point reports "floor_divide: integer division by zero"; INT_MIN / -1 wraps to INT_MIN;
 *  - a negative integer exponent records EM_PW_NEG_POW;
 *  - shifts by a negative amount or by the bit width or more give 0 (left) or the sign fill
 *    (right), as PyTorch defines them.
 * Bool tensors hold 0 or 1; their arithmetic is logic (add = or, mul = and).
 */
#include "pointwise.h"

/* Helpers per signed type: floor division, C's truncating remainder, Python's remainder,
 * power by squaring, and the two shifts. */
#define SIGNED_HELPERS(SN, T, UT, BITS)                                                       \
  static inline T SN##h_floordiv(T a, T b, int *bad) {                                         \
    if (b == 0) {                                                                             \
      *bad = EM_PW_DIV_ZERO;                                                                  \
      return 0;                                                                               \
    }                                                                                         \
    if (b == -1) return (T)(0u - (UT)a);                                                      \
    T q = (T)(a / b), r = (T)(a % b);                                                         \
    return (r != 0 && (r < 0) != (b < 0)) ? (T)(q - 1) : q;                                   \
  }                                                                                           \
  static inline T SN##h_fmod(T a, T b, int *bad) {                                             \
    if (b == 0) {                                                                             \
      *bad = EM_PW_DIV_ZERO;                                                                  \
      return 0;                                                                               \
    }                                                                                         \
    return b == -1 ? (T)0 : (T)(a % b);                                                       \
  }                                                                                           \
  static inline T SN##h_remainder(T a, T b, int *bad) {                                        \
    T r = SN##h_fmod(a, b, bad);                                                               \
    return (r != 0 && (r < 0) != (b < 0)) ? (T)(r + b) : r;                                   \
  }                                                                                           \
  static inline T SN##h_pow(T a, T b, int *bad) {                                              \
    if (b < 0) {                                                                              \
      *bad = EM_PW_NEG_POW;                                                                   \
      return 0;                                                                               \
    }                                                                                         \
    UT r = 1, base = (UT)a;                                                                   \
    for (uint64_t e = (uint64_t)b; e != 0; e >>= 1) {                                         \
      if (e & 1) r *= base;                                                                   \
      base *= base;                                                                           \
    }                                                                                         \
    return (T)r;                                                                              \
  }                                                                                           \
  static inline T SN##h_lshift(T a, T b) {                                                     \
    return (b < 0 || b >= BITS) ? (T)0 : (T)((UT)a << b);                                     \
  }                                                                                           \
  static inline T SN##h_rshift(T a, T b) {                                                     \
    return (b < 0 || b >= BITS) ? (T)(a < 0 ? -1 : 0) : (T)(a >> b);                          \
  }                                                                                           \
  static inline bool SN##h_neg(T v) { return v < 0; }

SIGNED_HELPERS(i8, int8_t, uint32_t, 8)
SIGNED_HELPERS(i16, int16_t, uint32_t, 16)
SIGNED_HELPERS(i32, int32_t, uint32_t, 32)
SIGNED_HELPERS(i64, int64_t, uint64_t, 64)

/* uint8: the same without signs. */
static inline uint8_t u8h_floordiv(uint8_t a, uint8_t b, int *bad) {
  if (b == 0) {
    *bad = EM_PW_DIV_ZERO;
    return 0;
  }
  return (uint8_t)(a / b);
}
static inline uint8_t u8h_fmod(uint8_t a, uint8_t b, int *bad) {
  if (b == 0) {
    *bad = EM_PW_DIV_ZERO;
    return 0;
  }
  return (uint8_t)(a % b);
}
static inline uint8_t u8h_remainder(uint8_t a, uint8_t b, int *bad) { return u8h_fmod(a, b, bad); }
static inline uint8_t u8h_pow(uint8_t a, uint8_t b, int *bad) {
  (void)bad;
  uint32_t r = 1, base = a;
  for (uint32_t e = b; e != 0; e >>= 1) {
    if (e & 1) r *= base;
    base *= base;
  }
  return (uint8_t)r;
}
static inline uint8_t u8h_lshift(uint8_t a, uint8_t b) {
  return b >= 8 ? 0 : (uint8_t)((uint32_t)a << b);
}
static inline uint8_t u8h_rshift(uint8_t a, uint8_t b) { return b >= 8 ? 0 : (uint8_t)(a >> b); }
static inline bool u8h_neg(uint8_t v) { (void)v; return false; }

/* Picks the helper of the loop's element type T. */
#define PICK(F)                                                                               \
  _Generic((T)0, int8_t: i8h_##F, uint8_t: u8h_##F, int16_t: i16h_##F, int32_t: i32h_##F,   \
           int64_t: i64h_##F)
#define ISNEG(v) PICK(neg)(v)

/* ---- the ops ---- */
#define INT_UNARY(X)                                                                          \
  X(EM_NEG, neg, (T)(0u - (UT)x))                                                             \
  X(EM_ABS, abs, ISNEG(x) ? (T)(0u - (UT)x) : x)                                              \
  X(EM_SIGN, sign, (T)((x > 0) - ISNEG(x)))                                                   \
  X(EM_FLOOR, floor, x)                                                                       \
  X(EM_CEIL, ceil, x)                                                                         \
  X(EM_ROUND, round, x)                                                                       \
  X(EM_TRUNC, trunc, x)                                                                       \
  X(EM_SQUARE, square, (T)((UT)x * (UT)x))                                                    \
  X(EM_RELU, relu, x > 0 ? x : (T)0)                                                          \
  X(EM_BITWISE_NOT, bitwise_not, (T)~(UT)x)

#define INT_PREDICATES(X)                                                                     \
  X(EM_ISNAN, isnan, ((void)x, 0))                                                            \
  X(EM_ISINF, isinf, ((void)x, 0))                                                            \
  X(EM_ISFINITE, isfinite, ((void)x, 1))                                                      \
  X(EM_LOGICAL_NOT, logical_not, x == 0)

#define INT_BINARY(X)                                                                         \
  X(EM_ADD, add, (T)((UT)a + (UT)b))                                                          \
  X(EM_PW_ADD_ALPHA, add_alpha, (T)((UT)a + (UT)ialpha * (UT)b))                              \
  X(EM_SUB, sub, (T)((UT)a - (UT)b))                                                          \
  X(EM_MUL, mul, (T)((UT)a * (UT)b))                                                          \
  X(EM_FLOOR_DIVIDE, floor_divide, PICK(floordiv)(a, b, &bad))                                \
  X(EM_POW, pow, PICK(pow)(a, b, &bad))                                                       \
  X(EM_FMOD, fmod, PICK(fmod)(a, b, &bad))                                                    \
  X(EM_REMAINDER, remainder, PICK(remainder)(a, b, &bad))                                     \
  X(EM_MAXIMUM, maximum, a > b ? a : b)                                                       \
  X(EM_MINIMUM, minimum, a < b ? a : b)                                                       \
  X(EM_BITWISE_AND, bitwise_and, (T)(a & b))                                                  \
  X(EM_BITWISE_OR, bitwise_or, (T)(a | b))                                                    \
  X(EM_BITWISE_XOR, bitwise_xor, (T)(a ^ b))                                                  \
  X(EM_LSHIFT, lshift, PICK(lshift)(a, b))                                                    \
  X(EM_RSHIFT, rshift, PICK(rshift)(a, b))

#define INT_COMPARE(X)                                                                        \
  X(EM_EQ, eq, a == b)                                                                        \
  X(EM_NE, ne, a != b)                                                                        \
  X(EM_LT, lt, a < b)                                                                         \
  X(EM_LE, le, a <= b)                                                                        \
  X(EM_GT, gt, a > b)                                                                         \
  X(EM_GE, ge, a >= b)                                                                        \
  X(EM_LOGICAL_AND, logical_and, (a != 0) & (b != 0))                                         \
  X(EM_LOGICAL_OR, logical_or, (a != 0) | (b != 0))                                           \
  X(EM_LOGICAL_XOR, logical_xor, (a != 0) != (b != 0))

/* ---- instantiation: one function per (type, op), named i32_add, u8_eq, ... ---- */
/* An X-macro callback must be a plain macro name, so each type spells out its four. */
#define I8_U(E, N, X) EM_PW_UNARY(i8_##N, int8_t, uint32_t, int8_t, X)
#define U8_U(E, N, X) EM_PW_UNARY(u8_##N, uint8_t, uint32_t, uint8_t, X)
#define I16_U(E, N, X) EM_PW_UNARY(i16_##N, int16_t, uint32_t, int16_t, X)
#define I32_U(E, N, X) EM_PW_UNARY(i32_##N, int32_t, uint32_t, int32_t, X)
#define I64_U(E, N, X) EM_PW_UNARY(i64_##N, int64_t, uint64_t, int64_t, X)
#define I8_P(E, N, X) EM_PW_UNARY(i8_##N, int8_t, uint32_t, uint8_t, X)
#define U8_P(E, N, X) EM_PW_UNARY(u8_##N, uint8_t, uint32_t, uint8_t, X)
#define I16_P(E, N, X) EM_PW_UNARY(i16_##N, int16_t, uint32_t, uint8_t, X)
#define I32_P(E, N, X) EM_PW_UNARY(i32_##N, int32_t, uint32_t, uint8_t, X)
#define I64_P(E, N, X) EM_PW_UNARY(i64_##N, int64_t, uint64_t, uint8_t, X)
#define I8_B(E, N, X) EM_PW_BINARY(i8_##N, int8_t, uint32_t, int8_t, X)
#define U8_B(E, N, X) EM_PW_BINARY(u8_##N, uint8_t, uint32_t, uint8_t, X)
#define I16_B(E, N, X) EM_PW_BINARY(i16_##N, int16_t, uint32_t, int16_t, X)
#define I32_B(E, N, X) EM_PW_BINARY(i32_##N, int32_t, uint32_t, int32_t, X)
#define I64_B(E, N, X) EM_PW_BINARY(i64_##N, int64_t, uint64_t, int64_t, X)
#define I8_C(E, N, X) EM_PW_BINARY(i8_##N, int8_t, uint32_t, uint8_t, X)
#define U8_C(E, N, X) EM_PW_BINARY(u8_##N, uint8_t, uint32_t, uint8_t, X)
#define I16_C(E, N, X) EM_PW_BINARY(i16_##N, int16_t, uint32_t, uint8_t, X)
#define I32_C(E, N, X) EM_PW_BINARY(i32_##N, int32_t, uint32_t, uint8_t, X)
#define I64_C(E, N, X) EM_PW_BINARY(i64_##N, int64_t, uint64_t, uint8_t, X)
#define INT_INSTANCES(P)                                                                      \
  INT_UNARY(P##_U) INT_PREDICATES(P##_P) INT_BINARY(P##_B) INT_COMPARE(P##_C)
INT_INSTANCES(I8)
INT_INSTANCES(U8)
INT_INSTANCES(I16)
INT_INSTANCES(I32)
INT_INSTANCES(I64)

#define I8_E(E, N, X) [E] = i8_##N,
#define U8_E(E, N, X) [E] = u8_##N,
#define I16_E(E, N, X) [E] = i16_##N,
#define I32_E(E, N, X) [E] = i32_##N,
#define I64_E(E, N, X) [E] = i64_##N,
#define INT_TABLES(SN, P)                                                                     \
  static const em_cpu_loop SN##_unary[EM_NUM_UNARY] = {INT_UNARY(P##_E) INT_PREDICATES(P##_E)}; \
  static const em_cpu_loop SN##_binary[EM_PW_NUM_BINARY] = {INT_BINARY(P##_E)                 \
                                                                INT_COMPARE(P##_E)};
INT_TABLES(i8, I8)
INT_TABLES(u8, U8)
INT_TABLES(i16, I16)
INT_TABLES(i32, I32)
INT_TABLES(i64, I64)

/* ---- bool: values 0 or 1, logic instead of arithmetic ---- */
#define BOOL_UNARY(X)                                                                         \
  X(EM_SIGN, sign, x != 0)                                                                    \
  X(EM_FLOOR, floor, x != 0)                                                                  \
  X(EM_CEIL, ceil, x != 0)                                                                    \
  X(EM_ROUND, round, x != 0)                                                                  \
  X(EM_TRUNC, trunc, x != 0)                                                                  \
  X(EM_ISNAN, isnan, ((void)x, 0))                                                            \
  X(EM_ISINF, isinf, ((void)x, 0))                                                            \
  X(EM_ISFINITE, isfinite, ((void)x, 1))                                                      \
  X(EM_LOGICAL_NOT, logical_not, x == 0)                                                      \
  X(EM_BITWISE_NOT, bitwise_not, x == 0)

#define BOOL_BINARY(X)                                                                        \
  X(EM_ADD, add, (a != 0) | (b != 0))                                                         \
  X(EM_PW_ADD_ALPHA, add_alpha, (a != 0) | ((ialpha != 0) & (b != 0)))                        \
  X(EM_MUL, mul, (a != 0) & (b != 0))                                                         \
  X(EM_MAXIMUM, maximum, (a != 0) | (b != 0))                                                 \
  X(EM_MINIMUM, minimum, (a != 0) & (b != 0))                                                 \
  X(EM_EQ, eq, (a != 0) == (b != 0))                                                          \
  X(EM_NE, ne, (a != 0) != (b != 0))                                                          \
  X(EM_LT, lt, (a == 0) & (b != 0))                                                           \
  X(EM_LE, le, (a == 0) | (b != 0))                                                           \
  X(EM_GT, gt, (a != 0) & (b == 0))                                                           \
  X(EM_GE, ge, (a != 0) | (b == 0))                                                           \
  X(EM_LOGICAL_AND, logical_and, (a != 0) & (b != 0))                                         \
  X(EM_LOGICAL_OR, logical_or, (a != 0) | (b != 0))                                           \
  X(EM_LOGICAL_XOR, logical_xor, (a != 0) != (b != 0))                                        \
  X(EM_BITWISE_AND, bitwise_and, (a != 0) & (b != 0))                                         \
  X(EM_BITWISE_OR, bitwise_or, (a != 0) | (b != 0))                                           \
  X(EM_BITWISE_XOR, bitwise_xor, (a != 0) != (b != 0))

#define B8_U(E, N, X) EM_PW_UNARY(b8_##N, uint8_t, uint32_t, uint8_t, X)
#define B8_B(E, N, X) EM_PW_BINARY(b8_##N, uint8_t, uint32_t, uint8_t, X)
#define B8_E(E, N, X) [E] = b8_##N,
BOOL_UNARY(B8_U)
BOOL_BINARY(B8_B)
static const em_cpu_loop b8_unary[EM_NUM_UNARY] = {BOOL_UNARY(B8_E)};
static const em_cpu_loop b8_binary[EM_PW_NUM_BINARY] = {BOOL_BINARY(B8_E)};

em_cpu_loop em_pw_int_unary(em_dtype d, em_unary_op op) {
  if ((unsigned)op >= EM_NUM_UNARY) return NULL;
  switch (d) {
  case EM_INT8: return i8_unary[op];
  case EM_UINT8: return u8_unary[op];
  case EM_INT16: return i16_unary[op];
  case EM_INT32: return i32_unary[op];
  case EM_INT64: return i64_unary[op];
  case EM_BOOL: return b8_unary[op];
  default: return NULL;
  }
}

em_cpu_loop em_pw_int_binary(em_dtype d, int op) {
  if ((unsigned)op >= EM_PW_NUM_BINARY) return NULL;
  switch (d) {
  case EM_INT8: return i8_binary[op];
  case EM_UINT8: return u8_binary[op];
  case EM_INT16: return i16_binary[op];
  case EM_INT32: return i32_binary[op];
  case EM_INT64: return i64_binary[op];
  case EM_BOOL: return b8_binary[op];
  default: return NULL;
  }
}
