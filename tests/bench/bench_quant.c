/*
 * bench_quant.c: the CPU quantized Linear (em_quant_linear, runtime/src/quant/cpu) against the
 * machine's own references, measured in the same run.
 *
 *  (a) batch 1, a 4096 x 4096 weight: GB/s of weight read, against memcpy's bandwidth (bytes
 *      copied per second, the copy split over the same number of threads). The weight is
 *      cycled through enough copies (over 2 x the last-level cache) that each product streams
 *      it from DRAM, as a model larger than the cache does; the copy is as large. A plain
 *      read of as many bytes (256-bit loads, same threads) is shown too: memcpy also writes,
 *      so it moves about three times the bytes it counts, and a kernel that only reads can
 *      pass it. The LLC columns keep one weight, which then sits in the last-level cache,
 *      against a copy of the same size.
 *  (b) batch 64: effective GFLOP/s (2 m n k / time) against Ember's own float32 product
 *      (em_matmul, OpenBLAS sgemm) of the same shapes.
 * Each figure is the median of its samples; each ratio the median of the ratios of pairs of
 * samples taken one after the other, which holds better on a shared, loaded machine. The path is the default (EMBER_QUANT_CPU forces one).
 *
 * Usage: bench_quant [threads]
 */
#include <cblas.h>
#include <immintrin.h>
#include <pthread.h>
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
static uint64_t state = 0x9E3779B97F4A7C15ull;
static float next_value(void) { /* [-1, 1) */
  state = state * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((double)(state >> 11) / 4503599627370496.0 - 1.0);
}

/* ---- memcpy (or a plain read: dst NULL) over T threads ---- */
typedef struct slice { char *dst; const char *src; size_t n; uint64_t sum; } slice;
/* Reads n bytes (n a multiple of 64) with 256-bit loads and prefetches 4 KiB ahead: the ceiling for a kernel that only
 * reads, which memcpy (read, write and the write's read for ownership) is not. */
__attribute__((target("avx2"))) static uint64_t read_sum(const char *p, size_t n) {
  __m256i a = _mm256_setzero_si256(), b = _mm256_setzero_si256();
  for (size_t i = 0; i + 64 <= n; i += 64) {
    _mm_prefetch(p + i + 4096, _MM_HINT_T0); /* as the kernel does */
    a = _mm256_xor_si256(a, _mm256_loadu_si256((const __m256i *)(p + i)));
    b = _mm256_xor_si256(b, _mm256_loadu_si256((const __m256i *)(p + i + 32)));
  }
  a = _mm256_xor_si256(a, b);
  return (uint64_t)_mm256_extract_epi64(a, 0) ^ (uint64_t)_mm256_extract_epi64(a, 3);
}
static void *copy_slice(void *p) {
  slice *s = p;
  if (s->dst) memcpy(s->dst, s->src, s->n);
  else s->sum = read_sum(s->src, s->n);
  return NULL;
}
static uint64_t sink;
static double copy_seconds(char *dst, const char *src, size_t n, int threads) {
  pthread_t th[64];
  slice sl[64];
  size_t per = (n / (size_t)threads + 63) / 64 * 64;
  double t0 = now();
  for (int i = 0; i < threads; i++) {
    size_t off = per * (size_t)i, len = off >= n ? 0 : (n - off < per ? n - off : per);
    sl[i] = (slice){ dst ? dst + off : NULL, src + off, len, 0 };
    pthread_create(&th[i], NULL, copy_slice, &sl[i]);
  }
  for (int i = 0; i < threads; i++) pthread_join(th[i], NULL);
  double t = now() - t0;
  for (int i = 0; i < threads; i++) sink ^= sl[i].sum;
  return t;
}
static em_tensor *matrix(int64_t r, int64_t c) {
  int64_t sz[2] = { r, c };
  em_tensor *t = em_empty(2, sz, EM_FLOAT32, 0);
  float *p = em_data_ptr(t);
  for (int64_t i = 0; i < r * c; i++) p[i] = next_value();
  return t;
}

