/* quant_dtype.c: block dtypes (ember.h's EM_Q8_0 ... EM_INT4_G128_SYM) to the raw formats of
 * quant_blocks.c (em_quant_format, group, symmetry), the one mapping the op definitions and the
 * device kernels share. */
#include "quant.h"

int em_quant_dtype_format(const char *fn, em_dtype dtype, int *format, int64_t *group,
                          int *symmetric) {
  *group = 0;
  *symmetric = 0;
  switch (dtype) {
  case EM_Q8_0: *format = EM_QUANT_Q8_0; return 0;
  case EM_Q4_0: *format = EM_QUANT_Q4_0; return 0;
  case EM_Q4_1: *format = EM_QUANT_Q4_1; return 0;
  case EM_Q4_K: *format = EM_QUANT_Q4_K; return 0;
  case EM_Q6_K: *format = EM_QUANT_Q6_K; return 0;
  default: break;
  }
  if (dtype >= EM_INT8_G32 && dtype <= EM_INT4_G128_SYM) {
    /* six of each width: groups 32, 64, 128, each with a minimum then symmetric */
    int i = (int)dtype - (int)EM_INT8_G32;
    *format = i < 6 ? EM_QUANT_AFFINE8 : EM_QUANT_AFFINE4;
    *group = 32 << ((i % 6) / 2);
    *symmetric = i % 2;
    return 0;
  }
  return em_error("%s: expected a quantized (block) dtype, got %s", fn, em_dtype_name(dtype));
}

void em_quant_bytes_2d(em_tensor *v, const em_tensor *t) {
  int64_t bs = (int64_t)em_dtypes[t->dtype_id].size;
  int64_t cols = t->ndim > 0 ? t->sizes[t->ndim - 1] : 1;
  int64_t rows = cols > 0 ? em_numel(t) / cols : 0;
  em_header_copy(v, t);
  v->grad_meta = NULL;
  v->flags = 0;
  v->dtype_id = EM_UINT8;
  v->ndim = 2;
  v->sizes[0] = rows;
  v->sizes[1] = cols * bs;
  v->strides[0] = cols * bs;
  v->strides[1] = 1;
  v->offset = t->offset * bs;
}
