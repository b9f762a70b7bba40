/*
 * formulas_index.c: recording and backward formulas of indexing, joining, reordering and
 * sorting. Index tensors are saved as private contiguous int64 copies (callers such as the Lua
 * layer adjust returned index tensors in place).
 */
#include "expr.h"
#include "record.h"

static int save_private(em_node *node, const em_tensor *t) {
  em_tensor *copy = em_clone(t);
  int rc = copy ? em_ag_save(node, copy) : -1;
  em_release(copy);
  return rc;
}

static T input_zeros(const em_node *node, int i, const em_tensor *like) {
  const em_input_edge *e = &node->inputs[i];
  return em_zeros(e->ndim, e->sizes, (em_dtype)like->dtype_id, like->device_id);
}

static int finish(em_tensor *out, em_node *node, int rc) {
  if (rc != 0) {
    em_node_release(node);
    return -1;
  }
  return em_ag_set_output(out, node);
}

/* ---- index_select / gather ---- */

static int index_select_backward(em_node *node, const em_tensor *g, em_tensor **gi) {
  const em_tensor *idx = em_ag_saved(node, 0);
  if (idx == NULL) return -1;
  T z = input_zeros(node, 0, g);
  T r = z ? em_index_add(z, (int)node->ints[0], idx, g, 1.0) : NULL;
  em_release(z);
  return put(node, gi, 0, r);
}

int em_ag_record_index_select(em_tensor *out, const em_tensor *x, int dim, const em_tensor *index) {
  if (!em_dtypes[out->dtype_id].is_float) return 0;
  em_node *node = em_ag_node_new("IndexSelectBackward", index_select_backward, 1, &x);
  if (node == NULL) return -1;
  node->ints[0] = dim;
  return finish(out, node, save_private(node, index));
}

static int gather_backward(em_node *node, const em_tensor *g, em_tensor **gi) {
  const em_tensor *idx = em_ag_saved(node, 0);
  if (idx == NULL) return -1;
  T z = input_zeros(node, 0, g);
  T r = z ? em_scatter_add(z, (int)node->ints[0], idx, g) : NULL;
  em_release(z);
  return put(node, gi, 0, r);
}

int em_ag_record_gather(em_tensor *out, const em_tensor *x, int dim, const em_tensor *index) {
  if (!em_dtypes[out->dtype_id].is_float) return 0;
  em_node *node = em_ag_node_new("GatherBackward", gather_backward, 1, &x);
  if (node == NULL) return -1;
  node->ints[0] = dim;
  return finish(out, node, save_private(node, index));
}

/* ---- scatter, scatter_add (out of place): inputs x and src ---- */

static int scatter_backward(em_node *node, const em_tensor *g, em_tensor **gi) {
  const em_tensor *idx = em_ag_saved(node, 0);
  if (idx == NULL) return -1;
  int dim = (int)node->ints[0], accumulate = (int)node->ints[1];
  T gx = NULL;
  if (needs(node, 0)) {
    if (accumulate) {
      gx = ref(g);
    } else { /* overwritten positions receive nothing */
      T z = em_zeros(idx->ndim, idx->sizes, (em_dtype)g->dtype_id, g->device_id);
      gx = z ? em_scatter(g, dim, idx, z) : NULL;
      em_release(z);
    }
  }
  T gs = needs(node, 1) ? em_gather(g, dim, idx) : NULL;
  return put2(node, gi, gx, gs);
}

int em_ag_record_scatter(em_tensor *out, const em_tensor *x, int dim, const em_tensor *index,
                         const em_tensor *src, int accumulate) {
  if (!em_dtypes[out->dtype_id].is_float) return 0;
  const em_tensor *ins[2] = {x, src};
  em_node *node = em_ag_node_new(accumulate ? "ScatterAddBackward" : "ScatterBackward",
                                 scatter_backward, 2, ins);
  if (node == NULL) return -1;
  node->ints[0] = dim;
  node->ints[1] = accumulate;
  return finish(out, node, save_private(node, index));
}

