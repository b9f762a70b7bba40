/*
 * vk_index_check.c: the check_index slot. The indexing definitions (ops/index.c, embedding)
 * would otherwise read every index tensor back to the host, a full wait for the device's
 * queue per op; here one small kernel (kernels/index_check.comp) reads the index on the device
 * and reports a bad value through the error flag (vk_flag.c), which the host raises at its
 * next synchronization. The indexing kernels (index.comp, index_rows, index_last, index_seg)
 * skip a bad index on their own, so nothing outside the tensors is read or written meanwhile.
 */
#include "vk.h"

int em_vk_check_index(const char *fn, em_index_wording w, int dim, const em_tensor *index,
                      int64_t size);

typedef struct check_push {
  uint32_t n, ndim, base, size, name, wording;
  int32_t dim;
  uint32_t sizes[EM_MAX_DIMS];
  int32_t st[EM_MAX_DIMS];
} check_push;
_Static_assert(sizeof(check_push) <= VK_MAX_PUSH, "index_check push constants exceed 128 bytes");

/* The index's dimensions innermost first, size-1 ones dropped and contiguous neighbours
 * merged; false when an element offset would not fit the kernel's 31 bits. */
static bool walk(const em_tensor *t, check_push *p) {
  int64_t size[EM_MAX_DIMS], st[EM_MAX_DIMS], lo = t->offset, hi = t->offset;
  int nd = 0;
  for (int d = t->ndim - 1; d >= 0; d--) {
    if (t->sizes[d] == 1) continue;
    int64_t span = t->strides[d] * (t->sizes[d] - 1);
    if (span > 0) hi += span;
    else lo += span;
    if (nd > 0 && t->strides[d] == st[nd - 1] * size[nd - 1]) {
      size[nd - 1] *= t->sizes[d];
      continue;
    }
    size[nd] = t->sizes[d];
    st[nd++] = t->strides[d];
  }
  if (lo < 0 || hi >= INT32_MAX) return false;
  p->ndim = (uint32_t)nd;
  p->base = (uint32_t)t->offset;
  for (int d = 0; d < nd; d++) {
    p->sizes[d] = (uint32_t)size[d];
    p->st[d] = (int32_t)st[d];
  }
  return true;
}

int em_vk_check_index(const char *fn, em_index_wording w, int dim, const em_tensor *index,
                      int64_t size) {
  int64_t n = em_numel(index);
  if (n == 0) return 0;
  check_push p = {.n = (uint32_t)n, .size = (uint32_t)size, .wording = (uint32_t)w,
                  .dim = dim};
  /* beyond the kernel's 32-bit counts the host checks (such an index is 32 GiB) */
  if (n > UINT32_MAX || size > UINT32_MAX || !walk(index, &p)) return 1;
  vk_device *D = em_vk_device(index->device_id);
  uint64_t groups = ((uint64_t)n + 255) / 256, max = D->props.limits.maxComputeWorkGroupCount[0];
  if (max > 65535) max = 65535;
  pthread_mutex_lock(&D->lock);
  const em_tensor *flag = em_vk_flag_tensor(D);
  int rc = -1;
  if (flag) {
    p.name = em_vk_flag_name(D, fn);
    /* The flag is declared read (writes = 0) although the kernel writes it: its writes are
     * atomics that need no order among the checks, and declaring them would put a barrier
     * between every two checks. The host reads the flag only after a wait, past the
     * barrier em_vk_flag_barrier asks for at the batch's end. */
    vk_launch L = {.module = "index_check", .push = &p, .push_size = sizeof p,
                   .spec = {~0u, ~0u, ~0u, ~0u}, .ops = {flag, index}, .writes = 0,
                   .groups = {(uint32_t)(groups < max ? groups : max), 1, 1}};
    rc = em_vk_launch(D, &L);
    if (rc == 0) em_vk_flag_barrier(D);
  }
  pthread_mutex_unlock(&D->lock);
  if (rc != 0) em_error_prefix(fn);
  return rc;
}
