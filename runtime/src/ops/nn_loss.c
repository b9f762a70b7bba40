/*
 * nn_loss.c: definitions of the fused class losses, cross_entropy and nll_loss, and their
 * backward op (called by formulas_nn.c).
 *
 * Shapes are PyTorch's: scores [N, C] with targets [N], scores [N, C, d1, ...] with targets
 * [N, d1, ...], or unbatched scores [C] with a 0-d target. The kernel sees x as [N, C, S] and
 * targets as [N, S] (int64, 0-based), writes each row's loss (and, for cross entropy, its
 * logsumexp, which the backward reuses instead of recomputing the softmax's normalizer), and
 * the summed weights of the counted targets: the mean's denominator, a 0-d tensor on x's
 * device (saved on the node), so that neither the mean nor its backward makes the host wait
 * for a GPU. float16 / bfloat16 compute in float32.
 */
#include "../autocast.h"
#include "../autograd/record.h"
#include "../nn.h"

static bool is_half(int dt) { return dt == EM_FLOAT16 || dt == EM_BFLOAT16; }

/* A bare [a, b, c] view of a contiguous tensor (no autograd: the op records itself). */
static em_tensor *view3(const em_tensor *t, int64_t a, int64_t b, int64_t c) {
  int64_t sizes[3] = {a, b, c}, strides[3];
  em_contiguous_strides(3, sizes, strides);
  return em_tensor_view_of(t, 3, sizes, strides, t->offset);
}

static int check_loss_args(const char *fn, const em_tensor *x, const em_tensor *target,
                           const em_tensor *weight, em_reduction reduction) {
  if (x == NULL || target == NULL)
    return em_error("%s: expected input and target tensors, got NULL", fn);
  if (!em_dtypes[x->dtype_id].is_float)
    return em_error("%s: expected a floating point input, got %s", fn,
                    em_dtype_name((em_dtype)x->dtype_id));
  if (em_dtypes[target->dtype_id].is_float || target->dtype_id == EM_BOOL)
    return em_error("%s: expected integer class targets, got %s", fn,
                    em_dtype_name((em_dtype)target->dtype_id));
  if ((unsigned)reduction > EM_REDUCTION_SUM)
    return em_error("%s: invalid reduction %d", fn, (int)reduction);
  const em_tensor *ts[3] = {x, target, weight};
  if (em_check_same_device(fn, weight ? 3 : 2, ts) != 0) return -1;
  if (x->ndim < 1) return em_error("%s: expected an input with a class dim, got a 0-d input", fn);
  /* the target's shape is the input's without the class dim (dim 1, or 0 when unbatched) */
  int cdim = x->ndim == 1 ? 0 : 1;
  int64_t want[EM_MAX_DIMS];
  int nw = 0;
  for (int d = 0; d < x->ndim; d++)
    if (d != cdim) want[nw++] = x->sizes[d];
  if (target->ndim != nw || memcmp(target->sizes, want, sizeof(int64_t) * (size_t)nw) != 0) {
    char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF], c[EM_SHAPE_BUF];
    return em_error("%s: expected a target of shape %s for input %s, got %s", fn,
                    em_shape_str(a, sizeof a, nw, want), em_shape_str(b, sizeof b, x->ndim, x->sizes),
                    em_shape_str(c, sizeof c, target->ndim, target->sizes));
  }
  int64_t C = x->sizes[cdim];
  if (weight && (weight->ndim != 1 || weight->sizes[0] != C)) {
    char b[EM_SHAPE_BUF];
    return em_error("%s: expected a class weight of shape [%lld], got %s", fn, (long long)C,
                    em_shape_str(b, sizeof b, weight->ndim, weight->sizes));
  }
  if (weight && weight->dtype_id != x->dtype_id)
    return em_error("%s: expected a class weight of the input's dtype %s, got %s", fn,
                    em_dtype_name((em_dtype)x->dtype_id), em_dtype_name((em_dtype)weight->dtype_id));
  return 0;
}

static em_tensor *class_loss(const char *fn, bool lsm, const em_tensor *x, const em_tensor *target,
                             const em_tensor *weight, int64_t ignore_index,
                             em_reduction reduction, double smoothing);

static em_tensor *class_loss_half(const char *fn, bool lsm, const em_tensor *x,
                                  const em_tensor *target, const em_tensor *weight,
                                  int64_t ignore_index, em_reduction reduction, double smoothing) {
  em_tensor *fx = em_to_dtype(x, EM_FLOAT32);
  em_tensor *fw = weight ? em_to_dtype(weight, EM_FLOAT32) : NULL;
  em_tensor *r = NULL;
  if (fx && (fw || !weight)) {
    em_tensor *f = class_loss(fn, lsm, fx, target, fw, ignore_index, reduction, smoothing);
    r = f ? em_to_dtype(f, (em_dtype)x->dtype_id) : NULL;
    em_release(f);
  }
  em_release(fx);
  em_release(fw);
  return r;
}

/* The unreduced loss [N, d...] reduced as asked (without recording: the op records itself). */
static em_tensor *reduce_loss(em_tensor *loss, em_reduction reduction, const em_tensor *denom) {
  if (reduction == EM_REDUCTION_NONE) return em_retain(loss);
  em_tensor *s = em_reduce(EM_SUM, loss, 0, NULL, 0);
  if (s == NULL || reduction == EM_REDUCTION_SUM) return s;
  em_tensor *m = em_binary(EM_DIV, s, denom);
  em_release(s);
  return m;
}

