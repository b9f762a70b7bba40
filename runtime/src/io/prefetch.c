/*
 * prefetch.c: background threads that build the next batches while the model computes.
 *
 * LuaJIT has one Lua state, so a data loader's workers cannot run Lua; they are C threads
 * that gather rows of tensors. Given source tensors (CPU; sample i is row i along dim 0) and
 * the epoch's sample order, batch b holds the rows indices[b*bs .. (b+1)*bs) of every source,
 * copied row by row (memcpy) into freshly allocated tensors.
 *
 * Workers claim batches in order and may run at most `depth` batches ahead of the consumer;
 * each batch has its slot (b % depth), so the consumer takes batches in order whatever order
 * the workers finish in. A worker's error (an allocation failure: the indices are checked up
 * front) is stored in its slot and raised in the consumer's thread when that batch is asked
 * for. With no workers, next() gathers on the caller's thread, the same way.
 *
 * em_prefetcher_free stops and joins the workers and releases batches nobody took, so an
 * iteration abandoned early (a `break`, or a loader garbage-collected mid-epoch) leaks nothing.
 */
#include <pthread.h>
#include <stdlib.h>

#include "io.h"

enum { MAX_WORKERS = 64, ERR_CAP = 512 };

typedef enum { SLOT_FREE, SLOT_WORKING, SLOT_READY, SLOT_FAILED } slot_state;

typedef struct slot {
  slot_state state;
  int64_t batch;
  em_tensor **out;       /* n_sources tensors */
  char error[ERR_CAP];
  em_error_kind kind;
} slot;

struct em_prefetcher {
  int n_sources;
  em_tensor **sources;   /* retained; each source's rows are contiguous */
  int64_t *row_bytes;
  int64_t *indices;
  int64_t n_indices, batch_size, n_batches;
  int pin_device;        /* batches in this device's pinned memory; -1: ordinary memory */

  int depth;
  slot *slots;
  int64_t next_claim;    /* the next batch a worker will build */
  int64_t consumed;      /* batches handed out */
  int stop;

  pthread_mutex_t lock;
  pthread_cond_t work_cv;   /* a slot was freed, or stop */
  pthread_cond_t ready_cv;  /* a batch is ready */
  int n_workers;
  pthread_t *threads;
};

/* ---- gathering ----------------------------------------------------------------------------- */

static void copy_rows(char *dst, const char *base, const int64_t *idx, int64_t lo, int64_t hi,
                      int64_t row_bytes, int64_t stride_bytes) {
  for (int64_t r = lo; r < hi; r++)
    memcpy(dst + r * row_bytes, base + idx[r] * stride_bytes, (size_t)row_bytes);
}

/* Builds batch b into out[0..n_sources); parallel (OpenMP) only on the caller's thread, since
 * workers are already one thread per batch. */
static int gather(em_prefetcher *p, int64_t b, em_tensor **out, int parallel) {
  int64_t start = b * p->batch_size;
  int64_t rows = p->n_indices - start < p->batch_size ? p->n_indices - start : p->batch_size;
  const int64_t *idx = p->indices + start;
  for (int s = 0; s < p->n_sources; s++) out[s] = NULL;
  for (int s = 0; s < p->n_sources; s++) {
    const em_tensor *src = p->sources[s];
    int64_t sizes[EM_MAX_DIMS];
    memcpy(sizes, src->sizes, sizeof sizes);
    sizes[0] = rows;
    em_tensor *t = p->pin_device >= 0
                       ? em_empty_pinned(src->ndim, sizes, (em_dtype)src->dtype_id, p->pin_device)
                       : em_empty(src->ndim, sizes, (em_dtype)src->dtype_id, EM_CPU);
    if (t == NULL) goto fail;
    out[s] = t;
    int64_t rb = p->row_bytes[s];
    if (rb == 0 || rows == 0) continue;
    char *dst = em_data_ptr(t);
    const char *base = em_data_ptr(src);
    int64_t stride = src->strides[0] * (int64_t)em_dtypes[src->dtype_id].size;
    int nt = parallel ? em_threads_for(rows * rb / 16) : 1;
    if (nt <= 1) {
      copy_rows(dst, base, idx, 0, rows, rb, stride);
    } else {
#pragma omp parallel for num_threads(nt)
      for (int k = 0; k < nt; k++)
        copy_rows(dst, base, idx, rows * k / nt, rows * (k + 1) / nt, rb, stride);
    }
  }
  return 0;
fail:
  for (int s = 0; s < p->n_sources; s++) {
    em_release(out[s]);
    out[s] = NULL;
  }
  em_error_prefix("prefetcher");
  return -1;
}

