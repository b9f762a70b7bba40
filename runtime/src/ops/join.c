/*
 * join.c: ops that join or reorder whole blocks: cat, stack, flip, roll, repeat, tril, triu.
 *
 * None needs a kernel of its own. Each computes the result's shape, allocates it, and fills it
 * with the device's copy kernel between views (narrowed, negatively strided or stride-0
 * headers built on the stack), so every device that can copy runs them, and the copy kernel's
 * casting and threading come for free.
 */
#include <stdlib.h>

#include "../autocast.h"
#include "../autograd/record.h"
#include "../backend.h"
#include "elementwise.h"

/* A stack header viewing t: same storage, a new geometry. Valid while t lives. */
static void header_of(em_tensor *v, const em_tensor *t) {
  em_header_copy(v, t);
  v->grad_meta = NULL;
  v->flags = 0;
}

/* Copies src into dst (same shape, src maybe broadcast; dtypes may differ) with the device's
 * copy kernel. The destinations are fresh results, so no version needs bumping, and the copies
 * are steps inside one op: autograd records the op as a whole, never these. */
static int block_copy(em_tensor *dst, const em_tensor *src) {
  if (em_numel(dst) == 0) return 0;
  if (em_dtype_is_block((em_dtype)dst->dtype_id) || em_dtype_is_block((em_dtype)src->dtype_id)) {
    em_tensor d8, s8; /* quantized blocks join as their bytes (block_dtype.c) */
    if (dst->dtype_id != src->dtype_id)
      return em_error("cat: expected tensors of one block dtype, got %s and %s",
                      em_dtype_name((em_dtype)dst->dtype_id), em_dtype_name((em_dtype)src->dtype_id));
    if (em_block_bytes_view(&d8, dst) != 0 || em_block_bytes_view(&s8, src) != 0) return -1;
    return em_device_backend(dst->device_id)->copy(&d8, &s8);
  }
  return em_device_backend(dst->device_id)->copy(dst, src);
}

/* Narrows a stack header in place along d. */
static void narrow_header(em_tensor *v, int d, int64_t start, int64_t length) {
  v->offset += start * v->strides[d];
  v->sizes[d] = length;
}

/* ---- cat, stack ---------------------------------------------------------------------------- */

/* PyTorch's legacy rule: a 1-D tensor with no elements joins anything and adds nothing. */
static bool is_skipped(const em_tensor *t) { return t->ndim == 1 && t->sizes[0] == 0; }

em_tensor *em_cat(int n, em_tensor *const *tensors, int dim) {
  const char *fn = "cat";
  if (n <= 0 || tensors == NULL)
    return em_error_null("%s: expected a non-empty list of tensors", fn);
  EM_AUTOCAST_LIST(fn, em_cat(n, ac_, dim), n, tensors);
  const em_tensor *ref = NULL;
  for (int i = 0; i < n; i++) {
    if (tensors[i] == NULL) return em_error_null("%s: tensor %d is NULL", fn, i);
    if (tensors[i]->ndim == 0)
      return em_error_null("%s: a 0-d tensor (number %d in the list) cannot be concatenated; "
                           "use stack, or unsqueeze it", fn, i);
    if (ref == NULL && !is_skipped(tensors[i])) ref = tensors[i];
  }
  if (em_check_same_device(fn, n, (const em_tensor *const *)tensors) != 0) return NULL;
  em_dtype dtype = em_result_type_n(n, (const em_tensor *const *)tensors);
  if (ref == NULL) { /* nothing but legacy empties: the result is one of them */
    int64_t zero = 0;
    return em_empty(1, &zero, dtype, tensors[0]->device_id);
  }
  int d;
  if (em_wrap_dim(fn, dim, ref->ndim, &d) != 0) return NULL;
  int64_t sizes[EM_MAX_DIMS];
  memcpy(sizes, ref->sizes, sizeof sizes);
  sizes[d] = 0;
  for (int i = 0; i < n; i++) {
    const em_tensor *t = tensors[i];
    if (is_skipped(t)) continue;
    bool same = t->ndim == ref->ndim;
    for (int k = 0; same && k < t->ndim; k++) same = k == d || t->sizes[k] == ref->sizes[k];
    if (!same) {
      char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF];
      return em_error_null("%s: expected shapes that match except in dimension %d, got %s and "
                           "%s", fn, d, em_shape_str(a, sizeof a, ref->ndim, ref->sizes),
                           em_shape_str(b, sizeof b, t->ndim, t->sizes));
    }
    if (sizes[d] > INT64_MAX - t->sizes[d]) return em_error_null("%s: result is too large", fn);
    sizes[d] += t->sizes[d];
  }
  em_tensor *out = em_empty(ref->ndim, sizes, dtype, ref->device_id);
  if (out == NULL) return NULL;
  int64_t at = 0;
  for (int i = 0; i < n; i++) {
    const em_tensor *t = tensors[i];
    if (is_skipped(t) || t->sizes[d] == 0) continue;
    em_tensor part;
    header_of(&part, out);
    narrow_header(&part, d, at, t->sizes[d]);
    if (block_copy(&part, t) != 0) {
      em_error_prefix(fn);
      em_release(out);
      return NULL;
    }
    at += t->sizes[d];
  }
  EM_AG_RECORD(out, n, (const em_tensor *const *)tensors, em_ag_record_cat(out, n, tensors, d));
  return out;
}

