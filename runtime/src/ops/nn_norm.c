/*
 * nn_norm.c: definitions of batch_norm, layer_norm and group_norm, and their fused backward
 * ops (called by formulas_nn.c).
 *
 * batch_norm views its input [N, C, ...] as [N, C, S]. In training mode it takes the batch's
 * mean and biased variance (one kernel), updates the running statistics in place with the
 * unbiased variance, as PyTorch does, and normalizes; in evaluation mode it uses the running
 * statistics. Either way the normalization is one pass, y = x * scale[c] + shift[c], with
 * scale and shift folded from the statistics, weight and bias on [C]-sized tensors.
 *
 * layer_norm and group_norm are one kernel: statistics over rows of x viewed [N * G, Cg * S],
 * with the affine weight and bias indexed by channel (nn.h, em_norm_geom).
 *
 * float16 / bfloat16 compute in float32 between recorded casts.
 */
#include <math.h>

#include "../autocast.h"
#include "../autograd/record.h"
#include "../nn.h"

static bool is_half(int dt) { return dt == EM_FLOAT16 || dt == EM_BFLOAT16; }

/* The [C]-sized arithmetic here is bookkeeping, never part of the graph. */
typedef struct quiet { int mode; } quiet;
static quiet quiet_begin(void) { return (quiet){em_set_grad_enabled(0)}; }
static void quiet_end(quiet q) { em_set_grad_enabled(q.mode); }

static int check_param(const char *fn, const char *what, const em_tensor *t, const em_tensor *x,
                       int ndim, const int64_t *sizes) {
  if (t == NULL) return 0;
  const em_tensor *ts[2] = {x, t};
  if (em_check_same_device(fn, 2, ts) != 0) return -1;
  if (t->ndim != ndim || memcmp(t->sizes, sizes, sizeof(int64_t) * (size_t)ndim) != 0) {
    char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF];
    return em_error("%s: expected %s of shape %s, got %s", fn, what,
                    em_shape_str(a, sizeof a, ndim, sizes), em_shape_str(b, sizeof b, t->ndim, t->sizes));
  }
  return 0;
}

static int check_same_dtype(const char *fn, const char *what, const em_tensor *t,
                            const em_tensor *x) {
  if (t == NULL || t->dtype_id == x->dtype_id) return 0;
  return em_error("%s: expected %s of the input's dtype %s, got %s", fn, what,
                  em_dtype_name((em_dtype)x->dtype_id), em_dtype_name((em_dtype)t->dtype_id));
}

/* batch_norm also takes float32 affine parameters with a 16-bit input, as PyTorch's mixed
 * batch_norm does: a float32 model whose convolutions autocast to 16 bits feeds its float32
 * BatchNorm layers 16-bit activations (autocast leaves batch_norm to its input's dtype). */
static int check_affine_dtype(const char *fn, const char *what, const em_tensor *t,
                              const em_tensor *x) {
  if (t != NULL && is_half(x->dtype_id) && t->dtype_id == EM_FLOAT32) return 0;
  return check_same_dtype(fn, what, t, x);
}

static int check_float_input(const char *fn, const em_tensor *x, int min_ndim) {
  if (x == NULL) return em_error("%s: expected an input tensor, got NULL", fn);
  if (!em_dtypes[x->dtype_id].is_float)
    return em_error("%s: expected a floating point input, got %s", fn,
                    em_dtype_name((em_dtype)x->dtype_id));
  if (x->ndim < min_ndim)
    return em_error("%s: expected an input with at least %d dims, got %d-D", fn, min_ndim,
                    x->ndim);
  return 0;
}

/* x [N, C, ...] as a contiguous [N, C, S] (a view when x is contiguous). */
static em_tensor *as_ncs(const em_tensor *x) {
  int64_t S = 1;
  for (int d = 2; d < x->ndim; d++) S *= x->sizes[d];
  int64_t sizes[3] = {x->sizes[0], x->sizes[1], S};
  int64_t strides[3];
  em_contiguous_strides(3, sizes, strides);
  em_tensor *c = em_contiguous(x);
  if (c == NULL) return NULL;
  /* a bare view (no autograd): the definitions record the op itself */
  em_tensor *v = em_tensor_view_of(c, 3, sizes, strides, c->offset);
  em_release(c);
  return v;
}

