/*
 * lapack.c: the CPU kernels of the matrix decompositions (ember.linalg), one matrix at a time,
 * through the LAPACK that Debian's OpenBLAS carries (its Fortran symbols: dgesv_, dgetrf_,
 * dpotrf_, dgeqrf_/dorgqr_, dgesdd_, dsyevd_, dgelsy_).
 *
 * Every kernel takes and gives row-major float64 matrices; LAPACK is column-major, so each
 * kernel copies its input into a column-major work buffer (LAPACK overwrites it anyway) and
 * copies results back transposed. float32 tensors are computed here in float64 and rounded
 * once by the op (ops/linalg_decomp.c), as Ember does elsewhere.
 *
 * A return of 0 is success, > 0 LAPACK's "info" (singular matrix, not positive-definite, no
 * convergence: the op words the message), -1 an allocation failure (message set).
 */
#include <stdlib.h>
#include <string.h>

#include "lapack.h"

/* Fortran LAPACK, LP64 (32-bit int), with gfortran's hidden lengths of character arguments. */
extern void dgesv_(const int *n, const int *nrhs, double *a, const int *lda, int *ipiv,
                   double *b, const int *ldb, int *info);
extern void dgetrf_(const int *m, const int *n, double *a, const int *lda, int *ipiv, int *info);
extern void dpotrf_(const char *uplo, const int *n, double *a, const int *lda, int *info,
                    size_t uplo_len);
extern void dgeqrf_(const int *m, const int *n, double *a, const int *lda, double *tau,
                    double *work, const int *lwork, int *info);
extern void dorgqr_(const int *m, const int *n, const int *k, double *a, const int *lda,
                    const double *tau, double *work, const int *lwork, int *info);
extern void dgesdd_(const char *jobz, const int *m, const int *n, double *a, const int *lda,
                    double *s, double *u, const int *ldu, double *vt, const int *ldvt,
                    double *work, const int *lwork, int *iwork, int *info, size_t jobz_len);
extern void dsyevd_(const char *jobz, const char *uplo, const int *n, double *a, const int *lda,
                    double *w, double *work, const int *lwork, int *iwork, const int *liwork,
                    int *info, size_t jobz_len, size_t uplo_len);
extern void dgelsy_(const int *m, const int *n, const int *nrhs, double *a, const int *lda,
                    double *b, const int *ldb, int *jpvt, const double *rcond, int *rank,
                    double *work, const int *lwork, int *info);

/* Row-major [rows, cols] (leading dimension cols) to column-major with leading dimension ld. */
static void to_col(const double *src, int rows, int cols, double *dst, int ld) {
  for (int i = 0; i < rows; i++)
    for (int j = 0; j < cols; j++) dst[i + (size_t)j * ld] = src[(size_t)i * cols + j];
}

/* Column-major (leading dimension ld) to row-major [rows, cols]. */
static void from_col(const double *src, int ld, int rows, int cols, double *dst) {
  for (int i = 0; i < rows; i++)
    for (int j = 0; j < cols; j++) dst[(size_t)i * cols + j] = src[i + (size_t)j * ld];
}

static void *work_alloc(size_t count, size_t size) {
  void *p = calloc(count > 0 ? count : 1, size);
  if (p == NULL) em_error("linalg: out of memory for a LAPACK work buffer");
  return p;
}

static int max1(int v) { return v > 1 ? v : 1; }

int em_lapack_solve(int n, int k, const double *a, double *b) {
  double *ca = work_alloc((size_t)n * n, sizeof(double));
  double *cb = work_alloc((size_t)n * k, sizeof(double));
  int *ipiv = work_alloc((size_t)n, sizeof(int));
  int info = -1;
  if (ca && cb && ipiv) {
    int ld = max1(n);
    to_col(a, n, n, ca, ld);
    to_col(b, n, k, cb, ld);
    dgesv_(&n, &k, ca, &ld, ipiv, cb, &ld, &info);
    if (info == 0) from_col(cb, ld, n, k, b);
  }
  free(ca);
  free(cb);
  free(ipiv);
  return info;
}

