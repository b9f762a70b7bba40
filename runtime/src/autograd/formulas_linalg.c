/*
 * formulas_linalg.c: the backward of every matrix product. All of them (matmul, mm, mv, bmm,
 * dot, outer, addmm, baddbmm) are one product out = beta * c + alpha * A @ B over matrix views
 * A, B of the operands (a 1-D operand is a row or a column), with broadcast batch dims; the
 * gradients are products with the other operand transposed, shaped back to each operand.
 */
#include "expr.h"
#include "record.h"

enum { AS_IS = 0, AS_ROW = 1, AS_COL = 2 };

/* The matrix view the forward used for operand t. */
static T matrix_of(const em_tensor *t, int kind) {
  if (kind == AS_ROW) return em_unsqueeze(t, 0);
  if (kind == AS_COL) return em_unsqueeze(t, 1);
  return ref(t);
}

/* A gradient of the matrix view back to the operand's own rank. */
static T unmatrix(T g, int kind) {
  if (g == NULL || kind == AS_IS) return g;
  T r = em_squeeze(g, kind == AS_ROW ? -2 : -1);
  em_release(g);
  return r;
}

static T transposed(T m) {
  if (m == NULL) return NULL;
  T r = em_transpose(m, -1, -2);
  em_release(m);
  return r;
}

static int product_backward(em_node *node, const em_tensor *g, em_tensor **gi) {
  int kind_a = (int)node->ints[0], kind_b = (int)node->ints[1], nfull = (int)node->ints[2];
  double beta = node->scalars[0], alpha = node->scalars[1];
  const em_tensor *a = em_ag_saved(node, 0), *b = em_ag_saved(node, 1);
  if (a == NULL || b == NULL) return -1;
  T gfull = em_reshape(g, nfull, node->ints + 3);
  if (gfull == NULL) return -1;
  T ga = NULL, gb = NULL;
  if (needs(node, 0)) {
    T p = bin_matmul_hint(ref(gfull), transposed(matrix_of(b, kind_b)));
    ga = unmatrix(alpha == 1 ? p : muls(p, alpha), kind_a);
  }
  if (needs(node, 1)) {
    T p;
    if (kind_b == AS_IS && b->ndim == 2 && b->strides[0] == 1 && b->sizes[0] > 1 && gfull->ndim == 2) {
      /* b is a transposed matrix (Linear's weight:t()): compute the gradient in the weight's own
       * layout, (g^T a)^T, so that it reaches the weight contiguous and needs no copy. */
      p = transposed(bin_matmul_hint(transposed(ref(gfull)), matrix_of(a, kind_a)));
    } else {
      p = bin_matmul_hint(transposed(matrix_of(a, kind_a)), ref(gfull));
    }
    gb = unmatrix(alpha == 1 ? p : muls(p, alpha), kind_b);
  }
  em_release(gfull);
  int rc = put2(node, gi, ga, gb);
  if (rc == 0 && node->n_inputs > 2 && needs(node, 2))
    rc = put(node, gi, 2, beta == 1 ? ref(g) : muls(ref(g), beta));
  return rc;
}

int em_ag_record_product(em_tensor *out, const em_tensor *a, const em_tensor *b, int kind_a,
                         int kind_b, int nfull, const int64_t *full, const em_tensor *c,
                         double beta, double alpha) {
  if (!em_dtypes[out->dtype_id].is_float) return 0;
  const em_tensor *ins[3] = {a, b, c};
  em_node *node = em_ag_node_new(c ? "AddmmBackward" : "MatmulBackward", product_backward,
                                 c ? 3 : 2, ins);
  if (node == NULL) return -1;
  node->ints[0] = kind_a;
  node->ints[1] = kind_b;
  node->ints[2] = nfull;
  for (int i = 0; i < nfull; i++) node->ints[3 + i] = full[i];
  node->scalars[0] = beta;
  node->scalars[1] = alpha;
  if (em_ag_save(node, a) || em_ag_save(node, b)) {
    em_node_release(node);
    return -1;
  }
  return em_ag_set_output(out, node);
}
