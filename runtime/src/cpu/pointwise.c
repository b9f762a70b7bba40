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
#include <stdlib.h>
#include <unistd.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "pointwise.h"
#include "half_convert.h"

/* ---- streaming stores for large outputs ---- */

/* Bytes computed into an L1-resident buffer before they are streamed out. */
enum { STREAM_CHUNK = 4096 };

typedef struct stream_ctx {
  em_cpu_loop loop;
  void *ctx;
  int nops;
} stream_ctx;

/* Copies n bytes to dst (16-byte aligned) with non-temporal stores; src is 64-byte aligned. */
static void stream_copy(char *dst, const char *src, int64_t n) {
  int64_t i = 0;
#if defined(__SSE2__)
  for (; i + 64 <= n; i += 64) {
    __m128i x0 = _mm_load_si128((const __m128i *)(src + i));
    __m128i x1 = _mm_load_si128((const __m128i *)(src + i + 16));
    __m128i x2 = _mm_load_si128((const __m128i *)(src + i + 32));
    __m128i x3 = _mm_load_si128((const __m128i *)(src + i + 48));
    _mm_stream_si128((__m128i *)(dst + i), x0);
    _mm_stream_si128((__m128i *)(dst + i + 16), x1);
    _mm_stream_si128((__m128i *)(dst + i + 32), x2);
    _mm_stream_si128((__m128i *)(dst + i + 48), x3);
  }
#endif
  memcpy(dst + i, src + i, (size_t)(n - i));
}

/* The wrapped loop computes each chunk of a contiguous output run into a stack buffer, which
 * is then streamed to memory. In-place ops stay correct: a chunk's inputs are read before its
 * outputs are written. */
static void stream_loop(char **p, const int64_t *s, int64_t n, void *vctx) {
  const stream_ctx *sc = vctx;
  int64_t os = s[0];
  if (os <= 0 || os > 8 || ((uintptr_t)p[0] % (uintptr_t)os) != 0) {
    sc->loop(p, s, n, sc->ctx);
    return;
  }
  _Alignas(64) char buf[STREAM_CHUNK];
  /* Plain stores up to the first 16-byte boundary of the output. */
  int64_t head = (int64_t)((16 - ((uintptr_t)p[0] & 15)) & 15) / os;
  if (head > n) head = n;
  if (head > 0) sc->loop(p, s, head, sc->ctx);
  char *q[EM_ITER_MAX_OPERANDS];
  int64_t qs[EM_ITER_MAX_OPERANDS];
  qs[0] = os;
  for (int k = 1; k < sc->nops; k++) qs[k] = s[k];
  int64_t chunk = STREAM_CHUNK / os;
  for (int64_t i = head; i < n; i += chunk) {
    int64_t m = n - i < chunk ? n - i : chunk;
    q[0] = buf;
    for (int k = 1; k < sc->nops; k++) q[k] = p[k] + i * s[k];
    sc->loop(q, qs, m, sc->ctx);
    stream_copy(p[0] + i * os, buf, m * os);
  }
#if defined(__SSE2__)
  _mm_sfence(); /* streamed stores are weakly ordered: publish them before returning */
#endif
}

/* Outputs from this many bytes on are streamed: half the last-level cache, where a result
 * would no longer stay cached for the next op anyway. EMBER_STREAM_BYTES overrides it (like
 * glibc's non-temporal threshold tunable): for tuning, and for tests on any machine. */
static int64_t stream_threshold(void) {
  static int64_t cached = 0;
  int64_t t = __atomic_load_n(&cached, __ATOMIC_RELAXED);
  if (t == 0) {
    const char *env = getenv("EMBER_STREAM_BYTES");
    if (env != NULL && atoll(env) > 0) {
      t = atoll(env);
    } else {
      long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
      if (llc <= 0) llc = sysconf(_SC_LEVEL2_CACHE_SIZE);
      if (llc <= 0) llc = 8L << 20;
      t = (int64_t)llc / 2;
      if (t < (1 << 20)) t = 1 << 20;
    }
    __atomic_store_n(&cached, t, __ATOMIC_RELAXED);
  }
  return t;
}

/* In place, the output's lines are read anyway (no read-for-ownership to save), and a
 * streamed store to a cached line costs an eviction: measured slower, so never streamed. */
static bool writes_an_input(int n, const em_tensor *const *ts) {
  for (int k = 1; k < n; k++)
    if (ts[k] != NULL && ts[k]->storage == ts[0]->storage) return true;
  return false;
}

void em_pw_for_each(int n, const em_tensor *const *ts, em_cpu_loop loop, void *ctx) {
  const em_tensor *out = ts[0];
  int64_t bytes = em_numel(out) * (int64_t)em_dtypes[out->dtype_id].size;
  if (bytes < stream_threshold() || !em_is_contiguous(out) || writes_an_input(n, ts)) {
    em_cpu_for_each(n, ts, loop, ctx);
    return;
  }
  stream_ctx sc = {loop, ctx, n};
  em_cpu_for_each(n, ts, stream_loop, &sc);
}

