/*
 * threads.c: one thread count for Ember's OpenMP loops and OpenBLAS. Both pools exist, but
 * never run at the same time (a BLAS call is not made from inside a parallel region), so
 * giving both the same count keeps the cores busy without oversubscription.
 */
#include <omp.h>

#include "internal.h"

void openblas_set_num_threads(int n);
int openblas_get_num_threads(void);

static int num_threads = 0; /* 0 until first asked: then OpenMP's default */

static int current(void) {
  if (num_threads == 0) num_threads = omp_get_max_threads();
  return num_threads;
}

void em_set_num_threads(int n) {
  if (n < 1) n = 1;
  num_threads = n;
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

int em_get_num_threads(void) { return current(); }

int em_threads_for(int64_t work) {
  if (work < EM_PARALLEL_GRAIN) return 1;
  int64_t n = work / EM_PARALLEL_GRAIN;
  int t = current();
  return n < t ? (int)n : t;
}
