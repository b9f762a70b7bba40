/*
 * vk_index_last.c: scatter and index_put without accumulation in parallel (kernels/
 * index_last.comp). Repeated indices must leave the last source element along dim, as the
 * CPU's in-order walk does; vk_index.c otherwise walks each line along dim in one invocation,
 * which serializes a 1-D scatter (x[idx] = v) into a single thread. Here one pass marks, per
 * target element, the last position along dim that writes it (an atomic max into a zeroed
 * int32 scratch), and a second pass lets only those write: every element in parallel, and
 * the same result as the CPU's.
 */
#include <stdlib.h>

#include "vk.h"

/* 0 done, -1 error, 1 not taken (the scratch would be too large): the caller walks lines. */
int em_vk_index_last(em_tensor *x, int dim, const em_tensor *index, const em_tensor *src,
                     int put);

enum { LAST_DIMS = 5 };

typedef struct last_push {
  uint32_t lines, m, ndim, X;
  int32_t xstep;
  uint32_t size[LAST_DIMS];
  int32_t st[3 * LAST_DIMS];
  uint32_t base[3];
  int32_t jst[2];
} last_push;
_Static_assert(sizeof(last_push) <= VK_MAX_PUSH, "index_last push constants exceed 128 bytes");

static uint32_t grid(const vk_device *D, uint64_t work) {
  uint64_t g = (work + 255) / 256, max = D->props.limits.maxComputeWorkGroupCount[0];
  if (max > 65535) max = 65535;
  return (uint32_t)(g > max ? max : g);
}

int em_vk_index_last(em_tensor *x, int dim, const em_tensor *index, const em_tensor *src,
                     int put) {
  vk_device *D = em_vk_device(x->device_id);
  const em_tensor *ops[3] = {x, src, index};
  int64_t st[3][EM_MAX_DIMS], size[EM_MAX_DIMS], lines = 1, m = src->sizes[dim];
  int nd = 0;
  { /* line dimensions, innermost first, merged (index: stride 0 when put) */
    const em_tensor *walk[3] = {x, src, put ? NULL : index};
    nd = vk_line_dims(src, dim, 3, walk, size, st, &lines);
  }
  if (lines == 0 || m == 0) return 0;
  int64_t X = x->sizes[dim];
  int64_t jst[3] = {x->strides[dim], src->strides[dim],
                    put ? index->strides[0] : index->strides[dim]};
  int64_t along[3] = {X, m, m};
  int64_t wins = put ? X : lines * X;
  if (nd > LAST_DIMS || lines * m > UINT32_MAX || (uint64_t)wins * 4 > D->max_range ||
      (uint64_t)wins * 4 > ((uint64_t)256 << 20))
    return 1;
  for (int o = 0; o < 3; o++) { /* element indices within 31 bits */
    int64_t lo = ops[o]->offset, hi = lo, span = jst[o] * (along[o] - 1);
    for (int d = 0; d < nd; d++) {
      int64_t s = st[o][d] * (size[d] - 1);
      if (s > 0) hi += s;
      else lo += s;
    }
    if (span > 0) hi += span;
    else lo += span;
    if (lo < 0 || hi >= INT32_MAX) return 1;
  }
  last_push p = {.lines = (uint32_t)lines, .m = (uint32_t)m, .ndim = (uint32_t)nd,
                 .X = (uint32_t)X, .xstep = (int32_t)jst[0],
                 .jst = {(int32_t)jst[1], (int32_t)jst[2]}};
  for (int d = 0; d < nd; d++) {
    p.size[d] = (uint32_t)size[d];
    for (int o = 0; o < 3; o++) p.st[LAST_DIMS * o + d] = (int32_t)st[o][d];
  }
  for (int o = 0; o < 3; o++) p.base[o] = (uint32_t)ops[o]->offset;
  em_tensor *win = em_empty(1, &wins, EM_INT32, x->device_id);
  if (win == NULL || em_vk_fill(win, 0.0) != 0) {
    em_release(win);
    em_error_prefix(put ? "index_copy" : "scatter");
    return -1;
  }
  uint32_t esize = (uint32_t)em_dtypes[x->dtype_id].size;
  uint32_t jfast = llabs(jst[1]) == 1 ? 1u : 0u;
  /* index_put's winners do not depend on the line: mark over one line */
  last_push mark = p;
  if (put) mark.lines = 1;
  vk_launch M = {.module = "index_last_MARK", .push = &mark, .push_size = sizeof mark,
                 .spec = {~0u, put ? 1u : 0u, jfast, ~0u}, .ops = {win, index},
                 .writes = 1u, .groups = {grid(D, (uint64_t)mark.lines * (uint64_t)m), 1, 1}};
  vk_launch W = {.module = "index_last_WRITE", .push = &p, .push_size = sizeof p,
                 .spec = {esize, put ? 1u : 0u, jfast, ~0u}, .ops = {x, src, index, win},
                 .writes = 1u, .groups = {grid(D, (uint64_t)lines * (uint64_t)m), 1, 1}};
  int rc = em_vk_launch_locked(&M);
  if (rc == 0) rc = em_vk_launch_locked(&W);
  em_release(win);
  return rc;
}
