/*
 * pointwise.c: definitions of the unary and binary elementwise ops: dtype rules, broadcasting,
 * in-place checks. The arithmetic is the device's (backend.h); the ternary ops are in
 * ternary.c.
 */
#include <math.h>

#include "../autocast.h"
#include "../autograd/record.h"
#include "elementwise.h"

static const char *unary_names[EM_NUM_UNARY] = {
  "neg", "abs", "sign", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "tan",
  "tanh", "sigmoid", "relu", "gelu", "gelu_tanh", "silu", "softplus", "floor", "ceil", "round",
  "trunc", "reciprocal", "square", "erf", "isnan", "isinf", "isfinite", "logical_not",
  "bitwise_not", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "log2",
  "log10", "exp2", "erfc", "erfinv", "lgamma", "digamma",
};

static const char *binary_names[EM_NUM_BINARY] = {
  "add", "sub", "mul", "div", "floor_divide", "pow", "fmod", "remainder", "maximum", "minimum",
  "atan2", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor",
  "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift",
};

const char *em_unary_name(em_unary_op op) {
  return (unsigned)op < EM_NUM_UNARY ? unary_names[op] : "?";
}
const char *em_binary_name(em_binary_op op) {
  return (unsigned)op < EM_NUM_BINARY ? binary_names[op] : "?";
}

static bool is_int(em_dtype d) { return !em_dtypes[d].is_float; }

/* ---- unary --------------------------------------------------------------------------------- */

/* Decides compute and output dtypes of a unary op; -1 when the input dtype is unsupported.
 * PyTorch's rules: predicates give bool; sign, abs, neg, square, relu and the roundings keep
 * integer dtypes; everything transcendental computes integers in float32. */
static int unary_types(const char *fn, em_unary_op op, em_dtype in, em_dtype *compute,
                       em_dtype *out) {
  *compute = in;
  *out = in;
  switch (op) {
  case EM_ISNAN: case EM_ISINF: case EM_ISFINITE: case EM_LOGICAL_NOT:
    *out = EM_BOOL;
    return 0;
  case EM_BITWISE_NOT:
    if (!is_int(in)) return em_error("%s: expected an integer or bool tensor, got %s", fn,
                                     em_dtype_name(in));
    return 0;
  case EM_NEG:
    if (in == EM_BOOL)
      return em_error("%s: not supported for bool tensors (use logical_not)", fn);
    return 0;
  case EM_ABS: case EM_SQUARE: case EM_RELU:
  case EM_FLOOR: case EM_CEIL: case EM_ROUND: case EM_TRUNC:
    /* (the roundings are the identity on integers) */
    if (in == EM_BOOL) return em_error("%s: not supported for bool tensors", fn);
    return 0;
  case EM_SIGN:
    return 0; /* the identity on bool */
  case EM_GELU: case EM_GELU_TANH: case EM_SILU: case EM_SOFTPLUS:
    /* Activations have no integer form in PyTorch (unlike exp or sigmoid). */
    if (is_int(in))
      return em_error("%s: expected a floating-point tensor, got %s", fn, em_dtype_name(in));
    return 0;
  default:
    if (is_int(in)) *compute = *out = EM_FLOAT32;
    return 0;
  }
}

static int unary_kernel(const char *fn, const em_backend *be, em_tensor *out,
                        const em_tensor *const *in, const void *arg) {
  EM_NEED_KERNEL(fn, be, unary);
  return be->unary(*(const em_unary_op *)arg, out, in[0]);
}

em_tensor *em_unary(em_unary_op op, const em_tensor *x) {
  if ((unsigned)op >= EM_NUM_UNARY) return em_error_null("unary: invalid op %d", (int)op);
  const char *fn = unary_names[op];
  if (x == NULL) return em_error_null("%s: expected a tensor, got NULL", fn);
  EM_AUTOCAST(fn, em_unary(op, ac_[0]), x);
  em_dtype compute, out_dtype;
  if (unary_types(fn, op, (em_dtype)x->dtype_id, &compute, &out_dtype) != 0) return NULL;
  em_ew ew;
  if (em_ew_begin(&ew, fn, 1, &x) != 0) return NULL;
  ew.compute = compute;
  em_tensor *out = em_ew_run(&ew, out_dtype, unary_kernel, &op);
  EM_AG_RECORD(out, 1, &x, em_ag_record_unary(op, out, x));
  return out;
}

