/*
 * vk_conv.h: what the convolution and pooling files of the Vulkan backend (vk_conv.c,
 * vk_pool.c) share, and the split-K sum that matmul uses too.
 */
#ifndef EMBER_VK_CONV_H
#define EMBER_VK_CONV_H

#include "vk.h"

/* The nn slots take float32, or float64 where the device has shaderFloat64: 0, or -1 with a
 * "not implemented" error naming the op. */
static inline int em_vk_conv_float(const em_tensor *t, const char *fn) {
  vk_device *D = em_vk_device(t->device_id);
  if (t->dtype_id == EM_FLOAT32) return 0;
  if (t->dtype_id == EM_FLOAT64 && (D->features & EM_FEATURE_FLOAT64)) return 0;
  return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: not implemented on %s for %s%s", fn,
                           D->name, em_dtype_name((em_dtype)t->dtype_id),
                           t->dtype_id == EM_FLOAT64 ? " (the device lacks shaderFloat64)" : "");
}

/* Workgroups for a 1-D grid-stride kernel of 256 threads over n elements. */
static inline uint32_t em_vk_conv_blocks(int64_t n) {
  int64_t b = (n + 255) / 256;
  return (uint32_t)(b > 65535 ? 65535 : b);
}

/* out (contiguous, total elements from its offset) = alpha * the sum over s < splits of
 * part[s * total + i] + beta * out (unread when beta is 0), summed in split order
 * (kernels/conv_sum.comp). Takes the device lock. */
int em_vk_sum_splits(em_tensor *out, const em_tensor *part, uint32_t splits, int64_t total,
                     double alpha, double beta);

/* vk_conv_cols.c: 16-bit convolutions as products on the tensor-core kernels over column
 * matrices; em_vk_conv_half is the backend's conv_half (which dtypes the conv slots take). */
bool em_vk_conv_half(int device, em_dtype dt);
int em_vk_conv2d_cols(em_tensor *y, const em_tensor *x, const em_tensor *w,
                      const em_tensor *bias, const struct em_conv_geom *g);
int em_vk_conv2d_input_grad_cols(em_tensor *gx, const em_tensor *gy, const em_tensor *w,
                                 const em_tensor *bias, const struct em_conv_geom *g);
int em_vk_conv2d_weight_grad_cols(em_tensor *gw, const em_tensor *x, const em_tensor *gy,
                                  const struct em_conv_geom *g);
/* vk_conv.c's float32/float64 kernels (the fallback of the column method too). */
int em_vk_conv2d(em_tensor *y, const em_tensor *x, const em_tensor *w, const em_tensor *bias,
                 const struct em_conv_geom *g);
int em_vk_conv2d_input_grad(em_tensor *gx, const em_tensor *gy, const em_tensor *w,
                            const em_tensor *bias, const struct em_conv_geom *g);
int em_vk_conv2d_weight_grad(em_tensor *gw, const em_tensor *x, const em_tensor *gy,
                             const struct em_conv_geom *g);

#endif
