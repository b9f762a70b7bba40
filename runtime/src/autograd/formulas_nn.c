/*
 * formulas_nn.c: recording and backward formulas of the neural-network ops (nn.h).
 *
 * - Convolutions: F (conv2d), T (conv_transpose2d / input gradient) and Wg (weight gradient)
 *   are bilinear and each one's derivatives are the other two, so every formula here is
 *   written with recorded ops and double backward works through them.
 * - Pooling: max pooling's gradient is max_unpool (a scatter at the saved argmax indices),
 *   whose own gradient is a gather; average pooling and its adjoint are each other's gradient.
 * - Normalizations and the class losses use fused backward kernels (one pass per statistic
 *   instead of a dozen elementwise ops). Those kernels do not record, so when a graph of the
 *   backward is requested (create_graph), the formulas compose the same gradient from
 *   recorded ops instead (recomputing batch statistics and the softmax from x, so that second
 *   derivatives see them depend on x).
 * - Embedding: index_add of the gradient rows into zeros.
 */
#include <math.h>

#include "../nn.h"
#include "expr.h"
#include "record.h"

/* ---- convolution ---------------------------------------------------------------------------- */

static void pack_args(em_node *node, const em_conv_args *a) {
  int64_t *v = node->ints;
  v[1] = a->stride[0], v[2] = a->stride[1], v[3] = a->padding[0], v[4] = a->padding[1];
  v[5] = a->dilation[0], v[6] = a->dilation[1], v[7] = a->groups;
  node->n_ints = 8;
}

static em_conv_args unpack_args(const em_node *node) {
  const int64_t *v = node->ints;
  em_conv_args a = {{v[1], v[2]}, {v[3], v[4]}, {v[5], v[6]}, v[7]};
  return a;
}

/* The sum of g over every dim but the channels: a bias gradient. */
static T channel_sum(const em_tensor *g) {
  int dims[3] = {0, 2, 3};
  return em_reduce(EM_SUM, g, 3, dims, 0);
}

static int conv_backward(em_node *node, const em_tensor *g, em_tensor **gi) {
  int kind = (int)node->ints[0];
  em_conv_args a = unpack_args(node);
  const em_tensor *A = em_ag_saved(node, 0), *B = em_ag_saved(node, 1);
  if (A == NULL || B == NULL) return -1;
  const int64_t *hw0 = node->inputs[0].sizes + 2, *hw1 = node->inputs[1].sizes + 2;
  T g0 = NULL, g1 = NULL, g2 = NULL;
  switch (kind) {
  case EM_CONV_F: /* y = F(x, w) + b */
    if (needs(node, 0)) g0 = em_nn_conv_t(g, B, NULL, hw0, &a);
    if (needs(node, 1)) g1 = em_nn_conv_w(A, g, hw1, &a);
    if (needs(node, 2)) g2 = channel_sum(g);
    break;
  case EM_CONV_T: /* x = T(y, w) + b */
    if (needs(node, 0)) g0 = em_nn_conv(g, B, NULL, hw0, &a);
    if (needs(node, 1)) g1 = em_nn_conv_w(g, A, hw1, &a);
    if (needs(node, 2)) g2 = channel_sum(g);
    break;
  default: /* w = Wg(x, y) */
    if (needs(node, 0)) g0 = em_nn_conv_t(B, g, NULL, hw0, &a);
    if (needs(node, 1)) g1 = em_nn_conv(A, g, NULL, hw1, &a);
    break;
  }
  if (kind != EM_CONV_W) return put3(node, gi, g0, g1, g2);
  em_release(g2);
  return put2(node, gi, g0, g1);
}

