/*
 * ternary.c: definitions of the elementwise ops with three or four operands: where, clamp,
 * lerp, addcmul, addcdiv, and masked_fill (a where with a scalar). Each one broadcasts its
 * operands, decides the dtype with PyTorch's rules, and calls one kernel slot (backend.h).
 * Scalar operands arrive as wrapped-number tensors (em_scalar_tensor(v, dtype, device, 1)), so
 * that `clamp(int_tensor, 0, 10)` stays integer while `clamp(int_tensor, 0.5, 1)` is float32.
 */
#include <math.h>

#include "../autocast.h"
#include "../autograd/record.h"
#include "elementwise.h"

static bool is_int(em_dtype d) { return !em_dtypes[d].is_float; }

/* ---- where / masked_fill ---- */

static int where_kernel(const char *fn, const em_backend *be, em_tensor *out,
                        const em_tensor *const *in, const void *arg) {
  (void)arg;
  EM_NEED_KERNEL(fn, be, where);
  return be->where(out, in[0], in[1], in[2]);
}

/* The condition as a bool tensor: bool as is, uint8 cast (a new reference in *owned). */
static const em_tensor *bool_condition(const char *fn, const char *what, const em_tensor *c,
                                       em_tensor **owned) {
  *owned = NULL;
  if (c->dtype_id == EM_BOOL) return c;
  if (c->dtype_id != EM_UINT8)
    return em_error_null("%s: expected a bool %s, got %s", fn, what,
                         em_dtype_name((em_dtype)c->dtype_id));
  *owned = em_to_dtype(c, EM_BOOL);
  return *owned;
}

em_tensor *em_where(const em_tensor *cond, const em_tensor *a, const em_tensor *b) {
  const char *fn = "where";
  if (cond == NULL || a == NULL || b == NULL)
    return em_error_null("%s: expected three tensors, got NULL", fn);
  em_tensor *cast;
  const em_tensor *c = bool_condition(fn, "condition", cond, &cast);
  if (c == NULL) return NULL;
  const em_tensor *ts[3] = {c, a, b};
  em_ew ew;
  em_tensor *out = NULL;
  if (em_ew_begin(&ew, fn, 3, ts) == 0) {
    ew.keep = 1u; /* the condition stays bool */
    ew.compute = em_result_type_n(2, ts + 1);
    out = em_ew_run(&ew, ew.compute, where_kernel, NULL);
  }
  const em_tensor *ins[3] = {c, a, b};
  EM_AG_RECORD(out, 3, ins, em_ag_record_where(out, c, a, b));
  em_release(cast);
  return out;
}

/* masked_fill(x, mask, v) is where(mask, v, x) with v converted to x's dtype (PyTorch casts the
 * value: filling an int tensor with 2.5 stores 2). The mask must be bool. */
static int masked_fill_begin(em_ew *ew, const char *fn, const em_tensor *x,
                             const em_tensor *mask, em_tensor *value, em_storage *vs,
                             double *cell, double v) {
  if (x == NULL || mask == NULL) return em_error("%s: expected two tensors, got NULL", fn);
  if (mask->dtype_id != EM_BOOL)
    return em_error("%s: expected a bool mask, got %s", fn,
                    em_dtype_name((em_dtype)mask->dtype_id));
  if (em_check_fill_value(fn, (em_dtype)x->dtype_id, v) != 0) return -1;
  em_stack_scalar_typed(value, vs, cell, v, (em_dtype)x->dtype_id, x->device_id);
  const em_tensor *ts[3] = {mask, value, x};
  if (em_ew_begin(ew, fn, 3, ts) != 0) return -1;
  ew->keep = 1u;
  ew->compute = (em_dtype)x->dtype_id;
  return 0;
}

em_tensor *em_masked_fill(const em_tensor *x, const em_tensor *mask, double value) {
  em_ew ew;
  em_tensor vt;
  em_storage vs;
  double cell;
  if (masked_fill_begin(&ew, "masked_fill", x, mask, &vt, &vs, &cell, value) != 0) return NULL;
  em_tensor *out = em_ew_run(&ew, ew.compute, where_kernel, NULL);
  const em_tensor *ins[3] = {mask, NULL, x}; /* where(mask, value, x): the value has no grad */
  EM_AG_RECORD(out, 3, ins, em_ag_record_where(out, mask, NULL, x));
  return out;
}

