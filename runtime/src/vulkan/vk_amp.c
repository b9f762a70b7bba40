/*
 * vk_amp.c: the Vulkan amp_unscale slot (kernels/amp_unscale.comp; runtime/src/cpu/amp.c is
 * the reference). One dispatch per gradient, all recorded into the current batch without a
 * host wait; each writes found_inf on the device only when it saw an inf or NaN. The host
 * learns the verdict when it reads found_inf (GradScaler does, once per step), so a step costs
 * one wait however many parameters the model has.
 *
 * The kernel takes the gradient contiguous from any offset. A strided gradient (rare: autograd
 * makes contiguous ones) goes through a contiguous temporary copied on the device and back.
 */
#include "vk.h"

enum { WG = 256 };

typedef struct amp_push {
  uint32_t n, off, flag_off;
  float inv;
} amp_push;

static const char *module_for(vk_device *D, em_dtype dt) {
  switch (dt) {
  case EM_FLOAT32: return "amp_unscale_F32";
  case EM_FLOAT16: return "amp_unscale_F16";
  case EM_BFLOAT16: return "amp_unscale_BF16";
  case EM_FLOAT64:
    if (D->features & EM_FEATURE_FLOAT64) return "amp_unscale_F64";
    em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "amp_unscale_: not implemented on %s for float64 "
                      "(the device has no float64)", D->name);
    return NULL;
  default:
    em_error("amp_unscale_: expected floating-point gradients, got %s", em_dtype_name(dt));
    return NULL;
  }
}

/* One dispatch over the contiguous gradient g. */
static int launch(vk_device *D, const char *module, em_tensor *g, em_tensor *found_inf,
                  float inv) {
  int64_t n = em_numel(g);
  if (g->offset + n > INT32_MAX || found_inf->offset > INT32_MAX)
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "amp_unscale_: not implemented on %s for "
                             "tensors of more than %d elements", D->name, INT32_MAX);
  amp_push p = {.n = (uint32_t)n, .off = (uint32_t)g->offset,
                .flag_off = (uint32_t)found_inf->offset, .inv = inv};
  bool check_only = inv == 1.0f;
  /* 16-bit invocations own words: half as many are needed */
  int64_t items = em_dtypes[g->dtype_id].size == 2 ? (n + 2) / 2 : n;
  uint64_t groups = ((uint64_t)items + WG - 1) / WG;
  uint32_t max_groups = D->props.limits.maxComputeWorkGroupCount[0];
  vk_launch L = {
      .module = module,
      .push = &p,
      .push_size = sizeof p,
      .spec = {check_only ? 1u : 0u, ~0u, ~0u, ~0u},
      .ops = {g, found_inf},
      .writes = (check_only ? 0u : 1u) | 2u,
      .groups = {(uint32_t)(groups < max_groups ? groups : max_groups), 1, 1},
  };
  return em_vk_launch_locked(&L);
}

/* A gradient through a contiguous temporary when it is not contiguous itself. */
static int unscale_one(vk_device *D, em_tensor *g, em_tensor *found_inf, float inv) {
  const char *module = module_for(D, (em_dtype)g->dtype_id);
  if (module == NULL) return -1;
  if (em_is_contiguous(g)) return launch(D, module, g, found_inf, inv);
  em_tensor *tmp = em_empty(g->ndim, g->sizes, (em_dtype)g->dtype_id, g->device_id);
  int rc = tmp ? em_vk_copy(tmp, g) : -1;
  if (rc == 0) rc = launch(D, module, tmp, found_inf, inv);
  if (rc == 0 && inv != 1.0f) rc = em_vk_copy(g, tmp);
  em_release(tmp);
  return rc;
}

int em_vk_amp_unscale(em_tensor *const *grads, int n, em_tensor *found_inf, double inv_scale) {
  vk_device *D = em_vk_device(found_inf->device_id);
  /* every dtype checked before anything is recorded, so an error changes nothing */
  for (int i = 0; i < n; i++)
    if (module_for(D, (em_dtype)grads[i]->dtype_id) == NULL) return -1;
  for (int i = 0; i < n; i++)
    if (unscale_one(D, grads[i], found_inf, (float)inv_scale) != 0) return -1;
  return 0;
}
