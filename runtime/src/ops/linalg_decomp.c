/*
 * linalg_decomp.c: definitions of the matrix decompositions and solvers of ember.linalg:
 * solve, inv, slogdet, det, cholesky, qr, svd, eigh and lstsq. Each checks its operands
 * (float32 or float64 matrices [..., m, n], batched over the leading dims), reads them as
 * float64, runs the LAPACK kernel of cpu/lapack.c once per matrix, and rounds the results
 * once to the input's dtype.
 *
 * CPU only: on another device each raises "<name>: not implemented on <device kind>" rather
 * than copying to the CPU behind the caller's back.
 *
 * These ops record nothing on the autograd tape: their gradients are written in Lua
 * (lua/ember/linalg.lua, as autograd Functions), which calls them with grad mode off. Called
 * from C on inputs that require grad while grad mode is on, they raise an error instead of
 * returning a result silently cut from the graph.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../autograd/autograd.h"
#include "../cpu/lapack.h"

/* A batch of matrices read as contiguous float64 on the CPU. */
typedef struct {
  em_tensor *host;
  const double *data;
  int64_t batch;
  int m, n;
} mats;

static void mats_free(mats *x) {
  if (x->host) em_release(x->host);
  x->host = NULL;
}

static int load(const char *fn, const em_tensor *a, const char *what, mats *out) {
  memset(out, 0, sizeof *out);
  if (a == NULL) return em_error("%s: expected a tensor for %s, got NULL", fn, what);
  if (a->ndim < 2)
    return em_error("%s: expected %s to have at least 2 dims, got %d-d", fn, what, a->ndim);
  if (a->dtype_id != EM_FLOAT32 && a->dtype_id != EM_FLOAT64)
    return em_error("%s: expected float32 or float64 %s, got %s", fn, what,
                    em_dtype_name(a->dtype_id));
  if (a->device_id != 0) {
    const char *dev = em_device_name(a->device_id);
    size_t len = strcspn(dev, ":");
    return em_error("%s: not implemented on %.*s", fn, (int)len, dev);
  }
  if (em_ag_should_record(1, &a))
    return em_error("%s: its gradient is defined by ember.linalg in Lua; from C, call it under "
                    "em_set_grad_enabled(0) or on a detached tensor", fn);
  int64_t m = a->sizes[a->ndim - 2], n = a->sizes[a->ndim - 1];
  if (m > INT32_MAX / 2 || n > INT32_MAX / 2)
    return em_error("%s: matrices of %lld x %lld are too large for LAPACK", fn, (long long)m,
                    (long long)n);
  em_tensor *f = em_to_dtype(a, EM_FLOAT64);
  if (f == NULL) return -1;
  em_tensor *c = em_contiguous(f);
  em_release(f);
  if (c == NULL) return -1;
  out->host = c;
  out->data = em_numel(c) > 0 ? (const double *)em_data_ptr(c) : NULL;
  out->batch = em_numel(c) / (m * n > 0 ? m * n : 1);
  if (m * n == 0) out->batch = em_shape_numel(a->ndim - 2, a->sizes);
  out->m = (int)m;
  out->n = (int)n;
  return 0;
}

/* A new float64 CPU tensor of the batch dims of a followed by `extra` dims. */
static em_tensor *batched(const em_tensor *a, int drop, int extra, int64_t d0, int64_t d1) {
  int64_t sizes[EM_MAX_DIMS];
  int nd = a->ndim - drop;
  for (int i = 0; i < nd; i++) sizes[i] = a->sizes[i];
  if (extra > 0) sizes[nd++] = d0;
  if (extra > 1) sizes[nd++] = d1;
  return em_empty(nd, sizes, EM_FLOAT64, 0);
}

static double *dptr(em_tensor *t) { return em_numel(t) > 0 ? (double *)em_data_ptr(t) : NULL; }

/* The result in the input's dtype (t is consumed). */
static em_tensor *finish(em_tensor *t, int dtype) {
  if (t == NULL || dtype == EM_FLOAT64) return t;
  em_tensor *r = em_to_dtype(t, (em_dtype)dtype);
  em_release(t);
  return r;
}

static int finish_out(em_tensor **slot, em_tensor *t, int dtype) {
  *slot = finish(t, dtype);
  return *slot == NULL ? -1 : 0;
}

