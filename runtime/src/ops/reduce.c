/*
 * reduce.c: definitions of the reduction family: reductions over a list of dims (sum, mean,
 * prod, amax, amin, all, any, logsumexp), var/std, norms, max/min along a dim with indices,
 * argmax/argmin, cumulative sums and products, softmax and log_softmax.
 *
 * A definition checks the input and the dims, chooses the output dtype as PyTorch does,
 * allocates the output in keepdim shape (size 1 in every reduced dim) and calls one kernel
 * slot with a bitmask of the reduced dims. Without keepdim the result is then a view that
 * drops those dims: no copy.
 *
 * dtypes: sum, prod, cumsum and cumprod of integers and bool give int64. mean, var, std and
 * norm need a floating input. logsumexp, softmax and log_softmax compute integers as float32
 * (x is cast first, so kernels see floats in, floats out). amax, amin, max and min keep the
 * dtype; all and any give bool. Kernels read every other input dtype directly.
 *
 * Empty inputs: sum gives 0, prod 1, mean and var NaN, all true, any false, logsumexp -inf.
 * amax, amin, max, min, argmax, argmin and the inf and negative norms have no identity, so
 * reducing over an empty dim is an error.
 */
#include <math.h>

#include "../autocast.h"
#include "../autograd/record.h"
#include "../backend.h"

static const char *reduce_names[EM_NUM_REDUCE] = {
  "sum", "mean", "prod", "amax", "amin", "all", "any", "logsumexp",
};

static bool is_float(em_dtype d) { return em_dtypes[d].is_float; }

static int need_float(const char *fn, const em_tensor *x) {
  if (is_float((em_dtype)x->dtype_id)) return 0;
  return em_error("%s: expected a floating point tensor, got %s", fn,
                  em_dtype_name((em_dtype)x->dtype_id));
}

/* The reduced dims as a bitmask; ndims == 0 means every dim. A 0-d tensor accepts dim 0 / -1
 * (and reduces over nothing). */
static int dims_mask(const char *fn, const em_tensor *x, int ndims, const int *dims,
                     uint32_t *mask) {
  if (ndims < 0 || ndims > EM_MAX_DIMS)
    return em_error("%s: expected at most %d dimensions, got %d", fn, EM_MAX_DIMS, ndims);
  if (ndims > 0 && dims == NULL)
    return em_error("%s: expected a list of %d dimensions, got NULL", fn, ndims);
  uint32_t m = 0, seen = 0;
  for (int i = 0; i < ndims; i++) {
    int d;
    if (em_wrap_dim(fn, dims[i], x->ndim, &d) != 0) return -1;
    if (seen & (1u << d))
      return em_error("%s: dimension %d appears more than once in the list of dimensions", fn,
                      d);
    seen |= 1u << d;
    if (x->ndim > 0) m |= 1u << d;
  }
  if (ndims == 0) m = (uint32_t)((1u << x->ndim) - 1u);
  *mask = m;
  return 0;
}

/* For the reductions without an identity (max, min, ...). */
static int check_nonempty(const char *fn, const em_tensor *x, uint32_t mask) {
  /* The message shows the shape rather than a dim number, which C (0-based) and Lua (1-based)
   * would read differently. */
  for (int d = 0; d < x->ndim; d++)
    if ((mask & (1u << d)) && x->sizes[d] == 0) {
      char buf[EM_SHAPE_BUF];
      return em_error("%s: cannot reduce over an empty dimension (input shape %s)", fn,
                      em_shape_str(buf, sizeof buf, x->ndim, x->sizes));
    }
  return 0;
}

static em_tensor *keepdim_output(const em_tensor *x, uint32_t mask, em_dtype dtype) {
  int64_t sizes[EM_MAX_DIMS];
  for (int d = 0; d < x->ndim; d++) sizes[d] = (mask & (1u << d)) ? 1 : x->sizes[d];
  return em_empty(x->ndim, sizes, dtype, x->device_id);
}

/* Drops the reduced dims of a keepdim result as a view (they all have size 1). Takes over
 * the reference to k. */
static em_tensor *drop_dims(em_tensor *k, uint32_t mask, int keepdim) {
  if (k == NULL || keepdim || mask == 0) return k;
  int64_t sizes[EM_MAX_DIMS], strides[EM_MAX_DIMS];
  int n = 0;
  for (int d = 0; d < k->ndim; d++) {
    if (mask & (1u << d)) continue;
    sizes[n] = k->sizes[d];
    strides[n++] = k->strides[d];
  }
  em_tensor *v = em_ag_view(k, em_tensor_view_of(k, n, sizes, strides, k->offset),
                            EM_VIEW_RESHAPE, 0, NULL);
  em_release(k);
  return v;
}