static em_tensor *class_loss(const char *fn, bool lsm, const em_tensor *x, const em_tensor *target,
                             const em_tensor *weight, int64_t ignore_index,
                             em_reduction reduction, double smoothing) {
  if (is_half(x->dtype_id))
    return class_loss_half(fn, lsm, x, target, weight, ignore_index, reduction, smoothing);
  const em_backend *be = em_device_backend(x->device_id);
  bool unbatched = x->ndim == 1;
  em_class_loss L = {unbatched ? 1 : x->sizes[0], unbatched ? x->sizes[0] : x->sizes[1], 1,
                     ignore_index, smoothing};
  for (int d = 2; d < x->ndim; d++) L.S *= x->sizes[d];
  em_tensor *cx = em_contiguous(x), *cw = weight ? em_contiguous(weight) : NULL;
  em_tensor *t64 = target->dtype_id == EM_INT64 ? em_contiguous(target)
                                                : em_to_dtype(target, EM_INT64);
  em_tensor *x3 = cx ? view3(cx, L.N, L.C, L.S) : NULL;
  em_tensor *loss = em_empty(target->ndim, target->sizes, (em_dtype)x->dtype_id, x->device_id);
  em_tensor *lse = lsm ? em_empty(target->ndim, target->sizes, (em_dtype)x->dtype_id, x->device_id)
                       : NULL;
  em_tensor *total = em_empty(0, NULL, (em_dtype)x->dtype_id, x->device_id), *out = NULL;
  int rc = x3 && t64 && (cw || !weight) && loss && (lse || !lsm) && total ? 0 : -1;
  if (rc == 0 && be->class_loss == NULL)
    rc = em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: not implemented on %s", fn, be->name);
  if (rc == 0 && L.N * L.S > 0) rc = be->class_loss(lsm, loss, lse, total, x3, t64, cw, &L);
  else if (rc == 0) rc = em_zero_(total);
  if (rc == 0) {
    int mode = em_set_grad_enabled(0);
    out = reduce_loss(loss, reduction, total);
    em_set_grad_enabled(mode);
    if (out == NULL) rc = -1;
  }
  const em_tensor *ins[1] = {x};
  if (rc == 0 && em_ag_should_record(1, ins) &&
      em_ag_record_class_loss(lsm, out, x, lse, t64, cw, &L, reduction, total) != 0)
    rc = -1;
  em_tensor *tmp[7] = {cx, cw, t64, x3, loss, lse, total};
  for (int i = 0; i < 7; i++) em_release(tmp[i]);
  if (rc != 0) {
    em_error_prefix(fn);
    em_release(out);
    return NULL;
  }
  return out;
}

em_tensor *em_cross_entropy(const em_tensor *input, const em_tensor *target,
                            const em_tensor *weight, int64_t ignore_index,
                            em_reduction reduction, double label_smoothing) {
  const char *fn = "cross_entropy";
  EM_AUTOCAST(fn, em_cross_entropy(ac_[0], ac_[1], ac_[2], ignore_index, reduction,
                                   label_smoothing), input, target, weight);
  if (check_loss_args(fn, input, target, weight, reduction) != 0) return NULL;
  if (!(label_smoothing >= 0 && label_smoothing <= 1))
    return em_error_null("%s: expected label_smoothing between 0 and 1, got %g", fn,
                         label_smoothing);
  return class_loss(fn, true, input, target, weight, ignore_index, reduction, label_smoothing);
}

em_tensor *em_nll_loss(const em_tensor *input, const em_tensor *target, const em_tensor *weight,
                       int64_t ignore_index, em_reduction reduction) {
  const char *fn = "nll_loss";
  EM_AUTOCAST(fn, em_nll_loss(ac_[0], ac_[1], ac_[2], ignore_index, reduction), input, target,
              weight);
  if (check_loss_args(fn, input, target, weight, reduction) != 0) return NULL;
  return class_loss(fn, false, input, target, weight, ignore_index, reduction, 0);
}

em_tensor *em_nn_class_loss_backward(bool lsm, const em_tensor *gloss, const em_tensor *x,
                                     const em_tensor *lse, const em_tensor *target,
                                     const em_tensor *weight, const em_class_loss *L) {
  const char *fn = lsm ? "cross_entropy_backward" : "nll_loss_backward";
  const em_backend *be = em_device_backend(x->device_id);
  if (be->class_loss_backward == NULL)
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: not implemented on %s", fn, be->name),
           NULL;
  em_tensor *cx = em_contiguous(x), *cg = em_contiguous(gloss), *cl = lse ? em_contiguous(lse) : NULL;
  em_tensor *gx = em_empty(x->ndim, x->sizes, (em_dtype)x->dtype_id, x->device_id);
  em_tensor *x3 = cx ? view3(cx, L->N, L->C, L->S) : NULL, *g3 = gx ? view3(gx, L->N, L->C, L->S) : NULL;
  int rc = x3 && g3 && cg && (cl || !lse) ? 0 : -1;
  if (rc == 0 && L->N * L->S > 0)
    rc = be->class_loss_backward(lsm, g3, cg, x3, cl, target, weight, L);
  em_tensor *tmp[5] = {cx, cg, cl, x3, g3};
  for (int i = 0; i < 5; i++) em_release(tmp[i]);
  if (rc != 0) {
    em_error_prefix(fn);
    em_release(gx);
    return NULL;
  }
  return gx;
}
