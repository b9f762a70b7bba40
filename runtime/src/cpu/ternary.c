/*
 * ternary.c: CPU kernels of the ops with three or four operands: where, clamp, lerp and
 * addcmul/addcdiv (backend.h states their contracts).
 *
 * where only moves elements, so it has one loop per element size. clamp, lerp and addc have
 * typed loops for float32 and float64 (lerp is floating only), clamp and addcmul also for the
 * integer dtypes; float16/bfloat16 run the float32 loop through em_pw_half_loop. The common
 * layouts (everything contiguous, bounds or weights that are broadcast scalars) are plain
 * indexed loops for the vectorizer.
 */
#include "pointwise.h"

/* ---- where ---- */

/* out = cond ? a : b, operands (out, cond, a, b); cond is bool (one byte). The contiguous
 * paths select with a mask (no branch) so that the compiler vectorizes them: relu's backward
 * is a where over every activation. */
#define WHERE_LOOP(NAME, T)                                                                   \
  static void NAME(char **p, const int64_t *s, int64_t n, void *ctx) {                       \
    (void)ctx;                                                                                \
    const int64_t es = (int64_t)sizeof(T);                                                    \
    T *o = (T *)p[0];                                                                         \
    const uint8_t *c = (const uint8_t *)p[1];                                                 \
    if (s[0] == es && s[1] == 1 && s[2] == es && s[3] == es) {                                \
      const T *a = (const T *)p[2], *b = (const T *)p[3];                                     \
      for (int64_t i = 0; i < n; i++) {                                                       \
        T m = (T)0 - (T)(c[i] != 0);                                                          \
        o[i] = (T)((a[i] & m) | (b[i] & (T)~m));                                              \
      }                                                                                       \
    } else if (s[0] == es && s[1] == 1 && s[2] == 0 && s[3] == es) {                          \
      const T a = *(const T *)p[2], *b = (const T *)p[3]; /* masked_fill */                   \
      for (int64_t i = 0; i < n; i++) {                                                       \
        T m = (T)0 - (T)(c[i] != 0);                                                          \
        o[i] = (T)((a & m) | (b[i] & (T)~m));                                                 \
      }                                                                                       \
    } else if (s[0] == es && s[1] == 1 && s[2] == es && s[3] == 0) {                          \
      const T *a = (const T *)p[2], b = *(const T *)p[3];                                     \
      for (int64_t i = 0; i < n; i++) {                                                       \
        T m = (T)0 - (T)(c[i] != 0);                                                          \
        o[i] = (T)((a[i] & m) | (b & (T)~m));                                                 \
      }                                                                                       \
    } else {                                                                                  \
      for (int64_t i = 0; i < n; i++)                                                         \
        *(T *)(p[0] + i * s[0]) = *(const uint8_t *)(p[1] + i * s[1])                         \
                                      ? *(const T *)(p[2] + i * s[2])                         \
                                      : *(const T *)(p[3] + i * s[3]);                        \
    }                                                                                         \
  }
WHERE_LOOP(where_1, uint8_t)
WHERE_LOOP(where_2, uint16_t)
WHERE_LOOP(where_4, uint32_t)
WHERE_LOOP(where_8, uint64_t)

int em_cpu_where(em_tensor *out, const em_tensor *cond, const em_tensor *a, const em_tensor *b) {
  static const em_cpu_loop by_size[9] = {NULL, where_1, where_2, NULL, where_4,
                                         NULL, NULL,    NULL,    where_8};
  const em_tensor *ts[4] = {out, cond, a, b};
  em_pw_for_each(4, ts, by_size[em_dtypes[out->dtype_id].size], NULL);
  return 0;
}

/* ---- clamp ---- */

/* NaN in x or in a bound propagates (PyTorch); when lo > hi the result is hi. */
#define F_ISNAN(v) ((v) != (v))
#define I_ISNAN(v) 0
#define CLAMP_LO(v, lo, ISNAN) (((v) < (lo) || ISNAN(lo)) ? (lo) : (v))
#define CLAMP_HI(v, hi, ISNAN) (((v) > (hi) || ISNAN(hi)) ? (hi) : (v))

