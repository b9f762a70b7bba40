/*
 * test_linalg_decomp.c: the em_linalg_* decompositions from C (embedders' view), against
 * values worked out by hand and identities: solve and inv of a 2 x 2 system, det and slogdet
 * (with a negative and a zero determinant), cholesky of a known factor, Q R = A with Q^T Q = I,
 * the singular values and eigenvalues of a diagonal-plus-rank-one matrix, lstsq of an
 * overdetermined line fit, float32 results, a batch, and the errors: singular, indefinite,
 * non-square, integer dtype, and a refused call that would cut a tensor from the graph.
 */
#include "check.h"

static em_tensor *mat(const double *v, int64_t rows, int64_t cols, em_dtype dt) {
  int64_t sizes[2] = {rows, cols};
  return em_from_buffer(v, EM_FLOAT64, 2, sizes, dt, 0);
}

static double at(const em_tensor *t, int64_t i) {
  em_tensor *d = em_to_dtype(t, EM_FLOAT64);
  double v = ((const double *)em_data_ptr(d))[i];
  em_release(d);
  return v;
}

static void test_solve_inv_det(void) {
  const double a[4] = {2, 1, 1, 3}, b[2] = {3, 5};
  em_tensor *A = mat(a, 2, 2, EM_FLOAT64), *B = mat(b, 2, 1, EM_FLOAT64);
  em_tensor *x = em_linalg_solve(A, B); /* 2x + y = 3, x + 3y = 5: x = 4/5, y = 7/5 */
  CHECK(x != NULL && check_close(at(x, 0), 0.8, 1e-12) && check_close(at(x, 1), 1.4, 1e-12));
  em_tensor *inv = em_linalg_inv(A); /* 1/5 [[3, -1], [-1, 2]] */
  CHECK(inv != NULL && check_close(at(inv, 0), 0.6, 1e-12) && check_close(at(inv, 1), -0.2, 1e-12) &&
        check_close(at(inv, 3), 0.4, 1e-12));
  em_tensor *det = em_linalg_det(A);
  CHECK(det != NULL && det->ndim == 0 && check_close(at(det, 0), 5, 1e-12));
  const double n[4] = {0, 1, 1, 0};
  em_tensor *N = mat(n, 2, 2, EM_FLOAT32), *s = NULL, *l = NULL;
  CHECK(em_linalg_slogdet(N, &s, &l) == 0 && s->dtype_id == EM_FLOAT32 && at(s, 0) == -1 &&
        check_close(at(l, 0), 0, 1e-7));
  em_release(s);
  em_release(l);
  const double z[4] = {1, 2, 2, 4};
  em_tensor *Z = mat(z, 2, 2, EM_FLOAT64);
  CHECK(em_linalg_slogdet(Z, &s, &l) == 0 && at(s, 0) == 0 && at(l, 0) == -INFINITY);
  em_release(s);
  em_release(l);
  em_tensor *dz = em_linalg_det(Z);
  CHECK(dz != NULL && at(dz, 0) == 0);
  CHECK_ERROR(em_linalg_inv(Z) == NULL, "inv: the matrix is singular");
  CHECK_ERROR(em_linalg_solve(Z, B) == NULL, "solve: the matrix is singular");
  em_release(dz);
  em_release(Z);
  em_release(N);
  em_release(det);
  em_release(inv);
  em_release(x);
  em_release(B);
  em_release(A);
}