/* ---- index_add, index_copy, index_fill (out of place): inputs x and src ---- */

static int index_put_backward(em_node *node, const em_tensor *g, em_tensor **gi) {
  const em_tensor *idx = em_ag_saved(node, 0);
  if (idx == NULL) return -1;
  int dim = (int)node->ints[0], kind = (int)node->ints[1]; /* 0 add, 1 copy, 2 fill */
  double alpha = node->scalars[0];
  T gx = NULL;
  if (needs(node, 0)) gx = kind == 0 ? ref(g) : em_index_fill(g, dim, idx, 0.0);
  T gs = NULL;
  if (kind != 2 && needs(node, 1)) {
    gs = em_index_select(g, dim, idx);
    if (kind == 0 && alpha != 1) gs = muls(gs, alpha);
  }
  int rc = put(node, gi, 0, gx);
  if (kind != 2 && put(node, gi, 1, gs) != 0) rc = -1; /* fill has no gs */
  return rc;
}

int em_ag_record_index_put(em_tensor *out, const em_tensor *x, int dim, const em_tensor *index,
                           const em_tensor *src, double alpha, int kind) {
  if (!em_dtypes[out->dtype_id].is_float) return 0;
  static const char *names[] = {"IndexAddBackward", "IndexCopyBackward", "IndexFillBackward"};
  const em_tensor *ins[2] = {x, src};
  em_node *node = em_ag_node_new(names[kind], index_put_backward, kind == 2 ? 1 : 2, ins);
  if (node == NULL) return -1;
  node->ints[0] = dim;
  node->ints[1] = kind;
  node->scalars[0] = alpha;
  return finish(out, node, save_private(node, index));
}

/* ---- cat ---- */

static int cat_backward(em_node *node, const em_tensor *g, em_tensor **gi) {
  int dim = (int)node->ints[0];
  int64_t at = 0;
  for (int i = 0; i < node->n_inputs; i++) {
    const em_input_edge *e = &node->inputs[i];
    bool skipped = e->ndim == 1 && e->sizes[0] == 0 && g->ndim != 1; /* a legacy empty */
    if (skipped) {
      if (put(node, gi, i, input_zeros(node, i, g)) != 0) return -1;
      continue;
    }
    int64_t len = e->sizes[dim];
    if (put(node, gi, i, em_narrow(g, dim, at, len)) != 0) return -1;
    at += len;
  }
  return 0;
}

int em_ag_record_cat(em_tensor *out, int n, em_tensor *const *ts, int dim) {
  if (!em_dtypes[out->dtype_id].is_float) return 0;
  em_node *node = em_ag_node_new("CatBackward", cat_backward, n, (const em_tensor *const *)ts);
  if (node == NULL) return -1;
  node->ints[0] = dim;
  return em_ag_set_output(out, node);
}

/* ---- flip, roll ---- */

static int flip_backward(em_node *node, const em_tensor *g, em_tensor **gi) {
  int dims[EM_MAX_DIMS], n = 0;
  for (int d = 0; d < g->ndim; d++)
    if (node->ints[0] & (1 << d)) dims[n++] = d;
  return put(node, gi, 0, em_flip(g, n, dims));
}

int em_ag_record_flip(em_tensor *out, const em_tensor *x, uint32_t mask) {
  if (!em_dtypes[out->dtype_id].is_float) return 0;
  em_node *node = em_ag_node_new("FlipBackward", flip_backward, 1, &x);
  if (node == NULL) return -1;
  node->ints[0] = mask;
  return em_ag_set_output(out, node);
}

static int roll_backward(em_node *node, const em_tensor *g, em_tensor **gi) {
  int dims[EM_MAX_DIMS];
  int64_t shifts[EM_MAX_DIMS];
  for (int d = 0; d < g->ndim; d++) {
    dims[d] = d;
    shifts[d] = -node->ints[d];
  }
  if (g->ndim == 0) return put(node, gi, 0, ref(g));
  return put(node, gi, 0, em_roll(g, g->ndim, shifts, dims));
}