static int lapack_failed(const char *fn, int info, int64_t b, int64_t batch, const char *what) {
  if (info < 0) return -1; /* the allocation message is set */
  if (batch > 1)
    return em_error("%s: %s (matrix %lld of the batch, 1-based; LAPACK info %d)", fn, what,
                    (long long)b + 1, info);
  return em_error("%s: %s (LAPACK info %d)", fn, what, info);
}

static int need_square(const char *fn, const mats *x) {
  if (x->m != x->n)
    return em_error("%s: expected square matrices, got %d x %d", fn, x->m, x->n);
  return 0;
}

/* ---- solve, inv -------------------------------------------------------------------------- */
em_tensor *em_linalg_solve(const em_tensor *a, const em_tensor *b) {
  mats A, B;
  if (load("solve", a, "A", &A) != 0) return NULL;
  if (need_square("solve", &A) != 0 || load("solve", b, "B", &B) != 0) {
    mats_free(&A);
    return NULL;
  }
  em_tensor *x = NULL;
  if (a->dtype_id != b->dtype_id) {
    em_error("solve: expected A and B of one dtype, got %s and %s", em_dtype_name(a->dtype_id),
             em_dtype_name(b->dtype_id));
    goto done;
  }
  if (a->ndim != b->ndim || B.m != A.n ||
      memcmp(a->sizes, b->sizes, sizeof(int64_t) * (size_t)(a->ndim - 2)) != 0) {
    em_error("solve: expected B of shape [..., %d, k] with A's batch dims, got %d-d with %d rows",
             A.n, b->ndim, B.m);
    goto done;
  }
  x = em_clone(B.host);
  if (x == NULL) goto done;
  int n = A.n, k = B.n;
  for (int64_t i = 0; i < A.batch && n > 0 && k > 0; i++) {
    int info = em_lapack_solve(n, k, A.data + i * n * n, dptr(x) + i * n * k);
    if (info != 0) {
      lapack_failed("solve", info, i, A.batch, "the matrix is singular");
      em_release(x);
      x = NULL;
      goto done;
    }
  }
  x = finish(x, a->dtype_id);
done:
  mats_free(&A);
  mats_free(&B);
  return x;
}

em_tensor *em_linalg_inv(const em_tensor *a) {
  mats A;
  if (load("inv", a, "the input", &A) != 0) return NULL;
  if (need_square("inv", &A) != 0) {
    mats_free(&A);
    return NULL;
  }
  int n = A.n;
  em_tensor *x = batched(a, 2, 2, n, n);
  for (int64_t i = 0; x != NULL && i < A.batch && n > 0; i++) {
    double *xi = dptr(x) + i * n * n;
    for (int r = 0; r < n; r++)
      for (int c = 0; c < n; c++) xi[r * n + c] = r == c;
    int info = em_lapack_solve(n, n, A.data + i * n * n, xi);
    if (info != 0) {
      lapack_failed("inv", info, i, A.batch, "the matrix is singular");
      em_release(x);
      x = NULL;
    }
  }
  mats_free(&A);
  return finish(x, a->dtype_id);
}

/* ---- slogdet, det ------------------------------------------------------------------------ */
static int slogdet_raw(const char *fn, const em_tensor *a, em_tensor **sign, em_tensor **logabs) {
  mats A;
  *sign = *logabs = NULL;
  if (load(fn, a, "the input", &A) != 0) return -1;
  if (need_square(fn, &A) != 0) {
    mats_free(&A);
    return -1;
  }
  int n = A.n, rc = 0;
  em_tensor *s = batched(a, 2, 0, 0, 0), *l = batched(a, 2, 0, 0, 0);
  if (s == NULL || l == NULL) rc = -1;
  for (int64_t i = 0; rc == 0 && i < A.batch; i++) {
    double one = 1;
    rc = em_lapack_slogdet(n, n > 0 ? A.data + i * n * n : &one, dptr(s) + i, dptr(l) + i);
  }
  mats_free(&A);
  if (rc != 0) {
    if (s) em_release(s);
    if (l) em_release(l);
    return -1;
  }
  *sign = s;
  *logabs = l;
  return 0;
}

int em_linalg_slogdet(const em_tensor *a, em_tensor **sign, em_tensor **logabsdet) {
  em_tensor *s, *l;
  if (sign == NULL || logabsdet == NULL)
    return em_error("slogdet: expected places for the two results, got NULL");
  *sign = *logabsdet = NULL;
  if (slogdet_raw("slogdet", a, &s, &l) != 0) return -1;
  if (finish_out(sign, s, a->dtype_id) != 0) {
    em_release(l);
    return -1;
  }
  if (finish_out(logabsdet, l, a->dtype_id) != 0) {
    em_release(*sign);
    *sign = NULL;
    return -1;
  }
  return 0;
}

