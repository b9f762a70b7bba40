/*
 * layout_check.c: the checks that keep a tensor's layout well defined, shared by every op that
 * makes a shape or writes in place, and by the file readers.
 *
 * - Shapes: the element count, and the contiguous strides (the product of the sizes other than
 *   0), must fit in int64 with 4 bits of headroom for the byte count; a view (expand,
 *   broadcasting), which allocates nothing, needs only them to fit int64. A zero-size shape such as
 *   [0, 2^62, 2^62] holds no element, but its strides would overflow (undefined behaviour in C),
 *   so it is refused too. One function decides, so creation, expand, broadcasting and the
 *   readers (IDX, NPY, safetensors headers) all refuse the same shapes.
 * - In-place writes: a tensor written in place must not have two positions on one memory
 *   element (an expanded view with stride 0, or overlapping unfold windows). Which position's
 *   value would win depends on the order a kernel visits them, so the CPU and Vulkan would
 *   disagree; the write is refused instead, with the advice to clone first.
 */
#include <stdlib.h>

#include "internal.h"

#define EM_SHAPE_LIMIT (INT64_MAX >> 4)

bool em_shape_fits(int ndim, const int64_t *sizes) {
  int64_t numel = 1, span = 1; /* span: the product of the nonzero sizes (the strides' range) */
  for (int i = 0; i < ndim; i++) {
    if (sizes[i] < 0) return false;
    if (__builtin_mul_overflow(numel, sizes[i], &numel) || numel > EM_SHAPE_LIMIT) return false;
    if (sizes[i] > 0 &&
        (__builtin_mul_overflow(span, sizes[i], &span) || span > EM_SHAPE_LIMIT))
      return false;
  }
  return true;
}

/* A view (expand, broadcasting) allocates nothing: it needs only its element count, and the
 * product of its nonzero sizes, to fit int64 (numel is computed as that product). */
bool em_view_shape_fits(int ndim, const int64_t *sizes) {
  int64_t span = 1;
  for (int i = 0; i < ndim; i++) {
    if (sizes[i] < 0) return false;
    if (sizes[i] > 0 && __builtin_mul_overflow(span, sizes[i], &span)) return false;
  }
  return true;
}

int em_view_shape_error(const char *fn, int ndim, const int64_t *sizes) {
  char b[EM_SHAPE_BUF];
  return em_error("%s: shape is too large (%s: its element count overflows int64)", fn,
                  em_shape_str(b, sizeof b, ndim, sizes));
}

int em_shape_error(const char *fn, int ndim, const int64_t *sizes) {
  char b[EM_SHAPE_BUF];
  return em_error("%s: shape is too large (%s: more than 2^59 elements, or strides that "
                  "overflow int64)", fn, em_shape_str(b, sizeof b, ndim, sizes));
}

int em_check_file_shape(const char *loader, const char *path, int ndim, const int64_t *sizes) {
  if (em_shape_fits(ndim, sizes)) return 0;
  char b[EM_SHAPE_BUF];
  return em_error("%s: file %s declares shape %s, too large for a tensor (more than 2^59 "
                  "elements, or strides that overflow int64)", loader, path,
                  em_shape_str(b, sizeof b, ndim, sizes));
}

/* Sorted by stride, each dim's stride must pass the furthest element of the dims below it:
 * then no two positions meet. This misses a few exotic non-overlapping layouts (only
 * as_strided makes them), which are refused as "may overlap", as PyTorch's check does. */
static int by_stride(const void *a, const void *b) {
  const int64_t *x = a, *y = b;
  return x[0] < y[0] ? -1 : x[0] > y[0];
}

bool em_has_internal_overlap(const em_tensor *t) {
  int64_t dims[EM_MAX_DIMS][2];
  int n = 0;
  for (int d = 0; d < t->ndim; d++) {
    if (t->sizes[d] == 0) return false; /* no element at all */
    if (t->sizes[d] == 1) continue;
    if (t->strides[d] == 0) return true;
    dims[n][0] = t->strides[d] < 0 ? -t->strides[d] : t->strides[d];
    dims[n][1] = t->sizes[d];
    n++;
  }
  qsort(dims, (size_t)n, sizeof dims[0], by_stride);
  int64_t reach = 0; /* the furthest offset the dims so far reach */
  for (int i = 0; i < n; i++) {
    if (dims[i][0] <= reach) return true;
    reach += dims[i][0] * (dims[i][1] - 1);
  }
  return false;
}

int em_check_writable(const char *fn, const em_tensor *t) {
  for (int d = 0; d < t->ndim; d++)
    if (t->strides[d] == 0 && t->sizes[d] > 1)
      return em_error("%s: cannot write in place into an expanded tensor (stride 0 in "
                      "dimension %d); clone it first", fn, d);
  if (em_has_internal_overlap(t))
    return em_error("%s: cannot write in place into a tensor whose elements overlap in memory "
                    "(such as unfold windows); clone it first", fn);
  return 0;
}
