/*
 * nn_conv.c: definitions of the convolutions: conv1d, conv2d, conv_transpose1d,
 * conv_transpose2d and conv2d's weight gradient (torch.nn.grad.conv2d_weight).
 *
 * They all reduce to the three bilinear ops of nn.h over one geometry: F (conv2d), T (its
 * input gradient, which is conv_transpose2d) and Wg (its weight gradient). The public
 * functions check their arguments and name them the way the caller sees them; the internal
 * ops (em_nn_conv, em_nn_conv_t, em_nn_conv_w) trust their shapes, which is what the backward
 * formulas need: the gradient of each op is written with the other two.
 *
 * 1-D convolutions are 2-D ones over [N, C, 1, L] views, and unbatched inputs ([C, H, W]) get a
 * batch dim of 1: views, so autograd follows them for free. bfloat16 goes to the kernels as it
 * is on backends whose conv slots take it (backend.h's conv_bf16: the CPU, on its bf16
 * instructions); otherwise float16 and bfloat16 compute in float32 (recorded casts, so
 * gradients flow through them too).
 */
#include "../autocast.h"
#include "../autograd/record.h"
#include "../nn.h"

enum { CONV_F = EM_CONV_F, CONV_T = EM_CONV_T, CONV_W = EM_CONV_W };

static bool is_half(int dt) { return dt == EM_FLOAT16 || dt == EM_BFLOAT16; }

/* ---- the internal ops --------------------------------------------------------------------- */

/* The geometry of one op from its operands: for F a = x, b = w; for T a = y, b = w; for Wg
 * a = x, b = y. hw is the spatial size the op produces (y's, x's or w's); NULL for F means
 * the usual output size formula. */
static void geometry(int kind, const em_tensor *a, const em_tensor *b, const int64_t *hw,
                     const em_conv_args *r, em_conv_geom *g) {
  memset(g, 0, sizeof *g);
  g->sh = r->stride[0], g->sw = r->stride[1];
  g->ph = r->padding[0], g->pw = r->padding[1];
  g->dh = r->dilation[0], g->dw = r->dilation[1];
  g->groups = r->groups;
  g->N = a->sizes[0];
  if (kind == CONV_F) {
    g->C = a->sizes[1], g->H = a->sizes[2], g->W = a->sizes[3];
    g->M = b->sizes[0], g->kh = b->sizes[2], g->kw = b->sizes[3];
    if (hw) {
      g->OH = hw[0], g->OW = hw[1];
    } else {
      g->OH = (g->H + 2 * g->ph - g->dh * (g->kh - 1) - 1) / g->sh + 1;
      g->OW = (g->W + 2 * g->pw - g->dw * (g->kw - 1) - 1) / g->sw + 1;
    }
  } else if (kind == CONV_T) {
    g->M = a->sizes[1], g->OH = a->sizes[2], g->OW = a->sizes[3];
    g->C = b->sizes[1] * g->groups, g->kh = b->sizes[2], g->kw = b->sizes[3];
    g->H = hw[0], g->W = hw[1];
  } else {
    g->C = a->sizes[1], g->H = a->sizes[2], g->W = a->sizes[3];
    g->M = b->sizes[1], g->OH = b->sizes[2], g->OW = b->sizes[3];
    g->kh = hw[0], g->kw = hw[1];
  }
}

static const char *kind_name[3] = {"conv2d", "conv_transpose2d", "conv2d_weight"};