static em_tensor *cast_or_null(const em_tensor *t, em_dtype dt, bool *ok) {
  if (t == NULL) return NULL;
  em_tensor *r = em_to_dtype(t, dt);
  if (r == NULL) *ok = false;
  return r;
}

/* ---- batch_norm ------------------------------------------------------------------------------ */

/* running = (1 - momentum) * running + momentum * value, in place (value cast as needed). */
static int update_running(em_tensor *running, const em_tensor *value, double momentum) {
  em_tensor *v = em_to_dtype(value, (em_dtype)running->dtype_id);
  int rc = v ? em_binary_scalar_(EM_MUL, running, 1.0 - momentum) : -1;
  if (rc == 0) rc = em_add_scaled_(running, v, momentum);
  em_release(v);
  return rc;
}

/* Batch statistics: mean and invstd ([C], x's dtype); updates the running statistics. */
static int batch_stats(const char *fn, const em_tensor *x3, em_tensor *rm, em_tensor *rv,
                       double momentum, double eps, em_tensor **mean, em_tensor **invstd) {
  const em_backend *be = em_device_backend(x3->device_id);
  EM_NEED_KERNEL(fn, be, batch_norm_stats);
  int64_t C = x3->sizes[1], M = x3->sizes[0] * x3->sizes[2];
  em_tensor *var = em_empty(1, &C, (em_dtype)x3->dtype_id, x3->device_id);
  *mean = em_empty(1, &C, (em_dtype)x3->dtype_id, x3->device_id);
  int rc = var && *mean ? be->batch_norm_stats(*mean, var, x3) : -1;
  if (rc == 0) {
    em_tensor *ve = em_binary_scalar(EM_ADD, var, eps, 0);
    *invstd = ve ? em_unary(EM_RSQRT, ve) : NULL;
    em_release(ve);
    if (*invstd == NULL) rc = -1;
  }
  if (rc == 0 && rm) rc = update_running(rm, *mean, momentum);
  if (rc == 0 && rv) { /* the running variance is the unbiased one */
    em_tensor *unbiased = em_binary_scalar(EM_MUL, var, (double)M / (double)(M - 1), 0);
    rc = unbiased ? update_running(rv, unbiased, momentum) : -1;
    em_release(unbiased);
  }
  em_release(var);
  return rc;
}

/* mean / invstd in x's dtype from the running statistics. */
static int running_stats(const em_tensor *x, const em_tensor *rm, const em_tensor *rv, double eps,
                         em_tensor **mean, em_tensor **invstd) {
  *mean = em_to_dtype(rm, (em_dtype)x->dtype_id);
  em_tensor *v = em_to_dtype(rv, (em_dtype)x->dtype_id);
  em_tensor *ve = v ? em_binary_scalar(EM_ADD, v, eps, 0) : NULL;
  *invstd = ve ? em_unary(EM_RSQRT, ve) : NULL;
  em_release(v);
  em_release(ve);
  return *mean && *invstd ? 0 : -1;
}

static em_tensor *batch_norm_run(const char *fn, const em_tensor *x, em_tensor *rm, em_tensor *rv,
                                 const em_tensor *w, const em_tensor *b, bool training,
                                 double momentum, double eps) {
  const em_backend *be = em_device_backend(x->device_id);
  em_tensor *x3 = as_ncs(x), *mean = NULL, *invstd = NULL, *scale = NULL, *shift = NULL;
  em_tensor *y = NULL;
  quiet q = quiet_begin();
  int rc = x3 ? 0 : -1;
  if (rc == 0)
    rc = training ? batch_stats(fn, x3, rm, rv, momentum, eps, &mean, &invstd)
                  : running_stats(x, rm, rv, eps, &mean, &invstd);
  if (rc == 0 && invstd == NULL) rc = -1;
  if (rc == 0) { /* scale = invstd * w, shift = b - mean * scale */
    scale = w ? em_binary(EM_MUL, invstd, w) : em_retain(invstd);
    em_tensor *ms = scale ? em_binary(EM_MUL, mean, scale) : NULL;
    shift = ms ? (b ? em_binary(EM_SUB, b, ms) : em_unary(EM_NEG, ms)) : NULL;
    em_release(ms);
    rc = scale && shift ? 0 : -1;
  }
  quiet_end(q);
  if (rc == 0 && be->channel_affine == NULL)
    rc = em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: not implemented on %s", fn, be->name);
  if (rc == 0) {
    y = em_empty(x->ndim, x->sizes, (em_dtype)x->dtype_id, x->device_id);
    em_tensor *y3 = y ? as_ncs(y) : NULL;
    rc = y3 ? (em_numel(y3) > 0 ? be->channel_affine(y3, x3, scale, shift) : 0) : -1;
    em_release(y3);
  }
  const em_tensor *ins[3] = {x, w, b};
  if (rc == 0 && em_ag_should_record(3, ins) &&
      em_ag_record_batch_norm(y, x, w, b, mean, invstd, training, eps) != 0)
    rc = -1;
  em_tensor *tmp[5] = {x3, mean, invstd, scale, shift};
  for (int i = 0; i < 5; i++) em_release(tmp[i]);
  if (rc != 0) {
    em_error_prefix(fn);
    em_release(y);
    return NULL;
  }
  return y;
}

