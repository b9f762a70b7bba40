/*
 * amp.c: the definition of em_amp_unscale_ (ember.h), the fused pass behind GradScaler's
 * unscale_ (lua/ember/amp/grad_scaler.lua): PyTorch's _amp_foreach_non_finite_check_and_unscale_.
 *
 * Loss scaling multiplies the loss by S so that small 16-bit gradients do not flush to zero;
 * before the optimizer sees them the gradients must be multiplied by 1/S, and a step whose
 * gradients hold an inf or NaN (S was too large) must be skipped. Checking each gradient with
 * a host read would make the host wait once per parameter on a GPU. This op does both jobs in
 * one pass per gradient, on the device, and leaves the verdict in a one-element float32 flag
 * tensor that the caller reads once per step, whatever the number of gradients.
 *
 * The definition checks the operands (dtypes, devices, writability) and calls the device's
 * amp_unscale slot with the gradients that have elements.
 */
#include <math.h>
#include <stdlib.h>

#include "../backend.h"

static int check_flag(const char *fn, const em_tensor *found_inf) {
  if (found_inf->dtype_id != EM_FLOAT32 || em_numel(found_inf) != 1)
    return em_error("%s: expected found_inf to be a float32 tensor of one element, got a %s "
                    "tensor of %lld elements", fn, em_dtype_name((em_dtype)found_inf->dtype_id),
                    (long long)em_numel(found_inf));
  return 0;
}

/* A gradient is multiplied in place: floating, on found_inf's device, no repeated elements. */
static int check_grad(const char *fn, int i, const em_tensor *g, const em_tensor *found_inf) {
  if (g == NULL) return em_error("%s: gradient %d is NULL", fn, i + 1);
  if (!em_dtypes[g->dtype_id].is_float)
    return em_error("%s: expected floating-point gradients, got a %s tensor at position %d", fn,
                    em_dtype_name((em_dtype)g->dtype_id), i + 1);
  if (g->device_id != found_inf->device_id)
    return em_error("%s: expected every gradient on %s (found_inf's device), got gradient %d "
                    "on %s", fn, em_device_name(found_inf->device_id), i + 1,
                    em_device_name(g->device_id));
  for (int d = 0; d < g->ndim; d++)
    if (g->strides[d] == 0 && g->sizes[d] > 1)
      return em_error("%s: gradient %d has a stride-0 (expanded) dimension %d and cannot be "
                      "written in place", fn, i + 1, d + 1);
  if (g->storage == found_inf->storage)
    return em_error("%s: gradient %d shares memory with found_inf", fn, i + 1);
  return 0;
}

int em_amp_unscale_(em_tensor *const *grads, int n, em_tensor *found_inf, double inv_scale) {
  const char *fn = "amp_unscale_";
  if (found_inf == NULL) return em_error("%s: expected a found_inf tensor, got NULL", fn);
  if (n < 0 || (n > 0 && grads == NULL))
    return em_error("%s: expected a list of %d gradients, got %s", fn, n,
                    n < 0 ? "a negative count" : "NULL");
  if (isnan(inv_scale)) return em_error("%s: expected a number for inv_scale, got nan", fn);
  if (check_flag(fn, found_inf) != 0) return -1;
  for (int i = 0; i < n; i++)
    if (check_grad(fn, i, grads[i], found_inf) != 0) return -1;
  const em_backend *be = em_device_backend(found_inf->device_id);
  EM_NEED_KERNEL(fn, be, amp_unscale);
  /* Zero-size gradients have nothing to check or scale: the kernels never see them. */
  em_tensor **run = malloc(sizeof *run * (size_t)(n > 0 ? n : 1));
  if (run == NULL) return em_error_kind_set(EM_ERR_OOM, "%s: out of host memory", fn);
  int k = 0;
  for (int i = 0; i < n; i++)
    if (em_numel(grads[i]) > 0) run[k++] = grads[i];
  int rc = k > 0 ? be->amp_unscale(run, k, found_inf, inv_scale) : 0;
  if (rc == 0) {
    for (int i = 0; i < k; i++) em_bump_version(run[i]);
    em_bump_version(found_inf);
  }
  free(run);
  return rc;
}