/* ---- reductions over a list of dims -------------------------------------------------------- */

/* The shared front and back of em_reduce, em_var/std and em_norm. */
typedef struct red_call {
  const char *fn;
  uint32_t mask;
  const em_tensor *x; /* what the kernel reads: the input, or its cast */
  em_tensor *cast;
  em_tensor *out;     /* keepdim shape */
  const em_backend *be;
} red_call;

static int red_begin(red_call *c, const char *fn, const em_tensor *x, int ndims,
                     const int *dims, em_dtype compute, em_dtype out_dtype, bool needs_elements) {
  memset(c, 0, sizeof *c);
  c->fn = fn;
  c->be = em_device_backend(x->device_id);
  if (em_check_not_block(fn, x) != 0) return -1;
  if (dims_mask(fn, x, ndims, dims, &c->mask) != 0) return -1;
  if (needs_elements && check_nonempty(fn, x, c->mask) != 0) return -1;
  c->x = x;
  if (compute != (em_dtype)x->dtype_id) {
    c->cast = em_to_dtype(x, compute);
    if (c->cast == NULL) return -1;
    c->x = c->cast;
  }
  c->out = keepdim_output(x, c->mask, out_dtype);
  return c->out ? 0 : -1;
}

static em_tensor *red_end(red_call *c, int rc, int keepdim) {
  em_release(c->cast);
  if (rc != 0) {
    em_error_prefix(c->fn);
    em_release(c->out);
    return NULL;
  }
  return drop_dims(c->out, c->mask, keepdim);
}

/* Chooses the dtype x is cast to (compute) and the output dtype. */
static int reduce_types(const char *fn, em_reduce_op op, const em_tensor *x, em_dtype *compute,
                        em_dtype *out) {
  em_dtype in = (em_dtype)x->dtype_id;
  *compute = *out = in;
  if (em_check_not_block(fn, x) != 0) return -1;
  switch (op) {
  case EM_SUM: case EM_PROD:
    if (!is_float(in)) *out = EM_INT64;
    return 0;
  case EM_MEAN: return need_float(fn, x);
  case EM_ALL: case EM_ANY: *out = EM_BOOL; return 0;
  case EM_LOGSUMEXP:
    if (!is_float(in)) *compute = *out = EM_FLOAT32;
    return 0;
  default: return 0;
  }
}

static int run_reduce(red_call *c, em_reduce_op op) {
  EM_NEED_KERNEL(c->fn, c->be, reduce);
  if (em_numel(c->out) == 0) return 0;
  return c->be->reduce(op, c->out, c->x, c->mask);
}

em_tensor *em_reduce(em_reduce_op op, const em_tensor *x, int ndims, const int *dims,
                     int keepdim) {
  if ((unsigned)op >= EM_NUM_REDUCE) return em_error_null("reduce: invalid op %d", (int)op);
  const char *fn = reduce_names[op];
  if (x == NULL) return em_error_null("%s: expected a tensor, got NULL", fn);
  EM_AUTOCAST(fn, em_reduce(op, ac_[0], ndims, dims, keepdim), x);
  em_dtype compute, out_dtype;
  if (reduce_types(fn, op, x, &compute, &out_dtype) != 0) return NULL;
  red_call c;
  bool no_identity = op == EM_AMAX || op == EM_AMIN;
  if (red_begin(&c, fn, x, ndims, dims, compute, out_dtype, no_identity) != 0)
    return red_end(&c, -1, keepdim);
  int rc = run_reduce(&c, op);
  if (rc == 0 && em_ag_should_record(1, &x)) rc = em_ag_record_reduce(op, c.out, x, c.mask);
  return red_end(&c, rc, keepdim);
}

static int run_moments(red_call *c, double correction, int take_sqrt) {
  EM_NEED_KERNEL(c->fn, c->be, moments);
  if (em_numel(c->out) == 0) return 0;
  return c->be->moments(c->out, c->x, c->mask, correction, take_sqrt);
}

static em_tensor *moments(const char *fn, const em_tensor *x, int ndims, const int *dims,
                          double correction, int keepdim, int take_sqrt) {
  if (x == NULL) return em_error_null("%s: expected a tensor, got NULL", fn);
  if (need_float(fn, x) != 0) return NULL;
  if (!isfinite(correction)) /* %g would print NaN as "-nan" on some inputs */
    return em_error_null("%s: expected a finite correction, got %s", fn,
                         isnan(correction) ? "nan" : correction > 0 ? "inf" : "-inf");
  em_dtype dt = (em_dtype)x->dtype_id;
  red_call c;
  if (red_begin(&c, fn, x, ndims, dims, dt, dt, false) != 0) return red_end(&c, -1, keepdim);
  int rc = run_moments(&c, correction, take_sqrt);
  if (rc == 0 && em_ag_should_record(1, &x))
    rc = em_ag_record_moments(c.out, x, c.mask, correction, take_sqrt);
  return red_end(&c, rc, keepdim);
}