int em_masked_fill_(em_tensor *x, const em_tensor *mask, double value) {
  em_ew ew;
  em_tensor vt;
  em_storage vs;
  double cell;
  if (masked_fill_begin(&ew, "masked_fill_", x, mask, &vt, &vs, &cell, value) != 0) return -1;
  const em_tensor *ins[1] = {x};
  EM_AG_INPLACE("masked_fill_", x, 1, ins, em_masked_fill(self_clone, mask, value));
  return em_ew_run_inplace(&ew, x, ew.compute, where_kernel, NULL);
}

/* ---- clamp ---- */

static int clamp_kernel(const char *fn, const em_backend *be, em_tensor *out,
                        const em_tensor *const *in, const void *arg) {
  (void)arg;
  EM_NEED_KERNEL(fn, be, clamp);
  return be->clamp(out, in[0], in[1], in[2]);
}

static int clamp_begin(em_ew *ew, const char *fn, const em_tensor *x, const em_tensor *lo,
                       const em_tensor *hi) {
  if (x == NULL) return em_error("%s: expected a tensor, got NULL", fn);
  if (lo == NULL && hi == NULL) return em_error("%s: expected at least one of min and max", fn);
  const em_tensor *ts[3] = {x, lo, hi};
  em_dtype compute = em_result_type_n(3, ts);
  if (compute == EM_BOOL) return em_error("%s: not supported for bool tensors", fn);
  if (em_ew_begin(ew, fn, 3, ts) != 0) return -1;
  ew->compute = compute;
  return 0;
}

em_tensor *em_clamp(const em_tensor *x, const em_tensor *lo, const em_tensor *hi) {
  em_ew ew;
  if (clamp_begin(&ew, "clamp", x, lo, hi) != 0) return NULL;
  em_tensor *out = em_ew_run(&ew, ew.compute, clamp_kernel, NULL);
  const em_tensor *ins[3] = {x, lo, hi};
  EM_AG_RECORD(out, 3, ins, em_ag_record_clamp(out, x, lo, hi));
  return out;
}

int em_clamp_(em_tensor *x, const em_tensor *lo, const em_tensor *hi) {
  em_ew ew;
  if (clamp_begin(&ew, "clamp_", x, lo, hi) != 0) return -1;
  const em_tensor *ins[3] = {x, lo, hi};
  EM_AG_INPLACE("clamp_", x, 3, ins, em_clamp(self_clone, lo, hi));
  return em_ew_run_inplace(&ew, x, ew.compute, clamp_kernel, NULL);
}

/* ---- lerp ---- */

static int lerp_kernel(const char *fn, const em_backend *be, em_tensor *out,
                       const em_tensor *const *in, const void *arg) {
  (void)arg;
  EM_NEED_KERNEL(fn, be, lerp);
  return be->lerp(out, in[0], in[1], in[2]);
}

static int lerp_begin(em_ew *ew, const char *fn, const em_tensor *start, const em_tensor *end,
                      const em_tensor *weight) {
  if (start == NULL || end == NULL || weight == NULL)
    return em_error("%s: expected three tensors, got NULL", fn);
  /* As in PyTorch, no integer start or end is lifted to float; a weight may be a number. */
  const em_tensor *ts[3] = {start, end, weight};
  for (int i = 0; i < 3; i++)
    if (is_int((em_dtype)ts[i]->dtype_id) && !(i == 2 && em_is_wrapped(ts[i])))
      return em_error("%s: expected floating-point tensors, got %s", fn,
                      em_dtype_name((em_dtype)ts[i]->dtype_id));
  em_dtype compute = em_result_type_n(3, ts);
  if (em_ew_begin(ew, fn, 3, ts) != 0) return -1;
  ew->compute = compute;
  return 0;
}

em_tensor *em_lerp(const em_tensor *start, const em_tensor *end, const em_tensor *weight) {
  em_ew ew;
  if (lerp_begin(&ew, "lerp", start, end, weight) != 0) return NULL;
  em_tensor *out = em_ew_run(&ew, ew.compute, lerp_kernel, NULL);
  const em_tensor *ins[3] = {start, end, weight};
  EM_AG_RECORD(out, 3, ins, em_ag_record_lerp(out, start, end, weight));
  return out;
}