em_tensor *em_batch_norm(const em_tensor *input, em_tensor *running_mean, em_tensor *running_var,
                         const em_tensor *weight, const em_tensor *bias, int training,
                         double momentum, double eps) {
  const char *fn = "batch_norm";
  if (check_float_input(fn, input, 2) != 0) return NULL;
  int64_t C = input->sizes[1];
  if (check_param(fn, "a weight", weight, input, 1, &C) || check_param(fn, "a bias", bias, input, 1, &C) ||
      check_param(fn, "running_mean", running_mean, input, 1, &C) ||
      check_param(fn, "running_var", running_var, input, 1, &C) ||
      check_affine_dtype(fn, "a weight", weight, input) ||
      check_affine_dtype(fn, "a bias", bias, input))
    return NULL;
  if ((running_mean == NULL) != (running_var == NULL))
    return em_error_null("%s: expected both running_mean and running_var, or neither", fn);
  for (int i = 0; i < 2; i++) {
    const em_tensor *r = i ? running_var : running_mean;
    if (r && !em_dtypes[r->dtype_id].is_float)
      return em_error_null("%s: expected floating point running statistics, got %s", fn,
                           em_dtype_name((em_dtype)r->dtype_id));
  }
  if (!training && running_mean == NULL)
    return em_error_null("%s: running_mean and running_var are needed in evaluation mode", fn);
  if (!(eps >= 0) || !isfinite(momentum))
    return em_error_null("%s: expected eps >= 0 and a finite momentum, got eps %g, momentum %g",
                         fn, eps, momentum);
  if (training && em_numel(input) / (C > 0 ? C : 1) <= 1 && C > 0) {
    char b[EM_SHAPE_BUF];
    return em_error_null("%s: expected more than 1 value per channel when training, got input "
                         "%s", fn, em_shape_str(b, sizeof b, input->ndim, input->sizes));
  }
  if (!is_half(input->dtype_id))
    return batch_norm_run(fn, input, running_mean, running_var, weight, bias, training != 0,
                          momentum, eps);
  bool ok = true;
  em_tensor *fx = cast_or_null(input, EM_FLOAT32, &ok), *fw = cast_or_null(weight, EM_FLOAT32, &ok);
  em_tensor *fb = cast_or_null(bias, EM_FLOAT32, &ok), *r = NULL;
  em_tensor *fy = ok ? batch_norm_run(fn, fx, running_mean, running_var, fw, fb, training != 0,
                                      momentum, eps)
                     : NULL;
  if (fy) r = em_to_dtype(fy, (em_dtype)input->dtype_id);
  em_release(fx);
  em_release(fw);
  em_release(fb);
  em_release(fy);
  return r;
}

