/*
 * elementwise.c: see elementwise.h. Result types, broadcasting into stack views, in-place
 * checks (including memory overlap), and the run / run-in-place drivers.
 */
#include <math.h>
#include <stdlib.h>

#include "elementwise.h"

static int category(em_dtype d) {
  if (d == EM_BOOL) return 0;
  return em_dtypes[d].is_float ? 2 : 1;
}

em_dtype em_result_type_n(int n, const em_tensor *const *ts) {
  /* The common case first: operands of one dtype give that dtype (unless they are all wrapped
   * floats, which count as float32 below). */
  int first = -1;
  bool same = true, all_wrapped = true;
  for (int i = 0; i < n && same; i++) {
    if (ts[i] == NULL) continue;
    if (first < 0) first = ts[i]->dtype_id;
    else same = ts[i]->dtype_id == first;
    all_wrapped = all_wrapped && em_is_wrapped(ts[i]);
  }
  if (same && first >= 0 && !(all_wrapped && em_dtypes[first].is_float)) return (em_dtype)first;
  /* Promote within each priority class (dimensioned, 0-dim, wrapped number), then let a lower
   * class raise the category only. */
  int have[3] = {0, 0, 0};
  em_dtype cls[3] = {EM_BOOL, EM_BOOL, EM_BOOL};
  for (int i = 0; i < n; i++) {
    const em_tensor *t = ts[i];
    if (t == NULL) continue;
    int p = em_is_wrapped(t) ? 0 : t->ndim > 0 ? 2 : 1;
    em_dtype d = (em_dtype)t->dtype_id;
    /* A floating wrapped number counts as the default dtype (PyTorch): where(c, 1.5, 2.5) is
     * float32, not float64. */
    if (p == 0 && em_dtypes[d].is_float) d = EM_FLOAT32;
    cls[p] = have[p] ? em_promote_types(cls[p], d) : d;
    have[p] = 1;
  }
  em_dtype r = EM_BOOL;
  int any = 0;
  for (int p = 2; p >= 0; p--) {
    if (!have[p]) continue;
    if (!any) {
      r = cls[p];
      any = 1;
    } else if (category(cls[p]) > category(r)) {
      r = p == 0 ? (category(cls[p]) == 2 ? EM_FLOAT32 : EM_INT64) : cls[p];
    }
  }
  return r;
}

bool em_can_cast(em_dtype from, em_dtype to) {
  return category(from) <= category(to);
}

int em_ew_begin(em_ew *ew, const char *fn, int n, const em_tensor *const *ts) {
  ew->fn = fn;
  ew->n = n;
  ew->ndim = 0;
  ew->device_id = -1;
  ew->keep = 0;
  ew->compute = EM_FLOAT32;
  for (int i = 0; i < n; i++) {
    ew->in[i] = ts[i];
    ew->owned[i] = NULL;
    ew->ready[i] = NULL;
  }
  if (em_check_same_device(fn, n, ts) != 0) return -1;
  for (int i = 0; i < n; i++)
    if (em_check_not_block(fn, ts[i]) != 0) return -1;
  for (int i = 0; i < n; i++) {
    if (ts[i] == NULL) continue;
    if (ew->device_id < 0) ew->device_id = ts[i]->device_id;
    /* A copy: em_broadcast_shapes writes its output front to back, which would clobber an
     * input that aliases it ([3] with [2,3] would read back [2]). */
    int64_t sofar[EM_MAX_DIMS];
    memcpy(sofar, ew->sizes, sizeof(int64_t) * (size_t)ew->ndim);
    if (em_broadcast_shapes(fn, ew->ndim, sofar, ts[i]->ndim, ts[i]->sizes, &ew->ndim,
                            ew->sizes) != 0)
      return -1;
  }
  return 0;
}

/* A stride-0 broadcast header on the stack: valid while the source tensor lives. */
static void stack_broadcast(em_tensor *v, const em_tensor *t, int ndim, const int64_t *sizes) {
  em_header_copy(v, t);
  v->ndim = ndim;
  v->grad_meta = NULL;
  v->flags = 0;
  for (int i = 0; i < ndim; i++) {
    int j = t->ndim - ndim + i;
    v->sizes[i] = sizes[i];
    v->strides[i] = (j >= 0 && t->sizes[j] == sizes[i]) ? t->strides[j] : 0;
  }
}