int em_ag_record_conv(int kind, em_tensor *out, const em_tensor *a, const em_tensor *b,
                      const em_tensor *bias, const em_conv_args *args) {
  static const char *names[3] = {"ConvolutionBackward", "ConvolutionTransposeBackward",
                                 "ConvolutionWeightBackward"};
  const em_tensor *ins[3] = {a, b, bias};
  em_node *node = em_ag_node_new(names[kind], conv_backward, kind == EM_CONV_W ? 2 : 3, ins);
  if (node == NULL) return -1;
  node->ints[0] = kind;
  pack_args(node, args);
  if (em_ag_save(node, a) != 0 || em_ag_save(node, b) != 0) {
    em_node_release(node);
    return -1;
  }
  return em_ag_set_output(out, node);
}

/* ---- max pooling ---------------------------------------------------------------------------- */

static int max_pool_backward(em_node *node, const em_tensor *g, em_tensor **gi) {
  const em_tensor *idx = em_ag_saved(node, 0);
  if (idx == NULL) return -1;
  return put(node, gi, 0, em_nn_max_unpool(g, idx, node->inputs[0].sizes));
}

int em_ag_record_max_pool(em_tensor *out, const em_tensor *x, const em_tensor *indices) {
  em_node *node = em_ag_node_new("MaxPool2DBackward", max_pool_backward, 1, &x);
  if (node == NULL) return -1;
  if (em_ag_save(node, indices) != 0) {
    em_node_release(node);
    return -1;
  }
  return em_ag_set_output(out, node);
}

/* The gradient of a scatter at indices is the gather at the same indices, plane by plane. */
static int max_unpool_backward(em_node *node, const em_tensor *g, em_tensor **gi) {
  const em_tensor *idx = em_ag_saved(node, 0);
  if (idx == NULL) return -1;
  const int64_t *ys = node->inputs[0].sizes;
  int64_t planes[3] = {g->sizes[0], g->sizes[1], g->sizes[2] * g->sizes[3]};
  int64_t iplanes[3] = {ys[0], ys[1], ys[2] * ys[3]};
  T flat = em_reshape(g, 3, planes), iflat = em_reshape(idx, 3, iplanes);
  T picked = flat && iflat ? em_gather(flat, 2, iflat) : NULL;
  em_release(flat);
  em_release(iflat);
  T r = picked ? em_reshape(picked, 4, ys) : NULL;
  em_release(picked);
  return put(node, gi, 0, r);
}

int em_ag_record_max_unpool(em_tensor *out, const em_tensor *gy, const em_tensor *indices) {
  em_node *node = em_ag_node_new("MaxUnpool2DBackward", max_unpool_backward, 1, &gy);
  if (node == NULL) return -1;
  if (em_ag_save(node, indices) != 0) {
    em_node_release(node);
    return -1;
  }
  return em_ag_set_output(out, node);
}

/* ---- average pooling ------------------------------------------------------------------------ */

static void pack_pool(em_node *node, const em_pool_geom *g) {
  int64_t *v = node->ints;
  v[1] = g->kh, v[2] = g->kw, v[3] = g->sh, v[4] = g->sw, v[5] = g->ph, v[6] = g->pw;
  v[7] = g->adaptive, v[8] = g->count_include_pad, v[9] = g->divisor;
  v[10] = g->H, v[11] = g->W, v[12] = g->OH, v[13] = g->OW;
  node->n_ints = 14;
}

static em_pool_geom unpack_pool(const em_node *node) {
  const int64_t *v = node->ints;
  const int64_t *s = node->inputs[0].sizes;
  em_pool_geom g = {0};
  g.N = s[0], g.C = s[1];
  g.kh = v[1], g.kw = v[2], g.sh = v[3], g.sw = v[4], g.ph = v[5], g.pw = v[6];
  g.dh = g.dw = 1;
  g.adaptive = v[7] != 0, g.count_include_pad = v[8] != 0, g.divisor = v[9];
  g.H = v[10], g.W = v[11], g.OH = v[12], g.OW = v[13];
  return g;
}