static int run_kernel(int kind, em_tensor *out, const em_tensor *a, const em_tensor *b,
                      const em_tensor *bias, const em_conv_geom *g) {
  const em_backend *be = em_device_backend(out->device_id);
  const char *fn = kind_name[kind];
  /* BLAS takes int sizes: the largest matrix any of the three kernels forms */
  int64_t Kg = g->C / g->groups * g->kh * g->kw, P = g->OH * g->OW;
  if (Kg > INT32_MAX || P > INT32_MAX || g->M > INT32_MAX || g->H * g->W > INT32_MAX)
    return em_error("%s: sizes beyond %d are not supported (columns %lld x %lld)", fn,
                    INT32_MAX, (long long)Kg, (long long)P);
  if (em_numel(out) == 0) return 0;
  switch (kind) {
  case CONV_F:
    EM_NEED_KERNEL(fn, be, conv2d);
    return be->conv2d(out, a, b, bias, g);
  case CONV_T:
    EM_NEED_KERNEL(fn, be, conv2d_input_grad);
    return be->conv2d_input_grad(out, a, b, bias, g);
  default:
    EM_NEED_KERNEL(fn, be, conv2d_weight_grad);
    return be->conv2d_weight_grad(out, a, b, g);
  }
}

static em_tensor *to_dtype_or_null(const em_tensor *t, em_dtype dt, bool *ok) {
  if (t == NULL) return NULL;
  em_tensor *r = em_to_dtype(t, dt);
  if (r == NULL) *ok = false;
  return r;
}

static em_tensor *conv_op(int kind, const em_tensor *a, const em_tensor *b, const em_tensor *bias,
                          const int64_t *hw, const em_conv_args *r);

/* float16 / bfloat16: the same op in float32, between recorded casts. */
static em_tensor *conv_half(int kind, const em_tensor *a, const em_tensor *b,
                            const em_tensor *bias, const int64_t *hw, const em_conv_args *r) {
  bool ok = true;
  em_dtype dt = (em_dtype)a->dtype_id;
  em_tensor *fa = to_dtype_or_null(a, EM_FLOAT32, &ok), *fb = to_dtype_or_null(b, EM_FLOAT32, &ok);
  em_tensor *fbias = to_dtype_or_null(bias, EM_FLOAT32, &ok);
  em_tensor *out = NULL;
  if (ok) {
    em_tensor *f = conv_op(kind, fa, fb, fbias, hw, r);
    if (f) out = em_to_dtype(f, dt);
    em_release(f);
  }
  em_release(fa);
  em_release(fb);
  em_release(fbias);
  return out;
}

/* Whether the backend's kernels take this 16-bit dtype themselves. */
static bool native_half(const em_tensor *a) {
  const em_backend *be = em_device_backend(a->device_id);
  if (a->dtype_id == EM_BFLOAT16 && be->conv_bf16) return true;
  return be->conv_half != NULL && be->conv_half(a->device_id, (em_dtype)a->dtype_id);
}

static em_tensor *conv_op(int kind, const em_tensor *a, const em_tensor *b, const em_tensor *bias,
                          const int64_t *hw, const em_conv_args *r) {
  if (is_half(a->dtype_id) && !native_half(a)) return conv_half(kind, a, b, bias, hw, r);
  em_conv_geom g;
  geometry(kind, a, b, hw, r, &g);
  int64_t sizes[4];
  if (kind == CONV_F) sizes[0] = g.N, sizes[1] = g.M, sizes[2] = g.OH, sizes[3] = g.OW;
  else if (kind == CONV_T) sizes[0] = g.N, sizes[1] = g.C, sizes[2] = g.H, sizes[3] = g.W;
  else sizes[0] = g.M, sizes[1] = g.C / g.groups, sizes[2] = g.kh, sizes[3] = g.kw;
  em_tensor *ca = em_contiguous(a), *cb = em_contiguous(b);
  em_tensor *cbias = bias ? em_contiguous(bias) : NULL;
  em_tensor *out = em_empty(4, sizes, (em_dtype)a->dtype_id, a->device_id);
  int rc = ca && cb && (cbias || !bias) && out ? run_kernel(kind, out, ca, cb, cbias, &g) : -1;
  em_release(ca);
  em_release(cb);
  em_release(cbias);
  if (rc != 0) {
    em_error_prefix(kind_name[kind]);
    em_release(out);
    return NULL;
  }
  const em_tensor *ins[3] = {a, b, bias};
  EM_AG_RECORD(out, 3, ins, em_ag_record_conv(kind, out, a, b, bias, r));
  return out;
}

