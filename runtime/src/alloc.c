/*
 * alloc.c: per-device memory accounting and the CPU allocator.
 *
 * Every device keeps statistics (allocated, reserved, peak, count) and an optional limit. When an
 * allocation fails, or would pass the limit, the allocator tries three things before it reports
 * out-of-memory with the figures: free the device's cache, run the host's GC hook (an embedder
 * frees what it holds), and retry once.
 *
 * On the CPU, glibc's malloc already caches small blocks and returns large ones to the system,
 * so the CPU keeps no cache of its own: reserved equals allocated.
 */
#include <stdio.h>
#include <stdlib.h>

#include "backend.h"

typedef struct device_memory {
  int64_t allocated, reserved, peak, num_allocs, limit;
} device_memory;

/* Small CPU blocks come from plain malloc (16-byte aligned, glibc's fast per-thread cache);
 * aligned_alloc is reserved for larger ones, where 64-byte alignment helps vector loops and
 * its slower path does not matter. */
enum { SMALL_BLOCK = 4096 };

static device_memory memory[EM_MAX_DEVICES];
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
static int64_t allocated_everywhere(void) {
  int64_t sum = 0;
  for (int d = 0; d < EM_MAX_DEVICES; d++) sum += __atomic_load_n(&memory[d].allocated, __ATOMIC_RELAXED);
  return sum;
}
int64_t em_alloc_pressure(void) { return allocated_everywhere() - pressure_mark; }
void em_alloc_pressure_reset(void) { pressure_mark = allocated_everywhere(); }

void em_memory_note_alloc(int device, size_t nbytes) {
  device_memory *m = &memory[device];
  int64_t now = __atomic_add_fetch(&m->allocated, (int64_t)nbytes, __ATOMIC_RELAXED);
  __atomic_add_fetch(&m->num_allocs, 1, __ATOMIC_RELAXED);
  int64_t peak = __atomic_load_n(&m->peak, __ATOMIC_RELAXED);
  while (now > peak &&
         !__atomic_compare_exchange_n(&m->peak, &peak, now, true, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED)) {
  }
}

void em_memory_note_free(int device, size_t nbytes) {
  device_memory *m = &memory[device];
  __atomic_sub_fetch(&m->allocated, (int64_t)nbytes, __ATOMIC_RELAXED);
}

int em_memory_check_limit(int device, size_t nbytes) {
  device_memory *m = &memory[device];
  int64_t limit = __atomic_load_n(&m->limit, __ATOMIC_RELAXED);
  if (limit <= 0) return 0;
  return __atomic_load_n(&m->allocated, __ATOMIC_RELAXED) + (int64_t)nbytes > limit ? -1 : 0;
}

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
  int64_t reserved = device == EM_CPU ? m->allocated : m->reserved;
  human_bytes(want, sizeof want, (double)nbytes);
  human_bytes(held, sizeof held, (double)m->allocated);
  human_bytes(cached, sizeof cached, (double)(reserved - m->allocated));
  if (m->limit > 0) human_bytes(lim, sizeof lim, (double)m->limit);
  else snprintf(lim, sizeof lim, "none");
  return em_error_kind_set(EM_ERR_OOM,
                           "out of memory on %s: tried to allocate %s (allocated %s, cached %s, "
                           "limit %s)",
                           em_device_name(device), want, held, cached, lim);
}

/* The CPU allocator. Limits are checked here so that a limit behaves like a full device. */
static void *try_cpu_alloc(size_t nbytes) {
  if (em_memory_check_limit(EM_CPU, nbytes) != 0) return NULL;
  /* 64-byte alignment for vector loads and to keep two tensors off one cache line. */
  if (nbytes <= SMALL_BLOCK) return malloc(nbytes ? nbytes : 1);
  size_t rounded = (nbytes + 63) & ~(size_t)63;
  return aligned_alloc(64, rounded);
}

void *em_cpu_alloc(size_t nbytes) {
  void *p = try_cpu_alloc(nbytes);
  if (p == NULL) {
    em_memory_run_gc_hook();
    p = try_cpu_alloc(nbytes);
  }
  if (p == NULL) {
    em_memory_oom_error(EM_CPU, nbytes);
    return NULL;
  }
  em_memory_note_alloc(EM_CPU, nbytes);
  return p;
}

void em_cpu_free(void *p, size_t nbytes) {
  if (p == NULL) return;
  free(p);
  em_memory_note_free(EM_CPU, nbytes);
}

int em_memory_stats_get(int device, em_memory_stats *out) {
  if (em_check_device("memory.stats", device) != 0) return -1;
  device_memory *m = &memory[device];
  out->allocated = m->allocated;
  out->reserved = device == EM_CPU ? m->allocated : m->reserved; /* the CPU caches nothing */
  out->peak = m->peak;
  out->num_allocs = m->num_allocs;
  out->limit = m->limit;
  return 0;
}

int em_memory_set_limit(int device, int64_t bytes) {
  if (em_check_device("memory.set_limit", device) != 0) return -1;
  if (bytes < 0) return em_error("memory.set_limit: expected a limit >= 0 bytes, got %lld",
                                 (long long)bytes);
  memory[device].limit = bytes;
  return 0;
}

int em_memory_reset_peak(int device) {
  if (em_check_device("memory.reset_peak", device) != 0) return -1;
  memory[device].peak = memory[device].allocated;
  return 0;
}

int em_memory_empty_cache(int device) {
  return em_check_device("memory.empty_cache", device); /* the CPU holds no cache */
}