em_tensor *em_stack(int n, em_tensor *const *tensors, int dim) {
  const char *fn = "stack";
  if (n <= 0 || tensors == NULL)
    return em_error_null("%s: expected a non-empty list of tensors", fn);
  EM_AUTOCAST_LIST(fn, em_stack(n, ac_, dim), n, tensors);
  for (int i = 0; i < n; i++)
    if (tensors[i] == NULL) return em_error_null("%s: tensor %d is NULL", fn, i);
  const em_tensor *ref = tensors[0];
  if (ref->ndim >= EM_MAX_DIMS)
    return em_error_null("%s: the result would have more than %d dimensions", fn, EM_MAX_DIMS);
  int d;
  if (em_wrap_dim(fn, dim, ref->ndim + 1, &d) != 0) return NULL;
  for (int i = 1; i < n; i++) {
    const em_tensor *t = tensors[i];
    if (t->ndim != ref->ndim || memcmp(t->sizes, ref->sizes, sizeof(int64_t) * (size_t)t->ndim)) {
      char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF];
      return em_error_null("%s: expected tensors of one shape, got %s and %s", fn,
                           em_shape_str(a, sizeof a, ref->ndim, ref->sizes),
                           em_shape_str(b, sizeof b, t->ndim, t->sizes));
    }
  }
  /* Unsqueezed views, joined by cat. The header array is small for a usual n. */
  em_tensor **views = calloc((size_t)n, sizeof *views);
  if (views == NULL) {
    em_error_kind_set(EM_ERR_OOM, "%s: out of memory for %d views", fn, n);
    return NULL;
  }
  em_tensor *out = NULL;
  int made = 0;
  for (; made < n; made++) {
    views[made] = em_unsqueeze(tensors[made], d);
    if (views[made] == NULL) break;
  }
  if (made == n) out = em_cat(n, views, d);
  if (out == NULL) em_error_prefix(fn);
  for (int i = 0; i < made; i++) em_release(views[i]);
  free(views);
  return out;
}

/* ---- flip ---------------------------------------------------------------------------------- */

/* Reads dims into a mask of wrapped dimensions; repeats are errors. */
static int dims_mask(const char *fn, int ndims, const int *dims, int ndim, uint32_t *mask) {
  *mask = 0;
  if (ndims < 0 || (ndims > 0 && dims == NULL))
    return em_error("%s: expected a list of dimensions", fn);
  for (int i = 0; i < ndims; i++) {
    int d;
    if (em_wrap_dim(fn, dims[i], ndim, &d) != 0) return -1;
    if (*mask & (1u << d)) return em_error("%s: dimension %d appears more than once", fn, d);
    *mask |= 1u << d;
  }
  return 0;
}

