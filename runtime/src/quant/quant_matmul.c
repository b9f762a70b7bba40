/* quant_matmul.c: the Linear of a dense float32 activation with a quantized weight on the CPU,
 * out[m, n] = sum_k x[m, k] * W[n, k], without materializing W.
 *
 * As ggml does, each activation row is first quantized to int8 per 32-weight block (one float
 * scale per block: amax / 127); a block's product is then an int32 dot product of the codes
 * times the two scales. Q8_0 and Q4_0 weights have kernels; other formats are refused.
 * Portable C (the compiler vectorizes the 32-wide int loops); rows of the output are spread
 * over OpenMP threads. A VNNI path can slot in behind the same function later.
 * Tensors on a Vulkan device go to its kernels (vk_quant_matmul.c, every format). */
#include "../internal.h"
#include "quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* x (k floats, k a multiple of 32) -> int8 codes and one scale per block. */
static void quantize_act(const float *x, int64_t k, int8_t *q, float *d) {
  for (int64_t b = 0; b < k / 32; b++) {
    float amax = 0;
    for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[b * 32 + j]));
    float s = amax / 127.0f, inv = s != 0 ? 1.0f / s : 0.0f;
    d[b] = s;
    for (int j = 0; j < 32; j++) q[b * 32 + j] = (int8_t)lrintf(x[b * 32 + j] * inv);
  }
}

static float wscale(const uint8_t *blk) {
  uint16_t h;
  memcpy(&h, blk, 2);
  return em_half_to_float(h);
}

/* One output: the row of weights (nb blocks) against the quantized activation row. */
static float dot_row(int format, const uint8_t *w, const int8_t *q, const float *d, int64_t nb) {
  float acc = 0;
  for (int64_t b = 0; b < nb; b++) {
    int32_t s = 0;
    const int8_t *qb = q + b * 32;
    if (format == EM_QUANT_Q8_0) {
      const uint8_t *blk = w + b * 34;
      for (int j = 0; j < 32; j++) s += (int32_t)(int8_t)blk[2 + j] * qb[j];
      acc += (float)s * wscale(blk) * d[b];
    } else {
      const uint8_t *blk = w + b * 18;
      for (int j = 0; j < 16; j++)
        s += ((int32_t)(blk[2 + j] & 15) - 8) * qb[j] + ((int32_t)(blk[2 + j] >> 4) - 8) * qb[16 + j];
      acc += (float)s * wscale(blk) * d[b];
    }
  }
  return acc;
}

int em_quant_linear(const em_tensor *x, const em_tensor *blocks, int format, em_tensor *out) {
  EM_NOT_NULL(-1, x);
  EM_NOT_NULL(-1, blocks);
  EM_NOT_NULL(-1, out);
  if (x->device_id != 0 || blocks->device_id != 0 || out->device_id != 0) {
    if (format == EM_QUANT_AFFINE8 || format == EM_QUANT_AFFINE4)
      return em_error("quant_linear: the affine formats need their group and symmetry: call "
                      "em_quant_linear_grouped");
    return em_vk_quant_linear(x, blocks, format, 0, 0, out);
  }
  if (format != EM_QUANT_Q8_0 && format != EM_QUANT_Q4_0)
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "quant_linear: format %d is not "
                             "implemented on cpu (Q8_0 and Q4_0 are)", format);
  if (x->ndim != 2 || out->ndim != 2 || x->dtype_id != EM_FLOAT32 || out->dtype_id != EM_FLOAT32 ||
      !em_is_contiguous(x) || !em_is_contiguous(out) || blocks->dtype_id != EM_UINT8 ||
      !em_is_contiguous(blocks))
    return em_error("quant_linear: expected contiguous float32 x [M, K] and out [M, N], and "
                    "contiguous uint8 blocks");
  int64_t m = x->sizes[0], k = x->sizes[1], n = out->sizes[1];
  int64_t bb = format == EM_QUANT_Q8_0 ? 34 : 18;
  if (out->sizes[0] != m || k % 32 != 0 || em_numel(blocks) != n * (k / 32) * bb)
    return em_error("quant_linear: expected x [M, K] (K whole blocks of 32), out [M, N] and "
                    "N * K / 32 blocks; got x [%lld, %lld], out [%lld, %lld], %lld bytes",
                    (long long)m, (long long)k, (long long)out->sizes[0], (long long)n,
                    (long long)em_numel(blocks));
  int64_t nb = k / 32;
  int8_t *q = malloc((size_t)(m * k > 0 ? m * k : 1));
  float *d = malloc((size_t)(m * nb > 0 ? m * nb : 1) * sizeof(float));
  if (!q || !d) { free(q); free(d); return em_error("quant_linear: out of memory"); }
  const float *xp = em_data_ptr(x);
  const uint8_t *w = em_data_ptr(blocks);
  float *o = em_data_ptr(out);
  for (int64_t i = 0; i < m; i++) quantize_act(xp + i * k, k, q + i * k, d + i * nb);
  int threads = em_get_num_threads();
  /* over weight rows: each thread reads its share of the weight once, for every activation row */
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t j = 0; j < n; j++)
    for (int64_t i = 0; i < m; i++)
      o[i * n + j] = dot_row(format, w + j * nb * bb, q + i * k, d + i * nb, nb);
  free(q);
  free(d);
  return 0;
}

int em_quant_linear_grouped(const em_tensor *x, const em_tensor *blocks, int format,
                            int64_t group, int symmetric, em_tensor *out) {
  EM_NOT_NULL(-1, x);
  EM_NOT_NULL(-1, blocks);
  EM_NOT_NULL(-1, out);
  if (x->device_id != 0 || blocks->device_id != 0 || out->device_id != 0)
    return em_vk_quant_linear(x, blocks, format, group, symmetric, out);
  return em_quant_linear(x, blocks, format, out);
}