em_tensor *em_var(const em_tensor *x, int ndims, const int *dims, double correction,
                  int keepdim) {
  return moments("var", x, ndims, dims, correction, keepdim, 0);
}

em_tensor *em_std(const em_tensor *x, int ndims, const int *dims, double correction,
                  int keepdim) {
  return moments("std", x, ndims, dims, correction, keepdim, 1);
}

static int run_norm(red_call *c, double p) {
  EM_NEED_KERNEL(c->fn, c->be, norm);
  if (em_numel(c->out) == 0) return 0;
  return c->be->norm(c->out, c->x, c->mask, p);
}

em_tensor *em_norm(const em_tensor *x, double p, int ndims, const int *dims, int keepdim) {
  const char *fn = "norm";
  if (x == NULL) return em_error_null("%s: expected a tensor, got NULL", fn);
  EM_AUTOCAST(fn, em_norm(ac_[0], p, ndims, dims, keepdim), x);
  if (need_float(fn, x) != 0) return NULL;
  if (isnan(p)) return em_error_null("%s: expected p to be a number, got nan", fn);
  em_dtype dt = (em_dtype)x->dtype_id;
  red_call c;
  /* The inf norm is a max and negative orders a min-like mean: neither has an identity. */
  bool no_identity = p < 0 || p == INFINITY;
  if (red_begin(&c, fn, x, ndims, dims, dt, dt, no_identity) != 0)
    return red_end(&c, -1, keepdim);
  int rc = run_norm(&c, p);
  if (rc == 0 && em_ag_should_record(1, &x)) rc = em_ag_record_norm(c.out, x, c.mask, p);
  return red_end(&c, rc, keepdim);
}

/* ---- max / min along a dim, argmax / argmin ------------------------------------------------ */

static int run_arg(const char *fn, int is_max, em_tensor *values, em_tensor *indices,
                   const em_tensor *x, int dim) {
  const em_backend *be = em_device_backend(x->device_id);
  EM_NEED_KERNEL(fn, be, arg_reduce);
  if (em_numel(indices) == 0) return 0;
  return be->arg_reduce(is_max, values, indices, x, dim);
}

/* Values (x's dtype) and int64 indices along dim, in keepdim shape. */
static int arg_along(const char *fn, int is_max, const em_tensor *x, int dim, em_tensor **values,
                     em_tensor **indices, uint32_t *mask) {
  int d;
  *values = *indices = NULL;
  if (em_check_not_block(fn, x) != 0) return -1;
  if (em_wrap_dim(fn, dim, x->ndim, &d) != 0) return -1;
  *mask = x->ndim > 0 ? 1u << d : 0;
  if (check_nonempty(fn, x, *mask) != 0) return -1;
  *values = keepdim_output(x, *mask, (em_dtype)x->dtype_id);
  *indices = keepdim_output(x, *mask, EM_INT64);
  int rc = *values && *indices ? run_arg(fn, is_max, *values, *indices, x, d) : -1;
  if (rc != 0) {
    em_error_prefix(fn);
    em_release(*values);
    em_release(*indices);
    *values = *indices = NULL;
  }
  return rc;
}

static int max_min_dim(const char *fn, int is_max, const em_tensor *x, int dim, int keepdim,
                       em_tensor **values, em_tensor **indices) {
  if (values == NULL || indices == NULL)
    return em_error("%s: expected output pointers for values and indices, got NULL", fn);
  *values = *indices = NULL;
  if (x == NULL) return em_error("%s: expected a tensor, got NULL", fn);
  em_tensor *v, *i;
  uint32_t mask;
  if (arg_along(fn, is_max, x, dim, &v, &i, &mask) != 0) return -1;
  int d = x->ndim > 0 ? __builtin_ctz(mask | (1u << 31)) : 0; /* the wrapped dim */
  if (em_ag_should_record(1, &x) && em_ag_record_max_dim(v, i, x, d, is_max) != 0) {
    em_release(v);
    em_release(i);
    return -1;
  }
  *values = drop_dims(v, mask, keepdim);
  *indices = drop_dims(i, mask, keepdim);
  if (*values && *indices) return 0;
  em_release(*values);
  em_release(*indices);
  *values = *indices = NULL;
  return -1;
}

int em_max_dim(const em_tensor *x, int dim, int keepdim, em_tensor **values,
               em_tensor **indices) {
  return max_min_dim("max", 1, x, dim, keepdim, values, indices);
}

int em_min_dim(const em_tensor *x, int dim, int keepdim, em_tensor **values,
               em_tensor **indices) {
  return max_min_dim("min", 0, x, dim, keepdim, values, indices);
}