em_tensor *em_nn_conv(const em_tensor *x, const em_tensor *w, const em_tensor *bias,
                      const int64_t *y_hw, const em_conv_args *a) {
  return conv_op(CONV_F, x, w, bias, y_hw, a);
}

em_tensor *em_nn_conv_t(const em_tensor *y, const em_tensor *w, const em_tensor *bias,
                        const int64_t *x_hw, const em_conv_args *a) {
  return conv_op(CONV_T, y, w, bias, x_hw, a);
}

em_tensor *em_nn_conv_w(const em_tensor *x, const em_tensor *y, const int64_t *w_hw,
                        const em_conv_args *a) {
  return conv_op(CONV_W, x, y, NULL, w_hw, a);
}

/* ---- argument checks ------------------------------------------------------------------------ */

static int check_tensors(const char *fn, const em_tensor *x, const em_tensor *w,
                         const em_tensor *bias) {
  if (x == NULL || w == NULL)
    return em_error("%s: expected input and weight tensors, got NULL", fn);
  const em_tensor *ts[3] = {x, w, bias};
  if (em_check_same_device(fn, bias ? 3 : 2, ts) != 0) return -1;
  if (!em_dtypes[x->dtype_id].is_float)
    return em_error("%s: expected a floating point input, got %s", fn,
                    em_dtype_name((em_dtype)x->dtype_id));
  if (w->dtype_id != x->dtype_id)
    return em_error("%s: expected a weight of the input's dtype %s, got %s", fn,
                    em_dtype_name((em_dtype)x->dtype_id), em_dtype_name((em_dtype)w->dtype_id));
  if (bias && bias->dtype_id != x->dtype_id)
    return em_error("%s: expected a bias of the input's dtype %s, got %s", fn,
                    em_dtype_name((em_dtype)x->dtype_id),
                    em_dtype_name((em_dtype)bias->dtype_id));
  return 0;
}

static int check_args(const char *fn, int nsp, const int64_t *stride, const int64_t *padding,
                      const int64_t *dilation, int64_t groups) {
  if (stride == NULL || padding == NULL || dilation == NULL)
    return em_error("%s: expected stride, padding and dilation arrays, got NULL", fn);
  for (int i = 0; i < nsp; i++) {
    if (stride[i] < 1) return em_error("%s: expected stride >= 1, got %lld", fn, (long long)stride[i]);
    if (padding[i] < 0)
      return em_error("%s: expected padding >= 0, got %lld", fn, (long long)padding[i]);
    if (dilation[i] < 1)
      return em_error("%s: expected dilation >= 1, got %lld", fn, (long long)dilation[i]);
  }
  if (groups < 1) return em_error("%s: expected groups >= 1, got %lld", fn, (long long)groups);
  return 0;
}

static int check_bias(const char *fn, const em_tensor *bias, int64_t channels) {
  if (bias == NULL || (bias->ndim == 1 && bias->sizes[0] == channels)) return 0;
  char b[EM_SHAPE_BUF];
  return em_error("%s: expected a bias of shape [%lld], got %s", fn, (long long)channels,
                  em_shape_str(b, sizeof b, bias->ndim, bias->sizes));
}

/* Adds the batch dim to an unbatched input (a view), or retains x. */
static em_tensor *batched(const em_tensor *x, int full_ndim) {
  if (x->ndim == full_ndim - 1) return em_unsqueeze(x, 0);
  return em_retain((em_tensor *)x);
}

/* Drops the batch dim added by batched(); consumes y. */
static em_tensor *unbatched(em_tensor *y, const em_tensor *x, int full_ndim) {
  if (y == NULL || x->ndim == full_ndim) return y;
  em_tensor *r = em_squeeze(y, 0);
  em_release(y);
  return r;
}

