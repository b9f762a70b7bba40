/* quant.h: the quantized-block entry points shared inside the runtime (runtime/src/quant and
 * the device kernels that implement them). */
#ifndef EMBER_QUANT_H
#define EMBER_QUANT_H

#include "../internal.h"

/* Vulkan: dequantizes the Q8_0 / Q4_0 / Q4_1 blocks of the contiguous uint8 tensor blocks into
 * the contiguous float32 tensor out (same device, numel(out) weights). Other formats raise
 * EM_ERR_NOT_IMPLEMENTED. runtime/src/vulkan/vk_quant.c. */
int em_vk_quant_dequantize(const em_tensor *blocks, int format, em_tensor *out);

#endif
