/*
 * linalg.c: definitions of the matrix products: matmul (NumPy's rules), mm, mv, bmm, dot,
 * outer, addmm and baddbmm. They check dims, shapes, dtypes and devices, allocate the result,
 * and reduce to one kernel slot (backend.h):
 *
 *     out[B,M,N] = beta * out + alpha * a[B,M,K] @ b[B,K,N]    (or [B1,B2,...] batches)
 *
 * Every product is phrased as a pair of matrix operands, a viewed as [batch..., M, K] and b as
 * [batch..., K, N]. A 1-D vector becomes a [1,K] row or a [K,1] column through a header on the
 * stack, and the added dim is dropped from the result. Batch dims broadcast with stride 0, so a
 * shared matrix is never copied. Batch dims are then coalesced where every operand's strides
 * allow; up to two remaining dims go to the slot in one call ([B1, B2, M, K] operands, each
 * with its own batch strides), and only a third is looped over here.
 *
 * Rules, as in PyTorch: both operands have one dtype (no promotion); bool is refused; integer
 * dtypes take integral alpha and beta. With beta == 0 the added tensor is ignored (its NaNs do
 * not propagate), though its shape must still broadcast. K == 0 gives beta * c (zeros without
 * c); an empty result never reaches the kernel.
 */
#include <math.h>

#include "../autocast.h"
#include "../autograd/record.h"
#include "../backend.h"

/* Fills *v, a header on the caller's stack, as a view of t's storage with another geometry.
 * It borrows t's storage reference, so it must not outlive t; kernels never retain what they
 * are given. Written in place: headers are large, and copies showed up in profiles of small
 * products. */
static void view_into(em_tensor *v, const em_tensor *t, int ndim, const int64_t *sizes,
                      const int64_t *strides, int64_t offset) {
  if (v != t) em_header_copy(v, t);
  v->ndim = ndim;
  for (int i = 0; i < ndim; i++) {
    v->sizes[i] = sizes[i];
    v->strides[i] = strides[i];
  }
  v->offset = offset;
  v->flags = 0;
  v->grad_meta = NULL;
  v->refcount = 1;
}

/* ---- checks --------------------------------------------------------------------------------- */

static int check_pair(const char *fn, const em_tensor *a, const em_tensor *b) {
  if (a == NULL || b == NULL) return em_error("%s: expected two tensors, got NULL", fn);
  const em_tensor *ts[2] = {a, b};
  if (em_check_same_device(fn, 2, ts) != 0) return -1;
  if (em_check_not_block(fn, a) != 0 || em_check_not_block(fn, b) != 0) return -1;
  if (a->dtype_id != b->dtype_id)
    return em_error("%s: expected both operands to have the same dtype, got %s and %s", fn,
                    em_dtype_name((em_dtype)a->dtype_id), em_dtype_name((em_dtype)b->dtype_id));
  if (a->dtype_id == EM_BOOL)
    return em_error("%s: expected floating or integer tensors, got bool", fn);
  return 0;
}

static int check_ndims(const char *fn, const char *what, const em_tensor *a, int na,
                       const em_tensor *b, int nb) {
  if (a->ndim == na && b->ndim == nb) return 0;
  return em_error("%s: expected %s, got %d-D and %d-D", fn, what, a->ndim, b->ndim);
}

/* The added tensor of addmm/baddbmm: present, on the operands' device, of their dtype. */
static int check_added(const char *fn, const em_tensor *c, const em_tensor *a) {
  if (c == NULL) return em_error("%s: expected a tensor to add, got NULL", fn);
  const em_tensor *ts[2] = {a, c};
  if (em_check_same_device(fn, 2, ts) != 0) return -1;
  if (c->dtype_id != a->dtype_id)
    return em_error("%s: expected the added tensor to have the operands' dtype %s, got %s", fn,
                    em_dtype_name((em_dtype)a->dtype_id), em_dtype_name((em_dtype)c->dtype_id));
  return 0;
}

/* Integer products take integer scalars: a fraction would be silently truncated. */
static int check_scalars(const char *fn, em_dtype dtype, double beta, double alpha) {
  if (em_dtypes[dtype].is_float) return 0;
  const double lim = 9.2233720368547758e18;
  const char *bad = NULL;
  double v = 0;
  if (!(beta == floor(beta) && fabs(beta) < lim)) bad = "beta", v = beta;
  else if (!(alpha == floor(alpha) && fabs(alpha) < lim)) bad = "alpha", v = alpha;
  if (bad == NULL) return 0;
  return em_error("%s: expected integer beta and alpha for %s tensors, got %s = %g", fn,
                  em_dtype_name(dtype), bad, v);
}

