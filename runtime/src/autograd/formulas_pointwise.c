/*
 * formulas_pointwise.c: recording and backward formulas of the elementwise ops.
 */
#include <math.h>

#include "expr.h"
#include "record.h"

/* ---- unary ---- */

/* Which of input (1) and output (2) a unary backward needs. */
static int unary_needs(em_unary_op op) {
  switch (op) {
  case EM_EXP: case EM_EXPM1: case EM_SQRT: case EM_RSQRT: case EM_TANH: case EM_SIGMOID:
  case EM_RELU: case EM_RECIPROCAL:
    return 2;
  case EM_TAN:
    return 2;
  default:
    if (op >= EM_ASIN) return em_ag_special_unary_needs_output(op) ? 2 : 1;
    return 1;
  }
}

static T unary_grad(em_unary_op op, const em_tensor *g, const em_tensor *x, const em_tensor *y);

/* float16 / bfloat16 follow the rule of the forward: compute in float32, round once. The node
 * saved the input (not the 16-bit output, whose rounding 1 - y^2 would magnify), so the
 * output is recomputed in float32 here; the float32 gradient is rounded once by put(), after
 * any sum over broadcast dims. */
static int unary_backward_half(em_node *node, em_unary_op op, const em_tensor *g,
                               const em_tensor *x, em_tensor **gi) {
  T x32 = f32(x), g32 = f32(g);
  T y32 = x32 && unary_needs(op) == 2 ? em_unary(op, x32) : ref(x32);
  T r = x32 && g32 && y32 ? unary_grad(op, g32, x32, y32) : NULL;
  em_tensor *tmp[3] = {x32, g32, y32};
  em_ag_release_all(3, tmp);
  return put(node, gi, 0, r);
}

static int unary_backward(em_node *node, const em_tensor *g, em_tensor **gi) {
  em_unary_op op = (em_unary_op)node->ints[0];
  const em_tensor *v = em_ag_saved(node, 0); /* the input, or the output (unary_needs) */
  if (v == NULL) return -1;
  if (node->ints[1]) return unary_backward_half(node, op, g, v, gi);
  return put(node, gi, 0, unary_grad(op, g, v, v));
}

static T unary_grad(em_unary_op op, const em_tensor *g, const em_tensor *x, const em_tensor *y) {
  T r;
  switch (op) {
  case EM_NEG: r = neg(ref(g)); break;
  case EM_ABS: r = mul(ref(g), un(EM_SIGN, ref(x))); break;
  case EM_SIGN: case EM_FLOOR: case EM_CEIL: case EM_ROUND: case EM_TRUNC:
    r = zeros_like(g);
    break;
  case EM_EXP: r = mul(ref(g), ref(y)); break;
  case EM_LOG: r = divt(ref(g), ref(x)); break;
  case EM_LOG1P: r = divt(ref(g), adds(ref(x), 1)); break;
  case EM_EXPM1: r = mul(ref(g), adds(ref(y), 1)); break;
  case EM_SQRT: r = divt(ref(g), muls(ref(y), 2)); break;
  case EM_RSQRT: r = mul(muls(ref(g), -0.5), mul(ref(y), mul(ref(y), ref(y)))); break;
  case EM_SIN: r = mul(ref(g), un(EM_COS, ref(x))); break;
  case EM_COS: r = neg(mul(ref(g), un(EM_SIN, ref(x)))); break;
  case EM_TAN: r = mul(ref(g), adds(mul(ref(y), ref(y)), 1)); break;
  case EM_TANH: r = mul(ref(g), rsub(1, mul(ref(y), ref(y)))); break;
  case EM_SIGMOID: r = mul(ref(g), mul(ref(y), rsub(1, ref(y)))); break;
  case EM_RELU:
    r = where3(bsc(EM_GT, ref(y), 0), ref(g), scalar(0, g));
    break;
  case EM_GELU: { /* d/dx x*Phi(x) = Phi(x) + x*phi(x) */
    T cdf = muls(adds(un(EM_ERF, muls(ref(x), M_SQRT1_2)), 1), 0.5);
    T pdf = muls(un(EM_EXP, muls(mul(ref(x), ref(x)), -0.5)), 0.3989422804014327);
    r = mul(ref(g), add(cdf, mul(ref(x), pdf)));
    break;
  }
  case EM_GELU_TANH: {
    const double k = 0.7978845608028654, c = 0.044715;
    T x2 = mul(ref(x), ref(x));
    T inner = muls(mul(ref(x), adds(muls(ref(x2), c), 1)), k);
    T t = un(EM_TANH, inner);
    T left = muls(adds(ref(t), 1), 0.5);
    T dinner = muls(adds(muls(x2, 3 * c), 1), k);
    T right = mul(muls(mul(ref(x), rsub(1, mul(ref(t), ref(t)))), 0.5), dinner);
    em_release(t);
    r = mul(ref(g), add(left, right));
    break;
  }
  case EM_SILU: {
    T s = un(EM_SIGMOID, ref(x));
    r = mul(ref(g), mul(ref(s), adds(mul(ref(x), rsub(1, ref(s))), 1)));
    em_release(s);
    break;
  }
  case EM_SOFTPLUS: /* above the threshold softplus is the identity */
    r = where3(bsc(EM_GT, ref(x), 20), ref(g), mul(ref(g), un(EM_SIGMOID, ref(x))));
    break;
  case EM_RECIPROCAL: r = neg(mul(ref(g), mul(ref(y), ref(y)))); break;
  case EM_SQUARE: r = mul(ref(g), muls(ref(x), 2)); break;
  case EM_ERF:
    r = mul(ref(g), muls(un(EM_EXP, neg(mul(ref(x), ref(x)))), 1.1283791670955126));
    break;
  default:
    if (op < EM_ASIN) return em_error_null("%s: not differentiable", em_unary_name(op));
    r = em_ag_special_unary_grad(op, unary_needs(op) == 2 ? y : x, g);
    break;
  }
  return r;
}

