/*
 * vk_quant_slots.c: the Vulkan backend's quantized kernel slots (backend.h). dequantize runs
 * kernels/quant_dequant.comp (vk_quant.c) over the blocks' bytes; quant_linear runs
 * em_vk_quant_linear (vk_quant_matmul.c) where it is linked in, and is "not implemented" on
 * the device otherwise. Quantizing on Vulkan has no kernel: the slot stays empty, so the op
 * says "not implemented on <device>".
 */
#include "vk.h"
#include "../quant/quant.h"

/* Weak only until vk_quant_matmul.c is in the tree: then drop the attribute (and this
 * declaration, quant.h has it), since a weak reference does not pull an object out of
 * libember.a (docs/design.md, "The CPU's kernel table references its kernels strongly"). */
__attribute__((weak)) int em_vk_quant_linear(const em_tensor *x, const em_tensor *blocks,
                                             int format, int64_t group, int symmetric,
                                             em_tensor *out);

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
  if (!em_vk_quant_linear)
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "linear: not implemented on %s for %s",
                             em_device_name(out->device_id), em_dtype_name((em_dtype)w->dtype_id));
  em_tensor bytes;
  em_quant_bytes_2d(&bytes, w);
  return em_vk_quant_linear(x, &bytes, format, group, sym, out);
}