int em_lapack_slogdet(int n, const double *a, double *sign, double *logabs) {
  double *ca = work_alloc((size_t)n * n, sizeof(double));
  int *ipiv = work_alloc((size_t)n, sizeof(int));
  if (ca == NULL || ipiv == NULL) {
    free(ca);
    free(ipiv);
    return -1;
  }
  int ld = max1(n), info = 0;
  to_col(a, n, n, ca, ld);
  if (n > 0) dgetrf_(&n, &n, ca, &ld, ipiv, &info);
  double s = 1, l = 0;
  if (info > 0) { /* an exact zero pivot: det is 0 */
    s = 0;
    l = -__builtin_inf();
  } else {
    for (int i = 0; i < n; i++) {
      double d = ca[i + (size_t)i * ld];
      if (ipiv[i] != i + 1) s = -s;
      if (d < 0) s = -s;
      l += __builtin_log(d < 0 ? -d : d);
    }
  }
  *sign = s;
  *logabs = l;
  free(ca);
  free(ipiv);
  return info < 0 ? info : 0;
}

int em_lapack_cholesky(int n, const double *a, int upper, double *out) {
  double *ca = work_alloc((size_t)n * n, sizeof(double));
  if (ca == NULL) return -1;
  int ld = max1(n), info = 0;
  to_col(a, n, n, ca, ld);
  if (n > 0) dpotrf_(upper ? "U" : "L", &n, ca, &ld, &info, 1);
  if (info == 0) {
    from_col(ca, ld, n, n, out);
    /* LAPACK leaves the other triangle as it found it: zero it. */
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++)
        if (upper ? j < i : j > i) out[(size_t)i * n + j] = 0;
  }
  free(ca);
  return info;
}

/* QR of [m, n]: q is [m, kq] and r is [kq, n], kq = m when complete, else min(m, n). */
int em_lapack_qr(int m, int n, const double *a, int complete, double *q, double *r) {
  int k = m < n ? m : n, kq = complete ? m : k;
  int ncol = n > kq ? n : kq, ld = max1(m);
  double *ca = work_alloc((size_t)ld * ncol, sizeof(double));
  double *tau = work_alloc((size_t)max1(k), sizeof(double));
  double *work = NULL;
  int info = -1;
  if (ca == NULL || tau == NULL) goto done;
  to_col(a, m, n, ca, ld);
  info = 0;
  if (k > 0) {
    double query;
    int lwork = -1;
    dgeqrf_(&m, &n, ca, &ld, tau, &query, &lwork, &info);
    int lw2 = -1;
    double query2;
    dorgqr_(&m, &kq, &k, ca, &ld, tau, &query2, &lw2, &info);
    lwork = max1((int)(query > query2 ? query : query2));
    work = work_alloc((size_t)lwork, sizeof(double));
    if (work == NULL) {
      info = -1;
      goto done;
    }
    dgeqrf_(&m, &n, ca, &ld, tau, work, &lwork, &info);
    if (info != 0) goto done;
  }
  /* r: the upper triangle of the factored matrix (first kq rows). */
  for (int i = 0; i < kq; i++)
    for (int j = 0; j < n; j++) r[(size_t)i * n + j] = (j >= i && i < m) ? ca[i + (size_t)j * ld] : 0;
  if (k > 0) {
    int lwork = -1;
    double query;
    dorgqr_(&m, &kq, &k, ca, &ld, tau, &query, &lwork, &info);
    lwork = max1((int)query);
    free(work);
    work = work_alloc((size_t)lwork, sizeof(double));
    if (work == NULL) {
      info = -1;
      goto done;
    }
    dorgqr_(&m, &kq, &k, ca, &ld, tau, work, &lwork, &info);
    if (info != 0) goto done;
    from_col(ca, ld, m, kq, q);
  } else {
    /* No reflector: q is the identity (complete) or empty. */
    for (int i = 0; i < m; i++)
      for (int j = 0; j < kq; j++) q[(size_t)i * kq + j] = i == j;
  }
done:
  free(ca);
  free(tau);
  free(work);
  return info;
}

/* SVD of [m, n]: u [m, ku], s [k], vt [kv, n]; ku = kv = min(m, n), or m and n when full.
 * With compute_uv == 0 only s. */