static void test_cholesky_qr(void) {
  /* L = [[2, 0], [1, 3]]: L L^T = [[4, 2], [2, 10]] */
  const double a[4] = {4, 2, 2, 10};
  em_tensor *A = mat(a, 2, 2, EM_FLOAT64);
  em_tensor *L = em_linalg_cholesky(A, 0), *U = em_linalg_cholesky(A, 1);
  CHECK(L && at(L, 0) == 2 && at(L, 1) == 0 && check_close(at(L, 2), 1, 1e-14) &&
        check_close(at(L, 3), 3, 1e-14));
  CHECK(U && at(U, 2) == 0 && check_close(at(U, 1), 1, 1e-14));
  const double ind[4] = {1, 2, 2, 1};
  em_tensor *I = mat(ind, 2, 2, EM_FLOAT64);
  CHECK_ERROR(em_linalg_cholesky(I, 0) == NULL, "cholesky: the matrix is not positive-definite");
  const double q3[6] = {1, 2, 3, 4, 5, 6};
  em_tensor *M = mat(q3, 3, 2, EM_FLOAT64), *Q = NULL, *R = NULL;
  CHECK(em_linalg_qr(M, 0, &Q, &R) == 0 && Q->sizes[0] == 3 && Q->sizes[1] == 2 &&
        R->sizes[0] == 2 && R->sizes[1] == 2);
  em_tensor *Qt = em_t(Q), *QR = em_matmul(Q, R), *QtQ = em_matmul(Qt, Q);
  int ok = QR != NULL && QtQ != NULL;
  for (int i = 0; ok && i < 6; i++) ok = check_close(at(QR, i), q3[i], 1e-12);
  for (int i = 0; ok && i < 4; i++) ok = check_close(at(QtQ, i), i == 0 || i == 3, 1e-12);
  CHECK(ok && at(R, 2) == 0);
  em_release(QtQ);
  em_release(Qt);
  em_release(QR);
  em_release(Q);
  em_release(R);
  em_release(M);
  em_release(I);
  em_release(U);
  em_release(L);
  em_release(A);
}

static void test_svd_eigh_lstsq(void) {
  const double a[4] = {3, 0, 0, -2};
  em_tensor *A = mat(a, 2, 2, EM_FLOAT64), *U = NULL, *S = NULL, *V = NULL;
  CHECK(em_linalg_svd(A, 1, 1, &U, &S, &V) == 0 && check_close(at(S, 0), 3, 1e-14) &&
        check_close(at(S, 1), 2, 1e-14));
  em_release(U);
  em_release(S);
  em_release(V);
  CHECK(em_linalg_svd(A, 0, 0, NULL, &S, NULL) == 0 && S->sizes[0] == 2);
  em_release(S);
  em_tensor *W = NULL, *E = NULL;
  CHECK(em_linalg_eigh(A, 0, 1, &W, &E) == 0 && at(W, 0) == -2 && at(W, 1) == 3 &&
        fabs(at(E, 1)) == 1);
  em_release(W);
  em_release(E);
  /* y = 1 + 2 t through (0, 1), (1, 3), (2, 5), (3, 7): exact, so the fit is too. */
  const double t[8] = {1, 0, 1, 1, 1, 2, 1, 3}, y[4] = {1, 3, 5, 7};
  em_tensor *T = mat(t, 4, 2, EM_FLOAT64), *Y = mat(y, 4, 1, EM_FLOAT64);
  em_tensor *c = em_linalg_lstsq(T, Y, -1);
  CHECK(c && c->sizes[0] == 2 && check_close(at(c, 0), 1, 1e-12) && check_close(at(c, 1), 2, 1e-12));
  em_release(c);
  em_release(Y);
  em_release(T);
  em_release(A);
}

static void test_batch_and_errors(void) {
  const double a[8] = {2, 0, 0, 2, 1, 1, 0, 1};
  int64_t sizes[3] = {2, 2, 2};
  em_tensor *A = em_from_buffer(a, EM_FLOAT64, 3, sizes, EM_FLOAT64, 0);
  em_tensor *d = em_linalg_det(A);
  CHECK(d && d->ndim == 1 && d->sizes[0] == 2 && at(d, 0) == 4 && at(d, 1) == 1);
  em_release(d);
  const double r[6] = {1, 2, 3, 4, 5, 6};
  em_tensor *R = mat(r, 2, 3, EM_FLOAT64);
  CHECK_ERROR(em_linalg_inv(R) == NULL, "inv: expected square matrices, got 2 x 3");
  em_tensor *Ri = mat(r, 2, 2, EM_INT64);
  CHECK_ERROR(em_linalg_det(Ri) == NULL, "det: expected float32 or float64 the input, got int64");
  em_tensor *G = mat(a, 2, 2, EM_FLOAT64);
  em_set_requires_grad(G, 1);
  CHECK_ERROR(em_linalg_inv(G) == NULL, "inv: its gradient is defined by ember.linalg in Lua");
  int prev = em_set_grad_enabled(0);
  em_tensor *gi = em_linalg_inv(G);
  CHECK(gi != NULL && at(gi, 0) == 0.5);
  em_set_grad_enabled(prev);
  em_release(gi);
  em_release(G);
  em_release(Ri);
  em_release(R);
  em_release(A);
}

int main(void) {
  test_solve_inv_det();
  test_cholesky_qr();
  test_svd_eigh_lstsq();
  test_batch_and_errors();
  return check_report();
}
