/*
 * blob.c: em_from_blob, a CPU tensor over memory the caller owns, without a copy.
 *
 * The tensor's storage points at the caller's buffer and carries the caller's deleter. Views
 * share the storage as they share any other, so the buffer lives as long as the last view of
 * it; the storage's last release (storage.c) calls em_blob_release, which runs the deleter
 * once. The buffer is not Ember's memory: it counts in no allocator statistic or limit.
 *
 * Ownership passes at the call, success or not: a failing em_from_blob runs the deleter
 * before it returns NULL, so a caller never has to ask whether it still owns the buffer (the
 * same rule as em_function_apply's ctx).
 */
#include <stdlib.h>

#include "internal.h"

typedef struct blob_storage {
  em_storage s;                       /* first: storage.c frees the blob through it */
  void (*deleter)(void *data, void *ctx);
  void *ctx;
} blob_storage;

char em_blob_tag; /* em_storage.backend_ctx of a blob storage */

void em_blob_release(em_storage *s) {
  blob_storage *b = (blob_storage *)s;
  if (b->deleter) b->deleter(s->data, b->ctx);
  free(b);
}

/* The bytes from data that the geometry reaches, or -1 with an error. */
static int64_t blob_extent(int ndim, const int64_t *sizes, const int64_t *strides,
                           size_t esize) {
  int64_t hi = 0;
  for (int i = 0; i < ndim; i++) {
    if (sizes[i] == 0) return 0;
    if (strides[i] < 0)
      return em_error("from_blob: expected strides >= 0, got %lld for dimension %d",
                      (long long)strides[i], i);
  }
  for (int i = 0; i < ndim; i++) {
    int64_t span;
    if (__builtin_mul_overflow(sizes[i] - 1, strides[i], &span) ||
        __builtin_add_overflow(hi, span, &hi))
      return em_error("from_blob: the strides reach beyond int64 elements");
  }
  int64_t bytes;
  if (__builtin_mul_overflow(hi + 1, (int64_t)esize, &bytes))
    return em_error("from_blob: the strides reach beyond int64 bytes");
  return bytes;
}

static em_tensor *wrap(void *data, em_dtype dtype, int ndim, const int64_t *sizes,
                       const int64_t *strides, void (*deleter)(void *, void *), void *ctx) {
  if (ndim > 0 && sizes == NULL) return em_error_null("from_blob: expected sizes, got NULL");
  if (em_check_dtype("from_blob", dtype) != 0 || em_check_shape("from_blob", ndim, sizes) != 0)
    return NULL;
  int64_t own[EM_MAX_DIMS];
  if (strides == NULL) {
    em_contiguous_strides(ndim, sizes, own);
    strides = own;
  }
  int64_t nbytes = blob_extent(ndim, sizes, strides, em_dtypes[dtype].size);
  if (nbytes < 0) return NULL;
  if (data == NULL && nbytes > 0)
    return em_error_null("from_blob: expected data for %lld bytes, got NULL", (long long)nbytes);
  em_tensor *t = em_tensor_header(ndim, sizes, dtype, EM_CPU);
  if (t == NULL) return NULL;
  if (ndim > 0) memcpy(t->strides, strides, (size_t)ndim * sizeof *strides);
  blob_storage *b = malloc(sizeof *b);
  if (b == NULL) {
    free(t);
    em_error_kind_set(EM_ERR_OOM, "out of memory on cpu: from_blob's storage");
    return NULL;
  }
  b->s = (em_storage){.refcount = 1, .device_id = EM_CPU, .data = data,
                      .nbytes = (size_t)nbytes, .backend_ctx = &em_blob_tag};
  b->deleter = deleter;
  b->ctx = ctx;
  t->storage = &b->s;
  return t;
}

em_tensor *em_from_blob(void *data, em_dtype dtype, int ndim, const int64_t *sizes,
                        const int64_t *strides, void (*deleter)(void *data, void *ctx),
                        void *ctx) {
  em_tensor *t = wrap(data, dtype, ndim, sizes, strides, deleter, ctx);
  if (t == NULL && deleter != NULL) deleter(data, ctx);
  return t;
}
