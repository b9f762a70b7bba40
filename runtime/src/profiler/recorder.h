/*
 * recorder.h: the profiler's own state, shared by its files (recorder.c records, readback.c
 * merges the threads' buffers and the GPU intervals into em_profiler_event rows, strings.c
 * interns names).
 */
#ifndef EMBER_PROFILER_RECORDER_H
#define EMBER_PROFILER_RECORDER_H

#include "profiler.h"

enum {
  EM_PROF_MAX_DEPTH = 128,        /* open events per thread */
  EM_PROF_MAX_EVENTS = 1 << 24    /* per thread, and GPU intervals in all */
};

typedef struct prof_event {
  const char *name;    /* interned, or a literal */
  const char *shapes;  /* interned, or NULL */
  const char *site;    /* interned, or NULL */
  int64_t start, end;  /* end 0 while open */
  int64_t alloc[2], freed[2]; /* its own bytes (children's not included): [0] the host's
                               * memory (cpu), [1] the other devices' */
  int32_t parent;      /* index in the thread's buffer, -1 at the top */
  int32_t depth;
  int16_t kind, device;
} prof_event;

typedef struct prof_thread {
  prof_event *ev;
  size_t n, cap;
  int32_t stack[EM_PROF_MAX_DEPTH]; /* indices of the open events */
  int depth;
  int tid;
  uint64_t generation;  /* the profile the buffer belongs to */
  const char *site;     /* the caller's file:line (em_profiler_set_site) */
  int64_t pending[2];   /* bytes allocated outside any op since the last one began */
  struct prof_thread *next;
} prof_thread;

typedef struct prof_gpu {
  uint64_t key;         /* em_prof_current() when the dispatch was recorded */
  const char *name;
  int device;
  int64_t start, end;
} prof_gpu;

typedef struct prof_state {
  em_profiler_options options;
  uint64_t generation;
  prof_thread *threads;
  int nthreads;
  prof_gpu *gpu;
  size_t ngpu, gpu_cap;
  uint64_t dropped;
  em_prof_flush_fn flush[EM_MAX_DEVICES];
  void *flush_ctx[EM_MAX_DEVICES];
  int nflush;
} prof_state;

extern prof_state em_prof;
void em_prof_lock(void);
void em_prof_unlock(void);
/* Forgets the merged rows (readback.c); called under the lock at start. */
void em_prof_readback_reset(void);
/* An interned copy of s, kept until the process ends; NULL when out of memory. */
const char *em_prof_intern(const char *s);

#endif
