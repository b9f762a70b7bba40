/*
 * pointwise.h: what the CPU's elementwise kernel files share (pointwise.c, pointwise_float.c,
 * pointwise_int.c, ternary.c): the context every loop receives, the loop-generating macros, the
 * per-dtype loop tables, and the float16/bfloat16 wrapper that runs a float32 loop in chunks.
 *
 * Every loop is an em_cpu_loop (cpu.h): operand 0 is the output, strides are in bytes. The
 * generated loops test for the common layouts first: everything contiguous, then one input a
 * broadcast scalar (stride 0), so that the compiler vectorizes those runs; any other layout
 * takes a plain strided loop.
 */
#ifndef EMBER_CPU_POINTWISE_H
#define EMBER_CPU_POINTWISE_H

#include "cpu.h"

/* Error codes a loop can raise; the entry point turns them into messages after the loop, since
 * a loop cannot stop the iterator (and may run on several threads). */
enum { EM_PW_OK, EM_PW_DIV_ZERO, EM_PW_NEG_POW };

/* Extra binary loop ids after em_binary_op: a + alpha * b. */
enum { EM_PW_ADD_ALPHA = EM_NUM_BINARY, EM_PW_NUM_BINARY };

typedef struct em_pw_ctx {
  double alpha;        /* add with alpha, addcmul/addcdiv value */
  int64_t ialpha;      /* the same for integer dtypes (checked integral by the definition) */
  int err;             /* EM_PW_*: written with an atomic store, read after the loop */
  int has_lo, has_hi;  /* clamp bounds present */
  /* float16/bfloat16: the float32 loop to run on converted chunks. */
  em_cpu_loop inner;
  em_dtype half;       /* EM_FLOAT16 or EM_BFLOAT16 */
  int nops;            /* operands the wrapper converts, the output included */
  uint32_t passthrough; /* bit k: operand k is not 16-bit (bool output, where's cond): as is */
} em_pw_ctx;

static inline void em_pw_raise(em_pw_ctx *c, int code) {
  __atomic_store_n(&c->err, code, __ATOMIC_RELAXED);
}

/* Loop tables. NULL means the dtype does not support the op (the definition rejects those). */
em_cpu_loop em_pw_float_unary(em_dtype d, em_unary_op op);
em_cpu_loop em_pw_special_unary(em_dtype d, em_unary_op op); /* EM_ASIN onwards */
em_cpu_loop em_pw_float_binary(em_dtype d, int op);
em_cpu_loop em_pw_int_unary(em_dtype d, em_unary_op op);
em_cpu_loop em_pw_int_binary(em_dtype d, int op);

/* Runs c->inner (a float32 loop) over chunks converted from c->half into float32 buffers on
 * the stack; operands marked in c->passthrough are handed over unconverted. */
void em_pw_half_loop(char **p, const int64_t *s, int64_t n, void *ctx);

/* em_cpu_for_each for elementwise kernels (operand 0 the output): when the output is
 * contiguous, not written in place, and larger than about half the last-level cache, its stores
 * bypass the cache (non-temporal), which saves the read-for-ownership of every output line: a
 * large add then moves 3 bytes of memory traffic per 3 bytes of data instead of 4, as memcpy
 * does. */
void em_pw_for_each(int n, const em_tensor *const *ts, em_cpu_loop loop, void *ctx);

static inline bool em_pw_is_half(em_dtype d) { return d == EM_FLOAT16 || d == EM_BFLOAT16; }

/* ---- loop generators -------------------------------------------------------------------------
 * EXPR sees the element(s) as `x` (unary) or `a`, `b` (binary), typed T; the output type is OT
 * and UT is an unsigned type for wrap-around integer arithmetic (T itself for floats). Inside,
 * `alpha`/`ialpha` hold the context's scale and `bad` may be set to an EM_PW_* code. */
#define EM_PW_UNARY(NAME, CT, CUT, COT, EXPR)                                                 \
  static void NAME(char **p, const int64_t *s, int64_t n, void *vctx) {                      \
    typedef CT T;                                                                             \
    typedef CUT UT __attribute__((unused));                                                   \
    typedef COT OT;                                                                           \
    (void)vctx;                                                                               \
    if (s[0] == (int64_t)sizeof(OT) && s[1] == (int64_t)sizeof(T)) {                          \
      OT *o = (OT *)p[0];                                                                     \
      const T *xs = (const T *)p[1];                                                          \
      for (int64_t i = 0; i < n; i++) {                                                       \
        T x = xs[i];                                                                          \
        o[i] = (OT)(EXPR);                                                                    \
      }                                                                                       \
      return;                                                                                 \
    }                                                                                         \
    for (int64_t i = 0; i < n; i++) {                                                         \
      T x = *(const T *)(p[1] + i * s[1]);                                                    \
      *(OT *)(p[0] + i * s[0]) = (OT)(EXPR);                                                  \
    }                                                                                         \
  }

#define EM_PW_BINARY(NAME, CT, CUT, COT, EXPR)                                                \
  static void NAME(char **p, const int64_t *s, int64_t n, void *vctx) {                      \
    typedef CT T;                                                                             \
    typedef CUT UT __attribute__((unused));                                                   \
    typedef COT OT;                                                                           \
    em_pw_ctx *ctx = vctx;                                                                    \
    const double alpha = ctx->alpha;                                                          \
    const int64_t ialpha = ctx->ialpha;                                                       \
    int bad = EM_PW_OK;                                                                       \
    (void)alpha;                                                                              \
    (void)ialpha;                                                                             \
    const int64_t es = (int64_t)sizeof(T), os = (int64_t)sizeof(OT);                          \
    OT *o = (OT *)p[0];                                                                       \
    if (s[0] == os && s[1] == es && s[2] == es) {                                             \
      const T *as = (const T *)p[1], *bs = (const T *)p[2];                                   \
      for (int64_t i = 0; i < n; i++) {                                                       \
        T a = as[i], b = bs[i];                                                               \
        o[i] = (OT)(EXPR);                                                                    \
      }                                                                                       \
    } else if (s[0] == os && s[1] == es && s[2] == 0) {                                       \
      const T *as = (const T *)p[1];                                                          \
      const T b = *(const T *)p[2];                                                           \
      for (int64_t i = 0; i < n; i++) {                                                       \
        T a = as[i];                                                                          \
        o[i] = (OT)(EXPR);                                                                    \
      }                                                                                       \
    } else if (s[0] == os && s[1] == 0 && s[2] == es) {                                       \
      const T a = *(const T *)p[1];                                                           \
      const T *bs = (const T *)p[2];                                                          \
      for (int64_t i = 0; i < n; i++) {                                                       \
        T b = bs[i];                                                                          \
        o[i] = (OT)(EXPR);                                                                    \
      }                                                                                       \
    } else {                                                                                  \
      for (int64_t i = 0; i < n; i++) {                                                       \
        T a = *(const T *)(p[1] + i * s[1]), b = *(const T *)(p[2] + i * s[2]);              \
        *(OT *)(p[0] + i * s[0]) = (OT)(EXPR);                                                \
      }                                                                                       \
    }                                                                                         \
    if (bad != EM_PW_OK) em_pw_raise(ctx, bad);                                               \
  }

#endif