int em_ag_record_roll(em_tensor *out, const em_tensor *x, const int64_t *shift) {
  if (!em_dtypes[out->dtype_id].is_float) return 0;
  em_node *node = em_ag_node_new("RollBackward", roll_backward, 1, &x);
  if (node == NULL) return -1;
  for (int d = 0; d < x->ndim; d++) node->ints[d] = shift[d];
  return em_ag_set_output(out, node);
}

/* ---- repeat: the gradient sums over the copies, one dimension at a time ---- */

static int repeat_backward(em_node *node, const em_tensor *g, em_tensor **gi) {
  const em_input_edge *e = &node->inputs[0];
  int nd = g->ndim, lead = nd - e->ndim;
  T acc = ref(g);
  /* dims that repeat leading size-1 dims are summed away entirely */
  for (int d = nd - 1; d >= 0 && acc; d--) {
    int64_t r = node->ints[d];
    int64_t s = d < lead ? 1 : e->sizes[d - lead];
    if (r == 1) continue;
    if (acc->ndim + 1 > EM_MAX_DIMS) {
      em_release(acc);
      return em_error("repeat: the gradient of a %d-d repeat is not supported", nd);
    }
    int64_t sizes[EM_MAX_DIMS + 1];
    int k = 0;
    for (int i = 0; i < acc->ndim; i++) {
      if (i == d) {
        sizes[k++] = r;
        sizes[k++] = s;
      } else {
        sizes[k++] = acc->sizes[i];
      }
    }
    T split = em_reshape(acc, acc->ndim + 1, sizes);
    em_release(acc);
    int dims[1] = {d};
    acc = split ? em_reduce(EM_SUM, split, 1, dims, 0) : NULL;
    em_release(split);
  }
  return put(node, gi, 0, acc);
}

int em_ag_record_repeat(em_tensor *out, const em_tensor *x, int ndim, const int64_t *repeats) {
  if (!em_dtypes[out->dtype_id].is_float) return 0;
  em_node *node = em_ag_node_new("RepeatBackward", repeat_backward, 1, &x);
  if (node == NULL) return -1;
  for (int d = 0; d < ndim; d++) node->ints[d] = repeats[d];
  return em_ag_set_output(out, node);
}

/* ---- tril, triu ---- */

static int triangle_backward(em_node *node, const em_tensor *g, em_tensor **gi) {
  int64_t k = node->ints[0];
  return put(node, gi, 0, node->ints[1] ? em_tril(g, k) : em_triu(g, k));
}

int em_ag_record_triangle(em_tensor *out, const em_tensor *x, int64_t k, int lower) {
  if (!em_dtypes[out->dtype_id].is_float) return 0;
  em_node *node = em_ag_node_new(lower ? "TrilBackward" : "TriuBackward", triangle_backward, 1, &x);
  if (node == NULL) return -1;
  node->ints[0] = k;
  node->ints[1] = lower;
  return em_ag_set_output(out, node);
}

/* ---- sort / topk values: the gradient goes back to where each value came from ---- */

static int sort_backward(em_node *node, const em_tensor *g, em_tensor **gi) {
  const em_tensor *idx = em_ag_saved(node, 0);
  if (idx == NULL) return -1;
  T z = input_zeros(node, 0, g);
  T r = z ? em_scatter(z, (int)node->ints[0], idx, g) : NULL;
  em_release(z);
  return put(node, gi, 0, r);
}

int em_ag_record_sort(em_tensor *values, const em_tensor *indices, const em_tensor *x, int dim) {
  if (!em_dtypes[values->dtype_id].is_float) return 0;
  em_node *node = em_ag_node_new("SortBackward", sort_backward, 1, &x);
  if (node == NULL) return -1;
  node->ints[0] = dim;
  return finish(values, node, save_private(node, indices));
}