em_tensor *em_linalg_det(const em_tensor *a) {
  em_tensor *s, *l;
  if (slogdet_raw("det", a, &s, &l) != 0) return NULL;
  double *sp = dptr(s), *lp = dptr(l);
  for (int64_t i = 0; i < em_numel(s); i++) sp[i] = sp[i] * exp(lp[i]);
  em_release(l);
  return finish(s, a->dtype_id);
}

/* ---- cholesky ---------------------------------------------------------------------------- */
em_tensor *em_linalg_cholesky(const em_tensor *a, int upper) {
  mats A;
  if (load("cholesky", a, "the input", &A) != 0) return NULL;
  if (need_square("cholesky", &A) != 0) {
    mats_free(&A);
    return NULL;
  }
  int n = A.n;
  em_tensor *x = batched(a, 2, 2, n, n);
  for (int64_t i = 0; x != NULL && i < A.batch && n > 0; i++) {
    int info = em_lapack_cholesky(n, A.data + i * n * n, upper, dptr(x) + i * n * n);
    if (info != 0) {
      char what[96];
      snprintf(what, sizeof what, "the matrix is not positive-definite (its leading minor of "
               "order %d is not)", info);
      lapack_failed("cholesky", info, i, A.batch, what);
      em_release(x);
      x = NULL;
    }
  }
  mats_free(&A);
  return finish(x, a->dtype_id);
}

/* ---- qr ------------------------------------------------------------------------------------- */
int em_linalg_qr(const em_tensor *a, int complete, em_tensor **q, em_tensor **r) {
  mats A;
  if (q == NULL || r == NULL) return em_error("qr: expected places for Q and R, got NULL");
  *q = *r = NULL;
  if (load("qr", a, "the input", &A) != 0) return -1;
  int m = A.m, n = A.n, k = m < n ? m : n, kq = complete ? m : k;
  em_tensor *Q = batched(a, 2, 2, m, kq), *R = batched(a, 2, 2, kq, n);
  int rc = (Q == NULL || R == NULL) ? -1 : 0;
  for (int64_t i = 0; rc == 0 && i < A.batch; i++) {
    int info = em_lapack_qr(m, n, A.data ? A.data + i * m * n : NULL, complete,
                            dptr(Q) ? dptr(Q) + i * m * kq : NULL,
                            dptr(R) ? dptr(R) + i * kq * n : NULL);
    if (info != 0) rc = lapack_failed("qr", info, i, A.batch, "the factorization failed");
  }
  mats_free(&A);
  if (rc == 0 && finish_out(q, Q, a->dtype_id) == 0) {
    Q = NULL;
    if (finish_out(r, R, a->dtype_id) == 0) return 0;
    R = NULL;
  }
  if (Q) em_release(Q);
  if (R) em_release(R);
  if (*q) em_release(*q);
  *q = *r = NULL;
  return -1;
}

/* ---- svd ------------------------------------------------------------------------------------ */
int em_linalg_svd(const em_tensor *a, int full_matrices, int compute_uv, em_tensor **u,
                  em_tensor **s, em_tensor **vh) {
  mats A;
  if (s == NULL || (compute_uv && (u == NULL || vh == NULL)))
    return em_error("svd: expected places for the results, got NULL");
  if (u) *u = NULL;
  if (vh) *vh = NULL;
  *s = NULL;
  if (load("svd", a, "the input", &A) != 0) return -1;
  int m = A.m, n = A.n, k = m < n ? m : n;
  int ku = full_matrices ? m : k, kv = full_matrices ? n : k;
  em_tensor *U = NULL, *V = NULL, *S = batched(a, 2, 1, k, 0);
  if (compute_uv) {
    U = batched(a, 2, 2, m, ku);
    V = batched(a, 2, 2, kv, n);
  }
  int rc = (S == NULL || (compute_uv && (U == NULL || V == NULL))) ? -1 : 0;
  for (int64_t i = 0; rc == 0 && i < A.batch; i++) {
    int info = em_lapack_svd(m, n, A.data ? A.data + i * m * n : NULL, full_matrices, compute_uv,
                             U && dptr(U) ? dptr(U) + i * m * ku : NULL,
                             dptr(S) ? dptr(S) + i * k : NULL,
                             V && dptr(V) ? dptr(V) + i * kv * n : NULL);
    if (info != 0) rc = lapack_failed("svd", info, i, A.batch, "the algorithm did not converge");
  }
  mats_free(&A);
  if (rc == 0) {
    rc = finish_out(s, S, a->dtype_id);
    S = NULL;
    if (rc == 0 && compute_uv) {
      rc = finish_out(u, U, a->dtype_id);
      U = NULL;
      if (rc == 0) rc = finish_out(vh, V, a->dtype_id);
      V = NULL;
    }
  }
  if (S) em_release(S);
  if (U) em_release(U);
  if (V) em_release(V);
  if (rc != 0) {
    if (*s) em_release(*s);
    if (u && *u) em_release(*u);
    if (vh && *vh) em_release(*vh);
    *s = NULL;
    if (u) *u = NULL;
    if (vh) *vh = NULL;
  }
  return rc;
}