static int avg_pool_backward(em_node *node, const em_tensor *g, em_tensor **gi) {
  em_pool_geom geom = unpack_pool(node);
  bool adjoint = node->ints[0] != 0;
  return put(node, gi, 0, adjoint ? em_nn_avg_pool(g, &geom) : em_nn_avg_pool_t(g, &geom));
}

int em_ag_record_avg_pool(int adjoint, em_tensor *out, const em_tensor *x,
                          const em_pool_geom *g) {
  const char *name = adjoint ? "AvgPool2DBackwardBackward"
                             : g->adaptive ? "AdaptiveAvgPool2DBackward" : "AvgPool2DBackward";
  em_node *node = em_ag_node_new(name, avg_pool_backward, 1, &x);
  if (node == NULL) return -1;
  node->ints[0] = adjoint;
  pack_pool(node, g);
  return em_ag_set_output(out, node);
}

/* ---- normalization ------------------------------------------------------------------------ */

/* t ([C] or [N, G]) viewed so it broadcasts against x's layout. */
static T shaped(const em_tensor *t, int ndim, const int64_t *sizes) {
  return t ? em_reshape(t, ndim, sizes) : NULL;
}

/* xhat = (x - mean) * invstd over x viewed with `stat` ([1, C, 1...] or [N, G, 1, 1]) shaped
 * statistics. With create_graph the statistics of a training-mode normalization are recomputed
 * from x with recorded ops, so the second derivative sees them depend on x; constant ones
 * (evaluation mode) come from the node. Returns xhat; *is receives invstd (new references). */
static T normalized(const em_tensor *x, int nr, const int *dims, bool recompute, double eps,
                    T mean, T invstd, T *is) {
  if (recompute) {
    em_release(mean);
    em_release(invstd);
    T m = em_reduce(EM_MEAN, x, nr, dims, 1);
    T xc = sub(ref(x), m);
    T sq = mul(ref(xc), ref(xc));
    T var = sq ? em_reduce(EM_MEAN, sq, nr, dims, 1) : NULL;
    em_release(sq);
    *is = un(EM_RSQRT, adds(var, eps));
    return mul(xc, ref(*is));
  }
  *is = invstd;
  return mul(sub(ref(x), mean), ref(invstd));
}

/* The normalization backward from recorded ops (create_graph), x already viewed so that the
 * statistics reduce over `dims`; w is shaped to broadcast (or NULL). gx is shaped like x:
 *   gx = invstd * (gxhat - mean(gxhat) - xhat * mean(gxhat * xhat)),  gxhat = g * w
 * (training) or gx = invstd * gxhat (constant statistics). */
static T composed_gx(const em_tensor *g, const em_tensor *w, T xhat, T is, int nr,
                     const int *dims, bool training) {
  T gxhat = w ? mul(ref(g), ref(w)) : ref(g);
  if (!training) {
    em_release(xhat);
    return mul(gxhat, is);
  }
  T mg = gxhat ? em_reduce(EM_MEAN, gxhat, nr, dims, 1) : NULL;
  T prod = mul(ref(gxhat), ref(xhat));
  T mgx = prod ? em_reduce(EM_MEAN, prod, nr, dims, 1) : NULL;
  em_release(prod);
  return mul(sub(sub(gxhat, mg), mul(xhat, mgx)), is);
}

static T sum_over(T t, int n, const int *dims) {
  T s = t ? em_reduce(EM_SUM, t, n, dims, 0) : NULL;
  em_release(t);
  return s;
}

