/*
 * lapack.h: the CPU decomposition kernels of ember.linalg (lapack.c), one row-major float64
 * matrix at a time. 0 is success, > 0 LAPACK's info, -1 an allocation failure (message set).
 */
#ifndef EMBER_CPU_LAPACK_H
#define EMBER_CPU_LAPACK_H

#include "../internal.h"

/* b [n, k] := a^-1 b for a [n, n]. */
int em_lapack_solve(int n, int k, const double *a, double *b);
/* sign and log|det| of a [n, n] (sign 0 and -inf for a singular a). */
int em_lapack_slogdet(int n, const double *a, double *sign, double *logabs);
int em_lapack_cholesky(int n, const double *a, int upper, double *out);
int em_lapack_qr(int m, int n, const double *a, int complete, double *q, double *r);
int em_lapack_svd(int m, int n, const double *a, int full, int compute_uv, double *u, double *s,
                  double *vt);
int em_lapack_eigh(int n, const double *a, int upper, int compute_v, double *w, double *v);
int em_lapack_lstsq(int m, int n, int k, const double *a, const double *b, double rcond,
                    double *x);

#endif