/* Three loops per type: lower bound only (out, x, lo), upper only (out, x, hi), both
 * (out, x, lo, hi). Scalar bounds (stride 0) with a contiguous x take the fast path. */
#define CLAMP_LOOPS(SN, T, ISNAN)                                                             \
  static void SN##_clamp_lo(char **p, const int64_t *s, int64_t n, void *ctx) {              \
    (void)ctx;                                                                                \
    const int64_t es = (int64_t)sizeof(T);                                                    \
    if (s[0] == es && s[1] == es && s[2] == 0) {                                              \
      T *o = (T *)p[0];                                                                       \
      const T *x = (const T *)p[1], lo = *(const T *)p[2];                                    \
      for (int64_t i = 0; i < n; i++) o[i] = CLAMP_LO(x[i], lo, ISNAN);                       \
      return;                                                                                 \
    }                                                                                         \
    for (int64_t i = 0; i < n; i++) {                                                         \
      T v = *(const T *)(p[1] + i * s[1]), lo = *(const T *)(p[2] + i * s[2]);                \
      *(T *)(p[0] + i * s[0]) = CLAMP_LO(v, lo, ISNAN);                                       \
    }                                                                                         \
  }                                                                                           \
  static void SN##_clamp_hi(char **p, const int64_t *s, int64_t n, void *ctx) {              \
    (void)ctx;                                                                                \
    const int64_t es = (int64_t)sizeof(T);                                                    \
    if (s[0] == es && s[1] == es && s[2] == 0) {                                              \
      T *o = (T *)p[0];                                                                       \
      const T *x = (const T *)p[1], hi = *(const T *)p[2];                                    \
      for (int64_t i = 0; i < n; i++) o[i] = CLAMP_HI(x[i], hi, ISNAN);                       \
      return;                                                                                 \
    }                                                                                         \
    for (int64_t i = 0; i < n; i++) {                                                         \
      T v = *(const T *)(p[1] + i * s[1]), hi = *(const T *)(p[2] + i * s[2]);                \
      *(T *)(p[0] + i * s[0]) = CLAMP_HI(v, hi, ISNAN);                                       \
    }                                                                                         \
  }                                                                                           \
  static void SN##_clamp_both(char **p, const int64_t *s, int64_t n, void *ctx) {            \
    (void)ctx;                                                                                \
    const int64_t es = (int64_t)sizeof(T);                                                    \
    if (s[0] == es && s[1] == es && s[2] == 0 && s[3] == 0) {                                 \
      T *o = (T *)p[0];                                                                       \
      const T *x = (const T *)p[1], lo = *(const T *)p[2], hi = *(const T *)p[3];             \
      for (int64_t i = 0; i < n; i++) {                                                       \
        T v = CLAMP_LO(x[i], lo, ISNAN);                                                      \
        o[i] = CLAMP_HI(v, hi, ISNAN);                                                        \
      }                                                                                       \
      return;                                                                                 \
    }                                                                                         \
    for (int64_t i = 0; i < n; i++) {                                                         \
      T v = *(const T *)(p[1] + i * s[1]);                                                    \
      T lo = *(const T *)(p[2] + i * s[2]), hi = *(const T *)(p[3] + i * s[3]);              \
      v = CLAMP_LO(v, lo, ISNAN);                                                             \
      *(T *)(p[0] + i * s[0]) = CLAMP_HI(v, hi, ISNAN);                                       \
    }                                                                                         \
  }
CLAMP_LOOPS(f32, float, F_ISNAN)
CLAMP_LOOPS(f64, double, F_ISNAN)
CLAMP_LOOPS(i8, int8_t, I_ISNAN)
CLAMP_LOOPS(u8, uint8_t, I_ISNAN)
CLAMP_LOOPS(i16, int16_t, I_ISNAN)
CLAMP_LOOPS(i32, int32_t, I_ISNAN)
CLAMP_LOOPS(i64, int64_t, I_ISNAN)

