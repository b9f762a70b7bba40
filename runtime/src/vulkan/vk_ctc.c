/*
 * vk_ctc.c: the Vulkan `ctc_loss` slot (kernels/ctc.comp), float32. The lengths and targets
 * are host data (the definition checked them): they go up once as a small int32 table, then
 * one workgroup per batch element runs the alpha (and beta) recursion into scratch buffers and
 * a second dispatch writes the gradient, one invocation per element of [T, N, C]. float64
 * log_probs are refused (the CPU computes in double; move them there or cast to float32).
 */
#include <stdlib.h>
#include <string.h>

#include "vk.h"

int em_vk_ctc_loss(em_tensor *nll, em_tensor *grad, const em_tensor *log_probs,
                   const em_tensor *targets, const int64_t *input_lengths,
                   const int64_t *target_lengths, const int64_t *target_offsets, int64_t blank,
                   int zero_infinity);

typedef struct ctc_push {
  uint32_t T, N, C, Smax;
  int32_t blank;
  uint32_t lp_base, nll_base, grad_base;
  uint32_t zero_infinity, want_grad;
  uint32_t total, gx;
} ctc_push;

/* An int32 tensor on `device` holding the n host values. */
static em_tensor *upload_i32(const int32_t *v, int64_t n, int device) {
  em_tensor *h = em_empty(1, &n, EM_INT32, EM_CPU);
  if (h == NULL) return NULL;
  if (n > 0) memcpy(em_data_ptr(h), v, sizeof(int32_t) * (size_t)n);
  em_tensor *d = em_to_device(h, device);
  em_release(h);
  return d;
}

int em_vk_ctc_loss(em_tensor *nll, em_tensor *grad, const em_tensor *log_probs,
                   const em_tensor *targets, const int64_t *input_lengths,
                   const int64_t *target_lengths, const int64_t *target_offsets, int64_t blank,
                   int zero_infinity) {
  vk_device *D = em_vk_device(log_probs->device_id);
  if (log_probs->dtype_id != EM_FLOAT32)
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "ctc_loss: not implemented on %s for %s "
                             "log_probs (float32 is)", D->name,
                             em_dtype_name((em_dtype)log_probs->dtype_id));
  int64_t T = log_probs->sizes[0], N = log_probs->sizes[1], C = log_probs->sizes[2];
  int64_t Lmax = 0, labels_n = 0;
  for (int64_t n = 0; n < N; n++) {
    if (target_lengths[n] > Lmax) Lmax = target_lengths[n];
    labels_n += target_lengths[n];
  }
  int64_t Smax = 2 * Lmax + 1, total = T * N * C;
  /* 32-bit indices in the kernel */
  if (N * T * Smax > INT32_MAX || log_probs->offset + total > INT32_MAX || N > 65535)
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "ctc_loss: not implemented on %s for more "
                             "than %d states or 65535 batch elements", D->name, INT32_MAX);
  int32_t *meta = malloc(sizeof(int32_t) * (size_t)(3 * N));
  int32_t *lab = malloc(sizeof(int32_t) * (size_t)(labels_n > 0 ? labels_n : 1));
  if (meta == NULL || lab == NULL) {
    free(meta);
    free(lab);
    return em_error_kind_set(EM_ERR_OOM, "ctc_loss: out of memory");
  }
  const int64_t *tg = em_data_ptr(targets);
  int64_t pos = 0;
  for (int64_t n = 0; n < N; n++) {
    meta[3 * n] = (int32_t)input_lengths[n];
    meta[3 * n + 1] = (int32_t)target_lengths[n];
    meta[3 * n + 2] = (int32_t)pos;
    for (int64_t i = 0; i < target_lengths[n]; i++) lab[pos++] = (int32_t)tg[target_offsets[n] + i];
  }
  em_tensor *dmeta = upload_i32(meta, 3 * N, log_probs->device_id);
  em_tensor *dlab = upload_i32(lab, labels_n > 0 ? labels_n : 1, log_probs->device_id);
  free(meta);
  free(lab);
  int64_t scratch = N * T * Smax > 0 ? N * T * Smax : 1;
  em_tensor *alpha = em_empty(1, &scratch, EM_FLOAT32, log_probs->device_id);
  em_tensor *beta = grad ? em_empty(1, &scratch, EM_FLOAT32, log_probs->device_id) : NULL;
  int rc = dmeta && dlab && alpha && (beta || !grad) ? 0 : -1;
  uint32_t max = D->props.limits.maxComputeWorkGroupCount[0];
  if (max > 65535) max = 65535;
  uint64_t groups = ((uint64_t)total + 255) / 256;
  uint32_t gx = (uint32_t)(groups < max ? groups : max);
  ctc_push p = {.T = (uint32_t)T, .N = (uint32_t)N, .C = (uint32_t)C, .Smax = (uint32_t)Smax,
                .blank = (int32_t)blank, .lp_base = (uint32_t)log_probs->offset,
                .nll_base = (uint32_t)nll->offset, .grad_base = grad ? (uint32_t)grad->offset : 0,
                .zero_infinity = zero_infinity != 0, .want_grad = grad != NULL,
                .total = (uint32_t)total, .gx = gx * 256u};
  if (rc == 0) {
    const em_tensor *b = beta ? beta : alpha;
    vk_launch rec = {.module = "ctc_REC", .push = &p, .push_size = sizeof p,
                     .spec = {~0u, ~0u, ~0u, ~0u},
                     .ops = {log_probs, dmeta, dlab, alpha, b, nll, grad ? grad : nll},
                     .writes = (1u << 3) | (1u << 4) | (1u << 5),
                     .groups = {(uint32_t)N, 1, 1}};
    rc = em_vk_launch_locked(&rec);
    if (rc == 0 && grad && total > 0) {
      vk_launch g = {.module = "ctc_GRAD", .push = &p, .push_size = sizeof p,
                     .spec = {~0u, ~0u, ~0u, ~0u},
                     .ops = {log_probs, dmeta, dlab, alpha, beta, nll, grad},
                     .writes = 1u << 6,
                     .groups = {gx, (uint32_t)((groups + gx - 1) / gx), 1}};
      rc = em_vk_launch_locked(&g);
    }
  }
  em_tensor *tmp[4] = {dmeta, dlab, alpha, beta};
  for (int i = 0; i < 4; i++) em_release(tmp[i]);
  if (rc != 0) em_error_prefix("ctc_loss");
  return rc;
}
