/*
 * engine.c: backward. It collects the nodes reachable from the roots, counts how many edges
 * lead into each, then runs nodes in an order where each runs once all the gradients flowing
 * into it have been summed. AccumulateGrad nodes add into leaves' .grad. Without retain_graph,
 * the saved tensors of every node run are freed afterwards.
 *
 * A pass keeps its bookkeeping (a node's index, its pending count, its summed gradient) in its
 * own tables, never in the nodes: graphs on other threads share nodes with this one (a shared
 * leaf's AccumulateGrad), and passes nest (a hook or a custom function may call backward).
 */
#include <stdlib.h>

#include "../autocast.h"
#include "autograd.h"

typedef struct engine {
  em_node **nodes;
  int *pending;            /* edges into node i not yet delivered */
  em_tensor **buffers;     /* summed gradient flowing into node i */
  int count, cap;
  /* node -> i: open addressing, linear probing, at most half full */
  em_node **slot_node;
  int *slot_index;
  unsigned slot_mask;      /* table size - 1 (0: no table yet) */
  /* autograd.grad: gradients captured at these nodes instead of accumulated into leaves */
  int n_capture;
  em_node *const *capture;
  em_tensor **captured;
  bool create_graph;
} engine;

static unsigned slot_hash(const em_node *node, unsigned mask) {
  uint64_t p = (uint64_t)(uintptr_t)node >> 4;
  return (unsigned)((p * UINT64_C(0x9E3779B97F4A7C15)) >> 32) & mask;
}

/* Node's index in this pass, or -1 when the pass has not met it. */
static int index_of(const engine *e, const em_node *node) {
  if (e->slot_mask == 0) return -1;
  for (unsigned h = slot_hash(node, e->slot_mask);; h = (h + 1) & e->slot_mask) {
    if (e->slot_node[h] == node) return e->slot_index[h];
    if (e->slot_node[h] == NULL) return -1;
  }
}

static void slot_put(engine *e, em_node *node, int index) {
  unsigned h = slot_hash(node, e->slot_mask);
  while (e->slot_node[h] != NULL) h = (h + 1) & e->slot_mask;
  e->slot_node[h] = node;
  e->slot_index[h] = index;
}

/* Makes room for one more node in the table (rehashing the nodes so far). */
static int slot_reserve(engine *e) {
  unsigned size = e->slot_mask + 1;
  if (e->slot_mask != 0 && (unsigned)(e->count + 1) * 2 <= size) return 0;
  size = e->slot_mask ? size * 2 : 128;
  em_node **nodes = calloc(size, sizeof *nodes);
  int *index = malloc(size * sizeof *index);
  if (nodes == NULL || index == NULL) {
    free(nodes);
    free(index);
    return em_error_kind_set(EM_ERR_OOM, "out of memory on cpu: backward graph");
  }
  free(e->slot_node);
  free(e->slot_index);
  e->slot_node = nodes;
  e->slot_index = index;
  e->slot_mask = size - 1;
  for (int i = 0; i < e->count; i++) slot_put(e, e->nodes[i], i);
  return 0;
}

static int push_node(engine *e, em_node *node) {
  if (e->count == e->cap) {
    int cap = e->cap ? e->cap * 2 : 64;
    em_node **nodes = realloc(e->nodes, (size_t)cap * sizeof *nodes);
    if (nodes) e->nodes = nodes;
    int *pending = realloc(e->pending, (size_t)cap * sizeof *pending);
    if (pending) e->pending = pending;
    em_tensor **buffers = realloc(e->buffers, (size_t)cap * sizeof *buffers);
    if (buffers) e->buffers = buffers;
    if (!nodes || !pending || !buffers)
      return em_error_kind_set(EM_ERR_OOM, "out of memory on cpu: backward graph");
    e->cap = cap;
  }
  if (slot_reserve(e) != 0) return -1;
  slot_put(e, node, e->count);
  e->nodes[e->count] = node;
  e->pending[e->count] = 0;
  e->buffers[e->count] = NULL;
  e->count++;
  return 0;
}