int em_nn_batch_norm_backward(const em_tensor *gy, const em_tensor *x, const em_tensor *mean,
                              const em_tensor *invstd, const em_tensor *weight, bool training,
                              em_tensor **gx, em_tensor **gw, em_tensor **gb) {
  const char *fn = "batch_norm_backward";
  const em_backend *be = em_device_backend(x->device_id);
  EM_NEED_KERNEL(fn, be, batch_norm_backward);
  int64_t C = x->sizes[1];
  em_dtype dt = (em_dtype)x->dtype_id;
  em_tensor *x3 = as_ncs(x), *g3 = as_ncs(gy), *gx3 = NULL;
  /* the kernels index weight[c] densely: a strided or expanded (stride 0) weight is made
   * contiguous here, as every other parameter is before it reaches a kernel */
  em_tensor *cw = weight ? em_contiguous(weight) : NULL;
  if (gx) *gx = em_empty(x->ndim, x->sizes, dt, x->device_id);
  if (gw) *gw = em_empty(1, &C, dt, x->device_id);
  if (gb) *gb = em_empty(1, &C, dt, x->device_id);
  if (gx && *gx) gx3 = as_ncs(*gx);
  int rc = x3 && g3 && (cw || !weight) && (!gx || gx3) && (!gw || *gw) && (!gb || *gb) ? 0 : -1;
  if (rc == 0 && C > 0)
    rc = be->batch_norm_backward(gx3, gw ? *gw : NULL, gb ? *gb : NULL, g3, x3, mean, invstd,
                                 cw, training);
  em_release(cw);
  em_release(x3);
  em_release(g3);
  em_release(gx3);
  if (rc != 0) {
    em_tensor **outs[3] = {gx, gw, gb};
    for (int i = 0; i < 3; i++)
      if (outs[i]) {
        em_release(*outs[i]);
        *outs[i] = NULL;
      }
  }
  return rc;
}

/* ---- layer_norm / group_norm ------------------------------------------------------------------ */

static em_tensor *group_norm_run(const char *fn, const em_tensor *x, const em_tensor *w,
                                 const em_tensor *b, const em_norm_geom *g) {
  if (is_half(x->dtype_id)) {
    bool ok = true;
    em_tensor *fx = cast_or_null(x, EM_FLOAT32, &ok), *fw = cast_or_null(w, EM_FLOAT32, &ok);
    em_tensor *fb = cast_or_null(b, EM_FLOAT32, &ok), *r = NULL;
    em_tensor *fy = ok ? group_norm_run(fn, fx, fw, fb, g) : NULL;
    if (fy) r = em_to_dtype(fy, (em_dtype)x->dtype_id);
    em_release(fx);
    em_release(fw);
    em_release(fb);
    em_release(fy);
    return r;
  }
  const em_backend *be = em_device_backend(x->device_id);
  em_dtype dt = (em_dtype)x->dtype_id;
  int64_t stat_sizes[2] = {g->N, g->G};
  em_tensor *cx = em_contiguous(x), *cw = w ? em_contiguous(w) : NULL;
  em_tensor *cb = b ? em_contiguous(b) : NULL;
  em_tensor *y = em_empty(x->ndim, x->sizes, dt, x->device_id);
  em_tensor *mean = em_empty(2, stat_sizes, dt, x->device_id);
  em_tensor *rstd = em_empty(2, stat_sizes, dt, x->device_id);
  int rc = cx && (cw || !w) && (cb || !b) && y && mean && rstd ? 0 : -1;
  if (rc == 0 && be->group_norm == NULL)
    rc = em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: not implemented on %s", fn, be->name);
  if (rc == 0 && g->N * g->G > 0) rc = be->group_norm(y, mean, rstd, cx, cw, cb, g);
  const em_tensor *ins[3] = {x, w, b};
  if (rc == 0 && em_ag_should_record(3, ins) &&
      em_ag_record_group_norm(y, x, w, b, mean, rstd, g) != 0)
    rc = -1;
  em_tensor *tmp[5] = {cx, cw, cb, mean, rstd};
  for (int i = 0; i < 5; i++) em_release(tmp[i]);
  if (rc != 0) {
    em_error_prefix(fn);
    em_release(y);
    return NULL;
  }
  return y;
}

