/*
 * shape.c: views. Each function computes new sizes, strides and offset over the same storage;
 * none copies data (reshape copies only when no view can express the result).
 */
#include "../autograd/record.h"
#include "../internal.h"

em_tensor *em_as_strided(const em_tensor *t, int ndim, const int64_t *sizes,
                         const int64_t *strides, int64_t offset) {
  EM_NOT_NULL(NULL, t);
  if (em_check_shape("as_strided", ndim, sizes) != 0) return NULL;
  if (ndim > 0 && strides == NULL) return em_error_null("as_strided: expected strides, got NULL");
  /* The view must stay inside the storage. */
  int64_t lo = offset, hi = offset, esize = (int64_t)em_dtypes[t->dtype_id].size;
  bool empty = false, overflow = false;
  for (int i = 0; i < ndim; i++) {
    if (sizes[i] == 0) empty = true;
    /* Overflow-checked: sizes and strides come straight from the caller. */
    int64_t span;
    overflow |= __builtin_mul_overflow(sizes[i] > 0 ? sizes[i] - 1 : 0, strides[i], &span);
    overflow |= __builtin_add_overflow(span > 0 ? hi : lo, span, span > 0 ? &hi : &lo);
  }
  if (!empty && (overflow || lo < 0 || hi >= (int64_t)t->storage->nbytes / esize))
    return em_error_null("as_strided: view reaches outside its storage of %lld elements",
                         (long long)((int64_t)t->storage->nbytes / esize));
  if (em_ag_should_record(1, &t))
    return em_error_null("as_strided: not differentiable; detach() the tensor first");
  return em_tensor_view_of(t, ndim, sizes, strides, offset);
}

/* Infers one -1 size; checks the element count. */
static int infer_sizes(const char *fn, const em_tensor *t, int ndim, const int64_t *in,
                       int64_t *out) {
  if (ndim < 0 || ndim > EM_MAX_DIMS)
    return em_error("%s: expected at most %d dimensions, got %d", fn, EM_MAX_DIMS, ndim);
  if (ndim > 0 && in == NULL) return em_error("%s: expected sizes, got NULL", fn);
  int infer = -1;
  int64_t known = 1, numel = em_numel(t);
  for (int i = 0; i < ndim; i++) {
    out[i] = in[i];
    if (in[i] == -1) {
      if (infer >= 0) return em_error("%s: only one dimension can be -1", fn);
      infer = i;
    } else if (in[i] < 0) {
      return em_error("%s: invalid size %lld in dimension %d", fn, (long long)in[i], i);
    } else if (__builtin_mul_overflow(known, in[i], &known)) {
      goto mismatch; /* more elements than any tensor holds */
    }
  }
  if (infer >= 0) {
    if (known == 0 || numel % known != 0) goto mismatch;
    out[infer] = numel / known;
  } else if (known != numel) {
    goto mismatch;
  }
  return 0;
mismatch: {
  char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF];
  return em_error("%s: shape %s is invalid for a tensor of shape %s (%lld elements)", fn,
                  em_shape_str(a, sizeof a, ndim, in), em_shape_str(b, sizeof b, t->ndim, t->sizes),
                  (long long)numel);
}
}

/* Strides for viewing t with new sizes without a copy, if possible (PyTorch's computeStride):
 * walk the old dims in contiguous chunks and split each chunk into new dims. */
