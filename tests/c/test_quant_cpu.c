/*
 * test_quant_cpu.c: the CPU quantized Linear (runtime/src/quant/cpu, em_quant_cpu_linear) on
 * every format and every path this CPU has (VNNI, AVX2, portable; forced with EMBER_QUANT_CPU),
 * against dequantize-then-matmul in float64 with plain loops.
 *
 * The tolerance is the kernels' documented error (quant_cpu.h): activations rounded to int8 per
 * 32 are off by at most amax / 254 each, so an output is off by at most
 * sum_b amax_b / 254 * sum_{j in b} |w_j|, plus float32 summation, bounded here by
 * (blocks + 8) * 2^-23 * sum |x| |w|. Shapes: M = 1, 3, 9; K one block, many blocks, several
 * chunks; N from 1 to 1000 (partial panels); adversarial activations (zeros, a huge outlier,
 * NaN) and weights (zeros, an outlier block); errors for K not whole blocks.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "../../runtime/src/quant/quant_cpu.h"
#include "check.h"

static uint64_t rng = 0x243F6A8885A308D3ull;
static double uniform(void) { /* [0, 1) */
  rng = rng * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(rng >> 11) / 9007199254740992.0;
}

typedef struct fmt { int format; int64_t group; int symmetric; const char *name; } fmt;
static const fmt formats[] = {
  {EM_QUANT_Q8_0, 0, 0, "q8_0"}, {EM_QUANT_Q4_0, 0, 0, "q4_0"}, {EM_QUANT_Q4_1, 0, 0, "q4_1"},
  {EM_QUANT_Q4_K, 0, 0, "q4_k"}, {EM_QUANT_Q6_K, 0, 0, "q6_k"},
  {EM_QUANT_AFFINE8, 32, 0, "int8 g32"}, {EM_QUANT_AFFINE8, 128, 1, "int8 g128 sym"},
  {EM_QUANT_AFFINE4, 64, 0, "int4 g64"}, {EM_QUANT_AFFINE4, 32, 1, "int4 g32 sym"},
  {EM_QUANT_AFFINE4, 128, 0, "int4 g128"},
};

enum { X_RANDOM, X_ZERO, X_OUTLIER, X_NAN };

/* One product on the current path, checked element by element; returns the failures. */
static int run_case(const fmt *f, int64_t m, int64_t n, int64_t k, int xkind, int wouter) {
  int64_t be, bb;
  if (em_quant_block_size(f->format, f->group, f->symmetric, &be, &bb) != 0) return 1;
  float *x = malloc(sizeof(float) * (size_t)(m * k)), *wf = malloc(sizeof(float) * (size_t)(n * k));
  float *wd = malloc(sizeof(float) * (size_t)(n * k)), *out = malloc(sizeof(float) * (size_t)(m * n));
  uint8_t *w = malloc((size_t)(n * (k / be) * bb));
  for (int64_t i = 0; i < m * k; i++) x[i] = xkind == X_ZERO ? 0.0f : (float)(uniform() * 4 - 2);
  if (xkind == X_OUTLIER) x[k / 2] = 1e6f;
  if (xkind == X_NAN) x[(m - 1) * k + k - 1] = NAN;
  for (int64_t i = 0; i < n * k; i++) /* magnitudes vary by row so the scales differ */
    wf[i] = (float)((uniform() * 2 - 1) * (1 + (double)(i / k % 7)));
  if (wouter) { wf[3] = 300.0f; for (int64_t j = 0; j < k && n > 1; j++) wf[k + j] = 0.0f; }
  int fails = 0;
  if (em_quant_quantize(f->format, f->group, f->symmetric, wf, n * k, w) != 0) fails++;
  /* K-quants: random scale bytes too, so every bit of the packed scales is exercised */
  int64_t nblk = n * (k / be);
  for (int64_t b = 0; b < nblk && !wouter; b++) {
    if (f->format == EM_QUANT_Q4_K) for (int j = 4; j < 16; j++) w[b * bb + j] = (uint8_t)(uniform() * 256);
    if (f->format == EM_QUANT_Q6_K) for (int j = 192; j < 208; j++) w[b * bb + j] = (uint8_t)(uniform() * 256);
  }
  if (em_quant_dequantize(f->format, f->group, f->symmetric, w, n * k, wd) != 0) fails++;
  for (int64_t i = 0; i < m * n; i++) out[i] = -12345.0f;
  if (em_quant_cpu_linear(x, m, k, w, n, f->format, f->group, f->symmetric, out) != 0) {
    fprintf(stderr, "%s: %s\n", f->name, em_last_error());
    fails++;
  }
  for (int64_t i = 0; i < m && !fails; i++)
    for (int64_t j = 0; j < n; j++) {
      const float *xr = x + i * k, *wr = wd + j * k;
      double exact = 0, bound = 0, mag = 0;
      int nan = 0;
      for (int64_t b = 0; b < k / 32; b++) {
        double amax = 0, wabs = 0;
        for (int t = 0; t < 32; t++) {
          double xv = xr[b * 32 + t], wv = wr[b * 32 + t];
          if (isnan(xv)) nan = 1;
          exact += xv * wv;
          amax = fmax(amax, fabs(xv));
          wabs += fabs(wv);
          mag += fabs(xv * wv);
        }
        bound += amax / 254.0 * wabs * 1.0001;
      }
      bound += (double)(k / 32 + 8) * ldexp(1.0, -23) * mag + 1e-30;
      double got = out[i * n + j];
      int ok = nan ? isnan(got) || wd[j * k + k - 1] == 0 : fabs(got - exact) <= bound;
      if (!ok) {
        if (fails < 3)
          fprintf(stderr, "%s m %lld n %lld k %lld [%lld, %lld]: %.9g, float64 %.9g (bound %.3g)\n",
                  f->name, (long long)m, (long long)n, (long long)k, (long long)i, (long long)j,
                  got, exact, bound);
        fails++;
      }
    }
  free(x); free(wf); free(wd); free(out); free(w);
  return fails;
}

