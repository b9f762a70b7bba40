/*
 * test_threads.c: the runtime used from several host threads (docs/embedding.md, "Threads").
 *
 * - Training: THREADS threads each build their own graph for STEPS steps on shared leaf weights
 *   (requires_grad) and run em_backward; .grad must end as the sum of every thread's gradients,
 *   computed first on one thread. A hook on the shared weight counts its calls; another thread
 *   meanwhile adds and removes hooks on it and reads its .grad.
 * - Forward only on the shared weights (the graphs are dropped without backward).
 * - A custom function of two outputs (em_function_apply) on a shared leaf, from every thread.
 * - One tensor retained, viewed and released from every thread at once.
 * - Grad mode, autocast and the error message are per thread (ordered by barriers, not time).
 * - The same training on the Vulkan device when one is present (lavapipe in CI).
 *
 * ThreadSanitizer runs this file too (make tsan). libgomp is not instrumented, so its
 * barriers look like races to TSan: the test sets em_set_num_threads(1) before it starts any
 * thread, which keeps every OpenMP region and OpenBLAS call on the calling thread.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "check.h"

enum { CPU = 0, THREADS = 4, STEPS = 4, IN = 8, OUT = 4, ROWS = 16 };

static em_tensor *weight, *bias;
static atomic_int hook_calls;

static em_tensor *hook_count(em_tensor *grad, void *userdata) {
  (void)grad;
  (void)userdata;
  atomic_fetch_add(&hook_calls, 1);
  return NULL; /* keep the gradient */
}

/* Thread k's input: deterministic, different per thread. */
static em_tensor *input_of(int k, em_dtype dtype, int device) {
  double v[ROWS * IN];
  for (int i = 0; i < ROWS * IN; i++) v[i] = 0.01 * (double)((i * 7 + k * 13) % 23) - 0.1;
  int64_t sizes[2] = {ROWS, IN};
  return em_from_buffer(v, EM_FLOAT64, 2, sizes, dtype, device);
}

/* loss = sum(tanh(x @ w + b)^2) + 0.5 * sum(w * w): the weight reaches the loss twice. */
static int train_step(const em_tensor *x, int backward) {
  em_tensor *xw = em_matmul(x, weight);
  em_tensor *z = xw ? em_binary(EM_ADD, xw, bias) : NULL;
  em_tensor *y = z ? em_unary(EM_TANH, z) : NULL;
  em_tensor *yy = y ? em_binary(EM_MUL, y, y) : NULL;
  em_tensor *s1 = yy ? em_reduce(EM_SUM, yy, 0, NULL, 0) : NULL;
  em_tensor *ww = em_binary(EM_MUL, weight, weight);
  em_tensor *s2 = ww ? em_reduce(EM_SUM, ww, 0, NULL, 0) : NULL;
  em_tensor *h = s2 ? em_binary_scalar(EM_MUL, s2, 0.5, 0) : NULL;
  em_tensor *loss = s1 && h ? em_binary(EM_ADD, s1, h) : NULL;
  int rc = loss ? 0 : -1;
  if (rc == 0 && backward) rc = em_backward(loss, NULL, 0, 0);
  em_tensor *all[] = {xw, z, y, yy, s1, ww, s2, h, loss};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) em_release(all[i]);
  return rc;
}

typedef struct worker {
  int k, device, backward, steps;
  em_dtype dtype;
  int failures;
  char error[256];
} worker;

static void *train_thread(void *p) {
  worker *w = p;
  em_tensor *x = input_of(w->k, w->dtype, w->device);
  for (int s = 0; x != NULL && s < w->steps; s++)
    if (train_step(x, w->backward) != 0 && w->failures++ == 0)
      snprintf(w->error, sizeof w->error, "%s", em_last_error());
  if (x == NULL) {
    w->failures++;
    snprintf(w->error, sizeof w->error, "%s", em_last_error());
  }
  em_release(x);
  return NULL;
}

static em_tensor *hook_keep(em_tensor *grad, void *userdata) {
  (void)grad;
  (void)userdata;
  return NULL;
}

