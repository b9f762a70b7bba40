/*
 * test_special.c: the special unary ops from C (embedders' view): asin ... digamma against
 * C's libm (and known values for erfinv and digamma, which libm lacks), the edge values
 * PyTorch defines (digamma's poles, erfinv at +-1, NaN outside the domains), integer inputs
 * computed in float32, names, and gradients (lgamma's is digamma, digamma's is trigamma).
 */
#include "check.h"

static em_tensor *vec(const double *v, int64_t n, em_dtype dt) {
  return em_from_buffer(v, EM_FLOAT64, 1, &n, dt, 0);
}

static double at(const em_tensor *t, int64_t i) {
  em_tensor *d = em_to_dtype(t, EM_FLOAT64);
  double v = ((const double *)em_data_ptr(d))[i];
  em_release(d);
  return v;
}

static int same(double a, double b, double tol) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  if (isinf(a) || isinf(b)) return a == b;
  return check_close(a, b, tol);
}

static void test_against_libm(void) {
  const double xs[6] = {-0.7, -0.1, 0.2, 0.6, 1.5, 3.25};
  em_tensor *x = vec(xs, 6, EM_FLOAT64);
  double (*ref[])(double) = {asin, acos, atan, sinh, cosh, asinh, acosh, atanh,
                             log2, log10, exp2, erfc, NULL, lgamma, NULL};
  for (int op = EM_ASIN; op <= EM_DIGAMMA; op++) {
    if (ref[op - EM_ASIN] == NULL) continue;
    em_tensor *y = em_unary((em_unary_op)op, x);
    CHECK(y != NULL && y->dtype_id == EM_FLOAT64);
    for (int i = 0; y && i < 6; i++) {
      double want = ref[op - EM_ASIN](xs[i]);
      if (!same(at(y, i), want, 1e-15)) {
        fprintf(stderr, "%s(%g) = %.17g, libm %.17g\n", em_unary_name((em_unary_op)op), xs[i],
                at(y, i), want);
        CHECK(0);
      }
    }
    em_release(y);
  }
  em_release(x);
}

static void test_erfinv_digamma(void) {
  const double ys[7] = {-1, -0.5, 0, 0.3, 0.999999, 1, 1.5};
  em_tensor *y = vec(ys, 7, EM_FLOAT64), *x = em_unary(EM_ERFINV, y);
  CHECK(x != NULL && at(x, 0) == -INFINITY && at(x, 5) == INFINITY && isnan(at(x, 6)) &&
        at(x, 2) == 0);
  for (int i = 1; x && i < 5; i++) CHECK(i == 2 || check_close(erf(at(x, i)), ys[i], 1e-15));
  em_release(x);
  em_release(y);
  /* digamma(1) = -gamma, digamma(1/2) = -gamma - 2 ln 2, poles as PyTorch */
  const double ds[5] = {1, 0.5, 0.0, -0.0, -2};
  em_tensor *d = vec(ds, 5, EM_FLOAT64), *r = em_unary(EM_DIGAMMA, d);
  const double euler = 0.57721566490153286061;
  CHECK(r != NULL && check_close(at(r, 0), -euler, 1e-15) &&
        check_close(at(r, 1), -euler - 2 * M_LN2, 1e-15) && at(r, 2) == -INFINITY &&
        at(r, 3) == INFINITY && isnan(at(r, 4)));
  em_release(r);
  em_release(d);
}

static void test_dtypes_and_names(void) {
  const double v[3] = {0, 1, 2};
  em_tensor *i = vec(v, 3, EM_INT32), *r = em_unary(EM_EXP2, i);
  CHECK(r != NULL && r->dtype_id == EM_FLOAT32 && at(r, 2) == 4);
  em_release(r);
  em_release(i);
  CHECK(strcmp(em_unary_name(EM_LGAMMA), "lgamma") == 0);
  CHECK(strcmp(em_unary_name(EM_ERFINV), "erfinv") == 0);
  CHECK(EM_NUM_UNARY == EM_DIGAMMA + 1);
}

static void test_gradients(void) {
  const double v[2] = {1.0, 0.5};
  em_tensor *x = vec(v, 2, EM_FLOAT64);
  em_set_requires_grad(x, 1);
  em_tensor *l = em_unary(EM_LGAMMA, x), *s = em_reduce(EM_SUM, l, 0, NULL, 0);
  CHECK(s != NULL && em_backward(s, NULL, 0, 0) == 0);
  em_tensor *g = em_grad(x); /* digamma */
  CHECK(g != NULL && check_close(at(g, 0), -0.57721566490153286, 1e-15));
  em_release(g);
  em_release(s);
  em_release(l);
  em_tensor *x2 = vec(v, 2, EM_FLOAT64);
  em_set_requires_grad(x2, 1);
  em_tensor *dg = em_unary(EM_DIGAMMA, x2), *s2 = em_reduce(EM_SUM, dg, 0, NULL, 0);
  CHECK(s2 != NULL && em_backward(s2, NULL, 0, 0) == 0);
  em_tensor *g2 = em_grad(x2); /* trigamma(1) = pi^2/6, trigamma(1/2) = pi^2/2 */
  CHECK(g2 != NULL && check_close(at(g2, 0), M_PI * M_PI / 6, 1e-13) &&
        check_close(at(g2, 1), M_PI * M_PI / 2, 1e-13));
  em_release(g2);
  em_release(s2);
  em_release(dg);
  em_release(x2);
  em_release(x);
}

int main(void) {
  test_against_libm();
  test_erfinv_digamma();
  test_dtypes_and_names();
  test_gradients();
  return check_report();
}