/* In place: computes into a temporary when the result dtype differs from x's (sqrt_ on an int
 * tensor is an error, isnan_ on a float tensor stores 0/1). */
int em_unary_(em_unary_op op, em_tensor *x) {
  if ((unsigned)op >= EM_NUM_UNARY) return em_error("unary_: invalid op %d", (int)op);
  const char *fn = unary_names[op];
  if (x == NULL) return em_error("%s_: expected a tensor, got NULL", fn);
  em_dtype compute, out_dtype;
  if (unary_types(fn, op, (em_dtype)x->dtype_id, &compute, &out_dtype) != 0) return -1;
  const em_tensor *ins[1] = {x};
  EM_AG_INPLACE(fn, x, 1, ins, em_unary(op, self_clone));
  em_ew ew;
  if (em_ew_begin(&ew, fn, 1, (const em_tensor *const *)&x) != 0) return -1;
  ew.compute = compute;
  return em_ew_run_inplace(&ew, x, out_dtype, unary_kernel, &op);
}

/* ---- binary -------------------------------------------------------------------------------- */

static bool is_comparison(em_binary_op op) { return op >= EM_EQ && op <= EM_GE; }
static bool is_logical(em_binary_op op) { return op >= EM_LOGICAL_AND && op <= EM_LOGICAL_XOR; }
static bool is_bitwise(em_binary_op op) { return op >= EM_BITWISE_AND && op <= EM_RSHIFT; }

/* PyTorch's rules over the promoted dtype `result`: comparisons and logical ops give bool;
 * bitwise ops need integers; true division and atan2 turn integers into float32; bool supports
 * only the ops that have a logical meaning (add = or, mul = and, maximum, minimum). */
static int binary_types(const char *fn, em_binary_op op, const em_tensor *a, const em_tensor *b,
                        em_dtype *compute, em_dtype *out) {
  const em_tensor *ts[2] = {a, b};
  if (em_check_not_block(fn, a) != 0 || em_check_not_block(fn, b) != 0) return -1;
  em_dtype result = em_result_type_n(2, ts);
  *compute = *out = result;
  if (is_comparison(op) || is_logical(op)) {
    *out = EM_BOOL;
  } else if (is_bitwise(op)) {
    if (!is_int(result))
      return em_error("%s: expected integer or bool tensors, got %s", fn, em_dtype_name(result));
    if ((op == EM_LSHIFT || op == EM_RSHIFT) && result == EM_BOOL)
      return em_error("%s: expected integer tensors, got bool", fn);
  } else if (op == EM_DIV || op == EM_ATAN2) {
    if (is_int(result)) *compute = *out = EM_FLOAT32;
  } else if (op == EM_SUB && (a->dtype_id == EM_BOOL || b->dtype_id == EM_BOOL)) {
    return em_error("%s: not supported for bool tensors, use logical_xor (or logical_not to "
                    "invert a mask)", fn);
  } else if (result == EM_BOOL && op != EM_ADD && op != EM_MUL && op != EM_MAXIMUM &&
             op != EM_MINIMUM) {
    return em_error("%s: not supported for bool tensors", fn);
  }
  return 0;
}

typedef struct binary_arg {
  em_binary_op op;
  double alpha;
} binary_arg;

static int binary_kernel(const char *fn, const em_backend *be, em_tensor *out,
                         const em_tensor *const *in, const void *arg) {
  const binary_arg *ba = arg;
  EM_NEED_KERNEL(fn, be, binary);
  return be->binary(ba->op, out, in[0], in[1], ba->alpha);
}

/* alpha scales b in add/sub. PyTorch refuses a fractional alpha for integer tensors, since it
 * could not be applied without leaving the integer dtype. */
