/*
 * vk_index_rows.c: index_select of whole contiguous rows (kernels/index_rows.comp), the
 * embedding lookup's shape: x and out contiguous, so each selected slice x[..., i, ...] is one
 * run of memory, copied as raw 128-bit or 32-bit words. vk_index.c's general kernel walks
 * every element's coordinates with divisions; this one does none.
 */
#include <stdlib.h>

#include "vk.h"

/* 0 done, -1 error, 1 not taken (layout or alignment): the caller uses the general kernel. */
int em_vk_index_rows(em_tensor *out, const em_tensor *x, int dim, const em_tensor *index);

typedef struct rows_push {
  uint32_t words, m, outer, X, obase, xbase, ibase;
  int32_t istride;
} rows_push;

int em_vk_index_rows(em_tensor *out, const em_tensor *x, int dim, const em_tensor *index) {
  if (x->ndim == 0 || !em_is_contiguous(x) || !em_is_contiguous(out)) return 1;
  vk_device *D = em_vk_device(x->device_id);
  uint64_t esize = em_dtypes[x->dtype_id].size, inner = 1, outer = 1;
  for (int d = 0; d < dim; d++) outer *= (uint64_t)x->sizes[d];
  for (int d = dim + 1; d < x->ndim; d++) inner *= (uint64_t)x->sizes[d];
  uint64_t bytes = inner * esize, m = (uint64_t)out->sizes[dim], X = (uint64_t)x->sizes[dim];
  if (bytes == 0 || m == 0 || outer == 0) return 0;
  uint64_t xoff = (uint64_t)x->offset * esize, ooff = (uint64_t)out->offset * esize;
  uint64_t word = bytes % 16 == 0 && xoff % 16 == 0 && ooff % 16 == 0 ? 16
                  : bytes % 4 == 0 && xoff % 4 == 0 && ooff % 4 == 0 ? 4 : 0;
  if (word == 0) return 1;
  uint64_t xwords = xoff / word + outer * X * (bytes / word);
  uint64_t owords = ooff / word + outer * m * (bytes / word);
  if (xwords >= UINT32_MAX || owords >= UINT32_MAX || index->offset + m >= INT32_MAX / 2 ||
      (uint64_t)llabs(index->strides[0]) * m >= INT32_MAX / 2)
    return 1;
  rows_push p = {.words = (uint32_t)(bytes / word), .m = (uint32_t)m, .outer = (uint32_t)outer,
                 .X = (uint32_t)X, .obase = (uint32_t)(ooff / word),
                 .xbase = (uint32_t)(xoff / word), .ibase = (uint32_t)index->offset,
                 .istride = (int32_t)index->strides[0]};
  const uint32_t *lim = D->props.limits.maxComputeWorkGroupCount;
  uint64_t gx = (p.words + 255) / 256, gy = m, gz = outer;
  uint64_t cap[3] = {lim[0] < 65535 ? lim[0] : 65535, lim[1] < 65535 ? lim[1] : 65535,
                     lim[2] < 65535 ? lim[2] : 65535};
  vk_launch L = {.module = word == 16 ? "index_rows_W4" : "index_rows_W1", .push = &p,
                 .push_size = sizeof p, .spec = {~0u, ~0u, ~0u, ~0u},
                 .ops = {out, x, index}, .writes = 1u,
                 .groups = {(uint32_t)(gx < cap[0] ? gx : cap[0]),
                            (uint32_t)(gy < cap[1] ? gy : cap[1]),
                            (uint32_t)(gz < cap[2] ? gz : cap[2])}};
  return em_vk_launch_locked(&L);
}
