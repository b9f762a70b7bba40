/*
 * util.c: what the backward formulas share: shaping a gradient back to an input (undoing
 * broadcasting and promotion), and accumulating into .grad.
 */
#include <stdlib.h>

#include "autograd.h"

em_tensor *em_ag_shape_to_input(const em_node *node, int i, em_tensor *grad) {
  const em_input_edge *e = &node->inputs[i];
  em_tensor *g = em_retain(grad);
  if (g->ndim < e->ndim) { /* a flattened gradient (the norms' [C] for a weight [3, 1]) */
    em_tensor *r = em_reshape(g, e->ndim, e->sizes);
    em_release(g);
    if (r == NULL) return NULL;
    g = r;
  }
  /* Sum over the dims broadcasting added or expanded. */
  int lead = g->ndim - e->ndim, dims[EM_MAX_DIMS], n = 0;
  for (int d = 0; d < g->ndim; d++)
    if (d < lead || (e->sizes[d - lead] == 1 && g->sizes[d] != 1)) dims[n++] = d;
  if (n > 0) {
    em_tensor *s = em_reduce(EM_SUM, g, n, dims, 1);
    em_release(g);
    if (s == NULL) return NULL;
    em_tensor *r = em_reshape(s, e->ndim, e->sizes);
    em_release(s);
    if (r == NULL) return NULL;
    g = r;
  } else if (g->ndim != e->ndim) {
    em_tensor *r = em_reshape(g, e->ndim, e->sizes);
    em_release(g);
    if (r == NULL) return NULL;
    g = r;
  }
  if (g->dtype_id != e->dtype_id) {
    em_tensor *c = em_to_dtype(g, (em_dtype)e->dtype_id);
    em_release(g);
    g = c;
  }
  return g;
}

void em_ag_release_all(int n, em_tensor **ts) {
  for (int i = 0; i < n; i++) {
    em_release(ts[i]);
    ts[i] = NULL;
  }
}

/* Gradients in the graph may be broadcast views (stride 0) or views of other buffers: .grad
 * gets its own contiguous copy. */
/* A gradient nobody else holds (one reference, its own storage, contiguous) can become .grad
 * without a copy. */
static bool exclusively_held(const em_tensor *g) {
  return __atomic_load_n(&g->refcount, __ATOMIC_RELAXED) == 1 &&
         __atomic_load_n(&g->storage->refcount, __ATOMIC_RELAXED) == 1 && g->grad_meta == NULL &&
         g->offset == 0 && em_is_contiguous(g) &&
         (size_t)em_numel(g) * em_dtypes[g->dtype_id].size == g->storage->nbytes;
}

static int add_into(em_tensor **slot, const em_tensor *grad) {
  if (*slot == NULL && !em_grad_enabled() && exclusively_held(grad)) {
    *slot = em_retain((em_tensor *)grad);
    return 0;
  }
  if (*slot == NULL) {
    *slot = em_grad_enabled() ? em_binary_scalar(EM_MUL, grad, 1.0, 0) : em_clone(grad);
    return *slot ? 0 : -1;
  }
  if (em_grad_enabled()) { /* create_graph: keep the sum differentiable */
    em_tensor *sum = em_binary(EM_ADD, *slot, grad);
    if (sum == NULL) return -1;
    em_release(*slot);
    *slot = sum;
    return 0;
  }
  return em_binary_(EM_ADD, *slot, grad);
}

int em_ag_retain_into(em_grad_meta *meta, const em_tensor *grad) {
  return add_into(&meta->grad, grad);
}

/* Graphs on other threads may share the leaf: its hooks are read, and its .grad summed, under
 * the leaf's lock (sync.c); the hooks run outside it. */
int em_ag_accumulate(em_node *node, const em_tensor *grad, em_tensor **grad_inputs) {
  (void)grad_inputs;
  em_tensor *leaf = node->leaf;
  em_grad_meta *m = leaf->grad_meta;
  em_hooks hooks;
  if (em_ag_hooks_snapshot(leaf, &m->hooks, &hooks) != 0) return -1;
  em_tensor *g = (em_tensor *)grad;
  bool hooked = hooks.count > 0; /* g is then our own reference */
  if (hooked) {
    g = em_ag_run_hooks(&hooks, g);
    free(hooks.items);
    if (g == NULL) return -1;
  }
  em_ag_leaf_lock(leaf);
  int rc = add_into(&m->grad, g);
  em_ag_leaf_unlock(leaf);
  if (hooked) em_release(g);
  return rc;
}
