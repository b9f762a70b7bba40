/*
 * vk_nonzero.c: the nonzero slot. Inputs of one block (4096 elements) go to one workgroup
 * (kernels/nonzero.comp, a shared-memory scan, so the coordinates come out in row-major
 * order); larger ones over many (kernels/nonzero_blocks.comp), in three
 * launches: count per block, an exclusive scan of the counts, and the writes of the
 * coordinates at their row-major rows.
 */
#include "vk.h"

int em_vk_nonzero(em_tensor *out, const em_tensor *x);

/* x's sizes and strides innermost first (the kernels' order); -1 with a "not implemented"
 * error when an index would not fit the kernels' 32-bit arithmetic. */
static int nonzero_dims(const vk_device *D, em_tensor *out, const em_tensor *x, uint32_t *size,
                        int32_t *st) {
  int64_t lo, hi, n = em_numel(x);
  vk_span(x, &lo, &hi);
  for (int d = 0; d < x->ndim; d++) {
    size[x->ndim - 1 - d] = (uint32_t)x->sizes[d];
    st[x->ndim - 1 - d] = (int32_t)x->strides[d];
  }
  if (lo < 0 || hi >= INT32_MAX || n > INT32_MAX ||
      out->offset + em_numel(out) >= INT32_MAX / 2)
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED,
                             "nonzero: not implemented on %s for tensors beyond 2^30 elements",
                             D->name);
  return 0;
}

typedef struct nonzero_push {
  uint32_t n, ndim, base, count, obase;
  uint32_t size[EM_MAX_DIMS];
  int32_t st[EM_MAX_DIMS];
} nonzero_push;
_Static_assert(sizeof(nonzero_push) <= VK_MAX_PUSH, "nonzero push constants exceed 128 bytes");

typedef struct blocks_push {
  uint32_t n, ndim, base, count, obase, blocks;
  uint32_t size[8];
  int32_t st[8];
} blocks_push;
_Static_assert(sizeof(blocks_push) <= VK_MAX_PUSH, "nonzero push constants exceed 128 bytes");
_Static_assert(EM_MAX_DIMS <= 8, "nonzero_blocks.comp holds 8 dimensions");

static int nonzero_blocks(em_tensor *out, const em_tensor *x) {
  vk_device *D = em_vk_device(x->device_id);
  int64_t n = em_numel(x), count = out->sizes[0];
  if (n == 0 || count == 0) return 0;
  int64_t blocks = (n + 4095) / 4096;
  blocks_push p = {.n = (uint32_t)n, .ndim = (uint32_t)x->ndim, .base = (uint32_t)x->offset,
                   .count = (uint32_t)count, .obase = (uint32_t)out->offset,
                   .blocks = (uint32_t)blocks};
  if (nonzero_dims(D, out, x, p.size, p.st) != 0) return -1;
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

int em_vk_nonzero(em_tensor *out, const em_tensor *x) {
  vk_device *D = em_vk_device(x->device_id);
  int64_t n = em_numel(x), count = out->sizes[0];
  if (n == 0 || count == 0) return 0;
  if (n > 4096) return nonzero_blocks(out, x); /* more than one block: many workgroups */
  nonzero_push p = {.n = (uint32_t)n, .ndim = (uint32_t)x->ndim, .base = (uint32_t)x->offset,
                    .count = (uint32_t)count, .obase = (uint32_t)out->offset};
  if (nonzero_dims(D, out, x, p.size, p.st) != 0) return -1;
  vk_launch L = {
      .module = "nonzero",
      .push = &p,
      .push_size = sizeof p,
      .spec = {(uint32_t)x->dtype_id, ~0u, ~0u, ~0u},
      .ops = {out, x},
      .writes = 1u,
      .groups = {1, 1, 1},
  };
  return em_vk_launch_locked(&L);
}
