/*
 * tensor.c: the tensor header (a view over a storage), its lifetime, geometry helpers shared by
 * every op definition, and the creation functions.
 */
#include <math.h>
#include <stdlib.h>

#include "autograd/autograd.h"
#include "backend.h"
#include "memory/memory_debug.h"

int64_t em_shape_numel(int ndim, const int64_t *sizes) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= sizes[i];
  return n;
}

int64_t em_numel(const em_tensor *t) {
  EM_NOT_NULL(-1, t);
  return em_shape_numel(t->ndim, t->sizes);
}

void em_contiguous_strides(int ndim, const int64_t *sizes, int64_t *strides) {
  int64_t s = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    strides[i] = s;
    s *= sizes[i] > 1 ? sizes[i] : 1;
  }
}

int em_is_contiguous(const em_tensor *t) {
  EM_NOT_NULL(-1, t);
  int64_t expected = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    if (t->sizes[i] == 0) return 1;
    if (t->sizes[i] != 1 && t->strides[i] != expected) return 0;
    expected *= t->sizes[i];
  }
  return 1;
}

int em_check_shape(const char *fn, int ndim, const int64_t *sizes) {
  if (ndim < 0 || ndim > EM_MAX_DIMS)
    return em_error("%s: expected at most %d dimensions, got %d", fn, EM_MAX_DIMS, ndim);
  if (ndim > 0 && sizes == NULL) return em_error("%s: expected sizes, got NULL", fn);
  for (int i = 0; i < ndim; i++) {
    if (sizes[i] < 0) {
      /* The whole shape, not a dimension number: C counts from 0 and Lua from 1. */
      char buf[EM_SHAPE_BUF];
      return em_error("%s: expected sizes >= 0, got %s", fn,
                      em_shape_str(buf, sizeof buf, ndim, sizes));
    }
  }
  /* the count, the byte count and the strides must fit (layout_check.c) */
  return em_shape_fits(ndim, sizes) ? 0 : em_shape_error(fn, ndim, sizes);
}

int em_wrap_dim(const char *fn, int dim, int ndim, int *out) {
  int n = ndim > 0 ? ndim : 1; /* a scalar accepts dims 0 and -1, as in PyTorch */
  if (dim < -n || dim >= n)
    return em_error("%s: dimension %d out of range for a %d-d tensor", fn, dim, ndim);
  *out = dim < 0 ? dim + n : dim;
  return 0;
}

static void init_header(em_tensor *t, int ndim, const int64_t *sizes, em_dtype dtype,
                        int device) {
  /* Only the first ndim sizes and strides are meaningful; the rest stay unset (no memset:
   * this is on every op's path). */
  t->offset = 0;
  t->flags = 0;
  t->reserved = 0;
  t->grad_meta = NULL;
  t->ndim = ndim;
  t->dtype_id = dtype;
  t->device_id = device;
  t->refcount = 1;
  if (ndim > 0) memcpy(t->sizes, sizes, (size_t)ndim * sizeof *sizes);
  em_contiguous_strides(ndim, t->sizes, t->strides);
}

em_tensor *em_tensor_header(int ndim, const int64_t *sizes, em_dtype dtype, int device) {
  em_tensor *t = malloc(sizeof *t);
  if (t == NULL) {
    em_error_kind_set(EM_ERR_OOM, "out of memory on cpu: tensor header");
    return NULL;
  }
  init_header(t, ndim, sizes, dtype, device);
  t->storage = NULL;
  return t;
}

em_tensor *em_tensor_view_of(const em_tensor *t, int ndim, const int64_t *sizes,
                             const int64_t *strides, int64_t offset) {
  em_tensor *v = em_tensor_header(ndim, sizes, (em_dtype)t->dtype_id, t->device_id);
  if (v == NULL) return NULL;
  if (ndim > 0) memcpy(v->strides, strides, (size_t)ndim * sizeof *strides);
  v->offset = offset;
  v->storage = t->storage;
  em_storage_retain(t->storage);
  return v;
}

em_tensor *em_retain(em_tensor *t) {
  if (t) __atomic_add_fetch(&t->refcount, 1, __ATOMIC_RELAXED);
  return t;
}

