/*
 * bench_matmul.c: em_matmul against a raw cblas_sgemm on square float32 matrices.
 *
 * For n = 64 .. 2048, both sides multiply the same random matrices (values of magnitude 0.5 to
 * 1.5, never zero, so no kernel can shortcut). Ember's time includes what a user pays: the
 * definition's checks, allocating the result and releasing it. OpenBLAS writes into a buffer
 * allocated once. Samples of the two alternate, so that drift in clock speed or in load from
 * other processes hits both alike; each figure is the median of its samples.
 *
 * The ratio column is Ember's throughput over OpenBLAS's (the goal is >= 0.95). The results
 * are compared element by element, so the two sides are known to do the same work.
 *
 * Usage: bench_matmul [threads]   (default: Ember's default thread count)
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ember.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* A deterministic stream of values in [-1.5, -0.5] U [0.5, 1.5]. */
static uint64_t state = 0x9E3779B97F4A7C15ull;
static float next_value(void) {
  state = state * 6364136223846793005ull + 1442695040888963407ull;
  double u = (double)(state >> 11) / 9007199254740992.0; /* [0, 1) */
  double v = 0.5 + u;
  return (float)((state >> 7) & 1 ? v : -v);
}

static em_tensor *random_matrix(int64_t n) {
  int64_t sizes[2] = {n, n};
  em_tensor *t = em_empty(2, sizes, EM_FLOAT32, 0);
  if (t == NULL) return NULL;
  float *p = em_data_ptr(t);
  for (int64_t i = 0; i < n * n; i++) p[i] = next_value();
  return t;
}

typedef struct timing {
  double ember, blas; /* median seconds per product */
  int samples, inner;
} timing;

/* One sample: `inner` products, seconds per product. */
static double sample_ember(const em_tensor *a, const em_tensor *b, int inner, int *failed) {
  double t0 = now();
  for (int i = 0; i < inner; i++) {
    em_tensor *c = em_matmul(a, b);
    if (c == NULL) *failed = 1;
    em_release(c);
  }
  return (now() - t0) / inner;
}

static double sample_blas(int n, const float *a, const float *b, float *c, int inner) {
  double t0 = now();
  for (int i = 0; i < inner; i++)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c,
                n);
  return (now() - t0) / inner;
}

/* Largest relative difference between Ember's product and OpenBLAS's. */
static double compare(const em_tensor *a, const em_tensor *b, const float *ref, int64_t n) {
  em_tensor *c = em_matmul(a, b);
  if (c == NULL) return INFINITY;
  const float *p = em_data_ptr(c);
  double worst = 0;
  for (int64_t i = 0; i < n * n; i++) {
    double d = fabs((double)p[i] - (double)ref[i]) / (fabs((double)ref[i]) + 1e-3);
    if (d > worst || d != d) worst = d != d ? INFINITY : d;
  }
  em_release(c);
  return worst;
}

static int bench(int64_t n, timing *t, double *diff) {
  em_tensor *a = random_matrix(n), *b = random_matrix(n);
  float *ref = aligned_alloc(64, (size_t)(n * n) * sizeof(float) + 64);
  if (a == NULL || b == NULL || ref == NULL) {
    fprintf(stderr, "bench_matmul: %s\n", ref ? em_last_error() : "out of memory");
    return -1;
  }
  const float *pa = em_data_ptr(a), *pb = em_data_ptr(b);
  int failed = 0;
  /* Warm up both (thread pools, caches, the allocator's cache), then size the samples: about
   * 0.2 s per side in all, each sample at least ~2 ms so the clock's resolution is no issue,
   * and at least 5 samples (for big n that is more than 0.2 s, but fewer samples let one
   * disturbed sample move the median). */
  double t1 = 0;
  for (int w = 0; w < 3; w++) {
    t1 = sample_ember(a, b, 1, &failed);
    sample_blas((int)n, pa, pb, ref, 1);
  }
  int inner = t1 < 2e-3 ? (int)(2e-3 / t1) + 1 : 1;
  int samples = (int)(0.2 / (t1 * inner));
  if (samples < 5) samples = 5;
  if (samples > 51) samples = 51;
  double *se = malloc(sizeof(double) * (size_t)samples);
  double *sb = malloc(sizeof(double) * (size_t)samples);
  for (int s = 0; s < samples; s++) {
    se[s] = sample_ember(a, b, inner, &failed);
    sb[s] = sample_blas((int)n, pa, pb, ref, inner);
  }
  t->ember = median(se, samples);
  t->blas = median(sb, samples);
  t->samples = samples;
  t->inner = inner;
  *diff = compare(a, b, ref, n);
  free(se);
  free(sb);
  free(ref);
  em_release(a);
  em_release(b);
  if (failed) fprintf(stderr, "bench_matmul: em_matmul failed: %s\n", em_last_error());
  return failed ? -1 : 0;
}

int main(int argc, char **argv) {
  if (argc > 1) em_set_num_threads(atoi(argv[1]));
  printf("matmul: square float32, Ember (em_matmul, result allocated and freed per call) vs "
         "raw cblas_sgemm (preallocated output)\n");
  printf("threads: Ember %d, OpenBLAS %d (%s)\n", em_get_num_threads(),
         openblas_get_num_threads(), openblas_get_config());
  printf("%6s %11s %11s %11s %11s %7s %9s\n", "n", "ember ms", "blas ms", "ember GF/s",
         "blas GF/s", "ratio", "samples");
  static const int64_t sizes[] = {64, 128, 256, 512, 1024, 2048};
  int rc = 0;
  double start = now();
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    int64_t n = sizes[i];
    timing t;
    double diff;
    if (bench(n, &t, &diff) != 0) return 1;
    double flops = 2.0 * (double)n * (double)n * (double)n;
    printf("%6lld %11.4f %11.4f %11.2f %11.2f %7.3f %5dx%-3d\n", (long long)n, t.ember * 1e3,
           t.blas * 1e3, flops / t.ember * 1e-9, flops / t.blas * 1e-9, t.blas / t.ember,
           t.samples, t.inner);
    if (!(diff < 1e-4)) {
      fprintf(stderr, "bench_matmul: n = %lld: results differ (max relative diff %g)\n",
              (long long)n, diff);
      rc = 1;
    }
  }
  printf("ratio = Ember throughput / OpenBLAS throughput (goal >= 0.95); total %.1f s\n",
         now() - start);
  return rc;
}
