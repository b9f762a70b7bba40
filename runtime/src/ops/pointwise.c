/*
 * pointwise.c: definitions of the unary, binary and ternary elementwise ops: dtype rules,
 * broadcasting, in-place checks. The arithmetic is the device's (backend.h).
 */
#include <math.h>

#include "elementwise.h"

static const char *unary_names[EM_NUM_UNARY] = {
  "neg", "abs", "sign", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "tan",
  "tanh", "sigmoid", "relu", "gelu", "gelu_tanh", "silu", "softplus", "floor", "ceil", "round",
  "trunc", "reciprocal", "square", "erf", "isnan", "isinf", "isfinite", "logical_not",
  "bitwise_not",
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

/* Decides compute and output dtypes of a unary op; -1 when the input dtype is unsupported. */
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
  case EM_NEG: case EM_SIGN:
    if (in == EM_BOOL)
      return em_error("%s: not supported for bool tensors (use logical_not)", fn);
    return 0;
  case EM_ABS: case EM_SQUARE: case EM_RELU:
    if (in == EM_BOOL) return em_error("%s: not supported for bool tensors", fn);
    return 0;
  case EM_FLOOR: case EM_CEIL: case EM_ROUND: case EM_TRUNC:
    return 0; /* the identity on integers and bool */
  default:
    /* Transcendental ops compute in floating point: integers give float32, as in PyTorch. */
    if (is_int(in)) *compute = *out = EM_FLOAT32;
    return 0;
  }
}

static int run_unary(const char *fn, em_unary_op op, em_tensor *out, const em_tensor *x) {
  const em_backend *be = em_device_backend(x->device_id);
  EM_NEED_KERNEL(fn, be, unary);
  if (em_numel(out) == 0) return 0;
  return be->unary(op, out, x);
}

em_tensor *em_unary(em_unary_op op, const em_tensor *x) {
  if ((unsigned)op >= EM_NUM_UNARY) return em_error_null("unary: invalid op %d", (int)op);
  const char *fn = unary_names[op];
  if (x == NULL) return em_error_null("%s: expected a tensor, got NULL", fn);
  em_dtype compute, out_dtype;
  if (unary_types(fn, op, (em_dtype)x->dtype_id, &compute, &out_dtype) != 0) return NULL;
  em_ew ew;
  if (em_ew_begin(&ew, fn, 1, &x) != 0) return NULL;
  ew.compute = compute;
  em_tensor *out = NULL;
  if (em_ew_prepare(&ew) == 0 && (out = em_ew_output(&ew, out_dtype)) != NULL &&
      run_unary(fn, op, out, ew.ready[0]) != 0) {
    em_release(out);
    out = NULL;
  }
  em_ew_end(&ew);
  return out;
}

/* In place: compute into a temporary when the result dtype differs from x's. */
int em_unary_(em_unary_op op, em_tensor *x) {
  if ((unsigned)op >= EM_NUM_UNARY) return em_error("unary_: invalid op %d", (int)op);
  const char *fn = unary_names[op];
  if (x == NULL) return em_error("%s_: expected a tensor, got NULL", fn);
  em_dtype compute, out_dtype;
  if (unary_types(fn, op, (em_dtype)x->dtype_id, &compute, &out_dtype) != 0) return -1;
  em_ew ew;
  if (em_ew_begin(&ew, fn, 1, (const em_tensor *const *)&x) != 0) return -1;
  int rc = em_ew_check_inplace(&ew, x, out_dtype);
  if (rc == 0 && out_dtype == (em_dtype)x->dtype_id && compute == out_dtype) {
    ew.compute = compute;
    rc = em_ew_prepare(&ew);
    if (rc == 0) rc = run_unary(fn, op, x, ew.ready[0]);
    if (rc == 0) em_bump_version(x);
  } else if (rc == 0) {
    em_tensor *tmp = em_unary(op, x);
    rc = tmp ? em_copy_(x, tmp) : -1;
    em_release(tmp);
  }
  em_ew_end(&ew);
  return rc;
}

/* ---- binary -------------------------------------------------------------------------------- */