/* While the workers run, this thread adds and removes a hook on the shared weight and reads
 * its .grad: both touch what the workers' backward passes read and write. */
static atomic_int workers_left;
static void *meddle_thread(void *p) {
  (void)p;
  while (atomic_load(&workers_left) > 0) {
    int id = em_register_hook(weight, hook_keep, NULL);
    if (id <= 0 || em_remove_hook(weight, id) != 0) atomic_fetch_add(&hook_calls, 1000000);
    em_release(em_grad(weight));
  }
  return NULL;
}

static void *train_thread_counted(void *p) {
  train_thread(p);
  atomic_fetch_sub(&workers_left, 1);
  return NULL;
}

static void run_workers(int n, int device, em_dtype dtype, int backward, int steps) {
  pthread_t th[THREADS], meddler;
  worker ws[THREADS];
  atomic_store(&workers_left, n);
  CHECK(pthread_create(&meddler, NULL, meddle_thread, NULL) == 0);
  for (int k = 0; k < n; k++) {
    ws[k] = (worker){.k = k, .device = device, .dtype = dtype, .backward = backward, .steps = steps};
    CHECK(pthread_create(&th[k], NULL, train_thread_counted, &ws[k]) == 0);
  }
  pthread_join(meddler, NULL);
  for (int k = 0; k < n; k++) {
    pthread_join(th[k], NULL);
    if (ws[k].failures) fprintf(stderr, "thread %d: %s\n", k, ws[k].error);
    CHECK(ws[k].failures == 0);
  }
}

static em_tensor *leaf_param(int64_t rows, int64_t cols, em_dtype dtype, int device) {
  double v[IN * OUT];
  for (int i = 0; i < rows * cols; i++) v[i] = 0.05 * (double)((i * 5) % 11) - 0.2;
  int64_t sizes[2] = {rows, cols};
  em_tensor *t = em_from_buffer(v, EM_FLOAT64, cols ? 2 : 1, cols ? sizes : &rows, dtype, device);
  em_set_requires_grad(t, 1);
  return t;
}

/* The largest |a - b| over two tensors of the same shape, on the CPU in float64. */
static double max_diff(const em_tensor *a, const em_tensor *b) {
  em_tensor *ca = em_to_device(a, CPU), *cb = em_to_device(b, CPU);
  em_tensor *da = em_to_dtype(ca, EM_FLOAT64), *db = em_to_dtype(cb, EM_FLOAT64);
  double m = 0;
  const double *pa = em_data_ptr(da), *pb = em_data_ptr(db);
  for (int64_t i = 0; i < em_numel(da); i++) m = fmax(m, fabs(pa[i] - pb[i]));
  em_tensor *all[] = {ca, cb, da, db};
  for (int i = 0; i < 4; i++) em_release(all[i]);
  return m;
}

/* Serial reference first, then the same work from THREADS threads at once. */
static void test_training(int device, em_dtype dtype, double tol) {
  atomic_store(&hook_calls, 0);
  weight = leaf_param(IN, OUT, dtype, device);
  bias = leaf_param(OUT, 0, dtype, device);
  CHECK(weight != NULL && bias != NULL);
  int hook = em_register_hook(weight, hook_count, NULL);
  CHECK(hook > 0);
  for (int k = 0; k < THREADS; k++) {
    em_tensor *x = input_of(k, dtype, device);
    for (int s = 0; s < STEPS; s++) CHECK(train_step(x, 1) == 0);
    em_release(x);
  }
  em_tensor *want_w = em_grad(weight), *want_b = em_grad(bias);
  CHECK(want_w != NULL && want_b != NULL);
  CHECK(atomic_load(&hook_calls) == THREADS * STEPS);
  em_set_grad(weight, NULL);
  em_set_grad(bias, NULL);
  atomic_store(&hook_calls, 0);

  run_workers(THREADS, device, dtype, 1, STEPS);
  em_tensor *got_w = em_grad(weight), *got_b = em_grad(bias);
  CHECK(got_w != NULL && got_b != NULL);
  if (got_w && got_b && want_w && want_b) {
    CHECK(max_diff(got_w, want_w) <= tol);
    CHECK(max_diff(got_b, want_b) <= tol);
  }
  CHECK(atomic_load(&hook_calls) == THREADS * STEPS);
  CHECK(em_remove_hook(weight, hook) == 0);

  /* forward only: graphs on the shared weights built and dropped concurrently */
  run_workers(THREADS, device, dtype, 0, 4 * STEPS);
  CHECK(weight->refcount == 1 && bias->refcount == 1); /* every graph let go of them */

  em_tensor *all[] = {want_w, want_b, got_w, got_b, weight, bias};
  for (int i = 0; i < 6; i++) em_release(all[i]);
}

