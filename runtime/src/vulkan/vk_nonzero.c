/*
 * vk_nonzero.c: nonzero over many workgroups (kernels/nonzero_blocks.comp), for inputs of more
 * than one block; em_vk_nonzero (vk_sort.c) keeps small ones in its single workgroup. Three
 * launches: count per block of 4096 elements, an exclusive scan of the counts, and the writes
 * of the coordinates at their row-major rows.
 */
#include "vk.h"

int em_vk_nonzero_blocks(em_tensor *out, const em_tensor *x);

typedef struct blocks_push {
  uint32_t n, ndim, base, count, obase, blocks;
  uint32_t size[8];
  int32_t st[8];
} blocks_push;
_Static_assert(sizeof(blocks_push) <= VK_MAX_PUSH, "nonzero push constants exceed 128 bytes");
_Static_assert(EM_MAX_DIMS <= 8, "nonzero_blocks.comp holds 8 dimensions");

int em_vk_nonzero_blocks(em_tensor *out, const em_tensor *x) {
  vk_device *D = em_vk_device(x->device_id);
  int64_t n = em_numel(x), count = out->sizes[0];
  if (n == 0 || count == 0) return 0;
  int64_t blocks = (n + 4095) / 4096;
  blocks_push p = {.n = (uint32_t)n, .ndim = (uint32_t)x->ndim, .base = (uint32_t)x->offset,
                   .count = (uint32_t)count, .obase = (uint32_t)out->offset,
                   .blocks = (uint32_t)blocks};
  int64_t lo, hi;
  vk_span(x, &lo, &hi);
  for (int d = 0; d < x->ndim; d++) {
    p.size[x->ndim - 1 - d] = (uint32_t)x->sizes[d];
    p.st[x->ndim - 1 - d] = (int32_t)x->strides[d];
  }
  if (lo < 0 || hi >= INT32_MAX || n > INT32_MAX ||
      out->offset + em_numel(out) >= INT32_MAX / 2)
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED,
                             "nonzero: not implemented on %s for tensors beyond 2^30 elements",
                             D->name);
  em_tensor *cnt = em_empty(1, &blocks, EM_INT32, x->device_id);
  if (cnt == NULL) {
    em_error_prefix("nonzero");
    return -1;
  }
  uint64_t max = D->props.limits.maxComputeWorkGroupCount[0];
  if (max > 65535) max = 65535; /* the kernels loop over the blocks beyond the grid */
  uint32_t groups = (uint32_t)((uint64_t)blocks < max ? (uint64_t)blocks : max);
  uint32_t dt = (uint32_t)x->dtype_id;
  vk_launch C = {.module = "nonzero_blocks_COUNT", .push = &p, .push_size = sizeof p,
                 .spec = {dt, ~0u, ~0u, ~0u}, .ops = {cnt, x}, .writes = 1u,
                 .groups = {groups, 1, 1}};
  vk_launch S = {.module = "nonzero_blocks_SCAN", .push = &p, .push_size = sizeof p,
                 .spec = {~0u, ~0u, ~0u, ~0u}, .ops = {cnt}, .writes = 1u,
                 .groups = {1, 1, 1}};
  vk_launch W = {.module = "nonzero_blocks_WRITE", .push = &p, .push_size = sizeof p,
                 .spec = {dt, ~0u, ~0u, ~0u}, .ops = {out, x, cnt}, .writes = 1u,
                 .groups = {groups, 1, 1}};
  int rc = em_vk_launch_locked(&C);
  if (rc == 0) rc = em_vk_launch_locked(&S);
  if (rc == 0) rc = em_vk_launch_locked(&W);
  em_release(cnt);
  return rc;
}