int em_lerp_(em_tensor *start, const em_tensor *end, const em_tensor *weight) {
  em_ew ew;
  if (lerp_begin(&ew, "lerp_", start, end, weight) != 0) return -1;
  const em_tensor *ins[3] = {start, end, weight};
  EM_AG_INPLACE("lerp_", start, 3, ins, em_lerp(self_clone, end, weight));
  return em_ew_run_inplace(&ew, start, ew.compute, lerp_kernel, NULL);
}

/* ---- addcmul / addcdiv ---- */

typedef struct addc_arg {
  int divide;
  double value;
} addc_arg;

static int addc_kernel(const char *fn, const em_backend *be, em_tensor *out,
                       const em_tensor *const *in, const void *arg) {
  const addc_arg *a = arg;
  EM_NEED_KERNEL(fn, be, addc);
  return be->addc(a->divide, out, in[0], in[1], in[2], a->value);
}

/* PyTorch's rules: addcdiv refuses integer tensors (its old integer division was removed), and
 * an integer addcmul needs an integral value. */
static int addc_begin(em_ew *ew, const char *fn, int divide, const em_tensor *x,
                      const em_tensor *t1, const em_tensor *t2, double value) {
  if (x == NULL || t1 == NULL || t2 == NULL)
    return em_error("%s: expected three tensors, got NULL", fn);
  const em_tensor *ts[3] = {x, t1, t2};
  em_dtype compute = em_result_type_n(3, ts);
  if (compute == EM_BOOL) return em_error("%s: not supported for bool tensors", fn);
  if (divide && is_int(compute))
    return em_error("%s: integer division is not supported; convert the tensors to a "
                    "floating dtype (got %s)", fn, em_dtype_name(compute));
  if (is_int(compute) && !(isfinite(value) && value == floor(value) && fabs(value) < 9.2e18))
    return em_error("%s: value must be an integer for %s tensors, got %g", fn,
                    em_dtype_name(compute), value);
  if (em_ew_begin(ew, fn, 3, ts) != 0) return -1;
  ew->compute = compute;
  return 0;
}

static em_tensor *addc_new(const char *fn, int divide, const em_tensor *x, const em_tensor *t1,
                           const em_tensor *t2, double value) {
  EM_AUTOCAST(fn, addc_new(fn, divide, ac_[0], ac_[1], ac_[2], value), x, t1, t2);
  em_ew ew;
  if (addc_begin(&ew, fn, divide, x, t1, t2, value) != 0) return NULL;
  addc_arg arg = {divide, value};
  em_tensor *out = em_ew_run(&ew, ew.compute, addc_kernel, &arg);
  const em_tensor *ins[3] = {x, t1, t2};
  EM_AG_RECORD(out, 3, ins, em_ag_record_addc(divide, out, x, t1, t2, value));
  return out;
}

static int addc_inplace(const char *fn, int divide, em_tensor *x, const em_tensor *t1,
                        const em_tensor *t2, double value) {
  em_ew ew;
  if (addc_begin(&ew, fn, divide, x, t1, t2, value) != 0) return -1;
  const em_tensor *ins[3] = {x, t1, t2};
  EM_AG_INPLACE(fn, x, 3, ins, addc_new(fn, divide, self_clone, t1, t2, value));
  addc_arg arg = {divide, value};
  return em_ew_run_inplace(&ew, x, ew.compute, addc_kernel, &arg);
}

em_tensor *em_addcmul(const em_tensor *x, const em_tensor *t1, const em_tensor *t2, double value) {
  return addc_new("addcmul", 0, x, t1, t2, value);
}
int em_addcmul_(em_tensor *x, const em_tensor *t1, const em_tensor *t2, double value) {
  return addc_inplace("addcmul_", 0, x, t1, t2, value);
}
em_tensor *em_addcdiv(const em_tensor *x, const em_tensor *t1, const em_tensor *t2, double value) {
  return addc_new("addcdiv", 1, x, t1, t2, value);
}
int em_addcdiv_(em_tensor *x, const em_tensor *t1, const em_tensor *t2, double value) {
  return addc_inplace("addcdiv_", 1, x, t1, t2, value);
}
