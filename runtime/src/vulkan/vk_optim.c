/*
 * vk_optim.c: the Vulkan sgd_step and adam_step slots, one fused dispatch each
 * (kernels/optim.comp; runtime/src/cpu/optim.c is the reference).
 *
 * The hyperparameters go in push constants, in the parameter's type for float32 / float64
 * (float for 16-bit parameters): changing the learning rate or the step number costs neither
 * an upload nor a host wait. The options that pick a path (momentum, Nesterov, the first step,
 * maximize, weight decay, AdamW, AMSGrad, a contiguous grad) are specialization constants.
 *
 * A conditional step (options.found_inf) binds the flag as operand 5: every invocation reads
 * it first and writes nothing when it is set, so the verdict never travels to the host.
 *
 * The kernel takes the written tensors contiguous, grad with up to 3 coalesced dimensions of
 * any strides. Anything else (a transposed parameter, a grad of 4+ scattered dimensions) goes
 * through contiguous temporaries copied on the device: correct, one extra pass, rare.
 */
#include <math.h>

#include "vk.h"

enum { WG = 256, NOPS = 5 }; /* operands 0-4; the flag is operand 5 */
enum {
  F_HAS_BUF = 1, F_NESTEROV = 2, F_FIRST = 4, F_MAXIMIZE = 8, F_WD = 16, F_DECOUPLED = 32,
  F_AMSGRAD = 64, F_GRAD_CONTIG = 128, F_FOUND_INF = 256
};

/* kernels/optim.comp's push constants; s[] is float or double after the header. */
typedef struct optim_head {
  uint32_t n, off[5], gsize[3];
  int32_t gstride[3];
  uint32_t found_off, pad; /* found_inf's element; pad keeps s[] 8-byte aligned */
} optim_head;
_Static_assert(sizeof(optim_head) == 56, "optim_head must match optim.comp's layout");
typedef struct optim_push {
  optim_head h;
  union { float f[9]; double d[9]; } s;
} optim_push;
_Static_assert(sizeof(optim_push) <= VK_MAX_PUSH, "optim push constants exceed 128 bytes");

typedef struct optim_call {
  uint32_t algo, flags;
  double s[9];
  int ns;
  const em_tensor *found_inf; /* NULL: unconditional */
} optim_call;

/* Coalesces grad's strides over the (row-major) shape into at most 3 dimensions, innermost
 * first; false when more are needed. */
static bool grad_dims(const em_tensor *g, optim_head *h) {
  int k = 0;
  int64_t size[3] = {1, 1, 1}, stride[3] = {0, 0, 0};
  for (int d = g->ndim - 1; d >= 0; d--) {
    if (g->sizes[d] == 1) continue;
    if (k > 0 && g->strides[d] == stride[k - 1] * size[k - 1]) {
      size[k - 1] *= g->sizes[d];
      continue;
    }
    if (k == 3) return false;
    size[k] = g->sizes[d], stride[k] = g->strides[d];
    k++;
  }
  for (int i = 0; i < 3; i++) {
    if (stride[i] < INT32_MIN || stride[i] > INT32_MAX) return false;
    h->gsize[i] = (uint32_t)size[i], h->gstride[i] = (int32_t)stride[i];
  }
  return true;
}

static const char *module_for(vk_device *D, em_dtype dt, const char *fn) {
  switch (dt) {
  case EM_FLOAT32: return "optim_F32";
  case EM_FLOAT16: return "optim_F16";
  case EM_BFLOAT16: return "optim_BF16";
  case EM_FLOAT64:
    if (D->features & EM_FEATURE_FLOAT64) return "optim_F64";
    em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: not implemented on %s for float64 (the "
                      "device has no float64)", fn, D->name);
    return NULL;
  default:
    em_error("%s: expected a floating-point parameter, got %s", fn, em_dtype_name(dt));
    return NULL;
  }
}

