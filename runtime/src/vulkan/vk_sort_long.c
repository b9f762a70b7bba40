/*
 * vk_sort_long.c: the Vulkan sorts that vk_sort.c's one workgroup per line does not suit
 * (kernels/sort_long.comp), called by em_vk_sort: lines longer than one workgroup's shared
 * memory holds, and short lines, many to a workgroup (em_vk_sort_rows, at the end).
 * Long lines: a merge sort over the whole tensor at once. Chunks of each line are sorted in
 * shared memory into runs of (key, position) records, then log2(n / chunk) passes merge pairs
 * of runs (the merge path: tiles of 1024 outputs, each fed from shared memory), then one pass
 * writes values and indices. Records are 16 bytes, in two scratch buffers used in turn.
 */
#include "vk.h"

int em_vk_sort_long(em_tensor *values, em_tensor *indices, const em_tensor *x, int dim,
                    int descending);
int em_vk_sort_rows(em_tensor *values, em_tensor *indices, const em_tensor *x, int dim,
                    int descending);

enum { LONG_DIMS = 5 };

/* kernels/sort_long.comp's push constants. */
typedef struct long_push {
  uint32_t n, rows, total, w, ndim;
  int32_t xstep, vstep;
  uint32_t size[LONG_DIMS];
  int32_t xs[LONG_DIMS], vs[LONG_DIMS];
  uint32_t xbase, vbase, ibase;
} long_push;
_Static_assert(sizeof(long_push) <= VK_MAX_PUSH, "sort_long push constants exceed 128 bytes");

/* Workgroups for `work` items of 256, within the grid limit (the kernels loop over the rest). */
static uint32_t groups_for(const vk_device *D, uint64_t work, uint64_t per) {
  uint64_t g = (work + per - 1) / per, max = D->props.limits.maxComputeWorkGroupCount[0];
  if (max > 65535) max = 65535;
  return (uint32_t)(g > max ? max : g);
}

/* Fills the push constants shared by the kernels: 0, 1 when there is nothing to sort, or -1
 * with an error. */
static int plan(long_push *pp, const vk_device *D, const em_tensor *values,
                const em_tensor *indices, const em_tensor *x, int dim) {
  int64_t n = x->sizes[dim], rows;
  long_push p = {.xstep = (int32_t)x->strides[dim], .vstep = (int32_t)values->strides[dim]};
  /* the other dimensions, innermost first, merged where x and values both allow */
  int64_t size[EM_MAX_DIMS], st[2][EM_MAX_DIMS];
  const em_tensor *walk[2] = {x, values};
  int nd = vk_line_dims(x, dim, 2, walk, size, st, &rows);
  const int64_t *xs = st[0], *vs = st[1];
  if (rows == 0 || n == 0) return 1;
  for (int d = 0; d < x->ndim; d++)
    if (indices->strides[d] != values->strides[d])
      return em_error("sort: expected values and indices of one layout on %s, got strides "
                      "%lld and %lld in dimension %d", D->name, (long long)values->strides[d],
                      (long long)indices->strides[d], d);
  if (nd > LONG_DIMS)
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED,
                             "sort: not implemented on %s for layouts of more than %d "
                             "non-mergeable dimensions (got %d)", D->name, LONG_DIMS, nd);
  /* element indices within 31 bits; the scratch records within one storage-buffer binding */
  int64_t total = n * rows, xlo, xhi, vlo, vhi;
  vk_span(x, &xlo, &xhi);
  vk_span(values, &vlo, &vhi);
  if (xlo < 0 || xhi >= INT32_MAX || vlo < 0 || vhi >= INT32_MAX / 2 || total >= INT32_MAX)
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED,
                             "sort: not implemented on %s for tensors beyond 2^30 elements",
                             D->name);
  p.n = (uint32_t)n;
  p.rows = (uint32_t)rows;
  p.total = (uint32_t)total;
  p.ndim = (uint32_t)nd;
  for (int d = 0; d < nd; d++) {
    p.size[d] = (uint32_t)size[d];
    p.xs[d] = (int32_t)xs[d];
    p.vs[d] = (int32_t)vs[d];
  }
  p.xbase = (uint32_t)x->offset;
  p.vbase = (uint32_t)values->offset;
  p.ibase = (uint32_t)indices->offset;
  *pp = p;
  return 0;
}