static const char *unary_node_names[EM_NUM_UNARY] = {
  "NegBackward", "AbsBackward", "SignBackward", "ExpBackward", "LogBackward", "Log1pBackward",
  "Expm1Backward", "SqrtBackward", "RsqrtBackward", "SinBackward", "CosBackward", "TanBackward",
  "TanhBackward", "SigmoidBackward", "ReluBackward", "GeluBackward", "GeluBackward",
  "SiluBackward", "SoftplusBackward", "FloorBackward", "CeilBackward", "RoundBackward",
  "TruncBackward", "ReciprocalBackward", "SquareBackward", "ErfBackward",
  [EM_ASIN] = "AsinBackward", "AcosBackward", "AtanBackward", "SinhBackward", "CoshBackward",
  "AsinhBackward", "AcoshBackward", "AtanhBackward", "Log2Backward", "Log10Backward",
  "Exp2Backward", "ErfcBackward", "ErfinvBackward", "LgammaBackward", "DigammaBackward",
};

int em_ag_record_unary(em_unary_op op, em_tensor *out, const em_tensor *x) {
  if ((op >= EM_ISNAN && op <= EM_BITWISE_NOT) || !em_dtypes[out->dtype_id].is_float) return 0; /* not differentiable */
  em_node *node = em_ag_node_new(unary_node_names[op], unary_backward, 1, &x);
  if (node == NULL) return -1;
  node->ints[0] = op;
  node->ints[1] = is_half_dtype(out->dtype_id); /* unary_backward_half recomputes from x */
  if (em_ag_save(node, unary_needs(op) == 2 && !node->ints[1] ? out : x) != 0) {
    em_node_release(node);
    return -1;
  }
  return em_ag_set_output(out, node);
}

/* ---- binary ---- */

static int binary_grad(em_node *node, em_binary_op op, double alpha, const em_tensor *g,
                       const em_tensor *a, const em_tensor *b, const em_tensor *y,
                       em_tensor **gi);

/* float16 / bfloat16: the gradients in float32 (the output recomputed there), rounded once by
 * put() after any sum over broadcast dims (a broadcast divisor's gradient sums many terms). */
