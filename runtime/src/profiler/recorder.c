/*
 * recorder.c: the profiler's per-thread event recorder (ember.profiler, em_profiler_* in
 * ember.h).
 *
 * Each thread that records gets its own buffer of events (no lock on the op path), linked
 * into a global list the first time. An event is opened by em_prof_begin and closed by
 * em_prof_end; the open ones form a stack, so each event knows its parent and the bytes the
 * allocator reports go to the innermost open event (its "self" bytes; read-back adds the
 * children's for the totals). GPU intervals arrive from the devices, after their batches'
 * fences, tagged with the event that was innermost when the dispatch was recorded.
 *
 * Names and shape strings are interned (strings.c), so an event holds pointers only.
 * Start clears every buffer: start and stop are meant to be called while no other thread
 * runs ops (between training steps), as in PyTorch.
 */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "recorder.h"

int em_prof_on;
int em_prof_gpu_on;

prof_state em_prof;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local prof_thread *self;

int64_t em_prof_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void em_prof_lock(void) { pthread_mutex_lock(&lock); }
void em_prof_unlock(void) { pthread_mutex_unlock(&lock); }

static prof_thread *this_thread(void) {
  if (self != NULL) return self;
  prof_thread *t = calloc(1, sizeof *t);
  if (t == NULL) return NULL;
  pthread_mutex_lock(&lock);
  t->tid = em_prof.nthreads++;
  t->next = em_prof.threads;
  em_prof.threads = t;
  pthread_mutex_unlock(&lock);
  self = t; /* the record lives until the process ends: the list keeps reading it */
  return t;
}

/* Empties a buffer left from an earlier profile. */
static void fresh(prof_thread *t) {
  if (t->generation == em_prof.generation) return;
  t->n = 0;
  t->depth = 0;
  t->pending[0] = t->pending[1] = 0;
  t->generation = em_prof.generation;
}

static prof_event *push_event(prof_thread *t) {
  fresh(t);
  if (t->n == t->cap) {
    if (t->n >= EM_PROF_MAX_EVENTS) {
      __atomic_add_fetch(&em_prof.dropped, 1, __ATOMIC_RELAXED);
      return NULL;
    }
    size_t cap = t->cap ? 2 * t->cap : 4096;
    prof_event *ev = realloc(t->ev, cap * sizeof *ev);
    if (ev == NULL) return NULL;
    t->ev = ev;
    t->cap = cap;
  }
  return &t->ev[t->n];
}

/* Appends s to buf (cap bytes, always terminated); the new length. No snprintf: shapes are
 * formatted on every op of a record_shapes profile, and printf's machinery cost more than
 * the rest of the recording. */
static size_t put_str(char *buf, size_t len, size_t cap, const char *s) {
  while (*s && len + 1 < cap) buf[len++] = *s++;
  buf[len] = '\0';
  return len;
}

static size_t put_int(char *buf, size_t len, size_t cap, int64_t v) {
  char digits[24];
  int n = 0;
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  do digits[n++] = (char)('0' + u % 10); while ((u /= 10) != 0);
  if (v < 0) digits[n++] = '-';
  while (n > 0 && len + 1 < cap) buf[len++] = digits[--n];
  buf[len] = '\0';
  return len;
}

/* "[3,4] float32, [4] float32" for the non-NULL inputs. */
static const char *shapes_of(int n, const em_tensor *const *ins) {
  char buf[512];
  size_t len = 0, cap = sizeof buf;
  buf[0] = '\0';
  for (int i = 0; i < n; i++) {
    const em_tensor *x = ins[i];
    if (x == NULL) continue;
    if (len) len = put_str(buf, len, cap, ", ");
    len = put_str(buf, len, cap, "[");
    for (int d = 0; d < x->ndim; d++) {
      if (d) len = put_str(buf, len, cap, ",");
      len = put_int(buf, len, cap, x->sizes[d]);
    }
    len = put_str(buf, len, cap, "] ");
    len = put_str(buf, len, cap, em_dtype_name((em_dtype)x->dtype_id));
  }
  return len ? em_prof_intern(buf) : NULL; /* (no tensor inputs: a read or write) */
}

