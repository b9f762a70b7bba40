/*
 * formulas_ctc.c: the autograd record of the CTC loss (ops/nn_ctc.c). The forward kernel
 * computed d loss[n] / d log_probs; the backward scales it by each element's incoming
 * gradient: g_lp[t, n, c] = grad[t, n, c] * g[n]. The saved gradient is a constant to
 * autograd, so a second derivative through it is refused (as PyTorch's).
 */
#include "../nn.h"
#include "expr.h"
#include "record.h"

static int ctc_backward(em_node *node, const em_tensor *g, em_tensor **gi) {
  const em_tensor *grad = em_ag_saved(node, 0);
  if (grad == NULL) return -1;
  if (em_grad_enabled())
    return em_error("ctc_loss: double backward is not supported (the gradient is computed by "
                    "the forward kernel)");
  int64_t col[3] = {1, g->sizes[0], 1};
  T gv = em_reshape(g, 3, col);
  return put(node, gi, 0, mul(ref(grad), gv));
}

int em_ag_record_ctc(em_tensor *loss, const em_tensor *log_probs, const em_tensor *grad) {
  em_node *node = em_ag_node_new("CtcLossBackward", ctc_backward, 1, &log_probs);
  if (node == NULL) return -1;
  if (em_ag_save(node, grad) != 0) {
    em_node_release(node);
    return -1;
  }
  return em_ag_set_output(loss, node);
}