/* A copy of the view that walks each flipped dimension backwards (negative strides). */
em_tensor *em_flip(const em_tensor *x, int ndims, const int *dims) {
  const char *fn = "flip";
  if (x == NULL) return em_error_null("%s: expected a tensor, got NULL", fn);
  uint32_t mask;
  if (dims_mask(fn, ndims, dims, x->ndim, &mask) != 0) return NULL;
  em_tensor v;
  header_of(&v, x);
  for (int d = 0; d < x->ndim; d++) {
    if (!(mask & (1u << d)) || x->sizes[d] == 0) continue;
    v.offset += (x->sizes[d] - 1) * x->strides[d];
    v.strides[d] = -x->strides[d];
  }
  em_tensor *out = em_empty(x->ndim, x->sizes, (em_dtype)x->dtype_id, x->device_id);
  if (out && block_copy(out, &v) != 0) {
    em_error_prefix(fn);
    em_release(out);
    return NULL;
  }
  EM_AG_RECORD(out, 1, &x, em_ag_record_flip(out, x, mask));
  return out;
}

/* ---- roll ---------------------------------------------------------------------------------- */

/* out[(i + s) mod n] = x[i] along each rolled dimension. Rolling k dimensions moves 2^k blocks:
 * along each, the first n - s elements go to [s, n) and the last s to [0, s). */
static em_tensor *roll_dims(const em_tensor *x, const int64_t *shift /* per dim, in [0,n) */) {
  const char *fn = "roll";
  em_tensor *out = em_empty(x->ndim, x->sizes, (em_dtype)x->dtype_id, x->device_id);
  if (out == NULL || em_numel(out) == 0) return out;
  int rolled[EM_MAX_DIMS], k = 0;
  for (int d = 0; d < x->ndim; d++)
    if (shift[d] != 0) rolled[k++] = d;
  for (uint32_t combo = 0; combo < (1u << k); combo++) {
    em_tensor src, dst;
    header_of(&src, x);
    header_of(&dst, out);
    for (int j = 0; j < k; j++) {
      int d = rolled[j];
      int64_t n = x->sizes[d], s = shift[d];
      if (combo & (1u << j)) { /* the tail [n - s, n) wraps around to the front */
        narrow_header(&src, d, n - s, s);
        narrow_header(&dst, d, 0, s);
      } else {
        narrow_header(&src, d, 0, n - s);
        narrow_header(&dst, d, s, n - s);
      }
    }
    if (block_copy(&dst, &src) != 0) {
      em_error_prefix(fn);
      em_release(out);
      return NULL;
    }
  }
  return out;
}

em_tensor *em_roll(const em_tensor *x, int ndims, const int64_t *shifts, const int *dims) {
  const char *fn = "roll";
  if (x == NULL) return em_error_null("%s: expected a tensor, got NULL", fn);
  if (ndims <= 0 || shifts == NULL) return em_error_null("%s: expected at least one shift", fn);
  int64_t shift[EM_MAX_DIMS] = {0};
  if (dims == NULL) {
    /* No dims: roll the flattened tensor, keep the shape. */
    if (ndims != 1)
      return em_error_null("%s: without dims, expected one shift, got %d", fn, ndims);
    int64_t numel = em_numel(x);
    em_tensor *flat = em_reshape(x, 1, &numel);
    if (flat == NULL) return NULL;
    shift[0] = numel ? ((shifts[0] % numel) + numel) % numel : 0;
    em_tensor *r = roll_dims(flat, shift);
    const em_tensor *fin = flat;
    EM_AG_RECORD(r, 1, &fin, em_ag_record_roll(r, flat, shift));
    em_tensor *out = r ? em_view(r, x->ndim, x->sizes) : NULL;
    em_release(flat);
    em_release(r);
    return out;
  }
  /* Shifts on the same dimension add up, as applying them one after another would. */
  for (int i = 0; i < ndims; i++) {
    int d;
    if (em_wrap_dim(fn, dims[i], x->ndim, &d) != 0) return NULL;
    int64_t n = x->ndim > 0 ? x->sizes[d] : 0;   /* a 0-d tensor rolls onto itself */
    if (n == 0) continue;
    shift[d] = (shift[d] + ((shifts[i] % n) + n) % n) % n;
  }
  em_tensor *out = roll_dims(x, shift);
  EM_AG_RECORD(out, 1, &x, em_ag_record_roll(out, x, shift));
  return out;
}

