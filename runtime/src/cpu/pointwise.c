/*
 * pointwise.c: CPU kernels for unary and binary elementwise ops.
 *
 * Inputs arrive broadcast and cast to one compute dtype (backend.h). float32 and float64 have
 * typed loops that the compiler vectorizes when the run is contiguous; other dtypes go through
 * double, one element at a time.
 */
#include "cpu.h"

/* ---- generic path: any dtype, through double ---- */
typedef struct generic_ctx {
  int op;
  em_dtype in, out;
  double alpha;
} generic_ctx;

static double unary_scalar(em_unary_op op, double x) {
  switch (op) {
  case EM_NEG: return -x;
  case EM_EXP: return exp(x);
  default: return NAN;
  }
}

static double binary_scalar(em_binary_op op, double a, double b, double alpha) {
  switch (op) {
  case EM_ADD: return a + alpha * b;
  case EM_SUB: return a - alpha * b;
  case EM_MUL: return a * b;
  case EM_DIV: return a / b;
  default: return NAN;
  }
}

static void unary_generic(char **p, const int64_t *s, int64_t n, void *vctx) {
  const generic_ctx *c = vctx;
  for (int64_t i = 0; i < n; i++) {
    double x = em_load_as_double(p[1] + i * s[1], c->in);
    em_store_from_double(p[0] + i * s[0], c->out, unary_scalar((em_unary_op)c->op, x));
  }
}

static void binary_generic(char **p, const int64_t *s, int64_t n, void *vctx) {
  const generic_ctx *c = vctx;
  for (int64_t i = 0; i < n; i++) {
    double a = em_load_as_double(p[1] + i * s[1], c->in);
    double b = em_load_as_double(p[2] + i * s[2], c->in);
    em_store_from_double(p[0] + i * s[0], c->out,
                         binary_scalar((em_binary_op)c->op, a, b, c->alpha));
  }
}

/* ---- float32 fast path ---- */
#define F32_BINARY_LOOP(NAME, EXPR)                                                           \
  static void NAME(char **p, const int64_t *s, int64_t n, void *vctx) {                       \
    const float alpha = (float)((const generic_ctx *)vctx)->alpha;                           \
    (void)alpha;                                                                              \
    if (s[0] == 4 && s[1] == 4 && s[2] == 4) {                                                \
      float *o = (float *)p[0];                                                               \
      const float *x = (const float *)p[1], *y = (const float *)p[2];                         \
      for (int64_t i = 0; i < n; i++) {                                                       \
        float a = x[i], b = y[i];                                                             \
        o[i] = (EXPR);                                                                        \
      }                                                                                       \
      return;                                                                                 \
    }                                                                                         \
    for (int64_t i = 0; i < n; i++) {                                                         \
      float a = *(const float *)(p[1] + i * s[1]), b = *(const float *)(p[2] + i * s[2]);     \
      *(float *)(p[0] + i * s[0]) = (EXPR);                                                   \
    }                                                                                         \
  }
F32_BINARY_LOOP(f32_add, a + alpha * b)
F32_BINARY_LOOP(f32_sub, a - alpha * b)
F32_BINARY_LOOP(f32_mul, a * b)
F32_BINARY_LOOP(f32_div, a / b)

int em_cpu_unary(em_unary_op op, em_tensor *out, const em_tensor *x) {
  generic_ctx c = {op, (em_dtype)x->dtype_id, (em_dtype)out->dtype_id, 1.0};
  const em_tensor *ts[2] = {out, x};
  if (op != EM_NEG && op != EM_EXP)
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: not implemented on cpu",
                             em_unary_name(op));
  em_cpu_for_each(2, ts, unary_generic, &c);
  return 0;
}

int em_cpu_binary(em_binary_op op, em_tensor *out, const em_tensor *a, const em_tensor *b,
                  double alpha) {
  generic_ctx c = {op, (em_dtype)a->dtype_id, (em_dtype)out->dtype_id, alpha};
  const em_tensor *ts[3] = {out, a, b};
  if (op > EM_DIV)
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: not implemented on cpu",
                             em_binary_name(op));
  if (out->dtype_id == EM_FLOAT32 && a->dtype_id == EM_FLOAT32) {
    static const em_cpu_loop f32[] = {f32_add, f32_sub, f32_mul, f32_div};
    em_cpu_for_each(3, ts, f32[op], &c);
    return 0;
  }
  em_cpu_for_each(3, ts, binary_generic, &c);
  return 0;
}
