/*
 * nn_ctc.c: the definition of the CTC loss (em_ctc_loss, PyTorch's F.ctc_loss with reduction
 * 'none'): argument checks, the device's ctc_loss kernel, and the autograd record.
 *
 * The kernel computes the gradient in the same pass as the loss (the backward variables need
 * the forward ones anyway), when log_probs requires grad; the backward then only scales it by
 * the incoming gradient per batch element. Lengths and targets are small host data: they are
 * read on the CPU, as PyTorch's CPU kernel does (the Vulkan kernel uploads what it needs). The
 * slot is optional: a device without it raises "ctc_loss: not implemented on <device>".
 */
#include "../autograd/record.h"
#include "../backend.h"
#include "../nn.h"

#include <stdlib.h>

static int check_lengths(const char *fn, const char *what, const em_tensor *t, int64_t N) {
  if (t == NULL) return em_error("%s: expected %s, got NULL", fn, what);
  if (t->dtype_id != EM_INT64 || t->device_id != EM_CPU || t->ndim != 1 || t->sizes[0] != N ||
      !em_is_contiguous(t)) {
    char b[EM_SHAPE_BUF];
    return em_error("%s: expected %s as a contiguous int64 [%lld] tensor on the CPU, got %s %s",
                    fn, what, (long long)N, em_dtype_name((em_dtype)t->dtype_id),
                    em_shape_str(b, sizeof b, t->ndim, t->sizes));
  }
  return 0;
}

/* Checks lengths and classes; fills each element's offset into the targets. */
static int check_targets(const char *fn, const em_tensor *lp, const em_tensor *targets,
                         const int64_t *il, const int64_t *tl, int64_t *off, int64_t blank) {
  int64_t T = lp->sizes[0], N = lp->sizes[1], C = lp->sizes[2];
  bool padded = targets->ndim == 2;
  if (targets->dtype_id != EM_INT64 || targets->device_id != EM_CPU ||
      (targets->ndim != 1 && targets->ndim != 2) || (padded && targets->sizes[0] != N) ||
      !em_is_contiguous(targets))
    return em_error("%s: expected int64 targets on the CPU, [N, S] or 1-D, contiguous", fn);
  if (blank < 0 || blank >= C)
    return em_error("%s: blank %lld is out of range for %lld classes", fn, (long long)blank,
                    (long long)C);
  const int64_t *tg = em_data_ptr(targets);
  int64_t total = em_numel(targets), pos = 0;
  for (int64_t n = 0; n < N; n++) {
    if (il[n] < 0 || il[n] > T)
      return em_error("%s: input length %lld of batch element %lld is out of range [0, %lld]", fn,
                      (long long)il[n], (long long)n + 1, (long long)T);
    int64_t cap = padded ? targets->sizes[1] : total - pos;
    if (tl[n] < 0 || tl[n] > cap)
      return em_error("%s: target length %lld of batch element %lld is out of range [0, %lld]",
                      fn, (long long)tl[n], (long long)n + 1, (long long)cap);
    off[n] = padded ? n * targets->sizes[1] : pos;
    for (int64_t i = 0; i < tl[n]; i++) {
      int64_t c = tg[off[n] + i];
      if (c < 0 || c >= C)
        return em_error("%s: class index %lld is out of range for %lld classes", fn,
                        (long long)c, (long long)C);
    }
    if (!padded) pos += tl[n];
  }
  return 0;
}

em_tensor *em_ctc_loss(const em_tensor *log_probs, const em_tensor *targets,
                       const em_tensor *input_lengths, const em_tensor *target_lengths,
                       int64_t blank, int zero_infinity) {
  const char *fn = "ctc_loss";
  if (log_probs == NULL || targets == NULL)
    return em_error_null("%s: expected log_probs and targets tensors, got NULL", fn);
  if (log_probs->ndim != 3) {
    char b[EM_SHAPE_BUF];
    return em_error_null("%s: expected log_probs [T, N, C], got %s", fn,
                         em_shape_str(b, sizeof b, log_probs->ndim, log_probs->sizes));
  }
  if (log_probs->dtype_id != EM_FLOAT32 && log_probs->dtype_id != EM_FLOAT64)
    return em_error_null("%s: expected float32 or float64 log_probs, got %s", fn,
                         em_dtype_name((em_dtype)log_probs->dtype_id));
  const em_backend *be = em_device_backend(log_probs->device_id);
  if (be->ctc_loss == NULL)
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: not implemented on %s", fn, be->name),
           NULL;
  int64_t N = log_probs->sizes[1];
  if (check_lengths(fn, "input_lengths", input_lengths, N) != 0 ||
      check_lengths(fn, "target_lengths", target_lengths, N) != 0)
    return NULL;
  const int64_t *il = em_data_ptr(input_lengths), *tl = em_data_ptr(target_lengths);
  int64_t *off = malloc(sizeof(int64_t) * (size_t)(N > 0 ? N : 1));
  if (off == NULL) return em_error_kind_set(EM_ERR_OOM, "%s: out of memory", fn), NULL;
  em_tensor *lp = NULL, *loss = NULL, *grad = NULL;
  int rc = check_targets(fn, log_probs, targets, il, tl, off, blank);
  const em_tensor *ins[1] = {log_probs};
  bool record = em_ag_should_record(1, ins);
  if (rc == 0) {
    lp = em_contiguous(log_probs);
    loss = em_empty(1, &N, (em_dtype)log_probs->dtype_id, log_probs->device_id);
    if (record)
      grad = em_empty(3, log_probs->sizes, (em_dtype)log_probs->dtype_id, log_probs->device_id);
    rc = lp && loss && (grad || !record) ? 0 : -1;
  }
  if (rc == 0 && N > 0)
    rc = be->ctc_loss(loss, grad, lp, targets, il, tl, off, blank, zero_infinity);
  if (rc == 0 && record && em_ag_record_ctc(loss, log_probs, grad) != 0) rc = -1;
  free(off);
  em_release(lp);
  em_release(grad);
  if (rc != 0) {
    em_error_prefix(fn);
    em_release(loss);
    return NULL;
  }
  return loss;
}
