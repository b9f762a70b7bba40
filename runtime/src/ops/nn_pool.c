/*
 * nn_pool.c: definitions of 2-D pooling: max_pool2d (with argmax indices), avg_pool2d,
 * adaptive_avg_pool2d, adaptive_max_pool2d and max_unpool2d.
 *
 * Output sizes and argument rules are PyTorch's: the padding is at most half the (dilated)
 * kernel, so every window holds at least one input element; with ceil_mode a last partial
 * window is kept only when it starts inside the input or its left padding. Unbatched inputs
 * ([C, H, W]) get a batch dim of 1 through a view. float16 / bfloat16 compute in float32.
 *
 * Autograd: max pooling saves its indices and its gradient is max_unpool (a scatter), whose
 * own gradient is a gather (formulas_nn.c); average pooling and its adjoint are each other's
 * gradient.
 */
#include "../autograd/record.h"
#include "../nn.h"

static bool is_half(int dt) { return dt == EM_FLOAT16 || dt == EM_BFLOAT16; }

static int check_input(const char *fn, const em_tensor *x) {
  if (x == NULL) return em_error("%s: expected an input tensor, got NULL", fn);
  if (x->ndim != 3 && x->ndim != 4)
    return em_error("%s: expected a 3-D (unbatched) or 4-D input, got %d-D", fn, x->ndim);
  if (!em_dtypes[x->dtype_id].is_float)
    return em_error("%s: expected a floating point input, got %s", fn,
                    em_dtype_name((em_dtype)x->dtype_id));
  int64_t C = x->sizes[x->ndim - 3], H = x->sizes[x->ndim - 2], W = x->sizes[x->ndim - 1];
  if (C == 0 || H == 0 || W == 0) {
    char b[EM_SHAPE_BUF];
    return em_error("%s: expected non-empty channel and spatial dims, got input %s", fn,
                    em_shape_str(b, sizeof b, x->ndim, x->sizes));
  }
  return 0;
}

/* A 4-D contiguous view or copy (batch dim added when unbatched); new reference. */
static em_tensor *as_batched(const em_tensor *x) {
  if (x->ndim == 3) return em_unsqueeze(x, 0);
  return em_retain((em_tensor *)x);
}

static em_tensor *drop_batch(em_tensor *y, const em_tensor *x) {
  if (y == NULL || x->ndim == 4) return y;
  em_tensor *r = em_squeeze(y, 0);
  em_release(y);
  return r;
}

/* PyTorch's pooling_output_shape. */
static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  int64_t span = in + 2 * p - d * (k - 1) - 1;
  if (span < 0) return 0;
  int64_t o = (span + (ceil_mode ? s - 1 : 0)) / s + 1;
  if (ceil_mode && (o - 1) * s >= in + p) o--;
  return o;
}

/* Fills g from the pair arguments; checks them as PyTorch does. */
static int fixed_geometry(const char *fn, const em_tensor *x4, const int64_t *kernel,
                          const int64_t *stride, const int64_t *padding, const int64_t *dilation,
                          bool ceil_mode, em_pool_geom *g) {
  if (kernel == NULL) return em_error("%s: expected a kernel size, got NULL", fn);
  int64_t k[2], s[2], p[2], d[2], o[2], in[2] = {x4->sizes[2], x4->sizes[3]};
  for (int i = 0; i < 2; i++) {
    k[i] = kernel[i];
    s[i] = stride ? stride[i] : kernel[i];
    p[i] = padding ? padding[i] : 0;
    d[i] = dilation ? dilation[i] : 1;
    if (k[i] < 1) return em_error("%s: expected kernel size >= 1, got %lld", fn, (long long)k[i]);
    if (s[i] < 1) return em_error("%s: expected stride >= 1, got %lld", fn, (long long)s[i]);
    if (d[i] < 1) return em_error("%s: expected dilation >= 1, got %lld", fn, (long long)d[i]);
    int64_t eff = d[i] * (k[i] - 1) + 1;
    if (p[i] < 0 || p[i] > eff / 2)
      return em_error("%s: expected padding between 0 and half the kernel size (%lld), got %lld",
                      fn, (long long)(eff / 2), (long long)p[i]);
    o[i] = out_size(in[i], k[i], s[i], p[i], d[i], ceil_mode);
  }
  if (o[0] < 1 || o[1] < 1) {
    char b[EM_SHAPE_BUF];
    return em_error("%s: the output size %lldx%lld is too small (input %s, kernel %lldx%lld, "
                    "padding %lldx%lld)", fn, (long long)o[0], (long long)o[1],
                    em_shape_str(b, sizeof b, 4, x4->sizes), (long long)k[0], (long long)k[1],
                    (long long)p[0], (long long)p[1]);
  }
  memset(g, 0, sizeof *g);
  g->N = x4->sizes[0], g->C = x4->sizes[1], g->H = in[0], g->W = in[1];
  g->OH = o[0], g->OW = o[1];
  g->kh = k[0], g->kw = k[1], g->sh = s[0], g->sw = s[1], g->ph = p[0], g->pw = p[1];
  g->dh = d[0], g->dw = d[1];
  return 0;
}

