/*
 * readback.c: turns the last profile into em_profiler_event rows (em_profiler_event_count,
 * em_profiler_event_get).
 *
 * After stop, the threads' buffers are laid end to end (thread by thread, each in the order
 * its events began), then the GPU intervals. Totals are computed once here: walking a thread's
 * events backwards, each event's figures are complete when it is reached (its children come
 * after it), so adding them to its parent's gives the parent's totals. A GPU interval adds to
 * the "self" GPU time of the event it was charged to.
 */
#include <stdlib.h>

#include "recorder.h"

static em_profiler_event *rows;
static int64_t nrows = -1;  /* -1: not merged since the last start */

void em_prof_readback_reset(void) {
  free(rows);
  rows = NULL;
  nrows = -1;
}

/* The row of a recorder key (tid << 32 | index, plus one), or -1. */
static int64_t row_of(uint64_t key, const int64_t *base, const size_t *count, int nthreads) {
  if (key == 0) return -1;
  uint64_t k = key - 1;
  int tid = (int)(k >> 32);
  uint32_t index = (uint32_t)k;
  if (tid >= nthreads || base[tid] < 0 || index >= count[tid]) return -1;
  return base[tid] + index;
}

static void fill_thread(em_profiler_event *out, const prof_thread *t, int64_t first) {
  for (size_t i = 0; i < t->n; i++) {
    const prof_event *e = &t->ev[i];
    em_profiler_event *r = &out[i];
    int64_t end = e->end ? e->end : e->start;
    *r = (em_profiler_event){
      .name = e->name, .shapes = e->shapes, .site = e->site, .kind = e->kind,
      .device = e->kind == EM_PROF_RANGE ? -1 : e->device, .thread = t->tid, .depth = e->depth,
      .parent = e->parent < 0 ? -1 : first + e->parent, .op = -1, .start_ns = e->start,
      .end_ns = end, .self_ns = end - e->start, .alloc_bytes = e->alloc[0],
      .free_bytes = e->freed[0], .self_alloc_bytes = e->alloc[0], .self_free_bytes = e->freed[0],
      .device_alloc_bytes = e->alloc[1], .device_free_bytes = e->freed[1],
      .self_device_alloc_bytes = e->alloc[1], .self_device_free_bytes = e->freed[1],
    };
  }
}

/* Children into parents: time out of self, bytes and GPU time into the totals. */
static void totals(em_profiler_event *r, int64_t first, int64_t n) {
  for (int64_t i = first + n - 1; i >= first; i--) {
    int64_t p = r[i].parent;
    if (p < 0) continue;
    r[p].self_ns -= r[i].end_ns - r[i].start_ns;
    r[p].alloc_bytes += r[i].alloc_bytes;
    r[p].free_bytes += r[i].free_bytes;
    r[p].device_alloc_bytes += r[i].device_alloc_bytes;
    r[p].device_free_bytes += r[i].device_free_bytes;
    r[p].gpu_ns += r[i].gpu_ns;
  }
}

static int merge(void) {
  int nthreads = em_prof.nthreads;
  int64_t *base = calloc((size_t)(nthreads ? nthreads : 1), sizeof *base);
  size_t *count = calloc((size_t)(nthreads ? nthreads : 1), sizeof *count);
  if (base == NULL || count == NULL) {
    free(base);
    free(count);
    return em_error("em_profiler_event_count: out of host memory");
  }
  int64_t total = 0;
  for (prof_thread *t = em_prof.threads; t != NULL; t = t->next) {
    bool mine = t->generation == em_prof.generation;
    base[t->tid] = mine ? total : -1;
    count[t->tid] = mine ? t->n : 0;
    total += (int64_t)count[t->tid];
  }
  total += (int64_t)em_prof.ngpu;
  rows = calloc((size_t)(total ? total : 1), sizeof *rows);
  if (rows == NULL) {
    free(base);
    free(count);
    return em_error("em_profiler_event_count: out of host memory for %lld events",
                    (long long)total);
  }
  for (prof_thread *t = em_prof.threads; t != NULL; t = t->next)
    if (base[t->tid] >= 0) fill_thread(rows + base[t->tid], t, base[t->tid]);
  int64_t g0 = total - (int64_t)em_prof.ngpu;
  for (size_t i = 0; i < em_prof.ngpu; i++) {
    const prof_gpu *g = &em_prof.gpu[i];
    int64_t op = row_of(g->key, base, count, nthreads);
    int64_t ns = g->end - g->start;
    rows[g0 + (int64_t)i] = (em_profiler_event){
      .name = g->name, .kind = EM_PROF_KERNEL, .device = g->device, .thread = -1,
      .parent = -1, .op = op, .start_ns = g->start, .end_ns = g->end, .self_ns = ns,
      .gpu_ns = ns, .self_gpu_ns = ns,
    };
    if (op >= 0) {
      rows[op].self_gpu_ns += ns;
      rows[op].gpu_ns += ns;
    }
  }
  for (prof_thread *t = em_prof.threads; t != NULL; t = t->next)
    if (base[t->tid] >= 0) totals(rows, base[t->tid], (int64_t)count[t->tid]);
  nrows = total;
  free(base);
  free(count);
  return 0;
}

int64_t em_profiler_event_count(void) {
  if (em_prof_on) return em_error("em_profiler_event_count: the profiler is running; stop it first");
  em_prof_lock();
  int rc = nrows < 0 ? merge() : 0;
  em_prof_unlock();
  return rc != 0 ? -1 : nrows;
}

int em_profiler_event_get(int64_t i, em_profiler_event *out) {
  if (out == NULL) return em_error("profiler_event_get: expected an event to fill, got NULL");
  int64_t n = em_profiler_event_count();
  if (n < 0) return -1;
  if (i < 0 || i >= n)
    return em_error("em_profiler_event_get: index %lld out of range for %lld events",
                    (long long)i, (long long)n);
  *out = rows[i];
  return 0;
}

int64_t em_profiler_dropped(void) { return (int64_t)em_prof.dropped; }
