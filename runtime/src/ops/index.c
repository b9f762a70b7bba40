/*
 * index.c: definitions of the indexing ops: index_select, gather, scatter / scatter_add,
 * index_add / index_copy / index_fill, masked_select and nonzero.
 *
 * Every definition validates shapes and dtypes, casts index tensors to int64, checks every
 * index against the size it addresses, narrows the operands to exactly the shape the kernel
 * walks, and then calls one slot of the device's table. Out-of-place forms are a clone
 * followed by the in-place form.
 *
 * Where the index is checked: on the CPU, and on a device without check_index, on the host
 * before the kernel runs, so a kernel never sees a bad index and an in-place op either fails
 * before writing anything or succeeds. A device with check_index (Vulkan) checks on the
 * device instead, and a bad index raises at its next synchronization (item, a copy to the
 * CPU, synchronize): reading the index here would make the host wait for the device's queue
 * on every index op. Its kernels skip a bad index, so nothing outside the tensors is touched,
 * but an in-place op has then written what its good indices address.
 *
 * Indices are strict: negative values are errors, as in PyTorch's gather and scatter (Ember
 * does not wrap them for index_select either; one rule is easier to remember).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "../autocast.h"
#include "../autograd/record.h"
#include "../backend.h"
#include "../nn.h"
#include "elementwise.h"

/* ---- shared helpers ------------------------------------------------------------------------ */

static bool is_integer_dtype(em_dtype d) { return !em_dtypes[d].is_float && d != EM_BOOL; }

/* A 1-D header of size 1 viewing a 0-d tensor, so the kernels always have a dimension to walk.
 * The header borrows t's storage. */
static const em_tensor *as_1d(em_tensor *header, const em_tensor *t) {
  if (t->ndim > 0) return t;
  em_header_copy(header, t);
  header->grad_meta = NULL;
  header->ndim = 1;
  header->sizes[0] = 1;
  header->strides[0] = 1;
  return header;
}

/* The index tensor as int64 on x's device (a new reference), or NULL with an error. */
static em_tensor *index_int64(const char *fn, const em_tensor *x, const em_tensor *index) {
  if (index == NULL) return em_error_null("%s: expected an index tensor, got NULL", fn);
  if (index->device_id != x->device_id)
    return em_error_null("%s: expected the index on %s like the input, got it on %s", fn,
                         em_device_name(x->device_id), em_device_name(index->device_id));
  if (!is_integer_dtype((em_dtype)index->dtype_id))
    return em_error_null("%s: expected an integer index tensor, got %s", fn,
                         em_dtype_name((em_dtype)index->dtype_id));
  if (index->dtype_id == EM_INT64) return em_retain((em_tensor *)index);
  em_tensor *r = em_to_dtype(index, EM_INT64);
  if (r == NULL) em_error_prefix(fn);
  return r;
}

void em_index_message(char *buf, size_t n, const char *fn, em_index_wording w, int dim,
                      int64_t index, int64_t size) {
  if (w == EM_INDEX_ROWS)
    snprintf(buf, n, "%s: index %lld is out of range for a weight of %lld rows", fn,
             (long long)index, (long long)size);
  else
    snprintf(buf, n, "%s: index %lld is out of bounds for dimension %d with size %lld", fn,
             (long long)index, dim, (long long)size);
}

/* Checks that every index lies in [0, size): queued on a device with check_index (the head
 * of this file says why), else read on the host: on the CPU in place, elsewhere through one
 * copy. */
static int check_bounds(const char *fn, const em_tensor *index, int dim, int64_t size) {
  if (em_numel(index) == 0) return 0;
  const em_backend *be = em_device_backend(index->device_id);
  if (be->check_index) {
    int rc = be->check_index(fn, EM_INDEX_DIM, dim, index, size);
    if (rc <= 0) return rc;
  }
  em_tensor *host = em_to_device(index, EM_CPU);
  em_tensor *c = host ? em_contiguous(host) : NULL;
  em_release(host);
  if (c == NULL) {
    em_error_prefix(fn);
    return -1;
  }
  const int64_t *p = em_data_ptr(c);
  int64_t n = em_numel(c), bad = 0;
  bool found = false;
  for (int64_t i = 0; i < n; i++) {
    if (p[i] < 0 || p[i] >= size) {
      bad = p[i];
      found = true;
      break;
    }
  }
  em_release(c);
  if (!found) return 0;
  char msg[256];
  em_index_message(msg, sizeof msg, fn, EM_INDEX_DIM, dim, bad, size);
  return em_error("%s", msg);
}

