/*
 * alloc.c: per-device memory accounting and the CPU allocator.
 *
 * Every device keeps statistics (allocated, reserved, peak, count) and an optional limit. When an
 * allocation fails, or would pass the limit, the allocator tries three things before it reports
 * out-of-memory with the figures: free the device's cache, run the host's GC hook (an embedder
 * frees what it holds), and retry once.
 *
 * The allocators themselves live with their devices (cpu/memory.c for the CPU); they report here
 * what they hold, so that reserved = allocated + cached.
 */
#include <stdio.h>
#include <stdlib.h>

#include "backend.h"
#include "device.h"

/* Counters are split in two: the first thread that allocates (the host's main thread) updates
 * its own half with plain stores, other threads (data-loader workers) use locked atomics on the
 * shared half. A locked add costs about as much as the rest of a small op, and nearly every
 * allocation comes from the main thread. Readers add the halves. */
typedef struct device_memory {
  int64_t main_allocated, main_allocs;       /* written by the main thread only */
  int64_t shared_allocated, shared_allocs;   /* atomic */
  int64_t cached;                            /* held by the device's cache, free for reuse */
  int64_t peak, limit;
} device_memory;

static int main_claimed;
static _Thread_local __attribute__((tls_model("initial-exec"))) int8_t thread_role; /* 1 main, 2 other */

static inline bool on_main_thread(void) {
  if (thread_role == 0) {
    int expected = 0;
    thread_role = __atomic_compare_exchange_n(&main_claimed, &expected, 1, false,
                                              __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) ? 1 : 2;
  }
  return thread_role == 1;
}

bool em_on_main_thread(void) { return on_main_thread(); }

static inline void plain_add(int64_t *p, int64_t v) {
  __atomic_store_n(p, __atomic_load_n(p, __ATOMIC_RELAXED) + v, __ATOMIC_RELAXED);
}

static int64_t allocated_on(const device_memory *m) {
  return __atomic_load_n(&m->main_allocated, __ATOMIC_RELAXED) +
         __atomic_load_n(&m->shared_allocated, __ATOMIC_RELAXED);
}

static device_memory memory[EM_MAX_DEVICES];
/* The same counts summed over devices, kept alongside: em_alloc_pressure runs after every op
 * made from Lua, and summing 16 devices' halves there cost about 120 instructions. */
static device_memory all_devices;
/* Set once by the host before it starts threads (Lua's state sets it at load). */
static em_gc_hook gc_hook;
static void *gc_hook_userdata;
static int64_t pressure_mark; /* bytes allocated on all devices when the host last collected */

void em_set_gc_hook(em_gc_hook hook, void *userdata) {
  gc_hook = hook;
  gc_hook_userdata = userdata;
}

void em_memory_run_gc_hook(void) {
  if (gc_hook) gc_hook(gc_hook_userdata);
}

/* Growth of live memory since the host last collected: garbage the host still holds shows up
 * here, while an alloc/free loop does not. */
static int64_t allocated_everywhere(void) { return allocated_on(&all_devices); }
int64_t em_alloc_pressure(void) { return allocated_everywhere() - pressure_mark; }
void em_alloc_pressure_reset(void) { pressure_mark = allocated_everywhere(); }
int64_t em_alloc_live(void) { return allocated_everywhere(); }

void em_memory_note_alloc(int device, size_t nbytes) {
  device_memory *m = &memory[device];
  if (on_main_thread()) {
    plain_add(&m->main_allocated, (int64_t)nbytes);
    plain_add(&m->main_allocs, 1);
    plain_add(&all_devices.main_allocated, (int64_t)nbytes);
  } else {
    __atomic_add_fetch(&m->shared_allocated, (int64_t)nbytes, __ATOMIC_RELAXED);
    __atomic_add_fetch(&m->shared_allocs, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&all_devices.shared_allocated, (int64_t)nbytes, __ATOMIC_RELAXED);
  }
  int64_t now = allocated_on(m);
  int64_t peak = __atomic_load_n(&m->peak, __ATOMIC_RELAXED);
  while (now > peak &&
         !__atomic_compare_exchange_n(&m->peak, &peak, now, true, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED)) {
  }
}