/* [dtype][which]: which = 0 lower only, 1 upper only, 2 both. */
#define CLAMP_ROW(E, SN) [E] = {SN##_clamp_lo, SN##_clamp_hi, SN##_clamp_both}
static const em_cpu_loop clamp_loops[EM_NUM_DTYPES][3] = {
  CLAMP_ROW(EM_FLOAT32, f32), CLAMP_ROW(EM_FLOAT64, f64), CLAMP_ROW(EM_INT8, i8),
  CLAMP_ROW(EM_UINT8, u8),    CLAMP_ROW(EM_INT16, i16),   CLAMP_ROW(EM_INT32, i32),
  CLAMP_ROW(EM_INT64, i64),
};

/* Runs a per-dtype loop over ts; 16-bit floats through the float32 loop. */
static int run_typed(const char *fn, int n, const em_tensor *const *ts, em_dtype d,
                     em_cpu_loop f32_loop, em_cpu_loop loop, em_pw_ctx *c) {
  if (em_pw_is_half(d)) {
    c->inner = f32_loop;
    c->half = d;
    c->nops = n;
    c->passthrough = 0;
    loop = em_pw_half_loop;
  }
  if (loop == NULL)
    return em_error("%s: not supported for %s tensors on cpu", fn, em_dtype_name(d));
  em_pw_for_each(n, ts, loop, c);
  return 0;
}

int em_cpu_clamp(em_tensor *out, const em_tensor *x, const em_tensor *lo, const em_tensor *hi) {
  em_dtype d = (em_dtype)out->dtype_id;
  int which = lo && hi ? 2 : lo ? 0 : 1;
  const em_tensor *ts[4] = {out, x, lo ? lo : hi, hi};
  int n = which == 2 ? 4 : 3;
  em_pw_ctx c = {.alpha = 1.0, .ialpha = 1};
  return run_typed("clamp", n, ts, d, clamp_loops[EM_FLOAT32][which], clamp_loops[d][which], &c);
}

/* ---- lerp ---- */

/* PyTorch's formula: exact at weight 0 and 1, and stable on both halves. */
#define LERP(s, e, w, T)                                                                      \
  (((w) < (T)0.5 && (w) > (T)-0.5) ? (s) + (w) * ((e) - (s)) : (e) - ((e) - (s)) * ((T)1 - (w)))

#define LERP_LOOP(NAME, T)                                                                    \
  static void NAME(char **p, const int64_t *s, int64_t n, void *ctx) {                       \
    (void)ctx;                                                                                \
    const int64_t es = (int64_t)sizeof(T);                                                    \
    if (s[0] == es && s[1] == es && s[2] == es && s[3] == 0) {                                \
      T *o = (T *)p[0];                                                                       \
      const T *a = (const T *)p[1], *b = (const T *)p[2], w = *(const T *)p[3];               \
      for (int64_t i = 0; i < n; i++) o[i] = LERP(a[i], b[i], w, T);                          \
      return;                                                                                 \
    }                                                                                         \
    for (int64_t i = 0; i < n; i++) {                                                         \
      T a = *(const T *)(p[1] + i * s[1]), b = *(const T *)(p[2] + i * s[2]);                 \
      T w = *(const T *)(p[3] + i * s[3]);                                                    \
      *(T *)(p[0] + i * s[0]) = LERP(a, b, w, T);                                             \
    }                                                                                         \
  }
LERP_LOOP(f32_lerp, float)
LERP_LOOP(f64_lerp, double)