/* In-place targets must not be expanded: two positions would share one element. */
static int check_writable(const char *fn, const em_tensor *x) {
  return em_check_writable(fn, x); /* overlapping windows too (layout_check.c) */
}

/* A view of t with the given sizes in every dimension (each no larger than t's), on the stack,
 * borrowing t's storage. */
static void narrow_to(em_tensor *v, const em_tensor *t, const int64_t *sizes) {
  em_header_copy(v, t);
  v->grad_meta = NULL;
  for (int d = 0; d < t->ndim; d++) v->sizes[d] = sizes[d];
}

/* A new contiguous copy of t in dtype, made by the device's copy kernel: an internal step,
 * never recorded by autograd (the op records itself as a whole). */
static em_tensor *raw_copy(const char *fn, const em_tensor *t, em_dtype dtype) {
  em_tensor *r = em_empty(t->ndim, t->sizes, dtype, t->device_id);
  if (r && em_numel(r) > 0 && em_device_backend(t->device_id)->copy(r, t) != 0) {
    em_release(r);
    r = NULL;
  }
  if (r == NULL) em_error_prefix(fn);
  return r;
}

/* An operand that is written into x in place: cast to x's dtype, and copied when it shares x's
 * storage (otherwise earlier writes would change what later reads see). `arith` marks an
 * accumulation, which refuses a float source into an integer target, like add_. */
static em_tensor *source_for(const char *fn, const em_tensor *x, const em_tensor *src,
                             bool arith) {
  if (arith && !em_can_cast((em_dtype)src->dtype_id, (em_dtype)x->dtype_id))
    return em_error_null("%s: result type %s cannot be stored in place into a %s tensor", fn,
                         em_dtype_name((em_dtype)src->dtype_id),
                         em_dtype_name((em_dtype)x->dtype_id));
  if (src->dtype_id != x->dtype_id || em_same_storage(x, src))
    return raw_copy(fn, src, (em_dtype)x->dtype_id);
  return em_retain((em_tensor *)src);
}

/* An index that x's in-place write could overwrite (an int64 x viewing the same storage) is
 * copied first: the kernel must see the indices that were checked. */
static int protect_index(const char *fn, const em_tensor *x, em_tensor **index) {
  if (!em_same_storage(x, *index)) return 0;
  em_tensor *c = raw_copy(fn, *index, EM_INT64);
  em_release(*index);
  *index = c;
  return c ? 0 : -1;
}

/* ---- index_select -------------------------------------------------------------------------- */

/* checked: the caller has checked the indices (embedding, whose report names itself). */
static em_tensor *index_select(const em_tensor *x, int dim, const em_tensor *index,
                               bool checked);

/* Quantized blocks are picked as their bytes: the rows (or blocks) of a byte view with one more
 * dimension (block_dtype.c), which every device's index_select takes. Blocks never require
 * grad, so there is nothing to record. */
static em_tensor *index_select_blocks(const em_tensor *x, int d, const em_tensor *index,
                                      bool checked) {
  em_tensor x8;
  if (em_block_bytes_view(&x8, x) != 0) return NULL;
  em_tensor *r8 = index_select(&x8, d, index, checked);
  em_tensor *r = r8 ? em_block_from_bytes(r8, (em_dtype)x->dtype_id) : NULL;
  em_release(r8);
  return r;
}

