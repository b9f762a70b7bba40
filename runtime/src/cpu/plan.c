/*
 * plan.c: the CPU's entry of em_device_plan_get (diagnostics.c): which kernels its products
 * take on this processor, as gemm.c and gemm_bf16.c decide them.
 */
#include "../diagnostics.h"
#include "gemm_bf16.h"
#include "sgemm.h"

void em_cpu_plan(em_device_plan *out) {
  em_plan_add(out, "matmul.float32", "openblas");
  em_plan_add(out, "matmul.float64", "openblas");
  em_plan_add(out, "matmul.float16", "via-float32");
  int path = em_bf16_gemm_path();
  em_plan_add(out, "matmul.bfloat16",
              path == EM_BF16_AMX      ? "amx"
              : path == EM_BF16_AVX512 ? "avx512-bf16"
              : path < 0               ? "error (EMBER_CPU_BF16)"
                                       : "via-float32");
  em_plan_add(out, "conv.float32", em_sgemm_available() ? "avx512-sgemm" : "openblas");
}