int em_cpu_lerp(em_tensor *out, const em_tensor *start, const em_tensor *end,
                const em_tensor *weight) {
  em_dtype d = (em_dtype)out->dtype_id;
  const em_tensor *ts[4] = {out, start, end, weight};
  em_pw_ctx c = {.alpha = 1.0, .ialpha = 1};
  em_cpu_loop loop = d == EM_FLOAT32 ? f32_lerp : d == EM_FLOAT64 ? f64_lerp : NULL;
  return run_typed("lerp", 4, ts, d, f32_lerp, loop, &c);
}

/* ---- addcmul / addcdiv ---- */

/* out = x + value * t1 * t2 (or / t2), operands (out, x, t1, t2). Integers wrap (UT). */
#define ADDC_LOOP(NAME, T, UT, VALUE, EXPR)                                                   \
  static void NAME(char **p, const int64_t *s, int64_t n, void *vctx) {                      \
    const em_pw_ctx *ctx = vctx;                                                              \
    const T v = (T)(VALUE);                                                                   \
    const int64_t es = (int64_t)sizeof(T);                                                    \
    if (s[0] == es && s[1] == es && s[2] == es && s[3] == es) {                               \
      T *o = (T *)p[0];                                                                       \
      const T *xs = (const T *)p[1], *as = (const T *)p[2], *bs = (const T *)p[3];            \
      for (int64_t i = 0; i < n; i++) {                                                       \
        T x = xs[i], a = as[i], b = bs[i];                                                    \
        o[i] = (T)(EXPR);                                                                     \
      }                                                                                       \
      return;                                                                                 \
    }                                                                                         \
    for (int64_t i = 0; i < n; i++) {                                                         \
      T x = *(const T *)(p[1] + i * s[1]), a = *(const T *)(p[2] + i * s[2]);                 \
      T b = *(const T *)(p[3] + i * s[3]);                                                    \
      *(T *)(p[0] + i * s[0]) = (T)(EXPR);                                                    \
    }                                                                                         \
  }
#define FLOAT_ADDC(SN, T)                                                                     \
  ADDC_LOOP(SN##_addcmul, T, T, ctx->alpha, x + v * a * b)                                    \
  ADDC_LOOP(SN##_addcdiv, T, T, ctx->alpha, x + v * a / b)
#define INT_ADDC(SN, T, UT)                                                                   \
  ADDC_LOOP(SN##_addcmul, T, UT, ctx->ialpha, (UT)x + (UT)v * (UT)a * (UT)b)
FLOAT_ADDC(f32, float)
FLOAT_ADDC(f64, double)
INT_ADDC(i8, int8_t, uint32_t)
INT_ADDC(u8, uint8_t, uint32_t)
INT_ADDC(i16, int16_t, uint32_t)
INT_ADDC(i32, int32_t, uint32_t)
INT_ADDC(i64, int64_t, uint64_t)

static const em_cpu_loop addcmul_loops[EM_NUM_DTYPES] = {
  [EM_FLOAT32] = f32_addcmul, [EM_FLOAT64] = f64_addcmul, [EM_INT8] = i8_addcmul,
  [EM_UINT8] = u8_addcmul,    [EM_INT16] = i16_addcmul,   [EM_INT32] = i32_addcmul,
  [EM_INT64] = i64_addcmul,
};
static const em_cpu_loop addcdiv_loops[EM_NUM_DTYPES] = {
  [EM_FLOAT32] = f32_addcdiv, [EM_FLOAT64] = f64_addcdiv,
};

int em_cpu_addc(int divide, em_tensor *out, const em_tensor *x, const em_tensor *t1,
                const em_tensor *t2, double value) {
  em_dtype d = (em_dtype)out->dtype_id;
  const em_tensor *ts[4] = {out, x, t1, t2};
  em_pw_ctx c = {.alpha = value, .ialpha = em_sat_i64(value)};
  const em_cpu_loop *loops = divide ? addcdiv_loops : addcmul_loops;
  return run_typed(divide ? "addcdiv" : "addcmul", 4, ts, d, loops[EM_FLOAT32], loops[d], &c);
}