/* One dispatch over contiguous written operands (ops[0], ops[2..4]) and grad ops[1]. */
static int launch(const char *fn, const char *module, const optim_call *c, em_tensor **ops) {
  vk_device *D = em_vk_device(ops[0]->device_id);
  int64_t n = em_numel(ops[0]);
  optim_push p = {0};
  p.h.n = (uint32_t)n;
  uint32_t flags = c->flags;
  if (em_is_contiguous(ops[1])) flags |= F_GRAD_CONTIG;
  else if (!grad_dims(ops[1], &p.h)) return em_error("%s: internal: grad not coalesced", fn);
  for (int i = 0; i < NOPS; i++) {
    if (ops[i] == NULL) continue;
    if (ops[i]->offset + n > INT32_MAX / 2)
      return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: not implemented on %s for tensors "
                               "of more than %d elements", fn, D->name, INT32_MAX / 2);
    p.h.off[i] = (uint32_t)ops[i]->offset;
  }
  if (c->found_inf) {
    if (c->found_inf->offset > INT32_MAX)
      return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: not implemented on %s for a "
                               "found_inf at element %lld", fn, D->name,
                               (long long)c->found_inf->offset);
    flags |= F_FOUND_INF;
    p.h.found_off = (uint32_t)c->found_inf->offset;
  }
  bool dbl = ops[0]->dtype_id == EM_FLOAT64;
  for (int i = 0; i < c->ns; i++) {
    if (dbl) p.s.d[i] = c->s[i];
    else p.s.f[i] = (float)c->s[i];
  }
  uint64_t groups = ((uint64_t)n + WG - 1) / WG;
  uint32_t max_groups = D->props.limits.maxComputeWorkGroupCount[0];
  vk_launch L = {
      .module = module,
      .push = &p,
      .push_size = (uint32_t)(sizeof p.h + (size_t)c->ns * (dbl ? sizeof(double) : sizeof(float))),
      .spec = {c->algo, flags, ~0u, ~0u},
      .writes = 1u | 4u | 8u | 16u,
      .groups = {(uint32_t)(groups < max_groups ? groups : max_groups), 1, 1},
  };
  for (int i = 0; i < NOPS; i++) L.ops[i] = ops[i];
  L.ops[NOPS] = c->found_inf; /* read only */
  return em_vk_launch_locked(&L);
}

/* Runs the step, through contiguous temporaries for written operands that are not
 * contiguous and for a grad the kernel cannot index. */
static int step(const char *fn, const optim_call *c, em_tensor **ops) {
  vk_device *D = em_vk_device(ops[0]->device_id);
  const char *module = module_for(D, (em_dtype)ops[0]->dtype_id, fn);
  if (module == NULL) return -1;
  em_tensor *run[NOPS] = {NULL}, *tmp[NOPS] = {NULL};
  int rc = 0;
  for (int i = 0; i < NOPS && rc == 0; i++) {
    run[i] = ops[i];
    optim_head h;
    bool ok = ops[i] == NULL || em_is_contiguous(ops[i]) || (i == 1 && grad_dims(ops[i], &h));
    if (ok) continue;
    tmp[i] = em_empty(ops[i]->ndim, ops[i]->sizes, (em_dtype)ops[i]->dtype_id, ops[i]->device_id);
    rc = tmp[i] ? em_vk_copy(tmp[i], ops[i]) : -1;
    run[i] = tmp[i];
  }
  if (rc == 0) rc = launch(fn, module, c, run);
  for (int i = 0; i < NOPS; i++) {
    if (tmp[i] && i != 1 && rc == 0) rc = em_vk_copy(ops[i], tmp[i]);
    em_release(tmp[i]);
  }
  return rc;
}

int em_vk_sgd_step(em_tensor *param, const em_tensor *grad, em_tensor *buf,
                   const em_sgd_options *o) {
  optim_call c = {.algo = 0, .ns = 4, .found_inf = o->found_inf,
                  .s = {o->lr, o->momentum, 1 - o->dampening, o->weight_decay}};
  c.flags = (buf ? F_HAS_BUF : 0) | (o->nesterov ? F_NESTEROV : 0) |
            (o->first_step ? F_FIRST : 0) | (o->maximize ? F_MAXIMIZE : 0) |
            (o->weight_decay != 0 ? F_WD : 0);
  em_tensor *ops[NOPS] = {param, (em_tensor *)grad, buf, NULL, NULL};
  return step("sgd_step_", &c, ops);
}

int em_vk_adam_step(em_tensor *param, const em_tensor *grad, em_tensor *exp_avg,
                    em_tensor *exp_avg_sq, em_tensor *max_exp_avg_sq, const em_adam_options *o) {
  double t = (double)o->step;
  optim_call c = {.algo = 1, .ns = 9, .found_inf = o->found_inf,
                  .s = {o->beta1, o->beta2, 1 - o->beta1, 1 - o->beta2, o->eps, o->weight_decay,
                        1 - o->lr * o->weight_decay, o->lr / (1 - pow(o->beta1, t)),
                        sqrt(1 - pow(o->beta2, t))}};
  c.flags = (o->maximize ? F_MAXIMIZE : 0) | (o->weight_decay != 0 ? F_WD : 0) |
            (o->decoupled ? F_DECOUPLED : 0) | (max_exp_avg_sq ? F_AMSGRAD : 0);
  em_tensor *ops[NOPS] = {param, (em_tensor *)grad, exp_avg, exp_avg_sq, max_exp_avg_sq};
  return step("adam_step_", &c, ops);
}