/* "conv2d: expected input with 3 channels (weight [8,3,5,5]), got 4" */
static int channel_error(const char *fn, int64_t want, const em_tensor *w, const char *wname,
                         int64_t groups, int64_t got) {
  char b[EM_SHAPE_BUF];
  em_shape_str(b, sizeof b, w->ndim, w->sizes);
  if (groups == 1)
    return em_error("%s: expected input with %lld channels (%s %s), got %lld", fn,
                    (long long)want, wname, b, (long long)got);
  return em_error("%s: expected input with %lld channels (%s %s, groups %lld), got %lld", fn,
                  (long long)want, wname, b, (long long)groups, (long long)got);
}

/* ---- conv2d / conv1d ---------------------------------------------------------------------- */

static int check_conv(const char *fn, int nsp, const em_tensor *x, const em_tensor *w,
                      const em_tensor *bias, const int64_t *stride, const int64_t *padding,
                      const int64_t *dilation, int64_t groups) {
  if (check_tensors(fn, x, w, bias) != 0) return -1;
  if (check_args(fn, nsp, stride, padding, dilation, groups) != 0) return -1;
  if (x->ndim != nsp + 1 && x->ndim != nsp + 2)
    return em_error("%s: expected a %d-D (unbatched) or %d-D input, got %d-D", fn, nsp + 1,
                    nsp + 2, x->ndim);
  if (w->ndim != nsp + 2)
    return em_error("%s: expected a %d-D weight, got %d-D", fn, nsp + 2, w->ndim);
  int64_t M = w->sizes[0], C = x->sizes[x->ndim - nsp - 1];
  if (M % groups != 0)
    return em_error("%s: expected the weight's %lld output channels to be divisible by groups "
                    "(%lld)", fn, (long long)M, (long long)groups);
  if (C != w->sizes[1] * groups) return channel_error(fn, w->sizes[1] * groups, w, "weight", groups, C);
  if (check_bias(fn, bias, M) != 0) return -1;
  for (int i = 0; i < nsp; i++) {
    int64_t in = x->sizes[x->ndim - nsp + i] + 2 * padding[i];
    int64_t k = dilation[i] * (w->sizes[2 + i] - 1) + 1;
    if (k > in) {
      char ks[EM_SHAPE_BUF], is[EM_SHAPE_BUF];
      int64_t kk[2], ii[2];
      for (int j = 0; j < nsp; j++) {
        kk[j] = dilation[j] * (w->sizes[2 + j] - 1) + 1;
        ii[j] = x->sizes[x->ndim - nsp + j] + 2 * padding[j];
      }
      return em_error("%s: the kernel %s (dilated) is larger than the padded input %s", fn,
                      em_shape_str(ks, sizeof ks, nsp, kk), em_shape_str(is, sizeof is, nsp, ii));
    }
  }
  return 0;
}

em_tensor *em_conv2d(const em_tensor *input, const em_tensor *weight, const em_tensor *bias,
                     const int64_t *stride, const int64_t *padding, const int64_t *dilation,
                     int64_t groups) {
  const char *fn = "conv2d";
  EM_AUTOCAST(fn, em_conv2d(ac_[0], ac_[1], ac_[2], stride, padding, dilation, groups), input,
              weight, bias);
  if (check_conv(fn, 2, input, weight, bias, stride, padding, dilation, groups) != 0) return NULL;
  em_conv_args a = {{stride[0], stride[1]}, {padding[0], padding[1]}, {dilation[0], dilation[1]},
                    groups};
  em_tensor *x = batched(input, 4);
  em_tensor *y = x ? em_nn_conv(x, weight, bias, NULL, &a) : NULL;
  em_release(x);
  return unbatched(y, input, 4);
}

/* [N, C, L] -> [N, C, 1, L] (and the weight likewise), a view. */
static em_tensor *add_height(const em_tensor *t) { return em_unsqueeze(t, t->ndim - 1); }