/* Composed batch_norm backward, for create_graph. x is [N, C, ...]; stats are [C]. */
static int batch_norm_composed(em_node *node, const em_tensor *g, const em_tensor *x,
                               const em_tensor *mean, const em_tensor *invstd,
                               const em_tensor *weight, bool training, em_tensor **gi) {
  int nd = x->ndim, dims[EM_MAX_DIMS], nr = 0;
  int64_t cs[EM_MAX_DIMS];
  for (int d = 0; d < nd; d++) {
    cs[d] = d == 1 ? x->sizes[1] : 1;
    if (d != 1) dims[nr++] = d;
  }
  T w = shaped(weight, nd, cs), is = NULL;
  T xhat = normalized(x, nr, dims, training, node->scalars[0], shaped(mean, nd, cs),
                      shaped(invstd, nd, cs), &is);
  T g1 = needs(node, 1) ? sum_over(mul(ref(g), ref(xhat)), nr, dims) : NULL;
  T g2 = needs(node, 2) ? em_reduce(EM_SUM, g, nr, dims, 0) : NULL;
  T g0 = needs(node, 0) ? composed_gx(g, w, ref(xhat), ref(is), nr, dims, training) : NULL;
  em_tensor *tmp[3] = {w, is, xhat};
  em_ag_release_all(3, tmp);
  return put3(node, gi, g0, g1, g2);
}

static int batch_norm_backward(em_node *node, const em_tensor *g, em_tensor **gi) {
  const em_tensor *x = em_ag_saved(node, 0), *mean = em_ag_saved(node, 1);
  const em_tensor *invstd = em_ag_saved(node, 2);
  const em_tensor *w = node->n_saved > 3 ? em_ag_saved(node, 3) : NULL;
  if (x == NULL || mean == NULL || invstd == NULL || (node->n_saved > 3 && w == NULL)) return -1;
  bool training = node->ints[0] != 0;
  if (em_grad_enabled()) return batch_norm_composed(node, g, x, mean, invstd, w, training, gi);
  em_tensor *gx = NULL, *gw = NULL, *gb = NULL;
  if (em_nn_batch_norm_backward(g, x, mean, invstd, w, training, needs(node, 0) ? &gx : NULL,
                                needs(node, 1) ? &gw : NULL, needs(node, 2) ? &gb : NULL) != 0)
    return -1;
  return put3(node, gi, gx, gw, gb);
}

static em_node *norm_node(const char *name, em_backward_fn fn, const em_tensor *x,
                          const em_tensor *w, const em_tensor *b, const em_tensor *s1,
                          const em_tensor *s2) {
  const em_tensor *ins[3] = {x, w, b};
  em_node *node = em_ag_node_new(name, fn, 3, ins);
  if (node == NULL) return NULL;
  if (em_ag_save(node, x) != 0 || em_ag_save(node, s1) != 0 || em_ag_save(node, s2) != 0 ||
      (w && em_ag_save(node, w) != 0)) {
    em_node_release(node);
    return NULL;
  }
  return node;
}

int em_ag_record_batch_norm(em_tensor *out, const em_tensor *x, const em_tensor *w,
                            const em_tensor *b, const em_tensor *mean, const em_tensor *invstd,
                            bool training, double eps) {
  em_node *node = norm_node("BatchNormBackward", batch_norm_backward, x, w, b, mean, invstd);
  if (node == NULL) return -1;
  node->ints[0] = training;
  node->scalars[0] = eps;
  return em_ag_set_output(out, node);
}