static em_tensor *index_select(const em_tensor *x, int dim, const em_tensor *index,
                               bool checked) {
  const char *fn = "index_select";
  if (x == NULL) return em_error_null("%s: expected a tensor, got NULL", fn);
  int d;
  if (em_wrap_dim(fn, dim, x->ndim, &d) != 0) return NULL;
  if (em_dtype_is_block((em_dtype)x->dtype_id)) {
    if (x->ndim == 0)
      return em_error_null("%s: expected a quantized tensor with dimensions, got a 0-d one", fn);
    return index_select_blocks(x, d, index, checked);
  }
  if (index != NULL && index->ndim > 1)
    return em_error_null("%s: expected a 0-d or 1-D index tensor, got %d-D", fn, index->ndim);
  em_tensor *idx = index_int64(fn, x, index);
  if (idx == NULL) return NULL;
  em_tensor *ci = em_contiguous(idx);
  em_release(idx);
  if (ci == NULL) return NULL;
  int64_t n = em_numel(ci);
  em_tensor *out = NULL;
  em_tensor xh;
  const em_tensor *x1 = as_1d(&xh, x);
  if (x->ndim == 0 && n != 1) {
    em_error("%s: a 0-d input takes exactly one index, got %lld", fn, (long long)n);
    goto done;
  }
  if (!checked && check_bounds(fn, ci, d, x1->sizes[d]) != 0) goto done;
  int64_t sizes[EM_MAX_DIMS];
  memcpy(sizes, x1->sizes, sizeof sizes);
  sizes[d] = n;
  out = em_empty(x->ndim, sizes, (em_dtype)x->dtype_id, x->device_id);
  if (out != NULL && (n == 0 || em_numel(out) == 0)) {
    /* nothing to pick, but still part of the graph: the gradient is zeros */
    EM_AG_RECORD(out, 1, &x, em_ag_record_index_select(out, x, d, ci));
    goto done;
  }
  if (out == NULL) goto done;
  const em_backend *be = em_device_backend(x->device_id);
  em_tensor oh;
  const em_tensor *o1 = as_1d(&oh, out);
  if (be->index_select == NULL) {
    em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: not implemented on %s", fn, be->name);
  } else if (be->index_select((em_tensor *)o1, x1, d, ci) == 0) {
    EM_AG_RECORD(out, 1, &x, em_ag_record_index_select(out, x, d, ci));
    goto done;
  }
  em_release(out);
  out = NULL;
done:
  em_release(ci);
  return out;
}

em_tensor *em_index_select(const em_tensor *x, int dim, const em_tensor *index) {
  return index_select(x, dim, index, false);
}

em_tensor *em_index_select_checked(const em_tensor *x, int dim, const em_tensor *index) {
  return index_select(x, dim, index, true);
}

/* ---- gather -------------------------------------------------------------------------------- */

/* index.size(k) <= t.size(k) for every k except `skip` (-1 for none). */
static int check_fits(const char *fn, const em_tensor *index, const em_tensor *t,
                      const char *what, int skip) {
  for (int k = 0; k < index->ndim; k++) {
    if (k == skip || index->sizes[k] <= t->sizes[k]) continue;
    char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF];
    return em_error("%s: index of shape %s is larger than %s of shape %s in dimension %d", fn,
                    em_shape_str(a, sizeof a, index->ndim, index->sizes), what,
                    em_shape_str(b, sizeof b, t->ndim, t->sizes), k);
  }
  return 0;
}

em_tensor *em_gather(const em_tensor *x, int dim, const em_tensor *index) {
  const char *fn = "gather";
  if (x == NULL) return em_error_null("%s: expected a tensor, got NULL", fn);
  if (em_check_not_block(fn, x) != 0) return NULL;
  int d;
  if (em_wrap_dim(fn, dim, x->ndim, &d) != 0) return NULL;
  em_tensor *idx = index_int64(fn, x, index);
  if (idx == NULL) return NULL;
  em_tensor *out = NULL;
  em_tensor xh, ih, oh, xv;
  const em_tensor *x1 = as_1d(&xh, x), *i1 = as_1d(&ih, idx);
  if (idx->ndim != x->ndim) {
    em_error("%s: expected an index with as many dimensions as the input (%d), got %d", fn,
             x->ndim, idx->ndim);
    goto done;
  }
  if (check_fits(fn, i1, x1, "the input", d) != 0 || check_bounds(fn, idx, d, x1->sizes[d]) != 0)
    goto done;
  out = em_empty(idx->ndim, idx->sizes, (em_dtype)x->dtype_id, x->device_id);
  if (out != NULL && em_numel(out) == 0) { /* still in the graph: the gradient is zeros */
    EM_AG_RECORD(out, 1, &x, em_ag_record_gather(out, x, d, idx));
    goto done;
  }
  if (out == NULL) goto done;
  /* The kernel walks index's shape: x narrowed to it except along dim. */
  int64_t sizes[EM_MAX_DIMS];
  memcpy(sizes, i1->sizes, sizeof sizes);
  sizes[d] = x1->sizes[d];
  narrow_to(&xv, x1, sizes);
  const em_backend *be = em_device_backend(x->device_id);
  if (be->gather == NULL) {
    em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: not implemented on %s", fn, be->name);
  } else if (be->gather((em_tensor *)as_1d(&oh, out), &xv, d, i1) == 0) {
    EM_AG_RECORD(out, 1, &x, em_ag_record_gather(out, x, d, idx));
    goto done;
  }
  em_release(out);
  out = NULL;
done:
  em_release(idx);
  return out;
}

