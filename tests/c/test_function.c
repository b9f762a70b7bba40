/*
 * test_function.c: custom autograd functions from C (em_function_apply). Gradients against the
 * known derivatives, several outputs with a missing gradient, non-tensor inputs, the checks on
 * what the callback returns, errors from the callback, and when release(ctx) runs.
 */
#include <stdlib.h>

#include "check.h"

enum { CPU = 0 }; /* the CPU is device 0 */

static int releases;

typedef struct exp_ctx {
  em_tensor *y; /* the saved output */
} exp_ctx;

static void exp_release(void *p) {
  exp_ctx *c = p;
  em_release(c->y);
  free(c);
  releases++;
}

/* d exp(x) = exp(x) dx: the saved output times the incoming gradient. */
static int exp_backward(void *p, int n_out, em_tensor *const *go, int n_in, em_tensor **gi) {
  exp_ctx *c = p;
  if (n_out != 1 || n_in != 1) {
    em_set_error("exp_backward: wrong counts");
    return -1;
  }
  gi[0] = em_binary(EM_MUL, go[0], c->y);
  return gi[0] ? 0 : -1;
}

static em_tensor *leaf(double a, double b, double c) {
  const double v[3] = {a, b, c};
  int64_t n = 3;
  em_tensor *t = em_from_buffer(v, EM_FLOAT64, 1, &n, EM_FLOAT64, CPU);
  em_set_requires_grad(t, 1);
  return t;
}

static double at(const em_tensor *t, int i) {
  em_tensor *c = em_to_dtype(t, EM_FLOAT64);
  double v = ((const double *)em_data_ptr(c))[i];
  em_release(c);
  return v;
}

/* Computes exp(x) without recording, then attaches exp_backward; returns y. */
static em_tensor *my_exp(em_tensor *x) {
  int previous = em_set_grad_enabled(0);
  em_tensor *y = em_unary(EM_EXP, x);
  em_set_grad_enabled(previous);
  exp_ctx *c = calloc(1, sizeof *c);
  c->y = em_detach(y);
  if (em_function_apply("MyExp", 1, &x, 1, &y, exp_backward, exp_release, c) != 0) {
    em_release(y);
    return NULL;
  }
  return y;
}

static void test_exp(void) {
  releases = 0;
  em_tensor *x = leaf(0.5, -1.0, 2.0);
  em_tensor *y = my_exp(x);
  CHECK(y != NULL && strcmp(em_grad_fn_name(y), "MyExpBackward") == 0);
  em_tensor *s = em_reduce(EM_SUM, y, 0, NULL, 0);
  CHECK(em_backward(s, NULL, 1, 0) == 0);
  em_tensor *g = em_grad(x);
  for (int i = 0; i < 3; i++) CHECK(check_close(at(g, i), exp(at(x, i)), 1e-12));
  em_release(g);
  CHECK(releases == 0); /* retain_graph: the context stays */
  CHECK(em_backward(s, NULL, 0, 0) == 0);
  CHECK(releases == 1); /* freed by the backward without retain_graph */
  g = em_grad(x);
  CHECK(check_close(at(g, 2), 2 * exp(2.0), 1e-12));
  em_release(g);
  CHECK_ERROR(em_backward(s, NULL, 0, 0), "MyExp: trying to backward through the graph a second");
  em_release(s);
  em_release(y);
  em_release(x);
  CHECK(releases == 1);

  /* A graph freed without a backward releases the context with it. */
  x = leaf(1, 2, 3);
  y = my_exp(x);
  CHECK(releases == 1);
  em_release(y);
  CHECK(releases == 2);
  /* Nothing recorded under no_grad: released at once, y stays a plain tensor. */
  int previous = em_set_grad_enabled(0);
  y = my_exp(x);
  em_set_grad_enabled(previous);
  CHECK(releases == 3 && y != NULL && !em_requires_grad(y));
  em_release(y);
  em_release(x);
}

/* (a + b, a * b): two outputs. */
typedef struct pair_ctx {
  em_tensor *a, *b;
  int saw_null[2];
} pair_ctx;

