/*
 * threads.c: one thread count for Ember's OpenMP loops and OpenBLAS. Both pools exist, but
 * never run at the same time (a BLAS call is not made from inside a parallel region), so
 * giving both the same count keeps the cores busy without oversubscription.
 */
#include <omp.h>

#include "internal.h"

void openblas_set_num_threads(int n);
int openblas_get_num_threads(void);

/* Process-wide, read by every host thread's ops (relaxed atomics: a count, nothing it guards).
 * Ember's loops pass it to each parallel region, so a count set on one host thread holds on all
 * of them; omp_set_num_threads alone would set only the calling thread's default. */
static int num_threads = 0; /* 0 until first asked: then OpenMP's default */

static int current(void) {
  int n = __atomic_load_n(&num_threads, __ATOMIC_RELAXED);
  if (n == 0) {
    n = omp_get_max_threads();
    __atomic_store_n(&num_threads, n, __ATOMIC_RELAXED);
  }
  return n;
}

void em_set_num_threads(int n) {
  if (n < 1) n = 1;
  __atomic_store_n(&num_threads, n, __ATOMIC_RELAXED);
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