int em_lapack_svd(int m, int n, const double *a, int full, int compute_uv, double *u, double *s,
                  double *vt) {
  int k = m < n ? m : n;
  if (k == 0) { /* nothing to factor: u and vt are identities of their shapes */
    if (compute_uv) {
      int ku = full ? m : 0, kv = full ? n : 0;
      for (int i = 0; i < m; i++)
        for (int j = 0; j < ku; j++) u[(size_t)i * ku + j] = i == j;
      for (int i = 0; i < kv; i++)
        for (int j = 0; j < n; j++) vt[(size_t)i * n + j] = i == j;
    }
    return 0;
  }
  const char *jobz = !compute_uv ? "N" : full ? "A" : "S";
  int ku = full ? m : k, kv = full ? n : k;
  int lda = max1(m), ldu = max1(m), ldvt = max1(kv);
  double *ca = work_alloc((size_t)lda * n, sizeof(double));
  double *cu = work_alloc((size_t)ldu * ku, sizeof(double));
  double *cvt = work_alloc((size_t)ldvt * n, sizeof(double));
  int *iwork = work_alloc((size_t)8 * k, sizeof(int));
  double *work = NULL;
  int info = -1;
  if (ca == NULL || cu == NULL || cvt == NULL || iwork == NULL) goto done;
  to_col(a, m, n, ca, lda);
  double query;
  int lwork = -1;
  dgesdd_(jobz, &m, &n, ca, &lda, s, cu, &ldu, cvt, &ldvt, &query, &lwork, iwork, &info, 1);
  lwork = max1((int)query);
  work = work_alloc((size_t)lwork, sizeof(double));
  if (work == NULL) goto done;
  dgesdd_(jobz, &m, &n, ca, &lda, s, cu, &ldu, cvt, &ldvt, work, &lwork, iwork, &info, 1);
  if (info == 0 && compute_uv) {
    from_col(cu, ldu, m, ku, u);
    from_col(cvt, ldvt, kv, n, vt);
  }
done:
  free(ca);
  free(cu);
  free(cvt);
  free(iwork);
  free(work);
  return info;
}

/* Eigenvalues (ascending) w [n] and eigenvectors v [n, n] (columns) of a symmetric matrix,
 * reading the lower (or upper) triangle. */
int em_lapack_eigh(int n, const double *a, int upper, int compute_v, double *w, double *v) {
  if (n == 0) return 0;
  int ld = max1(n), info = 0;
  double *ca = work_alloc((size_t)n * n, sizeof(double));
  double *work = NULL;
  int *iwork = NULL;
  if (ca == NULL) return -1;
  to_col(a, n, n, ca, ld);
  const char *jobz = compute_v ? "V" : "N", *uplo = upper ? "U" : "L";
  double query;
  int iquery, lwork = -1, liwork = -1;
  dsyevd_(jobz, uplo, &n, ca, &ld, w, &query, &lwork, &iquery, &liwork, &info, 1, 1);
  lwork = max1((int)query);
  liwork = max1(iquery);
  work = work_alloc((size_t)lwork, sizeof(double));
  iwork = work_alloc((size_t)liwork, sizeof(int));
  if (work == NULL || iwork == NULL) {
    info = -1;
  } else {
    dsyevd_(jobz, uplo, &n, ca, &ld, w, work, &lwork, iwork, &liwork, &info, 1, 1);
    if (info == 0 && compute_v) from_col(ca, ld, n, n, v);
  }
  free(ca);
  free(work);
  free(iwork);
  return info;
}

/* Least squares min ||a x - b|| for a [m, n], b [m, k]: x [n, k] (complete orthogonal
 * factorization with pivoting, gelsy, as PyTorch's CPU default; rank-deficient a gives the
 * minimum-norm solution of its numerical rank at rcond). */
int em_lapack_lstsq(int m, int n, int k, const double *a, const double *b, double rcond,
                    double *x) {
  int ldb = max1(m > n ? m : n), lda = max1(m), info = 0, rank = 0;
  double *ca = work_alloc((size_t)lda * n, sizeof(double));
  double *cb = work_alloc((size_t)ldb * k, sizeof(double));
  int *jpvt = work_alloc((size_t)max1(n), sizeof(int));
  double *work = NULL;
  if (ca == NULL || cb == NULL || jpvt == NULL) {
    info = -1;
    goto done;
  }
  to_col(a, m, n, ca, lda);
  to_col(b, m, k, cb, ldb);
  if (m > 0 && n > 0 && k > 0) {
    double query;
    int lwork = -1;
    dgelsy_(&m, &n, &k, ca, &lda, cb, &ldb, jpvt, &rcond, &rank, &query, &lwork, &info);
    lwork = max1((int)query);
    work = work_alloc((size_t)lwork, sizeof(double));
    if (work == NULL) {
      info = -1;
      goto done;
    }
    dgelsy_(&m, &n, &k, ca, &lda, cb, &ldb, jpvt, &rcond, &rank, work, &lwork, &info);
  } else {
    memset(cb, 0, (size_t)ldb * k * sizeof(double)); /* an empty system: x = 0 */
  }
  if (info == 0) from_col(cb, ldb, n, k, x);
done:
  free(ca);
  free(cb);
  free(jpvt);
  free(work);
  return info;
}