/* Depth-first collection from the roots, with an explicit stack (graphs can be deep). */
static int collect(engine *e, int n_roots, em_node *const *roots) {
  int sp = 0, cap = 64;
  em_node **stack = malloc((size_t)cap * sizeof *stack);
  if (stack == NULL) return em_error_kind_set(EM_ERR_OOM, "out of memory on cpu: backward");
  for (int r = 0; r < n_roots; r++) {
    if (roots[r] == NULL || index_of(e, roots[r]) >= 0) continue;
    if (push_node(e, roots[r]) != 0) goto fail;
    stack[sp++] = roots[r];
  }
  while (sp > 0) {
    em_node *node = stack[--sp];
    for (int i = 0; i < node->n_inputs; i++) {
      em_node *next = node->inputs[i].node;
      if (next == NULL) continue;
      int j = index_of(e, next);
      if (j < 0) {
        j = e->count;
        if (push_node(e, next) != 0) goto fail;
        if (sp == cap) {
          cap *= 2;
          em_node **bigger = realloc(stack, (size_t)cap * sizeof *stack);
          if (bigger == NULL) {
            em_error_kind_set(EM_ERR_OOM, "out of memory on cpu: backward");
            goto fail;
          }
          stack = bigger;
        }
        stack[sp++] = next;
      }
      e->pending[j]++;
    }
  }
  free(stack);
  return 0;
fail:
  free(stack);
  return -1;
}

static int accumulate_buffer(engine *e, int index, em_tensor *grad) {
  if (e->buffers[index] == NULL) {
    e->buffers[index] = grad;
    return 0;
  }
  em_tensor *sum = em_binary(EM_ADD, e->buffers[index], grad);
  em_release(grad);
  if (sum == NULL) return -1;
  em_release(e->buffers[index]);
  e->buffers[index] = sum;
  return 0;
}

static int capture_index(const engine *e, const em_node *node) {
  for (int i = 0; i < e->n_capture; i++)
    if (e->capture[i] == node) return i;
  return -1;
}

/* Runs one node: hooks, retain_grad, capture, then its backward; delivers input gradients. */
static int run_node(engine *e, int index, int *ready, int *n_ready) {
  em_node *node = e->nodes[index];
  em_tensor *grad = e->buffers[index];
  e->buffers[index] = NULL;
  if (grad == NULL) {
    /* Nothing flowed here (every gradient into it was absent): the nodes below still wait for
     * this edge, and may get gradients along other paths. */
    for (int i = 0; i < node->n_inputs; i++) {
      em_node *next = node->inputs[i].node;
      int j = next != NULL ? index_of(e, next) : -1;
      if (j >= 0 && --e->pending[j] == 0) ready[(*n_ready)++] = j;
    }
    return 0;
  }
  int rc = -1;
  em_tensor *hooked = NULL;
  em_tensor *grads[1] = {NULL};
  em_tensor **grad_inputs = NULL;
  if (node->leaf == NULL && node->hooks.count > 0) {
    hooked = em_ag_run_hooks(&node->hooks, grad);
    if (hooked == NULL) goto done;
    em_release(grad);
    grad = hooked;
    hooked = NULL;
  }
  if (node->retained && em_ag_retain_into(node->retained, grad) != 0) goto done;
  int cap = capture_index(e, node);
  if (cap >= 0) {
    e->captured[cap] = em_retain(grad);
    if (node->leaf) { rc = 0; goto done; } /* autograd.grad leaves .grad alone */
  }
  grad_inputs = calloc((size_t)(node->n_inputs ? node->n_inputs : 1), sizeof *grad_inputs);
  if (grad_inputs == NULL) {
    em_error_kind_set(EM_ERR_OOM, "out of memory on cpu: backward");
    goto done;
  }
  int previous = em_set_grad_enabled(e->create_graph);
  rc = node->backward(node, grad, grad_inputs);
  em_set_grad_enabled(previous);
  if (rc != 0) {
    em_error_prefix("backward");
    goto done;
  }
  for (int i = 0; i < node->n_inputs; i++) {
    em_node *next = node->inputs[i].node;
    if (next == NULL) {
      em_release(grad_inputs[i]);
      continue;
    }
    int j = index_of(e, next);
    if (grad_inputs[i] && accumulate_buffer(e, j, grad_inputs[i]) != 0) {
      grad_inputs[i] = NULL;
      rc = -1;
      goto done;
    }
    grad_inputs[i] = NULL;
    if (--e->pending[j] == 0) ready[(*n_ready)++] = j;
  }
done:
  if (grad_inputs) {
    for (int i = 0; i < node->n_inputs; i++) em_release(grad_inputs[i]);
    free(grad_inputs);
  }
  (void)grads;
  em_release(grad);
  return rc;
}