static void all_formats(const char *path) {
  for (size_t fi = 0; fi < sizeof formats / sizeof formats[0]; fi++) {
    const fmt *f = &formats[fi];
    int64_t be, bb;
    em_quant_block_size(f->format, f->group, f->symmetric, &be, &bb);
    int bad = 0;
    bad += run_case(f, 1, 37, be, X_RANDOM, 0);            /* M = 1, K one block */
    bad += run_case(f, 1, 37, 3 * be, X_RANDOM, 0);        /* K three blocks */
    bad += run_case(f, 3, 16, 8 * 256, X_RANDOM, 0);       /* K many blocks, two chunks */
    bad += run_case(f, 9, 21, 1024 + 256, X_RANDOM, 0);    /* a partial chunk, 4 + 4 + 1 rows */
    bad += run_case(f, 1, 1000, be, X_RANDOM, 0);          /* large N */
    bad += run_case(f, 1, 40, 1280, X_RANDOM, 0);          /* batch 1: 16-block groups and a tail */
    bad += run_case(f, 4, 33, 1280, X_RANDOM, 0);
    bad += run_case(f, 2, 5, 512, X_ZERO, 0);
    bad += run_case(f, 3, 17, 512, X_OUTLIER, 1);          /* outliers in x and in W */
    bad += run_case(f, 2, 19, 512, X_NAN, 0);
    if (bad) fprintf(stderr, "path %s, format %s: %d failures\n", path, f->name, bad);
    CHECK(bad == 0);
  }
}

int main(void) {
  const char *paths[] = {"portable", "avx2", "vnni"};
  int tested = 0;
  for (int p = 0; p < 3; p++) {
    if (!em_quant_cpu_has(paths[p])) { printf("path %s: not on this CPU, skipped\n", paths[p]); continue; }
    setenv("EMBER_QUANT_CPU", paths[p], 1);
    CHECK(em_quant_cpu_path() != NULL && strcmp(em_quant_cpu_path(), paths[p]) == 0);
    for (int t = 1; t <= 2; t++) { em_set_num_threads(t); all_formats(paths[p]); }
    tested++;
  }
  CHECK(tested >= 1);
  /* the default is the best path the CPU has */
  unsetenv("EMBER_QUANT_CPU");
  CHECK(strcmp(em_quant_cpu_path(), em_quant_cpu_has("vnni") ? "vnni" : em_quant_cpu_has("avx2") ? "avx2" : "portable") == 0);

  float x[64] = {0}, out[4];
  uint8_t w[4 * 2 * 34] = {0};
  CHECK_ERROR(em_quant_cpu_linear(x, 1, 48, w, 1, EM_QUANT_Q8_0, 0, 0, out),
              "expected k to be a multiple of the block (32 weights), got 48");
  CHECK_ERROR(em_quant_cpu_linear(x, 1, 32, w, 1, EM_QUANT_Q4_K, 0, 0, out),
              "multiple of the block (256 weights), got 32");
  CHECK_ERROR(em_quant_cpu_linear(x, 1, 64, w, 1, EM_QUANT_AFFINE8, 48, 0, out),
              "expected a group of 32, 64 or 128, got 48");
  CHECK_ERROR(em_quant_cpu_linear(x, 1, 64, w, 1, 99, 0, 0, out), "unknown format 99");
  setenv("EMBER_QUANT_CPU", "sse9", 1);
  CHECK_ERROR(em_quant_cpu_linear(x, 1, 64, w, 1, EM_QUANT_Q8_0, 0, 0, out),
              "expected EMBER_QUANT_CPU to be vnni, avx2 or portable, got 'sse9'");
  unsetenv("EMBER_QUANT_CPU");
  /* K = 0: the empty sum */
  out[0] = 7;
  CHECK(em_quant_cpu_linear(x, 1, 0, w, 1, EM_QUANT_Q8_0, 0, 0, out) == 0 && out[0] == 0);
  return check_report();
}
