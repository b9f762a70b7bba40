/*
 * static_link.c: a program linked against libember.a the ordinary way (no --whole-archive)
 * runs ops of several kernel families on the CPU and checks their results. It failed with
 * "not implemented on cpu" while the kernels reached the CPU's table only through weak
 * references, which do not pull objects out of an archive. tests/install/static.sh builds it
 * with `pkg-config --static` and with CMake's Ember::ember_static.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <ember.h>

static int failures;

static em_tensor *ok(em_tensor *t, const char *what) {
  if (t == NULL) {
    fprintf(stderr, "static_link: %s: %s\n", what, em_last_error());
    exit(1);
  }
  return t;
}

/* Checks that t (one element) holds want, and releases it. */
static void expect(em_tensor *t, double want, const char *what) {
  double got;
  if (em_item(t, &got) != 0) {
    fprintf(stderr, "static_link: %s: %s\n", what, em_last_error());
    exit(1);
  }
  if (fabs(got - want) > 1e-5 * (1 + fabs(want))) {
    fprintf(stderr, "static_link: %s gave %g, expected %g\n", what, got, want);
    failures++;
  }
  em_release(t);
}

static em_tensor *sum(em_tensor *t) {
  em_tensor *s = ok(em_reduce(EM_SUM, t, 0, NULL, 0), "sum");
  em_release(t);
  return s;
}

int main(void) {
  const float av[6] = {1, 2, 3, 4, 5, 6}; /* [[1 2 3] [4 5 6]] */
  em_tensor *a = ok(em_from_buffer(av, EM_FLOAT32, 2, (int64_t[]){2, 3}, EM_FLOAT32, 0), "a");
  em_tensor *at = ok(em_t(a), "t");

  double sum_exp = 0;
  for (int i = 0; i < 6; i++) sum_exp += exp(av[i]);
  expect(sum(ok(em_binary(EM_ADD, a, a), "add")), 42, "sum(a + a)");                   /* pointwise */
  expect(sum(ok(em_unary(EM_EXP, a), "exp")), sum_exp, "sum(exp(a))");
  expect(sum(ok(em_mm(a, at), "mm")), 14 + 32 + 32 + 77, "sum(a a^T)");                /* gemm */
  expect(sum(ok(em_softmax(a, 1), "softmax")), 2, "sum(softmax(a, 1))");
  expect(ok(em_reduce(EM_AMAX, a, 0, NULL, 0), "amax"), 6, "amax(a)");                 /* reduce */
  expect(sum(ok(em_cumsum(a, 1), "cumsum")), 1 + 3 + 6 + 4 + 9 + 15, "sum(cumsum(a, 1))");
  em_tensor *idx = ok(em_argsort(a, 1, 1), "argsort");                                 /* sort */
  expect(sum(idx), 6, "sum(argsort(a, 1, descending))");

  /* conv2d: a 3x3 ones kernel over a 3x3 ones image, padding 1: sum of 4*4 + 4*6 + 9 = 49 */
  int64_t img[4] = {1, 1, 3, 3}, ker[4] = {1, 1, 3, 3};
  em_tensor *x = ok(em_ones(4, img, EM_FLOAT32, 0), "ones");
  em_tensor *w = ok(em_ones(4, ker, EM_FLOAT32, 0), "ones");
  expect(sum(ok(em_conv2d(x, w, NULL, (int64_t[]){1, 1}, (int64_t[]){1, 1}, (int64_t[]){1, 1}, 1),
                "conv2d")),
         49, "sum(conv2d(ones, ones, padding 1))");

  /* autograd: d/da sum(a * a) = 2a, whose sum is 42 */
  em_tensor *leaf = ok(em_clone(a), "clone");
  if (em_set_requires_grad(leaf, 1) != 0) ok(NULL, "set_requires_grad");
  em_tensor *loss = sum(ok(em_binary(EM_MUL, leaf, leaf), "mul"));
  if (em_backward(loss, NULL, 0, 0) != 0) ok(NULL, "backward");
  em_release(loss);
  expect(sum(ok(em_grad(leaf), "grad")), 42, "sum(grad of sum(a * a))");

  /* random numbers: a uniform sample's mean */
  em_manual_seed(1);
  em_tensor *r = ok(em_rand(1, (int64_t[]){100000}, EM_FLOAT32, 0), "rand");
  em_tensor *mean = ok(em_reduce(EM_MEAN, r, 0, NULL, 0), "mean");
  double m;
  if (em_item(mean, &m) != 0 || fabs(m - 0.5) > 0.01) {
    fprintf(stderr, "static_link: rand's mean is %g\n", m);
    failures++;
  }
  em_release(mean), em_release(r), em_release(leaf), em_release(x), em_release(w);
  em_release(at), em_release(a);
  if (failures) return 1;
  printf("static_link: CPU kernels present and right\n");
  return 0;
}
