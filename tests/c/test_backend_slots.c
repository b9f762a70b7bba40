/*
 * test_backend_slots.c: every kernel slot of struct em_backend is filled on the CPU and on
 * Vulkan (ops never fall back to the CPU, so an empty Vulkan slot is an op that fails there),
 * and the slot list (runtime/src/backend_slots.c) names every slot exactly once. With a Vulkan
 * device present, the test hook EMBER_VK_TEST=empty-slot:NAME empties exactly that slot on the
 * registered devices and leaves the others as they are. (The op's error is checked end to end
 * in tests/lua/vulkan_spec.lua.)
 */
#include <stdlib.h>

#include "../../runtime/src/backend.h"
#include "check.h"

static void test_list_covers_each_slot_once(void) {
  int n = em_backend_slot_count;
  /* the static assertion in backend_slots.c ties n to sizeof(struct em_backend) */
  CHECK(n * sizeof(void (*)(void)) ==
        sizeof(struct em_backend) - offsetof(struct em_backend, storage_alloc));
  for (int i = 0; i < n; i++) {
    const em_backend_slot *s = &em_backend_slots[i];
    CHECK(s->offset >= offsetof(struct em_backend, storage_alloc));
    CHECK(s->offset + sizeof(void (*)(void)) <= sizeof(struct em_backend));
    CHECK(s->offset % sizeof(void (*)(void)) == 0);
    for (int j = 0; j < i; j++) {
      if (em_backend_slots[j].offset == s->offset || strcmp(em_backend_slots[j].name, s->name) == 0) {
        fprintf(stderr, "slots %s and %s: the same offset or name\n", em_backend_slots[j].name,
                s->name);
        CHECK(0);
      }
    }
  }
  CHECK(strcmp(em_backend_slots[0].name, "storage_alloc") == 0);
  CHECK(em_backend_slots[0].offset == offsetof(struct em_backend, storage_alloc));
}

static int count_empty(const em_backend *be, const char *except) {
  int empty = 0;
  for (int i = 0; i < em_backend_slot_count; i++) {
    bool expect_empty = except != NULL && strcmp(em_backend_slots[i].name, except) == 0;
    if (em_backend_slots[i].optional && !expect_empty) continue; /* either way */
    if (em_backend_slot_filled(be, i) == expect_empty) {
      fprintf(stderr, "%s: slot %s is %s\n", be->name, em_backend_slots[i].name,
              expect_empty ? "filled, expected empty" : "empty");
      empty++;
    }
  }
  return empty;
}

static void test_tables_are_full(void) {
  CHECK(count_empty(&em_cpu_backend, NULL) == 0);
  CHECK(count_empty(&em_vulkan_backend, NULL) == 0);
  /* the optional capability: the CPU checks on the host, Vulkan on the device */
  CHECK(em_cpu_backend.check_index == NULL);
  CHECK(em_vulkan_backend.check_index != NULL);
}

static void test_clear(void) {
  em_backend t = em_vulkan_backend;
  CHECK(em_backend_slot_clear(&t, "gemm") == 0);
  CHECK(t.gemm == NULL);
  CHECK(count_empty(&t, "gemm") == 0);
  CHECK_ERROR(em_backend_slot_clear(&t, "gem") != 0,
              "expected a kernel slot name of struct em_backend, got 'gem'");
}

/* Discovery reads the hook once: the process's devices are those of this environment. */
static void test_hook_empties_one_slot(void) {
  setenv("EMBER_VK_TEST", "empty-slot:sort", 1);
  int vulkan = 0;
  for (int d = 0; d < em_device_count(); d++) {
    const em_backend *be = em_device_backend(d);
    if (strncmp(be->name, "vulkan:", 7) != 0) continue;
    vulkan++;
    CHECK(strcmp(be->name, em_device_name(d)) == 0);
    CHECK(count_empty(be, "sort") == 0);
  }
  if (vulkan == 0) printf("no Vulkan device: the hook is not checked\n");
}

int main(void) {
  test_list_covers_each_slot_once();
  test_tables_are_full();
  test_clear();
  test_hook_empties_one_slot();
  return check_report();
}