em_tensor *em_layer_norm(const em_tensor *input, int n_normalized,
                         const int64_t *normalized_shape, const em_tensor *weight,
                         const em_tensor *bias, double eps) {
  const char *fn = "layer_norm";
  EM_AUTOCAST(fn, em_layer_norm(ac_[0], n_normalized, normalized_shape, ac_[1], ac_[2], eps),
              input, weight, bias);
  if (check_float_input(fn, input, 1) != 0) return NULL;
  if (n_normalized < 1 || n_normalized > input->ndim || normalized_shape == NULL)
    return em_error_null("%s: expected a normalized shape of 1 to %d dims, got %d", fn,
                         input->ndim, n_normalized);
  int lead = input->ndim - n_normalized;
  if (memcmp(input->sizes + lead, normalized_shape, sizeof(int64_t) * (size_t)n_normalized) != 0) {
    char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF];
    return em_error_null("%s: expected an input whose trailing dims are %s, got %s", fn,
                         em_shape_str(a, sizeof a, n_normalized, normalized_shape),
                         em_shape_str(b, sizeof b, input->ndim, input->sizes));
  }
  if (check_param(fn, "a weight", weight, input, n_normalized, normalized_shape) ||
      check_param(fn, "a bias", bias, input, n_normalized, normalized_shape) ||
      check_same_dtype(fn, "a weight", weight, input) || check_same_dtype(fn, "a bias", bias, input))
    return NULL;
  if (!(eps >= 0)) return em_error_null("%s: expected eps >= 0, got %g", fn, eps);
  int64_t D = em_shape_numel(n_normalized, normalized_shape);
  em_norm_geom g = {D > 0 ? em_numel(input) / D : 0, 1, D, 1, eps};
  return group_norm_run(fn, input, weight, bias, &g);
}

em_tensor *em_group_norm(const em_tensor *input, int64_t num_groups, const em_tensor *weight,
                         const em_tensor *bias, double eps) {
  const char *fn = "group_norm";
  EM_AUTOCAST(fn, em_group_norm(ac_[0], num_groups, ac_[1], ac_[2], eps), input, weight, bias);
  if (check_float_input(fn, input, 2) != 0) return NULL;
  int64_t C = input->sizes[1];
  if (num_groups < 1 || C % num_groups != 0)
    return em_error_null("%s: expected the %lld channels to be divisible by num_groups (%lld)",
                         fn, (long long)C, (long long)num_groups);
  if (check_param(fn, "a weight", weight, input, 1, &C) || check_param(fn, "a bias", bias, input, 1, &C) ||
      check_same_dtype(fn, "a weight", weight, input) || check_same_dtype(fn, "a bias", bias, input))
    return NULL;
  if (!(eps >= 0)) return em_error_null("%s: expected eps >= 0, got %g", fn, eps);
  int64_t S = 1;
  for (int d = 2; d < input->ndim; d++) S *= input->sizes[d];
  em_norm_geom g = {input->sizes[0], num_groups, C / num_groups, S, eps};
  return group_norm_run(fn, input, weight, bias, &g);
}

int em_nn_group_norm_backward(const em_tensor *gy, const em_tensor *x, const em_tensor *mean,
                              const em_tensor *rstd, const em_tensor *weight,
                              const em_norm_geom *g, em_tensor **gx, em_tensor **gw,
                              em_tensor **gb) {
  const char *fn = g->G == 1 && g->S == 1 ? "layer_norm_backward" : "group_norm_backward";
  const em_backend *be = em_device_backend(x->device_id);
  EM_NEED_KERNEL(fn, be, group_norm_backward);
  em_dtype dt = (em_dtype)x->dtype_id;
  int64_t C = g->G * g->Cg;
  em_tensor *cx = em_contiguous(x), *cg = em_contiguous(gy);
  em_tensor *cw = weight ? em_contiguous(weight) : NULL;
  if (gx) *gx = em_empty(x->ndim, x->sizes, dt, x->device_id);
  if (gw) *gw = em_empty(1, &C, dt, x->device_id);
  if (gb) *gb = em_empty(1, &C, dt, x->device_id);
  int rc = cx && cg && (cw || !weight) && (!gx || *gx) && (!gw || *gw) && (!gb || *gb) ? 0 : -1;
  if (rc == 0 && g->N * g->G > 0)
    rc = be->group_norm_backward(gx ? *gx : NULL, gw ? *gw : NULL, gb ? *gb : NULL, cg, cx, mean,
                                 rstd, cw, g);
  else if (rc == 0) { /* an empty batch: the parameter gradients are zeros */
    if (gw) rc = em_zero_(*gw);
    if (rc == 0 && gb) rc = em_zero_(*gb);
  }
  em_release(cx);
  em_release(cg);
  em_release(cw);
  if (rc != 0) {
    em_tensor **outs[3] = {gx, gw, gb};
    for (int i = 0; i < 3; i++)
      if (outs[i]) {
        em_release(*outs[i]);
        *outs[i] = NULL;
      }
  }
  return rc;
}
