/* quant_matmul.c: the public Linear of a dense float32 activation with a quantized weight,
 * out[m, n] = sum_k x[m, k] * W[n, k], without materializing W: checks the tensors, then runs
 * the CPU kernels (runtime/src/quant/cpu/, quant_cpu.h: activations quantized to int8 per 32,
 * int32 dot products, VNNI/AVX2/portable paths, threads). The ggml formats are accepted; the
 * affine formats need a group, which em_quant_linear does not take (em_quant_linear_grouped
 * does). Tensors on a Vulkan device go to its kernels (vk_quant_matmul.c, every format). */
#include "../internal.h"
#include "quant.h"
#include "quant_cpu.h"

static int cpu_linear(const em_tensor *x, const em_tensor *blocks, int format, int64_t group,
                      int symmetric, em_tensor *out) {
  int64_t be = 0, bb = 0;
  if (em_quant_block_size(format, group, symmetric, &be, &bb) != 0) return -1;
  if (x->ndim != 2 || out->ndim != 2 || x->dtype_id != EM_FLOAT32 || out->dtype_id != EM_FLOAT32 ||
      !em_is_contiguous(x) || !em_is_contiguous(out) || blocks->dtype_id != EM_UINT8 ||
      !em_is_contiguous(blocks))
    return em_error("quant_linear: expected contiguous float32 x [M, K] and out [M, N], and "
                    "contiguous uint8 blocks");
  int64_t m = x->sizes[0], k = x->sizes[1], n = out->sizes[1];
  if (out->sizes[0] != m || k % be != 0 || em_numel(blocks) != n * (k / be) * bb)
    return em_error("quant_linear: expected x [M, K] (K whole blocks of %lld), out [M, N] and "
                    "N * K / %lld blocks; got x [%lld, %lld], out [%lld, %lld], %lld bytes",
                    (long long)be, (long long)be, (long long)m, (long long)k,
                    (long long)out->sizes[0], (long long)n, (long long)em_numel(blocks));
  return em_quant_cpu_linear(em_data_ptr(x), m, k, em_data_ptr(blocks), n, format, group,
                             symmetric, em_data_ptr(out));
}

int em_quant_linear(const em_tensor *x, const em_tensor *blocks, int format, em_tensor *out) {
  EM_NOT_NULL(-1, x);
  EM_NOT_NULL(-1, blocks);
  EM_NOT_NULL(-1, out);
  if (format == EM_QUANT_AFFINE8 || format == EM_QUANT_AFFINE4)
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "quant_linear: format %d (affine) is not "
                             "implemented through quant_linear, which takes no group (call "
                             "em_quant_linear_grouped)", format);
  if (x->device_id != 0 || blocks->device_id != 0 || out->device_id != 0)
    return em_vk_quant_linear(x, blocks, format, 0, 0, out);
  return cpu_linear(x, blocks, format, 0, 0, out);
}

int em_quant_linear_grouped(const em_tensor *x, const em_tensor *blocks, int format,
                            int64_t group, int symmetric, em_tensor *out) {
  EM_NOT_NULL(-1, x);
  EM_NOT_NULL(-1, blocks);
  EM_NOT_NULL(-1, out);
  if (x->device_id != 0 || blocks->device_id != 0 || out->device_id != 0)
    return em_vk_quant_linear(x, blocks, format, group, symmetric, out);
  return cpu_linear(x, blocks, format, group, symmetric, out);
}
