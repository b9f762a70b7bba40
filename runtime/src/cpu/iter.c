/*
 * iter.c: the CPU's strided elementwise iterator. It drops size-1 dimensions, merges
 * dimensions that are contiguous for every operand, and then walks the tensor as runs of the
 * innermost dimension. Threads take equal ranges of the linear element index.
 */
#include <omp.h>

#include "cpu.h"

typedef struct iter_plan {
  int nops, ndim;                                 /* dims stored innermost first */
  int64_t sizes[EM_MAX_DIMS];
  int64_t strides[EM_ITER_MAX_OPERANDS][EM_MAX_DIMS];  /* bytes */
  char *base[EM_ITER_MAX_OPERANDS];
  int64_t numel;
} iter_plan;

static void plan_build(iter_plan *p, int n, const em_tensor *const *ts) {
  const em_tensor *t0 = ts[0];
  p->nops = n;
  p->ndim = 0;
  p->numel = em_numel(t0);
  for (int k = 0; k < n; k++) p->base[k] = em_cpu_ptr(ts[k]);
  for (int d = t0->ndim - 1; d >= 0; d--) {
    if (t0->sizes[d] == 1) continue;
    int nd = p->ndim;
    /* Merge into the previous (inner) dim when every operand steps evenly across both. */
    bool merge = nd > 0;
    for (int k = 0; k < n && merge; k++) {
      int64_t es = (int64_t)em_dtypes[ts[k]->dtype_id].size;
      merge = ts[k]->strides[d] * es == p->strides[k][nd - 1] * p->sizes[nd - 1];
    }
    if (merge) {
      p->sizes[nd - 1] *= t0->sizes[d];
      continue;
    }
    p->sizes[nd] = t0->sizes[d];
    for (int k = 0; k < n; k++)
      p->strides[k][nd] = ts[k]->strides[d] * (int64_t)em_dtypes[ts[k]->dtype_id].size;
    p->ndim++;
  }
  if (p->ndim == 0) { /* a single element */
    p->ndim = 1;
    p->sizes[0] = 1;
    for (int k = 0; k < n; k++) p->strides[k][0] = 0;
  }
}

/* Runs elements [begin, end) of the plan. */
static void plan_run(const iter_plan *p, int64_t begin, int64_t end, em_cpu_loop loop,
                     void *ctx) {
  int64_t coord[EM_MAX_DIMS];
  int64_t rest = begin;
  for (int d = 0; d < p->ndim; d++) {
    coord[d] = rest % p->sizes[d];
    rest /= p->sizes[d];
  }
  int64_t inner_strides[EM_ITER_MAX_OPERANDS];
  for (int k = 0; k < p->nops; k++) inner_strides[k] = p->strides[k][0];
  int64_t pos = begin;
  while (pos < end) {
    char *ptrs[EM_ITER_MAX_OPERANDS];
    for (int k = 0; k < p->nops; k++) {
      char *q = p->base[k];
      for (int d = 0; d < p->ndim; d++) q += coord[d] * p->strides[k][d];
      ptrs[k] = q;
    }
    int64_t run = p->sizes[0] - coord[0];
    if (run > end - pos) run = end - pos;
    loop(ptrs, inner_strides, run, ctx);
    pos += run;
    coord[0] += run;
    for (int d = 0; d < p->ndim - 1 && coord[d] == p->sizes[d]; d++) {
      coord[d] = 0;
      coord[d + 1]++;
    }
  }
}

void em_cpu_for_each_serial(int n, const em_tensor *const *ts, em_cpu_loop loop, void *ctx) {
  iter_plan p;
  plan_build(&p, n, ts);
  if (p.numel > 0) plan_run(&p, 0, p.numel, loop, ctx);
}

/* All operands contiguous with the same element size pattern: one run, no plan needed. */
static bool all_contiguous(int n, const em_tensor *const *ts) {
  for (int k = 0; k < n; k++)
    if (!em_is_contiguous(ts[k])) return false;
  return true;
}

void em_cpu_for_each(int n, const em_tensor *const *ts, em_cpu_loop loop, void *ctx) {
  int64_t numel = em_numel(ts[0]);
  if (numel < EM_PARALLEL_GRAIN && all_contiguous(n, ts)) {
    char *ptrs[EM_ITER_MAX_OPERANDS];
    int64_t strides[EM_ITER_MAX_OPERANDS];
    for (int k = 0; k < n; k++) {
      ptrs[k] = em_cpu_ptr(ts[k]);
      strides[k] = (int64_t)em_dtypes[ts[k]->dtype_id].size;
    }
    if (numel > 0) loop(ptrs, strides, numel, ctx);
    return;
  }
  iter_plan p;
  plan_build(&p, n, ts);
  if (p.numel == 0) return;
  int threads = em_threads_for(p.numel);
  if (threads <= 1) {
    plan_run(&p, 0, p.numel, loop, ctx);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    int t = omp_get_thread_num(), nt = omp_get_num_threads();
    /* Chunk boundaries on multiples of 64 elements keep threads off each other's lines. */
    int64_t chunk = ((p.numel + nt - 1) / nt + 63) & ~(int64_t)63;
    int64_t begin = t * chunk, end = begin + chunk < p.numel ? begin + chunk : p.numel;
    if (begin < end) plan_run(&p, begin, end, loop, ctx);
  }
}
