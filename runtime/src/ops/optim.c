/*
 * optim.c: definitions of the fused optimizer steps, em_sgd_step_ and em_adam_step_ (ember.h).
 *
 * ember.optim can compose every update from elementwise ops, but Adam then makes some ten
 * passes over memory and ten calls per parameter; a step of a small model is dominated by the
 * calls, and one of a large model by the passes. A fused step reads each tensor once and
 * writes param and the state once. These definitions check the operands (shapes, dtypes,
 * devices, memory) and the hyperparameters, then call the device's sgd_step / adam_step slot.
 * A device without the slot reports "not implemented", and the Lua layer composes instead.
 *
 * A step may be conditional (options.found_inf, GradScaler's inf/NaN flag): the kernel reads
 * the flag on the device and changes nothing when it is set, so a scaler records unscale and
 * step without the host learning the verdict first (docs/design.md, "Loss scaling without host
 * waits").
 *
 * The steps are not differentiable and never record: with grad mode on, a param that requires
 * grad is refused, as an in-place write to a leaf would be.
 */
#include <math.h>

#include "../autograd/autograd.h"
#include "../backend.h"

/* Exactly the same elements (same storage, offset and strides). */
static bool same_view(const em_tensor *a, const em_tensor *b) {
  if (a->storage != b->storage || a->offset != b->offset || a->ndim != b->ndim) return false;
  for (int d = 0; d < a->ndim; d++)
    if (a->sizes[d] != b->sizes[d] || a->strides[d] != b->strides[d]) return false;
  return true;
}

static int check_like(const char *fn, const char *what, const em_tensor *t, const em_tensor *param) {
  if (t->dtype_id != param->dtype_id || t->device_id != param->device_id || t->ndim != param->ndim ||
      memcmp(t->sizes, param->sizes, sizeof(int64_t) * (size_t)param->ndim) != 0) {
    char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF];
    return em_error("%s: expected %s to be a %s tensor of shape %s on %s like the parameter, got "
                    "%s %s on %s", fn, what, em_dtype_name((em_dtype)param->dtype_id),
                    em_shape_str(a, sizeof a, param->ndim, param->sizes),
                    em_device_name(param->device_id), em_dtype_name((em_dtype)t->dtype_id),
                    em_shape_str(b, sizeof b, t->ndim, t->sizes), em_device_name(t->device_id));
  }
  return 0;
}

/* A written tensor must not repeat elements (stride 0 over a dim of size > 1). */
static int check_writable(const char *fn, const char *what, const em_tensor *t) {
  for (int d = 0; d < t->ndim; d++)
    if (t->strides[d] == 0 && t->sizes[d] > 1)
      return em_error("%s: %s has a stride-0 (expanded) dimension %d and cannot be written in "
                      "place", fn, what, d);
  if (em_has_internal_overlap(t))
    return em_error("%s: %s has elements that overlap in memory and cannot be written in place",
                    fn, what);
  return 0;
}

/* Operand 0 is param, 1 grad, the rest state (NULL entries skipped). Written tensors (all but
 * grad) may not share memory with each other; grad may be exactly param, nothing else. */
static int check_operands(const char *fn, int n, const em_tensor *const *ts,
                          const char *const *names) {
  const em_tensor *param = ts[0];
  if (!em_dtypes[param->dtype_id].is_float)
    return em_error("%s: expected a floating-point parameter, got %s", fn,
                    em_dtype_name((em_dtype)param->dtype_id));
  for (int i = 1; i < n; i++)
    if (ts[i] && check_like(fn, names[i], ts[i], param) != 0) return -1;
  for (int i = 0; i < n; i++) {
    if (ts[i] == NULL) continue;
    if (i != 1 && check_writable(fn, names[i], ts[i]) != 0) return -1;
    for (int j = i + 1; j < n; j++) {
      if (ts[j] == NULL || ts[j]->storage != ts[i]->storage) continue;
      if (i == 0 && j == 1 && same_view(ts[0], ts[1])) continue; /* read, then written */
      return em_error("%s: %s and %s share memory; each must have its own", fn, names[i],
                      names[j]);
    }
  }
  if (em_grad_enabled() && em_requires_grad(param))
    return em_error("%s: the parameter requires grad and grad mode is on; optimizer steps are "
                    "not differentiable, run them under no_grad", fn);
  return 0;
}

static int check_hyper(const char *fn, const char *name, double v, bool nonneg) {
  if (isnan(v) || (nonneg && v < 0))
    return em_error("%s: invalid %s %g (expected a number%s)", fn, name, v,
                    nonneg ? " >= 0" : "");
  return 0;
}