static int mismatch(const char *fn, const em_tensor *a, const em_tensor *b, int64_t ka,
                    int64_t kb) {
  char sa[EM_SHAPE_BUF], sb[EM_SHAPE_BUF];
  return em_error("%s: shapes %s and %s cannot be multiplied (%lld != %lld)", fn,
                  em_shape_str(sa, sizeof sa, a->ndim, a->sizes),
                  em_shape_str(sb, sizeof sb, b->ndim, b->sizes), (long long)ka, (long long)kb);
}

/* ---- running the slot ----------------------------------------------------------------------- */

/* out, a, b: [batch..., M, N], [batch..., M, K], [batch..., K, N] with nbatch equal batch dims
 * (a and b already broadcast; out contiguous). Size-1 batch dims are dropped and neighbours
 * merged when every operand steps evenly across both. Up to two dims remain for any layout a
 * model makes (attention's [B, H, T, hd] views of a [B, T, 3C] tensor leave B and H), and they
 * go to the kernel in one call, 3-D or 4-D (the slot's contract); only a third non-mergeable
 * dim is walked here, one call per index of the outer ones. */
static int run_batches(const char *fn, const em_backend *be, const em_tensor *out,
                       const em_tensor *a, const em_tensor *b, int nbatch, double alpha,
                       double beta) {
  const em_tensor *ts[3] = {out, a, b};
  int64_t size[EM_MAX_DIMS], st[3][EM_MAX_DIMS];
  int n = 0;
  for (int d = 0; d < nbatch; d++) {
    int64_t s = out->sizes[d];
    if (s == 1) continue;
    bool merge = n > 0;
    for (int k = 0; k < 3 && merge; k++) merge = st[k][n - 1] == ts[k]->strides[d] * s;
    if (merge) {
      size[n - 1] *= s;
      for (int k = 0; k < 3; k++) st[k][n - 1] = ts[k]->strides[d];
      continue;
    }
    size[n] = s;
    for (int k = 0; k < 3; k++) st[k][n] = ts[k]->strides[d];
    n++;
  }
  int64_t M = out->sizes[nbatch], N = out->sizes[nbatch + 1], K = a->sizes[nbatch + 1];
  if (n == 0) { /* one matrix: a batch of 1 */
    size[0] = 1;
    st[0][0] = M * N;
    st[1][0] = st[2][0] = 0;
    n = 1;
  }
  int kb = n >= 2 ? 2 : 1;  /* batch dims the kernel takes */
  int outer = n - kb;       /* dims walked here */
  int nd = kb + 2;
  int64_t os[4], as[4], bs[4], osz[4], asz[4], bsz[4];
  for (int i = 0; i < kb; i++) {
    osz[i] = asz[i] = bsz[i] = size[outer + i];
    os[i] = st[0][outer + i];
    as[i] = st[1][outer + i];
    bs[i] = st[2][outer + i];
  }
  osz[kb] = asz[kb] = M;
  osz[kb + 1] = bsz[kb + 1] = N;
  asz[kb + 1] = bsz[kb] = K;
  os[kb] = N;
  os[kb + 1] = 1;
  as[kb] = a->strides[nbatch];
  as[kb + 1] = a->strides[nbatch + 1];
  bs[kb] = b->strides[nbatch];
  bs[kb + 1] = b->strides[nbatch + 1];
  int64_t idx[EM_MAX_DIMS] = {0};
  for (;;) {
    int64_t off[3] = {0, 0, 0};
    for (int d = 0; d < outer; d++)
      for (int k = 0; k < 3; k++) off[k] += idx[d] * st[k][d];
    em_tensor o4, a4, b4;
    view_into(&o4, out, nd, osz, os, out->offset + off[0]);
    view_into(&a4, a, nd, asz, as, a->offset + off[1]);
    view_into(&b4, b, nd, bsz, bs, b->offset + off[2]);
    if (be->gemm(&o4, &a4, &b4, alpha, beta) != 0) {
      em_error_prefix(fn);
      return -1;
    }
    /* next outer index (odometer over dims 0 .. outer-1) */
    int d = outer - 1;
    while (d >= 0 && ++idx[d] == size[d]) idx[d--] = 0;
    if (d < 0) return 0;
  }
}