uint64_t em_prof_begin(int kind, const char *name, int copy, int device, int n,
                       const em_tensor *const *ins) {
  if (!em_prof_active()) return 0;
  prof_thread *t = this_thread();
  if (t == NULL) return 0;
  prof_event *e = push_event(t);
  if (e == NULL || t->depth >= EM_PROF_MAX_DEPTH) return 0;
  memset(e, 0, sizeof *e);
  e->name = copy ? em_prof_intern(name) : name;
  if (e->name == NULL) return 0;
  e->kind = (int16_t)kind;
  e->device = (int16_t)device;
  e->parent = t->depth ? t->stack[t->depth - 1] : -1;
  e->depth = t->depth;
  e->site = t->site;
  if (em_prof.options.record_shapes && n > 0) e->shapes = shapes_of(n, ins);
  if (kind == EM_PROF_OP) { /* what its definition allocated before calling the kernel */
    for (int m = 0; m < 2; m++) {
      e->alloc[m] = t->pending[m];
      t->pending[m] = 0;
    }
  }
  uint32_t index = (uint32_t)t->n++;
  t->stack[t->depth++] = (int32_t)index;
  e->start = em_prof_now(); /* last, so that the bookkeeping above is not counted */
  return ((uint64_t)(uint32_t)t->tid << 32 | index) + 1;
}

void em_prof_end(uint64_t handle) {
  if (handle == 0) return;
  int64_t now = em_prof_now();
  prof_thread *t = self;
  uint32_t index = (uint32_t)(handle - 1);
  /* a stop and start in between (a profile restarted inside an op) leaves nothing to close */
  if (t == NULL || t->generation != em_prof.generation || index >= t->n || t->depth == 0) return;
  t->ev[index].end = now;
  for (int m = 0; m < 2; m++) { /* allocations after the last op, inside this event */
    t->ev[t->stack[t->depth - 1]].alloc[m] += t->pending[m];
    t->pending[m] = 0;
  }
  /* close this event and anything left open above it (a range never popped) */
  while (t->depth > 0 && (uint32_t)t->stack[t->depth - 1] >= index) {
    prof_event *e = &t->ev[t->stack[--t->depth]];
    if (e->end == 0) e->end = now;
  }
}

void em_prof_cancel(uint64_t handle) {
  if (handle == 0) return;
  prof_thread *t = self;
  uint32_t index = (uint32_t)(handle - 1);
  if (t == NULL || t->generation != em_prof.generation || t->depth == 0 ||
      (uint32_t)t->stack[t->depth - 1] != index || index + 1 != t->n) {
    em_prof_end(handle); /* something nested in it: keep it */
    return;
  }
  for (int m = 0; m < 2; m++) /* its bytes wait for the op that does the work */
    t->pending[m] += t->ev[index].alloc[m];
  t->depth--;
  t->n--;
}

uint64_t em_prof_current(void) {
  prof_thread *t = self;
  if (t == NULL || t->depth == 0 || t->generation != em_prof.generation) return 0;
  return ((uint64_t)(uint32_t)t->tid << 32 | (uint32_t)t->stack[t->depth - 1]) + 1;
}

/* The allocator's hook (alloc.c). An op's definition allocates its output before it calls
 * the kernel (the event), so bytes allocated outside any op wait, pending, for the next op
 * of this thread, or for the end of the enclosing range. Frees go to the innermost open
 * event: they happen when the last reference goes. */
void em_prof_memory(int device, int64_t nbytes) {
  if (!em_prof.options.profile_memory) return;
  int m = device != EM_CPU;
  prof_thread *t = this_thread();
  if (t == NULL) return;
  fresh(t);
  prof_event *e = t->depth ? &t->ev[t->stack[t->depth - 1]] : NULL;
  if (nbytes >= 0) {
    if (e != NULL && e->kind == EM_PROF_OP) e->alloc[m] += nbytes;
    else t->pending[m] += nbytes;
  } else if (e != NULL) {
    e->freed[m] -= nbytes;
  }
}

void em_prof_gpu_event(uint64_t key, const char *name, int device, int64_t start_ns,
                       int64_t end_ns) {
  pthread_mutex_lock(&lock);
  if (em_prof.ngpu == em_prof.gpu_cap) {
    size_t cap = em_prof.gpu_cap ? 2 * em_prof.gpu_cap : 1024;
    prof_gpu *g = em_prof.gpu_cap >= EM_PROF_MAX_EVENTS ? NULL
                                                        : realloc(em_prof.gpu, cap * sizeof *g);
    if (g == NULL) {
      em_prof.dropped++;
      pthread_mutex_unlock(&lock);
      return;
    }
    em_prof.gpu = g;
    em_prof.gpu_cap = cap;
  }
  em_prof.gpu[em_prof.ngpu++] = (prof_gpu){key, name, device, start_ns, end_ns};
  pthread_mutex_unlock(&lock);
}

