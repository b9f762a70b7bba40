/*
 * vk_sort.c: the Vulkan sort kernel (kernels/sort.comp): a stable sort of every line along one
 * dimension, one workgroup per line, a bitonic network in shared memory. Lines longer than
 * the shared memory holds (12 bytes per element: 4096 on a 48 KiB device, 2048 on 32 KiB)
 * raise "not implemented"; argsort and topk go through this slot (ops/sort.c).
 */
#include "vk.h"

int em_vk_sort(em_tensor *values, em_tensor *indices, const em_tensor *x, int dim,
               int descending);
/* vk_sort_long.c: lines beyond one workgroup, and short lines many to a workgroup */
int em_vk_sort_long(em_tensor *values, em_tensor *indices, const em_tensor *x, int dim,
                    int descending);
int em_vk_sort_rows(em_tensor *values, em_tensor *indices, const em_tensor *x, int dim,
                    int descending);

enum { SORT_DIMS = 5 };

typedef struct sort_push {
  uint32_t n, p2, rows, ndim;
  int32_t xstep, vstep;
  uint32_t size[SORT_DIMS];
  int32_t xs[SORT_DIMS], vs[SORT_DIMS];
  uint32_t xbase, vbase, ibase;
} sort_push;
_Static_assert(sizeof(sort_push) <= VK_MAX_PUSH, "sort push constants exceed 128 bytes");

int em_vk_sort(em_tensor *values, em_tensor *indices, const em_tensor *x, int dim,
               int descending) {
  vk_device *D = em_vk_device(x->device_id);
  int64_t n = x->sizes[dim];
  if (n <= 128) return em_vk_sort_rows(values, indices, x, dim, descending);
  uint64_t cap = 64;
  while ((int64_t)cap < n) cap *= 2;
  uint64_t shared = D->props.limits.maxComputeSharedMemorySize;
  if (cap * 12 > shared) /* a line beyond one workgroup: the multi-pass merge sort */
    return em_vk_sort_long(values, indices, x, dim, descending);
  /* the other dimensions, innermost first, merged where both x and values allow */
  sort_push p = {.n = (uint32_t)n, .xstep = (int32_t)x->strides[dim],
                 .vstep = (int32_t)values->strides[dim]};
  uint64_t p2 = 1;
  while ((int64_t)p2 < n) p2 *= 2;
  p.p2 = (uint32_t)(p2 < 2 ? 2 : p2);
  int64_t size[EM_MAX_DIMS], st[2][EM_MAX_DIMS], rows;
  const em_tensor *walk[2] = {x, values};
  int nd = vk_line_dims(x, dim, 2, walk, size, st, &rows);
  const int64_t *xs = st[0], *vs = st[1];
  if (rows == 0 || n == 0) return 0;
  if (nd > SORT_DIMS)
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED,
                             "sort: not implemented on %s for layouts of more than %d "
                             "non-mergeable dimensions (got %d)", D->name, SORT_DIMS, nd);
  /* element indices stay within 31 bits (values and indices are fresh and contiguous) */
  int64_t lo, hi;
  vk_span(x, &lo, &hi);
  if (lo < 0 || hi >= INT32_MAX || values->offset + em_numel(values) >= INT32_MAX ||
      indices->offset + em_numel(indices) >= INT32_MAX / 2 || rows > UINT32_MAX)
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED,
                             "sort: not implemented on %s for tensors beyond 2^30 elements",
                             D->name);
  p.rows = (uint32_t)rows;
  p.ndim = (uint32_t)nd;
  for (int d = 0; d < nd; d++) {
    p.size[d] = (uint32_t)size[d];
    p.xs[d] = (int32_t)xs[d];
    p.vs[d] = (int32_t)vs[d];
  }
  p.xbase = (uint32_t)x->offset;
  p.vbase = (uint32_t)values->offset;
  p.ibase = (uint32_t)indices->offset;
  uint64_t groups = (uint64_t)rows, max = D->props.limits.maxComputeWorkGroupCount[0];
  if (max > 65535) max = 65535;
  if (groups > max) groups = max; /* the kernel loops over the remaining lines */
  vk_launch L = {
      .module = "sort",
      .push = &p,
      .push_size = sizeof p,
      .spec = {(uint32_t)cap, (uint32_t)x->dtype_id, descending ? 1u : 0u, ~0u},
      .ops = {values, indices, x},
      .writes = 3u,
      .groups = {(uint32_t)groups, 1, 1},
  };
  return em_vk_launch_locked(&L);
}
