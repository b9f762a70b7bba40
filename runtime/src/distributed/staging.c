/*
 * staging.c: the pinned host buffers that device tensors are staged through, kept for reuse.
 * Allocating pinned memory is slow (a large host-visible allocation each time), and the device's
 * own pinned cache keeps only 256 MiB of free buffers, so a gigabyte all_reduce would allocate a
 * gigabyte per call. Here the last buffer of each (device, dtype) stays allocated for the next
 * collective, until ember.distributed is finalized.
 *
 * A buffer is reused only by a collective that first copies the device's data into it through
 * the device queue (all_reduce, broadcast's root): those copies are ordered after the copies
 * from the buffer that an earlier collective recorded (the read's barrier), and MPI writes a
 * chunk only after its copy is done, so no write overtakes an earlier read. Other collectives
 * take fresh pinned memory (the device's cache tracks its pending reads).
 */
#include <pthread.h>

#include "../internal.h"
#include "dist.h"

enum { SLOTS = 32 };

static struct {
  em_tensor *buf;   /* flat, pinned; NULL when the slot is empty */
  int device;
  em_dtype dtype;
  int in_use;
} slots[SLOTS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* A free slot of (device, dtype) (empty, or holding a buffer of theirs), else -1. */
static int find_slot(int device, em_dtype dtype) {
  int empty = -1;
  for (int i = 0; i < SLOTS; i++) {
    if (slots[i].buf == NULL) {
      if (empty < 0) empty = i;
    } else if (slots[i].device == device && slots[i].dtype == dtype && !slots[i].in_use) {
      return i;
    }
  }
  return empty;
}

em_tensor *dist_staging_get(int64_t numel, em_dtype dtype, int device, int *slot) {
  *slot = -1;
  pthread_mutex_lock(&lock);
  int i = find_slot(device, dtype);
  em_tensor *view = NULL;
  if (i >= 0) {
    if (slots[i].buf != NULL && em_numel(slots[i].buf) < numel) {
      em_release(slots[i].buf); /* too small: replaced by a larger one */
      slots[i].buf = NULL;
    }
    if (slots[i].buf == NULL) {
      slots[i].buf = em_empty_pinned(1, &numel, dtype, device);
      slots[i].device = device;
      slots[i].dtype = dtype;
    }
    if (slots[i].buf != NULL) {
      view = em_narrow(slots[i].buf, 0, 0, numel);
      if (view != NULL) {
        slots[i].in_use = 1;
        *slot = i;
      }
    }
  }
  pthread_mutex_unlock(&lock);
  return view;
}

void dist_staging_put(int slot) {
  if (slot < 0) return;
  pthread_mutex_lock(&lock);
  slots[slot].in_use = 0;
  pthread_mutex_unlock(&lock);
}

void dist_staging_free_all(void) {
  pthread_mutex_lock(&lock);
  for (int i = 0; i < SLOTS; i++) {
    if (slots[i].buf != NULL && !slots[i].in_use) {
      em_release(slots[i].buf);
      slots[i].buf = NULL;
    }
  }
  pthread_mutex_unlock(&lock);
}
