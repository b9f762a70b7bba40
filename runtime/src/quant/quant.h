/* quant.h: the quantized-block entry points shared inside the runtime (runtime/src/quant and
 * the device kernels that implement them). */
#ifndef EMBER_QUANT_H
#define EMBER_QUANT_H

#include "../internal.h"

/* Vulkan: dequantizes the GGUF-format blocks of the contiguous uint8 tensor blocks into
 * the contiguous float32 tensor out (same device, numel(out) weights). Other formats raise
 * EM_ERR_NOT_IMPLEMENTED (int8/int4). runtime/src/vulkan/vk_quant.c. */
int em_vk_quant_dequantize(const em_tensor *blocks, int format, em_tensor *out);

#endif