/* Composed group_norm backward (create_graph): x viewed [N, G, Cg, S], stats [N, G]. */
static int group_norm_composed(em_node *node, const em_tensor *g, const em_tensor *x,
                               const em_tensor *mean, const em_tensor *rstd,
                               const em_tensor *weight, const em_norm_geom *geo,
                               em_tensor **gi) {
  int64_t v4[4] = {geo->N, geo->G, geo->Cg, geo->S}, st[4] = {geo->N, geo->G, 1, 1};
  int64_t wv[4] = {1, geo->G, geo->Cg, 1}, ws[1] = {geo->G * geo->Cg};
  int red[2] = {2, 3}, outer[2] = {0, 3};
  T x4 = em_reshape(x, 4, v4), g4 = em_reshape(g, 4, v4), w = shaped(weight, 4, wv), is = NULL;
  T xhat = x4 ? normalized(x4, 2, red, true, geo->eps, shaped(mean, 4, st), shaped(rstd, 4, st),
                           &is)
              : NULL;
  T g0 = NULL, g1 = NULL, g2 = NULL;
  if (needs(node, 0) && g4 && xhat) {
    T d = composed_gx(g4, w, ref(xhat), ref(is), 2, red, true);
    g0 = d ? em_reshape(d, x->ndim, x->sizes) : NULL;
    em_release(d);
  }
  if (needs(node, 1)) {
    T s1 = sum_over(mul(ref(g4), ref(xhat)), 2, outer);
    g1 = s1 ? em_reshape(s1, 1, ws) : NULL;
    em_release(s1);
  }
  if (needs(node, 2) && g4) {
    T s2 = em_reduce(EM_SUM, g4, 2, outer, 0);
    g2 = s2 ? em_reshape(s2, 1, ws) : NULL;
    em_release(s2);
  }
  em_tensor *tmp[5] = {x4, g4, w, is, xhat};
  em_ag_release_all(5, tmp);
  return put3(node, gi, g0, g1, g2);
}

static em_norm_geom unpack_norm(const em_node *node) {
  em_norm_geom g = {node->ints[0], node->ints[1], node->ints[2], node->ints[3],
                    node->scalars[0]};
  return g;
}

static int group_norm_backward(em_node *node, const em_tensor *g, em_tensor **gi) {
  const em_tensor *x = em_ag_saved(node, 0), *mean = em_ag_saved(node, 1);
  const em_tensor *rstd = em_ag_saved(node, 2);
  const em_tensor *w = node->n_saved > 3 ? em_ag_saved(node, 3) : NULL;
  if (x == NULL || mean == NULL || rstd == NULL || (node->n_saved > 3 && w == NULL)) return -1;
  em_norm_geom geo = unpack_norm(node);
  if (em_grad_enabled()) return group_norm_composed(node, g, x, mean, rstd, w, &geo, gi);
  em_tensor *gx = NULL, *gw = NULL, *gb = NULL;
  if (em_nn_group_norm_backward(g, x, mean, rstd, w, &geo, needs(node, 0) ? &gx : NULL,
                                needs(node, 1) ? &gw : NULL, needs(node, 2) ? &gb : NULL) != 0)
    return -1;
  return put3(node, gi, gx, gw, gb);
}

int em_ag_record_group_norm(em_tensor *out, const em_tensor *x, const em_tensor *w,
                            const em_tensor *b, const em_tensor *mean, const em_tensor *rstd,
                            const em_norm_geom *g) {
  const char *name = g->G == 1 && g->S == 1 ? "LayerNormBackward" : "GroupNormBackward";
  em_node *node = norm_node(name, group_norm_backward, x, w, b, mean, rstd);
  if (node == NULL) return -1;
  node->ints[0] = g->N, node->ints[1] = g->G, node->ints[2] = g->Cg, node->ints[3] = g->S;
  node->n_ints = 4;
  node->scalars[0] = g->eps;
  return em_ag_set_output(out, node);
}

/* ---- embedding ------------------------------------------------------------------------------ */

/* gw = index_add of the gradient rows into zeros; rows picked by padding_idx are masked out
 * first (not zeroed afterwards in place, which create_graph could not follow). */
static int embedding_backward(em_node *node, const em_tensor *g, em_tensor **gi) {
  const em_tensor *idx = em_ag_saved(node, 0);
  if (idx == NULL) return -1;
  const em_input_edge *e = &node->inputs[0];
  int64_t n = em_numel(idx), rows[2] = {n, e->sizes[1]}, flat[1] = {n}, col[2] = {n, 1};
  int64_t pad = node->ints[0];
  T g2 = em_reshape(g, 2, rows), i1 = em_reshape(idx, 1, flat);
  if (pad >= 0 && i1) {
    T keep = em_binary_scalar(EM_NE, i1, (double)pad, 0);
    T keepf = keep ? em_to_dtype(keep, (em_dtype)g->dtype_id) : NULL;
    em_release(keep);
    T k2 = keepf ? em_reshape(keepf, 2, col) : NULL;
    em_release(keepf);
    g2 = mul(g2, k2);
  }
  T zero = em_zeros(2, e->sizes, (em_dtype)g->dtype_id, g->device_id);
  T gw = zero && g2 && i1 ? em_index_add(zero, 0, i1, g2, 1.0) : NULL;
  em_tensor *tmp[3] = {zero, g2, i1};
  em_ag_release_all(3, tmp);
  return put(node, gi, 0, gw);
}