void em_prof_register_gpu(em_prof_flush_fn flush, void *ctx) {
  pthread_mutex_lock(&lock);
  if (em_prof.nflush < EM_MAX_DEVICES) {
    em_prof.flush[em_prof.nflush] = flush;
    em_prof.flush_ctx[em_prof.nflush++] = ctx;
  }
  pthread_mutex_unlock(&lock);
}

void em_prof_unregister_gpu(void *ctx) {
  pthread_mutex_lock(&lock);
  int n = 0;
  for (int i = 0; i < em_prof.nflush; i++)
    if (em_prof.flush_ctx[i] != ctx) {
      em_prof.flush[n] = em_prof.flush[i];
      em_prof.flush_ctx[n++] = em_prof.flush_ctx[i];
    }
  em_prof.nflush = n;
  pthread_mutex_unlock(&lock);
}

/* Reads back the GPU work recorded so far (each device waits for its timed batches). */
static int flush_devices(int wait) {
  int rc = 0;
  for (int i = 0; i < em_prof.nflush; i++)
    if (em_prof.flush[i](em_prof.flush_ctx[i], wait) != 0) rc = -1;
  return rc;
}

/* ---- public API ------------------------------------------------------------------------ */

int em_profiler_start(const em_profiler_options *options) {
  if (em_prof_on) return em_error("em_profiler_start: the profiler is already running");
  em_profiler_options o = {0};
  if (options != NULL) o = *options;
  /* the batch being recorded started untimed: submit it, so that the next one is timed */
  if (o.gpu && flush_devices(0) != 0) return -1;
  pthread_mutex_lock(&lock);
  em_prof.options = o;
  em_prof.generation++;
  em_prof.ngpu = 0;
  em_prof.dropped = 0;
  em_prof_readback_reset();
  pthread_mutex_unlock(&lock);
  em_prof_backends_refresh();
  em_prof_gpu_on = o.gpu != 0;
  __atomic_store_n(&em_prof_on, 1, __ATOMIC_RELEASE);
  return 0;
}

int em_profiler_stop(void) {
  if (!em_prof_on) return em_error("em_profiler_stop: the profiler is not running");
  /* the GPU's timestamps of this profile arrive when its batches complete */
  int rc = em_prof_gpu_on ? flush_devices(1) : 0;
  __atomic_store_n(&em_prof_on, 0, __ATOMIC_RELEASE);
  em_prof_gpu_on = 0;
  if (self != NULL && self->generation == em_prof.generation) {
    int64_t now = em_prof_now();
    while (self->depth > 0) { /* ranges left open end here */
      prof_event *e = &self->ev[self->stack[--self->depth]];
      if (e->end == 0) e->end = now;
    }
  }
  return rc;
}

int em_profiler_enabled(void) { return em_prof_on; }

int em_profiler_range_push(const char *name) {
  if (name == NULL) return em_error("profiler_range_push: expected a name, got NULL");
  if (!em_prof_active()) return 0;
  em_prof_begin(EM_PROF_RANGE, name, 1, -1, 0, NULL);
  return 0;
}

int em_profiler_range_pop(void) {
  if (!em_prof_active()) return 0;
  prof_thread *t = self;
  if (t == NULL || t->depth == 0 || t->generation != em_prof.generation)
    return em_error("em_profiler_range_pop: no range is open on this thread");
  /* the innermost open range; ops never stay open across a return to the caller */
  for (int d = t->depth - 1; d >= 0; d--)
    if (t->ev[t->stack[d]].kind == EM_PROF_RANGE) {
      em_prof_end(((uint64_t)(uint32_t)t->tid << 32 | (uint32_t)t->stack[d]) + 1);
      return 0;
    }
  return em_error("em_profiler_range_pop: no range is open on this thread");
}

int em_profiler_set_site(const char *site) {
  prof_thread *t = em_prof_active() ? this_thread() : NULL;
  if (t == NULL) return 0;
  t->site = site && site[0] ? em_prof_intern(site) : NULL;
  return 0;
}