static bool view_strides(const em_tensor *t, int ndim, const int64_t *sizes, int64_t *strides) {
  if (em_numel(t) == 0 || t->ndim == 0) {
    em_contiguous_strides(ndim, sizes, strides);
    return true;
  }
  int view_d = ndim - 1;
  int64_t chunk_base_stride = t->strides[t->ndim - 1];
  int64_t tensor_numel = 1, view_numel = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    tensor_numel *= t->sizes[d];
    if (d == 0 || (t->sizes[d - 1] != 1 && t->strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || sizes[view_d] == 1)) {
        strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= sizes[view_d];
        view_d--;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk_base_stride = t->strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

em_tensor *em_view(const em_tensor *t, int ndim, const int64_t *sizes) {
  EM_NOT_NULL(NULL, t);
  int64_t s[EM_MAX_DIMS], st[EM_MAX_DIMS];
  if (infer_sizes("view", t, ndim, sizes, s) != 0) return NULL;
  if (!view_strides(t, ndim, s, st))
    return em_error_null("view: the tensor's strides are incompatible with the new shape; use "
                         "reshape, or contiguous first");
  return em_ag_view(t, em_tensor_view_of(t, ndim, s, st, t->offset), EM_VIEW_RESHAPE, 0, NULL);
}

em_tensor *em_reshape(const em_tensor *t, int ndim, const int64_t *sizes) {
  EM_NOT_NULL(NULL, t);
  int64_t s[EM_MAX_DIMS], st[EM_MAX_DIMS];
  if (infer_sizes("reshape", t, ndim, sizes, s) != 0) return NULL;
  if (view_strides(t, ndim, s, st))
    return em_ag_view(t, em_tensor_view_of(t, ndim, s, st, t->offset), EM_VIEW_RESHAPE, 0, NULL);
  em_tensor *c = em_contiguous(t);
  if (c == NULL) return NULL;
  em_tensor *v = em_view(c, ndim, s);
  em_release(c);
  return v;
}

em_tensor *em_slice(const em_tensor *t, int dim, int64_t start, int64_t end, int64_t step) {
  EM_NOT_NULL(NULL, t);
  int d;
  if (t->ndim == 0) return em_error_null("slice: cannot slice a 0-d tensor");
  if (em_wrap_dim("slice", dim, t->ndim, &d) != 0) return NULL;
  if (step <= 0) return em_error_null("slice: expected a step > 0, got %lld", (long long)step);
  int64_t n = t->sizes[d];
  if (start < 0) start += n;
  if (end < 0) end += n;
  if (start < 0) start = 0;
  if (end > n) end = n;
  if (start > n) start = n;
  int64_t len = end > start ? (end - start + step - 1) / step : 0;
  int64_t sizes[EM_MAX_DIMS], strides[EM_MAX_DIMS];
  memcpy(sizes, t->sizes, sizeof sizes);
  memcpy(strides, t->strides, sizeof strides);
  sizes[d] = len;
  strides[d] *= step;
  int64_t params[4] = {d, start, end, step};
  return em_ag_view(t, em_tensor_view_of(t, t->ndim, sizes, strides, t->offset + start * t->strides[d]),
                    EM_VIEW_SLICE, 4, params);
}

em_tensor *em_narrow(const em_tensor *t, int dim, int64_t start, int64_t length) {
  EM_NOT_NULL(NULL, t);
  int d;
  if (t->ndim == 0) return em_error_null("narrow: cannot narrow a 0-d tensor");
  if (em_wrap_dim("narrow", dim, t->ndim, &d) != 0) return NULL;
  int64_t n = t->sizes[d];
  if (start < 0) start += n;
  if (start < 0 || length < 0 || start > n || start + length > n)
    return em_error_null("narrow: range [%lld, %lld) is out of bounds for dimension %d of size "
                         "%lld", (long long)start, (long long)(start + length), dim, (long long)n);
  int64_t sizes[EM_MAX_DIMS];
  memcpy(sizes, t->sizes, sizeof sizes);
  sizes[d] = length;
  int64_t params[3] = {d, start, length};
  return em_ag_view(t, em_tensor_view_of(t, t->ndim, sizes, t->strides, t->offset + start * t->strides[d]),
                    EM_VIEW_NARROW, 3, params);
}

em_tensor *em_select(const em_tensor *t, int dim, int64_t index) {
  EM_NOT_NULL(NULL, t);
  int d;
  if (t->ndim == 0) return em_error_null("select: cannot index a 0-d tensor");
  if (em_wrap_dim("select", dim, t->ndim, &d) != 0) return NULL;
  int64_t n = t->sizes[d];
  if (index < -n || index >= n)
    return em_error_null("select: index %lld is out of range for dimension %d of size %lld",
                         (long long)index, dim, (long long)n);
  if (index < 0) index += n;
  int64_t sizes[EM_MAX_DIMS], strides[EM_MAX_DIMS];
  int k = 0;
  for (int i = 0; i < t->ndim; i++) {
    if (i == d) continue;
    sizes[k] = t->sizes[i];
    strides[k++] = t->strides[i];
  }
  int64_t params[2] = {d, index};
  return em_ag_view(t, em_tensor_view_of(t, k, sizes, strides, t->offset + index * t->strides[d]),
                    EM_VIEW_SELECT, 2, params);
}

em_tensor *em_transpose(const em_tensor *t, int dim0, int dim1) {
  EM_NOT_NULL(NULL, t);
  int a, b;
  if (em_wrap_dim("transpose", dim0, t->ndim, &a) || em_wrap_dim("transpose", dim1, t->ndim, &b))
    return NULL;
  int64_t sizes[EM_MAX_DIMS], strides[EM_MAX_DIMS];
  memcpy(sizes, t->sizes, sizeof sizes);
  memcpy(strides, t->strides, sizeof strides);
  if (t->ndim > 0) {
    sizes[a] = t->sizes[b], sizes[b] = t->sizes[a];
    strides[a] = t->strides[b], strides[b] = t->strides[a];
  }
  int64_t perm[EM_MAX_DIMS];
  for (int i = 0; i < t->ndim; i++) perm[i] = i == a ? b : i == b ? a : i;
  return em_ag_view(t, em_tensor_view_of(t, t->ndim, sizes, strides, t->offset), EM_VIEW_PERMUTE,
                    t->ndim, perm);
}

em_tensor *em_t(const em_tensor *t) {
  EM_NOT_NULL(NULL, t);
  if (t->ndim > 2)
    return em_error_null("t: expected a tensor with at most 2 dimensions, got %d", t->ndim);
  if (t->ndim < 2)
    return em_ag_view(t, em_tensor_view_of(t, t->ndim, t->sizes, t->strides, t->offset),
                      EM_VIEW_RESHAPE, 0, NULL);
  return em_transpose(t, 0, 1);
}

em_tensor *em_permute(const em_tensor *t, int ndim, const int *dims) {
  EM_NOT_NULL(NULL, t);
  if (ndim != t->ndim)
    return em_error_null("permute: expected %d dimensions, got %d", t->ndim, ndim);
  if (ndim > 0 && dims == NULL) return em_error_null("permute: expected dims, got NULL");
  int64_t sizes[EM_MAX_DIMS], strides[EM_MAX_DIMS];
  bool seen[EM_MAX_DIMS] = {false};
  for (int i = 0; i < ndim; i++) {
    int d;
    if (em_wrap_dim("permute", dims[i], ndim, &d) != 0) return NULL;
    if (seen[d]) return em_error_null("permute: dimension %d is repeated", dims[i]);
    seen[d] = true;
    sizes[i] = t->sizes[d];
    strides[i] = t->strides[d];
  }
  int64_t perm[EM_MAX_DIMS];
  for (int i = 0; i < ndim; i++) perm[i] = dims[i] < 0 ? dims[i] + ndim : dims[i];
  return em_ag_view(t, em_tensor_view_of(t, ndim, sizes, strides, t->offset), EM_VIEW_PERMUTE,
                    ndim, perm);
}

em_tensor *em_expand(const em_tensor *t, int ndim, const int64_t *sizes) {
  EM_NOT_NULL(NULL, t);
  if (ndim < t->ndim || ndim > EM_MAX_DIMS)
    return em_error_null("expand: expected at least %d and at most %d sizes, got %d", t->ndim,
                         EM_MAX_DIMS, ndim);
  if (ndim > 0 && sizes == NULL) return em_error_null("expand: expected sizes, got NULL");
  int64_t s[EM_MAX_DIMS];
  for (int i = 0; i < ndim; i++) {
    int j = t->ndim - ndim + i;
    s[i] = sizes[i] == -1 && j >= 0 ? t->sizes[j] : sizes[i];
    if (s[i] < 0) return em_error_null("expand: invalid size %lld", (long long)sizes[i]);
  }
  em_tensor *v = em_ag_view(t, em_broadcast_to("expand", t, ndim, s), EM_VIEW_EXPAND, 0, NULL);
  return v;
}

em_tensor *em_squeeze(const em_tensor *t, int dim) {
  EM_NOT_NULL(NULL, t);
  int d;
  if (em_wrap_dim("squeeze", dim, t->ndim, &d) != 0) return NULL;
  if (t->ndim == 0 || t->sizes[d] != 1)
    return em_ag_view(t, em_tensor_view_of(t, t->ndim, t->sizes, t->strides, t->offset),
                      EM_VIEW_RESHAPE, 0, NULL);
  return em_select(t, d, 0);
}

em_tensor *em_squeeze_all(const em_tensor *t) {
  EM_NOT_NULL(NULL, t);
  int64_t sizes[EM_MAX_DIMS], strides[EM_MAX_DIMS];
  int k = 0;
  for (int i = 0; i < t->ndim; i++) {
    if (t->sizes[i] == 1) continue;
    sizes[k] = t->sizes[i];
    strides[k++] = t->strides[i];
  }
  return em_ag_view(t, em_tensor_view_of(t, k, sizes, strides, t->offset), EM_VIEW_RESHAPE, 0, NULL);
}

em_tensor *em_unsqueeze(const em_tensor *t, int dim) {
  EM_NOT_NULL(NULL, t);
  int d;
  if (t->ndim >= EM_MAX_DIMS)
    return em_error_null("unsqueeze: a tensor has at most %d dimensions", EM_MAX_DIMS);
  if (em_wrap_dim("unsqueeze", dim, t->ndim + 1, &d) != 0) return NULL;
  int64_t sizes[EM_MAX_DIMS], strides[EM_MAX_DIMS];
  for (int i = 0, k = 0; i <= t->ndim; i++) {
    if (i == d) {
      sizes[i] = 1;
      strides[i] = d < t->ndim ? t->strides[d] * t->sizes[d] : 1;
    } else {
      sizes[i] = t->sizes[k];
      strides[i] = t->strides[k++];
    }
  }
  return em_ag_view(t, em_tensor_view_of(t, t->ndim + 1, sizes, strides, t->offset),
                    EM_VIEW_RESHAPE, 0, NULL);
}

em_tensor *em_unfold(const em_tensor *t, int dim, int64_t size, int64_t step) {
  EM_NOT_NULL(NULL, t);
  int d;
  if (t->ndim >= EM_MAX_DIMS)
    return em_error_null("unfold: a tensor has at most %d dimensions", EM_MAX_DIMS);
  if (em_wrap_dim("unfold", dim, t->ndim, &d) != 0) return NULL;
  int64_t n = t->ndim ? t->sizes[d] : 1;
  if (size < 0 || size > n)
    return em_error_null("unfold: size %lld is larger than dimension %d (%lld)", (long long)size,
                         dim, (long long)n);
  if (step <= 0) return em_error_null("unfold: expected a step > 0, got %lld", (long long)step);
  if (t->ndim == 0) { /* a scalar is one window of `size` (0 or 1) elements, as in PyTorch */
    if (em_ag_should_record(1, &t))
      return em_error_null("unfold: not differentiable for 0-d tensors");
    int64_t one = 1;
    return em_tensor_view_of(t, 1, &size, &one, t->offset);
  }
  int64_t sizes[EM_MAX_DIMS], strides[EM_MAX_DIMS];
  memcpy(sizes, t->sizes, sizeof sizes);
  memcpy(strides, t->strides, sizeof strides);
  int nd = t->ndim ? t->ndim : 1;
  if (t->ndim == 0) strides[0] = 1;
  sizes[d] = (n - size) / step + 1;
  strides[d] = (t->ndim ? t->strides[d] : 1) * step;
  sizes[nd] = size;
  strides[nd] = t->ndim ? t->strides[d] : 1;
  int64_t params[3] = {d, size, step};
  if (t->ndim == 0 && em_ag_should_record(1, &t))
    return em_error_null("unfold: not differentiable for 0-d tensors");
  return em_ag_view(t, em_tensor_view_of(t, nd + 1, sizes, strides, t->offset), EM_VIEW_UNFOLD, 3,
                    params);
}

em_tensor *em_flatten(const em_tensor *t, int start_dim, int end_dim) {
  EM_NOT_NULL(NULL, t);
  int s, e;
  if (t->ndim == 0) {
    int64_t one = 1;
    return em_reshape(t, 1, &one);
  }
  if (em_wrap_dim("flatten", start_dim, t->ndim, &s) || em_wrap_dim("flatten", end_dim, t->ndim, &e))
    return NULL;
  if (s > e) return em_error_null("flatten: start_dim %d comes after end_dim %d", start_dim, end_dim);
  int64_t sizes[EM_MAX_DIMS];
  int k = 0;
  for (int i = 0; i < s; i++) sizes[k++] = t->sizes[i];
  int64_t prod = 1;
  for (int i = s; i <= e; i++) prod *= t->sizes[i];
  sizes[k++] = prod;
  for (int i = e + 1; i < t->ndim; i++) sizes[k++] = t->sizes[i];
  return em_reshape(t, k, sizes);
}