/* ---- scatter, scatter_add ------------------------------------------------------------------ */

static int scatter_inplace(const char *fn, em_tensor *x, int dim, const em_tensor *index,
                           const em_tensor *src, int accumulate) {
  if (x == NULL || src == NULL) return em_error("%s: expected tensors, got NULL", fn);
  if (em_check_not_block(fn, x) != 0 || em_check_not_block(fn, src) != 0) return -1;
  int d;
  if (em_wrap_dim(fn, dim, x->ndim, &d) != 0 || check_writable(fn, x) != 0) return -1;
  const em_tensor *pair[2] = {x, src};
  if (em_check_same_device(fn, 2, pair) != 0) return -1;
  em_tensor *idx = index_int64(fn, x, index);
  if (idx == NULL) return -1;
  int rc = -1;
  em_tensor *s = NULL, *sb = NULL;
  em_tensor xh, ih, sh, xv, sv;
  const em_tensor *x1 = as_1d(&xh, x), *i1 = as_1d(&ih, idx);
  if (idx->ndim != x->ndim) {
    em_error("%s: expected an index with as many dimensions as the input (%d), got %d", fn,
             x->ndim, idx->ndim);
    goto done;
  }
  /* A 0-d source is one value for every position (the scalar form). */
  if (src->ndim == 0 && x->ndim > 0) {
    sb = em_expand(src, idx->ndim, idx->sizes);
    if (sb == NULL) goto done;
    src = sb;
  } else if (src->ndim != x->ndim) {
    em_error("%s: expected a source with as many dimensions as the input (%d), got %d", fn,
             x->ndim, src->ndim);
    goto done;
  }
  if (check_fits(fn, i1, x1, "the input", d) != 0 ||
      check_fits(fn, i1, as_1d(&sh, src), "the source", -1) != 0 ||
      check_bounds(fn, idx, d, x1->sizes[d]) != 0 || protect_index(fn, x, &idx) != 0)
    goto done;
  i1 = as_1d(&ih, idx);
  if (em_numel(idx) == 0) {
    rc = 0;
    goto done;
  }
  s = source_for(fn, x, src, accumulate != 0);
  if (s == NULL) goto done;
  /* The kernel walks index's shape: src narrowed to it, x narrowed to it except along dim. */
  int64_t sizes[EM_MAX_DIMS];
  memcpy(sizes, i1->sizes, sizeof sizes);
  narrow_to(&sv, as_1d(&sh, s), sizes);
  sizes[d] = x1->sizes[d];
  narrow_to(&xv, x1, sizes);
  const em_backend *be = em_device_backend(x->device_id);
  if (be->scatter == NULL) {
    em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: not implemented on %s", fn, be->name);
    goto done;
  }
  rc = be->scatter(&xv, d, i1, &sv, accumulate);
  if (rc == 0) em_bump_version(x);
done:
  em_release(idx);
  em_release(s);
  em_release(sb);
  return rc;
}

int em_scatter_(em_tensor *x, int dim, const em_tensor *index, const em_tensor *src) {
  const em_tensor *ins[2] = {x, src};
  EM_AG_INPLACE("scatter_", x, 2, ins, em_scatter(self_clone, dim, index, src));
  return scatter_inplace("scatter_", x, dim, index, src, 0);
}

int em_scatter_add_(em_tensor *x, int dim, const em_tensor *index, const em_tensor *src) {
  const em_tensor *ins[2] = {x, src};
  EM_AG_INPLACE("scatter_add_", x, 2, ins, em_scatter_add(self_clone, dim, index, src));
  return scatter_inplace("scatter_add_", x, dim, index, src, 1);
}