/* ---- a custom function of two outputs on a shared leaf, from every thread ---- */

/* y1 = 2x, y2 = 3x: dx = 2 g1 + 3 g2. Its output nodes park their gradients, tagged with the
 * backward pass's id, which must be the pass of the thread that runs it. */
static int two_backward(void *ctx, int n_out, em_tensor *const *go, int n_in, em_tensor **gi) {
  (void)ctx;
  if (n_out != 2 || n_in != 1 || go[0] == NULL || go[1] == NULL) {
    em_set_error("two_backward: expected both output gradients");
    return -1;
  }
  em_tensor *a = em_binary_scalar(EM_MUL, go[0], 2.0, 0);
  em_tensor *b = em_binary_scalar(EM_MUL, go[1], 3.0, 0);
  gi[0] = a && b ? em_binary(EM_ADD, a, b) : NULL;
  em_release(a);
  em_release(b);
  return gi[0] ? 0 : -1;
}

static void *function_thread(void *p) {
  em_tensor *x = p;
  for (int s = 0; s < STEPS; s++) {
    int previous = em_set_grad_enabled(0);
    em_tensor *ys[2] = {em_binary_scalar(EM_MUL, x, 2.0, 0), em_binary_scalar(EM_MUL, x, 3.0, 0)};
    em_set_grad_enabled(previous);
    em_tensor *s1 = NULL, *s2 = NULL, *loss = NULL;
    if (em_function_apply("Two", 1, &x, 2, ys, two_backward, NULL, NULL) == 0) {
      s1 = em_reduce(EM_SUM, ys[0], 0, NULL, 0);
      s2 = em_reduce(EM_SUM, ys[1], 0, NULL, 0);
      loss = s1 && s2 ? em_binary(EM_ADD, s1, s2) : NULL;
    }
    if (loss == NULL || em_backward(loss, NULL, 0, 0) != 0) atomic_fetch_add(&hook_calls, 1);
    em_tensor *all[] = {ys[0], ys[1], s1, s2, loss};
    for (int i = 0; i < 5; i++) em_release(all[i]);
  }
  return NULL;
}

static void test_function_threads(void) {
  int64_t n = 5;
  em_tensor *x = em_ones(1, &n, EM_FLOAT64, CPU);
  em_set_requires_grad(x, 1);
  atomic_store(&hook_calls, 0); /* counts failures here */
  pthread_t th[THREADS];
  for (int k = 0; k < THREADS; k++) pthread_create(&th[k], NULL, function_thread, x);
  for (int k = 0; k < THREADS; k++) pthread_join(th[k], NULL);
  CHECK(atomic_load(&hook_calls) == 0);
  em_tensor *g = em_grad(x);
  CHECK(g != NULL);
  for (int i = 0; g && i < n; i++) CHECK(((const double *)em_data_ptr(g))[i] == 5.0 * THREADS * STEPS);
  em_release(g);
  em_release(x);
}

/* ---- retain and release from every thread ---- */

static em_tensor *shared_tensor;

static void *retain_thread(void *p) {
  (void)p;
  for (int i = 0; i < 20000; i++) em_retain(shared_tensor);
  for (int i = 0; i < 200; i++) em_release(em_detach(shared_tensor)); /* storage refs */
  for (int i = 0; i < 20000; i++) em_release(shared_tensor);
  return NULL;
}

