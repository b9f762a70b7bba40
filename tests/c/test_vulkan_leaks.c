/*
 * test_vulkan_leaks.c: em_init, work on a Vulkan device (lavapipe here and in CI), and
 * em_shutdown leave nothing allocated behind. Twice, since em_shutdown then em_init is a full
 * restart. In the AddressSanitizer build (make asan), LeakSanitizer looks right after the
 * second shutdown (__lsan_do_recoverable_leak_check), while nothing but the driver and the
 * loader could still hold memory: a buffer, pipeline, descriptor pool or command pool that
 * Ember forgot to destroy is memory the driver allocated for it and lost when the device went.
 *
 * That is why the suppressions (tests/c/lsan_vulkan.supp, which ctest passes in LSAN_OPTIONS:
 * tests/c/tests.cmake) name the driver's leaks by their own functions, never the whole driver
 * library: "leak:libvulkan_lvp.so" would hide every Vulkan object Ember leaks too. By hand:
 *   LSAN_OPTIONS=suppressions=tests/c/lsan_vulkan.supp build-asan/test_vulkan_leaks
 * Without a Vulkan device the test passes with a note; outside the ASan build it checks only
 * that the work and the shutdowns succeed.
 */
#include <stdio.h>

#include "check.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define HAVE_LSAN 1
#else
#define HAVE_LSAN 0
#endif

/* Work that touches each kind of Vulkan object Ember makes: buffers from its allocator, host
 * uploads and readbacks through staging memory, pipelines (fill, matmul, reduction, copy),
 * their descriptor sets, command buffers and fences, and an autograd backward run there.
 * (Not the elementwise kernels: lavapipe compiles their pipeline for seconds.) */
static void some_work(int dev) {
  int64_t sizes[2] = {16, 16};
  float host[256];
  for (int i = 0; i < 256; i++) host[i] = (float)(i % 7) * 0.25f;
  em_tensor *a = em_from_buffer(host, EM_FLOAT32, 2, sizes, EM_FLOAT32, dev);
  em_tensor *w = em_ones(2, sizes, EM_FLOAT32, dev);
  CHECK(a != NULL && w != NULL);
  if (a == NULL || w == NULL) return;
  CHECK(em_set_requires_grad(w, 1) == 0);
  em_tensor *p = em_matmul(a, w);
  em_tensor *loss = p ? em_reduce(EM_SUM, p, 0, NULL, 0) : NULL;
  CHECK(loss != NULL && em_backward(loss, NULL, 0, 0) == 0);
  double v = 0;
  CHECK(loss != NULL && em_item(loss, &v) == 0 && v > 0);
  em_tensor *g = em_grad(w);
  em_tensor *back = g ? em_to_device(g, 0) : NULL; /* a readback through staging memory */
  CHECK(back != NULL && back->device_id == 0);
  CHECK(g != NULL && em_copy_(a, g) == 0); /* device to device */
  em_release(back);
  em_release(g);
  em_release(loss);
  em_release(p);
  em_release(w);
  em_release(a);
}

int main(void) {
  int dev = em_device_parse("vulkan");
  if (dev < 0) {
    printf("no Vulkan device: nothing to check (%s)\n", em_last_error());
    return 0;
  }
  for (int round = 0; round < 2; round++) {
    CHECK(em_init() == 0);
    dev = em_device_parse("vulkan");
    CHECK(dev > 0);
    if (dev > 0) some_work(dev);
    CHECK(em_shutdown() == 0);
  }
#if HAVE_LSAN
  /* Nonzero when LeakSanitizer found (and printed) leaks that no suppression covers. */
  CHECK(__lsan_do_recoverable_leak_check() == 0);
#else
  printf("not an AddressSanitizer build: the leak check runs under make asan\n");
#endif
  return check_report();
}
