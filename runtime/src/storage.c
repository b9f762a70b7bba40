/*
 * storage.c: refcounted buffers. A storage lives on one device; its last release hands the
 * memory back to that device's allocator. Refcounts are atomic because data-loader worker
 * threads create and drop tensors too.
 */
#include <stdlib.h>

#include "backend.h"

em_storage *em_storage_new(int device, size_t nbytes) {
  const em_backend *be = em_device_backend(device);
  if (be == NULL) return em_error_null("storage: invalid device %d", device);
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

void em_storage_retain(em_storage *s) { __atomic_add_fetch(&s->refcount, 1, __ATOMIC_RELAXED); }

void em_storage_release(em_storage *s) {
  if (s == NULL) return;
  if (__atomic_sub_fetch(&s->refcount, 1, __ATOMIC_ACQ_REL) != 0) return;
  em_device_backend(s->device_id)->storage_free(s);
  free(s);
}
