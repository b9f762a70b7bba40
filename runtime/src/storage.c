/*
 * storage.c: refcounted buffers. A storage lives on one device; its last release hands the
 * memory back to that device's allocator. Refcounts are atomic because data-loader worker
 * threads create and drop tensors too.
 */
#include <stddef.h>
#include <stdlib.h>

#include "backend.h"

/* Small CPU storages carry their data in the same block as the header: one malloc per tensor
 * fewer on the path of every small op. The header is padded so the data is 16-byte aligned. */
enum { INLINE_MAX = 1024 };
typedef struct inline_storage {
  em_storage s;
  _Alignas(16) unsigned char data[];
} inline_storage;
static char inline_marker; /* backend_ctx of an inline storage */

static em_storage *inline_storage_new(size_t nbytes) {
  if (em_memory_check_limit(EM_CPU, nbytes) != 0) {
    em_memory_run_gc_hook();
    if (em_memory_check_limit(EM_CPU, nbytes) != 0) {
      em_memory_oom_error(EM_CPU, nbytes);
      return NULL;
    }
  }
  inline_storage *b = malloc(sizeof *b + nbytes);
  if (b == NULL) {
    em_memory_oom_error(EM_CPU, nbytes);
    return NULL;
  }
  b->s.refcount = 1;
  b->s.device_id = EM_CPU;
  b->s.data = b->data;
  b->s.nbytes = nbytes;
  b->s.version = 0;
  b->s.backend_ctx = &inline_marker;
  em_memory_note_alloc(EM_CPU, nbytes);
  return &b->s;
}

/* A small CPU tensor's header, storage and data in one block, one malloc for the whole tensor.
 * The header lives at the block's start. Views may outlive the header, so the block goes when
 * the storage goes: the header's release only drops its storage reference. */
typedef struct tensor_block {
  em_tensor t;
  em_storage s;
  _Alignas(16) unsigned char data[];
} tensor_block;
static char block_marker; /* backend_ctx of a storage inside a tensor block */

/* Blocks of tensors of at most POOL_DATA bytes all have that capacity, so they are
 * interchangeable: the main thread keeps up to POOL_CAP of them when they are released and
 * hands them out again. Lua releases dead tensors in sweeps of thousands (core.lua), more
 * than malloc's per-thread cache keeps, and malloc then merged and split chunks: about 300
 * instructions per tiny op, against about 10 here. Other threads use malloc alone. Under
 * AddressSanitizer there is no pool, so that a use after release is still caught. */
enum { POOL_DATA = 64 };
#if defined(__SANITIZE_ADDRESS__)
enum { POOL_CAP = 0 };
#else
enum { POOL_CAP = 16384 };
#endif
static tensor_block *pool[POOL_CAP > 0 ? POOL_CAP : 1]; /* main thread only */
static int pool_n;

void em_small_block_pool_release(void) {
  if (!em_on_main_thread()) return;
  while (pool_n > 0) free(pool[--pool_n]);
}

em_tensor *em_small_tensor_block(size_t nbytes) {
  if (nbytes > INLINE_MAX) return NULL;
  if (em_memory_check_limit(EM_CPU, nbytes) != 0) return NULL; /* the caller takes the long path */
  tensor_block *b = NULL;
  if (nbytes <= POOL_DATA) {
    if (em_on_main_thread() && pool_n > 0) b = pool[--pool_n]; /* pool_n: main thread only */
    else b = malloc(sizeof *b + POOL_DATA);
  } else {
    b = malloc(sizeof *b + nbytes);
  }
  if (b == NULL) return NULL;
  b->s.refcount = 1;
  b->s.device_id = EM_CPU;
  b->s.data = b->data;
  b->s.nbytes = nbytes;
  b->s.version = 0;
  b->s.backend_ctx = &block_marker;
  b->t.storage = &b->s;
  em_memory_note_alloc(EM_CPU, nbytes);
  return &b->t;
}

em_storage *em_storage_new(int device, size_t nbytes) {
  const em_backend *be = em_device_backend(device);
  if (be == NULL) return em_error_null("storage: invalid device %d", device);
  if (device == EM_CPU && nbytes <= INLINE_MAX) return inline_storage_new(nbytes);
  em_storage *s = malloc(sizeof *s);
  if (s == NULL) {
    em_error_kind_set(EM_ERR_OOM, "out of memory on cpu: tried to allocate %zu bytes", sizeof *s);
    return NULL;
  }
  s->refcount = 1;
  s->device_id = device;
  s->data = NULL;
  s->nbytes = nbytes;
  s->version = 0;
  s->backend_ctx = NULL;
  if (be->storage_alloc(s) != 0) {
    free(s);
    return NULL;
  }
  return s;
}

bool em_storage_is_pinned(const em_storage *s) {
  return s->device_id == EM_CPU && s->backend_ctx != NULL && s->backend_ctx != &inline_marker &&
         s->backend_ctx != &block_marker;
}

em_storage *em_pinned_storage_new(int device, size_t nbytes) {
  const em_backend *be = em_device_backend(device);
  if (be == NULL) return em_error_null("pin_memory: invalid device %d", device);
  if (be->pin_alloc == NULL)
    return em_error_null("pin_memory: expected a device with pinned memory (a Vulkan GPU), got %s",
                         be->name);
  em_storage *s = malloc(sizeof *s);
  if (s == NULL) {
    em_error_kind_set(EM_ERR_OOM, "out of memory on cpu: tried to allocate %zu bytes", sizeof *s);
    return NULL;
  }
  *s = (em_storage){.refcount = 1, .device_id = EM_CPU, .nbytes = nbytes};
  if (em_device_start(device) != 0 || be->pin_alloc(s, device) != 0) {
    free(s);
    return NULL;
  }
  em_memory_note_alloc(EM_CPU, nbytes);
  return s;
}

void em_storage_retain(em_storage *s) { __atomic_add_fetch(&s->refcount, 1, __ATOMIC_RELAXED); }

void em_storage_release(em_storage *s) {
  if (s == NULL) return;
  if (__atomic_load_n(&s->refcount, __ATOMIC_ACQUIRE) != 1 &&
      __atomic_sub_fetch(&s->refcount, 1, __ATOMIC_ACQ_REL) != 0)
    return;
  if (s->backend_ctx == &block_marker) {
    em_memory_note_free(EM_CPU, s->nbytes);
    tensor_block *b = (tensor_block *)((char *)s - offsetof(tensor_block, s));
    if (s->nbytes <= POOL_DATA && em_on_main_thread() && pool_n < POOL_CAP) pool[pool_n++] = b;
    else free(b);
    return;
  }
  if (s->backend_ctx == &inline_marker) {
    em_memory_note_free(EM_CPU, s->nbytes);
  } else if (em_storage_is_pinned(s)) {
    em_memory_note_free(EM_CPU, s->nbytes);
    ((em_pinned_head *)s->backend_ctx)->release(s);
  } else {
    em_device_backend(s->device_id)->storage_free(s);
  }
  free(s);
}
