/*
 * graph.c: autograd metadata on tensors, nodes, saved tensors, hooks and grad mode. The engine
 * that walks the graph is engine.c; the backward formulas live in formulas_*.c.
 */
#include <stdlib.h>

#include "autograd.h"

static _Thread_local __attribute__((tls_model("initial-exec"))) bool grad_disabled;

int em_grad_enabled(void) { return !grad_disabled; }

int em_set_grad_enabled(int enabled) {
  int previous = !grad_disabled;
  grad_disabled = !enabled;
  return previous;
}

/* Created once even when threads race for it (sync.c says which tensors threads share). */
static em_grad_meta *meta_of(em_tensor *t) {
  em_grad_meta *m = __atomic_load_n(&t->grad_meta, __ATOMIC_ACQUIRE);
  if (m != NULL) return m;
  m = calloc(1, sizeof *m);
  if (m == NULL) {
    em_error_kind_set(EM_ERR_OOM, "out of memory on cpu: autograd metadata");
    return NULL;
  }
  em_grad_meta *expected = NULL;
  if (!__atomic_compare_exchange_n(&t->grad_meta, &expected, m, false, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE)) {
    free(m); /* another thread's won */
    m = expected;
  }
  return m;
}

int em_requires_grad(const em_tensor *t) {
  const em_grad_meta *m = t ? t->grad_meta : NULL;
  return m != NULL && (m->requires_grad || m->grad_fn != NULL);
}

int em_is_leaf(const em_tensor *t) { return t->grad_meta == NULL || t->grad_meta->grad_fn == NULL; }

int em_set_requires_grad(em_tensor *t, int requires_grad) {
  if (t == NULL) return em_error("requires_grad_: expected a tensor, got NULL");
  if (!em_is_leaf(t)) {
    if (requires_grad) return 0;
    return em_error("requires_grad_: only leaf tensors can stop requiring grad; use detach()");
  }
  if (requires_grad && !em_dtypes[t->dtype_id].is_float)
    return em_error("requires_grad_: only floating point tensors can require grad, got %s",
                    em_dtypes[t->dtype_id].name);
  if (!requires_grad && t->grad_meta == NULL) return 0;
  em_grad_meta *m = meta_of(t);
  if (m == NULL) return -1;
  m->requires_grad = requires_grad != 0;
  return 0;
}

em_tensor *em_grad(const em_tensor *t) {
  if (t == NULL || t->grad_meta == NULL) return NULL;
  em_ag_leaf_lock(t); /* a backward on another thread may be accumulating into it */
  em_tensor *g = em_retain(t->grad_meta->grad);
  em_ag_leaf_unlock(t);
  return g;
}

int em_set_grad(em_tensor *t, const em_tensor *grad) {
  if (t == NULL) return em_error("grad: expected a tensor, got NULL");
  if (grad != NULL) {
    if (grad->device_id != t->device_id || grad->dtype_id != t->dtype_id || grad->ndim != t->ndim ||
        memcmp(grad->sizes, t->sizes, sizeof(int64_t) * (size_t)t->ndim) != 0) {
      char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF];
      return em_error("grad: expected a %s tensor of shape %s on %s, got %s %s on %s",
                      em_dtypes[t->dtype_id].name, em_shape_str(a, sizeof a, t->ndim, t->sizes),
                      em_device_name(t->device_id), em_dtypes[grad->dtype_id].name,
                      em_shape_str(b, sizeof b, grad->ndim, grad->sizes),
                      em_device_name(grad->device_id));
    }
  }
  if (grad == NULL && t->grad_meta == NULL) return 0;
  em_grad_meta *m = meta_of(t);
  if (m == NULL) return -1;
  em_ag_leaf_lock(t);
  em_tensor *old = m->grad;
  m->grad = grad ? em_retain((em_tensor *)grad) : NULL;
  em_ag_leaf_unlock(t);
  em_release(old);
  return 0;
}

int em_retain_grad(em_tensor *t) {
  if (t == NULL) return em_error("retain_grad: expected a tensor, got NULL");
  if (!em_requires_grad(t))
    return em_error("retain_grad: the tensor does not require grad");
  em_grad_meta *m = t->grad_meta;
  if (m->grad_fn == NULL) return 0; /* leaves keep their gradient anyway */
  m->retains_grad = true;
  m->grad_fn->retained = m;
  return 0;
}

const char *em_grad_fn_name(const em_tensor *t) {
  if (t == NULL || t->grad_meta == NULL || t->grad_meta->grad_fn == NULL) return NULL;
  return t->grad_meta->grad_fn->name;
}