/* t ([tbatch..., R, C]) viewed as [batch..., R, C]: its batch dims broadcast, stride 0. */
static void broadcast_batch(em_tensor *v, const em_tensor *t, int nbatch,
                            const int64_t *batch) {
  int tb = t->ndim - 2; /* t's own batch dims, right-aligned against batch */
  int64_t sizes[EM_MAX_DIMS], strides[EM_MAX_DIMS];
  for (int i = 0; i < nbatch; i++) {
    int j = i - (nbatch - tb);
    sizes[i] = batch[i];
    strides[i] = j >= 0 && t->sizes[j] == batch[i] ? t->strides[j] : 0;
  }
  for (int i = 0; i < 2; i++) {
    sizes[nbatch + i] = t->sizes[tb + i];
    strides[nbatch + i] = t->strides[tb + i];
  }
  view_into(v, t, nbatch + 2, sizes, strides, t->offset);
}

/* The common product: ma [.., M, K] @ mb [.., K, N] (matrix views of the user's a and b),
 * batch dims broadcast; drop_m / drop_n remove the M / N dim from the result (vector
 * operands). With c, the result is beta * c + alpha * product and c broadcasts to it. */
static em_tensor *product(const char *fn, const em_tensor *a, const em_tensor *b,
                          const em_tensor *ma, const em_tensor *mb, bool drop_m, bool drop_n,
                          const em_tensor *c, double beta, double alpha) {
  int64_t M = ma->sizes[ma->ndim - 2], K = ma->sizes[ma->ndim - 1];
  int64_t Kb = mb->sizes[mb->ndim - 2], N = mb->sizes[mb->ndim - 1];
  if (K != Kb) {
    mismatch(fn, a, b, K, Kb);
    return NULL;
  }
  int nbatch;
  int64_t batch[EM_MAX_DIMS];
  if (em_broadcast_shapes(fn, ma->ndim - 2, ma->sizes, mb->ndim - 2, mb->sizes, &nbatch,
                          batch) != 0) {
    char sa[EM_SHAPE_BUF], sb[EM_SHAPE_BUF];
    return em_error_null("%s: shapes %s and %s cannot be multiplied (batch dimensions do not "
                         "broadcast)", fn, em_shape_str(sa, sizeof sa, a->ndim, a->sizes),
                         em_shape_str(sb, sizeof sb, b->ndim, b->sizes));
  }
  /* the result's shape, and the same with the M and N dims kept */
  int64_t full[EM_MAX_DIMS], rsizes[EM_MAX_DIMS];
  int rn = 0;
  for (int i = 0; i < nbatch; i++) full[i] = rsizes[rn++] = batch[i];
  full[nbatch] = M;
  full[nbatch + 1] = N;
  if (!drop_m) rsizes[rn++] = M;
  if (!drop_n) rsizes[rn++] = N;

  const em_backend *be = em_device_backend(a->device_id);
  if (be->gemm == NULL) {
    em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: not implemented on %s", fn, be->name);
    return NULL;
  }
  em_tensor *cb = NULL;
  if (c != NULL && (cb = em_broadcast_to(fn, c, rn, rsizes)) == NULL) return NULL;
  em_tensor *out = em_empty(rn, rsizes, (em_dtype)a->dtype_id, a->device_id);
  if (out == NULL) {
    em_error_prefix(fn);
    goto fail;
  }
  int rc = 0;
  bool done = false;
  if (cb == NULL || beta == 0) {
    beta = 0; /* nothing to add: the kernel must not read the fresh output */
  } else if (be->gemm_add && em_numel(out) > 0 && nbatch <= 1) {
    /* addmm and baddbmm in one kernel that reads c itself, where the device has one */
    int64_t B = nbatch ? batch[0] : 1;
    em_tensor o3, a3, b3, c3;
    view_into(&o3, out, 3, (int64_t[]){B, M, N}, (int64_t[]){M * N, N, 1}, out->offset);
    if (nbatch) {
      broadcast_batch(&a3, ma, 1, batch);
      broadcast_batch(&b3, mb, 1, batch);
      broadcast_batch(&c3, cb, 1, batch);
    } else {
      view_into(&a3, ma, 3, (int64_t[]){1, M, K}, (int64_t[]){0, ma->strides[0], ma->strides[1]},
                ma->offset);
      view_into(&b3, mb, 3, (int64_t[]){1, K, N}, (int64_t[]){0, mb->strides[0], mb->strides[1]},
                mb->offset);
      view_into(&c3, cb, 3, (int64_t[]){1, M, N}, (int64_t[]){0, cb->strides[0], cb->strides[1]},
                cb->offset);
    }
    rc = be->gemm_add(&o3, &a3, &b3, &c3, alpha, beta);
    if (rc < 0) {
      em_error_prefix(fn);
      goto fail;
    }
    done = rc == 0;
    rc = 0;
  }
  if (!done && cb != NULL && beta != 0 && em_copy_(out, cb) != 0) {
    em_error_prefix(fn);
    goto fail;
  }
  em_release(cb);
  cb = NULL;
  if (done || em_numel(out) == 0) {
    /* nothing to compute; still recorded below, so gradients flow (as empty tensors) */
  } else if (nbatch == 0) {
    /* one matrix each (the common case): straight to the slot */
    em_tensor o3, a3, b3;
    view_into(&o3, out, 3, (int64_t[]){1, M, N}, (int64_t[]){M * N, N, 1}, out->offset);
    view_into(&a3, ma, 3, (int64_t[]){1, M, K}, (int64_t[]){0, ma->strides[0], ma->strides[1]},
              ma->offset);
    view_into(&b3, mb, 3, (int64_t[]){1, K, N}, (int64_t[]){0, mb->strides[0], mb->strides[1]},
              mb->offset);
    rc = be->gemm(&o3, &a3, &b3, alpha, beta);
    if (rc != 0) em_error_prefix(fn);
  } else {
    int64_t fstrides[EM_MAX_DIMS];
    em_contiguous_strides(nbatch + 2, full, fstrides);
    em_tensor o, va, vb;
    view_into(&o, out, nbatch + 2, full, fstrides, out->offset);
    broadcast_batch(&va, ma, nbatch, batch);
    broadcast_batch(&vb, mb, nbatch, batch);
    rc = run_batches(fn, be, &o, &va, &vb, nbatch, alpha, beta);
  }
  if (rc != 0) goto fail;
  const em_tensor *ins[3] = {a, b, c};
  if (em_ag_should_record(3, ins)) {
    /* which matrix view each operand was: as is, a 1-D row, or a 1-D column */
    int kind_a = a->ndim != 1 ? 0 : ma->sizes[1] == a->sizes[0] ? 1 : 2;
    int kind_b = b->ndim != 1 ? 0 : mb->sizes[0] == b->sizes[0] && mb->sizes[1] == 1 ? 2 : 1;
    if (em_ag_record_product(out, a, b, kind_a, kind_b, nbatch + 2, full, c, beta, alpha) != 0)
      goto fail;
  }
  return out;
fail:
  em_release(cb);
  em_release(out);
  return NULL;
}

