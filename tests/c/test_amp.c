/*
 * test_amp.c: em_amp_unscale_ through the C API alone, as an embedder calls it (the Lua spec,
 * tests/lua/amp_spec.lua, covers every dtype and layout on the CPU and Vulkan): unscaling,
 * the inf/NaN flag, a strided view, zero-size gradients, and the argument errors.
 */
#include "check.h"

static em_tensor *filled(int64_t n, double v, em_dtype dt) {
  int64_t sizes[1] = {n};
  return em_full(1, sizes, v, dt, 0);
}

static double at(const em_tensor *t, int64_t i) {
  em_tensor *e = em_narrow(t, 0, i, 1);
  double v = NAN;
  if (e) em_item(e, &v);
  em_release(e);
  return v;
}

static void set_at(em_tensor *t, int64_t i, double v) {
  em_tensor *e = em_narrow(t, 0, i, 1);
  CHECK(e && em_fill_(e, v) == 0);
  em_release(e);
}

int main(void) {
  int64_t one[1] = {1}, sq[2] = {4, 4}, none[2] = {0, 3};
  em_tensor *found = em_zeros(1, one, EM_FLOAT32, 0);
  em_tensor *a = filled(1000, 8, EM_FLOAT32);
  em_tensor *h = filled(5, 6, EM_FLOAT16);
  em_tensor *m = em_full(2, sq, 2, EM_FLOAT64, 0);
  em_tensor *mt = em_transpose(m, 0, 1); /* strided */
  em_tensor *z = em_zeros(2, none, EM_BFLOAT16, 0);

  em_tensor *grads[4] = {a, h, mt, z};
  CHECK(em_amp_unscale_(grads, 4, found, 0.25) == 0);
  CHECK(at(a, 999) == 2 && at(h, 0) == 1.5 && at(found, 0) == 0);
  em_tensor *row = em_narrow(m, 0, 3, 1);           /* m[3] through the transposed view */
  em_tensor *col = row ? em_narrow(row, 1, 2, 1) : NULL;
  double v = 0;
  CHECK(col && em_item(col, &v) == 0 && v == 0.5);
  em_release(col);
  em_release(row);

  set_at(h, 4, INFINITY);
  CHECK(em_amp_unscale_(grads, 2, found, 1.0) == 0); /* check only */
  CHECK(at(found, 0) == 1 && at(a, 0) == 2 && at(h, 4) == INFINITY);
  em_fill_(found, 0);
  set_at(a, 500, NAN);
  CHECK(em_amp_unscale_(grads, 1, found, 0.5) == 0);
  CHECK(at(found, 0) == 1 && at(a, 0) == 1 && isnan(at(a, 500)));

  /* errors */
  em_tensor *f64 = em_zeros(1, one, EM_FLOAT64, 0);
  em_tensor *ints = filled(3, 1, EM_INT32);
  em_tensor *bad[1] = {ints};
  CHECK_ERROR(em_amp_unscale_(grads, 1, f64, 1), "expected found_inf to be a float32 tensor");
  CHECK_ERROR(em_amp_unscale_(bad, 1, found, 1), "expected floating-point gradients, got a int32");
  CHECK_ERROR(em_amp_unscale_(grads, 1, NULL, 1), "expected a found_inf tensor, got NULL");
  CHECK_ERROR(em_amp_unscale_(NULL, 2, found, 1), "expected a list of 2 gradients, got NULL");
  CHECK_ERROR(em_amp_unscale_(grads, 1, found, NAN), "expected a number for inv_scale");
  CHECK(em_amp_unscale_(NULL, 0, found, 1) == 0); /* nothing to do */

  em_release(f64);
  em_release(ints);
  em_release(z);
  em_release(mt);
  em_release(m);
  em_release(h);
  em_release(a);
  em_release(found);
  return check_report();
}