/* ---- repeat -------------------------------------------------------------------------------- */

/* Fills out by expanding x in one copy: out is viewed with an extra dimension before each
 * repeated one, [r0, s0, r1, s1, ...], and x is broadcast (stride 0) along the extras. Returns
 * 1 when that needs more than EM_MAX_DIMS dimensions. */
static int repeat_by_expand(em_tensor *out, const em_tensor *xp, const int64_t *reps) {
  em_tensor dst, src;
  header_of(&dst, out);
  header_of(&src, xp);
  int k = 0;
  for (int d = 0; d < xp->ndim; d++) {
    bool pair = reps[d] > 1 && xp->sizes[d] > 1;
    if (k + (pair ? 2 : 1) > EM_MAX_DIMS) return 1;
    if (pair) {
      dst.sizes[k] = reps[d];
      src.sizes[k] = reps[d];
      src.strides[k++] = 0;
      dst.sizes[k] = src.sizes[k] = xp->sizes[d];
      src.strides[k++] = xp->strides[d];
    } else {
      dst.sizes[k] = src.sizes[k] = xp->sizes[d] * reps[d];
      src.strides[k++] = reps[d] > 1 ? 0 : xp->strides[d];
    }
  }
  dst.ndim = src.ndim = k;
  em_contiguous_strides(k, dst.sizes, dst.strides);
  return block_copy(&dst, &src);
}

/* The general case: copy x into the first block, then double the filled part along each
 * repeated dimension in turn (log2(r) copies per dimension). */
static int repeat_by_doubling(em_tensor *out, const em_tensor *xp) {
  em_tensor dst, src;
  header_of(&dst, out);
  for (int d = 0; d < xp->ndim; d++) dst.sizes[d] = xp->sizes[d];
  if (block_copy(&dst, xp) != 0) return -1;
  for (int d = 0; d < xp->ndim; d++) {
    int64_t total = out->sizes[d];
    for (int64_t filled = xp->sizes[d]; filled < total; filled *= 2) {
      int64_t len = filled < total - filled ? filled : total - filled;
      /* Dimensions before d are complete, those after still hold one block. */
      header_of(&src, out);
      for (int j = d + 1; j < xp->ndim; j++) src.sizes[j] = xp->sizes[j];
      dst = src;
      narrow_header(&src, d, 0, len);
      narrow_header(&dst, d, filled, len);
      if (block_copy(&dst, &src) != 0) return -1;
    }
  }
  return 0;
}

em_tensor *em_repeat(const em_tensor *x, int ndim, const int64_t *repeats) {
  const char *fn = "repeat";
  if (x == NULL) return em_error_null("%s: expected a tensor, got NULL", fn);
  if (ndim < x->ndim || ndim > EM_MAX_DIMS)
    return em_error_null("%s: expected between %d and %d repeats (one per dimension at least), "
                         "got %d", fn, x->ndim, EM_MAX_DIMS, ndim);
  if (ndim > 0 && repeats == NULL) return em_error_null("%s: expected repeats, got NULL", fn);
  /* x with leading size-1 dimensions, so it has one dimension per repeat. */
  em_tensor xp;
  header_of(&xp, x);
  xp.ndim = ndim;
  int lead = ndim - x->ndim;
  for (int d = 0; d < ndim; d++) {
    xp.sizes[d] = d < lead ? 1 : x->sizes[d - lead];
    xp.strides[d] = d < lead ? 0 : x->strides[d - lead];
  }
  int64_t sizes[EM_MAX_DIMS];
  for (int d = 0; d < ndim; d++) {
    if (repeats[d] < 0)
      return em_error_null("%s: expected repeats >= 0, got %lld for dimension %d", fn,
                           (long long)repeats[d], d);
    if (xp.sizes[d] > 0 && repeats[d] > INT64_MAX / xp.sizes[d])
      return em_error_null("%s: the result is too large", fn);
    sizes[d] = xp.sizes[d] * repeats[d];
  }
  em_tensor *out = em_empty(ndim, sizes, (em_dtype)x->dtype_id, x->device_id);
  if (out == NULL || em_numel(out) == 0) {
    if (out == NULL) em_error_prefix(fn);
    /* an empty result stays in the graph (its gradient is zeros): an empty batch trains */
    EM_AG_RECORD(out, 1, &x, em_ag_record_repeat(out, x, ndim, repeats));
    return out;
  }
  int rc = repeat_by_expand(out, &xp, repeats);
  if (rc == 1) rc = repeat_by_doubling(out, &xp);
  if (rc != 0) {
    em_error_prefix(fn);
    em_release(out);
    return NULL;
  }
  EM_AG_RECORD(out, 1, &x, em_ag_record_repeat(out, x, ndim, repeats));
  return out;
}