em_tensor *em_detach(const em_tensor *t) {
  if (t == NULL) return em_error_null("detach: expected a tensor, got NULL");
  return em_tensor_view_of(t, t->ndim, t->sizes, t->strides, t->offset);
}

int em_detach_(em_tensor *t) {
  if (t == NULL) return em_error("detach_: expected a tensor, got NULL");
  if (t->grad_meta && t->grad_meta->is_view)
    return em_error("detach_: cannot detach a view in place; use detach()");
  em_grad_meta_free(t->grad_meta);
  t->grad_meta = NULL;
  return 0;
}

/* ---- hooks ---- */

static void hooks_free(em_hooks *h) {
  free(h->items);
  memset(h, 0, sizeof *h);
}

static em_hooks *hooks_of(em_tensor *t) {
  em_grad_meta *m = t->grad_meta;
  return m->grad_fn ? &m->grad_fn->hooks : &m->hooks;
}

int em_register_hook(em_tensor *t, em_grad_hook hook, void *userdata) {
  if (t == NULL || hook == NULL) return em_error("register_hook: expected a tensor and a hook");
  if (!em_requires_grad(t))
    return em_error("register_hook: cannot register a hook on a tensor that does not require grad");
  em_ag_leaf_lock(t); /* a backward on another thread may be reading a leaf's hooks */
  em_hooks *h = hooks_of(t);
  if (h->count == h->cap) {
    int cap = h->cap ? h->cap * 2 : 4;
    em_hook *items = realloc(h->items, (size_t)cap * sizeof *items);
    if (items == NULL) {
      em_ag_leaf_unlock(t);
      return em_error_kind_set(EM_ERR_OOM, "out of memory on cpu: hooks");
    }
    h->items = items;
    h->cap = cap;
  }
  int id = ++h->next_id;
  h->items[h->count++] = (em_hook){id, hook, userdata};
  em_ag_leaf_unlock(t);
  return id;
}

int em_remove_hook(em_tensor *t, int hook_id) {
  if (t == NULL || t->grad_meta == NULL) return em_error("remove_hook: no hooks on this tensor");
  em_ag_leaf_lock(t);
  em_hooks *h = hooks_of(t);
  for (int i = 0; i < h->count; i++) {
    if (h->items[i].id != hook_id) continue;
    memmove(&h->items[i], &h->items[i + 1], (size_t)(h->count - i - 1) * sizeof h->items[0]);
    h->count--;
    em_ag_leaf_unlock(t);
    return 0;
  }
  em_ag_leaf_unlock(t);
  return em_error("remove_hook: no hook with id %d", hook_id);
}

em_tensor *em_ag_run_hooks(em_hooks *hooks, em_tensor *grad) {
  em_tensor *g = em_retain(grad);
  for (int i = 0; i < hooks->count; i++) {
    em_clear_error();
    em_tensor *replaced = hooks->items[i].fn(g, hooks->items[i].userdata);
    if (replaced == NULL && em_last_error()[0] != '\0') {
      em_release(g);
      em_error_prefix("hook");
      return NULL;
    }
    if (replaced) {
      em_release(g);
      g = replaced;
    }
  }
  return g;
}

/* ---- nodes ---- */

void em_node_retain(em_node *node) {
  if (node) __atomic_add_fetch(&node->refcount, 1, __ATOMIC_RELAXED);
}

static void release_saved(em_node *node) {
  for (int i = 0; i < node->n_saved; i++) {
    em_release(node->saved[i].t);
    node->saved[i].t = NULL;
  }
}

void em_node_release(em_node *node) {
  if (node == NULL || __atomic_sub_fetch(&node->refcount, 1, __ATOMIC_ACQ_REL) != 0) return;
  release_saved(node);
  for (int i = 0; i < node->n_inputs; i++) em_node_release(node->inputs[i].node);
  if (node->leaf) {
    em_ag_accumulator_forget(node);
    em_release(node->leaf);
  }
  hooks_free(&node->hooks);
  em_ag_function_free(node->fn);
  free(node);
}

em_node *em_ag_node_alloc(const char *name, em_backward_fn backward, int n_inputs) {
  em_node *node = calloc(1, sizeof *node + (size_t)n_inputs * sizeof node->inputs[0]);
  if (node == NULL) {
    em_error_kind_set(EM_ERR_OOM, "out of memory on cpu: autograd node");
    return NULL;
  }
  node->refcount = 1;
  node->name = name;
  node->backward = backward;
  node->n_inputs = n_inputs;
  return node;
}

