/*
 * function.c: custom autograd functions (em_function_apply in ember.h). The caller computed
 * the outputs; this file attaches a node whose backward is the caller's callback.
 *
 * Nodes produce one gradient each in this engine, so a function of one output is one node (the
 * output's grad_fn), and a function of several is a core node plus one small node per output:
 * each output node parks the gradient reaching its output in the shared state (tagged with the
 * backward pass's id, so that a gradient parked by an earlier, failed pass is never used) and
 * passes a dummy scalar to the core node. The engine runs the core node once all the output
 * nodes that lead to it have run; it hands the parked gradients to the callback together.
 */
#include <pthread.h>
#include <stdlib.h>

#include "autograd.h"

struct em_fn_state {
  char *name;                  /* the caller's name, for errors */
  char *label;                 /* "<name>Backward", the grad_fn's name */
  em_function_backward backward;
  void (*release)(void *ctx);
  void *ctx;
  bool dropped;                /* ctx released after a backward without retain_graph */
  int n_inputs, n_outputs;
  int32_t *input_device;       /* per input; -1 for a NULL input (not a tensor) */
  em_tensor **parked;          /* several outputs: the gradient reaching output i in pass... */
  uint64_t *parked_run;        /* ...parked_run[i] */
};

static void drop_ctx(em_fn_state *s) {
  if (s->dropped) return;
  s->dropped = true;
  if (s->release) s->release(s->ctx);
  s->ctx = NULL;
}

void em_ag_function_drop(em_fn_state *s) {
  if (s) drop_ctx(s);
}

void em_ag_function_free(em_fn_state *s) {
  if (s == NULL) return;
  drop_ctx(s);
  if (s->parked)
    for (int i = 0; i < s->n_outputs; i++) em_release(s->parked[i]);
  free(s->parked);
  free(s->parked_run);
  free(s->input_device);
  free(s->name);
  free(s->label);
  free(s);
}

static char *dup_string(const char *a, const char *b) {
  size_t na = strlen(a), nb = strlen(b);
  char *r = malloc(na + nb + 1);
  if (r) {
    memcpy(r, a, na);
    memcpy(r + na, b, nb + 1);
  }
  return r;
}

/* Checks the gradient the callback gave for input i against the input; -1 with an error. */
static int check_grad_input(const em_fn_state *s, const em_node *node, int i, const em_tensor *g) {
  const em_input_edge *e = &node->inputs[i];
  if (s->input_device[i] < 0)
    return em_error("%s: backward returned a gradient for input %d, which is not a tensor",
                    s->name, i + 1);
  if (g->ndim != e->ndim || memcmp(g->sizes, e->sizes, sizeof(int64_t) * (size_t)e->ndim) != 0) {
    char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF];
    return em_error("%s: backward returned a gradient of shape %s for input %d, expected the "
                    "input's shape %s", s->name, em_shape_str(a, sizeof a, g->ndim, g->sizes),
                    i + 1, em_shape_str(b, sizeof b, e->ndim, e->sizes));
  }
  if (g->dtype_id != e->dtype_id)
    return em_error("%s: backward returned a %s gradient for input %d, expected the input's "
                    "dtype %s", s->name, em_dtypes[g->dtype_id].name, i + 1,
                    em_dtypes[e->dtype_id].name);
  if (g->device_id != s->input_device[i])
    return em_error("%s: backward returned a gradient on %s for input %d, expected the input's "
                    "device %s", s->name, em_device_name(g->device_id), i + 1,
                    em_device_name(s->input_device[i]));
  return 0;
}

/* The core node: calls the callback with every output's gradient, then checks its results. */
static int function_backward(em_node *node, const em_tensor *grad, em_tensor **grad_inputs) {
  em_fn_state *s = node->fn;
  if (s->dropped)
    return em_error("%s: trying to backward through the graph a second time (the function's "
                    "context was freed by the first backward); pass retain_graph=true to the "
                    "first backward", s->name);
  em_tensor *single[1] = {(em_tensor *)grad};
  em_tensor **grad_outputs = single;
  if (s->parked) {
    uint64_t run = em_ag_run_id();
    for (int i = 0; i < s->n_outputs; i++)
      if (s->parked[i] && s->parked_run[i] != run) {
        em_release(s->parked[i]);
        s->parked[i] = NULL;
      }
    grad_outputs = s->parked;
  }
  em_clear_error();
  int rc = s->backward(s->ctx, s->n_outputs, grad_outputs, s->n_inputs, grad_inputs);
  if (s->parked)
    for (int i = 0; i < s->n_outputs; i++) {
      em_release(s->parked[i]);
      s->parked[i] = NULL;
    }
  if (rc != 0) {
    if (em_last_error()[0] == '\0')
      em_error("%s: backward failed (it returned %d without setting an error)", s->name, rc);
    else
      em_error_prefix(s->name);
    return -1;
  }
  for (int i = 0; i < s->n_inputs; i++) {
    if (grad_inputs[i] == NULL) continue;
    if (check_grad_input(s, node, i, grad_inputs[i]) != 0) return -1;
    if (node->inputs[i].node == NULL) { /* the input needs no gradient: drop it */
      em_release(grad_inputs[i]);
      grad_inputs[i] = NULL;
    }
  }
  return 0;
}

/* An output node (several outputs): parks the gradient, passes a dummy to the core node. */
static int output_backward(em_node *node, const em_tensor *grad, em_tensor **grad_inputs) {
  em_fn_state *s = node->inputs[0].node->fn;
  int i = (int)node->ints[0];
  em_tensor *dummy = em_scalar_tensor(0.0, EM_FLOAT32, EM_CPU, 0);
  if (dummy == NULL) return -1;
  em_release(s->parked[i]);
  s->parked[i] = em_retain((em_tensor *)grad);
  s->parked_run[i] = em_ag_run_id();
  grad_inputs[0] = dummy;
  return 0;
}