void em_release(em_tensor *t) {
  if (t == NULL) return;
  /* A count of 1 is ours alone: nobody else can add a reference concurrently, so the locked
   * decrement is needed only when the tensor is shared. */
  if (__atomic_load_n(&t->refcount, __ATOMIC_ACQUIRE) != 1 &&
      __atomic_sub_fetch(&t->refcount, 1, __ATOMIC_ACQ_REL) != 0)
    return;
  if (t->grad_meta) em_grad_meta_free(t->grad_meta);
  if (t->reserved & EM_HEADER_IN_BLOCK) { /* the block goes with the storage */
    em_storage_release(t->storage);
    return;
  }
  em_storage_release(t->storage);
  free(t);
}

void *em_data_ptr(const em_tensor *t) {
  EM_NOT_NULL(NULL, t);
  if (t->device_id != EM_CPU)
    return em_error_null("data_ptr: expected a cpu tensor, got one on %s",
                         em_device_name(t->device_id));
  return (char *)t->storage->data + t->offset * (int64_t)em_dtypes[t->dtype_id].size;
}

int64_t em_storage_version(const em_tensor *t) {
  EM_NOT_NULL(-1, t);
  return __atomic_load_n(&t->storage->version, __ATOMIC_RELAXED); /* em_bump_version */
}

int em_same_storage(const em_tensor *a, const em_tensor *b) {
  EM_NOT_NULL(-1, a);
  EM_NOT_NULL(-1, b);
  return a->storage == b->storage;
}

int em_check_same_device(const char *fn, int n, const em_tensor *const *ts) {
  int device = -1, first = -1;
  for (int i = 0; i < n; i++) {
    if (ts[i] == NULL) continue;
    if (device < 0) {
      device = ts[i]->device_id;
      first = i;
    } else if (ts[i]->device_id != device) {
      return em_error("%s: expected all tensors on %s, got %s for argument %d", fn,
                      em_device_name(device), em_device_name(ts[i]->device_id), i + 1);
    }
  }
  EM_UNUSED(first);
  return 0;
}

int em_broadcast_shapes(const char *fn, int na, const int64_t *a, int nb, const int64_t *b,
                        int *nout, int64_t *out) {
  /* Built in a local array: out may alias a or b. */
  int64_t result[EM_MAX_DIMS];
  int n = na > nb ? na : nb;
  for (int i = 0; i < n; i++) {
    int ia = na - n + i, ib = nb - n + i;
    int64_t sa = ia >= 0 ? a[ia] : 1, sb = ib >= 0 ? b[ib] : 1;
    if (sa != sb && sa != 1 && sb != 1) {
      char ba[EM_SHAPE_BUF], bb[EM_SHAPE_BUF];
      return em_error("%s: shapes %s and %s cannot broadcast", fn,
                      em_shape_str(ba, sizeof ba, na, a), em_shape_str(bb, sizeof bb, nb, b));
    }
    result[i] = sa == 1 ? sb : sa;
  }
  if (!em_view_shape_fits(n, result)) return em_view_shape_error(fn, n, result);
  memcpy(out, result, sizeof(int64_t) * (size_t)n);
  *nout = n;
  return 0;
}

em_tensor *em_broadcast_to(const char *fn, const em_tensor *t, int ndim, const int64_t *sizes) {
  if (t->ndim > ndim) goto fail;
  if (!em_view_shape_fits(ndim, sizes)) return em_view_shape_error(fn, ndim, sizes), NULL;
  int64_t strides[EM_MAX_DIMS];
  for (int i = 0; i < ndim; i++) {
    int j = t->ndim - ndim + i;
    if (j < 0) {
      strides[i] = 0;
    } else if (t->sizes[j] == sizes[i]) {
      strides[i] = t->strides[j];
    } else if (t->sizes[j] == 1) {
      strides[i] = 0;
    } else {
      goto fail;
    }
  }
  return em_tensor_view_of(t, ndim, sizes, strides, t->offset);
fail: {
  char ba[EM_SHAPE_BUF], bb[EM_SHAPE_BUF];
  return em_error_null("%s: shape %s cannot broadcast to %s", fn,
                       em_shape_str(ba, sizeof ba, t->ndim, t->sizes),
                       em_shape_str(bb, sizeof bb, ndim, sizes));
}
}

/* ---- creation ------------------------------------------------------------------------------ */

static em_tensor *alloc_tensor(const char *fn, int ndim, const int64_t *sizes, em_dtype dtype,
                               int device) {
  if (em_check_shape(fn, ndim, sizes) || em_check_dtype(fn, dtype) ||
      em_check_device(fn, device))
    return NULL;
  return em_empty_unchecked(ndim, sizes, dtype, device);
}