static void release_saved_tensors(em_node *node) {
  for (int i = 0; i < node->n_saved; i++) {
    em_release(node->saved[i].t);
    node->saved[i].t = NULL;
  }
  if (node->n_saved > 0) node->released = true;
  if (node->fn) {
    em_ag_function_drop(node->fn);
    node->released = true;
  }
}

/* The id of the backward pass running on this thread; passes nest (a hook or a custom
 * function may call backward), so each restores its caller's id when it ends. */
static uint64_t next_run_id;
static _Thread_local uint64_t current_run_id;

uint64_t em_ag_run_id(void) { return current_run_id; }

static int run_graph(int n_roots, em_node *const *roots, em_tensor *const *root_grads,
                     bool retain_graph, bool create_graph, int n_capture,
                     em_node *const *capture, em_tensor **captured) {
  engine e = {0};
  uint64_t outer_run_id = current_run_id;
  current_run_id = __atomic_add_fetch(&next_run_id, 1, __ATOMIC_RELAXED);
  /* Backward replays the dtypes the forward recorded: autocast stays out of it. */
  em_autocast_suspend();
  e.create_graph = create_graph;
  e.n_capture = n_capture;
  e.capture = capture;
  e.captured = captured;
  int rc = collect(&e, n_roots, roots);
  int *ready = rc == 0 ? malloc((size_t)(e.count ? e.count : 1) * sizeof *ready) : NULL;
  int n_ready = 0;
  if (rc == 0 && ready == NULL) rc = em_error_kind_set(EM_ERR_OOM, "out of memory on cpu: backward");
  for (int r = 0; rc == 0 && r < n_roots; r++) {
    if (roots[r] == NULL) continue;
    rc = accumulate_buffer(&e, index_of(&e, roots[r]), em_retain(root_grads[r]));
  }
  for (int i = 0; rc == 0 && i < e.count; i++)
    if (e.pending[i] == 0) ready[n_ready++] = i;
  /* Nodes become ready only after every edge into them delivered: a topological order. */
  while (rc == 0 && n_ready > 0) {
    int index = ready[--n_ready];
    rc = run_node(&e, index, ready, &n_ready);
  }
  for (int i = 0; i < e.count; i++) {
    em_release(e.buffers[i]);
    if (rc == 0 && !retain_graph) release_saved_tensors(e.nodes[i]);
  }
  free(ready);
  free(e.nodes);
  free(e.pending);
  free(e.buffers);
  free(e.slot_node);
  free(e.slot_index);
  em_autocast_resume();
  current_run_id = outer_run_id;
  return rc;
}

/* Makes the default gradient for backward(): ones for a one-element output. */
static em_tensor *default_grad(const char *fn, const em_tensor *t) {
  if (em_numel(t) != 1)
    return em_error_null("%s: grad can be created implicitly only for outputs with one element "
                         "(got %lld elements); pass a gradient", fn, (long long)em_numel(t));
  return em_ones(t->ndim, t->sizes, (em_dtype)t->dtype_id, t->device_id);
}

static int check_grad_shape(const char *fn, const em_tensor *t, const em_tensor *g) {
  if (g->ndim != t->ndim || memcmp(g->sizes, t->sizes, sizeof(int64_t) * (size_t)t->ndim) != 0) {
    char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF];
    return em_error("%s: the gradient's shape %s does not match the output's shape %s", fn,
                    em_shape_str(a, sizeof a, g->ndim, g->sizes),
                    em_shape_str(b, sizeof b, t->ndim, t->sizes));
  }
  return 0;
}

int em_backward(em_tensor *t, const em_tensor *grad, int retain_graph, int create_graph) {
  if (t == NULL) return em_error("backward: expected a tensor, got NULL");
  if (!em_requires_grad(t))
    return em_error("backward: the tensor does not require grad and has no grad_fn");
  em_tensor *g = grad ? em_retain((em_tensor *)grad) : default_grad("backward", t);
  if (g == NULL) return -1;
  if (check_grad_shape("backward", t, g) != 0) {
    em_release(g);
    return -1;
  }
  em_node *root = em_ag_edge_of(t);
  int rc = root ? run_graph(1, &root, &g, retain_graph, create_graph, 0, NULL, NULL) : -1;
  em_node_release(root);
  em_release(g);
  return rc;
}

