/*
 * formulas_reduce.c: recording and backward formulas of reductions, scans and softmax.
 *
 * Reductions record on their keepdim-shaped result, so a backward sees the gradient with the
 * reduced dims present (size 1) and expands it back over the input.
 */
#include <math.h>

#include "expr.h"
#include "record.h"

/* g (keepdim shape) expanded to the input's shape. */
static T expand_to_input(const em_node *node, T g) {
  const em_input_edge *e = &node->inputs[0];
  if (g == NULL) return NULL;
  T r = em_expand(g, e->ndim, e->sizes);
  em_release(g);
  return r;
}

static int64_t reduced_count(const em_node *node) {
  const em_input_edge *e = &node->inputs[0];
  uint32_t mask = (uint32_t)node->ints[0];
  int64_t n = 1;
  for (int d = 0; d < e->ndim; d++)
    if (mask & (1u << d)) n *= e->sizes[d];
  return n;
}

static int mask_dims(uint32_t mask, int ndim, int *dims) {
  int n = 0;
  for (int d = 0; d < ndim; d++)
    if (mask & (1u << d)) dims[n++] = d;
  return n;
}

/* The product of every other element along the reduced dims, exact with zeros: the reduced dims
 * are moved last and flattened, then exclusive cumulative products from both ends multiply. */
static T prod_of_others(const em_tensor *x, uint32_t mask) {
  int order[EM_MAX_DIMS], inverse[EM_MAX_DIMS], k = 0, nkeep = 0;
  for (int d = 0; d < x->ndim; d++)
    if (!(mask & (1u << d))) order[k++] = d;
  nkeep = k;
  for (int d = 0; d < x->ndim; d++)
    if (mask & (1u << d)) order[k++] = d;
  for (int i = 0; i < x->ndim; i++) inverse[order[i]] = i;
  int64_t sizes[EM_MAX_DIMS], r = 1;
  for (int i = 0; i < nkeep; i++) sizes[i] = x->sizes[order[i]];
  for (int i = nkeep; i < x->ndim; i++) r *= x->sizes[order[i]];
  sizes[nkeep] = r;
  T p = em_permute(x, x->ndim, order);
  T flat = p ? em_reshape(p, nkeep + 1, sizes) : NULL;
  em_release(p);
  if (flat == NULL) return NULL;
  int last = nkeep;
  /* left[i] = prod(x[0..i-1]), right[i] = prod(x[i+1..]) */
  T ones_shape = em_narrow(flat, last, 0, r > 0 ? 1 : 0);
  T one = ones_shape ? em_ones(ones_shape->ndim, ones_shape->sizes, (em_dtype)x->dtype_id, x->device_id) : NULL;
  em_release(ones_shape);
  T head = r > 1 ? em_narrow(flat, last, 0, r - 1) : NULL;
  T tail = r > 1 ? em_narrow(flat, last, 1, r - 1) : NULL;
  T left, right;
  if (r > 1) {
    T cl = em_cumprod(head, last);
    em_tensor *lparts[2] = {one, cl};
    left = cl ? em_cat(2, lparts, last) : NULL;
    em_release(cl);
    int fd[1] = {last};
    T ft = em_flip(tail, 1, fd);
    T cr = ft ? em_cumprod(ft, last) : NULL;
    T crf = cr ? em_flip(cr, 1, fd) : NULL;
    em_tensor *rparts[2] = {crf, one};
    right = crf ? em_cat(2, rparts, last) : NULL;
    em_release(ft);
    em_release(cr);
    em_release(crf);
  } else {
    left = ref(one);
    right = ref(one);
  }
  em_release(head);
  em_release(tail);
  em_release(one);
  em_release(flat);
  T others = mul(left, right);
  if (others == NULL) return NULL;
  int64_t psizes[EM_MAX_DIMS];
  for (int i = 0; i < x->ndim; i++) psizes[i] = x->sizes[order[i]];
  T shaped = em_reshape(others, x->ndim, psizes);
  em_release(others);
  T back = shaped ? em_permute(shaped, x->ndim, inverse) : NULL;
  em_release(shaped);
  return back;
}

