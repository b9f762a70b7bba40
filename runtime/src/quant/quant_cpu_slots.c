/* quant_cpu_slots.c: the CPU backend's quantized kernel slots (backend.h): quantize and
 * dequantize run quant_blocks.c over the contiguous blocks; quant_linear runs the CPU Linear
 * kernels (runtime/src/quant/cpu/, quant_cpu.h: every format, VNNI/AVX2/portable paths). */
#include "quant.h"
#include "quant_cpu.h"

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
  return em_quant_cpu_linear(em_data_ptr(x), x->sizes[0], x->sizes[1], em_data_ptr(w),
                             w->sizes[0], format, group, sym, em_data_ptr(out));
}