int em_ag_record_embedding(em_tensor *out, const em_tensor *weight, const em_tensor *indices,
                           int64_t padding_idx) {
  em_node *node = em_ag_node_new("EmbeddingBackward", embedding_backward, 1, &weight);
  if (node == NULL) return -1;
  node->ints[0] = padding_idx;
  node->n_ints = 1;
  if (em_ag_save(node, indices) != 0) {
    em_node_release(node);
    return -1;
  }
  return em_ag_set_output(out, node);
}

/* ---- class losses (cross entropy, nll) ------------------------------------------------------ */

/* The class loss backward from recorded ops, for create_graph. Per row (n, s) with target t,
 * weights w (all 1 without a weight tensor), W = sum(w), smoothing e and p = softmax(x):
 *   cross entropy: gx = gl * (A * p - B), A = (1-e) w[t] + e W / C, B[c] = (1-e) w[t] [c == t] + e w[c] / C
 *   nll:           gx = -gl * w[t] [c == t]
 * with A and B zero on ignored rows. A and B do not depend on x; p does, through softmax, so
 * second derivatives come out right. x is viewed [N, C, S], gl is [N, S]. */
static T class_loss_composed(bool lsm, const em_tensor *gl, const em_tensor *x,
                             const em_tensor *target, const em_tensor *weight,
                             const em_class_loss *L) {
  em_dtype dt = (em_dtype)x->dtype_id;
  int64_t x3s[3] = {L->N, L->C, L->S}, r3s[3] = {L->N, 1, L->S}, c3s[3] = {1, L->C, 1};
  int64_t flat[1] = {L->N * L->S};
  double e = lsm ? L->smoothing : 0;
  T mask = em_binary_scalar(EM_NE, target, (double)L->ignore_index, 0);
  T tc = where3(ref(mask), ref(target),
                mask ? em_scalar_tensor(0, EM_INT64, target->device_id, 1) : NULL);
  T maskf = mask ? em_to_dtype(mask, dt) : NULL;
  T wt;                                    /* w[t] on counted rows, 0 on ignored ones */
  if (weight) {
    T tf = tc ? em_reshape(tc, 1, flat) : NULL;
    T picked = tf ? em_index_select(weight, 0, tf) : NULL;
    em_release(tf);
    T pw = picked ? em_reshape(picked, target->ndim, target->sizes) : NULL;
    em_release(picked);
    wt = mul(pw, ref(maskf));
  } else {
    wt = ref(maskf);
  }
  T onehot = em_zeros(3, x3s, dt, x->device_id);
  T t3 = tc ? em_reshape(tc, 3, r3s) : NULL;
  T ones = em_ones(3, r3s, dt, x->device_id);
  if (onehot && t3 && ones && em_scatter_(onehot, 1, t3, ones) != 0) {
    em_release(onehot);
    onehot = NULL;
  }
  em_release(t3);
  em_release(ones);
  T wt3 = wt ? em_reshape(wt, 3, r3s) : NULL, m3 = maskf ? em_reshape(maskf, 3, r3s) : NULL;
  T B = mul(onehot, muls(ref(wt3), 1 - e));
  if (e > 0) {
    T wc = weight ? em_reshape(weight, 3, c3s) : em_ones(3, c3s, dt, x->device_id);
    B = add(B, mul(muls(wc, e / (double)L->C), ref(m3)));
  }
  T g3 = em_reshape(gl, 3, r3s), r;
  if (lsm) {
    double W = 0;
    T ws = weight ? em_reduce(EM_SUM, weight, 0, NULL, 0) : NULL;
    if (weight && (ws == NULL || em_item(ws, &W) != 0)) W = NAN;
    if (!weight) W = (double)L->C;
    em_release(ws);
    T A = add(muls(ref(wt3), 1 - e), muls(ref(m3), e * W / (double)L->C));
    T x3 = em_reshape(x, 3, x3s);
    T p = x3 ? em_softmax(x3, 1) : NULL;
    em_release(x3);
    r = mul(g3, sub(mul(A, p), B));
  } else {
    r = neg(mul(g3, B));
  }
  em_tensor *tmp[6] = {mask, tc, maskf, wt, wt3, m3};
  em_ag_release_all(6, tmp);
  T out = r ? em_reshape(r, x->ndim, x->sizes) : NULL;
  em_release(r);
  return out;
}