int em_vk_sort_long(em_tensor *values, em_tensor *indices, const em_tensor *x, int dim,
                    int descending) {
  vk_device *D = em_vk_device(x->device_id);
  long_push p;
  int rc = plan(&p, D, values, indices, x, dim);
  if (rc != 0) return rc < 0 ? -1 : 0;
  int64_t n = p.n, rows = p.rows, total = p.total;
  if ((uint64_t)total * 16 > D->max_range)
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED,
                             "sort: not implemented on %s for %lld elements at once (its "
                             "scratch of 16 bytes per element exceeds the device's storage "
                             "buffer range of %llu bytes)", D->name, (long long)total,
                             (unsigned long long)D->max_range);
  /* the chunk: the largest power of two whose 12-byte records fit the shared memory */
  uint32_t chunk = 64;
  while ((uint64_t)chunk * 2 * 12 <= D->props.limits.maxComputeSharedMemorySize && chunk < 8192)
    chunk *= 2;
  int64_t words = total * 4;
  em_tensor *buf[2] = {em_empty(1, &words, EM_INT32, x->device_id), NULL};
  buf[1] = buf[0] ? em_empty(1, &words, EM_INT32, x->device_id) : NULL;
  rc = -1;
  if (buf[1] == NULL) {
    em_error_prefix("sort");
    goto done;
  }
  uint32_t spec[4] = {chunk, (uint32_t)x->dtype_id, descending ? 1u : 0u, ~0u};
  uint64_t tiles = (uint64_t)rows * (uint64_t)((n + chunk - 1) / chunk);
  vk_launch L = {.module = "sort_long_BLOCK", .push = &p, .push_size = sizeof p,
                 .ops = {buf[0], x}, .writes = 1u, .groups = {groups_for(D, tiles, 1), 1, 1}};
  memcpy(L.spec, spec, sizeof spec);
  if (em_vk_launch_locked(&L) != 0) goto done;
  int cur = 0;
  for (uint64_t w = chunk; w < (uint64_t)n; w *= 2) {
    p.w = (uint32_t)w;
    /* the shared-memory merge path in tiles of 1024 when runs are at least that long */
    bool tiled = chunk >= 1024;
    uint64_t work = tiled ? (uint64_t)rows * (uint64_t)((n + 1023) / 1024) : (uint64_t)total;
    vk_launch M = {.module = tiled ? "sort_long_TILE" : "sort_long_MERGE", .push = &p,
                   .push_size = sizeof p, .ops = {buf[1 - cur], buf[cur]}, .writes = 1u,
                   .groups = {groups_for(D, work, tiled ? 1 : 256), 1, 1}};
    for (int k = 0; k < 4; k++) M.spec[k] = ~0u; /* one pipeline for every dtype */
    if (em_vk_launch_locked(&M) != 0) goto done;
    cur = 1 - cur;
  }
  vk_launch W = {.module = "sort_long_WRITE", .push = &p, .push_size = sizeof p,
                 .ops = {values, indices, x, buf[cur]}, .writes = 3u,
                 .groups = {groups_for(D, (uint64_t)total, 256), 1, 1}};
  W.spec[0] = W.spec[2] = W.spec[3] = ~0u; /* only the dtype matters */
  W.spec[1] = spec[1];
  rc = em_vk_launch_locked(&W);
done:
  em_release(buf[0]);
  em_release(buf[1]);
  return rc;
}

/* Short lines (at most 128): kernels/sort_long.comp's ROWS packs 512 / p2 of them into each
 * workgroup's bitonic network, where vk_sort.c would give each its own workgroup, mostly idle. */
int em_vk_sort_rows(em_tensor *values, em_tensor *indices, const em_tensor *x, int dim,
                    int descending) {
  vk_device *D = em_vk_device(x->device_id);
  long_push p;
  int rc = plan(&p, D, values, indices, x, dim);
  if (rc != 0) return rc < 0 ? -1 : 0;
  uint32_t p2 = 2;
  while (p2 < p.n) p2 *= 2;
  uint64_t per = 512 / p2;
  vk_launch L = {.module = "sort_long_ROWS", .push = &p, .push_size = sizeof p,
                 .spec = {p2, (uint32_t)x->dtype_id, descending ? 1u : 0u, ~0u},
                 .ops = {values, indices, x}, .writes = 3u,
                 .groups = {groups_for(D, p.rows, per), 1, 1}};
  return em_vk_launch_locked(&L);
}