static int binary_backward_half(em_node *node, em_binary_op op, double alpha, const em_tensor *g,
                                const em_tensor *a, const em_tensor *b, em_tensor **gi) {
  T a32 = f32(a), b32 = f32(b), g32 = f32(g), y32 = NULL;
  bool ok = g32 && (a == NULL || a32) && (b == NULL || b32);
  if (ok && a32 && (op == EM_DIV || op == EM_POW)) ok = (y32 = em_binary(op, a32, b32)) != NULL;
  int rc = ok ? binary_grad(node, op, alpha, g32, a32, b32, y32, gi) : -1;
  em_tensor *tmp[4] = {a32, b32, g32, y32};
  em_ag_release_all(4, tmp);
  return rc;
}

static int binary_backward(em_node *node, const em_tensor *g, em_tensor **gi) {
  em_binary_op op = (em_binary_op)node->ints[0];
  double alpha = node->scalars[0];
  const em_tensor *a = NULL, *b = NULL, *y = NULL;
  if (node->n_saved >= 2) {
    a = em_ag_saved(node, 0);
    b = em_ag_saved(node, 1);
    if (a == NULL || b == NULL) return -1;
  }
  if (is_half_dtype(g->dtype_id)) return binary_backward_half(node, op, alpha, g, a, b, gi);
  if (node->n_saved >= 3 && (y = em_ag_saved(node, 2)) == NULL) return -1;
  return binary_grad(node, op, alpha, g, a, b, y, gi);
}

static int binary_grad(em_node *node, em_binary_op op, double alpha, const em_tensor *g,
                       const em_tensor *a, const em_tensor *b, const em_tensor *y,
                       em_tensor **gi) {
  switch (op) {
  case EM_ADD:
    return put(node, gi, 0, ref(g)) || put(node, gi, 1, alpha == 1 ? ref(g) : muls(ref(g), alpha));
  case EM_SUB:
    return put(node, gi, 0, ref(g)) || put(node, gi, 1, muls(ref(g), -alpha));
  case EM_MUL:
    return put(node, gi, 0, needs(node, 0) ? mul(ref(g), ref(b)) : NULL) ||
           put(node, gi, 1, needs(node, 1) ? mul(ref(g), ref(a)) : NULL);
  case EM_DIV:
    return put(node, gi, 0, needs(node, 0) ? divt(ref(g), ref(b)) : NULL) ||
           put(node, gi, 1, needs(node, 1) ? neg(divt(mul(ref(g), ref(y)), ref(b))) : NULL);
  case EM_POW: {
    /* d/da a^b = b a^(b-1); d/db a^b = a^b log a, taken as 0 where a == 0 */
    T ga = needs(node, 0) ? mul(ref(g), mul(ref(b), bin(EM_POW, ref(a), adds(ref(b), -1)))) : NULL;
    if (needs(node, 0) && ga) {
      /* b == 0 gives 0 * a^-1, which is nan or inf at a == 0: PyTorch's gradient is 0 there */
      ga = where3(bsc(EM_EQ, ref(b), 0), scalar(0, ga), ga);
    }
    T gb = NULL;
    if (needs(node, 1)) {
      /* log a in the gradient's dtype: an integer base (2 ^ x) would take its log in the
       * default float32, a float32 ln 2 inside a float64 gradient */
      T af = a->dtype_id == g->dtype_id ? ref(a) : em_to_dtype(a, (em_dtype)g->dtype_id);
      T logs = un(EM_LOG, af);
      gb = where3(bsc(EM_EQ, ref(a), 0), scalar(0, g), mul(ref(g), mul(ref(y), logs)));
    }
    return put2(node, gi, ga, gb);
  }
  case EM_MAXIMUM: case EM_MINIMUM: {
    /* ties split the gradient, as in PyTorch */
    em_binary_op wins = op == EM_MAXIMUM ? EM_GT : EM_LT;
    T half = muls(ref(g), 0.5);
    T ga = where3(bin(wins, ref(a), ref(b)), ref(g),
                  where3(bin(EM_EQ, ref(a), ref(b)), ref(half), scalar(0, g)));
    T gb = where3(bin(wins, ref(b), ref(a)), ref(g),
                  where3(bin(EM_EQ, ref(a), ref(b)), ref(half), scalar(0, g)));
    em_release(half);
    return put2(node, gi, ga, gb);
  }
  case EM_ATAN2: {
    T denom = add(mul(ref(a), ref(a)), mul(ref(b), ref(b)));
    T ga = divt(mul(ref(g), ref(b)), ref(denom));
    T gb = neg(divt(mul(ref(g), ref(a)), ref(denom)));
    em_release(denom);
    return put2(node, gi, ga, gb);
  }
  case EM_FMOD:
    return put(node, gi, 0, ref(g)) ||
           put(node, gi, 1, needs(node, 1) ? neg(mul(ref(g), un(EM_TRUNC, divt(ref(a), ref(b))))) : NULL);
  case EM_REMAINDER:
    return put(node, gi, 0, ref(g)) ||
           put(node, gi, 1, needs(node, 1) ? neg(mul(ref(g), un(EM_FLOOR, divt(ref(a), ref(b))))) : NULL);
  case EM_FLOOR_DIVIDE:
    return put(node, gi, 0, zeros_like(g)) || put(node, gi, 1, zeros_like(g));
  default:
    return em_error("%s: not differentiable", node->name);
  }
}

