/*
 * sgemm.h: a packed single-precision matrix product with an AVX-512 micro-kernel (sgemm.c),
 * for the kernels that want to own their packing (the convolutions write im2col columns
 * straight into the packed layout).
 *
 * Layouts (row-major, floats):
 *  - packed A [M, K]: panels of EM_SG_MR rows; panel i holds A[i*MR .. i*MR+MR-1][0..K-1]
 *    column by column (K groups of MR values). Rows past M are zero.
 *  - packed B [K, N]: panels of EM_SG_NR columns; element (k, n) is at
 *    (n / NR) * NR * K + k * NR + n % NR. Columns past N may hold anything finite.
 *
 * Why not OpenBLAS: where the CPU has AVX-512, this kernel runs the convolutions' products at
 * about twice OpenBLAS's speed in the configuration Ember is measured in (OpenBLAS pinned to
 * its Haswell kernels by OPENBLAS_CORETYPE), and the packing lets im2col skip a pass.
 * Without AVX-512 (em_sgemm_available() false) callers use BLAS.
 */
#ifndef EMBER_CPU_SGEMM_H
#define EMBER_CPU_SGEMM_H

#include <stdbool.h>
#include <stdint.h>

enum { EM_SG_MR = 8, EM_SG_NR = 32 };

bool em_sgemm_available(void);

static inline int64_t em_sg_round(int64_t n, int64_t to) { return (n + to - 1) / to * to; }
/* Floats in packed operands. */
static inline int64_t em_sgemm_a_size(int64_t M, int64_t K) { return em_sg_round(M, EM_SG_MR) * K; }
static inline int64_t em_sgemm_b_size(int64_t K, int64_t N) { return em_sg_round(N, EM_SG_NR) * K; }
/* Where element (k, n) of a packed B with K rows lives. */
static inline int64_t em_sgemm_b_at(int64_t K, int64_t k, int64_t n) {
  return (n / EM_SG_NR) * EM_SG_NR * K + k * EM_SG_NR + n % EM_SG_NR;
}

/* Packs op(A) [M, K] (ta: A is stored [K, M], lda apart) / op(B) [K, N] (tb: stored [N, K]). */
void em_sgemm_pack_a(bool ta, int64_t M, int64_t K, const float *A, int64_t lda, float *ap);
void em_sgemm_pack_b(bool tb, int64_t K, int64_t N, const float *B, int64_t ldb, float *bp);

/* C [M, N] (ldc) = beta * C + row_bias[i] + A @ B on packed operands, on the calling thread.
 * beta == 0 does not read C; row_bias may be NULL. Needs em_sgemm_available(). */
void em_sgemm_packed(int64_t M, int64_t N, int64_t K, const float *ap, const float *bp,
                     float beta, const float *row_bias, float *C, int64_t ldc);

#endif
