/*
 * block_dtype.c: how generic ops see block (quantized) dtypes, whose element is one block of
 * weights (DESIGN.md decision 13). Copies, index_select, cat and device moves of a block
 * tensor run the device's uint8 kernels over a byte view with one more dimension, the bytes of
 * each block: no kernel has to know a block's size. em_view_dtype reinterprets the bytes of a
 * last dimension as another dtype (PyTorch's Tensor.view(dtype)), which is how blocks read
 * from a file become a block tensor and how a checkpoint stores them.
 */
#include "../autograd/record.h"
#include "../internal.h"

int em_block_bytes_view(em_tensor *v, const em_tensor *t) {
  int64_t bs = (int64_t)em_dtypes[t->dtype_id].size;
  if (t->ndim + 1 > EM_MAX_DIMS)
    return em_error("copy_: a %s tensor of %d dimensions has no byte view (at most %d)",
                    em_dtype_name((em_dtype)t->dtype_id), t->ndim, EM_MAX_DIMS - 1);
  em_header_copy(v, t);
  v->grad_meta = NULL;
  v->flags = 0;
  v->dtype_id = EM_UINT8;
  for (int d = 0; d < t->ndim; d++) v->strides[d] = t->strides[d] * bs;
  v->sizes[t->ndim] = bs;
  v->strides[t->ndim] = 1;
  v->ndim = t->ndim + 1;
  v->offset = t->offset * bs;
  return 0;
}

em_tensor *em_block_from_bytes(const em_tensor *bytes, em_dtype dtype) {
  int64_t bs = (int64_t)em_dtypes[dtype].size;
  int n = bytes->ndim - 1;
  if (n < 0 || bytes->sizes[n] != bs || bytes->strides[n] != 1 || bytes->offset % bs != 0)
    return em_error_null("view: expected a byte view of %s blocks", em_dtype_name(dtype));
  int64_t strides[EM_MAX_DIMS];
  for (int d = 0; d < n; d++) {
    if (bytes->sizes[d] > 1 && bytes->strides[d] % bs != 0)
      return em_error_null("view: expected a byte view of %s blocks", em_dtype_name(dtype));
    strides[d] = bytes->strides[d] / bs;
  }
  em_tensor *r = em_tensor_view_of(bytes, n, bytes->sizes, strides, bytes->offset / bs);
  if (r) r->dtype_id = dtype;
  return r;
}

em_tensor *em_view_dtype(const em_tensor *t, em_dtype dtype) {
  const char *fn = "view";
  EM_NOT_NULL(NULL, t);
  if (em_check_dtype(fn, dtype) != 0) return NULL;
  if (em_ag_should_record(1, &t))
    return em_error_null("%s: a dtype view is not differentiable; detach() the tensor first", fn);
  int64_t from = (int64_t)em_dtypes[t->dtype_id].size, to = (int64_t)em_dtypes[dtype].size;
  if (from == to) {
    em_tensor *r = em_tensor_view_of(t, t->ndim, t->sizes, t->strides, t->offset);
    if (r) r->dtype_id = dtype;
    return r;
  }
  if (t->ndim == 0)
    return em_error_null("%s: a 0-d %s tensor cannot be viewed as %s (element sizes %lld and "
                         "%lld bytes differ)", fn, em_dtype_name((em_dtype)t->dtype_id),
                         em_dtype_name(dtype), (long long)from, (long long)to);
  int last = t->ndim - 1;
  int64_t bytes = t->sizes[last] * from;
  if ((t->sizes[last] > 1 && t->strides[last] != 1) || bytes % to != 0 ||
      (t->offset * from) % to != 0)
    return em_error_null("%s: viewing %s as %s needs a last dimension with stride 1 whose %lld "
                         "bytes (and offset) are a multiple of %lld", fn,
                         em_dtype_name((em_dtype)t->dtype_id), em_dtype_name(dtype),
                         (long long)bytes, (long long)to);
  int64_t sizes[EM_MAX_DIMS], strides[EM_MAX_DIMS];
  for (int d = 0; d < last; d++) {
    if (t->sizes[d] > 1 && (t->strides[d] * from) % to != 0)
      return em_error_null("%s: viewing %s as %s needs every stride of dimension %d in whole "
                           "elements of %s", fn, em_dtype_name((em_dtype)t->dtype_id),
                           em_dtype_name(dtype), d + 1, em_dtype_name(dtype));
    sizes[d] = t->sizes[d];
    strides[d] = t->strides[d] * from / to;
  }
  sizes[last] = bytes / to;
  strides[last] = 1;
  em_tensor *r = em_tensor_view_of(t, t->ndim, sizes, strides, t->offset * from / to);
  if (r) r->dtype_id = dtype;
  return r;
}
