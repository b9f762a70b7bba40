/*
 * test_autocast.c: autocast through the C API alone, as an embedder uses it: regions pushed
 * and popped around ops, the per-kind and per-thread state, gradients reaching float32 leaves
 * in float32, and the errors.
 */
#include <pthread.h>

#include "check.h"

static em_tensor *randn2(int64_t r, int64_t c) {
  int64_t s[2] = {r, c};
  return em_randn(2, s, EM_FLOAT32, 0);
}

static void test_regions(void) {
  em_tensor *a = randn2(3, 4), *b = randn2(4, 2);
  CHECK(em_autocast_depth() == 0);
  CHECK(em_autocast_enabled("cpu", NULL) == 0);
  CHECK(em_autocast_push("cpu", EM_BFLOAT16, 1) == 0);
  em_dtype dt = EM_FLOAT32;
  CHECK(em_autocast_enabled("cpu", &dt) == 1 && dt == EM_BFLOAT16);
  CHECK(em_autocast_enabled("vulkan", NULL) == 0);
  em_tensor *y = em_matmul(a, b);
  CHECK(y && y->dtype_id == EM_BFLOAT16);
  em_tensor *s = y ? em_softmax(y, 1) : NULL;
  CHECK(s && s->dtype_id == EM_FLOAT32);
  /* a disabled region inside, then a float16 one */
  CHECK(em_autocast_push("cpu", EM_BFLOAT16, 0) == 0);
  em_tensor *y2 = em_matmul(a, b);
  CHECK(y2 && y2->dtype_id == EM_FLOAT32);
  CHECK(em_autocast_push("cpu", EM_FLOAT16, 1) == 0);
  em_tensor *y3 = em_matmul(a, b);
  CHECK(y3 && y3->dtype_id == EM_FLOAT16);
  CHECK(em_autocast_depth() == 3);
  CHECK(em_autocast_pop() == 0 && em_autocast_pop() == 0 && em_autocast_pop() == 0);
  em_tensor *y4 = em_matmul(a, b);
  CHECK(y4 && y4->dtype_id == EM_FLOAT32);
  /* a region for another kind leaves CPU ops alone */
  CHECK(em_autocast_push("vulkan:0", EM_FLOAT16, 1) == 0);
  CHECK(em_autocast_enabled("vulkan", &dt) == 1 && dt == EM_FLOAT16);
  em_tensor *y5 = em_matmul(a, b);
  CHECK(y5 && y5->dtype_id == EM_FLOAT32);
  CHECK(em_autocast_pop() == 0);
  em_tensor *ts[] = {a, b, y, s, y2, y3, y4, y5};
  for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) em_release(ts[i]);
}

static void test_errors(void) {
  CHECK_ERROR(em_autocast_pop(), "autocast_exit: no autocast region is open");
  CHECK_ERROR(em_autocast_push("gpu", EM_FLOAT16, 1), "expected device 'cpu' or 'vulkan'");
  CHECK_ERROR(em_autocast_push("vulkan:x", EM_FLOAT16, 1), "got 'vulkan:x'");
  CHECK_ERROR(em_autocast_push(NULL, EM_FLOAT16, 1), "got NULL");
  CHECK_ERROR(em_autocast_push("cpu", EM_FLOAT32, 1),
              "autocast: expected dtype float16 or bfloat16 for device 'cpu', got float32");
  CHECK_ERROR(em_autocast_push("vulkan", EM_INT8, 0), "got int8");
  CHECK(em_autocast_enabled("tpu", NULL) == -1);
  CHECK(em_autocast_depth() == 0);
  for (int i = 0; i < 64; i++) CHECK(em_autocast_push("cpu", EM_BFLOAT16, 1) == 0);
  CHECK_ERROR(em_autocast_push("cpu", EM_BFLOAT16, 1), "regions nested deeper than 64");
  while (em_autocast_depth() > 0) em_autocast_pop();
}

/* loss = sum(float32(a @ w)) under autocast: w's gradient is float32 and equals a's column
 * sums in bfloat16 arithmetic, here exact (small integers). */
static void test_gradient(void) {
  int64_t s[2] = {2, 2};
  float av[4] = {1, 2, 3, 4}, wv[4] = {1, 1, 1, 1};
  em_tensor *a = em_from_buffer(av, EM_FLOAT32, 2, s, EM_FLOAT32, 0);
  em_tensor *w = em_from_buffer(wv, EM_FLOAT32, 2, s, EM_FLOAT32, 0);
  em_set_requires_grad(w, 1);
  CHECK(em_autocast_push("cpu", EM_BFLOAT16, 1) == 0);
  em_tensor *y = em_matmul(a, w);
  em_tensor *l = y ? em_reduce(EM_SUM, y, 0, NULL, 0) : NULL;
  CHECK(l && l->dtype_id == EM_FLOAT32);
  CHECK(em_autocast_pop() == 0);
  CHECK(l && em_backward(l, NULL, 0, 0) == 0);
  em_tensor *g = em_grad(w);
  CHECK(g && g->dtype_id == EM_FLOAT32);
  if (g) {
    const float *gv = em_data_ptr(g);
    CHECK(gv[0] == 4 && gv[1] == 4 && gv[2] == 6 && gv[3] == 6);
  }
  em_tensor *ts[] = {a, w, y, l, g};
  for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) em_release(ts[i]);
}

/* The state is per thread: another thread's ops run in float32 while this one autocasts. */
static void *other_thread(void *arg) {
  int *out = arg;
  em_tensor *a = randn2(2, 2);
  em_tensor *y = em_matmul(a, a);
  *out = (em_autocast_depth() == 0 && y && y->dtype_id == EM_FLOAT32) ? 1 : 0;
  em_release(a);
  em_release(y);
  return NULL;
}

static void test_threads(void) {
  CHECK(em_autocast_push("cpu", EM_BFLOAT16, 1) == 0);
  int ok = 0;
  pthread_t th;
  CHECK(pthread_create(&th, NULL, other_thread, &ok) == 0);
  pthread_join(th, NULL);
  CHECK(ok == 1);
  CHECK(em_autocast_pop() == 0);
}

static void test_inputs(void) {
  em_tensor *a = randn2(2, 2);
  em_tensor *in[2] = {a, NULL}, *out[2] = {NULL, NULL};
  CHECK_ERROR(em_autocast_inputs("mse_los", 2, in, out), "'mse_los' is not in autocast's op table");
  CHECK(em_autocast_inputs("linear", 2, in, out) == 0 && out[0] == a && out[1] == NULL);
  em_release(out[0]);
  CHECK(em_autocast_push("cpu", EM_FLOAT16, 1) == 0);
  CHECK(em_autocast_inputs("linear", 2, in, out) == 0);
  CHECK(out[0] && out[0]->dtype_id == EM_FLOAT16 && out[1] == NULL);
  em_release(out[0]);
  CHECK_ERROR(em_autocast_inputs("binary_cross_entropy", 1, in, out), "unsafe to autocast");
  CHECK(em_autocast_pop() == 0);
  em_release(a);
}

int main(void) {
  test_regions();
  test_errors();
  test_gradient();
  test_threads();
  test_inputs();
  return check_report();
}