void em_memory_note_free(int device, size_t nbytes) {
  device_memory *m = &memory[device];
  if (on_main_thread()) {
    plain_add(&m->main_allocated, -(int64_t)nbytes);
    plain_add(&all_devices.main_allocated, -(int64_t)nbytes);
  } else {
    __atomic_sub_fetch(&m->shared_allocated, (int64_t)nbytes, __ATOMIC_RELAXED);
    __atomic_sub_fetch(&all_devices.shared_allocated, (int64_t)nbytes, __ATOMIC_RELAXED);
  }
}

int em_memory_check_limit(int device, size_t nbytes) {
  device_memory *m = &memory[device];
  int64_t limit = __atomic_load_n(&m->limit, __ATOMIC_RELAXED);
  if (limit <= 0) return 0;
  return allocated_on(m) + (int64_t)nbytes > limit ? -1 : 0;
}

void em_memory_note_cached(int device, int64_t delta) {
  __atomic_add_fetch(&memory[device].cached, delta, __ATOMIC_RELAXED);
}

int64_t em_memory_limit(int device) { return __atomic_load_n(&memory[device].limit, __ATOMIC_RELAXED); }

static const char *human_bytes(char *buf, size_t cap, double b) {
  static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, u++;
  if (u == 0) snprintf(buf, cap, "%.0f B", b);
  else snprintf(buf, cap, "%.1f %s", b, units[u]);
  return buf;
}

int em_memory_oom_error(int device, size_t nbytes) {
  device_memory *m = &memory[device];
  char want[32], held[32], cached[32], lim[32];
  int64_t allocated = allocated_on(m);
  human_bytes(want, sizeof want, (double)nbytes);
  human_bytes(held, sizeof held, (double)allocated);
  human_bytes(cached, sizeof cached, (double)__atomic_load_n(&m->cached, __ATOMIC_RELAXED));
  int64_t limit = __atomic_load_n(&m->limit, __ATOMIC_RELAXED);
  if (limit > 0) human_bytes(lim, sizeof lim, (double)limit);
  else snprintf(lim, sizeof lim, "none");
  return em_error_kind_set(EM_ERR_OOM,
                           "out of memory on %s: tried to allocate %s (allocated %s, cached %s, "
                           "limit %s)",
                           em_device_name(device), want, held, cached, lim);
}

int em_memory_stats_get(int device, em_memory_stats *out) {
  if (em_check_device("memory.stats", device) != 0) return -1;
  device_memory *m = &memory[device];
  out->allocated = allocated_on(m);
  out->reserved = out->allocated + __atomic_load_n(&m->cached, __ATOMIC_RELAXED);
  out->peak = __atomic_load_n(&m->peak, __ATOMIC_RELAXED);
  out->num_allocs = __atomic_load_n(&m->main_allocs, __ATOMIC_RELAXED) +
                    __atomic_load_n(&m->shared_allocs, __ATOMIC_RELAXED);
  out->limit = __atomic_load_n(&m->limit, __ATOMIC_RELAXED);
  return 0;
}

int em_memory_set_limit(int device, int64_t bytes) {
  if (em_check_device("memory.set_limit", device) != 0) return -1;
  if (bytes < 0) return em_error("memory.set_limit: expected a limit >= 0 bytes, got %lld",
                                 (long long)bytes);
  __atomic_store_n(&memory[device].limit, bytes, __ATOMIC_RELAXED);
  return 0;
}

int em_memory_reset_peak(int device) {
  if (em_check_device("memory.reset_peak", device) != 0) return -1;
  __atomic_store_n(&memory[device].peak, allocated_on(&memory[device]), __ATOMIC_RELAXED);
  return 0;
}

int em_memory_empty_cache(int device) {
  if (em_check_device("memory.empty_cache", device) != 0) return -1;
  if (device == EM_CPU) em_cpu_cache_release();
  else return em_device_release_cache(device);
  return 0;
}