static int adaptive_geometry(const char *fn, const em_tensor *x4, const int64_t *output_size,
                             em_pool_geom *g) {
  if (output_size == NULL) return em_error("%s: expected an output size, got NULL", fn);
  if (output_size[0] < 1 || output_size[1] < 1)
    return em_error("%s: expected an output size >= 1, got %lldx%lld", fn,
                    (long long)output_size[0], (long long)output_size[1]);
  memset(g, 0, sizeof *g);
  g->N = x4->sizes[0], g->C = x4->sizes[1], g->H = x4->sizes[2], g->W = x4->sizes[3];
  g->OH = output_size[0], g->OW = output_size[1];
  g->kh = g->kw = g->sh = g->sw = g->dh = g->dw = 1;
  g->adaptive = true;
  return 0;
}

static em_tensor *output_of(const em_tensor *x, const em_pool_geom *g, em_dtype dt) {
  int64_t sizes[4] = {g->N, g->C, g->OH, g->OW};
  return em_empty(4, sizes, dt, x->device_id);
}

/* ---- max -------------------------------------------------------------------------------------- */

static em_tensor *max_pool(const char *fn, const em_tensor *x4, const em_pool_geom *g,
                           em_tensor **indices) {
  if (is_half(x4->dtype_id)) {
    em_tensor *f = em_to_dtype(x4, EM_FLOAT32);
    em_tensor *y = f ? max_pool(fn, f, g, indices) : NULL;
    em_release(f);
    em_tensor *r = y ? em_to_dtype(y, (em_dtype)x4->dtype_id) : NULL;
    em_release(y);
    if (r == NULL && indices) {
      em_release(*indices);
      *indices = NULL;
    }
    return r;
  }
  const em_backend *be = em_device_backend(x4->device_id);
  em_tensor *cx = em_contiguous(x4);
  em_tensor *y = output_of(x4, g, (em_dtype)x4->dtype_id);
  em_tensor *ind = output_of(x4, g, EM_INT64);
  int rc = cx && y && ind ? 0 : -1;
  if (rc == 0 && be->max_pool2d == NULL)
    rc = em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: not implemented on %s", fn, be->name);
  if (rc == 0 && em_numel(y) > 0) rc = be->max_pool2d(y, ind, cx, g);
  em_release(cx);
  const em_tensor *ins[1] = {x4};
  if (rc == 0 && em_ag_should_record(1, ins) && em_ag_record_max_pool(y, x4, ind) != 0) rc = -1;
  if (rc != 0) {
    em_error_prefix(fn);
    em_release(y);
    em_release(ind);
    return NULL;
  }
  if (indices) *indices = ind;
  else em_release(ind);
  return y;
}

/* The shared tail of the max pooling entry points: unbatch the result and the indices. */
static em_tensor *max_finish(em_tensor *y, em_tensor *ind, const em_tensor *x,
                             em_tensor **indices) {
  if (y == NULL) return NULL;
  if (indices) {
    *indices = drop_batch(ind, x);
    if (*indices == NULL) {
      em_release(y);
      return NULL;
    }
  }
  return drop_batch(y, x);
}

em_tensor *em_max_pool2d(const em_tensor *input, const int64_t *kernel, const int64_t *stride,
                         const int64_t *padding, const int64_t *dilation, int ceil_mode,
                         em_tensor **indices) {
  const char *fn = "max_pool2d";
  if (indices) *indices = NULL;
  if (check_input(fn, input) != 0) return NULL;
  em_tensor *x4 = as_batched(input);
  em_pool_geom g;
  em_tensor *ind = NULL;
  em_tensor *y = x4 && fixed_geometry(fn, x4, kernel, stride, padding, dilation, ceil_mode != 0,
                                      &g) == 0
                     ? max_pool(fn, x4, &g, indices ? &ind : NULL)
                     : NULL;
  em_release(x4);
  return max_finish(y, ind, input, indices);
}

