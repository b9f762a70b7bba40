/*
 * test_profiler.c: the profiler through the C API alone (em_profiler_* in ember.h), as an
 * embedder uses it: start and stop around ops, ranges, the events read back with their
 * nesting, shapes, bytes and self times, backward nodes, two threads, and on a Vulkan device
 * (when there is one) a GPU interval per dispatch charged to the op that recorded it.
 */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "../../runtime/src/backend.h"
#include "check.h"

/* Under LeakSanitizer (make asan): lavapipe keeps a few bytes of its own until exit. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libvulkan_lvp.so\n"; }

static em_profiler_event get(int64_t i) {
  em_profiler_event e;
  memset(&e, 0, sizeof e);
  if (em_profiler_event_get(i, &e) != 0) e.name = "(error)";
  return e;
}

/* The index of the n-th (0-based) event named name, or -1. */
static int64_t find(const char *name, int n) {
  for (int64_t i = 0; i < em_profiler_event_count(); i++) {
    em_profiler_event e = get(i);
    if (strcmp(e.name, name) == 0 && n-- == 0) return i;
  }
  return -1;
}

static int count(const char *name) {
  int c = 0;
  for (int64_t i = 0; i < em_profiler_event_count(); i++)
    if (strcmp(get(i).name, name) == 0) c++;
  return c;
}

/* The trace of the last profile: JSON (Python's reader, when there is one) with complete
 * events, and flow arrows when GPU kernels were recorded. */
static void check_trace(int with_kernels) {
  char path[] = "/tmp/ember_trace_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  if (fd < 0) return;
  close(fd);
  CHECK(em_profiler_export_chrome_trace(path) == 0);
  FILE *f = fopen(path, "rb");
  static char text[1 << 16];
  size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
  if (f) fclose(f);
  text[n] = '\0';
  const char *head = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
  CHECK(strncmp(text, head, strlen(head)) == 0);
  CHECK(strstr(text, "\"ph\":\"X\"") != NULL && strstr(text, "\"ph\":\"M\"") != NULL);
  CHECK((strstr(text, "\"ph\":\"s\"") != NULL) == with_kernels);
  if (access("/usr/bin/python3", X_OK) == 0) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 -c 'import json,sys; json.load(open(sys.argv[1]))' %s",
             path);
    CHECK(system(cmd) == 0);
  }
  unlink(path);
  CHECK_ERROR(em_profiler_export_chrome_trace("/nonexistent-dir/t.json"),
              "profiler_export_chrome_trace: cannot");
}

/* While recording, every kernel slot of the CPU's table is the profiler's wrapper, except
 * those without an op to record (memory, synchronization, capability queries): a slot added
 * to struct em_backend without a wrapper in runtime/src/profiler/kernel_table.c fails here. */
static void test_every_slot_recorded(void) {
  static const char *const unwrapped[] = {"storage_alloc", "storage_free", "synchronize",
                                          "pin_alloc", "read_start", "read_finish",
                                          "read_free", "conv_half"};
  CHECK(em_profiler_start(NULL) == 0);
  const em_backend *proxy = em_device_backend(0);
  CHECK(em_profiler_stop() == 0);
  CHECK(proxy != &em_cpu_backend && strcmp(proxy->name, em_cpu_backend.name) == 0);
  for (int i = 0; i < em_backend_slot_count; i++) {
    const em_backend_slot *s = &em_backend_slots[i];
    void (*mine)(void), (*real)(void);
    memcpy(&mine, (const char *)proxy + s->offset, sizeof mine);
    memcpy(&real, (const char *)&em_cpu_backend + s->offset, sizeof real);
    int skip = 0;
    for (size_t k = 0; k < sizeof unwrapped / sizeof unwrapped[0]; k++)
      skip |= strcmp(s->name, unwrapped[k]) == 0;
    if (real == NULL) {
      CHECK(mine == NULL); /* "not implemented" stays */
    } else if (skip ? mine != real : mine == real) {
      fprintf(stderr, "slot %s: %s\n", s->name, skip ? "changed" : "not recorded");
      CHECK(0);
    }
  }
}