int em_backward_many(int n, em_tensor *const *tensors, em_tensor *const *grads,
                     int retain_graph, int create_graph) {
  if (n < 1 || tensors == NULL) return em_error("backward: expected at least one tensor, got %d", n);
  int rc = -1;
  em_node **roots = calloc((size_t)n, sizeof *roots);
  em_tensor **gs = calloc((size_t)n, sizeof *gs);
  if (roots == NULL || gs == NULL) {
    em_error_kind_set(EM_ERR_OOM, "out of memory on cpu: backward");
    goto done;
  }
  for (int i = 0; i < n; i++) {
    if (tensors[i] == NULL || !em_requires_grad(tensors[i])) {
      em_error("backward: tensor %d does not require grad and has no grad_fn", i + 1);
      goto done;
    }
    gs[i] = grads && grads[i] ? em_retain(grads[i]) : default_grad("backward", tensors[i]);
    if (gs[i] == NULL || check_grad_shape("backward", tensors[i], gs[i]) != 0) goto done;
    roots[i] = em_ag_edge_of(tensors[i]);
    if (roots[i] == NULL) goto done;
  }
  rc = run_graph(n, roots, gs, retain_graph, create_graph, 0, NULL, NULL);
done:
  for (int i = 0; i < n && roots && gs; i++) {
    em_node_release(roots[i]);
    em_release(gs[i]);
  }
  free(roots);
  free(gs);
  return rc;
}

int em_autograd_grad(int n_outputs, em_tensor *const *outputs, em_tensor *const *grad_outputs,
                     int n_inputs, em_tensor *const *inputs, em_tensor **results,
                     int retain_graph, int create_graph, int allow_unused) {
  int rc = -1;
  em_node **roots = calloc((size_t)(n_outputs + n_inputs + 1), sizeof *roots);
  em_tensor **grads = calloc((size_t)(n_outputs + 1), sizeof *grads);
  em_node **capture = roots ? roots + n_outputs : NULL;
  for (int i = 0; i < n_inputs; i++) results[i] = NULL;
  if (roots == NULL || grads == NULL) {
    em_error_kind_set(EM_ERR_OOM, "out of memory on cpu: autograd.grad");
    goto done;
  }
  for (int i = 0; i < n_outputs; i++) {
    if (!em_requires_grad(outputs[i])) {
      em_error("autograd.grad: output %d does not require grad", i + 1);
      goto done;
    }
    grads[i] = grad_outputs && grad_outputs[i] ? em_retain(grad_outputs[i])
                                               : default_grad("autograd.grad", outputs[i]);
    if (grads[i] == NULL || check_grad_shape("autograd.grad", outputs[i], grads[i]) != 0) goto done;
    roots[i] = em_ag_edge_of(outputs[i]);
    if (roots[i] == NULL) goto done;
  }
  for (int i = 0; i < n_inputs; i++) {
    if (!em_requires_grad(inputs[i])) {
      em_error("autograd.grad: input %d does not require grad", i + 1);
      goto done;
    }
    capture[i] = em_ag_edge_of(inputs[i]);
    if (capture[i] == NULL) goto done;
  }
  rc = run_graph(n_outputs, roots, grads, retain_graph || create_graph, create_graph, n_inputs,
                 capture, results);
  for (int i = 0; rc == 0 && i < n_inputs; i++) {
    if (results[i] == NULL && !allow_unused) {
      rc = em_error("autograd.grad: input %d was not used to compute the outputs (pass "
                    "allow_unused=true)", i + 1);
    }
  }
  if (rc != 0)
    for (int i = 0; i < n_inputs; i++) {
      em_release(results[i]);
      results[i] = NULL;
    }
done:
  if (roots)
    for (int i = 0; i < n_outputs + n_inputs; i++) em_node_release(roots[i]);
  if (grads)
    for (int i = 0; i < n_outputs; i++) em_release(grads[i]);
  free(roots);
  free(grads);
  return rc;
}
