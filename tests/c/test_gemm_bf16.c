/*
 * test_gemm_bf16.c: the CPU's bfloat16 product (runtime/src/cpu/gemm_bf16.c) called directly,
 * for what the Lua specs cannot reach through the ops: a float32 output (the kernel's "keep
 * float32" epilogue, for callers that want the unrounded product) and 4-D operands with their
 * own batch strides, on every path this CPU has (AMX, AVX-512 BF16), against a double
 * reference of the same bf16 inputs. A CPU without bf16 instructions only checks that the
 * path query says so.
 */
#include <stdlib.h>

#include "../../runtime/src/cpu/gemm_bf16.h"
#include "check.h"

/* A deterministic value in [-2, 2) with 8 significant bits: exact in bfloat16. */
static uint32_t seed = 12345;
static float next_value(void) {
  seed = seed * 1664525u + 1013904223u;
  return (float)((int)(seed >> 24) - 128) / 64.0f;
}

static em_tensor *random_bf16(int ndim, const int64_t *sizes) {
  em_tensor *t = em_empty(ndim, sizes, EM_BFLOAT16, EM_CPU);
  int64_t n = em_numel(t);
  uint16_t *p = em_data_ptr(t);
  for (int64_t i = 0; i < n; i++) p[i] = em_float_to_bf16(next_value());
  return t;
}

/* out [B1, B2, M, N] float32 = a @ b (alpha 1.5, beta 0.5 over out's previous values) on
 * `path`, with a [B2, B1, M, K] transposed in its batch dims and b [1, B2, K, N] broadcast
 * along B1 (stride 0), against double loops. */
static void check_path(int path, int64_t B1, int64_t B2, int64_t M, int64_t K, int64_t N) {
  int64_t as_[4] = {B2, B1, M, K}, bs_[4] = {1, B2, K, N}, os_[4] = {B1, B2, M, N};
  em_tensor *ab = random_bf16(4, as_), *bb = random_bf16(4, bs_);
  em_tensor *out = em_empty(4, os_, EM_FLOAT32, EM_CPU);
  int64_t n = em_numel(out);
  float *o = em_data_ptr(out);
  for (int64_t i = 0; i < n; i++) o[i] = next_value();
  float *prev = malloc((size_t)n * sizeof *prev);
  memcpy(prev, o, (size_t)n * sizeof *prev);
  /* a viewed as [B1, B2, M, K]; b as [B1, B2, K, N] with outer stride 0 */
  int64_t av_sizes[4] = {B1, B2, M, K}, av_strides[4] = {M * K, B1 * M * K, K, 1};
  int64_t bv_sizes[4] = {B1, B2, K, N}, bv_strides[4] = {0, K * N, N, 1};
  em_tensor *a = em_tensor_view_of(ab, 4, av_sizes, av_strides, 0);
  em_tensor *b = em_tensor_view_of(bb, 4, bv_sizes, bv_strides, 0);
  CHECK(em_bf16_gemm(path, out, a, b, 1.5, 0.5) == 0);
  const uint16_t *pa = em_data_ptr(ab), *pb = em_data_ptr(bb);
  double worst = 0;
  for (int64_t z1 = 0; z1 < B1; z1++)
    for (int64_t z2 = 0; z2 < B2; z2++)
      for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
          double s = 0, mag = 0;
          for (int64_t k = 0; k < K; k++) {
            double x = em_bf16_to_float(pa[((z2 * B1 + z1) * M + i) * K + k]);
            double y = em_bf16_to_float(pb[(z2 * K + k) * N + j]);
            s += x * y;
            mag += fabs(x * y);
          }
          int64_t e = ((z1 * B2 + z2) * M + i) * N + j;
          double want = 1.5 * s + 0.5 * prev[e];
          double err = fabs(o[e] - want) / (1e-6 * (1.5 * mag + 1));
          if (err > worst) worst = err;
        }
  /* float32 accumulation: within a few ulps of the sum of magnitudes */
  if (worst > 1) fprintf(stderr, "path %d %lldx%lldx%lldx%lldx%lld: error %g\n", path,
                         (long long)B1, (long long)B2, (long long)M, (long long)K,
                         (long long)N, worst);
  CHECK(worst <= 1);
  free(prev);
  em_release(a);
  em_release(b);
  em_release(ab);
  em_release(bb);
  em_release(out);
}

int main(void) {
  setenv("EMBER_CPU_BF16", "avx512", 1);
  int avx = em_bf16_gemm_path();
  unsetenv("EMBER_CPU_BF16");
  int best = em_bf16_gemm_path();
  CHECK(avx == EM_BF16_PORTABLE || avx == EM_BF16_AVX512);
  CHECK(best >= avx);
  int paths[2] = {avx, best};
  for (int p = 0; p < 2; p++) {
    if (paths[p] == EM_BF16_PORTABLE || (p == 1 && best == avx)) continue;
    check_path(paths[p], 2, 3, 5, 7, 9);
    check_path(paths[p], 1, 2, 33, 300, 70);  /* K slices of 256, tile edges */
    check_path(paths[p], 3, 1, 64, 32, 32);   /* whole tiles */
  }
  setenv("EMBER_CPU_BF16", "bogus", 1);
  CHECK(em_bf16_gemm_path() == -1);
  unsetenv("EMBER_CPU_BF16");
  printf("%d passed, %d failed\n", check_passed, check_failed);
  return check_failed != 0;
}