/* clone(x), then the in-place form under the out-of-place name. */
static em_tensor *scatter_new(const char *fn, const em_tensor *x, int dim,
                              const em_tensor *index, const em_tensor *src, int accumulate) {
  if (x == NULL) return em_error_null("%s: expected a tensor, got NULL", fn);
  em_tensor *out = raw_copy(fn, x, (em_dtype)x->dtype_id);
  if (out && scatter_inplace(fn, out, dim, index, src, accumulate) != 0) {
    em_release(out);
    return NULL;
  }
  const em_tensor *ins[2] = {x, src};
  int d = dim < 0 ? dim + (x->ndim > 0 ? x->ndim : 1) : dim;
  EM_AG_RECORD(out, 2, ins, em_ag_record_scatter(out, x, d, index, src, accumulate));
  return out;
}

em_tensor *em_scatter(const em_tensor *x, int dim, const em_tensor *index, const em_tensor *src) {
  return scatter_new("scatter", x, dim, index, src, 0);
}

em_tensor *em_scatter_add(const em_tensor *x, int dim, const em_tensor *index,
                          const em_tensor *src) {
  EM_AUTOCAST("scatter_add", em_scatter_add(ac_[0], dim, ac_[1], ac_[2]), x, index, src);
  return scatter_new("scatter_add", x, dim, index, src, 1);
}

/* ---- index_add, index_copy, index_fill ----------------------------------------------------- */

/* x.select(dim, index[i]) = src.select(dim, i), or += alpha * src.select(dim, i). src has x's
 * shape except along dim, where it has one entry per index. */
static int index_put(const char *fn, em_tensor *x, int dim, const em_tensor *index,
                     const em_tensor *src, double alpha, int accumulate) {
  if (x == NULL || src == NULL) return em_error("%s: expected tensors, got NULL", fn);
  if (em_check_not_block(fn, x) != 0 || em_check_not_block(fn, src) != 0) return -1;
  int d;
  if (em_wrap_dim(fn, dim, x->ndim, &d) != 0 || check_writable(fn, x) != 0) return -1;
  const em_tensor *pair[2] = {x, src};
  if (em_check_same_device(fn, 2, pair) != 0) return -1;
  if (index != NULL && index->ndim > 1)
    return em_error("%s: expected a 0-d or 1-D index tensor, got %d-D", fn, index->ndim);
  bool integral_alpha = isfinite(alpha) && alpha == floor(alpha);
  if (accumulate && !em_dtypes[x->dtype_id].is_float && !integral_alpha)
    return em_error("%s: alpha must be an integer for a %s tensor, got %g", fn,
                    em_dtype_name((em_dtype)x->dtype_id), alpha);
  em_tensor *idx = index_int64(fn, x, index), *ci = NULL, *s = NULL;
  if (idx == NULL) return -1;
  int rc = -1;
  em_tensor xh, sh;
  const em_tensor *x1 = as_1d(&xh, x), *s1 = as_1d(&sh, src);
  int64_t n = em_numel(idx);
  if (x->ndim == 0 && n != 1) {
    em_error("%s: a 0-d input takes exactly one index, got %lld", fn, (long long)n);
    goto done;
  }
  bool shape_ok = src->ndim == x->ndim || (x->ndim == 0 && src->ndim == 1);
  for (int k = 0; shape_ok && k < x1->ndim; k++)
    shape_ok = s1->sizes[k] == (k == d ? n : x1->sizes[k]);
  if (!shape_ok) {
    char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF];
    em_error("%s: expected a source of shape %s except %lld in dimension %d (one slice per "
             "index), got %s", fn, em_shape_str(a, sizeof a, x->ndim, x->sizes), (long long)n,
             d, em_shape_str(b, sizeof b, src->ndim, src->sizes));
    goto done;
  }
  if (check_bounds(fn, idx, d, x1->sizes[d]) != 0 || protect_index(fn, x, &idx) != 0) goto done;
  if (em_numel(src) == 0) {
    rc = 0;
    goto done;
  }
  ci = em_contiguous(idx);
  s = ci ? source_for(fn, x, src, accumulate != 0) : NULL;
  if (s == NULL) goto done;
  const em_backend *be = em_device_backend(x->device_id);
  if (be->index_put == NULL) {
    em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: not implemented on %s", fn, be->name);
    goto done;
  }
  em_tensor ch;
  rc = be->index_put((em_tensor *)x1, d, as_1d(&ch, ci), as_1d(&sh, s), alpha, accumulate);
  if (rc == 0) em_bump_version(x);
