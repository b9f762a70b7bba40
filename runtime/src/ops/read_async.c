/*
 * read_async.c: asynchronous reads of a few bytes, em_read_start / em_read_finish (ember.h).
 *
 * GradScaler learns whether a step's gradients held an inf or NaN from a one-element flag on
 * the device. A plain read (em_item) records a copy after everything recorded so far, submits
 * and waits for all of it: the host stops recording the next step until the device has run
 * the current one, and the two never overlap. Here the copy is recorded when the flag is final
 * (right after the step that used it) and the host collects the bytes later, usually once the
 * device has long finished: em_read_finish(wait = 0) then returns them without any wait.
 *
 * Devices without the read_start slot (the CPU, whose ops have run when they return) read
 * synchronously at start.
 */
#include <stdlib.h>
#include <string.h>

#include "../backend.h"

enum { READ_MAX = 256 };

struct em_read {
  const em_backend *be;
  void *handle;          /* the backend's, NULL once done */
  size_t nbytes;
  bool done;
  unsigned char data[READ_MAX];
};

em_read *em_read_start(const em_tensor *t) {
  const char *fn = "read_start";
  if (t == NULL) return em_error_null("%s: expected a tensor, got NULL", fn);
  size_t nbytes = (size_t)em_numel(t) * em_dtypes[t->dtype_id].size;
  if (!em_is_contiguous(t) || nbytes > READ_MAX)
    return em_error_null("%s: expected a contiguous tensor of at most %d bytes, got %s%zu bytes",
                         fn, READ_MAX, em_is_contiguous(t) ? "" : "a strided one of ", nbytes);
  em_read *r = calloc(1, sizeof *r);
  if (r == NULL) {
    em_error_kind_set(EM_ERR_OOM, "out of memory on cpu: %s", fn);
    return NULL;
  }
  r->be = em_device_backend(t->device_id);
  r->nbytes = nbytes;
  size_t offset = (size_t)t->offset * em_dtypes[t->dtype_id].size;
  if (nbytes == 0) {
    r->done = true;
  } else if (r->be->read_start) {
    r->handle = r->be->read_start(t->storage, offset, nbytes);
    if (r->handle == NULL) {
      free(r);
      return NULL;
    }
  } else {
    if (r->be->read(t->storage, offset, r->data, nbytes) != 0) {
      free(r);
      return NULL;
    }
    r->done = true;
  }
  return r;
}

int em_read_finish(em_read *r, void *dst, int wait) {
  if (r == NULL) return em_error("read_finish: expected a read, got NULL");
  if (!r->done) {
    int rc = r->be->read_finish(r->handle, r->data, r->nbytes, wait);
    if (rc == 0) return 0;
    r->handle = NULL; /* freed by the backend, done or failed */
    if (rc < 0) {
      free(r);
      return -1;
    }
  }
  memcpy(dst, r->data, r->nbytes);
  free(r);
  return 1;
}

void em_read_free(em_read *r) {
  if (r == NULL) return;
  if (r->handle) r->be->read_free(r->handle);
  free(r);
}
