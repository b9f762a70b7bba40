/*
 * vk_quant_slots.c: the Vulkan backend's quantized kernel slots (backend.h). dequantize runs
 * kernels/quant_dequant.comp (vk_quant.c) over the blocks' bytes; quant_linear runs
 * em_vk_quant_linear (vk_quant_matmul.c) over them, the block dtype mapped to its format,
 * group and symmetry. Quantizing on Vulkan has no kernel: the slot stays empty, so the op says
 * "not implemented on <device>".
 */
#include "vk.h"
#include "../quant/quant.h"

int em_vk_dequantize_slot(em_tensor *out, const em_tensor *q) {
  int format, sym;
  int64_t group;
  if (em_quant_dtype_format("dequantize", (em_dtype)q->dtype_id, &format, &group, &sym) != 0)
    return -1;
  em_tensor bytes;
  em_quant_bytes_2d(&bytes, q);
  return em_vk_quant_dequantize(&bytes, format, group, sym, out);
}

int em_vk_quant_linear_slot(em_tensor *out, const em_tensor *x, const em_tensor *w) {
  int format, sym;
  int64_t group;
  if (em_quant_dtype_format("linear", (em_dtype)w->dtype_id, &format, &group, &sym) != 0)
    return -1;
  em_tensor bytes;
  em_quant_bytes_2d(&bytes, w);
  return em_vk_quant_linear(x, &bytes, format, group, sym, out);
}