/* found_inf: NULL, or a float32 tensor of one element on param's device that no written
 * operand's memory holds. */
static int check_found_inf(const char *fn, const em_tensor *f, int n, const em_tensor *const *ts) {
  if (f == NULL) return 0;
  if (f->dtype_id != EM_FLOAT32 || em_numel(f) != 1 || f->device_id != ts[0]->device_id)
    return em_error("%s: expected found_inf to be a float32 tensor of one element on %s (the "
                    "parameter's device), got a %s tensor of %lld elements on %s", fn,
                    em_device_name(ts[0]->device_id), em_dtype_name((em_dtype)f->dtype_id),
                    (long long)em_numel(f), em_device_name(f->device_id));
  for (int i = 0; i < n; i++)
    if (i != 1 && ts[i] && ts[i]->storage == f->storage)
      return em_error("%s: found_inf shares memory with an operand the step writes", fn);
  return 0;
}

static void bump(int n, em_tensor *const *ts) {
  for (int i = 0; i < n; i++)
    if (ts[i]) em_bump_version(ts[i]);
}

int em_sgd_step_(em_tensor *param, const em_tensor *grad, em_tensor *buf,
                 const em_sgd_options *o) {
  const char *fn = "sgd_step_";
  if (param == NULL || grad == NULL || o == NULL)
    return em_error("%s: expected a parameter, a gradient and options, got NULL", fn);
  if (check_hyper(fn, "learning rate", o->lr, true) || check_hyper(fn, "momentum", o->momentum, true) ||
      check_hyper(fn, "dampening", o->dampening, false) ||
      check_hyper(fn, "weight_decay", o->weight_decay, true))
    return -1;
  if (o->momentum != 0 && buf == NULL)
    return em_error("%s: momentum %g needs a momentum buffer, got NULL", fn, o->momentum);
  if (o->nesterov && (o->momentum <= 0 || o->dampening != 0))
    return em_error("%s: Nesterov momentum requires a momentum and zero dampening", fn);
  const em_tensor *ts[3] = {param, grad, o->momentum != 0 ? buf : NULL};
  const char *names[3] = {"param", "grad", "momentum_buffer"};
  if (check_operands(fn, 3, ts, names) != 0 || check_found_inf(fn, o->found_inf, 3, ts) != 0)
    return -1;
  const em_backend *be = em_device_backend(param->device_id);
  EM_NEED_KERNEL(fn, be, sgd_step);
  if (em_numel(param) == 0) return 0;
  if (be->sgd_step(param, grad, (em_tensor *)ts[2], o) != 0) return -1;
  em_tensor *written[2] = {param, (em_tensor *)ts[2]};
  bump(2, written);
  return 0;
}

int em_adam_step_(em_tensor *param, const em_tensor *grad, em_tensor *exp_avg,
                  em_tensor *exp_avg_sq, em_tensor *max_exp_avg_sq, const em_adam_options *o) {
  const char *fn = "adam_step_";
  if (param == NULL || grad == NULL || exp_avg == NULL || exp_avg_sq == NULL || o == NULL)
    return em_error("%s: expected a parameter, a gradient, exp_avg, exp_avg_sq and options, "
                    "got NULL", fn);
  if (check_hyper(fn, "learning rate", o->lr, true) || check_hyper(fn, "epsilon", o->eps, true) ||
      check_hyper(fn, "weight_decay", o->weight_decay, true))
    return -1;
  if (!(o->beta1 >= 0 && o->beta1 < 1) || !(o->beta2 >= 0 && o->beta2 < 1))
    return em_error("%s: invalid betas (%g, %g) (expected numbers in [0, 1))", fn, o->beta1,
                    o->beta2);
  if (o->step < 1) return em_error("%s: expected step >= 1, got %lld", fn, (long long)o->step);
  const em_tensor *ts[5] = {param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq};
  const char *names[5] = {"param", "grad", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  if (check_operands(fn, 5, ts, names) != 0 || check_found_inf(fn, o->found_inf, 5, ts) != 0)
    return -1;
  const em_backend *be = em_device_backend(param->device_id);
  EM_NEED_KERNEL(fn, be, adam_step);
  if (em_numel(param) == 0) return 0;
  if (be->adam_step(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, o) != 0) return -1;
  em_tensor *written[4] = {param, exp_avg, exp_avg_sq, max_exp_avg_sq};
  bump(4, written);
  return 0;
}
