/*
 * quant.c: the quantized ops (DESIGN.md decision 13): quantize a dense tensor into a block
 * dtype, dequantize one back, and the Linear of a dense activation with a quantized weight.
 * Each checks shapes, dtypes and devices here and calls its device's kernel slot (quantize,
 * dequantize, quant_linear in backend.h), so the profiler sees them as it sees every op; a
 * device without the slot, or a format its kernel lacks, is "not implemented on <device>",
 * never a silent trip through the CPU or a dense weight. None records autograd: blocks hold
 * no gradient (weight-only, post-training quantization).
 */
#include <stdio.h>

#include "../autograd/record.h"
#include "../backend.h"

/* The kernel's message "quant_quantize: ..." under the op's name. */
static void rename_error(const char *fn, const char *raw) {
  const char *m = em_last_error();
  size_t n = strlen(raw);
  if (strncmp(m, raw, n) == 0 && m[n] == ':') {
    char copy[512];
    snprintf(copy, sizeof copy, "%s", m + n + 2);
    em_error("%s: %s", fn, copy);
  } else {
    em_error_prefix(fn);
  }
}

static int need_block(const char *fn, em_dtype dtype) {
  if (em_check_dtype(fn, dtype) != 0) return -1;
  if (!em_dtype_is_block(dtype))
    return em_error("%s: expected a quantized dtype (q8_0, q4_0, q4_1, q4_k, q6_k, int8_g32 ... "
                    "int4_g128_sym), got %s", fn, em_dtype_name(dtype));
  return 0;
}

/* t as a contiguous float32 tensor on its device (a new reference). */
static em_tensor *as_f32(const em_tensor *t) {
  if (t->dtype_id == EM_FLOAT32) return em_contiguous(t);
  return em_to_dtype(t, EM_FLOAT32);
}

em_tensor *em_quantize(const em_tensor *x, em_dtype dtype) {
  const char *fn = "quantize";
  if (x == NULL) return em_error_null("%s: expected a tensor, got NULL", fn);
  if (need_block(fn, dtype) != 0) return NULL;
  if (!em_dtypes[x->dtype_id].is_float)
    return em_error_null("%s: expected a floating-point tensor, got %s", fn,
                         em_dtype_name((em_dtype)x->dtype_id));
  if (x->ndim < 1) return em_error_null("%s: expected at least 1 dimension, got a 0-d tensor", fn);
  int64_t be = em_dtypes[dtype].block_elems, cols = x->sizes[x->ndim - 1];
  if (cols % be != 0)
    return em_error_null("%s: expected the last dimension to be a multiple of %lld (the %s "
                         "block), got %lld", fn, (long long)be, em_dtype_name(dtype),
                         (long long)cols);
  const em_backend *be_ = em_device_backend(x->device_id);
  if (be_->quantize == NULL)
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: not implemented on %s", fn,
                             be_->name), NULL;
  int64_t sizes[EM_MAX_DIMS];
  memcpy(sizes, x->sizes, sizeof sizes);
  sizes[x->ndim - 1] = cols / be;
  em_tensor *out = em_empty(x->ndim, sizes, dtype, x->device_id);
  if (out == NULL || em_numel(out) == 0) return out;
  em_tensor *xf = as_f32(x);
  int rc = xf ? be_->quantize(out, xf) : -1;
  em_release(xf);
  if (rc != 0) {
    rename_error(fn, "quant_quantize");
    em_release(out);
    return NULL;
  }
  return out;
}

