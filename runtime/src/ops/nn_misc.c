/*
 * nn_misc.c: dropout and embedding.
 *
 * dropout is composed: a Bernoulli mask from the process's Philox stream (so it follows
 * manual_seed), scaled by 1 / (1 - p) in place, then one recorded multiply. Its backward is
 * therefore the gradient times the same scaled mask, and it runs on any device that has the
 * random and binary kernels. (A fused kernel would save one pass over a mask the size of the
 * input; dropout acts on small activations in the models this serves, so it waits for a
 * measurement that asks for it.)
 *
 * embedding picks rows with index_select and records its own node, whose backward adds the
 * gradient rows into a zero weight gradient (index_add), skipping padding_idx.
 */
#include <math.h>

#include "../autograd/record.h"
#include "../nn.h"

em_tensor *em_dropout(const em_tensor *input, double p, int training) {
  const char *fn = "dropout";
  if (input == NULL) return em_error_null("%s: expected an input tensor, got NULL", fn);
  if (!(p >= 0 && p <= 1)) /* also refuses NaN */
    return em_error_null("%s: expected p between 0 and 1, got %g", fn, p);
  if (!em_dtypes[input->dtype_id].is_float)
    return em_error_null("%s: expected a floating point input, got %s", fn,
                         em_dtype_name((em_dtype)input->dtype_id));
  /* PyTorch returns the input itself when nothing would change */
  if (!training || p == 0 || em_numel(input) == 0) return em_retain((em_tensor *)input);
  if (p == 1) return em_binary_scalar(EM_MUL, input, 0.0, 0);
  em_tensor *mask = em_empty(input->ndim, input->sizes, (em_dtype)input->dtype_id,
                             input->device_id);
  int rc = mask ? em_bernoulli_(mask, 1.0 - p) : -1;
  if (rc == 0) rc = em_binary_scalar_(EM_MUL, mask, 1.0 / (1.0 - p));
  em_tensor *y = rc == 0 ? em_binary(EM_MUL, input, mask) : NULL;
  em_release(mask);
  if (y == NULL) em_error_prefix(fn);
  return y;
}

/* Indices as a flat contiguous int64 tensor, bounds-checked against `rows`: on a device with
 * check_index, by a check queued there (reported at its next synchronization; the host would
 * otherwise wait for the device three times per lookup), else on the host. */
static em_tensor *flat_indices(const char *fn, const em_tensor *indices, int64_t rows) {
  em_tensor *i64 = indices->dtype_id == EM_INT64 ? em_retain((em_tensor *)indices)
                                                 : em_to_dtype(indices, EM_INT64);
  int64_t n = em_numel(indices);
  em_tensor *flat = i64 ? em_reshape(i64, 1, &n) : NULL;
  em_release(i64);
  if (flat == NULL || n == 0) return flat;
  const em_backend *be = em_device_backend(flat->device_id);
  int rc = be->check_index ? be->check_index(fn, EM_INDEX_ROWS, 0, flat, rows) : 1;
  if (rc > 0) {
    em_tensor *lo = em_reduce(EM_AMIN, flat, 0, NULL, 0), *hi = em_reduce(EM_AMAX, flat, 0, NULL, 0);
    int64_t a = 0, b = 0;
    rc = lo && hi && em_item_int64(lo, &a) == 0 && em_item_int64(hi, &b) == 0 ? 0 : -1;
    em_release(lo);
    em_release(hi);
    if (rc == 0 && (a < 0 || b >= rows)) {
      char msg[256];
      em_index_message(msg, sizeof msg, fn, EM_INDEX_ROWS, 0, a < 0 ? a : b, rows);
      rc = em_error("%s", msg);
    }
  }
  if (rc != 0) {
    em_release(flat);
    return NULL;
  }
  return flat;
}

em_tensor *em_embedding(const em_tensor *weight, const em_tensor *indices, int64_t padding_idx) {
  const char *fn = "embedding";
  if (weight == NULL || indices == NULL)
    return em_error_null("%s: expected weight and indices tensors, got NULL", fn);
  if (weight->ndim != 2) return em_error_null("%s: expected a 2-D weight, got %d-D", fn, weight->ndim);
  if (em_check_not_block(fn, weight) != 0) return NULL; /* quantized: ember.quant's Embedding */
  if (em_dtypes[indices->dtype_id].is_float || indices->dtype_id == EM_BOOL)
    return em_error_null("%s: expected integer indices, got %s", fn,
                         em_dtype_name((em_dtype)indices->dtype_id));
  if (indices->ndim >= EM_MAX_DIMS)
    return em_error_null("%s: expected indices with at most %d dims, got %d", fn,
                         EM_MAX_DIMS - 1, indices->ndim);
  const em_tensor *ts[2] = {weight, indices};
  if (em_check_same_device(fn, 2, ts) != 0) return NULL;
  int64_t V = weight->sizes[0], D = weight->sizes[1];
  if (padding_idx >= V)
    return em_error_null("%s: expected padding_idx below the %lld rows, got %lld", fn,
                         (long long)V, (long long)padding_idx);
  em_tensor *flat = flat_indices(fn, indices, V);
  if (flat == NULL) return NULL;
  int mode = em_set_grad_enabled(0); /* the op records itself, below */
  em_tensor *rows = em_index_select_checked(weight, 0, flat);
  int64_t sizes[EM_MAX_DIMS];
  memcpy(sizes, indices->sizes, sizeof(int64_t) * (size_t)indices->ndim);
  sizes[indices->ndim] = D;
  em_tensor *out = rows ? em_reshape(rows, indices->ndim + 1, sizes) : NULL;
  em_set_grad_enabled(mode);
  em_release(rows);
  const em_tensor *ins[1] = {weight};
  if (out && em_ag_should_record(1, ins) &&
      em_ag_record_embedding(out, weight, flat, padding_idx < 0 ? -1 : padding_idx) != 0) {
    em_release(out);
    out = NULL;
  }
  em_release(flat);
  if (out == NULL) em_error_prefix(fn);
  return out;
}