int main(int argc, char **argv) {
  if (argc > 1) em_set_num_threads(atoi(argv[1]));
  const int threads = em_get_num_threads();
  const int64_t N = 4096, K = 4096;
  const size_t llc = 300u << 20; /* this machine's L3; the cycle set is 2x that */
  printf("quantized Linear (em_quant_linear) on the CPU, %d threads, weight %lld x %lld\n",
         threads, (long long)N, (long long)K);
  em_tensor *wf = matrix(N, K);
  const struct { int format; const char *name; } fmts[] = {
    { EM_QUANT_Q8_0, "q8_0" }, { EM_QUANT_Q4_0, "q4_0" }, { EM_QUANT_Q4_K, "q4_k" },
    { EM_QUANT_Q6_K, "q6_k" }, { EM_QUANT_Q4_1, "q4_1" } };
  const int nf = (int)(sizeof fmts / sizeof fmts[0]);

  /* (a) batch 1. Samples alternate: a copy of as many bytes as the weight, then a product, so
   * that the load of other processes on this shared machine hits both alike. */
  printf("(a) batch 1: GB/s of weight read against memcpy of the same bytes (copied per second, "
         "%d threads), median of alternating samples\n", threads);
  printf("  %-6s %6s %9s %8s %6s %8s %6s %9s %8s %6s\n", "format", "MiB", "DRAM GB/s", "memcpy",
         "ratio", "read", "ratio", "LLC GB/s", "memcpy", "ratio");
  int64_t so[2] = { 1, N };
  em_tensor *x1 = matrix(1, K), *o1 = em_empty(2, so, EM_FLOAT32, 0);
  for (int f = 0; f < nf; f++) {
    int64_t be, bb;
    em_quant_block_size(fmts[f].format, 0, 0, &be, &bb);
    int64_t bytes = N * (K / be) * bb;
    int copies = (int)((2 * llc + (size_t)bytes - 1) / (size_t)bytes);
    if (copies > 256) copies = 256;
    em_tensor *w[256];
    int64_t sw[1] = { bytes };
    char *src = malloc((size_t)bytes * (size_t)copies), *dst = malloc((size_t)bytes * (size_t)copies);
    if (!src || !dst) { fprintf(stderr, "bench_quant: out of memory\n"); return 1; }
    memset(src, 1, (size_t)bytes * (size_t)copies); memset(dst, 2, (size_t)bytes * (size_t)copies);
    for (int c = 0; c < copies; c++) {
      w[c] = em_empty(1, sw, EM_UINT8, 0);
      if (c == 0) em_quant_quantize(fmts[f].format, 0, 0, em_data_ptr(wf), N * K, em_data_ptr(w[0]));
      else memcpy(em_data_ptr(w[c]), em_data_ptr(w[0]), (size_t)bytes);
    }
    enum { S = 2 * 256 };
    static double tq[S], tc[S], lq[S], lc[S], rd[S], rl[S], tr[S], rr[S];
    int nd = 0;
    for (int c = 0; c < copies; c++) em_quant_linear(x1, w[c], fmts[f].format, o1); /* warm */
    for (int rep = 0; rep < 2; rep++)
      for (int c = 0; c < copies; c++, nd++) {
        tc[nd] = copy_seconds(dst + (size_t)bytes * (size_t)((c + 7) % copies),
                              src + (size_t)bytes * (size_t)c, (size_t)bytes, threads);
        double t0 = now();
        if (em_quant_linear(x1, w[c], fmts[f].format, o1) != 0) { fprintf(stderr, "%s\n", em_last_error()); return 1; }
        tq[nd] = now() - t0;
        rd[nd] = tc[nd] / tq[nd];
        tr[nd] = copy_seconds(NULL, src + (size_t)bytes * (size_t)((c + 3) % copies), (size_t)bytes, threads);
        rr[nd] = tr[nd] / tq[nd];
      }
    const int nl = 41;
    for (int r = 0; r < nl; r++) {
      lc[r] = copy_seconds(dst, src, (size_t)bytes, threads);
      double t0 = now();
      em_quant_linear(x1, w[0], fmts[f].format, o1);
      lq[r] = now() - t0;
      rl[r] = lc[r] / lq[r];
    }
    double gq = (double)bytes / median(tq, nd) / 1e9, gc = (double)bytes / median(tc, nd) / 1e9;
    double hq = (double)bytes / median(lq, nl) / 1e9, hc = (double)bytes / median(lc, nl) / 1e9;
    /* the ratio is the median of each sample pair's ratio: a slow phase hits both of a pair */
    double gr = (double)bytes / median(tr, nd) / 1e9;
    printf("  %-6s %6.1f %9.1f %8.1f %6.2f %8.1f %6.2f %9.1f %8.1f %6.2f\n", fmts[f].name,
           bytes / 1048576.0, gq, gc, median(rd, nd), gr, median(rr, nd), hq, hc, median(rl, nl));
    for (int c = 0; c < copies; c++) em_release(w[c]);
    free(src); free(dst);
  }

  /* (b) batch 64 */
  const int64_t M = 64;
  em_tensor *x = matrix(M, K), *wt = matrix(K, N);
  int64_t sob[2] = { M, N };
  em_tensor *ob = em_empty(2, sob, EM_FLOAT32, 0);
  const double flop = 2.0 * (double)M * (double)N * (double)K;
  /* the float32 references first (medians), then each format's samples alternate with
   * em_matmul's, and its ratio is the median of the pairs' ratios */
  enum { RB = 15 };
  double ts[RB];
  for (int r = 0; r < RB; r++) {
    double t0 = now();
    em_tensor *c = em_matmul(x, wt);
    ts[r] = now() - t0;
    em_release(c);
  }
  double gs = flop / median(ts, RB) / 1e9;
  float *cb = malloc(sizeof(float) * (size_t)(M * N));
  for (int r = 0; r < RB; r++) { /* raw OpenBLAS into a reused buffer, for reference */
    double t0 = now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)N, (int)K, 1.0f,
                em_data_ptr(x), (int)K, em_data_ptr(wt), (int)N, 0.0f, cb, (int)N);
    ts[r] = now() - t0;
  }
  free(cb);
  printf("(b) batch %lld: fp32 em_matmul (OpenBLAS) %.1f GFLOP/s (raw cblas_sgemm %.1f)\n",
         (long long)M, gs, flop / median(ts, RB) / 1e9);
  printf("  %-6s %12s %10s\n", "format", "GFLOP/s", "/sgemm");
  for (int f = 0; f < nf; f++) {
    int64_t be, bb;
    em_quant_block_size(fmts[f].format, 0, 0, &be, &bb);
    int64_t sw[1] = { N * (K / be) * bb };
    em_tensor *w = em_empty(1, sw, EM_UINT8, 0);
    em_quant_quantize(fmts[f].format, 0, 0, em_data_ptr(wf), N * K, em_data_ptr(w));
    double tq[RB], pr[RB];
    em_quant_linear(x, w, fmts[f].format, ob);
    for (int r = 0; r < RB; r++) {
      double t0 = now();
      em_tensor *c = em_matmul(x, wt);
      double tm = now() - t0;
      em_release(c);
      t0 = now();
      em_quant_linear(x, w, fmts[f].format, ob);
      tq[r] = now() - t0;
      pr[r] = tm / tq[r];
    }
    double gq = flop / median(tq, RB) / 1e9;
    printf("  %-6s %12.1f %10.2f\n", fmts[f].name, gq, median(pr, RB));
    em_release(w);
  }
  em_release(x); em_release(wt); em_release(ob); em_release(x1); em_release(o1); em_release(wf);
  return 0;
}
