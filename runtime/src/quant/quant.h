/* quant.h: the quantized-block entry points shared inside the runtime (runtime/src/quant and
 * the device kernels that implement them). */
#ifndef EMBER_QUANT_H
#define EMBER_QUANT_H

#include "../internal.h"

/* Vulkan: dequantizes the blocks (any format) of the contiguous uint8 tensor blocks into
 * the contiguous float32 tensor out (same device, numel(out) weights); group and symmetric as
 * em_quant_dequantize. runtime/src/vulkan/vk_quant.c. */
int em_vk_quant_dequantize(const em_tensor *blocks, int format, int64_t group, int symmetric,
                           em_tensor *out);

/* The em_quant_format, group and symmetry of a block dtype (quant_dtype.c): what the raw block
 * functions and the kernels take. -1 with an error naming fn for a dense dtype. */
int em_quant_dtype_format(const char *fn, em_dtype dtype, int *format, int64_t *group,
                          int *symmetric);
/* t (contiguous, a block dtype) as the contiguous uint8 [rows, row_bytes] view the raw kernels
 * read, a stack header borrowing t's storage: rows = numel / last size (1 for a 0-d t). */
void em_quant_bytes_2d(em_tensor *v, const em_tensor *t);

/* The CPU backend's quantized slots (quant_cpu_slots.c). */
int em_cpu_quantize(em_tensor *out, const em_tensor *x);
int em_cpu_dequantize(em_tensor *out, const em_tensor *q);
int em_cpu_quant_linear(em_tensor *out, const em_tensor *x, const em_tensor *w);
/* The Vulkan backend's (vulkan/vk_quant_slots.c). */
int em_vk_dequantize_slot(em_tensor *out, const em_tensor *q);
int em_vk_quant_linear_slot(em_tensor *out, const em_tensor *x, const em_tensor *w);

/* Vulkan: out[m, n] = sum_k x[m, k] W[n, k] for W [n, k] held as blocks (every format; group
 * and symmetric as em_quant_dequantize): x contiguous [m, k], out contiguous [m, n] (float32,
 * float16 or bfloat16; the arithmetic is float32), blocks contiguous uint8 (n rows of k / block_elems blocks), all on one Vulkan device.
 * runtime/src/vulkan/vk_quant_matmul.c. */
int em_vk_quant_linear(const em_tensor *x, const em_tensor *blocks, int format, int64_t group,
                       int symmetric, em_tensor *out);

#endif
