/*
 * pointwise.c: the CPU's unary and binary kernel entry points, and the float16/bfloat16 chunk
 * wrapper that the ternary kernels share.
 *
 * Inputs arrive broadcast and cast to one compute dtype (backend.h). An entry point picks the
 * typed loop for (dtype, op) from the tables in pointwise_float.c and pointwise_int.c, runs it
 * through the iterator (threads for large work), and turns an error a loop recorded (integer
 * division by zero, negative integer power) into a message. 16-bit floats run the float32 loop
 * on chunks converted on the stack: no allocation per call.
 */
#include "pointwise.h"

/* ---- float16 / bfloat16 ---- */

/* Elements per converted chunk: 256 floats per operand keeps the buffers (5 KiB at most) in
 * L1 and amortizes the inner loop's call. */
enum { HALF_CHUNK = 256 };

static void half_load(float *dst, const char *src, int64_t stride, int64_t m, em_dtype d) {
  if (d == EM_FLOAT16) {
    for (int64_t j = 0; j < m; j++) dst[j] = em_half_to_float(*(const uint16_t *)(src + j * stride));
  } else {
    for (int64_t j = 0; j < m; j++) dst[j] = em_bf16_to_float(*(const uint16_t *)(src + j * stride));
  }
}

static void half_store(char *dst, int64_t stride, const float *src, int64_t m, em_dtype d) {
  if (d == EM_FLOAT16) {
    for (int64_t j = 0; j < m; j++) *(uint16_t *)(dst + j * stride) = em_float_to_half(src[j]);
  } else {
    for (int64_t j = 0; j < m; j++) *(uint16_t *)(dst + j * stride) = em_float_to_bf16(src[j]);
  }
}

void em_pw_half_loop(char **p, const int64_t *s, int64_t n, void *vctx) {
  em_pw_ctx *c = vctx;
  float buf[EM_ITER_MAX_OPERANDS][HALF_CHUNK];
  char *q[EM_ITER_MAX_OPERANDS];
  int64_t qs[EM_ITER_MAX_OPERANDS];
  bool out_half = !(c->passthrough & 1u);
  for (int64_t i0 = 0; i0 < n; i0 += HALF_CHUNK) {
    int64_t m = n - i0 < HALF_CHUNK ? n - i0 : HALF_CHUNK;
    for (int k = 0; k < c->nops; k++) {
      char *src = p[k] + i0 * s[k];
      if (c->passthrough >> k & 1u) {
        q[k] = src;
        qs[k] = s[k];
        continue;
      }
      q[k] = (char *)buf[k];
      qs[k] = (int64_t)sizeof(float);
      if (k == 0) continue; /* the output: converted after the inner loop */
      if (s[k] == 0) {
        /* A broadcast scalar stays one: the inner loop keeps its scalar fast path. */
        half_load(buf[k], src, 0, 1, c->half);
        qs[k] = 0;
      } else {
        half_load(buf[k], src, s[k], m, c->half);
      }
    }
    c->inner(q, qs, m, c);
    if (out_half) half_store(p[0] + i0 * s[0], s[0], buf[0], m, c->half);
  }
}

/* Sets up c so that em_pw_half_loop runs `inner` (a float32 loop) on n operands of dtype d;
 * returns the loop to hand to the iterator (NULL when there is no float32 loop). */
static em_cpu_loop half_setup(em_pw_ctx *c, em_cpu_loop inner, em_dtype d, int nops,
                              bool out_bool) {
  c->inner = inner;
  c->half = d;
  c->nops = nops;
  c->passthrough = out_bool ? 1u : 0u;
  return inner ? em_pw_half_loop : NULL;
}

static em_cpu_loop unary_loop(em_pw_ctx *c, em_dtype d, em_unary_op op, bool out_bool) {
  if (em_pw_is_half(d)) return half_setup(c, em_pw_float_unary(EM_FLOAT32, op), d, 2, out_bool);
  if (em_dtypes[d].is_float) return em_pw_float_unary(d, op);
  return em_pw_int_unary(d, op);
}

static em_cpu_loop binary_loop(em_pw_ctx *c, em_dtype d, int op, bool out_bool) {
  if (em_pw_is_half(d)) return half_setup(c, em_pw_float_binary(EM_FLOAT32, op), d, 3, out_bool);
  if (em_dtypes[d].is_float) return em_pw_float_binary(d, op);
  return em_pw_int_binary(d, op);
}

static int unsupported(const char *fn, em_dtype d) {
  return em_error("%s: not supported for %s tensors on cpu", fn, em_dtype_name(d));
}

int em_cpu_unary(em_unary_op op, em_tensor *out, const em_tensor *x) {
  em_pw_ctx c = {.alpha = 1.0, .ialpha = 1};
  em_dtype d = (em_dtype)x->dtype_id;
  em_cpu_loop loop = unary_loop(&c, d, op, out->dtype_id == EM_BOOL && d != EM_BOOL);
  if (loop == NULL) return unsupported(em_unary_name(op), d);
  const em_tensor *ts[2] = {out, x};
  em_cpu_for_each(2, ts, loop, &c);
  return 0;
}

/* True when every element of t is the same one (a broadcast scalar). */
static bool is_scalar(const em_tensor *t) {
  for (int i = 0; i < t->ndim; i++)
    if (t->strides[i] != 0 && t->sizes[i] != 1) return false;
  return true;
}

/* x ** e for a scalar exponent of a float dtype: the unary op that computes it exactly as
 * PyTorch's fast path does, or -1 for a general power. */
static int pow_as_unary(const em_tensor *e) {
  double v = em_load_as_double(em_cpu_ptr(e), (em_dtype)e->dtype_id);
  if (v == 2.0) return EM_SQUARE;
  if (v == 0.5) return EM_SQRT;
  if (v == -0.5) return EM_RSQRT;
  if (v == -1.0) return EM_RECIPROCAL;
  return -1;
}

int em_cpu_binary(em_binary_op op, em_tensor *out, const em_tensor *a, const em_tensor *b,
                  double alpha) {
  em_dtype d = (em_dtype)a->dtype_id;
  const char *fn = em_binary_name(op);
  if (op == EM_POW && em_dtypes[d].is_float && is_scalar(b)) {
    int u = pow_as_unary(b);
    if (u >= 0) return em_cpu_unary((em_unary_op)u, out, a);
  }
  em_pw_ctx c = {.alpha = alpha, .ialpha = em_sat_i64(alpha)};
  int k = (int)op;
  if ((op == EM_ADD || op == EM_SUB) && alpha != 1.0) {
    /* a - alpha * b is a + (-alpha) * b: one loop serves both. */
    k = EM_PW_ADD_ALPHA;
    if (op == EM_SUB) {
      c.alpha = -alpha;
      c.ialpha = (int64_t)(0u - (uint64_t)c.ialpha);
    }
  }
  em_cpu_loop loop = binary_loop(&c, d, k, out->dtype_id == EM_BOOL && d != EM_BOOL);
  if (loop == NULL) return unsupported(fn, d);
  const em_tensor *ts[3] = {out, a, b};
  em_cpu_for_each(3, ts, loop, &c);
  switch (c.err) {
  case EM_PW_DIV_ZERO: return em_error("%s: integer division by zero", fn);
  case EM_PW_NEG_POW: return em_error("%s: integers to negative integer powers are not allowed", fn);
  default: return 0;
  }
}