done:
  em_release(idx);
  em_release(ci);
  em_release(s);
  return rc;
}

int em_index_add_(em_tensor *x, int dim, const em_tensor *index, const em_tensor *src,
                  double alpha) {
  const em_tensor *ins[2] = {x, src};
  EM_AG_INPLACE("index_add_", x, 2, ins, em_index_add(self_clone, dim, index, src, alpha));
  return index_put("index_add_", x, dim, index, src, alpha, 1);
}

int em_index_copy_(em_tensor *x, int dim, const em_tensor *index, const em_tensor *src) {
  const em_tensor *ins[2] = {x, src};
  EM_AG_INPLACE("index_copy_", x, 2, ins, em_index_copy(self_clone, dim, index, src));
  return index_put("index_copy_", x, dim, index, src, 1.0, 0);
}

/* The value, as a 0-d tensor of x's dtype expanded to the source shape index_put expects. */
static int index_fill(const char *fn, em_tensor *x, int dim, const em_tensor *index,
                      double value) {
  if (x == NULL) return em_error("%s: expected a tensor, got NULL", fn);
  int d;
  if (em_wrap_dim(fn, dim, x->ndim, &d) != 0) return -1;
  if (index == NULL) return em_error("%s: expected an index tensor, got NULL", fn);
  if (em_check_fill_value(fn, (em_dtype)x->dtype_id, value) != 0) return -1;
  em_tensor *v = em_scalar_tensor(value, (em_dtype)x->dtype_id, x->device_id, 0);
  if (v == NULL) return -1;
  int64_t sizes[EM_MAX_DIMS];
  memcpy(sizes, x->sizes, sizeof sizes);
  if (x->ndim > 0) sizes[d] = em_numel(index);
  em_tensor *src = em_expand(v, x->ndim, sizes);
  int rc = src ? index_put(fn, x, dim, index, src, 1.0, 0) : -1;
  em_release(src);
  em_release(v);
  return rc;
}

int em_index_fill_(em_tensor *x, int dim, const em_tensor *index, double value) {
  const em_tensor *ins[1] = {x};
  EM_AG_INPLACE("index_fill_", x, 1, ins, em_index_fill(self_clone, dim, index, value));
  return index_fill("index_fill_", x, dim, index, value);
}

em_tensor *em_index_add(const em_tensor *x, int dim, const em_tensor *index, const em_tensor *src,
                        double alpha) {
  const char *fn = "index_add";
  if (x == NULL) return em_error_null("%s: expected a tensor, got NULL", fn);
  em_tensor *out = raw_copy(fn, x, (em_dtype)x->dtype_id);
  if (out && index_put(fn, out, dim, index, src, alpha, 1) != 0) {
    em_release(out);
    return NULL;
  }
  const em_tensor *ins[2] = {x, src};
  int d = dim < 0 ? dim + (x->ndim > 0 ? x->ndim : 1) : dim;
  EM_AG_RECORD(out, 2, ins, em_ag_record_index_put(out, x, d, index, src, alpha, 0));
  return out;
}

em_tensor *em_index_copy(const em_tensor *x, int dim, const em_tensor *index,
                         const em_tensor *src) {
  const char *fn = "index_copy";
  if (x == NULL) return em_error_null("%s: expected a tensor, got NULL", fn);
  EM_AUTOCAST(fn, em_index_copy(ac_[0], dim, ac_[1], ac_[2]), x, index, src);
  em_tensor *out = raw_copy(fn, x, (em_dtype)x->dtype_id);
  if (out && index_put(fn, out, dim, index, src, 1.0, 0) != 0) {
    em_release(out);
    return NULL;
  }
  const em_tensor *ins[2] = {x, src};
  int d = dim < 0 ? dim + (x->ndim > 0 ? x->ndim : 1) : dim;
  EM_AG_RECORD(out, 2, ins, em_ag_record_index_put(out, x, d, index, src, 1.0, 1));
  return out;
}