static int check_alpha(const char *fn, em_binary_op op, em_dtype compute, double alpha) {
  if ((op != EM_ADD && op != EM_SUB) || alpha == 1.0) return 0;
  if (is_int(compute) && compute != EM_BOOL &&
      !(isfinite(alpha) && alpha == floor(alpha) && fabs(alpha) < 9.2e18))
    return em_error("%s: alpha must be an integer for %s tensors, got %g", fn,
                    em_dtype_name(compute), alpha);
  return 0;
}

/* An integer power with a negative scalar exponent is refused before the exponent is cast to
 * the compute dtype, where uint8 would turn -1 into 255 (tensor exponents are checked by the
 * kernel, element by element). */
static int check_pow_exponent(const char *fn, em_binary_op op, em_dtype compute,
                              const em_tensor *b) {
  if (op != EM_POW || !is_int(compute) || b->ndim != 0) return 0;
  double e;
  if (b->storage->device_id == EM_CPU) /* includes stack scalars made for another device */
    e = em_load_as_double((const char *)b->storage->data +
                              b->offset * (int64_t)em_dtypes[b->dtype_id].size,
                          (em_dtype)b->dtype_id);
  else if (em_item(b, &e) != 0)
    return -1;
  if (e < 0) return em_error("%s: integers to negative integer powers are not allowed", fn);
  return 0;
}

/* Shared by the out-of-place and in-place forms: validates and begins ew. */
static int binary_begin(em_ew *ew, const char *fn, em_binary_op op, const em_tensor *a,
                        const em_tensor *b, double alpha, em_dtype *out_dtype) {
  const em_tensor *ts[2] = {a, b};
  if (binary_types(fn, op, a, b, &ew->compute, out_dtype) != 0) return -1;
  em_dtype compute = ew->compute;
  if (check_alpha(fn, op, compute, alpha) != 0) return -1;
  if (check_pow_exponent(fn, op, compute, b) != 0) return -1;
  if (em_ew_begin(ew, fn, 2, ts) != 0) return -1;
  ew->compute = compute;
  return 0;
}

static bool same_layout(const em_tensor *a, const em_tensor *b) {
  return a->dtype_id == b->dtype_id && a->device_id == b->device_id && a->ndim == b->ndim &&
         a->ndim > 0 && !em_is_wrapped(a) && !em_is_wrapped(b) &&
         memcmp(a->sizes, b->sizes, sizeof(int64_t) * (size_t)a->ndim) == 0 &&
         em_is_contiguous(a) && em_is_contiguous(b);
}

static em_tensor *binary_new(em_binary_op op, const em_tensor *a, const em_tensor *b,
                             double alpha) {
  if ((unsigned)op >= EM_NUM_BINARY) return em_error_null("binary: invalid op %d", (int)op);
  const char *fn = binary_names[op];
  if (a == NULL || b == NULL) return em_error_null("%s: expected two tensors, got NULL", fn);
  EM_AUTOCAST(fn, binary_new(op, ac_[0], ac_[1], alpha), a, b);
  const em_tensor *ins[2] = {a, b};
  em_tensor *out = NULL;
  if (same_layout(a, b)) {
    /* The common small case: one shape, one dtype, both contiguous. No broadcasting, casts or
     * stack views: this path is most of the cost of a tiny op. Floating operands of one dtype
     * keep it (bool for comparisons), as binary_types would say. */
    em_dtype d = (em_dtype)a->dtype_id, compute = d, out_dtype = d;
    if (em_dtypes[d].is_float && !is_bitwise(op)) {
      if (is_comparison(op) || is_logical(op)) out_dtype = EM_BOOL;
    } else if (binary_types(fn, op, a, b, &compute, &out_dtype) != 0 ||
               check_alpha(fn, op, compute, alpha) != 0) {
      return NULL;
    }
    if (compute == d) {
      const em_backend *be = em_device_backend(a->device_id);
      int (*kernel)(em_binary_op, em_tensor *, const em_tensor *, const em_tensor *, double) =
          be->binary_contiguous ? be->binary_contiguous : be->binary;
      out = em_empty_unchecked(a->ndim, a->sizes, out_dtype, a->device_id);
      if (out != NULL && em_numel(out) > 0 &&
          (kernel == NULL ? em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: not implemented on %s", fn, be->name)
                          : kernel(op, out, a, b, alpha)) != 0) {
        em_release(out);
        return NULL;
      }
      if (a->grad_meta != NULL || b->grad_meta != NULL)
        EM_AG_RECORD(out, 2, ins, em_ag_record_binary(op, out, a, b, alpha));
      return out;
    }
  }
  em_ew ew;
  em_dtype out_dtype;
  if (binary_begin(&ew, fn, op, a, b, alpha, &out_dtype) != 0) return NULL;
  binary_arg arg = {op, alpha};
  out = em_ew_run(&ew, out_dtype, binary_kernel, &arg);
  EM_AG_RECORD(out, 2, ins, em_ag_record_binary(op, out, a, b, alpha));
  return out;
}