/* ---- tril, triu ---------------------------------------------------------------------------- */

/* Copies rows [row0, row0 + nrows) x columns [col0, col0 + ncols) of every matrix in x to out;
 * an empty block is a no-op. */
static int copy_block(const em_tensor *x, em_tensor *out, int64_t row0, int64_t nrows,
                      int64_t col0, int64_t ncols) {
  if (nrows <= 0 || ncols <= 0) return 0;
  int r = x->ndim - 2, c = x->ndim - 1;
  em_tensor src, dst;
  header_of(&src, x);
  header_of(&dst, out);
  narrow_header(&src, r, row0, nrows);
  narrow_header(&dst, r, row0, nrows);
  narrow_header(&src, c, col0, ncols);
  narrow_header(&dst, c, col0, ncols);
  return block_copy(&dst, &src);
}

/* Zeros, then the kept part of each matrix row copied over. Rows whose kept part is the whole
 * row are one block, and rows that keep nothing are skipped, so at most min(rows, cols) + 1
 * copies run, each over the whole batch. */
static em_tensor *triangle(const char *fn, const em_tensor *x, int64_t k, bool lower) {
  if (x == NULL) return em_error_null("%s: expected a tensor, got NULL", fn);
  if (em_check_not_block(fn, x) != 0) return NULL;
  if (x->ndim < 2)
    return em_error_null("%s: expected a tensor with at least 2 dimensions, got %d", fn,
                         x->ndim);
  em_tensor *out = em_zeros(x->ndim, x->sizes, (em_dtype)x->dtype_id, x->device_id);
  if (out == NULL || em_numel(out) == 0) { /* empty: still in the graph, gradient zeros */
    EM_AG_RECORD(out, 1, &x, em_ag_record_triangle(out, x, k, lower));
    return out;
  }
  int64_t rows = x->sizes[x->ndim - 2], cols = x->sizes[x->ndim - 1];
  /* Clamp k so that i + k cannot overflow: beyond these bounds nothing changes. */
  if (k > cols) k = cols;
  if (k < -rows) k = -rows;
  /* Row i keeps columns [begin(i), end(i)). */
  int64_t full_lo, full_hi, part_lo, part_hi;   /* row ranges [lo, hi) */
  if (lower) { /* keeps j <= i + k */
    full_lo = cols - 1 - k > 0 ? cols - 1 - k : 0;
    full_hi = rows;
    part_lo = -k > 0 ? -k : 0;
    part_hi = full_lo < rows ? full_lo : rows;
  } else { /* keeps j >= i + k */
    full_lo = 0;
    full_hi = -k + 1 < rows ? -k + 1 : rows;
    if (full_hi < 0) full_hi = 0;
    part_lo = full_hi;
    part_hi = cols - k < rows ? cols - k : rows;
  }
  if (copy_block(x, out, full_lo, full_hi - full_lo, 0, cols) != 0) goto fail;
  for (int64_t i = part_lo; i < part_hi; i++) {
    int64_t col0 = lower ? 0 : i + k, ncols = lower ? i + k + 1 : cols - (i + k);
    if (copy_block(x, out, i, 1, col0, ncols) != 0) goto fail;
  }
  EM_AG_RECORD(out, 1, &x, em_ag_record_triangle(out, x, k, lower));
  return out;
fail:
  em_error_prefix(fn);
  em_release(out);
  return NULL;
}

em_tensor *em_tril(const em_tensor *x, int64_t diagonal) {
  return triangle("tril", x, diagonal, true);
}

em_tensor *em_triu(const em_tensor *x, int64_t diagonal) {
  return triangle("triu", x, diagonal, false);
}
