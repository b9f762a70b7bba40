/*
 * gemm_bf16.h: the CPU's bfloat16 matrix product on the processor's bf16 instructions
 * (gemm_bf16.c): AMX tiles (TDPBF16PS) where the CPU and the kernel offer them, else AVX-512
 * BF16 (VDPBF16PS). Both multiply bf16 pairs and accumulate in float32 over the whole K, and
 * the result is rounded once, to bfloat16 (nearest even, as dtype.c) or kept in float32.
 * The instructions count subnormal inputs and products as zero, as bf16 hardware does.
 *
 * EMBER_CPU_BF16 chooses, read on every product (tests compare the paths in one process):
 *   unset, "1" or "auto": the best the CPU has; "amx": the same;
 *   "avx512": AVX-512 BF16 even where AMX is present;
 *   "0": neither: the portable path (convert to float32, sgemm, round back).
 * Any other value is an error.
 */
#ifndef EMBER_CPU_GEMM_BF16_H
#define EMBER_CPU_GEMM_BF16_H

#include "cpu.h"

typedef enum em_bf16_path {
  EM_BF16_PORTABLE = 0, /* through float32 (gemm.c) */
  EM_BF16_AVX512 = 1,   /* VDPBF16PS */
  EM_BF16_AMX = 2       /* AMX tiles */
} em_bf16_path;

/* The path a product takes now (CPU features, then EMBER_CPU_BF16); -1 with an error for a
 * misspelt EMBER_CPU_BF16. */
int em_bf16_gemm_path(void);
/* The gemm slot's product (3-D or 4-D operands, backend.h) for bfloat16 a and b, out
 * bfloat16 or float32, K > 0, on `path` (not EM_BF16_PORTABLE). 0, or -1 with an error. */
int em_bf16_gemm(int path, em_tensor *out, const em_tensor *a, const em_tensor *b, double alpha,
                 double beta);

/* ---- packed operands, for callers that own their packing (the convolutions, conv_bf16.c) ----
 * As sgemm.h does for float32. Layouts (uint16 bfloat16 values):
 *  - packed A [M, K]: row-major, K zero-padded to em_bf16_kp(K) (a multiple of 32), rows to a
 *    multiple of 32; em_bf16_a_size(M, K) values.
 *  - packed B [K, N]: panels of 16 columns of em_bf16_kp(K) / 2 rows of (k, k+1) pairs,
 *    columns padded to a multiple of 32; em_bf16_b_size(K, N) values.
 * The pack functions read a (M x K) / b (K x N) through row and column strides rs, cs (in
 * elements) and need a bf16 path (not EM_BF16_PORTABLE). */
int64_t em_bf16_kp(int64_t K);
int64_t em_bf16_a_size(int64_t M, int64_t K);
int64_t em_bf16_b_size(int64_t K, int64_t N);
/* Floats of scratch em_bf16_gemm_packed needs. */
int64_t em_bf16_scratch_size(void);
void em_bf16_pack_a(const uint16_t *a, int64_t rs, int64_t cs, int64_t M, int64_t K,
                    uint16_t *ap);
void em_bf16_pack_b(const uint16_t *b, int64_t rs, int64_t cs, int64_t K, int64_t N,
                    uint16_t *bp);
/* The same layouts from a matrix given by its rows: rows[i] points at the contiguous values of
 * row i (K of them for A [M, K], N for B [K, N]); the rows may lie anywhere, overlapping too
 * (a convolution's columns are shifted windows of one padded image). */
void em_bf16_pack_a_rows(const uint16_t *const *rows, int64_t M, int64_t K, uint16_t *ap);
void em_bf16_pack_b_rows(const uint16_t *const *rows, int64_t K, int64_t N, uint16_t *bp);
/* B [K, N] given as its transpose, rows of K contiguous values ld apart: element (k, n) at
 * bt[n * ld + k] (a weight gradient's cols^T). */
void em_bf16_pack_b_t(const uint16_t *bt, int64_t ld, int64_t K, int64_t N, uint16_t *bp);
/* out [M, N] (row stride ldo, bfloat16 or, with out_f32, float32) = beta * out + row_bias[i]
 * + A @ B on packed operands, on the calling thread, accumulated in float32 and rounded once.
 * beta == 0 does not read out; row_bias (float32) may be NULL; K > 0. */
void em_bf16_gemm_packed(int path, int64_t M, int64_t N, int64_t K, const uint16_t *ap,
                         const uint16_t *bp, float beta, const float *row_bias, void *out,
                         bool out_f32, int64_t ldo, float *scratch);

#endif
