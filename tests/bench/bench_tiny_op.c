/*
 * bench_tiny_op.c: the cost of a tiny op called from C, em_binary(EM_ADD) on one-element
 * float32 CPU tensors plus the em_release of its result: what Ember's own work costs per op
 * (checks, dtype promotion, the kernel, the result's allocation and release) without any
 * binding in between. tests/bench/overhead.lua measures the same op from Lua (`a + b`); the
 * two figures sit side by side in docs/performance.md.
 *
 * Each sample times 200,000 ops; the figure is the median of 9 samples, in ns per op.
 * Usage: bench_tiny_op
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ember.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

enum { INNER = 200000, REPS = 9 };

int main(void) {
  int64_t one = 1;
  em_tensor *a = em_ones(1, &one, EM_FLOAT32, 0), *b = em_ones(1, &one, EM_FLOAT32, 0);
  if (a == NULL || b == NULL) {
    fprintf(stderr, "bench_tiny_op: %s\n", em_last_error());
    return 1;
  }
  for (int i = 0; i < INNER / 4; i++) em_release(em_binary(EM_ADD, a, b)); /* warm-up */
  double samples[REPS];
  for (int r = 0; r < REPS; r++) {
    double t0 = now();
    for (int i = 0; i < INNER; i++) {
      em_tensor *c = em_binary(EM_ADD, a, b);
      if (c == NULL) {
        fprintf(stderr, "bench_tiny_op: %s\n", em_last_error());
        return 1;
      }
      em_release(c);
    }
    samples[r] = (now() - t0) / INNER;
  }
  qsort(samples, REPS, sizeof samples[0], cmp_double);
  printf("\n== Tiny op overhead from C: em_binary(EM_ADD) + em_release on 1-element float32\n");
  printf("%-28s %10.1f ns\n", "ember (C)", samples[REPS / 2] * 1e9);
  em_release(a);
  em_release(b);
  return 0;
}
