/*
 * vk_read_async.c: the read_start / read_finish / read_free slots (ops/read_async.c): reads of
 * a few bytes collected without a host wait once the device is done.
 *
 * read_start records the copy into a staging buffer after everything recorded so far, with the
 * barrier that makes it visible to the host, and submits the batch (the device starts on it at
 * once; submitting is not waiting). The staging buffer is held for the read (vk_staging.held)
 * until read_finish: with wait = 0 that asks the fences (em_vk_poll_serial) and returns 0 while
 * the batch runs; with wait = 1 it submits what was recorded since (so the device stays busy)
 * and waits for the read's batch only, counted in host_waits like any wait.
 */
#include <stdlib.h>
#include <string.h>

#include "vk.h"

typedef struct vk_read {
  vk_device *D;
  vk_staging *st;
  uint64_t serial;   /* the batch holding the copy */
} vk_read;

void *em_vk_read_start(const em_storage *s, size_t offset, size_t nbytes) {
  vk_device *D = em_vk_device(s->device_id);
  vk_block *b = s->backend_ctx;
  vk_read *r = calloc(1, sizeof *r);
  if (r == NULL) {
    em_error_kind_set(EM_ERR_OOM, "out of memory on cpu: a read record");
    return NULL;
  }
  pthread_mutex_lock(&D->lock);
  vk_staging *st = em_vk_staging_get(D, nbytes);
  VkCommandBuffer cmd = st ? em_vk_cmd(D) : NULL;
  int rc = -1;
  if (cmd != NULL) {
    em_vk_record_readback(D, cmd, b, offset, st, nbytes);
    r->serial = D->next_serial;
    st->busy_until = r->serial;
    st->held = true;
    rc = em_vk_submit(D);
    if (rc != 0) st->held = false;
  }
  pthread_mutex_unlock(&D->lock);
  if (rc != 0) {
    free(r);
    return NULL;
  }
  r->D = D;
  r->st = st;
  return r;
}

int em_vk_read_finish(void *h, void *dst, size_t nbytes, int wait) {
  vk_read *r = h;
  vk_device *D = r->D;
  pthread_mutex_lock(&D->lock);
  int rc = em_vk_poll_serial(D, r->serial);
  if (rc == 0 && wait) {
    /* the work recorded since keeps the device busy while the host waits */
    rc = em_vk_submit(D) == 0 && em_vk_wait_serial(D, r->serial) == 0 ? 1 : -1;
  }
  if (rc == 1) {
    em_vk_staging_invalidate(D, r->st);
    memcpy(dst, r->st->mapped, nbytes);
  }
  if (rc != 0) r->st->held = false;
  pthread_mutex_unlock(&D->lock);
  if (rc != 0) free(r);
  return rc;
}

void em_vk_read_free(void *h) {
  vk_read *r = h;
  pthread_mutex_lock(&r->D->lock);
  r->st->held = false; /* reusable once its batch completes (busy_until) */
  pthread_mutex_unlock(&r->D->lock);
  free(r);
}
