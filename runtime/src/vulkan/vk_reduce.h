/*
 * vk_reduce.h: what the Vulkan reduction family shares (vk_reduce_plan.c, vk_reduce.c,
 * vk_scan.c): the line plan and the launch geometry of kernels/reduce.glsl.
 *
 * Every job of the family (reductions, arg-reductions, scans, softmax) is a set of lines: x is
 * seen as [A, R, K] with element strides (sa, sr, sk), R the reduced or scanned extent, and line
 * o = a * K + k. The plan finds that view from x's own strides when the kept dims coalesce into
 * at most two groups and the reduced dims into one (contiguous, transposed, sliced and
 * broadcast inputs mostly do); otherwise it first copies x, reduced dims innermost, into a
 * contiguous temporary, which always fits.
 */
#ifndef EMBER_VK_REDUCE_H
#define EMBER_VK_REDUCE_H

#include "vk.h"

typedef struct vk_lines {
  int64_t A, R, K;
  int64_t sa, sr, sk;   /* x strides, elements */
  int64_t oa, or_, ok;  /* out strides (or_: along the line, for scans and softmax) */
  const em_tensor *x;   /* what the kernels read: x, or tmp */
  em_tensor *tmp;       /* the contiguous copy, when x's layout did not fit */
  vk_device *D;
} vk_lines;

/* Plans x reduced over `mask` into out (out has x's rank; a dim whose size equals x's is walked
 * along with out's stride, a size-1 dim is not). 0, or -1 with an error (a too-large tensor, a
 * failed copy). Release with vk_lines_done. */
int vk_lines_plan(vk_lines *L, const char *fn, const em_tensor *out, const em_tensor *x,
                  uint32_t mask);
void vk_lines_done(vk_lines *L);

/* The workgroup shape: TR lanes per line (a power of two up to 256) in the ROW layout (lanes
 * along the line) or the COL layout (neighbouring invocations on neighbouring lines). */
typedef struct vk_lanes {
  uint32_t tr, col;
  uint32_t groups, gx, gy; /* workgroups over the lines, as a (gx, gy) grid */
} vk_lanes;
/* Chooses the lanes for lines of R elements (stride sr) and K neighbours at stride sk;
 * max_tr caps the lanes (scans in the COL layout want 1). -1 with an error if the grid does
 * not fit the device. */
int vk_lanes_pick(vk_lanes *P, const vk_device *D, const char *fn, int64_t nlines, int64_t R,
                  int64_t sr, int64_t K, int64_t sk, uint32_t max_tr);

/* Whether the device is a CPU-type driver (lavapipe): fewer, costlier workgroups. */
bool vk_red_cpu_type(const vk_device *D);

/* The module variant of a dtype: "F32" (float32, float16, bfloat16), "F64", "I64" (integers and
 * bool); NULL for float64 on a device without shaderFloat64, with the error set. */
const char *vk_red_variant(const vk_device *D, const char *fn, em_dtype d);

/* Error for strides or sizes beyond what 32-bit kernel indexing covers. */
int vk_red_too_large(const vk_device *D, const char *fn);

#endif