/* a 1-D tensor as a [1,K] row or a [K,1] column (the stride of a size-1 dim is never read) */
static const em_tensor *as_row(em_tensor *v, const em_tensor *t) {
  view_into(v, t, 2, (int64_t[]){1, t->sizes[0]}, (int64_t[]){t->sizes[0], t->strides[0]},
            t->offset);
  return v;
}
static const em_tensor *as_col(em_tensor *v, const em_tensor *t) {
  view_into(v, t, 2, (int64_t[]){t->sizes[0], 1}, (int64_t[]){t->strides[0], 1}, t->offset);
  return v;
}

/* ---- the ops -------------------------------------------------------------------------------- */

em_tensor *em_matmul(const em_tensor *a, const em_tensor *b) {
  const char *fn = "matmul";
  EM_AUTOCAST(fn, em_matmul(ac_[0], ac_[1]), a, b);
  if (check_pair(fn, a, b) != 0) return NULL;
  if (a->ndim == 0 || b->ndim == 0)
    return em_error_null("%s: expected tensors with at least 1 dimension, got %d-D and %d-D",
                         fn, a->ndim, b->ndim);
  em_tensor row, col;
  const em_tensor *ma = a->ndim == 1 ? as_row(&row, a) : a;
  const em_tensor *mb = b->ndim == 1 ? as_col(&col, b) : b;
  return product(fn, a, b, ma, mb, a->ndim == 1, b->ndim == 1, NULL, 0, 1);
}

em_tensor *em_mm(const em_tensor *a, const em_tensor *b) {
  const char *fn = "mm";
  EM_AUTOCAST(fn, em_mm(ac_[0], ac_[1]), a, b);
  if (check_pair(fn, a, b) != 0 || check_ndims(fn, "2-D tensors", a, 2, b, 2) != 0) return NULL;
  return product(fn, a, b, a, b, false, false, NULL, 0, 1);
}