static int reduce_backward(em_node *node, const em_tensor *g, em_tensor **gi) {
  em_reduce_op op = (em_reduce_op)node->ints[1];
  uint32_t mask = (uint32_t)node->ints[0];
  switch (op) {
  case EM_SUM: return put(node, gi, 0, expand_to_input(node, ref(g)));
  case EM_MEAN:
    return put(node, gi, 0, expand_to_input(node, muls(ref(g), 1.0 / (double)reduced_count(node))));
  case EM_PROD: {
    const em_tensor *x = em_ag_saved(node, 0);
    if (x == NULL) return -1;
    if (is_half_dtype(g->dtype_id)) { /* float32 products (16-bit ones overflow), rounded once */
      T x32 = f32(x), g32 = f32(g);
      T r = x32 && g32 ? mul(expand_to_input(node, ref(g32)), prod_of_others(x32, mask)) : NULL;
      em_release(x32);
      em_release(g32);
      return put(node, gi, 0, r);
    }
    return put(node, gi, 0, mul(expand_to_input(node, ref(g)), prod_of_others(x, mask)));
  }
  case EM_AMAX: case EM_AMIN: {
    /* ties share the gradient equally, as in PyTorch */
    const em_tensor *x = em_ag_saved(node, 0), *y = em_ag_saved(node, 1);
    if (x == NULL || y == NULL) return -1;
    int dims[EM_MAX_DIMS], n = mask_dims(mask, x->ndim, dims);
    T hit = bin(EM_EQ, ref(x), ref(y));
    T hitf = hit ? em_to_dtype(hit, (em_dtype)g->dtype_id) : NULL;
    em_release(hit);
    T count = hitf ? em_reduce(EM_SUM, hitf, n, dims, 1) : NULL;
    T r = mul(hitf, divt(ref(g), count));
    return put(node, gi, 0, r);
  }
  case EM_LOGSUMEXP: {
    const em_tensor *x = em_ag_saved(node, 0), *y = em_ag_saved(node, 1);
    if (x == NULL || y == NULL) return -1;
    return put(node, gi, 0, mul(ref(g), un(EM_EXP, sub(ref(x), ref(y)))));
  }
  default: return em_error("%s: not differentiable", node->name);
  }
}

static const char *reduce_node_names[] = {
  "SumBackward", "MeanBackward", "ProdBackward", "AmaxBackward", "AminBackward", "AllBackward",
  "AnyBackward", "LogsumexpBackward",
};

int em_ag_record_reduce(em_reduce_op op, em_tensor *out, const em_tensor *x, uint32_t mask) {
  if (op == EM_ALL || op == EM_ANY || !em_dtypes[out->dtype_id].is_float) return 0;
  em_node *node = em_ag_node_new(reduce_node_names[op], reduce_backward, 1, &x);
  if (node == NULL) return -1;
  node->ints[0] = mask;
  node->ints[1] = op;
  int rc = 0;
  if (op == EM_PROD) rc = em_ag_save(node, x);
  if (op == EM_AMAX || op == EM_AMIN || op == EM_LOGSUMEXP) rc = em_ag_save(node, x) || em_ag_save(node, out);
  if (rc != 0) {
    em_node_release(node);
    return -1;
  }
  return em_ag_set_output(out, node);
}

/* ---- var / std / norm ---- */

static int moments_backward(em_node *node, const em_tensor *g, em_tensor **gi) {
  const em_tensor *x = em_ag_saved(node, 0), *y = em_ag_saved(node, 1);
  if (x == NULL || y == NULL) return -1;
  uint32_t mask = (uint32_t)node->ints[0];
  int take_sqrt = (int)node->ints[1];
  double dof = (double)reduced_count(node) - node->scalars[0];
  int dims[EM_MAX_DIMS], n = mask_dims(mask, x->ndim, dims);
  T mean = em_reduce(EM_MEAN, x, n, dims, 1);
  T centered = sub(ref(x), mean);
  /* var: 2 (x - mean) / dof;  std: (x - mean) / (dof * std), taken as 0 where std is 0 (as
   * PyTorch: every x equals the mean there, and 0 / 0 would make NaN) */
  T scale;
  if (take_sqrt) {
    T safe = where3(bsc(EM_EQ, ref(y), 0), scalar(1, y), muls(ref(y), dof));
    scale = where3(bsc(EM_EQ, ref(y), 0), scalar(0, g), divt(ref(g), safe));
  } else {
    scale = muls(ref(g), 2.0 / dof);
  }
  return put(node, gi, 0, mul(centered, scale));
}

int em_ag_record_moments(em_tensor *out, const em_tensor *x, uint32_t mask, double correction,
                         int take_sqrt) {
  em_node *node = em_ag_node_new(take_sqrt ? "StdBackward" : "VarBackward", moments_backward, 1, &x);
  if (node == NULL) return -1;
  node->ints[0] = mask;
  node->ints[1] = take_sqrt;
  node->scalars[0] = correction;
  if (em_ag_save(node, x) || em_ag_save(node, out)) {
    em_node_release(node);
    return -1;
  }
  return em_ag_set_output(out, node);
}

