/*
 * expr.h: a small vocabulary for writing backward formulas with the public ops. Each helper
 * consumes the references it is given and returns a new one (NULL propagates errors), so a
 * formula reads as one expression: mul(ref(g), rsub(1, ref(y))).
 */
#ifndef EMBER_AUTOGRAD_EXPR_H
#define EMBER_AUTOGRAD_EXPR_H

#include "autograd.h"

typedef em_tensor *T;

static inline T ref(const em_tensor *t) { return t ? em_retain((em_tensor *)t) : NULL; }

static inline T bin(em_binary_op op, T a, T b) {
  T r = (a && b) ? em_binary(op, a, b) : NULL;
  em_release(a);
  em_release(b);
  return r;
}
static inline T add(T a, T b) { return bin(EM_ADD, a, b); }
static inline T sub(T a, T b) { return bin(EM_SUB, a, b); }
static inline T mul(T a, T b) { return bin(EM_MUL, a, b); }
static inline T divt(T a, T b) { return bin(EM_DIV, a, b); }

/* a @ b with ownership of both. */
static inline T bin_matmul_hint(T a, T b) {
  T r = (a && b) ? em_matmul(a, b) : NULL;
  em_release(a);
  em_release(b);
  return r;
}

/* a op s, and s op a */
static inline T bsc(em_binary_op op, T a, double s) {
  T r = a ? em_binary_scalar(op, a, s, 0) : NULL;
  em_release(a);
  return r;
}
static inline T rsc(em_binary_op op, double s, T a) {
  T r = a ? em_binary_scalar(op, a, s, 1) : NULL;
  em_release(a);
  return r;
}
static inline T muls(T a, double s) { return bsc(EM_MUL, a, s); }
static inline T adds(T a, double s) { return bsc(EM_ADD, a, s); }
static inline T rsub(double s, T a) { return rsc(EM_SUB, s, a); }

static inline T un(em_unary_op op, T a) {
  T r = a ? em_unary(op, a) : NULL;
  em_release(a);
  return r;
}
static inline T neg(T a) { return un(EM_NEG, a); }

/* where(c, a, b) with ownership of all three. */
static inline T where3(T c, T a, T b) {
  T r = (c && a && b) ? em_where(c, a, b) : NULL;
  em_release(c);
  em_release(a);
  em_release(b);
  return r;
}
/* A zero of a's shape and dtype (for masks: where(c, g, zero)). */
static inline T zeros_like(const em_tensor *a) {
  return em_zeros(a->ndim, a->sizes, (em_dtype)a->dtype_id, a->device_id);
}
/* A 0-dim wrapped number, for where() branches. */
static inline T scalar(double v, const em_tensor *like) {
  return em_scalar_tensor(v, (em_dtype)like->dtype_id, like->device_id, 1);
}

/* float16 / bfloat16: their backward formulas compute in float32 and round once. */
static inline bool is_half_dtype(int dt) { return dt == EM_FLOAT16 || dt == EM_BFLOAT16; }
static inline T f32(const em_tensor *t) {
  return t == NULL ? NULL : t->dtype_id == EM_FLOAT32 ? ref(t) : em_to_dtype(t, EM_FLOAT32);
}

/* Stores a gradient for input i, shaped to the input; 0 or -1. Consumes g. */
static inline int put(em_node *node, em_tensor **grad_inputs, int i, T g) {
  if (node->inputs[i].node == NULL) {
    em_release(g);
    return 0;
  }
  if (g == NULL) return -1;
  grad_inputs[i] = em_ag_shape_to_input(node, i, g);
  em_release(g);
  return grad_inputs[i] ? 0 : -1;
}

/* put() for inputs 0 and 1 (and 2): every gradient is consumed, also when an earlier one
 * failed (out of memory half-way through a formula); `put(a) || put(b)` would leak b. */
static inline int put2(em_node *node, em_tensor **grad_inputs, T g0, T g1) {
  int rc0 = put(node, grad_inputs, 0, g0);
  int rc1 = put(node, grad_inputs, 1, g1);
  return rc0 || rc1 ? -1 : 0;
}
static inline int put3(em_node *node, em_tensor **grad_inputs, T g0, T g1, T g2) {
  int rc01 = put2(node, grad_inputs, g0, g1);
  int rc2 = put(node, grad_inputs, 2, g2);
  return rc01 || rc2 ? -1 : 0;
}

/* Whether input i needs a gradient (formulas skip work for the others). */
static inline bool needs(const em_node *node, int i) { return node->inputs[i].node != NULL; }

#endif
