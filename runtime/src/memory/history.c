/*
 * history.c: the registry of storages made while recording is on (ember.memory.snapshot,
 * ember.memory.leak_check).
 *
 * tensor.c reports each tensor it gives a new storage (em_history_note_new), storage.c each
 * storage it frees (em_history_note_release); both hooks test one global first, so with
 * recording off an allocation pays a predictable branch and nothing else (decision 15).
 *
 * Where a storage was made is the host's business: it registers a site function that returns
 * an id for "where the program is now" (Lua walks its stack and interns the traceback; C
 * embedders may return anything). The function is called before the registry's lock is taken
 * and only on the thread that turned recording on: Lua may run its collector in it, and a
 * finalizer that releases a tensor comes back here to em_history_forget. A call made while
 * another is running (a storage made from inside the site function) gets site 0.
 *
 * The registry is an open-addressing hash table keyed by the storage's address, with linear
 * probing and backward-shift deletion (no tombstones, so lookups stay short however many
 * storages come and go). A lock guards it: data-loader threads make storages too.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "memory_debug.h"

typedef struct entry {
  const em_storage *key; /* NULL: an empty slot */
  em_memory_block block;
} entry;

int em_history_recording;
int64_t em_history_entries;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static entry *table;
static size_t capacity; /* a power of two, or 0 */
static int64_t next_id = 1;

static em_memory_site_fn site_fn;
static void *site_userdata;
static pthread_t site_thread;
static _Thread_local bool in_site_fn;

static size_t slot_of(const em_storage *s, size_t mask) {
  uint64_t h = (uint64_t)(uintptr_t)s;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull; /* a 64-bit mixer (MurmurHash3's finalizer) */
  h ^= h >> 33;
  return (size_t)h & mask;
}

static void put(entry *tab, size_t cap, const entry *e) {
  size_t i = slot_of(e->key, cap - 1);
  while (tab[i].key != NULL) i = (i + 1) & (cap - 1);
  tab[i] = *e;
}

/* Keeps the table at most half full. false when memory for a larger one is lacking. */
static bool reserve_one(void) {
  if ((size_t)(em_history_entries + 1) * 2 <= capacity) return true;
  size_t cap = capacity ? capacity * 2 : 1024;
  entry *tab = calloc(cap, sizeof *tab);
  if (tab == NULL) return false;
  for (size_t i = 0; i < capacity; i++)
    if (table[i].key != NULL) put(tab, cap, &table[i]);
  free(table);
  table = tab;
  capacity = cap;
  return true;
}

static int32_t current_site(void) {
  em_memory_site_fn fn = __atomic_load_n(&site_fn, __ATOMIC_ACQUIRE);
  if (fn == NULL || in_site_fn ||
      !pthread_equal(pthread_self(), __atomic_load_n(&site_thread, __ATOMIC_RELAXED)))
    return 0;
  in_site_fn = true;
  int32_t site = fn(site_userdata);
  in_site_fn = false;
  return site;
}

void em_history_record(const em_tensor *t) {
  const em_storage *s = t->storage;
  entry e = {.key = s};
  e.block.bytes = (int64_t)s->nbytes;
  e.block.device = s->device_id;
  e.block.dtype = t->dtype_id;
  e.block.ndim = t->ndim;
  memcpy(e.block.sizes, t->sizes, sizeof(int64_t) * (size_t)t->ndim);
  e.block.site = current_site();
  pthread_mutex_lock(&lock);
  /* Without memory for the table the storage goes unrecorded: the snapshot counts it among
   * the untracked ones, which is true, and the program goes on. */
  if (reserve_one()) {
    e.block.id = next_id++;
    put(table, capacity, &e);
    __atomic_store_n(&em_history_entries, em_history_entries + 1, __ATOMIC_RELAXED);
  }
  pthread_mutex_unlock(&lock);
}

void em_history_forget(const em_storage *s) {
  pthread_mutex_lock(&lock);
  if (capacity == 0) goto done;
  size_t mask = capacity - 1, i = slot_of(s, mask);
  while (table[i].key != s) {
    if (table[i].key == NULL) goto done; /* made while recording was off */
    i = (i + 1) & mask;
  }
  /* Backward-shift deletion: move later entries of the run into the hole when their home slot
   * does not lie strictly between the hole and them. */
  size_t hole = i;
  for (size_t j = (i + 1) & mask; table[j].key != NULL; j = (j + 1) & mask) {
    size_t home = slot_of(table[j].key, mask);
    bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (!stays) {
      table[hole] = table[j];
      hole = j;
    }
  }
  table[hole].key = NULL;
  __atomic_store_n(&em_history_entries, em_history_entries - 1, __ATOMIC_RELAXED);
done:
  pthread_mutex_unlock(&lock);
}

void em_memory_set_site_fn(em_memory_site_fn fn, void *userdata) {
  pthread_mutex_lock(&lock);
  site_userdata = userdata;
  __atomic_store_n(&site_fn, fn, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&lock);
}

int em_memory_record_history(int on) {
  pthread_mutex_lock(&lock);
  int was = em_history_recording;
  /* Atomic: threads that allocate read it without the lock (pthread_t is an integer here). */
  if (on) __atomic_store_n(&site_thread, pthread_self(), __ATOMIC_RELAXED);
  __atomic_store_n(&em_history_recording, on ? 1 : 0, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&lock);
  return was;
}

int em_memory_history_enabled(void) {
  return __atomic_load_n(&em_history_recording, __ATOMIC_RELAXED);
}

int64_t em_memory_history_count(int device) {
  pthread_mutex_lock(&lock);
  int64_t n = 0;
  if (device < 0) {
    n = em_history_entries;
  } else {
    for (size_t i = 0; i < capacity; i++)
      n += table[i].key != NULL && table[i].block.device == device;
  }
  pthread_mutex_unlock(&lock);
  return n;
}

int64_t em_memory_history_get(int device, em_memory_block *out, int64_t cap) {
  if (out == NULL && cap > 0) return em_error("memory_history_get: expected out, got NULL");
  pthread_mutex_lock(&lock);
  int64_t n = 0;
  for (size_t i = 0; i < capacity && n < cap; i++) {
    if (table[i].key == NULL || (device >= 0 && table[i].block.device != device)) continue;
    out[n++] = table[i].block;
  }
  pthread_mutex_unlock(&lock);
  return n;
}

int64_t em_memory_history_next_id(void) {
  pthread_mutex_lock(&lock);
  int64_t id = next_id;
  pthread_mutex_unlock(&lock);
  return id;
}