static int pair_backward(void *p, int n_out, em_tensor *const *go, int n_in, em_tensor **gi) {
  pair_ctx *c = p;
  (void)n_out;
  (void)n_in;
  c->saw_null[0] = go[0] == NULL;
  c->saw_null[1] = go[1] == NULL;
  for (int k = 0; k < 2; k++) {
    em_tensor *other = k == 0 ? c->b : c->a;
    em_tensor *sum = go[0] ? em_retain(go[0]) : NULL;
    if (go[1]) {
      em_tensor *prod = em_binary(EM_MUL, go[1], other);
      em_tensor *t = sum ? em_binary(EM_ADD, sum, prod) : em_retain(prod);
      em_release(prod);
      em_release(sum);
      sum = t;
    }
    gi[k] = sum;
  }
  return 0;
}

static pair_ctx last_pair;
static void pair_release(void *p) {
  pair_ctx *c = p;
  last_pair = *c;
  em_release(c->a);
  em_release(c->b);
  free(c);
  releases++;
}

static void test_two_outputs(void) {
  em_tensor *a = leaf(1, 2, 3), *b = leaf(4, 5, 6);
  em_tensor *in[2] = {a, b};
  int previous = em_set_grad_enabled(0);
  em_tensor *out[2] = {em_binary(EM_ADD, a, b), em_binary(EM_MUL, a, b)};
  em_set_grad_enabled(previous);
  pair_ctx *c = calloc(1, sizeof *c);
  c->a = em_detach(a);
  c->b = em_detach(b);
  CHECK(em_function_apply("Pair", 2, in, 2, out, pair_backward, pair_release, c) == 0);
  /* Only the product is used: the sum's gradient is NULL. */
  em_tensor *s = em_reduce(EM_SUM, out[1], 0, NULL, 0);
  CHECK(em_backward(s, NULL, 1, 0) == 0);
  em_tensor *ga = em_grad(a), *gb = em_grad(b);
  for (int i = 0; i < 3; i++) {
    CHECK(check_close(at(ga, i), at(b, i), 1e-12));
    CHECK(check_close(at(gb, i), at(a, i), 1e-12));
  }
  em_release(ga);
  em_release(gb);
  /* Both used: 3 * sum + product. */
  em_set_grad(a, NULL);
  em_set_grad(b, NULL);
  em_tensor *t = em_binary_scalar(EM_MUL, out[0], 3.0, 0);
  em_tensor *both = em_binary(EM_ADD, t, out[1]);
  em_tensor *s2 = em_reduce(EM_SUM, both, 0, NULL, 0);
  CHECK(em_backward(s2, NULL, 0, 0) == 0);
  ga = em_grad(a);
  CHECK(check_close(at(ga, 1), 3 + at(b, 1), 1e-12));
  em_release(ga);
  CHECK(last_pair.saw_null[0] == 0 && last_pair.saw_null[1] == 0);
  em_release(s2);
  em_release(both);
  em_release(t);
  em_release(s);
  em_release(out[0]);
  em_release(out[1]);
  em_release(a);
  em_release(b);
}

/* scale(x, <not a tensor>, w): returns x * 2 for the first input and a gradient for w that
 * does not need one (it is dropped). Also a function whose backward gives no gradient to an
 * input computed upstream: the nodes below still run for other paths. */
static int scale_backward(void *p, int n_out, em_tensor *const *go, int n_in, em_tensor **gi) {
  (void)p;
  (void)n_out;
  if (n_in != 3) return -1;
  gi[0] = em_binary_scalar(EM_MUL, go[0], 2.0, 0);
  gi[2] = em_retain(go[0]);
  return 0;
}

static int none_backward(void *p, int n_out, em_tensor *const *go, int n_in, em_tensor **gi) {
  (void)p, (void)n_out, (void)go, (void)n_in, (void)gi;
  return 0;
}