static int norm_backward(em_node *node, const em_tensor *g, em_tensor **gi) {
  const em_tensor *x = em_ag_saved(node, 0), *y = em_ag_saved(node, 1);
  if (x == NULL || y == NULL) return -1;
  double p = node->scalars[0];
  T r;
  if (p == 0) {
    r = zeros_like(x);
  } else if (p == 1) {
    r = mul(ref(g), un(EM_SIGN, ref(x)));
  } else if (isinf(p)) { /* like amax of |x|: ties share */
    uint32_t mask = (uint32_t)node->ints[0];
    int dims[EM_MAX_DIMS], n = mask_dims(mask, x->ndim, dims);
    T hit = bin(EM_EQ, un(EM_ABS, ref(x)), ref(y));
    T hitf = hit ? em_to_dtype(hit, (em_dtype)x->dtype_id) : NULL;
    em_release(hit);
    T count = hitf ? em_reduce(EM_SUM, hitf, n, dims, 1) : NULL;
    r = mul(mul(hitf, un(EM_SIGN, ref(x))), divt(ref(g), count));
  } else {
    /* g * x |x|^(p-2) / norm^(p-1), taken as 0 where the norm is 0 */
    T num = mul(ref(x), bsc(EM_POW, un(EM_ABS, ref(x)), p - 2));
    T den = bsc(EM_POW, ref(y), p - 1);
    T safe = where3(bsc(EM_EQ, ref(y), 0), scalar(1, y), den);
    r = where3(bsc(EM_EQ, ref(y), 0), scalar(0, g), mul(ref(g), divt(num, safe)));
    if (p < 2 && r) { /* |x|^(p-2) is infinite at x == 0, where the gradient is 0 */
      r = where3(bsc(EM_EQ, ref(x), 0), scalar(0, r), r);
    }
  }
  return put(node, gi, 0, expand_to_input(node, r));
}

int em_ag_record_norm(em_tensor *out, const em_tensor *x, uint32_t mask, double p) {
  em_node *node = em_ag_node_new("NormBackward", norm_backward, 1, &x);
  if (node == NULL) return -1;
  node->ints[0] = mask;
  node->scalars[0] = p;
  if (em_ag_save(node, x) || em_ag_save(node, out)) {
    em_node_release(node);
    return -1;
  }
  return em_ag_set_output(out, node);
}

/* ---- max / min along a dim ---- */

static int max_dim_backward(em_node *node, const em_tensor *g, em_tensor **gi) {
  const em_tensor *idx = em_ag_saved(node, 0);
  if (idx == NULL) return -1;
  const em_input_edge *e = &node->inputs[0];
  T z = em_zeros(e->ndim, e->sizes, (em_dtype)g->dtype_id, g->device_id);
  T r = z ? em_scatter(z, (int)node->ints[0], idx, g) : NULL;
  em_release(z);
  return put(node, gi, 0, r);
}

int em_ag_record_max_dim(em_tensor *values, const em_tensor *indices, const em_tensor *x,
                         int dim, int is_max) {
  if (!em_dtypes[values->dtype_id].is_float) return 0;
  em_node *node = em_ag_node_new(is_max ? "MaxBackward" : "MinBackward", max_dim_backward, 1, &x);
  if (node == NULL) return -1;
  node->ints[0] = dim;
  /* A private copy: callers adjust returned indices in place (Lua makes them 1-based). */
  em_tensor *copy = em_clone(indices);
  int rc = copy ? em_ag_save(node, copy) : -1;
  em_release(copy);
  if (rc != 0) {
    em_node_release(node);
    return -1;
  }
  return em_ag_set_output(values, node);
}

/* ---- along one dim ---- */

/* The sum of t[j] over j >= i along dim (consumes t). */
static T reverse_cumsum(T t, int dim) {
  int fd[1] = {dim};
  T f = t ? em_flip(t, 1, fd) : NULL;
  T c = f ? em_cumsum(f, dim) : NULL;
  T r = c ? em_flip(c, 1, fd) : NULL;
  em_release(t);
  em_release(f);
  em_release(c);
  return r;
}

/* cumprod's gradient where x has zeros, exact (PyTorch's formula, no division by zero).
 * grad_i = sum_{j >= i} g_j prod_{k <= j, k != i} x_k. Along each line, with z its first zero:
 *   i < z:  sum_{j >= i} g_j y_j / x_i   (x_i is not 0; y_j is 0 from z on)
 *   i == z: sum_{j >= z} g_j y'_j, with y' the cumprod of x whose zero at z is set to 1
 *   i > z:  0 (every product holds x_z). */
