/*
 * test_gemm_bf16_packed.c: gemm_bf16.h's packed entry points, which the bfloat16 convolutions
 * (cpu/conv_bf16.c) use and no op reaches directly: the packers agree with each other (A from
 * strides and from row pointers; B from strides, from row pointers and from its transpose),
 * and em_bf16_gemm_packed (beta, a float32 row bias, bfloat16 or float32 output, several row
 * and column blocks) agrees with a double reference of the same bf16 inputs, on every path
 * this CPU has. A CPU without bf16 instructions has nothing to check here.
 */
#include <stdlib.h>

#include "../../runtime/src/cpu/gemm_bf16.h"
#include "check.h"

static uint32_t seed = 777;
/* A value in [-2, 2) with 8 significant bits: exact in bfloat16. */
static float next_value(void) {
  seed = seed * 1664525u + 1013904223u;
  return (float)((int)(seed >> 24) - 128) / 64.0f;
}

static uint16_t *random_bf16(int64_t n) {
  uint16_t *p = malloc((size_t)n * sizeof *p);
  for (int64_t i = 0; i < n; i++) p[i] = em_float_to_bf16(next_value());
  return p;
}

static void check_shape(int path, int64_t M, int64_t K, int64_t N) {
  uint16_t *a = random_bf16(M * K), *b = random_bf16(K * N), *bt = malloc((size_t)(K * N) * 2);
  for (int64_t k = 0; k < K; k++)
    for (int64_t n = 0; n < N; n++) bt[n * K + k] = b[k * N + n];
  const uint16_t **arows = malloc((size_t)M * sizeof *arows);
  const uint16_t **brows = malloc((size_t)K * sizeof *brows);
  for (int64_t i = 0; i < M; i++) arows[i] = a + i * K;
  for (int64_t k = 0; k < K; k++) brows[k] = b + k * N;
  int64_t as = em_bf16_a_size(M, K), bs = em_bf16_b_size(K, N);
  uint16_t *ap = calloc((size_t)as, 2), *ap2 = calloc((size_t)as, 2);
  uint16_t *bp = calloc((size_t)bs, 2), *bp2 = calloc((size_t)bs, 2), *bp3 = calloc((size_t)bs, 2);
  em_bf16_pack_a(a, K, 1, M, K, ap);
  em_bf16_pack_a_rows(arows, M, K, ap2);
  em_bf16_pack_b(b, N, 1, K, N, bp);
  em_bf16_pack_b_rows(brows, K, N, bp2);
  em_bf16_pack_b_t(bt, K, K, N, bp3);
  CHECK(memcmp(ap, ap2, (size_t)as * 2) == 0);
  CHECK(memcmp(bp, bp2, (size_t)bs * 2) == 0);
  CHECK(memcmp(bp, bp3, (size_t)bs * 2) == 0);

  float *bias = malloc((size_t)M * sizeof *bias);
  float *scratch = malloc((size_t)em_bf16_scratch_size() * sizeof *scratch);
  for (int64_t i = 0; i < M; i++) bias[i] = next_value();
  float *o32 = malloc((size_t)(M * N) * 4), *prev = malloc((size_t)(M * N) * 4);
  uint16_t *o16 = malloc((size_t)(M * N) * 2);
  for (int64_t i = 0; i < M * N; i++) prev[i] = o32[i] = next_value();
  /* float32: out = 0.5 * out + bias + A @ B; bfloat16: out = bias + A @ B, rounded once */
  em_bf16_gemm_packed(path, M, N, K, ap, bp, 0.5f, bias, o32, true, N, scratch);
  em_bf16_gemm_packed(path, M, N, K, ap, bp, 0, bias, o16, false, N, scratch);
  double worst32 = 0, worst16 = 0;
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double s = bias[i], mag = fabs(bias[i]);
      for (int64_t k = 0; k < K; k++) {
        double x = em_bf16_to_float(a[i * K + k]) * em_bf16_to_float(b[k * N + j]);
        s += x;
        mag += fabs(x);
      }
      int64_t e = i * N + j;
      double e32 = fabs(o32[e] - (s + 0.5 * prev[e])) / (1e-6 * (mag + 1));
      /* one rounding (2^-8 of the value) on top of float32 accumulation */
      double e16 = fabs(em_bf16_to_float(o16[e]) - s) / (fabs(s) / 256 + 1e-6 * (mag + 1));
      if (e32 > worst32) worst32 = e32;
      if (e16 > worst16) worst16 = e16;
    }
  if (worst32 > 1 || worst16 > 1)
    fprintf(stderr, "path %d %lldx%lldx%lld: error %g (float32), %g (bfloat16)\n", path,
            (long long)M, (long long)K, (long long)N, worst32, worst16);
  CHECK(worst32 <= 1);
  CHECK(worst16 <= 1);
  free(a), free(b), free(bt), free(arows), free(brows);
  free(ap), free(ap2), free(bp), free(bp2), free(bp3);
  free(bias), free(scratch), free(o32), free(prev), free(o16);
}

int main(void) {
  setenv("EMBER_CPU_BF16", "avx512", 1);
  int avx = em_bf16_gemm_path();
  unsetenv("EMBER_CPU_BF16");
  int best = em_bf16_gemm_path();
  int paths[2] = {avx, best};
  for (int p = 0; p < 2; p++) {
    if (paths[p] == EM_BF16_PORTABLE || (p == 1 && best == avx)) continue;
    check_shape(paths[p], 5, 7, 9);      /* odd K: the last pair's high half is zero */
    check_shape(paths[p], 33, 300, 70);  /* K slices of 256, tile edges */
    check_shape(paths[p], 100, 64, 300); /* two row blocks (MC = 64), two column blocks */
    check_shape(paths[p], 32, 1, 16);    /* K = 1 */
  }
  printf("%d passed, %d failed\n", check_passed, check_failed);
  return check_failed != 0;
}
