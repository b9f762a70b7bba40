/*
 * sync.c: what makes autograd safe when independent graphs on different threads share leaf
 * tensors (docs/embedding.md, "Threads").
 *
 * Two things on a leaf are shared between those graphs:
 *  - its AccumulateGrad node. The leaf points at it weakly (the node holds the leaf; a strong
 *    pointer back would be a cycle), every graph using the leaf holds it, and the last graph to
 *    drop it frees it. Finding it (em_ag_edge_of) and forgetting it (its last release) race: a
 *    thread may find the node after another dropped the last reference and before it cleared the
 *    pointer. One mutex orders the two, and a node found at count zero is treated as gone (a
 *    new one is made), as a weak pointer's lock() does in C++. The critical sections are a few
 *    instructions and never call out, so one lock for all leaves is enough.
 *  - its .grad and its hooks. Gradient accumulation into .grad is serialized per leaf, as
 *    PyTorch does: a mutex chosen by the leaf's address among LEAF_STRIPES, so that two leaves
 *    rarely wait for each other and no mutex lives in (or must be destroyed with) a tensor.
 *    Hook lists are read and changed under the same mutex; hooks themselves run outside it (a
 *    hook may call ops, or backward).
 * Lock order: a leaf's stripe may be held while the AccumulateGrad lock is taken (an op inside
 * the accumulation records), never the reverse.
 */
#include <pthread.h>
#include <stdlib.h>

#include "autograd.h"

static pthread_mutex_t acc_lock = PTHREAD_MUTEX_INITIALIZER;

enum { LEAF_STRIPES = 64 };
static pthread_mutex_t leaf_locks[LEAF_STRIPES] = {
#define L4 PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, \
           PTHREAD_MUTEX_INITIALIZER
#define L16 L4, L4, L4, L4
  L16, L16, L16, L16
#undef L16
#undef L4
};

static pthread_mutex_t *stripe_of(const em_tensor *leaf) {
  uintptr_t p = (uintptr_t)leaf;
  return &leaf_locks[(p >> 6 ^ p >> 12) % LEAF_STRIPES]; /* headers are larger than 64 bytes */
}

void em_ag_leaf_lock(const em_tensor *leaf) { pthread_mutex_lock(stripe_of(leaf)); }
void em_ag_leaf_unlock(const em_tensor *leaf) { pthread_mutex_unlock(stripe_of(leaf)); }

/* A new reference to node, unless its count already reached zero (it is being freed). */
static bool retain_if_alive(em_node *node) {
  int32_t n = __atomic_load_n(&node->refcount, __ATOMIC_RELAXED);
  while (n > 0)
    if (__atomic_compare_exchange_n(&node->refcount, &n, n + 1, true, __ATOMIC_ACQ_REL,
                                    __ATOMIC_RELAXED))
      return true;
  return false;
}

em_node *em_ag_accumulator_of(em_grad_meta *m, const em_tensor *leaf) {
  pthread_mutex_lock(&acc_lock);
  em_node *acc = m->acc;
  if (acc != NULL && !retain_if_alive(acc)) acc = NULL;
  if (acc == NULL) {
    acc = em_ag_node_alloc("AccumulateGrad", em_ag_accumulate, 0);
    if (acc != NULL) {
      acc->leaf = em_retain((em_tensor *)leaf);
      m->acc = acc; /* weak: the caller takes this first reference */
    }
  }
  pthread_mutex_unlock(&acc_lock);
  return acc;
}

void em_ag_accumulator_forget(em_node *acc) {
  pthread_mutex_lock(&acc_lock);
  em_grad_meta *m = acc->leaf->grad_meta;
  if (m != NULL && m->acc == acc) m->acc = NULL;
  pthread_mutex_unlock(&acc_lock);
}

int em_ag_hooks_snapshot(const em_tensor *leaf, const em_hooks *hooks, em_hooks *copy) {
  *copy = (em_hooks){0};
  em_ag_leaf_lock(leaf);
  int n = hooks->count;
  if (n > 0) {
    copy->items = malloc((size_t)n * sizeof *copy->items);
    if (copy->items != NULL) {
      memcpy(copy->items, hooks->items, (size_t)n * sizeof *copy->items);
      copy->count = copy->cap = n;
    }
  }
  em_ag_leaf_unlock(leaf);
  if (n > 0 && copy->items == NULL)
    return em_error_kind_set(EM_ERR_OOM, "out of memory on cpu: hooks");
  return 0;
}