em_node *em_ag_edge_of(const em_tensor *t) {
  em_grad_meta *m = t->grad_meta;
  if (m->grad_fn) {
    em_node_retain(m->grad_fn);
    return m->grad_fn;
  }
  return em_ag_accumulator_of(m, t); /* shared by every graph using the leaf (sync.c) */
}

bool em_ag_should_record(int n, const em_tensor *const *ts) {
  /* Plain tensors have no metadata: that test alone settles the common case. */
  bool any_meta = false;
  for (int i = 0; i < n; i++) any_meta |= ts[i] != NULL && ts[i]->grad_meta != NULL;
  if (!any_meta || grad_disabled) return false;
  for (int i = 0; i < n; i++)
    if (ts[i] && em_requires_grad(ts[i])) return true;
  return false;
}

em_node *em_ag_node_new(const char *name, em_backward_fn backward, int n,
                        const em_tensor *const *inputs) {
  em_node *node = em_ag_node_alloc(name, backward, n);
  if (node == NULL) return NULL;
  for (int i = 0; i < n; i++) {
    const em_tensor *t = inputs[i];
    em_input_edge *e = &node->inputs[i];
    if (t == NULL) continue;
    e->dtype_id = t->dtype_id;
    e->ndim = t->ndim;
    memcpy(e->sizes, t->sizes, sizeof(int64_t) * (size_t)t->ndim);
    if (!em_requires_grad(t)) continue;
    e->node = em_ag_edge_of(t);
    if (e->node == NULL) {
      em_node_release(node);
      return NULL;
    }
  }
  return node;
}

int em_ag_save(em_node *node, const em_tensor *t) {
  if (node->n_saved == EM_NODE_MAX_SAVED) return em_error("autograd: too many saved tensors");
  em_tensor *d = em_tensor_view_of(t, t->ndim, t->sizes, t->strides, t->offset);
  if (d == NULL) return -1;
  /* An input keeps its place in the graph, so formulas run with create_graph differentiate
   * through it (double backward). The node's own output is saved before it joins the graph,
   * so it stays detached: holding its grad_fn would make a cycle. */
  if (em_requires_grad(t)) {
    d->grad_meta = calloc(1, sizeof *d->grad_meta);
    if (d->grad_meta == NULL || (d->grad_meta->grad_fn = em_ag_edge_of(t)) == NULL) {
      em_release(d);
      return em_error_kind_set(EM_ERR_OOM, "out of memory on cpu: saved tensor");
    }
  }
  node->saved[node->n_saved].t = d;
  node->saved[node->n_saved].version = em_storage_version(t);
  node->n_saved++;
  return 0;
}

const em_tensor *em_ag_saved(em_node *node, int i) {
  if (node->released)
    return em_error_null("backward: trying to backward through the graph a second time (or to "
                         "use saved tensors after they were freed); pass retain_graph=true to "
                         "the first backward");
  em_saved *s = &node->saved[i];
  int64_t version = em_storage_version(s->t);
  if (version != s->version)
    return em_error_null("backward: a tensor that %s needs was modified by an in-place "
                         "operation (its version is %lld, expected %lld)", node->name,
                         (long long)version, (long long)s->version);
  return s->t;
}

static int set_output(em_tensor *out, em_node *node, bool view) {
  em_grad_meta *m = meta_of(out);
  if (m == NULL) {
    em_node_release(node);
    return -1;
  }
  em_node_release(m->grad_fn);
  m->grad_fn = node;
  m->requires_grad = false;
  m->is_view = view;
  return 0;
}

int em_ag_set_output(em_tensor *out, em_node *node) { return set_output(out, node, false); }
int em_ag_set_view_output(em_tensor *out, em_node *node) { return set_output(out, node, true); }

int em_ag_check_inplace(const char *fn, const em_tensor *self) {
  if (grad_disabled || self->grad_meta == NULL) return 0;
  const em_grad_meta *m = self->grad_meta;
  if (m->grad_fn == NULL && m->requires_grad)
    return em_error("%s: a leaf tensor that requires grad cannot be modified in place (use "
                    "ember.no_grad, or clone it)", fn);
  if (m->is_view && m->grad_fn)
    return em_error("%s: in-place operations on a view of a tensor in the autograd graph are "
                    "not supported; clone() the view first", fn);
  return 0;
}

void em_grad_meta_free(em_grad_meta *meta) {
  if (meta == NULL) return;
  if (meta->grad_fn && meta->grad_fn->retained == meta) meta->grad_fn->retained = NULL;
  em_node_release(meta->grad_fn);
  em_release(meta->grad);
  hooks_free(&meta->hooks);
  free(meta);
}
