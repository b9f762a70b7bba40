/*
 * census.c: a device's memory by size class, for ember.memory.summary.
 *
 * The live side comes from counters that alloc.c keeps on every allocation and free (two plain
 * adds on the main thread: see memory_debug.h); the cached side is asked of the device's cache
 * when a census is taken, so the caches' fast paths carry nothing for it.
 */
#include <string.h>

#include "memory_debug.h"

em_class_counter em_class_counters[EM_MAX_DEVICES][EM_MEMORY_CLASSES];

int em_memory_census_get(int device, em_memory_census *out) {
  if (out == NULL) return em_error("memory_census_get: expected out, got NULL");
  if (em_check_device("memory.census", device) != 0) return -1;
  memset(out, 0, sizeof *out);
  for (int k = 0; k < EM_MEMORY_CLASSES; k++) {
    const em_class_counter *c = &em_class_counters[device][k];
    out->classes[k].live_blocks = __atomic_load_n(&c->main_blocks, __ATOMIC_RELAXED) +
                                  __atomic_load_n(&c->shared_blocks, __ATOMIC_RELAXED);
    out->classes[k].live_bytes = __atomic_load_n(&c->main_bytes, __ATOMIC_RELAXED) +
                                 __atomic_load_n(&c->shared_bytes, __ATOMIC_RELAXED);
  }
  if (device == EM_CPU) em_cpu_cache_census(out);
  else em_vk_memory_census(device, out);
  return 0;
}