int em_ew_prepare(em_ew *ew) {
  for (int i = 0; i < ew->n; i++) {
    const em_tensor *t = ew->in[i];
    if (t == NULL) continue;
    bool host_scalar = t->storage->device_id != t->device_id; /* an em_stack_scalar on a GPU op */
    if ((ew->keep >> i & 1) && !host_scalar) {
      stack_broadcast(&ew->view[i], t, ew->ndim, ew->sizes);
      ew->ready[i] = &ew->view[i];
      continue;
    }
    bool cell_ok = ew->device_id == EM_CPU ? t->dtype_id != (int32_t)ew->compute
                                           : host_scalar && !(ew->keep >> i & 1) &&
                                                 em_device_backend(ew->device_id)->host_scalars;
    if (t->ndim == 0 && cell_ok) {
      /* Convert a 0-dim operand into a stack cell instead of allocating a cast. */
      em_storage *cs = &ew->cell_storage[i];
      em_tensor cell_tensor, *v = &cell_tensor;
      const char *src = (const char *)t->storage->data + t->offset * (int64_t)em_dtypes[t->dtype_id].size;
      if (ew->compute == EM_INT64) {
        int64_t iv = em_load_as_int64(src, (em_dtype)t->dtype_id);
        memcpy(&ew->cell[i], &iv, sizeof iv);
      } else {
        em_store_from_double(&ew->cell[i], ew->compute, em_load_as_double(src, (em_dtype)t->dtype_id));
      }
      memset(cs, 0, sizeof *cs);
      cs->refcount = 1;
      cs->data = &ew->cell[i];
      cs->nbytes = sizeof ew->cell[i];
      em_header_copy(v, t);
      v->dtype_id = ew->compute;
      v->offset = 0;
      v->storage = cs;
      stack_broadcast(&ew->view[i], v, ew->ndim, ew->sizes);
      ew->ready[i] = &ew->view[i];
      continue;
    }
    if (host_scalar) { /* a device without host_scalars: a device tensor of one element */
      double value = em_load_as_double(t->storage->data, (em_dtype)t->dtype_id);
      em_dtype d = (ew->keep >> i & 1) ? (em_dtype)t->dtype_id : ew->compute;
      ew->owned[i] = em_scalar_tensor(value, d, ew->device_id, 1);
      if (ew->owned[i] == NULL) return -1;
      t = ew->owned[i];
    } else if (t->dtype_id != (int32_t)ew->compute) {
      ew->owned[i] = em_to_dtype(t, ew->compute);
      if (ew->owned[i] == NULL) return -1;
      t = ew->owned[i];
    }
    stack_broadcast(&ew->view[i], t, ew->ndim, ew->sizes);
    ew->ready[i] = &ew->view[i];
  }
  return 0;
}

void em_ew_end(em_ew *ew) {
  for (int i = 0; i < ew->n; i++) {
    em_release(ew->owned[i]);
    ew->owned[i] = NULL;
  }
}

em_tensor *em_ew_output(em_ew *ew, em_dtype out_dtype) {
  return em_empty(ew->ndim, ew->sizes, out_dtype, ew->device_id);
}

/* The element range [lo, hi] (in elements from the storage start) that t spans; false when t
 * has no elements. */
static bool elem_span(const em_tensor *t, int64_t *lo, int64_t *hi) {
  int64_t a = t->offset, b = t->offset;
  for (int d = 0; d < t->ndim; d++) {
    if (t->sizes[d] == 0) return false;
    int64_t ext = (t->sizes[d] - 1) * t->strides[d];
    if (ext < 0) a += ext; else b += ext;
  }
  *lo = a;
  *hi = b;
  return true;
}

/* Non-overlapping and dense: the elements fill their span exactly once. Dims sorted by
 * |stride| must each step over everything inside the previous ones. */
static bool dense(const em_tensor *t) {
  int64_t st[EM_MAX_DIMS], sz[EM_MAX_DIMS];
  int n = 0;
  for (int d = 0; d < t->ndim; d++) {
    if (t->sizes[d] == 1) continue;
    int64_t a = t->strides[d] < 0 ? -t->strides[d] : t->strides[d];
    int k = n++;
    while (k > 0 && st[k - 1] > a) {
      st[k] = st[k - 1];
      sz[k] = sz[k - 1];
      k--;
    }
    st[k] = a;
    sz[k] = t->sizes[d];
  }
  int64_t expect = 1;
  for (int k = 0; k < n; k++) {
    if (st[k] != expect) return false;
    expect *= sz[k];
  }
  return true;
}

/* The same elements in the same order: equal start, dtype, and sizes/strides over the dims
 * that are not 1. */
static bool same_geometry(const em_tensor *a, const em_tensor *b) {
  if (a->offset != b->offset || em_dtypes[a->dtype_id].size != em_dtypes[b->dtype_id].size)
    return false;
  int i = 0, j = 0;
  for (;;) {
    while (i < a->ndim && a->sizes[i] == 1) i++;
    while (j < b->ndim && b->sizes[j] == 1) j++;
    if (i == a->ndim || j == b->ndim) return i == a->ndim && j == b->ndim;
    if (a->sizes[i] != b->sizes[j] || a->strides[i] != b->strides[j]) return false;
    i++;
    j++;
  }
}