/* ---- float16 / bfloat16 ---- */

/* Elements per converted chunk: 256 floats per operand keeps the buffers (5 KiB at most) in
 * L1 and amortizes the inner loop's call. */
enum { HALF_CHUNK = 256 };

static void half_load(float *dst, const char *src, int64_t stride, int64_t m, em_dtype d) {
  if (stride == 2) {
    if (d == EM_FLOAT16) em_cvt_f16_to_f32(dst, (const uint16_t *)src, m);
    else em_cvt_bf16_to_f32(dst, (const uint16_t *)src, m);
  } else if (d == EM_FLOAT16) {
    for (int64_t j = 0; j < m; j++) dst[j] = em_half_to_float(*(const uint16_t *)(src + j * stride));
  } else {
    for (int64_t j = 0; j < m; j++) dst[j] = em_bf16_to_float(*(const uint16_t *)(src + j * stride));
  }
}

static void half_store(char *dst, int64_t stride, const float *src, int64_t m, em_dtype d) {
  if (stride == 2) {
    if (d == EM_FLOAT16) em_cvt_f32_to_f16((uint16_t *)dst, src, m);
    else em_cvt_f32_to_bf16((uint16_t *)dst, src, m);
  } else if (d == EM_FLOAT16) {
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
  em_pw_for_each(2, ts, loop, &c);
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

/* The loop and its context for a binary op over dtype d; NULL when d does not support it. */
static em_cpu_loop binary_setup(em_pw_ctx *c, em_binary_op op, em_dtype d, bool out_bool,
                                double alpha) {
  *c = (em_pw_ctx){.alpha = alpha, .ialpha = em_sat_i64(alpha)};
  int k = (int)op;
  if ((op == EM_ADD || op == EM_SUB) && alpha != 1.0) {
    /* a - alpha * b is a + (-alpha) * b: one loop serves both. */
    k = EM_PW_ADD_ALPHA;
    if (op == EM_SUB) {
      c->alpha = -alpha;
      c->ialpha = (int64_t)(0u - (uint64_t)c->ialpha);
    }
  }
  return binary_loop(c, d, k, out_bool);
}

static int binary_status(const em_pw_ctx *c, const char *fn) {
  switch (c->err) {
  case EM_PW_DIV_ZERO: return em_error("%s: integer division by zero", fn);
  case EM_PW_NEG_POW: return em_error("%s: integers to negative integer powers are not allowed", fn);
  default: return 0;
  }
}

int em_cpu_binary(em_binary_op op, em_tensor *out, const em_tensor *a, const em_tensor *b,
                  double alpha) {
  em_dtype d = (em_dtype)a->dtype_id;
  const char *fn = em_binary_name(op);
  if (op == EM_POW && em_dtypes[d].is_float && is_scalar(b)) {
    int u = pow_as_unary(b);
    if (u >= 0) return em_cpu_unary((em_unary_op)u, out, a);
  }
  em_pw_ctx c;
  em_cpu_loop loop = binary_setup(&c, op, d, out->dtype_id == EM_BOOL && d != EM_BOOL, alpha);
  if (loop == NULL) return unsupported(fn, d);
  const em_tensor *ts[3] = {out, a, b};
  em_pw_for_each(3, ts, loop, &c);
  return binary_status(&c, fn);
}

/* One run of the loop over the three buffers, for work too small to share between threads:
 * the iterator's plan and contiguity checks are skipped (the definition made them). */
int em_cpu_binary_contiguous(em_binary_op op, em_tensor *out, const em_tensor *a,
                             const em_tensor *b, double alpha) {
  em_dtype d = (em_dtype)a->dtype_id;
  int64_t n = em_numel(out);
  if (n >= EM_PARALLEL_GRAIN || op == EM_POW || em_pw_is_half(d))
    return em_cpu_binary(op, out, a, b, alpha);
  em_pw_ctx c;
  em_cpu_loop loop = binary_setup(&c, op, d, out->dtype_id == EM_BOOL && d != EM_BOOL, alpha);
  if (loop == NULL) return unsupported(em_binary_name(op), d);
  char *ptrs[3] = {em_cpu_ptr(out), em_cpu_ptr(a), em_cpu_ptr(b)};
  int64_t es = (int64_t)em_dtypes[d].size;
  int64_t strides[3] = {(int64_t)em_dtypes[out->dtype_id].size, es, es};
  loop(ptrs, strides, n, &c);
  return c.err ? binary_status(&c, em_binary_name(op)) : 0;
}
