/*
 * memory_debug.h: what the allocators and the tensor layer tell the memory debugger
 * (ember.memory.summary, snapshot, leak_check), and what it asks the device caches.
 *
 * - Size classes: every allocation and free of a storage is counted per device and per size
 *   class (powers of two), so that the summary can say how many storages of which sizes are
 *   live. alloc.c calls em_class_note_* where it counts `allocated`; the main thread uses plain
 *   stores, other threads atomics, as alloc.c does for its own counters.
 * - History: tensor.c reports each tensor that got a new storage, storage.c each storage it
 *   frees. Each hook tests one global and returns while recording is off (decision 15).
 * - Census: the CPU's and Vulkan's caches describe their free blocks on request (nothing is
 *   kept on their fast paths for it).
 */
#ifndef EMBER_MEMORY_DEBUG_H
#define EMBER_MEMORY_DEBUG_H

#include "../internal.h"

/* ---- live storages per size class (census.c) ---------------------------------------------- */
typedef struct em_class_counter {
  int64_t main_blocks, main_bytes;     /* written by the main thread only */
  int64_t shared_blocks, shared_bytes; /* other threads, atomic */
} em_class_counter;
/* Hidden: the library's own code reaches it directly rather than through the GOT (these adds
 * run twice per tensor; callgrind counted about 20 instructions per call before, 10 after). */
extern em_class_counter em_class_counters[EM_MAX_DEVICES][EM_MEMORY_CLASSES]
    __attribute__((visibility("hidden")));

/* Class k holds sizes in [2^k, 2^(k+1)); class 0 also holds empty storages (no branch). */
static inline int em_memory_class_of(uint64_t nbytes) {
  return 63 - __builtin_clzll((unsigned long long)(nbytes | 1));
}

static inline void em_class_note_main(int device, size_t nbytes, int64_t sign) {
  em_class_counter *c = &em_class_counters[device][em_memory_class_of(nbytes)];
  __atomic_store_n(&c->main_blocks, __atomic_load_n(&c->main_blocks, __ATOMIC_RELAXED) + sign,
                   __ATOMIC_RELAXED);
  __atomic_store_n(&c->main_bytes,
                   __atomic_load_n(&c->main_bytes, __ATOMIC_RELAXED) + sign * (int64_t)nbytes,
                   __ATOMIC_RELAXED);
}

static inline void em_class_note_shared(int device, size_t nbytes, int64_t sign) {
  em_class_counter *c = &em_class_counters[device][em_memory_class_of(nbytes)];
  __atomic_add_fetch(&c->shared_blocks, sign, __ATOMIC_RELAXED);
  __atomic_add_fetch(&c->shared_bytes, sign * (int64_t)nbytes, __ATOMIC_RELAXED);
}

/* ---- allocation history (history.c) -------------------------------------------------------- */
extern int em_history_recording;   /* nonzero while ember.memory.record_history is on */
extern int64_t em_history_entries; /* storages in the registry (frees look only when > 0) */
void em_history_record(const em_tensor *t);
void em_history_forget(const em_storage *s);

/* t was just given a new storage. */
static inline void em_history_note_new(const em_tensor *t) {
  if (__builtin_expect(__atomic_load_n(&em_history_recording, __ATOMIC_RELAXED) != 0, 0))
    em_history_record(t);
}

/* s is about to be freed. */
static inline void em_history_note_release(const em_storage *s) {
  if (__builtin_expect(__atomic_load_n(&em_history_entries, __ATOMIC_RELAXED) != 0, 0))
    em_history_forget(s);
}

/* ---- the caches' free blocks (cpu/memory.c, vulkan/vk_memory.c) --------------------------- */
/* Adds the cache's free blocks to out->classes[].cached_*, and sets largest_free and the
 * segments. The Vulkan one does nothing for a device that is not a Vulkan device. */
void em_cpu_cache_census(em_memory_census *out);
void em_vk_memory_census(int device, em_memory_census *out);

#endif