static void *worker_main(void *arg) {
  em_prefetcher *p = arg;
  pthread_mutex_lock(&p->lock);
  for (;;) {
    while (!p->stop && p->next_claim < p->n_batches && p->next_claim >= p->consumed + p->depth)
      pthread_cond_wait(&p->work_cv, &p->lock);
    if (p->stop || p->next_claim >= p->n_batches) break;
    int64_t b = p->next_claim++;
    slot *sl = &p->slots[b % p->depth];
    sl->state = SLOT_WORKING;
    sl->batch = b;
    pthread_mutex_unlock(&p->lock);

    int rc = gather(p, b, sl->out, 0);

    pthread_mutex_lock(&p->lock);
    if (rc != 0) {
      snprintf(sl->error, sizeof sl->error, "%s", em_last_error());
      sl->kind = em_last_error_kind();
    }
    sl->state = rc == 0 ? SLOT_READY : SLOT_FAILED;
    pthread_cond_broadcast(&p->ready_cv);
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

/* ---- the public API ------------------------------------------------------------------------ */

static int check_sources(int n, em_tensor *const *sources, int64_t *rows) {
  const char *fn = "prefetcher";
  if (n < 1 || sources == NULL) return em_error("%s: expected at least one source tensor", fn);
  for (int s = 0; s < n; s++) {
    const em_tensor *t = sources[s];
    if (t == NULL) return em_error("%s: source %d is NULL", fn, s + 1);
    if (t->device_id != EM_CPU)
      return em_error("%s: source %d is on %s; workers gather on the cpu only", fn, s + 1,
                      em_device_name(t->device_id));
    if (t->ndim < 1)
      return em_error("%s: source %d is 0-dim; expected samples along dimension 1", fn, s + 1);
    if (s == 0) *rows = t->sizes[0];
    else if (t->sizes[0] != *rows)
      return em_error("%s: source %d has %lld samples, source 1 has %lld", fn, s + 1,
                      (long long)t->sizes[0], (long long)*rows);
  }
  return 0;
}

/* Rows are contiguous when the tensor without its first dimension is. */
static int rows_contiguous(const em_tensor *t) {
  int64_t expected = 1;
  for (int d = t->ndim - 1; d >= 1; d--) {
    if (t->sizes[d] != 1 && t->strides[d] != expected) return 0;
    expected *= t->sizes[d];
  }
  return 1;
}

static int start_workers(em_prefetcher *p, int n) {
  p->threads = calloc((size_t)n, sizeof *p->threads);
  if (p->threads == NULL) return em_error_kind_set(EM_ERR_OOM, "prefetcher: out of memory");
  for (int i = 0; i < n; i++) {
    int rc = pthread_create(&p->threads[i], NULL, worker_main, p);
    if (rc != 0) return em_error("prefetcher: cannot start worker %d: %s", i + 1, strerror(rc));
    p->n_workers = i + 1;
  }
  return 0;
}

em_prefetcher *em_prefetcher_new(int n_sources, em_tensor *const *sources, int64_t n_indices,
                                 const int64_t *indices, int64_t batch_size, int num_workers,
                                 int depth, int pin_device) {
  const char *fn = "prefetcher";
  int64_t rows = 0;
  if (check_sources(n_sources, sources, &rows) != 0) return NULL;
  if (n_indices < 0 || (n_indices > 0 && indices == NULL))
    return em_error_null("%s: expected %lld indices, got none", fn, (long long)n_indices);
  if (batch_size < 1)
    return em_error_null("%s: expected batch_size >= 1, got %lld", fn, (long long)batch_size);
  if (num_workers < 0 || num_workers > MAX_WORKERS)
    return em_error_null("%s: expected 0 to %d workers, got %d", fn, MAX_WORKERS, num_workers);
  for (int64_t i = 0; i < n_indices; i++)
    if (indices[i] < 0 || indices[i] >= rows)
      return em_error_null("%s: index %lld (entry %lld) is out of range for %lld samples", fn,
                           (long long)indices[i], (long long)i + 1, (long long)rows);
  if (depth < 1) depth = num_workers > 0 ? 2 * num_workers : 1;
  if (pin_device >= 0) { /* a device with pinned memory, started here rather than in a worker */
    int64_t none = 0;
    em_tensor *probe = em_empty_pinned(1, &none, EM_UINT8, pin_device);
    if (probe == NULL) {
      em_error_prefix(fn);
      return NULL;
    }
    em_release(probe);
  }

  em_prefetcher *p = calloc(1, sizeof *p);
  if (p == NULL) return em_error_kind_set(EM_ERR_OOM, "%s: out of memory", fn), NULL;
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->work_cv, NULL);
  pthread_cond_init(&p->ready_cv, NULL);
  p->n_sources = n_sources;
  p->n_indices = n_indices;
  p->batch_size = batch_size;
  p->n_batches = (n_indices + batch_size - 1) / batch_size;
  p->depth = depth;
  p->pin_device = pin_device;
  p->sources = calloc((size_t)n_sources, sizeof *p->sources);
  p->row_bytes = calloc((size_t)n_sources, sizeof *p->row_bytes);
  p->indices = malloc((size_t)(n_indices ? n_indices : 1) * sizeof *p->indices);
  p->slots = calloc((size_t)depth, sizeof *p->slots);
  int ok = p->sources && p->row_bytes && p->indices && p->slots;
  for (int i = 0; ok && i < depth; i++) {
    p->slots[i].out = calloc((size_t)n_sources, sizeof(em_tensor *));
    ok = p->slots[i].out != NULL;
  }
  if (!ok) {
    em_prefetcher_free(p);
    return em_error_kind_set(EM_ERR_OOM, "%s: out of memory", fn), NULL;
  }
  if (n_indices > 0) memcpy(p->indices, indices, (size_t)n_indices * sizeof *indices);
  for (int s = 0; s < n_sources; s++) {
    const em_tensor *t = sources[s];
    /* A source whose rows are not contiguous is copied once here, not per batch. */
    p->sources[s] = rows_contiguous(t) ? em_retain((em_tensor *)t) : em_contiguous(t);
    if (p->sources[s] == NULL) {
      em_error_prefix(fn);
      em_prefetcher_free(p);
      return NULL;
    }
    p->row_bytes[s] = em_shape_numel(t->ndim - 1, t->sizes + 1) * (int64_t)em_dtypes[t->dtype_id].size;
  }
  if (num_workers > 0 && start_workers(p, num_workers) != 0) {
    char msg[ERR_CAP];
    snprintf(msg, sizeof msg, "%s", em_last_error());
    em_prefetcher_free(p);
    em_set_error(msg);
    return NULL;
  }
  return p;
}

int64_t em_prefetcher_num_batches(const em_prefetcher *p) {
  EM_NOT_NULL(-1, p);
  return p->n_batches;
}

int em_prefetcher_next(em_prefetcher *p, em_tensor **out) {
  if (p == NULL || out == NULL) return em_error("prefetcher: expected a prefetcher, got NULL");
  if (p->n_workers == 0) {
    if (p->consumed >= p->n_batches) return 0;
    if (gather(p, p->consumed, out, 1) != 0) return -1;
    p->consumed++;
    return 1;
  }
  pthread_mutex_lock(&p->lock);
  if (p->consumed >= p->n_batches) {
    pthread_mutex_unlock(&p->lock);
    return 0;
  }
  slot *sl = &p->slots[p->consumed % p->depth];
  while (!(sl->batch == p->consumed && (sl->state == SLOT_READY || sl->state == SLOT_FAILED)))
    pthread_cond_wait(&p->ready_cv, &p->lock);
  int failed = sl->state == SLOT_FAILED;
  char msg[ERR_CAP];
  em_error_kind kind = sl->kind;
  if (failed) snprintf(msg, sizeof msg, "%s", sl->error);
  for (int s = 0; s < p->n_sources; s++) {
    out[s] = sl->out[s];
    sl->out[s] = NULL;
  }
  sl->state = SLOT_FREE;
  p->consumed++;
  pthread_cond_broadcast(&p->work_cv);
  pthread_mutex_unlock(&p->lock);
  if (failed) {
    em_error_kind_set(kind, "%s", msg);
    return -1;
  }
  return 1;
}

void em_prefetcher_free(em_prefetcher *p) {
  if (p == NULL) return;
  pthread_mutex_lock(&p->lock);
  p->stop = 1;
  pthread_cond_broadcast(&p->work_cv);
  pthread_mutex_unlock(&p->lock);
  for (int i = 0; i < p->n_workers; i++) pthread_join(p->threads[i], NULL);
  free(p->threads);
  if (p->slots)
    for (int i = 0; i < p->depth; i++) {
      if (p->slots[i].out)
        for (int s = 0; s < p->n_sources; s++) em_release(p->slots[i].out[s]);
      free(p->slots[i].out);
    }
  free(p->slots);
  if (p->sources)
    for (int s = 0; s < p->n_sources; s++) em_release(p->sources[s]);
  free(p->sources);
  free(p->row_bytes);
  free(p->indices);
  pthread_cond_destroy(&p->work_cv);
  pthread_cond_destroy(&p->ready_cv);
  pthread_mutex_destroy(&p->lock);
  free(p);
}