static void test_errors(void) {
  CHECK_ERROR(em_profiler_stop(), "em_profiler_stop: the profiler is not running");
  CHECK(em_profiler_start(NULL) == 0);
  CHECK(em_profiler_enabled() == 1);
  CHECK_ERROR(em_profiler_start(NULL), "em_profiler_start: the profiler is already running");
  CHECK(em_profiler_event_count() == -1);
  CHECK(strstr(em_last_error(), "the profiler is running; stop it first") != NULL);
  CHECK_ERROR(em_profiler_range_pop(), "em_profiler_range_pop: no range is open on this thread");
  CHECK(em_profiler_stop() == 0);
  CHECK(em_profiler_enabled() == 0);
  CHECK(em_profiler_event_count() == 0);
  em_profiler_event e;
  CHECK_ERROR(em_profiler_event_get(0, &e), "index 0 out of range for 0 events");
  /* while stopped, ranges cost nothing and record nothing */
  CHECK(em_profiler_range_push("ignored") == 0 && em_profiler_range_pop() == 0);
}

static void test_ops_ranges_shapes_bytes(void) {
  int64_t s[2] = {2, 3};
  em_tensor *x = em_ones(2, s, EM_FLOAT32, 0);
  em_profiler_options o = {.record_shapes = 1, .profile_memory = 1, .gpu = 0};
  CHECK(em_profiler_start(&o) == 0);
  em_tensor *y = em_binary(EM_ADD, x, x);
  CHECK(em_profiler_range_push("my range") == 0);
  em_tensor *z = em_unary(EM_RELU, y);
  CHECK(em_profiler_range_pop() == 0);
  CHECK(em_profiler_stop() == 0);
  em_tensor *after = em_unary(EM_RELU, y); /* not recorded */
  CHECK(em_profiler_event_count() == 3);
  em_profiler_event add = get(0), range = get(1), relu = get(2);
  check_trace(0);
  CHECK(strcmp(add.name, "add") == 0 && add.kind == EM_PROFILER_OP && add.depth == 0);
  CHECK(add.parent == -1 && add.device == 0 && add.thread == 0);
  CHECK(add.shapes && strcmp(add.shapes, "[2,3] float32, [2,3] float32") == 0);
  CHECK(add.alloc_bytes >= 24 && add.self_alloc_bytes == add.alloc_bytes); /* its output */
  CHECK(add.end_ns >= add.start_ns && add.self_ns == add.end_ns - add.start_ns);
  CHECK(strcmp(range.name, "my range") == 0 && range.kind == EM_PROFILER_RANGE);
  CHECK(range.device == -1 && range.shapes == NULL && range.depth == 0);
  CHECK(strcmp(relu.name, "relu") == 0 && relu.parent == 1 && relu.depth == 1);
  CHECK(relu.start_ns >= range.start_ns && relu.end_ns <= range.end_ns);
  /* self time: the range's total less its child's */
  CHECK(range.self_ns == (range.end_ns - range.start_ns) - (relu.end_ns - relu.start_ns));
  CHECK(range.alloc_bytes == range.self_alloc_bytes + relu.alloc_bytes);
  CHECK(add.gpu_ns == 0 && add.op == -1 && add.device_alloc_bytes == 0);
  em_release(after);
  em_release(z);
  em_release(y);
  em_release(x);
  /* without record_shapes and profile_memory */
  x = em_ones(2, s, EM_FLOAT32, 0);
  CHECK(em_profiler_start(NULL) == 0);
  y = em_binary(EM_MUL, x, x);
  CHECK(em_profiler_stop() == 0);
  CHECK(em_profiler_event_count() == 1);
  em_profiler_event mul = get(0);
  CHECK(strcmp(mul.name, "mul") == 0 && mul.shapes == NULL && mul.alloc_bytes == 0);
  em_release(y);
  em_release(x);
}