em_tensor *em_conv1d(const em_tensor *input, const em_tensor *weight, const em_tensor *bias,
                     int64_t stride, int64_t padding, int64_t dilation, int64_t groups) {
  const char *fn = "conv1d";
  EM_AUTOCAST(fn, em_conv1d(ac_[0], ac_[1], ac_[2], stride, padding, dilation, groups), input,
              weight, bias);
  if (check_conv(fn, 1, input, weight, bias, &stride, &padding, &dilation, groups) != 0)
    return NULL;
  em_conv_args a = {{1, stride}, {0, padding}, {1, dilation}, groups};
  em_tensor *x1 = batched(input, 3);
  em_tensor *x = x1 ? add_height(x1) : NULL, *w = add_height(weight);
  em_tensor *y = x && w ? em_nn_conv(x, w, bias, NULL, &a) : NULL;
  em_tensor *y1 = y ? em_squeeze(y, 2) : NULL;
  em_release(x1);
  em_release(x);
  em_release(w);
  em_release(y);
  return unbatched(y1, input, 3);
}

/* ---- conv_transpose2d / conv_transpose1d --------------------------------------------------- */

static int check_transpose(const char *fn, int nsp, const em_tensor *x, const em_tensor *w,
                           const em_tensor *bias, const int64_t *stride, const int64_t *padding,
                           const int64_t *output_padding, const int64_t *dilation,
                           int64_t groups, int64_t *out_hw) {
  if (check_tensors(fn, x, w, bias) != 0) return -1;
  if (check_args(fn, nsp, stride, padding, dilation, groups) != 0) return -1;
  if (output_padding == NULL) return em_error("%s: expected an output_padding array, got NULL", fn);
  if (x->ndim != nsp + 1 && x->ndim != nsp + 2)
    return em_error("%s: expected a %d-D (unbatched) or %d-D input, got %d-D", fn, nsp + 1,
                    nsp + 2, x->ndim);
  if (w->ndim != nsp + 2)
    return em_error("%s: expected a %d-D weight, got %d-D", fn, nsp + 2, w->ndim);
  int64_t Cin = w->sizes[0], C = x->sizes[x->ndim - nsp - 1];
  if (Cin % groups != 0)
    return em_error("%s: expected the weight's %lld input channels to be divisible by groups "
                    "(%lld)", fn, (long long)Cin, (long long)groups);
  if (C != Cin) return channel_error(fn, Cin, w, "weight", groups, C);
  if (check_bias(fn, bias, w->sizes[1] * groups) != 0) return -1;
  for (int i = 0; i < nsp; i++) {
    int64_t op = output_padding[i];
    if (op < 0 || (op >= stride[i] && op >= dilation[i]))
      return em_error("%s: expected output_padding (%lld) to be >= 0 and smaller than the "
                      "stride (%lld) or the dilation (%lld)", fn, (long long)op,
                      (long long)stride[i], (long long)dilation[i]);
    int64_t in = x->sizes[x->ndim - nsp + i];
    out_hw[i] = (in - 1) * stride[i] - 2 * padding[i] + dilation[i] * (w->sizes[2 + i] - 1) + op + 1;
    if (out_hw[i] < 1)
      return em_error("%s: the output size %lld is not positive (input size %lld, padding %lld)",
                      fn, (long long)out_hw[i], (long long)in, (long long)padding[i]);
  }
  return 0;
}

em_tensor *em_conv_transpose2d(const em_tensor *input, const em_tensor *weight,
                               const em_tensor *bias, const int64_t *stride,
                               const int64_t *padding, const int64_t *output_padding,
                               const int64_t *dilation, int64_t groups) {
  const char *fn = "conv_transpose2d";
  EM_AUTOCAST(fn, em_conv_transpose2d(ac_[0], ac_[1], ac_[2], stride, padding, output_padding,
                                      dilation, groups), input, weight, bias);
  int64_t hw[2];
  if (check_transpose(fn, 2, input, weight, bias, stride, padding, output_padding, dilation,
                      groups, hw) != 0)
    return NULL;
  em_conv_args a = {{stride[0], stride[1]}, {padding[0], padding[1]}, {dilation[0], dilation[1]},
                    groups};
  em_tensor *x = batched(input, 4);
  em_tensor *y = x ? em_nn_conv_t(x, weight, bias, hw, &a) : NULL;
  em_release(x);
  return unbatched(y, input, 4);
}

