/* quant_cpu_slots.c: the CPU backend's quantized kernel slots (backend.h): quantize and
 * dequantize run quant_blocks.c over the contiguous blocks; quant_linear runs the CPU Linear
 * kernel. Where the optimized kernel (em_quant_cpu_linear, runtime/src/quant/cpu/) is linked
 * in it serves; otherwise the portable one of quant_matmul.c (Q8_0 and Q4_0) does, and other
 * formats are "not implemented on cpu". */
#include "quant.h"

/* Weak: the library builds with or without the optimized kernel. */
__attribute__((weak)) int em_quant_cpu_linear(const float *x, int64_t m, int64_t k,
                                              const uint8_t *w, int64_t n, int format,
                                              int64_t group, int symmetric, float *out);

int em_cpu_quantize(em_tensor *out, const em_tensor *x) {
  int format, sym;
  int64_t group;
  if (em_quant_dtype_format("quantize", (em_dtype)out->dtype_id, &format, &group, &sym) != 0)
    return -1;
  return em_quant_quantize(format, group, sym, em_data_ptr(x), em_numel(x), em_data_ptr(out));
}

int em_cpu_dequantize(em_tensor *out, const em_tensor *q) {
  int format, sym;
  int64_t group;
  if (em_quant_dtype_format("dequantize", (em_dtype)q->dtype_id, &format, &group, &sym) != 0)
    return -1;
  return em_quant_dequantize(format, group, sym, em_data_ptr(q), em_numel(out), em_data_ptr(out));
}

int em_cpu_quant_linear(em_tensor *out, const em_tensor *x, const em_tensor *w) {
  int format, sym;
  int64_t group;
  if (em_quant_dtype_format("linear", (em_dtype)w->dtype_id, &format, &group, &sym) != 0)
    return -1;
  if (em_quant_cpu_linear)
    return em_quant_cpu_linear(em_data_ptr(x), x->sizes[0], x->sizes[1], em_data_ptr(w),
                               w->sizes[0], format, group, sym, em_data_ptr(out));
  if (format != EM_QUANT_Q8_0 && format != EM_QUANT_Q4_0)
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "linear: not implemented on cpu for %s "
                             "(q8_0 and q4_0 are)", em_dtype_name((em_dtype)w->dtype_id));
  em_tensor bytes;
  em_quant_bytes_2d(&bytes, w);
  return em_quant_linear(x, &bytes, format, out);
}