em_tensor *em_dequantize(const em_tensor *q, em_dtype dtype) {
  const char *fn = "dequantize";
  if (q == NULL) return em_error_null("%s: expected a tensor, got NULL", fn);
  if (need_block(fn, (em_dtype)q->dtype_id) != 0) return NULL;
  if (em_check_dtype(fn, dtype) != 0) return NULL;
  if (!em_dtypes[dtype].is_float)
    return em_error_null("%s: expected a floating-point dtype to dequantize into, got %s", fn,
                         em_dtype_name(dtype));
  const em_backend *be = em_device_backend(q->device_id);
  if (be->dequantize == NULL)
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: not implemented on %s", fn,
                             be->name), NULL;
  int64_t sizes[EM_MAX_DIMS] = {1};
  int ndim = q->ndim > 0 ? q->ndim : 1;
  if (q->ndim > 0) memcpy(sizes, q->sizes, sizeof sizes);
  sizes[ndim - 1] *= em_dtypes[q->dtype_id].block_elems;
  em_tensor *out = em_empty(ndim, sizes, EM_FLOAT32, q->device_id);
  if (out == NULL || em_numel(out) == 0) goto cast;
  em_tensor *qc = em_contiguous(q);
  int rc = qc ? be->dequantize(out, qc) : -1;
  em_release(qc);
  if (rc != 0) {
    rename_error(fn, "quant_dequantize");
    em_release(out);
    return NULL;
  }
cast:
  if (out != NULL && dtype != EM_FLOAT32) {
    em_tensor *c = em_to_dtype(out, dtype);
    em_release(out);
    out = c;
  }
  return out;
}

em_tensor *em_linear_quantized(const em_tensor *x, const em_tensor *w, const em_tensor *bias) {
  const char *fn = "linear";
  if (x == NULL || w == NULL) return em_error_null("%s: expected x and w, got NULL", fn);
  if (need_block(fn, (em_dtype)w->dtype_id) != 0) return NULL;
  if (w->ndim != 2)
    return em_error_null("%s: expected a 2-D quantized weight [N, K], got %d dimensions", fn,
                         w->ndim);
  const em_tensor *ts[3] = {x, w, bias};
  if (em_check_same_device(fn, bias ? 3 : 2, ts) != 0) return NULL;
  /* the kernels have no backward: a gradient that silently stopped here would be wrong */
  const em_tensor *grad_ins[2] = {x, bias};
  if (em_ag_should_record(bias ? 2 : 1, grad_ins))
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: the product with a quantized weight "
                             "has no backward (weight-only quantization is for inference: run "
                             "it under no_grad)", fn), NULL;
  if (!em_dtypes[x->dtype_id].is_float)
    return em_error_null("%s: expected a floating-point input, got %s", fn,
                         em_dtype_name((em_dtype)x->dtype_id));
  int64_t n = w->sizes[0], k = w->sizes[1] * em_dtypes[w->dtype_id].block_elems;
  if (x->ndim < 1 || x->sizes[x->ndim - 1] != k)
    return em_error_null("%s: expected the input's last dimension to be %lld (the %s weight's "
                         "in_features), got %lld", fn, (long long)k,
                         em_dtype_name((em_dtype)w->dtype_id),
                         (long long)(x->ndim < 1 ? 0 : x->sizes[x->ndim - 1]));
  const em_backend *be = em_device_backend(x->device_id);
  if (be->quant_linear == NULL)
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: not implemented on %s for %s", fn,
                             be->name, em_dtype_name((em_dtype)w->dtype_id)), NULL;
  int64_t m = k > 0 ? em_numel(x) / k : 0;
  int64_t x2s[2] = {m, k}, o2s[2] = {m, n};
  em_tensor *xf = as_f32(x), *x2 = xf ? em_reshape(xf, 2, x2s) : NULL, *wc = em_contiguous(w);
  em_tensor *out = x2 && wc ? em_empty(2, o2s, EM_FLOAT32, x->device_id) : NULL;
  int rc = out ? 0 : -1;
  if (out && m > 0 && n > 0) rc = be->quant_linear(out, x2, wc);
  em_release(xf);
  em_release(x2);
  em_release(wc);
  if (rc != 0) {
    em_error_prefix(fn);
    em_release(out);
    return NULL;
  }
  int64_t sizes[EM_MAX_DIMS];
  memcpy(sizes, x->sizes, sizeof sizes);
  sizes[x->ndim - 1] = n;
  em_tensor *r = em_view(out, x->ndim, sizes);
  em_release(out);
  if (r && bias) {
    em_tensor *rb = em_binary(EM_ADD, r, bias);
    em_release(r);
    r = rb;
  }
  if (r && x->dtype_id != EM_FLOAT32) {
    em_tensor *c = em_to_dtype(r, (em_dtype)x->dtype_id);
    em_release(r);
    r = c;
  }
  return r;
}
