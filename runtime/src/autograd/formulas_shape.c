/*
 * formulas_shape.c: recording for views, copies and casts, and in-place ops.
 *
 * A view's backward maps the gradient back onto the input's shape: reshape for view/reshape,
 * the inverse permutation for permute/transpose, a sum for expand, and for narrow, select,
 * slice and unfold an embedding into zeros.
 */
#include "../backend.h"
#include "expr.h"
#include "record.h"

static T embed(em_node *node, const em_tensor *g) {
  const em_input_edge *e = &node->inputs[0];
  T z = em_zeros(e->ndim, e->sizes, (em_dtype)g->dtype_id, g->device_id);
  if (z == NULL) return NULL;
  const int64_t *p = node->ints;
  T v = NULL;
  switch ((em_view_kind)node->ints[15]) {
  case EM_VIEW_NARROW: v = em_narrow(z, (int)p[0], p[1], p[2]); break;
  case EM_VIEW_SELECT: v = em_select(z, (int)p[0], p[1]); break;
  case EM_VIEW_SLICE: v = em_slice(z, (int)p[0], p[1], p[2], p[3]); break;
  default: break;
  }
  /* Not recorded: double backward through a view embedding is not supported. */
  int previous = em_set_grad_enabled(0);
  int rc = v ? em_copy_(v, g) : -1;
  em_set_grad_enabled(previous);
  if (rc != 0) {
    em_release(v);
    em_release(z);
    return NULL;
  }
  em_release(v);
  return z;
}

/* unfold's windows may overlap: add each window's gradient in turn. */
static T unfold_backward(em_node *node, const em_tensor *g) {
  const em_input_edge *e = &node->inputs[0];
  int dim = (int)node->ints[0];
  int64_t size = node->ints[1], step = node->ints[2];
  T z = em_zeros(e->ndim, e->sizes, (em_dtype)g->dtype_id, g->device_id);
  if (z == NULL) return NULL;
  int64_t windows = g->sizes[dim];
  for (int64_t w = 0; w < windows; w++) {
    T gw = em_select(g, dim, w);                  /* window w, its elements last */
    T moved = gw ? em_unsqueeze(gw, dim) : NULL;  /* put them back along dim */
    T t = moved ? em_transpose(moved, dim, moved->ndim - 1) : NULL;
    T sq = t ? em_squeeze(t, -1) : NULL;
    T dst = em_narrow(z, dim, w * step, size);
    int rc = (sq && dst) ? em_binary_(EM_ADD, dst, sq) : -1;
    em_release(gw);
    em_release(moved);
    em_release(t);
    em_release(sq);
    em_release(dst);
    if (rc != 0) {
      em_release(z);
      return NULL;
    }
  }
  return z;
}

static int view_backward(em_node *node, const em_tensor *g, em_tensor **gi) {
  const em_input_edge *e = &node->inputs[0];
  em_view_kind kind = (em_view_kind)node->ints[15];
  T r = NULL;
  switch (kind) {
  case EM_VIEW_RESHAPE: r = em_reshape(g, e->ndim, e->sizes); break;
  case EM_VIEW_PERMUTE: {
    int inv[EM_MAX_DIMS];
    for (int i = 0; i < g->ndim; i++) inv[node->ints[i]] = i;
    T p = em_permute(g, g->ndim, inv);
    r = p;
    break;
  }
  case EM_VIEW_EXPAND: r = ref(g); break; /* put() sums over the expanded dims */
  case EM_VIEW_IDENTITY: r = ref(g); break;
  case EM_VIEW_UNFOLD: r = unfold_backward(node, g); break;
  default: r = embed(node, g); break;
  }
  return put(node, gi, 0, r);
}

static const char *view_names[] = {
  "ViewBackward", "PermuteBackward", "ExpandBackward", "NarrowBackward", "SelectBackward",
  "SliceBackward", "UnfoldBackward", "CopyBackward",
};

em_tensor *em_ag_view(const em_tensor *x, em_tensor *out, em_view_kind kind, int n_params,
                      const int64_t *params) {
  if (out == NULL || !em_ag_should_record(1, &x)) return out;
  em_node *node = em_ag_node_new(view_names[kind], view_backward, 1, &x);
  if (node == NULL) {
    em_release(out);
    return NULL;
  }
  for (int i = 0; i < n_params && i < 15; i++) node->ints[i] = params[i];
  node->ints[15] = kind;
  int rc = kind == EM_VIEW_IDENTITY ? em_ag_set_output(out, node)
                                    : em_ag_set_view_output(out, node);
  if (rc != 0) {
    em_release(out);
    return NULL;
  }
  return out;
}

em_tensor *em_ag_copy(const em_tensor *x, em_tensor *out) {
  if (out == NULL || !em_ag_should_record(1, &x)) return out;
  if (!em_dtypes[out->dtype_id].is_float) return out;
  return em_ag_view(x, out, EM_VIEW_IDENTITY, 0, NULL);
}

int em_ag_adopt(em_tensor *self, em_tensor *result) {
  const em_backend *be = em_device_backend(self->device_id);
  if (result->ndim != self->ndim ||
      memcmp(result->sizes, self->sizes, sizeof(int64_t) * (size_t)self->ndim) != 0) {
    char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF];
    return em_error("the result's shape %s does not match the in-place tensor's shape %s",
                    em_shape_str(a, sizeof a, result->ndim, result->sizes),
                    em_shape_str(b, sizeof b, self->ndim, self->sizes));
  }
  if (em_numel(self) && be->copy(self, result) != 0) return -1;
  em_bump_version(self);
  em_grad_meta *m = result->grad_meta;
  if (m == NULL || m->grad_fn == NULL) return 0;
  em_node_retain(m->grad_fn);
  return em_ag_set_output(self, m->grad_fn);
}

int em_ag_inplace_check(const char *fn, const em_tensor *self) {
  if (em_ag_check_inplace(fn, self) != 0) return -1;
  if (__atomic_load_n(&self->storage->refcount, __ATOMIC_RELAXED) > 1)
    return em_error("%s: an in-place operation that autograd must record needs a tensor that "
                    "shares its storage with no other tensor (this one is a view, or was saved "
                    "for backward); use the out-of-place form", fn);
  return 0;
}
