/*
 * formulas_special.c: the backward formulas of the inverse trigonometric and hyperbolic
 * functions, log2/log10/exp2 and the special functions (erfc, erfinv, lgamma), as PyTorch's
 * derivatives.yaml writes them (digamma's, trigamma, composed from ops here). formulas_pointwise.c records these ops and calls
 * em_ag_special_unary_grad from its unary backward.
 */
#include <math.h>

#include "expr.h"
#include "record.h"

/* trigamma(x), the derivative of digamma, from ops: for u = x (or 1 - x below 0) the
 * recurrence trigamma(u) = sum_{k<10} 1/(u+k)^2 + trigamma(u + 10), then the asymptotic series
 * 1/z + 1/(2z^2) + 1/(6z^3) - 1/(30z^5) + 1/(42z^7) - 1/(30z^9) at z = u + 10 (relative error
 * below 1e-12); below 0 the reflection trigamma(x) = pi^2 / sin^2(pi x) - trigamma(1 - x). */
static T trigamma(const em_tensor *x) {
  T below = bsc(EM_LT, ref(x), 0);
  T u = where3(ref(below), rsub(1, ref(x)), ref(x));
  T sum = un(EM_RECIPROCAL, un(EM_SQUARE, ref(u)));
  for (int k = 1; k < 10; k++) sum = add(sum, un(EM_RECIPROCAL, un(EM_SQUARE, adds(ref(u), k))));
  T w = un(EM_RECIPROCAL, adds(u, 10)); /* 1/z */
  T w2 = mul(ref(w), ref(w));
  T poly = adds(muls(ref(w2), -1.0 / 30), 1.0 / 42);
  poly = adds(mul(poly, ref(w2)), -1.0 / 30);
  poly = adds(mul(poly, ref(w2)), 1.0 / 6);
  T asym = add(add(ref(w), muls(ref(w2), 0.5)), mul(mul(poly, ref(w2)), ref(w)));
  em_release(w);
  em_release(w2);
  T t = add(sum, asym);
  T s = un(EM_SIN, muls(ref(x), M_PI));
  T reflected = sub(rsc(EM_DIV, M_PI * M_PI, un(EM_SQUARE, s)), ref(t));
  return where3(below, reflected, t);
}

/* g times the derivative at v: the input x, or the output y for the ops whose
 * em_ag_special_unary_needs_output is true. NULL with the error set. */
em_tensor *em_ag_special_unary_grad(em_unary_op op, const em_tensor *v, const em_tensor *g) {
  const em_tensor *x = v, *y = v;
  switch (op) {
  case EM_ASIN: return divt(ref(g), un(EM_SQRT, rsub(1, mul(ref(x), ref(x)))));
  case EM_ACOS: return neg(divt(ref(g), un(EM_SQRT, rsub(1, mul(ref(x), ref(x))))));
  case EM_ATAN: return divt(ref(g), adds(mul(ref(x), ref(x)), 1));
  case EM_SINH: return mul(ref(g), un(EM_COSH, ref(x)));
  case EM_COSH: return mul(ref(g), un(EM_SINH, ref(x)));
  case EM_ASINH: return divt(ref(g), un(EM_SQRT, adds(mul(ref(x), ref(x)), 1)));
  case EM_ACOSH: /* (x - 1)(x + 1) rather than x^2 - 1: exact near 1 */
    return divt(ref(g), un(EM_SQRT, mul(adds(ref(x), -1), adds(ref(x), 1))));
  case EM_ATANH: return divt(ref(g), rsub(1, mul(ref(x), ref(x))));
  case EM_LOG2: return divt(ref(g), muls(ref(x), M_LN2));
  case EM_LOG10: return divt(ref(g), muls(ref(x), M_LN10));
  case EM_EXP2: return mul(ref(g), muls(ref(y), M_LN2));
  case EM_ERFC:
    return mul(ref(g), muls(un(EM_EXP, neg(mul(ref(x), ref(x)))), -1.1283791670955126));
  case EM_ERFINV: /* sqrt(pi) / 2 * exp(y^2) */
    return mul(ref(g), muls(un(EM_EXP, mul(ref(y), ref(y))), 0.88622692545275801365));
  case EM_LGAMMA: return mul(ref(g), un(EM_DIGAMMA, ref(x)));
  case EM_DIGAMMA: return mul(ref(g), trigamma(x));
  default: return em_error_null("%s: not differentiable", em_unary_name(op));
  }
}

bool em_ag_special_unary_needs_output(em_unary_op op) {
  return op == EM_EXP2 || op == EM_ERFINV;
}