static void test_retain_release(void) {
  int64_t n = 4;
  shared_tensor = em_zeros(1, &n, EM_FLOAT32, CPU);
  pthread_t th[THREADS];
  for (int k = 0; k < THREADS; k++) pthread_create(&th[k], NULL, retain_thread, NULL);
  for (int k = 0; k < THREADS; k++) pthread_join(th[k], NULL);
  CHECK(shared_tensor->refcount == 1);
  em_release(shared_tensor);
}

/* ---- per-thread state ---- */

static pthread_barrier_t barrier;
static atomic_int state_failures;

#define EXPECT(cond)                                                                          \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      fprintf(stderr, "%s:%d: thread check failed: %s\n", __FILE__, __LINE__, #cond);         \
      atomic_fetch_add(&state_failures, 1);                                                   \
    }                                                                                         \
  } while (0)

/* Thread A changes its grad mode, autocast and error; B, between the barriers, sees none of it. */
static void *state_a(void *p) {
  em_tensor *w = p;
  em_set_grad_enabled(0);
  EXPECT(em_autocast_push("cpu", EM_BFLOAT16, 1) == 0);
  em_set_error("thread A's error");
  pthread_barrier_wait(&barrier); /* B looks now */
  pthread_barrier_wait(&barrier); /* B changed its own */
  EXPECT(em_grad_enabled() == 0);
  EXPECT(em_autocast_enabled("cpu", NULL) == 1 && em_autocast_depth() == 1);
  EXPECT(strcmp(em_last_error(), "thread A's error") == 0);
  em_tensor *y = em_binary(EM_MUL, w, w);
  EXPECT(y != NULL && !em_requires_grad(y)); /* no_grad here */
  em_release(y);
  em_autocast_pop();
  em_set_grad_enabled(1);
  return NULL;
}

static void *state_b(void *p) {
  em_tensor *w = p;
  pthread_barrier_wait(&barrier);
  EXPECT(em_grad_enabled() == 1);
  EXPECT(em_autocast_enabled("cpu", NULL) == 0 && em_autocast_depth() == 0);
  EXPECT(em_last_error()[0] == '\0');
  em_tensor *y = em_binary(EM_MUL, w, w);
  EXPECT(y != NULL && em_requires_grad(y) && em_dtype_name((em_dtype)y->dtype_id)[0] == 'f' &&
         y->dtype_id == EM_FLOAT32); /* recorded, and not autocast */
  em_release(y);
  em_set_error("thread B's error");
  em_set_grad_enabled(0);
  pthread_barrier_wait(&barrier);
  em_set_grad_enabled(1);
  return NULL;
}

static void test_thread_state(void) {
  int64_t n = 3;
  em_tensor *w = em_ones(1, &n, EM_FLOAT32, CPU);
  em_set_requires_grad(w, 1);
  pthread_barrier_init(&barrier, NULL, 2);
  pthread_t a, b;
  pthread_create(&a, NULL, state_a, w);
  pthread_create(&b, NULL, state_b, w);
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  pthread_barrier_destroy(&barrier);
  CHECK(atomic_load(&state_failures) == 0);
  CHECK(em_grad_enabled() == 1); /* the main thread's own mode never changed */
  em_release(w);
}

/* LeakSanitizer (the ASan build) reads this: lavapipe, the CPU Vulkan driver, leaks a few small
 * blocks of its own when threads that used the device exit. Only the driver's are suppressed. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libvulkan_lvp.so\n"; }

int main(void) {
  em_set_num_threads(1); /* see the head comment: keeps OpenMP out of TSan's view */
  test_retain_release();
  test_thread_state();
  test_training(CPU, EM_FLOAT64, 1e-9);
  test_function_threads();
  /* Lavapipe compiles each pipeline for about a second: the generic ones are enough here. */
  setenv("EMBER_VK_SPECIALIZE", "0", 0);
  const char *spec = getenv("EMBER_TEST_VULKAN");
  int vk = em_device_parse(spec && spec[0] ? spec : "vulkan");
  if (vk >= 0 && em_device_start(vk) == 0) {
    printf("vulkan: %s\n", em_device_name(vk));
    test_training(vk, EM_FLOAT32, 1e-4);
  } else {
    printf("vulkan: no device (%s), its part skipped\n", em_last_error());
    em_clear_error();
  }
  return check_report();
}