em_tensor *em_mv(const em_tensor *a, const em_tensor *v) {
  const char *fn = "mv";
  EM_AUTOCAST(fn, em_mv(ac_[0], ac_[1]), a, v);
  if (check_pair(fn, a, v) != 0 ||
      check_ndims(fn, "a 2-D matrix and a 1-D vector", a, 2, v, 1) != 0)
    return NULL;
  em_tensor col;
  return product(fn, a, v, a, as_col(&col, v), false, true, NULL, 0, 1);
}

static int check_batches(const char *fn, const em_tensor *a, const em_tensor *b) {
  if (a->sizes[0] == b->sizes[0]) return 0;
  char sa[EM_SHAPE_BUF], sb[EM_SHAPE_BUF];
  return em_error("%s: shapes %s and %s have different batch sizes (%lld != %lld)", fn,
                  em_shape_str(sa, sizeof sa, a->ndim, a->sizes),
                  em_shape_str(sb, sizeof sb, b->ndim, b->sizes), (long long)a->sizes[0],
                  (long long)b->sizes[0]);
}

em_tensor *em_bmm(const em_tensor *a, const em_tensor *b) {
  const char *fn = "bmm";
  EM_AUTOCAST(fn, em_bmm(ac_[0], ac_[1]), a, b);
  if (check_pair(fn, a, b) != 0 || check_ndims(fn, "3-D tensors", a, 3, b, 3) != 0 ||
      check_batches(fn, a, b) != 0)
    return NULL;
  return product(fn, a, b, a, b, false, false, NULL, 0, 1);
}

em_tensor *em_dot(const em_tensor *a, const em_tensor *b) {
  const char *fn = "dot";
  EM_AUTOCAST(fn, em_dot(ac_[0], ac_[1]), a, b);
  if (check_pair(fn, a, b) != 0 || check_ndims(fn, "1-D tensors", a, 1, b, 1) != 0) return NULL;
  em_tensor row, col;
  return product(fn, a, b, as_row(&row, a), as_col(&col, b), true, true, NULL, 0, 1);
}

em_tensor *em_outer(const em_tensor *a, const em_tensor *b) {
  const char *fn = "outer";
  if (a && b && a->dtype_id != b->dtype_id && a->dtype_id != EM_BOOL && b->dtype_id != EM_BOOL) {
    /* two dtypes promote, as PyTorch's outer (a product a[i] * b[j]) does */
    em_dtype dt = em_promote_types((em_dtype)a->dtype_id, (em_dtype)b->dtype_id);
    em_tensor *pa = em_to_dtype(a, dt), *pb = pa ? em_to_dtype(b, dt) : NULL;
    em_tensor *r = pb ? em_outer(pa, pb) : NULL;
    em_release(pa);
    em_release(pb);
    if (r == NULL) em_error_prefix(fn);
    return r;
  }
  if (check_pair(fn, a, b) != 0 || check_ndims(fn, "1-D tensors", a, 1, b, 1) != 0) return NULL;
  em_tensor col, row; /* [N,1] @ [1,M]: K = 1 */
  return product(fn, a, b, as_col(&col, a), as_row(&row, b), false, false, NULL, 0, 1);
}

em_tensor *em_addmm(const em_tensor *c, const em_tensor *a, const em_tensor *b, double beta,
                    double alpha) {
  const char *fn = "addmm";
  EM_AUTOCAST(fn, em_addmm(ac_[0], ac_[1], ac_[2], beta, alpha), c, a, b);
  if (check_pair(fn, a, b) != 0 || check_ndims(fn, "2-D tensors", a, 2, b, 2) != 0 ||
      check_added(fn, c, a) != 0 || check_scalars(fn, (em_dtype)a->dtype_id, beta, alpha) != 0)
    return NULL;
  return product(fn, a, b, a, b, false, false, c, beta, alpha);
}

em_tensor *em_baddbmm(const em_tensor *c, const em_tensor *a, const em_tensor *b, double beta,
                      double alpha) {
  const char *fn = "baddbmm";
  EM_AUTOCAST(fn, em_baddbmm(ac_[0], ac_[1], ac_[2], beta, alpha), c, a, b);
  if (check_pair(fn, a, b) != 0 || check_ndims(fn, "3-D tensors", a, 3, b, 3) != 0 ||
      check_batches(fn, a, b) != 0 || check_added(fn, c, a) != 0 ||
      check_scalars(fn, (em_dtype)a->dtype_id, beta, alpha) != 0)
    return NULL;
  return product(fn, a, b, a, b, false, false, c, beta, alpha);
}