em_tensor *em_empty_unchecked(int ndim, const int64_t *sizes, em_dtype dtype, int device) {
  size_t nbytes = (size_t)em_shape_numel(ndim, sizes) * em_dtypes[dtype].size;
  if (device == EM_CPU) {
    em_tensor *small = em_small_tensor_block(nbytes);
    if (small != NULL) {
      em_storage *s = small->storage;
      init_header(small, ndim, sizes, dtype, device);
      small->storage = s;
      small->reserved = EM_HEADER_IN_BLOCK;
      em_history_note_new(small);
      return small;
    }
  }
  em_tensor *t = em_tensor_header(ndim, sizes, dtype, device);
  if (t == NULL) return NULL;
  t->storage = em_storage_new(device, nbytes);
  if (t->storage == NULL) {
    free(t);
    return NULL;
  }
  em_history_note_new(t);
  return t;
}

em_tensor *em_empty(int ndim, const int64_t *sizes, em_dtype dtype, int device) {
  return alloc_tensor("empty", ndim, sizes, dtype, device);
}

em_tensor *em_empty_pinned(int ndim, const int64_t *sizes, em_dtype dtype, int device) {
  if (em_check_shape("pin_memory", ndim, sizes) || em_check_dtype("pin_memory", dtype) ||
      em_check_device("pin_memory", device))
    return NULL;
  size_t nbytes = (size_t)em_shape_numel(ndim, sizes) * em_dtypes[dtype].size;
  em_tensor *t = em_tensor_header(ndim, sizes, dtype, EM_CPU);
  if (t == NULL) return NULL;
  t->storage = em_pinned_storage_new(device, nbytes);
  if (t->storage == NULL) {
    free(t);
    return NULL;
  }
  em_history_note_new(t);
  return t;
}

int em_pinned_device(const em_tensor *t) {
  EM_NOT_NULL(-1, t);
  const em_storage *s = t->storage;
  if (!em_storage_is_pinned(s)) return -1;
  return ((const em_pinned_head *)s->backend_ctx)->device;
}

/* full under the name of the function the caller called, for its error messages. */
static em_tensor *full_named(const char *fn, int ndim, const int64_t *sizes, double value,
                             em_dtype dtype, int device) {
  if (em_check_dtype(fn, dtype) != 0 || em_check_fill_value(fn, dtype, value) != 0) return NULL;
  em_tensor *t = alloc_tensor(fn, ndim, sizes, dtype, device);
  if (t && em_numel(t) > 0 && em_device_backend(device)->fill(t, value) != 0) {
    em_release(t);
    return NULL;
  }
  return t;
}

em_tensor *em_full(int ndim, const int64_t *sizes, double value, em_dtype dtype, int device) {
  return full_named("full", ndim, sizes, value, dtype, device);
}

em_tensor *em_zeros(int ndim, const int64_t *sizes, em_dtype dtype, int device) {
  return full_named("zeros", ndim, sizes, 0.0, dtype, device);
}

em_tensor *em_ones(int ndim, const int64_t *sizes, em_dtype dtype, int device) {
  return full_named("ones", ndim, sizes, 1.0, dtype, device);
}

em_tensor *em_scalar_tensor(double v, em_dtype dtype, int device, int wrapped) {
  em_tensor *t = em_full(0, NULL, v, dtype, device);
  if (t && wrapped) t->flags |= EM_FLAG_WRAPPED_NUMBER;
  return t;
}

em_tensor *em_from_buffer(const void *data, em_dtype src_dtype, int ndim, const int64_t *sizes,
                          em_dtype dtype, int device) {
  if (em_check_dtype("from_buffer", src_dtype) != 0) return NULL;
  em_tensor *t = alloc_tensor("from_buffer", ndim, sizes, dtype, device);
  if (t == NULL) return NULL;
  int64_t n = em_numel(t);
  if (n == 0) return t;
  if (data == NULL) {
    em_release(t);
    return em_error_null("from_buffer: expected data for %lld elements, got NULL", (long long)n);
  }
  /* Wrap the caller's memory as a borrowed CPU tensor and let copy_ cast and upload. */
  em_storage borrowed = {1, EM_CPU, (void *)data, (size_t)n * em_dtypes[src_dtype].size, 0,
                         NULL};
  em_tensor src;
  em_header_copy(&src, t);
  src.dtype_id = src_dtype;
  src.device_id = EM_CPU;
  src.storage = &borrowed;
  src.grad_meta = NULL;
  if (em_copy_(t, &src) != 0) {
    em_release(t);
    return NULL;
  }
  return t;
}