static void test_null_inputs(void) {
  em_tensor *x = leaf(1, 2, 3);
  em_tensor *w = leaf(1, 1, 1);
  em_set_requires_grad(w, 0);
  em_tensor *in[3] = {x, NULL, w};
  em_tensor *y = em_binary_scalar(EM_MUL, x, 2.0, 0);
  CHECK(em_function_apply("Scale", 3, in, 1, &y, scale_backward, NULL, NULL) == 0);
  em_tensor *s = em_reduce(EM_SUM, y, 0, NULL, 0);
  CHECK(em_backward(s, NULL, 0, 0) == 0);
  em_tensor *g = em_grad(x);
  CHECK(g && check_close(at(g, 0), 2, 0));
  em_release(g);
  CHECK(em_grad(w) == NULL);
  em_release(s);
  em_release(y);

  /* loss = none(2 a).sum() + a.sum(): a's gradient is ones. */
  em_set_grad(x, NULL);
  em_tensor *a2 = em_binary_scalar(EM_MUL, x, 2.0, 0);
  int previous = em_set_grad_enabled(0);
  em_tensor *z = em_binary_scalar(EM_ADD, a2, 1.0, 0);
  em_set_grad_enabled(previous);
  CHECK(em_function_apply("None", 1, &a2, 1, &z, none_backward, NULL, NULL) == 0);
  em_tensor *s1 = em_reduce(EM_SUM, z, 0, NULL, 0), *s2 = em_reduce(EM_SUM, x, 0, NULL, 0);
  em_tensor *loss = em_binary(EM_ADD, s1, s2);
  CHECK(em_backward(loss, NULL, 0, 0) == 0);
  g = em_grad(x);
  CHECK(g && check_close(at(g, 0), 1, 0) && check_close(at(g, 2), 1, 0));
  em_release(g);
  em_tensor *tmp[6] = {loss, s1, s2, z, a2, w};
  for (int i = 0; i < 6; i++) em_release(tmp[i]);
  em_release(x);
}

static int failing_backward(void *p, int n_out, em_tensor *const *go, int n_in, em_tensor **gi) {
  (void)p, (void)n_out, (void)go, (void)n_in;
  gi[0] = NULL;
  em_set_error("the callback gave up");
  return -1;
}

static int silent_backward(void *p, int n_out, em_tensor *const *go, int n_in, em_tensor **gi) {
  (void)p, (void)n_out, (void)go, (void)n_in, (void)gi;
  return -1;
}

static int wrong_backward(void *p, int n_out, em_tensor *const *go, int n_in, em_tensor **gi) {
  (void)n_out, (void)n_in;
  int kind = *(int *)p;
  int64_t two = 2;
  if (kind == 0) gi[0] = em_zeros(1, &two, EM_FLOAT64, CPU);
  if (kind == 1) gi[0] = em_to_dtype(go[0], EM_FLOAT32);
  return 0;
}

static int backward_error(em_function_backward fn, void *ctx) {
  em_tensor *x = leaf(1, 2, 3);
  em_tensor *y = em_binary_scalar(EM_MUL, x, 1.0, 0);
  int rc = em_function_apply("Bad", 1, &x, 1, &y, fn, NULL, ctx);
  em_tensor *s = rc == 0 ? em_reduce(EM_SUM, y, 0, NULL, 0) : NULL;
  rc = s ? em_backward(s, NULL, 0, 0) : -1;
  em_release(s);
  em_release(y);
  em_release(x);
  return rc;
}

static void test_errors(void) {
  CHECK_ERROR(backward_error(failing_backward, NULL), "Bad: the callback gave up");
  CHECK_ERROR(backward_error(silent_backward, NULL), "Bad: backward failed");
  int kind = 0;
  CHECK_ERROR(backward_error(wrong_backward, &kind),
              "Bad: backward returned a gradient of shape [2] for input 1, expected the "
              "input's shape [3]");
  kind = 1;
  CHECK_ERROR(backward_error(wrong_backward, &kind),
              "Bad: backward returned a float32 gradient for input 1, expected the input's "
              "dtype float64");

  /* Arguments. */
  releases = 0;
  em_tensor *x = leaf(1, 2, 3);
  exp_ctx *c = calloc(1, sizeof *c);
  CHECK_ERROR(em_function_apply("Same", 1, &x, 1, &x, exp_backward, exp_release, c),
              "Same: output 1 is input 1 itself");
  CHECK(releases == 1); /* a failed call releases the context */
  em_tensor *l = leaf(1, 1, 1);
  em_tensor *y = em_binary_scalar(EM_MUL, x, 1.0, 0);
  CHECK_ERROR(em_function_apply("Leaf", 1, &y, 1, &l, exp_backward, NULL, NULL),
              "Leaf: output 1 is a leaf tensor that requires grad");
  CHECK_ERROR(em_function_apply("NoFn", 1, &x, 1, &y, NULL, NULL, NULL),
              "NoFn: expected a backward callback");
  em_release(y);
  em_release(l);
  em_release(x);
}

int main(void) {
  test_exp();
  test_two_outputs();
  test_null_inputs();
  test_errors();
  return check_report();
}