static bool is_comparison(em_binary_op op) { return op >= EM_EQ && op <= EM_GE; }
static bool is_logical(em_binary_op op) { return op >= EM_LOGICAL_AND && op <= EM_LOGICAL_XOR; }
static bool is_bitwise(em_binary_op op) { return op >= EM_BITWISE_AND && op <= EM_RSHIFT; }

static int binary_types(const char *fn, em_binary_op op, em_dtype result, em_dtype *compute,
                        em_dtype *out) {
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
  } else if (result == EM_BOOL && op != EM_ADD && op != EM_MUL && op != EM_MAXIMUM &&
             op != EM_MINIMUM) {
    return em_error("%s: not supported for bool tensors", fn);
  }
  return 0;
}

static int run_binary(const char *fn, em_binary_op op, em_tensor *out, const em_tensor *a,
                      const em_tensor *b, double alpha) {
  const em_backend *be = em_device_backend(out->device_id);
  EM_NEED_KERNEL(fn, be, binary);
  if (em_numel(out) == 0) return 0;
  return be->binary(op, out, a, b, alpha);
}

static em_tensor *binary_new(em_binary_op op, const em_tensor *a, const em_tensor *b,
                             double alpha) {
  if ((unsigned)op >= EM_NUM_BINARY) return em_error_null("binary: invalid op %d", (int)op);
  const char *fn = binary_names[op];
  if (a == NULL || b == NULL) return em_error_null("%s: expected two tensors, got NULL", fn);
  const em_tensor *ts[2] = {a, b};
  em_ew ew;
  if (em_ew_begin(&ew, fn, 2, ts) != 0) return NULL;
  em_dtype out_dtype;
  em_tensor *out = NULL;
  if (binary_types(fn, op, em_result_type_n(2, ts), &ew.compute, &out_dtype) == 0 &&
      em_ew_prepare(&ew) == 0 && (out = em_ew_output(&ew, out_dtype)) != NULL &&
      run_binary(fn, op, out, ew.ready[0], ew.ready[1], alpha) != 0) {
    em_release(out);
    out = NULL;
  }
  em_ew_end(&ew);
  return out;
}

static int binary_inplace(em_binary_op op, em_tensor *a, const em_tensor *b, double alpha) {
  if ((unsigned)op >= EM_NUM_BINARY) return em_error("binary_: invalid op %d", (int)op);
  const char *fn = binary_names[op];
  if (a == NULL || b == NULL) return em_error("%s_: expected two tensors, got NULL", fn);
  const em_tensor *ts[2] = {a, b};
  em_ew ew;
  if (em_ew_begin(&ew, fn, 2, ts) != 0) return -1;
  em_dtype out_dtype;
  int rc = binary_types(fn, op, em_result_type_n(2, ts), &ew.compute, &out_dtype);
  if (rc == 0) rc = em_ew_check_inplace(&ew, a, out_dtype);
  if (rc == 0 && out_dtype == (em_dtype)a->dtype_id && ew.compute == out_dtype) {
    rc = em_ew_prepare(&ew);
    if (rc == 0) rc = run_binary(fn, op, a, ew.ready[0], ew.ready[1], alpha);
    if (rc == 0) em_bump_version(a);
  } else if (rc == 0) {
    em_tensor *tmp = binary_new(op, a, b, alpha);
    rc = tmp ? em_copy_(a, tmp) : -1;
    em_release(tmp);
  }
  em_ew_end(&ew);
  return rc;
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

em_tensor *em_binary_scalar(em_binary_op op, const em_tensor *a, double s, int reversed) {
  if (a == NULL) return em_error_null("%s: expected a tensor, got NULL", em_binary_name(op));
  em_tensor st;
  em_storage ss;
  double cell;
  em_stack_scalar(&st, &ss, &cell, s, a->device_id);
  return reversed ? binary_new(op, &st, a, 1.0) : binary_new(op, a, &st, 1.0);
}

int em_binary_scalar_(em_binary_op op, em_tensor *a, double s) {
  if (a == NULL) return em_error("%s_: expected a tensor, got NULL", em_binary_name(op));
  em_tensor st;
  em_storage ss;
  double cell;
  em_stack_scalar(&st, &ss, &cell, s, a->device_id);
  return binary_inplace(op, a, &st, 1.0);
}