/* ---- eigh ----------------------------------------------------------------------------------- */
int em_linalg_eigh(const em_tensor *a, int upper, int compute_v, em_tensor **w, em_tensor **v) {
  mats A;
  if (w == NULL || (compute_v && v == NULL))
    return em_error("eigh: expected places for the results, got NULL");
  *w = NULL;
  if (v) *v = NULL;
  if (load("eigh", a, "the input", &A) != 0) return -1;
  if (need_square("eigh", &A) != 0) {
    mats_free(&A);
    return -1;
  }
  int n = A.n;
  em_tensor *W = batched(a, 2, 1, n, 0), *V = compute_v ? batched(a, 2, 2, n, n) : NULL;
  int rc = (W == NULL || (compute_v && V == NULL)) ? -1 : 0;
  for (int64_t i = 0; rc == 0 && i < A.batch && n > 0; i++) {
    int info = em_lapack_eigh(n, A.data + i * n * n, upper, compute_v, dptr(W) + i * n,
                              V ? dptr(V) + i * n * n : NULL);
    if (info != 0) rc = lapack_failed("eigh", info, i, A.batch, "the algorithm did not converge");
  }
  mats_free(&A);
  if (rc == 0) {
    rc = finish_out(w, W, a->dtype_id);
    W = NULL;
    if (rc == 0 && compute_v) rc = finish_out(v, V, a->dtype_id);
    V = NULL;
  }
  if (W) em_release(W);
  if (V) em_release(V);
  if (rc != 0 && *w) {
    em_release(*w);
    *w = NULL;
  }
  return rc;
}

/* ---- lstsq ---------------------------------------------------------------------------------- */
em_tensor *em_linalg_lstsq(const em_tensor *a, const em_tensor *b, double rcond) {
  mats A, B;
  if (load("lstsq", a, "A", &A) != 0) return NULL;
  if (load("lstsq", b, "B", &B) != 0) {
    mats_free(&A);
    return NULL;
  }
  em_tensor *x = NULL;
  if (a->dtype_id != b->dtype_id) {
    em_error("lstsq: expected A and B of one dtype, got %s and %s", em_dtype_name(a->dtype_id),
             em_dtype_name(b->dtype_id));
    goto done;
  }
  if (a->ndim != b->ndim || B.m != A.m ||
      memcmp(a->sizes, b->sizes, sizeof(int64_t) * (size_t)(a->ndim - 2)) != 0) {
    em_error("lstsq: expected B of shape [..., %d, k] with A's batch dims, got %d-d with %d rows",
             A.m, b->ndim, B.m);
    goto done;
  }
  int m = A.m, n = A.n, k = B.n;
  if (rcond < 0) rcond = (a->dtype_id == EM_FLOAT32 ? FLT_EPSILON : DBL_EPSILON) * (m > n ? m : n);
  x = batched(a, 2, 2, n, k);
  for (int64_t i = 0; x != NULL && i < A.batch && n > 0 && k > 0; i++) {
    int info = em_lapack_lstsq(m, n, k, A.data ? A.data + i * m * n : NULL,
                               B.data ? B.data + i * m * k : NULL, rcond, dptr(x) + i * n * k);
    if (info != 0) {
      lapack_failed("lstsq", info, i, A.batch, "the solver failed");
      em_release(x);
      x = NULL;
    }
  }
  x = finish(x, a->dtype_id);
done:
  mats_free(&A);
  mats_free(&B);
  return x;
}