em_tensor *em_adaptive_max_pool2d(const em_tensor *input, const int64_t *output_size,
                                  em_tensor **indices) {
  const char *fn = "adaptive_max_pool2d";
  if (indices) *indices = NULL;
  if (check_input(fn, input) != 0) return NULL;
  em_tensor *x4 = as_batched(input);
  em_pool_geom g;
  em_tensor *ind = NULL;
  em_tensor *y = x4 && adaptive_geometry(fn, x4, output_size, &g) == 0
                     ? max_pool(fn, x4, &g, indices ? &ind : NULL)
                     : NULL;
  em_release(x4);
  return max_finish(y, ind, input, indices);
}

/* ---- unpooling (max pooling's gradient) --------------------------------------------------- */

em_tensor *em_nn_max_unpool(const em_tensor *gy, const em_tensor *indices,
                            const int64_t *x_sizes) {
  const char *fn = "max_unpool2d";
  if (is_half(gy->dtype_id)) {
    em_tensor *f = em_to_dtype(gy, EM_FLOAT32);
    em_tensor *r = f ? em_nn_max_unpool(f, indices, x_sizes) : NULL;
    em_release(f);
    em_tensor *h = r ? em_to_dtype(r, (em_dtype)gy->dtype_id) : NULL;
    em_release(r);
    return h;
  }
  const em_backend *be = em_device_backend(gy->device_id);
  em_tensor *cg = em_contiguous(gy), *ci = em_contiguous(indices);
  em_tensor *gx = em_empty(4, x_sizes, (em_dtype)gy->dtype_id, gy->device_id);
  int rc = cg && ci && gx ? 0 : -1;
  if (rc == 0 && be->max_unpool2d == NULL)
    rc = em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: not implemented on %s", fn, be->name);
  if (rc == 0 && em_numel(gx) > 0) rc = be->max_unpool2d(gx, cg, ci);
  em_release(cg);
  em_release(ci);
  const em_tensor *ins[1] = {gy};
  if (rc == 0 && em_ag_should_record(1, ins) && em_ag_record_max_unpool(gx, gy, indices) != 0)
    rc = -1;
  if (rc != 0) {
    em_error_prefix(fn);
    em_release(gx);
    return NULL;
  }
  return gx;
}

/* Indices index a plane of output_size: checked here, since the kernel writes through them. */
static int check_indices(const char *fn, const em_tensor *ind, int64_t plane) {
  em_tensor *lo = em_reduce(EM_AMIN, ind, 0, NULL, 0), *hi = em_reduce(EM_AMAX, ind, 0, NULL, 0);
  int64_t a = 0, b = 0;
  int rc = lo && hi && em_item_int64(lo, &a) == 0 && em_item_int64(hi, &b) == 0 ? 0 : -1;
  em_release(lo);
  em_release(hi);
  if (rc == 0 && (a < 0 || b >= plane))
    rc = em_error("%s: expected indices in [0, %lld) for the output size, got %lld", fn,
                  (long long)plane, (long long)(a < 0 ? a : b));
  return rc;
}

/* max_unpool2d stores each value at its index, as PyTorch does: where overlapping windows
 * (stride < kernel) picked one element twice, it appears once, not summed (the sum is max
 * pooling's gradient, em_nn_max_unpool). A scatter into zeros over planes [N, C, OH * OW]; its
 * gradient is the gather at the same indices, as PyTorch's. */
static em_tensor *unpool_store(const em_tensor *x4, const em_tensor *i4, const int64_t *os) {
  int64_t planes[3] = {x4->sizes[0], x4->sizes[1], x4->sizes[2] * x4->sizes[3]};
  int64_t out3[3] = {x4->sizes[0], x4->sizes[1], os[0] * os[1]};
  int64_t out4[4] = {x4->sizes[0], x4->sizes[1], os[0], os[1]};
  em_tensor *src = em_reshape(x4, 3, planes), *idx = src ? em_reshape(i4, 3, planes) : NULL;
  em_tensor *z = idx ? em_zeros(3, out3, (em_dtype)x4->dtype_id, x4->device_id) : NULL;
  em_tensor *y3 = z ? em_scatter(z, 2, idx, src) : NULL;
  em_tensor *y = y3 ? em_reshape(y3, 4, out4) : NULL;
  em_release(src);
  em_release(idx);
  em_release(z);
  em_release(y3);
  return y;
}

