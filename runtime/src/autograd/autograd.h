/*
 * autograd.h: the tape's data structures, shared by the engine, the per-family backward
 * formulas and the op definitions that record.
 *
 * Ownership: a non-leaf tensor holds its grad_fn node; a node holds the nodes of its inputs
 * (edges) and detached copies of the tensors it saved. A leaf that requires grad points weakly
 * at its AccumulateGrad node, which holds the leaf. No cycles, so refcounts free everything.
 */
#ifndef EMBER_AUTOGRAD_H
#define EMBER_AUTOGRAD_H

#include "../internal.h"

typedef struct em_node em_node;
typedef struct em_fn_state em_fn_state;

/* Computes the gradient of each input from the gradient of the node's output. grad_inputs[i]
 * gets a new reference, or stays NULL when input i needs none. Runs under no_grad unless the
 * caller asked for create_graph. */
typedef int (*em_backward_fn)(em_node *node, const em_tensor *grad, em_tensor **grad_inputs);

typedef struct em_hook {
  int id;
  em_grad_hook fn;
  void *userdata;
} em_hook;

typedef struct em_hooks {
  em_hook *items;
  int count, cap, next_id;
} em_hooks;

typedef struct em_input_edge {
  em_node *node;               /* the input's grad_fn or AccumulateGrad; NULL: no grad needed */
  int32_t dtype_id, ndim;      /* the input's dtype and shape, to shape its gradient */
  int64_t sizes[EM_MAX_DIMS];
} em_input_edge;

enum { EM_NODE_MAX_SAVED = 6 }; /* attention: q, k, v, out, lse, mask */

typedef struct em_saved {
  em_tensor *t;                /* a header sharing storage, without autograd metadata */
  int64_t version;             /* the storage version when saved */
} em_saved;

struct em_node {
  int32_t refcount;
  const char *name;
  em_backward_fn backward;
  bool released;               /* saved tensors freed after a backward without retain_graph */
  int n_saved;
  em_saved saved[EM_NODE_MAX_SAVED];
  /* Parameters the backward needs: their meaning is the formula's. */
  double scalars[4];
  int64_t ints[2 * EM_MAX_DIMS];
  int n_ints;
  /* AccumulateGrad only: the leaf, held. */
  em_tensor *leaf;
  /* Custom functions only (function.c): the caller's callback and context, owned. */
  em_fn_state *fn;
  /* Hooks and retain_grad of the non-leaf tensor this node produced. */
  em_hooks hooks;
  em_grad_meta *retained;      /* weak: the output's metadata when it asked to retain grad */
  int n_inputs;
  em_input_edge inputs[];
};

struct em_grad_meta {
  bool requires_grad;          /* leaves */
  bool retains_grad;
  bool is_view;                /* a view of a tensor in the graph: no in-place ops */
  em_node *grad_fn;            /* non-leaves: held */
  em_node *acc;                /* leaves: weak, cleared when the node goes */
  em_tensor *grad;             /* held */
  em_hooks hooks;              /* leaves' hooks */
};

/* ---- recording (graph.c) ---- */
/* True when grad mode is on and one of the n tensors (NULLs allowed) requires grad. */
bool em_ag_should_record(int n, const em_tensor *const *ts);
/* A node with edges to the n inputs' nodes; NULL with an error on failure. */
em_node *em_ag_node_new(const char *name, em_backward_fn backward, int n,
                        const em_tensor *const *inputs);
/* Saves t (detached, with its version) in the next slot; -1 on failure. */
int em_ag_save(em_node *node, const em_tensor *t);
/* Makes node the grad_fn of out; consumes the caller's node reference. -1 on failure (the node
 * is released). */
int em_ag_set_output(em_tensor *out, em_node *node);
/* Same for a view: also marks out as a view, so in-place ops on it are refused. */
int em_ag_set_view_output(em_tensor *out, em_node *node);
/* Refuses in-place ops that autograd cannot follow (leaf requiring grad, view in the graph). */
int em_ag_check_inplace(const char *fn, const em_tensor *self);
void em_node_retain(em_node *node);
void em_node_release(em_node *node);
/* The saved tensor i after checking its version; NULL with an error when it was modified. */
const em_tensor *em_ag_saved(em_node *node, int i);
/* Frees t's autograd metadata (tensor.c calls it when t goes). */
void em_grad_meta_free(em_grad_meta *meta);
/* The node a gradient for t flows into (a new reference): its grad_fn, or its AccumulateGrad
 * (created on demand). */
em_node *em_ag_edge_of(const em_tensor *t);
/* Runs t's hooks on grad; returns a new reference to the (maybe replaced) gradient. */
em_tensor *em_ag_run_hooks(em_hooks *hooks, em_tensor *grad);

/* ---- helpers for formulas (util.c) ---- */
/* Reduces a broadcast gradient to the shape and dtype of input edge i (new reference). */
em_tensor *em_ag_shape_to_input(const em_node *node, int i, em_tensor *grad);
/* Convenience for the one-line formulas: releases the temporaries it is given. */
void em_ag_release_all(int n, em_tensor **ts);

/* retain_grad: adds grad into a non-leaf tensor's .grad. */
int em_ag_retain_into(em_grad_meta *meta, const em_tensor *grad);

/* A bare node with room for n_inputs edges, all empty (graph.c). */
em_node *em_ag_node_alloc(const char *name, em_backward_fn backward, int n_inputs);

/* ---- custom functions (function.c) ---- */
/* Frees a custom function's state, calling its release(ctx) if still held. */
void em_ag_function_free(em_fn_state *state);
/* After a backward without retain_graph: releases the context now (a later backward through
 * the node is then an error), as built-in nodes free their saved tensors. */
void em_ag_function_drop(em_fn_state *state);
/* An id for the backward pass running on this thread (engine.c); 0 outside backward. Custom
 * functions with several outputs use it to tell this pass's gradients from stale ones. */
uint64_t em_ag_run_id(void);

/* ---- threads (sync.c) ---- */
/* A new reference to the leaf's AccumulateGrad node, made on first use; NULL on failure. */
em_node *em_ag_accumulator_of(em_grad_meta *m, const em_tensor *leaf);
/* Clears the leaf's weak pointer to acc (acc's last reference is gone). */
void em_ag_accumulator_forget(em_node *acc);
/* Serializes .grad and hook-list access on one leaf (a striped mutex). */
void em_ag_leaf_lock(const em_tensor *leaf);
void em_ag_leaf_unlock(const em_tensor *leaf);
/* A copy of a leaf's hook list taken under its lock (free copy->items); -1 on failure. */
int em_ag_hooks_snapshot(const em_tensor *leaf, const em_hooks *hooks, em_hooks *copy);

/* The AccumulateGrad backward (engine.c uses it to spot leaves). */
int em_ag_accumulate(em_node *node, const em_tensor *grad, em_tensor **grad_inputs);

#endif