static int class_loss_backward(em_node *node, const em_tensor *g, em_tensor **gi) {
  const em_tensor *x = em_ag_saved(node, 0), *target = em_ag_saved(node, 1);
  bool log_softmax = node->ints[0] != 0;
  int reduction = (int)node->ints[1];
  const em_tensor *lse = NULL, *weight = NULL;
  int k = 2;
  if (log_softmax && (lse = em_ag_saved(node, k++)) == NULL) return -1;
  if (node->ints[5] && (weight = em_ag_saved(node, k++)) == NULL) return -1;
  const em_tensor *denom = reduction == EM_REDUCTION_MEAN ? em_ag_saved(node, k++) : NULL;
  if (x == NULL || target == NULL || (reduction == EM_REDUCTION_MEAN && denom == NULL)) return -1;
  em_class_loss L = {node->ints[2], node->ints[3], node->ints[4], node->ints[6],
                     node->scalars[0]};
  /* the gradient of each row's loss: g itself (no reduction), or g (/ denominator) for all */
  int64_t rows[2] = {L.N, L.S};
  T gl;
  if (reduction == EM_REDUCTION_NONE) {
    gl = em_reshape(g, 2, rows);
  } else {
    T s = reduction == EM_REDUCTION_MEAN ? em_binary(EM_DIV, g, denom) : ref(g);
    gl = s ? em_expand(s, 2, rows) : NULL;
    em_release(s);
  }
  if (gl == NULL) return -1;
  T gx = em_grad_enabled() ? class_loss_composed(log_softmax, gl, x, target, weight, &L)
                           : em_nn_class_loss_backward(log_softmax, gl, x, lse, target, weight, &L);
  em_release(gl);
  return put(node, gi, 0, gx);
}

int em_ag_record_class_loss(bool log_softmax, em_tensor *out, const em_tensor *x,
                            const em_tensor *lse, const em_tensor *target,
                            const em_tensor *weight, const em_class_loss *L, int reduction,
                            const em_tensor *denom) {
  em_node *node = em_ag_node_new(log_softmax ? "CrossEntropyLossBackward" : "NllLossBackward",
                                 class_loss_backward, 1, &x);
  if (node == NULL) return -1;
  int64_t *v = node->ints;
  v[0] = log_softmax, v[1] = reduction, v[2] = L->N, v[3] = L->C, v[4] = L->S;
  v[5] = weight != NULL, v[6] = L->ignore_index;
  node->n_ints = 7;
  node->scalars[0] = L->smoothing;
  if (em_ag_save(node, x) != 0 || em_ag_save(node, target) != 0 ||
      (lse && em_ag_save(node, lse) != 0) || (weight && em_ag_save(node, weight) != 0) ||
      (reduction == EM_REDUCTION_MEAN && em_ag_save(node, denom) != 0)) {
    em_node_release(node);
    return -1;
  }
  return em_ag_set_output(out, node);
}