em_tensor *em_max_unpool2d(const em_tensor *input, const em_tensor *indices,
                           const int64_t *output_size) {
  const char *fn = "max_unpool2d";
  if (check_input(fn, input) != 0) return NULL;
  if (indices == NULL || output_size == NULL)
    return em_error_null("%s: expected indices and an output size, got NULL", fn);
  if (indices->dtype_id != EM_INT64)
    return em_error_null("%s: expected int64 indices, got %s", fn,
                         em_dtype_name((em_dtype)indices->dtype_id));
  if (indices->ndim != input->ndim ||
      memcmp(indices->sizes, input->sizes, sizeof(int64_t) * (size_t)input->ndim) != 0) {
    char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF];
    return em_error_null("%s: expected indices of the input's shape %s, got %s", fn,
                         em_shape_str(a, sizeof a, input->ndim, input->sizes),
                         em_shape_str(b, sizeof b, indices->ndim, indices->sizes));
  }
  if (output_size[0] < 1 || output_size[1] < 1)
    return em_error_null("%s: expected an output size >= 1, got %lldx%lld", fn,
                         (long long)output_size[0], (long long)output_size[1]);
  const em_tensor *ts[2] = {input, indices};
  if (em_check_same_device(fn, 2, ts) != 0) return NULL;
  if (em_numel(indices) > 0 && check_indices(fn, indices, output_size[0] * output_size[1]) != 0)
    return NULL;
  em_tensor *x4 = as_batched(input), *i4 = as_batched(indices);
  em_tensor *y = x4 && i4 ? unpool_store(x4, i4, output_size) : NULL;
  em_release(x4);
  em_release(i4);
  if (y == NULL) em_error_prefix(fn);
  return drop_batch(y, input);
}

/* ---- average ---------------------------------------------------------------------------------- */

static em_tensor *avg_run(int adjoint, const em_tensor *in, const em_pool_geom *g) {
  const char *fn = adjoint ? "avg_pool2d_backward" : "avg_pool2d";
  if (is_half(in->dtype_id)) {
    em_tensor *f = em_to_dtype(in, EM_FLOAT32);
    em_tensor *r = f ? avg_run(adjoint, f, g) : NULL;
    em_release(f);
    em_tensor *h = r ? em_to_dtype(r, (em_dtype)in->dtype_id) : NULL;
    em_release(r);
    return h;
  }
  const em_backend *be = em_device_backend(in->device_id);
  int64_t sizes[4] = {g->N, g->C, adjoint ? g->H : g->OH, adjoint ? g->W : g->OW};
  em_tensor *ci = em_contiguous(in);
  em_tensor *out = em_empty(4, sizes, (em_dtype)in->dtype_id, in->device_id);
  int rc = ci && out ? 0 : -1;
  if (rc == 0 && (adjoint ? be->avg_pool2d_backward == NULL : be->avg_pool2d == NULL))
    rc = em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: not implemented on %s", fn, be->name);
  if (rc == 0 && em_numel(out) > 0)
    rc = adjoint ? be->avg_pool2d_backward(out, ci, g) : be->avg_pool2d(out, ci, g);
  em_release(ci);
  const em_tensor *ins[1] = {in};
  if (rc == 0 && em_ag_should_record(1, ins) && em_ag_record_avg_pool(adjoint, out, in, g) != 0)
    rc = -1;
  if (rc != 0) {
    em_error_prefix(fn);
    em_release(out);
    return NULL;
  }
  return out;
}

em_tensor *em_nn_avg_pool(const em_tensor *x, const em_pool_geom *g) { return avg_run(0, x, g); }
em_tensor *em_nn_avg_pool_t(const em_tensor *gy, const em_pool_geom *g) {
  return avg_run(1, gy, g);
}

em_tensor *em_avg_pool2d(const em_tensor *input, const int64_t *kernel, const int64_t *stride,
                         const int64_t *padding, int ceil_mode, int count_include_pad,
                         int64_t divisor_override) {
  const char *fn = "avg_pool2d";
  if (check_input(fn, input) != 0) return NULL;
  em_tensor *x4 = as_batched(input);
  em_pool_geom g;
  em_tensor *y = NULL;
  if (x4 && fixed_geometry(fn, x4, kernel, stride, padding, NULL, ceil_mode != 0, &g) == 0) {
    g.count_include_pad = count_include_pad != 0;
    g.divisor = divisor_override > 0 ? divisor_override : 0;
    y = em_nn_avg_pool(x4, &g);
  }
  em_release(x4);
  return drop_batch(y, input);
}

em_tensor *em_adaptive_avg_pool2d(const em_tensor *input, const int64_t *output_size) {
  const char *fn = "adaptive_avg_pool2d";
  if (check_input(fn, input) != 0) return NULL;
  em_tensor *x4 = as_batched(input);
  em_pool_geom g;
  em_tensor *y = NULL;
  if (x4 && adaptive_geometry(fn, x4, output_size, &g) == 0) y = em_nn_avg_pool(x4, &g);
  em_release(x4);
  return drop_batch(y, input);
}