static int binary_inplace(em_binary_op op, em_tensor *a, const em_tensor *b, double alpha) {
  if ((unsigned)op >= EM_NUM_BINARY) return em_error("binary_: invalid op %d", (int)op);
  const char *fn = binary_names[op];
  if (a == NULL || b == NULL) return em_error("%s_: expected two tensors, got NULL", fn);
  const em_tensor *ins[2] = {a, b};
  EM_AG_INPLACE(fn, a, 2, ins, binary_new(op, self_clone, b, alpha));
  em_ew ew;
  em_dtype out_dtype;
  if (binary_begin(&ew, fn, op, a, b, alpha, &out_dtype) != 0) return -1;
  binary_arg arg = {op, alpha};
  return em_ew_run_inplace(&ew, a, out_dtype, binary_kernel, &arg);
}

em_tensor *em_binary(em_binary_op op, const em_tensor *a, const em_tensor *b) {
  return binary_new(op, a, b, 1.0);
}

int em_binary_(em_binary_op op, em_tensor *a, const em_tensor *b) {
  return binary_inplace(op, a, b, 1.0);
}

em_tensor *em_add_scaled(const em_tensor *a, const em_tensor *b, double alpha) {
  return binary_new(EM_ADD, a, b, alpha);
}

int em_add_scaled_(em_tensor *a, const em_tensor *b, double alpha) {
  return binary_inplace(EM_ADD, a, b, alpha);
}

/* The scalar becomes a wrapped number on the stack, so `int_tensor * 2` stays integer and
 * `int_tensor * 2.5` is float32 (em_result_type_n). */
em_tensor *em_binary_scalar(em_binary_op op, const em_tensor *a, double s, int reversed) {
  if (a == NULL) return em_error_null("%s: expected a tensor, got NULL", em_binary_name(op));
  em_tensor st;
  em_storage ss;
  double cell;
  em_stack_scalar(&st, &ss, &cell, s, a->device_id);
  if (em_ag_should_record(1, &a)) { /* the tape may save the scalar: it must outlive the call */
    em_tensor *heap = em_scalar_tensor(s, (em_dtype)st.dtype_id, a->device_id, 1);
    if (heap == NULL) return NULL;
    em_tensor *out = reversed ? binary_new(op, heap, a, 1.0) : binary_new(op, a, heap, 1.0);
    em_release(heap);
    return out;
  }
  return reversed ? binary_new(op, &st, a, 1.0) : binary_new(op, a, &st, 1.0);
}

int em_binary_scalar_(em_binary_op op, em_tensor *a, double s) {
  if (a == NULL) return em_error("%s_: expected a tensor, got NULL", em_binary_name(op));
  em_tensor st;
  em_storage ss;
  double cell;
  em_stack_scalar(&st, &ss, &cell, s, a->device_id);
  if (em_ag_should_record(1, (const em_tensor *const *)&a)) {
    em_tensor *heap = em_scalar_tensor(s, (em_dtype)st.dtype_id, a->device_id, 1);
    if (heap == NULL) return -1;
    int rc = binary_inplace(op, a, heap, 1.0);
    em_release(heap);
    return rc;
  }
  return binary_inplace(op, a, &st, 1.0);
}