em_tensor *em_conv_transpose1d(const em_tensor *input, const em_tensor *weight,
                               const em_tensor *bias, int64_t stride, int64_t padding,
                               int64_t output_padding, int64_t dilation, int64_t groups) {
  const char *fn = "conv_transpose1d";
  EM_AUTOCAST(fn, em_conv_transpose1d(ac_[0], ac_[1], ac_[2], stride, padding, output_padding,
                                      dilation, groups), input, weight, bias);
  int64_t len = 0;
  if (check_transpose(fn, 1, input, weight, bias, &stride, &padding, &output_padding, &dilation,
                      groups, &len) != 0)
    return NULL;
  em_conv_args a = {{1, stride}, {0, padding}, {1, dilation}, groups};
  int64_t hw[2] = {1, len};
  em_tensor *x1 = batched(input, 3);
  em_tensor *x = x1 ? add_height(x1) : NULL, *w = add_height(weight);
  em_tensor *y = x && w ? em_nn_conv_t(x, w, bias, hw, &a) : NULL;
  em_tensor *y1 = y ? em_squeeze(y, 2) : NULL;
  em_release(x1);
  em_release(x);
  em_release(w);
  em_release(y);
  return unbatched(y1, input, 3);
}

/* ---- the weight gradient ------------------------------------------------------------------ */

em_tensor *em_conv2d_weight(const em_tensor *input, const int64_t *weight_sizes,
                            const em_tensor *grad_output, const int64_t *stride,
                            const int64_t *padding, const int64_t *dilation, int64_t groups) {
  const char *fn = "conv2d_weight";
  if (check_tensors(fn, input, grad_output, NULL) != 0) return NULL;
  if (weight_sizes == NULL) return em_error_null("%s: expected weight sizes, got NULL", fn);
  if (check_args(fn, 2, stride, padding, dilation, groups) != 0) return NULL;
  if (input->ndim != 4 || grad_output->ndim != 4)
    return em_error_null("%s: expected a 4-D input and grad_output, got %d-D and %d-D", fn,
                         input->ndim, grad_output->ndim);
  int64_t ws[4];
  memcpy(ws, weight_sizes, sizeof ws);
  em_conv_args a = {{stride[0], stride[1]}, {padding[0], padding[1]}, {dilation[0], dilation[1]},
                    groups};
  /* geometry check: F(input, weight of ws) must have grad_output's shape */
  em_tensor wt = {0};
  wt.ndim = 4;
  memcpy(wt.sizes, ws, sizeof ws);
  if (ws[0] < 0 || ws[1] < 0 || ws[2] < 1 || ws[3] < 1 || ws[0] % groups != 0 ||
      ws[1] * groups != input->sizes[1] || grad_output->sizes[1] != ws[0] ||
      grad_output->sizes[0] != input->sizes[0]) {
    char b1[EM_SHAPE_BUF], b2[EM_SHAPE_BUF], b3[EM_SHAPE_BUF];
    return em_error_null("%s: weight %s (groups %lld) does not fit input %s and grad_output %s",
                         fn, em_shape_str(b1, sizeof b1, 4, ws), (long long)groups,
                         em_shape_str(b2, sizeof b2, 4, input->sizes),
                         em_shape_str(b3, sizeof b3, 4, grad_output->sizes));
  }
  em_conv_geom g;
  geometry(CONV_F, input, &wt, NULL, &a, &g);
  if (g.OH != grad_output->sizes[2] || g.OW != grad_output->sizes[3]) {
    char b1[EM_SHAPE_BUF];
    return em_error_null("%s: expected grad_output of spatial size [%lld,%lld], got %s", fn,
                         (long long)g.OH, (long long)g.OW,
                         em_shape_str(b1, sizeof b1, 4, grad_output->sizes));
  }
  return em_nn_conv_w(input, grad_output, ws + 2, &a);
}