/* Writing elementwise into self while reading an input that shares some but not all of its
 * memory (x.add_(x.t()), x.add_(x[1])) would read already-written values. PyTorch rejects the
 * cases it can decide cheaply (both tensors dense); so does this. Interleaved views that do
 * not share elements (x[{{},{1,-1,2}}] and x[{{},{2,-1,2}}]) stay allowed. */
static int check_overlap(em_ew *ew, const em_tensor *self) {
  int64_t slo, shi;
  if (!elem_span(self, &slo, &shi)) return 0;
  size_t ses = em_dtypes[self->dtype_id].size;
  for (int i = 0; i < ew->n; i++) {
    const em_tensor *t = ew->in[i];
    if (t == NULL || t == self || t->storage != self->storage) continue;
    int64_t lo, hi;
    if (!elem_span(t, &lo, &hi) || same_geometry(t, self)) continue;
    size_t es = em_dtypes[t->dtype_id].size;
    bool overlap = lo * (int64_t)es < (shi + 1) * (int64_t)ses &&
                   slo * (int64_t)ses < (hi + 1) * (int64_t)es;
    if (overlap && dense(t) && dense(self))
      return em_error("%s: an input shares memory with the tensor written in place but is not "
                      "the same view of it (partial overlap); clone() the input first", ew->fn);
  }
  return 0;
}

int em_ew_check_inplace(em_ew *ew, const em_tensor *self, em_dtype result) {
  if (self->ndim != ew->ndim || memcmp(self->sizes, ew->sizes, sizeof(int64_t) * (size_t)ew->ndim)) {
    char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF];
    return em_error("%s: the result's shape %s does not match the in-place tensor's shape %s",
                    ew->fn, em_shape_str(a, sizeof a, ew->ndim, ew->sizes),
                    em_shape_str(b, sizeof b, self->ndim, self->sizes));
  }
  if (!em_can_cast(result, (em_dtype)self->dtype_id))
    return em_error("%s: result type %s cannot be stored in place into a %s tensor", ew->fn,
                    em_dtype_name(result), em_dtype_name((em_dtype)self->dtype_id));
  if (em_check_writable(ew->fn, self) != 0) return -1;
  return check_overlap(ew, self);
}

static int run_kernel(em_ew *ew, em_tensor *out, em_ew_kernel k, const void *arg) {
  if (em_numel(out) == 0) return 0;
  return k(ew->fn, em_device_backend(out->device_id), out, ew->ready, arg);
}

em_tensor *em_ew_run(em_ew *ew, em_dtype out_dtype, em_ew_kernel k, const void *arg) {
  em_tensor *out = NULL;
  if (em_ew_prepare(ew) == 0 && (out = em_ew_output(ew, out_dtype)) != NULL &&
      run_kernel(ew, out, k, arg) != 0) {
    em_release(out);
    out = NULL;
  }
  em_ew_end(ew);
  return out;
}

int em_ew_run_inplace(em_ew *ew, em_tensor *self, em_dtype out_dtype, em_ew_kernel k,
                      const void *arg) {
  int rc = em_ew_check_inplace(ew, self, out_dtype);
  if (rc != 0) {
    em_ew_end(ew);
    return rc;
  }
  if (out_dtype == (em_dtype)self->dtype_id && ew->compute == out_dtype) {
    rc = em_ew_prepare(ew);
    if (rc == 0) rc = run_kernel(ew, self, k, arg);
    if (rc == 0) em_bump_version(self);
    em_ew_end(ew);
    return rc;
  }
  /* The result has another dtype: compute it, then cast it in (copy_ bumps the version). */
  em_tensor *tmp = em_ew_run(ew, out_dtype, k, arg);
  rc = tmp ? em_copy_(self, tmp) : -1;
  em_release(tmp);
  return rc;
}

void em_stack_scalar(em_tensor *t, em_storage *s, double *cell, double v, int device) {
  /* Integral values count as integers, others as floats (Lua has one number type). */
  bool integral = isfinite(v) && v == floor(v) && fabs(v) < 9.2e18;
  memset(t, 0, sizeof *t);
  memset(s, 0, sizeof *s);
  t->dtype_id = integral ? EM_INT64 : EM_FLOAT64;
  if (integral) {
    int64_t iv = (int64_t)v;
    memcpy(cell, &iv, sizeof iv);
  } else {
    *cell = v;
  }
  t->device_id = device;
  t->refcount = 1;
  t->flags = EM_FLAG_WRAPPED_NUMBER;
  s->refcount = 1;
  s->device_id = EM_CPU;
  s->data = cell;
  s->nbytes = sizeof *cell;
  t->storage = s;
}

void em_stack_scalar_typed(em_tensor *t, em_storage *s, double *cell, double v, em_dtype dtype,
                           int device) {
  em_stack_scalar(t, s, cell, 0.0, device);
  t->dtype_id = dtype;
  t->flags = 0;
  em_store_from_double(cell, dtype, v);
}
