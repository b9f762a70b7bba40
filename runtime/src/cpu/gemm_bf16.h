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

#endif