static const char *binary_node_names[] = {
  "AddBackward", "SubBackward", "MulBackward", "DivBackward", "FloorDivideBackward",
  "PowBackward", "FmodBackward", "RemainderBackward", "MaximumBackward", "MinimumBackward",
  "Atan2Backward",
};

int em_ag_record_binary(em_binary_op op, em_tensor *out, const em_tensor *a, const em_tensor *b,
                        double alpha) {
  if (op > EM_ATAN2 || !em_dtypes[out->dtype_id].is_float) return 0;
  const em_tensor *ins[2] = {a, b};
  em_node *node = em_ag_node_new(binary_node_names[op], binary_backward, 2, ins);
  if (node == NULL) return -1;
  node->ints[0] = op;
  node->scalars[0] = alpha;
  int rc = 0;
  if (op != EM_ADD && op != EM_SUB && op != EM_FLOOR_DIVIDE) {
    rc = em_ag_save(node, a) || em_ag_save(node, b);
    if (rc == 0 && (op == EM_DIV || op == EM_POW)) rc = em_ag_save(node, out);
  }
  if (rc != 0) {
    em_node_release(node);
    return -1;
  }
  return em_ag_set_output(out, node);
}

/* ---- ternary ---- */

static int where_backward(em_node *node, const em_tensor *g, em_tensor **gi) {
  const em_tensor *c = em_ag_saved(node, 0);
  if (c == NULL) return -1;
  return put(node, gi, 1, needs(node, 1) ? where3(ref(c), ref(g), scalar(0, g)) : NULL) ||
         put(node, gi, 2, needs(node, 2) ? where3(ref(c), scalar(0, g), ref(g)) : NULL);
}

int em_ag_record_where(em_tensor *out, const em_tensor *cond, const em_tensor *a,
                       const em_tensor *b) {
  if (!em_dtypes[out->dtype_id].is_float) return 0;
  const em_tensor *ins[3] = {cond, a, b};
  em_node *node = em_ag_node_new("WhereBackward", where_backward, 3, ins);
  if (node == NULL) return -1;
  if (em_ag_save(node, cond) != 0) {
    em_node_release(node);
    return -1;
  }
  return em_ag_set_output(out, node);
}

static int clamp_backward(em_node *node, const em_tensor *g, em_tensor **gi) {
  const em_tensor *x = em_ag_saved(node, 0);
  const em_tensor *lo = node->ints[0] ? em_ag_saved(node, 1) : NULL;
  const em_tensor *hi = node->ints[1] ? em_ag_saved(node, node->ints[0] ? 2 : 1) : NULL;
  if (x == NULL || (node->ints[0] && lo == NULL) || (node->ints[1] && hi == NULL)) return -1;
  /* x passes its gradient where lo <= x <= hi */
  T pass = lo ? bin(EM_GE, ref(x), ref(lo)) : NULL;
  if (hi) {
    T below = bin(EM_LE, ref(x), ref(hi));
    pass = pass ? bin(EM_LOGICAL_AND, pass, below) : below;
  }
  T gx = where3(pass, ref(g), scalar(0, g));
  int rc = put(node, gi, 0, gx);
  if (rc == 0 && lo && needs(node, 1))
    rc = put(node, gi, 1, where3(bin(EM_LT, ref(x), ref(lo)), ref(g), scalar(0, g)));
  if (rc == 0 && hi && needs(node, 2))
    rc = put(node, gi, 2, where3(bin(EM_GT, ref(x), ref(hi)), ref(g), scalar(0, g)));
  return rc;
}

