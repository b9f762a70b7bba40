/* vk_quant.h: what starting a Vulkan device needs from the quantized kernels
 * (vk_quant_matmul.c): the packed 8-bit dot-product feature they enable where it exists. */
#ifndef EMBER_VK_QUANT_H
#define EMBER_VK_QUANT_H

#include "vk.h"

/* The feature structure the integer-dot kernel enables (create_device owns it). */
typedef struct vk_quant_setup {
  VkPhysicalDeviceShaderIntegerDotProductFeatures dot;
} vk_quant_setup;

/* For vk_device.c's create_device: where the build has the integer-dot kernel and the device
 * VK_KHR_shader_integer_dot_product with shaderIntegerDotProduct, appends the extension to exts
 * (room for one more) and returns s's feature structure linked in front of chain; else chain. */
enum { VK_QUANT_MAX_EXTS = 1 };
const void *em_vk_quant_setup(vk_device *D, vk_quant_setup *s, const void *chain,
                              const char **exts, uint32_t *next);

#endif
