/*
 * test_core.c: the C API from an embedder's side: creation, views, errors as values,
 * reference counting, and an op end to end.
 */
#include "check.h"

static void test_create_and_read(void) {
  int64_t sizes[2] = {2, 3};
  float data[6] = {1, 2, 3, 4, 5, 6};
  em_tensor *t = em_from_buffer(data, EM_FLOAT32, 2, sizes, EM_FLOAT32, 0);
  CHECK(t != NULL);
  CHECK(em_numel(t) == 6);
  CHECK(em_is_contiguous(t));
  const float *p = em_data_ptr(t);
  CHECK(p[5] == 6.0f);
  em_tensor *tt = em_t(t);
  CHECK(!em_is_contiguous(tt));
  CHECK(tt->sizes[0] == 3 && tt->sizes[1] == 2);
  em_tensor *c = em_contiguous(tt);
  const float *q = em_data_ptr(c);
  CHECK(q[0] == 1 && q[1] == 4 && q[2] == 2);
  em_release(c);
  em_release(tt);
  em_release(t);
}

static void test_errors_are_values(void) {
  int64_t a[2] = {3, 4}, b[1] = {5};
  em_tensor *x = em_zeros(2, a, EM_FLOAT32, 0);
  em_tensor *y = em_zeros(1, b, EM_FLOAT32, 0);
  em_clear_error();
  em_tensor *z = em_binary(EM_ADD, x, y);
  CHECK(z == NULL);
  CHECK(strcmp(em_last_error(), "add: shapes [3,4] and [5] cannot broadcast") == 0);
  int64_t bad[1] = {-1};
  CHECK_ERROR(em_zeros(1, bad, EM_FLOAT32, 0) == NULL, "expected sizes >= 0");
  CHECK_ERROR(em_select(x, 5, 0) == NULL, "dimension 5 out of range for a 2-d tensor");
  CHECK_ERROR(em_zeros(1, b, (em_dtype)99, 0) == NULL, "invalid dtype");
  em_release(x);
  em_release(y);
}

static void test_refcount_views(void) {
  int64_t s[1] = {4};
  em_tensor *x = em_arange(0, 4, 1, EM_FLOAT32, 0);
  em_tensor *v = em_narrow(x, 0, 1, 2);
  em_release(x); /* the view keeps the storage alive */
  double item;
  em_tensor *e = em_select(v, 0, 1);
  CHECK(em_item(e, &item) == 0 && item == 2.0);
  em_release(e);
  em_release(v);
  (void)s;
}

static void test_add_scalar_promotion(void) {
  int64_t s[1] = {3};
  em_tensor *x = em_ones(1, s, EM_INT32, 0);
  em_tensor *y = em_binary_scalar(EM_ADD, x, 2, 0);
  CHECK(y && y->dtype_id == EM_INT32); /* an integer number keeps the int dtype */
  em_tensor *z = em_binary_scalar(EM_ADD, x, 0.5, 0);
  CHECK(z && z->dtype_id == EM_FLOAT32); /* a float number lifts to the default float */
  double v;
  em_tensor *e = em_select(z, 0, 2);
  CHECK(em_item(e, &v) == 0 && v == 1.5);
  em_release(e);
  em_release(x);
  em_release(y);
  em_release(z);
}

int main(void) {
  test_create_and_read();
  test_errors_are_values();
  test_refcount_views();
  test_add_scalar_promotion();
  return check_report();
}
