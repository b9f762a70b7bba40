/* quant_matmul.c: the public Linear of a dense float32 activation with a quantized weight,
 * out[m, n] = sum_k x[m, k] * W[n, k], without materializing W: checks the tensors, then runs
 * the CPU kernels (runtime/src/quant/cpu/, quant_cpu.h: activations quantized to int8 per 32,
 * int32 dot products, VNNI/AVX2/portable paths, threads). The ggml formats are accepted; the
 * affine formats need a group, which this function does not take. */
#include "../internal.h"
#include "quant.h"
#include "quant_cpu.h"

int em_quant_linear(const em_tensor *x, const em_tensor *blocks, int format, em_tensor *out) {
  EM_NOT_NULL(-1, x);
  EM_NOT_NULL(-1, blocks);
  EM_NOT_NULL(-1, out);
  if (x->device_id != 0 || blocks->device_id != 0 || out->device_id != 0)
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "quant_linear: not implemented on %s",
                             em_device_name(x->device_id != 0 ? x->device_id : blocks->device_id));
  if (format == EM_QUANT_AFFINE8 || format == EM_QUANT_AFFINE4)
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "quant_linear: format %d (affine) is not "
                             "implemented through quant_linear, which takes no group", format);
  int64_t be = 0, bb = 0;
  if (em_quant_block_size(format, 0, 0, &be, &bb) != 0) return -1;
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
  return em_quant_cpu_linear(em_data_ptr(x), m, k, em_data_ptr(blocks), n, format, 0, 0,
                             em_data_ptr(out));
}
