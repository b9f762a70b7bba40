/*
 * memory.c: the CPU allocator.
 *
 * Small blocks come from malloc, whose per-thread caches are already fast. Large blocks
 * (>= 64 KiB) are kept in a cache when freed: glibc returns such blocks to the system, and
 * getting them back costs a page fault per 4 KiB on first touch, which dominates a large
 * elementwise op. Cached sizes are rounded up to classes an eighth of a power of two apart
 * (at most 12.5% waste). The cache is bounded; it is emptied by memory.empty_cache and, before
 * an out-of-memory error, as the first of the three steps (free the cache, run the host's GC
 * hook, retry).
 */
#include <pthread.h>
#include <stdlib.h>

#include "cpu.h"
#include "../memory/memory_debug.h"

enum { LARGE_BLOCK = 1 << 16, SMALL_ALIGN_LIMIT = 4096, NUM_CLASSES = 8 * 44 };
static const int64_t cache_cap = (int64_t)2 << 30; /* bytes kept cached at most */

typedef struct cached_block {
  struct cached_block *next;
} cached_block;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static cached_block *free_lists[NUM_CLASSES];
static int64_t cached_bytes;

/* Size class of a large block: 8 classes per power of two. */
static int size_class(size_t nbytes, size_t *class_bytes) {
  int log2 = 63 - __builtin_clzll((unsigned long long)nbytes);
  size_t step = (size_t)1 << (log2 - 3);
  size_t rounded = (nbytes + step - 1) & ~(step - 1);
  int cls = (log2 - 16) * 8 + (int)((rounded >> (log2 - 3)) - 8);
  *class_bytes = rounded;
  return cls;
}

static void *cache_take(int cls, size_t class_bytes) {
  pthread_mutex_lock(&cache_lock);
  cached_block *b = free_lists[cls];
  if (b) {
    free_lists[cls] = b->next;
    cached_bytes -= (int64_t)class_bytes;
  }
  pthread_mutex_unlock(&cache_lock);
  if (b) em_memory_note_cached(EM_CPU, -(int64_t)class_bytes);
  return b;
}

static bool cache_put(void *p, int cls, size_t class_bytes) {
  bool kept = false;
  pthread_mutex_lock(&cache_lock);
  if (cached_bytes + (int64_t)class_bytes <= cache_cap) {
    cached_block *b = p;
    b->next = free_lists[cls];
    free_lists[cls] = b;
    cached_bytes += (int64_t)class_bytes;
    kept = true;
  }
  pthread_mutex_unlock(&cache_lock);
  if (kept) em_memory_note_cached(EM_CPU, (int64_t)class_bytes);
  return kept;
}

void em_cpu_cache_release(void) {
  em_small_block_pool_release();
  pthread_mutex_lock(&cache_lock);
  int64_t released = cached_bytes;
  for (int c = 0; c < NUM_CLASSES; c++) {
    while (free_lists[c]) {
      cached_block *b = free_lists[c];
      free_lists[c] = b->next;
      free(b);
    }
  }
  cached_bytes = 0;
  pthread_mutex_unlock(&cache_lock);
  if (released) em_memory_note_cached(EM_CPU, -released);
}

static void *system_alloc(size_t nbytes) {
  if (nbytes <= SMALL_ALIGN_LIMIT) return malloc(nbytes ? nbytes : 1);
  /* 64-byte alignment for vector loops, and to keep two tensors off one cache line. */
  return aligned_alloc(64, (nbytes + 63) & ~(size_t)63);
}

/* One attempt: the cache, then the system; NULL if the limit or the system says no. */
static void *try_alloc(size_t nbytes, size_t *held) {
  *held = nbytes;
  if (em_memory_check_limit(EM_CPU, nbytes) != 0) return NULL;
  if (nbytes < LARGE_BLOCK) return system_alloc(nbytes);
  int cls = size_class(nbytes, held);
  if (cls >= NUM_CLASSES) return NULL;
  void *p = cache_take(cls, *held);
  return p ? p : system_alloc(*held);
}

void *em_cpu_alloc(size_t nbytes) {
  size_t held;
  void *p = try_alloc(nbytes, &held);
  if (p == NULL) {
    em_cpu_cache_release();
    em_memory_run_gc_hook();
    p = try_alloc(nbytes, &held);
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
  em_memory_note_free(EM_CPU, nbytes);
  if (nbytes >= LARGE_BLOCK) {
    size_t class_bytes;
    int cls = size_class(nbytes, &class_bytes);
    if (cls < NUM_CLASSES && cache_put(p, cls, class_bytes)) return;
  }
  free(p);
}

/* ---- census (ember.memory.summary) ---------------------------------------------------------
 * The cached blocks by the census's power-of-two classes. Blocks of one free list all have
 * their class's rounded size; no block is merged with another, so the largest one is the
 * largest request the cache can serve whole. */
void em_cpu_cache_census(em_memory_census *out) {
  pthread_mutex_lock(&cache_lock);
  for (int c = 0; c < NUM_CLASSES; c++) {
    int64_t n = 0;
    for (cached_block *b = free_lists[c]; b; b = b->next) n++;
    if (n == 0) continue;
    int log2 = c / 8 + 16;
    int64_t class_bytes = (int64_t)(8 + c % 8) << (log2 - 3);
    em_memory_class *k = &out->classes[em_memory_class_of((uint64_t)class_bytes)];
    k->cached_blocks += n;
    k->cached_bytes += n * class_bytes;
    if (class_bytes > out->largest_free) out->largest_free = class_bytes;
  }
  pthread_mutex_unlock(&cache_lock);
}
