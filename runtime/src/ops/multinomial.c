/*
 * multinomial.c: the definition of em_multinomial (PyTorch's torch.multinomial): n draws of
 * category indices per row of non-negative weights, with or without replacement.
 *
 * The definition checks what it can without looking at the weights (rank, dtype, n), copies
 * the weights into a private contiguous buffer of the compute dtype (float64 stays float64,
 * every other floating dtype becomes float32, exactly), reserves the draws' words of the
 * Philox stream (random.h) and calls the device's `multinomial` kernel. The checks that need
 * the weights themselves (negative, inf or NaN weights, a zero row, too few nonzero weights
 * without replacement) are the kernel's: the CPU raises them at the call, a GPU at its next
 * synchronization, so that sampling never waits for the device. multinomial.h has the
 * algorithm both kernels follow and the order of the checks. Without replacement the kernel
 * turns the weights into exponential-race keys and the n smallest are taken here (topk).
 */
#include <stdio.h>

#include "../backend.h"
#include "../multinomial.h"
#include "../random.h"

void em_multinomial_message(char *buf, size_t cap, em_mn_status st, int64_t row, int64_t pos,
                            double value, int64_t n, const char *dtype) {
  long long r = (long long)row + 1, p = (long long)pos + 1;
  switch (st) {
  case EM_MN_BAD_WEIGHT: {
    char v[32];
    if (value != value) snprintf(v, sizeof v, "nan"); /* printf may write -nan */
    else snprintf(v, sizeof v, "%g", value);
    snprintf(buf, cap, "multinomial: expected finite, non-negative weights, got %s at row %lld, "
             "position %lld (counting from 1)", v, r, p);
    break;
  }
  case EM_MN_ZERO_ROW:
    snprintf(buf, cap, "multinomial: the weights of row %lld (counting from 1) are all zero",
             r);
    break;
  case EM_MN_OVERFLOW:
    snprintf(buf, cap, "multinomial: the weights of row %lld (counting from 1) sum to inf in "
             "%s; scale them down", r, dtype);
    break;
  case EM_MN_TOO_FEW:
    snprintf(buf, cap, "multinomial: cannot draw %lld samples without replacement from row %lld "
             "(counting from 1), which has %lld nonzero weights", (long long)n, r,
             (long long)pos);
    break;
  default:
    snprintf(buf, cap, "multinomial: the kernel reported an unknown error (%d)", (int)st);
    break;
  }
}

em_tensor *em_multinomial(const em_tensor *probs, int64_t n, int replacement) {
  const char *fn = "multinomial";
  if (probs == NULL) return em_error_null("%s: expected a tensor, got NULL", fn);
  em_dtype dt = (em_dtype)probs->dtype_id;
  if (!em_dtypes[dt].is_float)
    return em_error_null("%s: expected floating point weights, got %s", fn, em_dtype_name(dt));
  if (probs->ndim != 1 && probs->ndim != 2)
    return em_error_null("%s: expected weights of 1 or 2 dimensions, got %d", fn, probs->ndim);
  int64_t rows = probs->ndim == 2 ? probs->sizes[0] : 1;
  int64_t K = probs->sizes[probs->ndim - 1];
  if (K == 0) return em_error_null("%s: expected at least one category, got 0", fn);
  if (n <= 0) return em_error_null("%s: expected a number of samples >= 1, got %lld", fn,
                                   (long long)n);
  if (!replacement && n > K)
    return em_error_null("%s: cannot draw %lld samples without replacement from %lld "
                         "categories", fn, (long long)n, (long long)K);
  if (K > INT32_MAX || n > INT32_MAX)
    return em_error_null("%s: at most %d categories and samples, got %lld and %lld", fn,
                         INT32_MAX, (long long)K, (long long)n);
  const em_backend *be = em_device_backend(probs->device_id);
  if (be->multinomial == NULL) {
    em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: not implemented on %s", fn, be->name);
    return NULL;
  }
  int64_t osz[2] = {rows, n}, wsz[2] = {rows, K};
  em_dtype cdt = dt == EM_FLOAT64 ? EM_FLOAT64 : EM_FLOAT32;
  em_tensor *out = em_empty(2, osz, EM_INT64, probs->device_id);
  em_tensor *w = out ? em_empty(2, wsz, cdt, probs->device_id) : NULL;
  em_tensor *src = w == NULL ? NULL
                   : probs->ndim == 2 ? em_retain((em_tensor *)probs) : em_view(probs, 2, wsz);
  em_tensor *res = NULL;
  /* the device's copy kernel (a cast too): an internal step, which autograd must not record */
  if (src == NULL || (rows > 0 && be->copy(w, src) != 0)) goto done;
  if (rows > 0) {
    uint64_t words = (uint64_t)rows * (uint64_t)(replacement ? n : K);
    uint64_t seed, offset = em_rng_reserve((words + 3) / 4, &seed);
    if (be->multinomial(replacement ? out : NULL, w, n, replacement != 0, seed, offset) != 0)
      goto done;
  }
  if (!replacement) { /* the n smallest keys of each row, in ascending order */
    em_release(out);
    out = NULL;
    if (em_topk(w, n, 1, 0, 1, NULL, &out) != 0) goto done;
  }
  res = probs->ndim == 1 ? em_view(out, 1, &n) : em_retain(out);
done:
  if (res == NULL) em_error_prefix(fn);
  em_release(out);
  em_release(w);
  em_release(src);
  return res;
}
