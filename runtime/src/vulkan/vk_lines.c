/*
 * vk_lines.c: the layout helpers of the kernels that walk a tensor as lines along one dim
 * (sort, sort_long, index_last, index_seg) and of those bound to 31-bit element indices.
 */
#include "vk.h"

int vk_line_dims(const em_tensor *shape, int skip, int nops, const em_tensor *const ops[],
                 int64_t size[EM_MAX_DIMS], int64_t st[][EM_MAX_DIMS], int64_t *lines) {
  int nd = 0;
  *lines = 1;
  for (int d = shape->ndim - 1; d >= 0; d--) {
    if (d == skip || shape->sizes[d] == 1) continue;
    *lines *= shape->sizes[d];
    bool merges = nd > 0;
    for (int o = 0; o < nops && merges; o++) {
      int64_t s = ops[o] ? ops[o]->strides[d] : 0;
      merges = s == st[o][nd - 1] * size[nd - 1];
    }
    if (merges) {
      size[nd - 1] *= shape->sizes[d];
      continue;
    }
    size[nd] = shape->sizes[d];
    for (int o = 0; o < nops; o++) st[o][nd] = ops[o] ? ops[o]->strides[d] : 0;
    nd++;
  }
  return nd;
}

void vk_span(const em_tensor *t, int64_t *lo, int64_t *hi) {
  *lo = *hi = t->offset;
  for (int d = 0; d < t->ndim; d++) {
    int64_t span = t->strides[d] * (t->sizes[d] - 1);
    if (span > 0) *hi += span;
    else *lo += span;
  }
}