int em_ag_record_clamp(em_tensor *out, const em_tensor *x, const em_tensor *lo,
                       const em_tensor *hi) {
  if (!em_dtypes[out->dtype_id].is_float) return 0;
  const em_tensor *ins[3] = {x, lo, hi};
  em_node *node = em_ag_node_new("ClampBackward", clamp_backward, 3, ins);
  if (node == NULL) return -1;
  node->ints[0] = lo != NULL;
  node->ints[1] = hi != NULL;
  int rc = em_ag_save(node, x);
  if (rc == 0 && lo) rc = em_ag_save(node, lo);
  if (rc == 0 && hi) rc = em_ag_save(node, hi);
  if (rc != 0) {
    em_node_release(node);
    return -1;
  }
  return em_ag_set_output(out, node);
}

static int lerp_backward(em_node *node, const em_tensor *g, em_tensor **gi) {
  const em_tensor *s = em_ag_saved(node, 0), *e = em_ag_saved(node, 1), *w = em_ag_saved(node, 2);
  if (!s || !e || !w) return -1;
  return put(node, gi, 0, needs(node, 0) ? mul(ref(g), rsub(1, ref(w))) : NULL) ||
         put(node, gi, 1, needs(node, 1) ? mul(ref(g), ref(w)) : NULL) ||
         put(node, gi, 2, needs(node, 2) ? mul(ref(g), sub(ref(e), ref(s))) : NULL);
}

int em_ag_record_lerp(em_tensor *out, const em_tensor *s, const em_tensor *e,
                      const em_tensor *w) {
  const em_tensor *ins[3] = {s, e, w};
  em_node *node = em_ag_node_new("LerpBackward", lerp_backward, 3, ins);
  if (node == NULL) return -1;
  if (em_ag_save(node, s) || em_ag_save(node, e) || em_ag_save(node, w)) {
    em_node_release(node);
    return -1;
  }
  return em_ag_set_output(out, node);
}

static int addc_backward(em_node *node, const em_tensor *g, em_tensor **gi) {
  const em_tensor *t1 = em_ag_saved(node, 0), *t2 = em_ag_saved(node, 1);
  if (!t1 || !t2) return -1;
  double v = node->scalars[0];
  if (node->ints[0]) { /* addcdiv: x + v * t1 / t2 */
    return put(node, gi, 0, ref(g)) ||
           put(node, gi, 1, needs(node, 1) ? muls(divt(ref(g), ref(t2)), v) : NULL) ||
           put(node, gi, 2, needs(node, 2) ? muls(neg(divt(mul(ref(g), ref(t1)), mul(ref(t2), ref(t2)))), v) : NULL);
  }
  return put(node, gi, 0, ref(g)) ||
         put(node, gi, 1, needs(node, 1) ? muls(mul(ref(g), ref(t2)), v) : NULL) ||
         put(node, gi, 2, needs(node, 2) ? muls(mul(ref(g), ref(t1)), v) : NULL);
}

int em_ag_record_addc(int divide, em_tensor *out, const em_tensor *x, const em_tensor *t1,
                      const em_tensor *t2, double value) {
  if (!em_dtypes[out->dtype_id].is_float) return 0;
  const em_tensor *ins[3] = {x, t1, t2};
  em_node *node = em_ag_node_new(divide ? "AddcdivBackward" : "AddcmulBackward", addc_backward, 3, ins);
  if (node == NULL) return -1;
  node->ints[0] = divide;
  node->scalars[0] = value;
  if (em_ag_save(node, t1) || em_ag_save(node, t2)) {
    em_node_release(node);
    return -1;
  }
  return em_ag_set_output(out, node);
}