static void test_backward_nodes(void) {
  int64_t s[1] = {4};
  em_tensor *w = em_ones(1, s, EM_FLOAT32, 0);
  em_set_requires_grad(w, 1);
  CHECK(em_profiler_start(NULL) == 0);
  em_tensor *y = em_binary(EM_MUL, w, w);
  em_tensor *l = em_reduce(EM_SUM, y, 0, NULL, 0);
  CHECK(l && em_backward(l, NULL, 0, 0) == 0);
  CHECK(em_profiler_stop() == 0);
  /* forward: mul, sum; backward: the seed's fill, then a node per op, each a range around
   * the ops of its gradient */
  CHECK(count("mul") >= 2); /* the forward's, and the gradient's products */
  int64_t node = find("MulBackward", 0);
  CHECK(node >= 0);
  if (node >= 0) {
    em_profiler_event n = get(node);
    CHECK(n.kind == EM_PROFILER_RANGE);
    int children = 0;
    for (int64_t i = 0; i < em_profiler_event_count(); i++)
      if (get(i).parent == node) {
        children++;
        CHECK(get(i).kind == EM_PROFILER_OP);
      }
    CHECK(children >= 1);
  }
  CHECK(find("SumBackward", 0) >= 0);
  em_release(l);
  em_release(y);
  em_release(w);
}

static void *thread_adds(void *arg) {
  em_tensor *x = arg;
  for (int i = 0; i < 3; i++) em_release(em_binary(EM_ADD, x, x));
  return NULL;
}

static void test_threads(void) {
  int64_t s[1] = {8};
  em_tensor *x = em_ones(1, s, EM_FLOAT32, 0);
  CHECK(em_profiler_start(NULL) == 0);
  em_release(em_binary(EM_SUB, x, x));
  pthread_t t;
  CHECK(pthread_create(&t, NULL, thread_adds, x) == 0);
  pthread_join(t, NULL);
  CHECK(em_profiler_stop() == 0);
  CHECK(count("sub") == 1 && count("add") == 3);
  int main_thread = get(find("sub", 0)).thread, other = get(find("add", 0)).thread;
  CHECK(main_thread != other);
  for (int k = 0; k < 3; k++) CHECK(get(find("add", k)).thread == other);
  em_release(x);
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void test_vulkan(void) {
  int dev = -1;
  for (int d = 0; d < em_device_count(); d++)
    if (strncmp(em_device_name(d), "vulkan:", 7) == 0 && dev < 0) dev = d;
  if (dev < 0 || em_device_start(dev) != 0) {
    em_clear_error();
    printf("no Vulkan device: GPU times not checked\n");
    return;
  }
  int64_t s[2] = {64, 64};
  em_tensor *host = em_ones(2, s, EM_FLOAT32, 0);
  em_tensor *x = em_to_device(host, dev);
  em_release(host);
  em_tensor *warm = em_binary(EM_ADD, x, x);                       /* pipelines built */
  em_release(warm);
  em_synchronize(dev);
  em_profiler_options o = {.gpu = 1, .profile_memory = 1};
  int64_t t0 = now_ns();
  CHECK(em_profiler_start(&o) == 0);
  em_tensor *y = em_binary(EM_ADD, x, x);
  for (int i = 0; i < 4; i++) {
    em_tensor *z = em_binary(EM_MUL, y, x);
    em_release(y);
    y = z;
  }
  CHECK(em_profiler_stop() == 0); /* waits for the timed batches */
  int64_t wall = now_ns() - t0;
  int kernels = 0;
  int64_t gpu_sum = 0;
  for (int64_t i = 0; i < em_profiler_event_count(); i++) {
    em_profiler_event e = get(i);
    if (e.kind != EM_PROFILER_KERNEL) continue;
    kernels++;
    gpu_sum += e.end_ns - e.start_ns;
    CHECK(e.device == dev && e.thread == -1 && e.end_ns >= e.start_ns);
    CHECK(e.op >= 0);
    if (e.op >= 0) {
      em_profiler_event op = get(e.op);
      CHECK(strcmp(op.name, "add") == 0 || strcmp(op.name, "mul") == 0);
      /* its output, in the device's memory, not the host's */
      CHECK(op.self_device_alloc_bytes == 64 * 64 * 4 && op.self_alloc_bytes == 0);
      CHECK(op.self_gpu_ns >= e.end_ns - e.start_ns);
    }
  }
  CHECK(kernels == 5); /* one dispatch per op */
  check_trace(1);
  CHECK(gpu_sum > 0 && gpu_sum <= wall);
  em_release(y);
  em_release(x);
}

int main(void) {
  test_every_slot_recorded();
  test_errors();
  test_ops_ranges_shapes_bytes();
  test_backward_nodes();
  test_threads();
  test_vulkan();
  return check_report();
}