static T cumprod_grad_zeros(const em_tensor *g, const em_tensor *x, const em_tensor *y, int dim) {
  T zero = bsc(EM_EQ, ref(x), 0);
  T count = zero ? em_cumsum(zero, dim) : NULL; /* zeros seen so far, x_i included */
  T before = bsc(EM_EQ, ref(count), 0);
  T first = bin(EM_LOGICAL_AND, zero, bsc(EM_EQ, count, 1));
  T safe_x = where3(ref(before), ref(x), scalar(1, x));
  T part_a = where3(ref(before), divt(reverse_cumsum(mul(ref(g), ref(y)), dim), safe_x),
                    scalar(0, g));
  T x1 = where3(ref(first), scalar(1, x), ref(x));
  T y1 = x1 ? em_cumprod(x1, dim) : NULL;
  em_release(x1);
  T part_b = where3(ref(first), reverse_cumsum(mul(ref(g), y1), dim), scalar(0, g));
  em_release(before);
  em_release(first);
  return add(part_a, part_b);
}

static int line_grad(em_node *node, int dim, int kind, const em_tensor *g, const em_tensor *x,
                     const em_tensor *y, em_tensor **gi);

/* The output of a line op (kind: 1 cumprod, 2 softmax, 3 log_softmax) recomputed from x. */
static T line_forward(int kind, const em_tensor *x, int dim) {
  if (kind == 1) return em_cumprod(x, dim);
  return kind == 2 ? em_softmax(x, dim) : em_log_softmax(x, dim);
}

static int line_backward(em_node *node, const em_tensor *g, em_tensor **gi) {
  int dim = (int)node->ints[0], kind = (int)node->ints[1];
  const em_tensor *x = NULL, *y = NULL;
  if (kind != 0 && ((x = em_ag_saved(node, 0)) == NULL || (y = em_ag_saved(node, 1)) == NULL))
    return -1;
  if (!is_half_dtype(g->dtype_id)) return line_grad(node, dim, kind, g, x, y, gi);
  /* float16 / bfloat16: in float32 from x (the 16-bit y's rounding would be magnified),
   * rounded once by put() */
  T g32 = f32(g), x32 = f32(x), y32 = x32 ? line_forward(kind, x32, dim) : NULL;
  int rc = g32 && (kind == 0 || y32) ? line_grad(node, dim, kind, g32, x32, y32, gi) : -1;
  em_tensor *tmp[3] = {g32, x32, y32};
  em_ag_release_all(3, tmp);
  return rc;
}

static int line_grad(em_node *node, int dim, int kind, const em_tensor *g, const em_tensor *x,
                     const em_tensor *y, em_tensor **gi) {
  int fd[1] = {dim};
  if (kind == 0) { /* cumsum: the reversed cumulative sum of g */
    T f = em_flip(g, 1, fd);
    T c = f ? em_cumsum(f, dim) : NULL;
    T r = c ? em_flip(c, 1, fd) : NULL;
    em_release(f);
    em_release(c);
    return put(node, gi, 0, r);
  }
  if (kind == 1) { /* cumprod: sum_{j >= i} g_j y_j / x_i */
    T zeros = bsc(EM_EQ, ref(x), 0);
    T any = zeros ? em_reduce(EM_ANY, zeros, 0, NULL, 0) : NULL;
    em_release(zeros);
    double has_zero = 0;
    if (any == NULL || em_item(any, &has_zero) != 0) {
      em_release(any);
      return -1;
    }
    em_release(any);
    if (has_zero) return put(node, gi, 0, cumprod_grad_zeros(g, x, y, dim));
    T gy = mul(ref(g), ref(y));
    T f = gy ? em_flip(gy, 1, fd) : NULL;
    T c = f ? em_cumsum(f, dim) : NULL;
    T r = c ? em_flip(c, 1, fd) : NULL;
    em_release(gy);
    em_release(f);
    em_release(c);
    return put(node, gi, 0, divt(r, ref(x)));
  }
  int dims[1] = {dim};
  if (kind == 2) { /* softmax: y (g - sum(g y)) */
    T s = mul(ref(g), ref(y));
    T sum = s ? em_reduce(EM_SUM, s, 1, dims, 1) : NULL;
    em_release(s);
    return put(node, gi, 0, mul(ref(y), sub(ref(g), sum)));
  }
  /* log_softmax: g - exp(y) sum(g) */
  T sum = em_reduce(EM_SUM, g, 1, dims, 1);
  return put(node, gi, 0, sub(ref(g), mul(un(EM_EXP, ref(y)), sum)));
}

int em_ag_record_line(int kind, em_tensor *out, const em_tensor *x, int dim) {
  static const char *names[] = {"CumsumBackward", "CumprodBackward", "SoftmaxBackward",
                                "LogSoftmaxBackward"};
  if (!em_dtypes[out->dtype_id].is_float) return 0;
  em_node *node = em_ag_node_new(names[kind], line_backward, 1, &x);
  if (node == NULL) return -1;
  node->ints[0] = dim;
  node->ints[1] = kind;
  if (kind != 0 && (em_ag_save(node, x) || em_ag_save(node, out))) {
    em_node_release(node);
    return -1;
  }
  return em_ag_set_output(out, node);
}