static bool differentiable(const em_tensor *t) {
  return t != NULL && em_dtypes[t->dtype_id].is_float;
}

static int check_args(const char *name, int n_inputs, em_tensor *const *inputs, int n_outputs,
                      em_tensor *const *outputs, em_function_backward backward) {
  if (backward == NULL) return em_error("%s: expected a backward callback, got NULL", name);
  if (n_inputs < 0 || n_outputs < 1 || (n_inputs > 0 && inputs == NULL) || outputs == NULL)
    return em_error("%s: expected at least one output and a count of inputs >= 0, got %d "
                    "inputs and %d outputs", name, n_inputs, n_outputs);
  for (int i = 0; i < n_outputs; i++) {
    const em_tensor *o = outputs[i];
    if (o == NULL) continue;
    for (int j = 0; j < n_inputs; j++)
      if (inputs[j] == o)
        return em_error("%s: output %d is input %d itself; return a detached view of it "
                        "(detach()) instead", name, i + 1, j + 1);
    for (int j = 0; j < i; j++)
      if (outputs[j] == o) return em_error("%s: outputs %d and %d are the same tensor", name,
                                           j + 1, i + 1);
    if (o->grad_meta && o->grad_meta->grad_fn == NULL && o->grad_meta->requires_grad)
      return em_error("%s: output %d is a leaf tensor that requires grad; outputs must be "
                      "computed by the function", name, i + 1);
  }
  return 0;
}

static em_fn_state *state_new(const char *name, int n_inputs, em_tensor *const *inputs,
                              int n_outputs, em_function_backward backward) {
  em_fn_state *s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  s->name = dup_string(name, "");
  s->label = dup_string(name, "Backward");
  s->input_device = malloc(sizeof(int32_t) * (size_t)(n_inputs ? n_inputs : 1));
  if (n_outputs > 1) {
    s->parked = calloc((size_t)n_outputs, sizeof *s->parked);
    s->parked_run = calloc((size_t)n_outputs, sizeof *s->parked_run);
  }
  if (!s->name || !s->label || !s->input_device || (n_outputs > 1 && (!s->parked || !s->parked_run))) {
    s->dropped = true; /* nothing to release yet: the caller does that */
    em_ag_function_free(s);
    return NULL;
  }
  s->backward = backward;
  s->n_inputs = n_inputs;
  s->n_outputs = n_outputs;
  for (int i = 0; i < n_inputs; i++) s->input_device[i] = inputs[i] ? inputs[i]->device_id : -1;
  return s;
}

int em_function_apply(const char *name, int n_inputs, em_tensor *const *inputs, int n_outputs,
                      em_tensor *const *outputs, em_function_backward backward,
                      void (*release)(void *ctx), void *ctx) {
  if (name == NULL) name = "function";
  bool any_output = false;
  for (int i = 0; outputs != NULL && i < n_outputs; i++) any_output |= differentiable(outputs[i]);
  if (check_args(name, n_inputs, inputs, n_outputs, outputs, backward) != 0) goto fail;
  if (!any_output || !em_ag_should_record(n_inputs, (const em_tensor *const *)inputs)) {
    if (release) release(ctx);
    return 0;
  }
  em_fn_state *s = state_new(name, n_inputs, inputs, n_outputs, backward);
  if (s == NULL) {
    em_error_kind_set(EM_ERR_OOM, "out of memory on cpu: %s: autograd function", name);
    goto fail;
  }
  s->release = release;
  s->ctx = ctx;
  em_node *core = em_ag_node_new(s->label, function_backward, n_inputs, (const em_tensor *const *)inputs);
  if (core == NULL) {
    em_ag_function_free(s);
    return -1;
  }
  core->fn = s; /* from here on, the node owns ctx */
  if (n_outputs == 1) return em_ag_set_output(outputs[0], core);
  int rc = 0;
  for (int i = 0; rc == 0 && i < n_outputs; i++) {
    if (!differentiable(outputs[i])) continue;
    em_node *out = em_ag_node_alloc(s->label, output_backward, 1);
    if (out == NULL) {
      rc = -1;
      break;
    }
    em_node_retain(core);
    out->inputs[0].node = core;
    out->inputs[0].dtype_id = EM_FLOAT32;
    out->ints[0] = i;
    out->n_ints = 1;
    rc = em_ag_set_output(outputs[i], out);
  }
  em_node_release(core);
  return rc;
fail:
  if (release) release(ctx);
  return -1;
}

/* ---- deferred release ---- */

static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static void **queue;
static int queue_count, queue_cap;

void em_function_release_later(void *ctx) {
  pthread_mutex_lock(&queue_lock);
  if (queue_count == queue_cap) {
    int cap = queue_cap ? queue_cap * 2 : 64;
    void **bigger = realloc(queue, (size_t)cap * sizeof *bigger);
    if (bigger == NULL) { /* the context leaks: nothing better to do without memory */
      pthread_mutex_unlock(&queue_lock);
      return;
    }
    queue = bigger;
    queue_cap = cap;
  }
  queue[queue_count++] = ctx;
  pthread_mutex_unlock(&queue_lock);
}

int em_function_take_released(void **ctxs, int cap) {
  EM_NOT_NULL(-1, ctxs);
  pthread_mutex_lock(&queue_lock);
  int n = queue_count < cap ? queue_count : cap;
  if (n > 0) {
    memcpy(ctxs, queue + (queue_count - n), (size_t)n * sizeof *ctxs);
    queue_count -= n;
  }
  pthread_mutex_unlock(&queue_lock);
  return n > 0 ? n : 0;
}
