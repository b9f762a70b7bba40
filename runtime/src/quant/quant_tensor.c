/* quant_tensor.c: dequantizing a tensor of blocks into a dense tensor on its own device: the
 * CPU runs quant_blocks.c, Vulkan its kernel (vk_quant.c). A format or device without a kernel
 * is an error: the blocks are never moved to another device behind the caller's back. */
#include "../internal.h"
#include "quant.h"

int em_quant_dequantize_tensor(const em_tensor *blocks, int format, int64_t group, int symmetric,
                               em_tensor *out) {
  EM_NOT_NULL(-1, blocks);
  EM_NOT_NULL(-1, out);
  int64_t be, bb;
  if (em_quant_block_size(format, group, symmetric, &be, &bb) != 0) return -1;
  if (blocks->dtype_id != EM_UINT8 || !em_is_contiguous(blocks))
    return em_error("quant_dequantize_tensor: expected contiguous uint8 blocks, got %s%s",
                    em_is_contiguous(blocks) ? "" : "non-contiguous ", em_dtype_name((em_dtype)blocks->dtype_id));
  if (out->dtype_id != EM_FLOAT32 || !em_is_contiguous(out))
    return em_error("quant_dequantize_tensor: expected a contiguous float32 output, got %s",
                    em_dtype_name((em_dtype)out->dtype_id));
  if (blocks->device_id != out->device_id)
    return em_error("quant_dequantize_tensor: expected the blocks and the output on one device, "
                    "got devices %d and %d", blocks->device_id, out->device_id);
  int64_t n = em_numel(out);
  if (n % be != 0 || n / be * bb != em_numel(blocks))
    return em_error("quant_dequantize_tensor: expected %lld bytes of blocks for %lld weights, "
                    "got %lld", (long long)(n % be ? -1 : n / be * bb), (long long)n,
                    (long long)em_numel(blocks));
  if (out->device_id == 0)
    return em_quant_dequantize(format, group, symmetric, em_data_ptr(blocks), n, em_data_ptr(out));
  return em_vk_quant_dequantize(blocks, format, group, symmetric, out);
}