em_tensor *em_index_fill(const em_tensor *x, int dim, const em_tensor *index, double value) {
  const char *fn = "index_fill";
  if (x == NULL) return em_error_null("%s: expected a tensor, got NULL", fn);
  em_tensor *out = raw_copy(fn, x, (em_dtype)x->dtype_id);
  if (out && index_fill(fn, out, dim, index, value) != 0) {
    em_release(out);
    return NULL;
  }
  int d = dim < 0 ? dim + (x->ndim > 0 ? x->ndim : 1) : dim;
  EM_AG_RECORD(out, 1, &x, em_ag_record_index_put(out, x, d, index, NULL, 1.0, 2));
  return out;
}

/* ---- nonzero, masked_select ---------------------------------------------------------------- */

/* Nonzero elements of x: x cast to bool (NaN is nonzero), summed. */
static int count_nonzero(const char *fn, const em_tensor *x, int64_t *count) {
  em_tensor *b = raw_copy(fn, x, EM_BOOL);
  em_tensor *sum = b ? em_reduce(EM_SUM, b, 0, NULL, 0) : NULL;
  int rc = sum ? em_item_int64(sum, count) : -1;
  em_release(b);
  em_release(sum);
  if (rc != 0) em_error_prefix(fn);
  return rc;
}

em_tensor *em_nonzero(const em_tensor *x) {
  const char *fn = "nonzero";
  if (x == NULL) return em_error_null("%s: expected a tensor, got NULL", fn);
  if (em_check_not_block(fn, x) != 0) return NULL;
  int64_t count = 0;
  if (em_numel(x) > 0 && count_nonzero(fn, x, &count) != 0) return NULL;
  int64_t sizes[2] = {count, x->ndim};
  em_tensor *out = em_empty(2, sizes, EM_INT64, x->device_id);
  if (out == NULL || count == 0) return out;
  const em_backend *be = em_device_backend(x->device_id);
  if (be->nonzero == NULL) {
    em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: not implemented on %s", fn, be->name);
    em_release(out);
    return NULL;
  }
  if (be->nonzero(out, x) != 0) {
    em_release(out);
    return NULL;
  }
  return out;
}

/* Broadcast x and mask together, flatten both, and pick x's elements at the mask's nonzero
 * positions: nonzero and index_select do the device work. */
em_tensor *em_masked_select(const em_tensor *x, const em_tensor *mask) {
  const char *fn = "masked_select";
  if (x == NULL || mask == NULL) return em_error_null("%s: expected two tensors, got NULL", fn);
  if (em_check_not_block(fn, x) != 0) return NULL;
  if (mask->dtype_id != EM_BOOL)
    return em_error_null("%s: expected a bool mask, got %s", fn,
                         em_dtype_name((em_dtype)mask->dtype_id));
  const em_tensor *pair[2] = {x, mask};
  if (em_check_same_device(fn, 2, pair) != 0) return NULL;
  int nd;
  int64_t sizes[EM_MAX_DIMS];
  if (em_broadcast_shapes(fn, x->ndim, x->sizes, mask->ndim, mask->sizes, &nd, sizes) != 0)
    return NULL;
  int64_t numel = em_shape_numel(nd, sizes);
  em_tensor *xb = em_expand(x, nd, sizes);
  em_tensor *mb = em_broadcast_to(fn, mask, nd, sizes);
  em_tensor *xf = xb ? em_reshape(xb, 1, &numel) : NULL;
  em_tensor *mf = mb ? em_reshape(mb, 1, &numel) : NULL;
  em_tensor *nz = mf ? em_nonzero(mf) : NULL;
  em_tensor *pos = NULL, *out = NULL;
  if (nz) {
    int64_t count = nz->sizes[0];
    pos = em_view(nz, 1, &count);
  }
  if (pos && xf) out = em_index_select(xf, 0, pos);
  if (out == NULL) em_error_prefix(fn);
  em_release(xb);
  em_release(mb);
  em_release(xf);
  em_release(mf);
  em_release(nz);
  em_release(pos);
  return out;
}
