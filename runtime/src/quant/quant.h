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

/* Vulkan: out[m, n] = sum_k x[m, k] W[n, k] for W [n, k] held as blocks (every format; group
 * and symmetric as em_quant_dequantize): x contiguous [m, k], out contiguous [m, n] (float32,
 * float16 or bfloat16; the arithmetic is float32), blocks contiguous uint8 (n rows of k / block_elems blocks), all on one Vulkan device.
 * runtime/src/vulkan/vk_quant_matmul.c. */
int em_vk_quant_linear(const em_tensor *x, const em_tensor *blocks, int format, int64_t group,
                       int symmetric, em_tensor *out);

#endif