/* Integer dtypes count and round as PyTorch does: start, end and step are truncated toward
 * zero first (its accumulate type is int64), so arange(0.5, 5.2, 1.5) over int64 is 0 .. 4 and a
 * step below 1 is a zero step. The count of int64 ranges comes from the truncated bounds; that
 * of the narrower integer types from the given ones, which PyTorch 1.13 also does. */
static double trunc_int(double v) { return isfinite(v) ? trunc(v) : v; }

em_tensor *em_arange(double start, double end, double step, em_dtype dtype, int device) {
  if (em_check_dtype("arange", dtype) != 0 || em_check_dense_dtype("arange", dtype) != 0) return NULL;
  if (dtype == EM_BOOL) return em_error_null("arange: not defined for bool");
  double count_start = start, count_end = end, count_step = step;
  if (!em_dtypes[dtype].is_float) {
    if (isfinite(step) && step != 0 && trunc(step) == 0)
      return em_error_null("arange: the step %g truncates to 0 for %s (as in PyTorch)", step,
                           em_dtypes[dtype].name);
    start = trunc_int(start), end = trunc_int(end), step = trunc_int(step);
    if (dtype == EM_INT64) count_start = start, count_end = end, count_step = step;
  }
  if (step == 0 || !isfinite(step) || !isfinite(start) || !isfinite(end))
    return em_error_null("arange: expected finite start, end and a nonzero step, got %g, %g, %g",
                         start, end, step);
  if ((end - start) / step < 0)
    return em_error_null("arange: the step %g goes away from end %g (start %g)", step, end,
                         start);
  double count = ceil((count_end - count_start) / count_step);
  if (count < 0) count = 0;
  if (count > 1e15) return em_error_null("arange: %g elements is too many", count);
  int64_t n = (int64_t)count;
  em_tensor *t = alloc_tensor("arange", 1, &n, dtype, device);
  if (t == NULL) return NULL;
  const em_backend *be = em_device_backend(device);
  if (be->arange == NULL || be->arange(t, start, step) != 0) {
    if (be->arange == NULL)
      em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "arange: not implemented on %s", be->name);
    em_release(t);
    return NULL;
  }
  return t;
}

em_tensor *em_linspace(double start, double end, int64_t steps, em_dtype dtype, int device) {
  if (steps < 0) return em_error_null("linspace: expected steps >= 0, got %lld", (long long)steps);
  if (em_check_dtype("linspace", dtype) != 0 || em_check_dense_dtype("linspace", dtype) != 0)
    return NULL;
  if (!em_dtypes[dtype].is_float && dtype != EM_BOOL) { /* PyTorch casts the ends first */
    start = trunc_int(start);
    end = trunc_int(end);
  }
  em_tensor *t = alloc_tensor("linspace", 1, &steps, dtype, device);
  if (t == NULL) return NULL;
  if (steps == 1) { /* the one point is start, as in PyTorch and NumPy */
    if (em_fill_(t, start) != 0) {
      em_release(t);
      return NULL;
    }
    return t;
  }
  const em_backend *be = em_device_backend(device);
  if (be->linspace == NULL || be->linspace(t, start, end) != 0) {
    if (be->linspace == NULL)
      em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "linspace: not implemented on %s", be->name);
    em_release(t);
    return NULL;
  }
  return t;
}

em_tensor *em_eye(int64_t n, int64_t m, em_dtype dtype, int device) {
  if (m < 0) m = n; /* eye(n): square */
  if (n < 0) return em_error_null("eye: expected n >= 0, got %lld", (long long)n);
  int64_t sizes[2] = {n, m};
  em_tensor *t = full_named("eye", 2, sizes, 0.0, dtype, device);
  if (t == NULL || n == 0 || m == 0) return t;
  /* The diagonal is a strided view: fill it with ones. */
  int64_t len = n < m ? n : m, stride = m + 1;
  em_tensor *diag = em_as_strided(t, 1, &len, &stride, 0);
  int rc = diag ? em_fill_(diag, 1.0) : -1;
  em_release(diag);
  if (rc != 0) {
    em_release(t);
    return NULL;
  }
  return t;
}