/* The index into the flattened tensor: x is viewed (or copied, when no view can) as 1-D. */
static em_tensor *arg_flat(const char *fn, int is_max, const em_tensor *x, int keepdim) {
  int64_t n = em_numel(x);
  if (n == 0)
    return em_error_null("%s: cannot reduce over an empty tensor (it has 0 elements)", fn);
  em_tensor *flat = em_reshape(x, 1, &n);
  if (flat == NULL) {
    em_error_prefix(fn);
    return NULL;
  }
  em_tensor *v, *i;
  uint32_t mask;
  int rc = arg_along(fn, is_max, flat, 0, &v, &i, &mask);
  em_release(flat);
  em_release(v);
  if (rc != 0) return NULL;
  int64_t ones[EM_MAX_DIMS];
  for (int d = 0; d < EM_MAX_DIMS; d++) ones[d] = 1;
  em_tensor *r = em_tensor_view_of(i, keepdim ? x->ndim : 0, ones, ones, i->offset);
  em_release(i);
  return r;
}

static em_tensor *arg_reduce(const char *fn, int is_max, const em_tensor *x, int dim,
                             int keepdim) {
  if (x == NULL) return em_error_null("%s: expected a tensor, got NULL", fn);
  if (dim == EM_ALL_DIMS) return arg_flat(fn, is_max, x, keepdim);
  em_tensor *v, *i;
  uint32_t mask;
  if (arg_along(fn, is_max, x, dim, &v, &i, &mask) != 0) return NULL;
  em_release(v);
  return drop_dims(i, mask, keepdim);
}

em_tensor *em_argmax(const em_tensor *x, int dim, int keepdim) {
  return arg_reduce("argmax", 1, x, dim, keepdim);
}

em_tensor *em_argmin(const em_tensor *x, int dim, int keepdim) {
  return arg_reduce("argmin", 0, x, dim, keepdim);
}

/* ---- ops along one dim with x's shape: scans and softmax ----------------------------------- */

typedef enum line_op { LINE_CUMSUM, LINE_CUMPROD, LINE_SOFTMAX, LINE_LOG_SOFTMAX } line_op;

static int run_line(const char *fn, line_op op, em_tensor *out, const em_tensor *x, int d) {
  const em_backend *be = em_device_backend(x->device_id);
  if (op == LINE_CUMSUM || op == LINE_CUMPROD) {
    EM_NEED_KERNEL(fn, be, scan);
    return em_numel(out) ? be->scan(op == LINE_CUMPROD, out, x, d) : 0;
  }
  EM_NEED_KERNEL(fn, be, softmax);
  return em_numel(out) ? be->softmax(op == LINE_LOG_SOFTMAX, out, x, d) : 0;
}

static em_tensor *along_dim(const char *fn, line_op op, const em_tensor *x, int dim) {
  if (x == NULL) return em_error_null("%s: expected a tensor, got NULL", fn);
  if (em_check_not_block(fn, x) != 0) return NULL;
  EM_AUTOCAST(fn, along_dim(fn, op, ac_[0], dim), x);
  int d;
  if (em_wrap_dim(fn, dim, x->ndim, &d) != 0) return NULL;
  em_dtype in = (em_dtype)x->dtype_id, out_dtype = in;
  em_tensor *cast = NULL;
  if (!is_float(in)) {
    if (op == LINE_CUMSUM || op == LINE_CUMPROD) {
      out_dtype = EM_INT64; /* the kernel reads any integer dtype */
    } else {
      out_dtype = EM_FLOAT32;
      if ((cast = em_to_dtype(x, EM_FLOAT32)) == NULL) return NULL;
      x = cast;
    }
  }
  em_tensor *out = em_empty(x->ndim, x->sizes, out_dtype, x->device_id);
  if (out != NULL && run_line(fn, op, out, x, d) != 0) {
    em_error_prefix(fn);
    em_release(out);
    out = NULL;
  }
  EM_AG_RECORD(out, 1, &x, em_ag_record_line((int)op, out, x, d));
  em_release(cast);
  return out;
}

em_tensor *em_cumsum(const em_tensor *x, int dim) {
  return along_dim("cumsum", LINE_CUMSUM, x, dim);
}

em_tensor *em_cumprod(const em_tensor *x, int dim) {
  return along_dim("cumprod", LINE_CUMPROD, x, dim);
}

em_tensor *em_softmax(const em_tensor *x, int dim) {
  return along_dim("softmax", LINE_SOFTMAX, x, dim);
}

em_tensor *em_log_softmax(const em_tensor *x, int dim) {
  return along_dim("log_softmax", LINE_LOG_SOFTMAX, x, dim);
}
