/*
 * vk_index_seg.c: scatter_add and index_add of float dtypes (float16, bfloat16, float32,
 * float64) in parallel, deterministic and bit for bit the CPU's result
 * (kernels/index_seg.comp). The index is sorted along dim
 * first (em_vk_sort, stable), so each target's contributions form a run; one invocation per
 * run adds them in source order, as the CPU does. (float64 has no 64-bit atomics to use, and
 * vk_index.c's fallback for it walks each line in one invocation, serializing a 1-D
 * index_add; the others' fallback is compare-and-swap atomics, in a racy order.)
 */
#include <stdlib.h>
#include <string.h>

#include "vk.h"

/* 0 done, -1 error, 1 not taken (layout limits): the caller walks lines. */
int em_vk_index_seg(em_tensor *x, int dim, const em_tensor *index, const em_tensor *src,
                    double alpha, int put);
int em_vk_sort(em_tensor *values, em_tensor *indices, const em_tensor *x, int dim,
               int descending);

enum { SEG_DIMS = 5 };

typedef struct seg_push {
  uint32_t lines, m, ndim;
  int32_t xstep;
  uint32_t alpha[2];
  uint32_t size[SEG_DIMS];
  int32_t st[3 * SEG_DIMS];
  uint32_t base[3];
  int32_t jst[2];
  uint32_t X;                 /* x.size(dim): runs of values outside [0, X) are skipped */
} seg_push;
_Static_assert(sizeof(seg_push) <= VK_MAX_PUSH, "index_seg push constants exceed 128 bytes");

int em_vk_index_seg(em_tensor *x, int dim, const em_tensor *index, const em_tensor *src,
                    double alpha, int put) {
  vk_device *D = em_vk_device(x->device_id);
  bool f64 = x->dtype_id == EM_FLOAT64;
  if (f64 && !(D->features & EM_FEATURE_FLOAT64)) return 1; /* the caller raises the error */
  /* the sort's scratch must fit one binding (vk_sort_long.c); beyond, the caller's fallback */
  if ((uint64_t)em_numel(index) * 16 > D->max_range) return 1;
  int64_t m = src->sizes[dim], lines = 1;
  /* the sorted pair: index's shape, fresh and contiguous */
  em_tensor *sv = em_empty(index->ndim, index->sizes, EM_INT64, x->device_id);
  em_tensor *sp = sv ? em_empty(index->ndim, index->sizes, EM_INT64, x->device_id) : NULL;
  const em_tensor *sorted = sv; /* its strides stand for both */
  int64_t st[3][EM_MAX_DIMS], size[EM_MAX_DIMS];
  int nd = 0, rc = -1;
  if (sp == NULL) goto done;
  { /* line dimensions, innermost first, merged (index: stride 0 when put) */
    const em_tensor *walk[3] = {x, src, put ? NULL : sorted};
    nd = vk_line_dims(src, dim, 3, walk, size, st, &lines);
  }
  if (lines == 0 || m == 0) {
    rc = 0;
    goto done;
  }
  int64_t jst[3] = {x->strides[dim], src->strides[dim], put ? 1 : sorted->strides[dim]};
  int64_t along[3] = {x->sizes[dim], m, m};
  const em_tensor *ops[3] = {x, src, sorted};
  rc = 1;
  if (nd > SEG_DIMS || lines * m > UINT32_MAX) goto done;
  for (int o = 0; o < 3; o++) { /* element indices within 31 bits (int64 words: 30) */
    int64_t lo = ops[o]->offset, hi = lo, span = jst[o] * (along[o] - 1);
    for (int d = 0; d < nd; d++) {
      int64_t s = st[o][d] * (size[d] - 1);
      if (s > 0) hi += s;
      else lo += s;
    }
    if (span > 0) hi += span;
    else lo += span;
    if (lo < 0 || hi >= INT32_MAX / 2) goto done;
  }
  rc = em_vk_sort(sv, sp, index, put ? 0 : dim, 0);
  if (rc != 0) goto done;
  seg_push p = {.lines = (uint32_t)lines, .m = (uint32_t)m, .ndim = (uint32_t)nd,
                .xstep = (int32_t)jst[0], .jst = {(int32_t)jst[1], (int32_t)jst[2]},
                .X = (uint32_t)x->sizes[dim]};
  uint64_t bits;
  if (f64) {
    memcpy(&bits, &alpha, sizeof bits);
  } else {
    float a32 = (float)alpha; /* the CPU's float32 kernel multiplies by (float)alpha too */
    uint32_t u;
    memcpy(&u, &a32, sizeof u);
    bits = u;
  }
  p.alpha[0] = (uint32_t)bits;
  p.alpha[1] = (uint32_t)(bits >> 32);
  for (int d = 0; d < nd; d++) {
    p.size[d] = (uint32_t)size[d];
    for (int o = 0; o < 3; o++) p.st[SEG_DIMS * o + d] = (int32_t)st[o][d];
  }
  for (int o = 0; o < 3; o++) p.base[o] = (uint32_t)ops[o]->offset;
  uint64_t groups = ((uint64_t)lines * (uint64_t)m + 255) / 256;
  uint64_t max = D->props.limits.maxComputeWorkGroupCount[0];
  if (max > 65535) max = 65535;
  /* lines fastest when src is contiguous along the innermost one (coalesced loads) */
  uint32_t lfast = nd > 0 && st[1][0] == 1 ? 1u : 0u;
  bool h16 = x->dtype_id == EM_FLOAT16 || x->dtype_id == EM_BFLOAT16;
  vk_launch L = {.module = f64 ? "index_seg_F64" : h16 ? "index_seg_H16" : "index_seg_F32",
                 .push = &p, .push_size = sizeof p,
                 .spec = {lfast, h16 ? (x->dtype_id == EM_BFLOAT16 ? 1u : 0u) : ~0u, ~0u, ~0u}, .ops = {x, src, sv, sp}, .writes = 1u,
                 .groups = {(uint32_t)(groups < max ? groups : max), 1, 1}};
  rc = em_vk_launch_locked(&L);
done:
  if (rc < 0) em_error_prefix(put ? "index_add" : "scatter_add");
  em_release(sv);
  em_release(sp);
  return rc;
}
