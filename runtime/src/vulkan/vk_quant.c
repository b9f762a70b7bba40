/*
 * vk_quant.c: dequantizing quantized blocks on a Vulkan device (kernels/quant_dequant.comp),
 * so that blocks held on the GPU expand there, with no trip through the host. The formats with
 * a kernel: all of them (the GGUF ones and the affine int8/int4), one module specialized per
 * format (and group and symmetry). The dequantize slot (vk_quant_slots.c) calls it.
 */
#include "vk.h"
#include "../quant/quant.h"

enum { WG = 256 };

typedef struct dq_push { uint32_t n, in_off, out_off; } dq_push;

static const char *format_name(int f) {
  static const char *names[] = {"Q8_0", "Q4_0", "Q4_1", "Q4_K", "Q6_K", "int8", "int4"};
  return f >= 0 && f < 7 ? names[f] : "?";
}

int em_vk_quant_dequantize(const em_tensor *blocks, int format, int64_t group, int symmetric,
                           em_tensor *out) {
  vk_device *D = em_vk_device(out->device_id);
  if (format < EM_QUANT_Q8_0 || format > EM_QUANT_AFFINE4)
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "em_quant_dequantize_tensor: format %s is "
                             "not implemented on %s", format_name(format), D->name);
  int64_t n = em_numel(out);
  if (n == 0) return 0;
  if (n > INT32_MAX || blocks->offset + em_numel(blocks) > INT32_MAX || out->offset > INT32_MAX)
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "em_quant_dequantize_tensor: not implemented "
                             "on %s for more than %d weights or bytes", D->name, INT32_MAX);
  dq_push p = {(uint32_t)n, (uint32_t)blocks->offset, (uint32_t)out->offset};
  uint64_t groups = ((uint64_t)n + WG - 1) / WG;
  uint32_t max_groups = D->props.limits.maxComputeWorkGroupCount[0];
  vk_launch L = {
      .module = "quant_dequant",
      .push = &p,
      .push_size = sizeof p,
      .spec = {(uint32_t)format, group > 0 ? (uint32_t)group : 32u, symmetric ? 1u : 0u, ~0u},
      .ops = {blocks, out},
      .writes = 2u,
      .groups = {(uint32_t)(groups < max_groups ? groups : max_groups), 1, 1},
  };
  return em_vk_launch_locked(&L);
}
