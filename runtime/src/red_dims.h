/*
 * red_dims.h: the dim planning the reduction families of every backend share (the CPU's
 * reduce_core.c, Vulkan's vk_reduce_plan.c). x's dims split into "kept" dims (one output per
 * position) and "reduced" dims (those in mask); size-1 dims drop out. Each group is sorted
 * outermost (largest |x stride|) first and coalesced, so a transposed or sliced input plans like
 * a contiguous one with the same inner stride.
 */
#ifndef EMBER_RED_DIMS_H
#define EMBER_RED_DIMS_H

#include "internal.h"

typedef struct em_red_dim {
  /* size, x stride and out stride, in the caller's unit (elements or bytes); os is 0 on a dim
   * that out does not walk (reduced without keepdim, or out of another shape) */
  int64_t size, xs, os;
} em_red_dim;

static inline int64_t em_abs64(int64_t v) { return v < 0 ? -v : v; }

/* Fills kept[*nk] and red[*nr] (EM_MAX_DIMS each) from out, x and mask. Strides are multiplied
 * by xunit and ounit: 1 for elements, the element size for bytes. */
void em_red_dims_split(const em_tensor *out, const em_tensor *x, uint32_t mask, int64_t xunit,
                       int64_t ounit, em_red_dim *kept, int *nk, em_red_dim *red, int *nr);

#endif
