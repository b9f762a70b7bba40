/*
 * test_memory_debug.c: the memory debugger's C API as an embedder uses it. The census by size
 * class against sizes computed here, the history registry against a shadow list kept here
 * (thousands of storages made and released in a scrambled order, so the registry grows and
 * deletes across collisions), the site function called on the recording thread only, and
 * nothing recorded while off.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "check.h"

static int calls;
static pthread_t recorder;
static int foreign_calls;

/* The site: the number of calls so far, so each storage's site says when it was made. */
static int32_t site_fn(void *userdata) {
  (void)userdata;
  if (!pthread_equal(pthread_self(), recorder)) foreign_calls++;
  return ++calls;
}

/* The class of a size: k with 2^k <= nbytes < 2^(k+1). */
static int class_of(int64_t nbytes) {
  int k = 0;
  while (nbytes >= 2) nbytes >>= 1, k++;
  return k;
}

static void test_census(void) {
  em_memory_census before, after;
  CHECK(em_memory_census_get(0, &before) == 0);
  int64_t sizes[2] = {3, 100}; /* 300 float32: 1200 B, class [1024, 2048) */
  em_tensor *a = em_zeros(2, sizes, EM_FLOAT32, 0), *b = em_ones(2, sizes, EM_FLOAT32, 0);
  int k = class_of(1200);
  CHECK(k == 10);
  CHECK(em_memory_census_get(0, &after) == 0);
  CHECK(after.classes[k].live_blocks - before.classes[k].live_blocks == 2);
  CHECK(after.classes[k].live_bytes - before.classes[k].live_bytes == 2400);
  em_memory_stats s;
  CHECK(em_memory_stats_get(0, &s) == 0);
  int64_t live = 0, cached = 0;
  for (int c = 0; c < EM_MEMORY_CLASSES; c++) {
    live += after.classes[c].live_bytes;
    cached += after.classes[c].cached_bytes;
  }
  CHECK(live == s.allocated);
  CHECK(cached == s.reserved - s.allocated);
  em_release(a);
  em_release(b);
  CHECK(em_memory_census_get(0, &after) == 0);
  CHECK(after.classes[k].live_blocks == before.classes[k].live_blocks);
  CHECK_ERROR(em_memory_census_get(99, &after), "memory.census: invalid device 99");
}

enum { N = 3000 };

static void *worker(void *arg) {
  int64_t n = 5;
  *(em_tensor **)arg = em_zeros(1, &n, EM_FLOAT32, 0);
  return NULL;
}

static void test_history(void) {
  recorder = pthread_self();
  em_memory_set_site_fn(site_fn, NULL);
  int64_t first = em_memory_history_next_id();
  CHECK(em_memory_record_history(1) == 0);
  CHECK(em_memory_history_enabled() == 1);
  static em_tensor *t[N];
  static int32_t site[N];
  for (int i = 0; i < N; i++) {
    int64_t n = 1 + i % 37;
    t[i] = em_empty(1, &n, EM_FLOAT64, 0);
    site[i] = calls;
  }
  CHECK(calls == N);
  CHECK(em_memory_history_count(0) == N);
  /* A storage made on another thread gets site 0; the site function is not called there. */
  em_tensor *other = NULL;
  pthread_t th;
  pthread_create(&th, NULL, worker, &other);
  pthread_join(th, NULL);
  CHECK(foreign_calls == 0 && calls == N);
  CHECK(em_memory_history_count(0) == N + 1);
  /* Release two thirds in a scrambled order (a stride coprime to N). */
  static bool gone[N];
  for (int j = 0, i = 0; j < 2 * N / 3; j++, i = (i + 1777) % N) {
    em_release(t[i]);
    gone[i] = true;
  }
  em_release(other);
  int64_t live = 0;
  for (int i = 0; i < N; i++) live += !gone[i];
  CHECK(em_memory_history_count(0) == live);
  CHECK(em_memory_history_count(-1) == live);
  em_memory_block *blocks = calloc((size_t)live, sizeof *blocks);
  CHECK(em_memory_history_get(0, blocks, live) == live);
  int mismatches = 0;
  for (int64_t b = 0; b < live; b++) {
    int i = (int)(blocks[b].id - first); /* ids count up from first in the order made */
    if (i < 0 || i >= N || gone[i] || blocks[b].site != site[i] ||
        blocks[b].bytes != 8 * (1 + i % 37) || blocks[b].ndim != 1 ||
        blocks[b].sizes[0] != 1 + i % 37 || blocks[b].dtype != EM_FLOAT64 || blocks[b].device != 0)
      mismatches++;
  }
  CHECK(mismatches == 0);
  free(blocks);
  /* Off: nothing new is recorded, and entries still go when their storages do. */
  CHECK(em_memory_record_history(0) == 1);
  int64_t n = 4;
  em_tensor *late = em_zeros(1, &n, EM_FLOAT32, 0);
  CHECK(em_memory_history_count(0) == live);
  em_release(late);
  for (int i = 0; i < N; i++)
    if (!gone[i]) em_release(t[i]);
  CHECK(em_memory_history_count(-1) == 0);
  em_memory_set_site_fn(NULL, NULL);
}

int main(void) {
  test_census();
  test_history();
  return check_report();
}
