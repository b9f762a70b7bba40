/*
 * collectives.c: the public em_dist_* functions. Each collective checks its arguments on the
 * caller's thread, puts the data where MPI can read it (host memory), queues the MPI calls on
 * the communication thread (comm_thread.c) and returns a work handle; em_dist_wait puts the
 * result back.
 *
 * Where the data goes through:
 *  - a contiguous CPU tensor is used in place: MPI reads and writes its memory;
 *  - a non-contiguous CPU tensor goes through a contiguous copy, copied back at the wait;
 *  - a device tensor goes through a buffer in the device's pinned memory, in chunks
 *    (EMBER_DIST_CHUNK_BYTES, default 4 MiB) for all_reduce and broadcast: the caller records
 *    and starts each chunk's copy to the host (no wait) and queues its MPI call with the
 *    copy's ticket; the thread waits for the copy of chunk i (polling) and sends it while the
 *    device copies the next. At the wait, chunk i's copy back to the device is recorded as soon
 *    as its transfer is done, while later chunks are still in flight. The device copies are
 *    recorded on the caller's thread: the Vulkan device records under one lock, and the thread
 *    that owns MPI only polls it.
 * all_gather and reduce_scatter stage their whole input and output (one MPI call each).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../backend.h"
#include "../internal.h"
#include "dist.h"

static int initialized, finalized, world_rank, world_size, local_rank;

struct em_dist_work {
  const char *what;         /* "all_reduce", ... for messages */
  dist_job *jobs;
  int njobs;
  int64_t chunk;            /* elements per job (in-place collectives) */
  em_tensor *dst;           /* the tensor that receives the result (retained), or NULL */
  em_tensor *src;           /* the input tensor (retained) */
  em_tensor *host;          /* what MPI writes: dst itself, a contiguous copy, pinned memory */
  em_tensor *host_in;       /* what MPI reads for all_gather and reduce_scatter */
  em_tensor *dst_flat;      /* dst as a flat contiguous view, when chunks are copied back */
  em_tensor *src_flat;      /* the device data being copied out (kept until the copies ran) */
  int staging_slot;         /* staging.c's slot holding `host`, or -1 */
  int waited, status;
  char error[512];
};

/* ---- set-up -------------------------------------------------------------------------------- */

int em_dist_available(void) {
#ifdef EMBER_HAVE_MPI
  return 1;
#else
  return 0;
#endif
}

int em_dist_init(double timeout_s) {
  if (initialized) {
    em_set_error("ember.distributed.init: already initialized");
    return -1;
  }
  if (finalized) {
    em_set_error("ember.distributed.init: MPI was finalized in this process and cannot start "
                 "again");
    return -1;
  }
  if (!(timeout_s > 0)) {
    em_set_error("ember.distributed.init: timeout must be a positive number of seconds");
    return -1;
  }
  if (dist_mpi_load() != 0 || dist_thread_start() != 0) return -1;
  dist_thread_set_timeout(timeout_s);
  dist_job job = {.kind = DIST_JOB_INIT};
  dist_job_submit(&job);
  if (dist_job_wait(&job, "ember.distributed.init") != 0) {
    if (!dist_thread_broken()) dist_thread_stop();
    return -1;
  }
  world_rank = job.rank;
  world_size = job.size;
  local_rank = job.local_rank;
  initialized = 1;
  return 0;
}

int em_dist_is_initialized(void) { return initialized; }

static int need_init(const char *what) {
  if (initialized) return 1;
  char msg[160];
  snprintf(msg, sizeof msg, "%s: ember.distributed is not initialized (call "
           "ember.distributed.init first)", what);
  em_set_error(msg);
  return 0;
}

int em_dist_rank(void) { return need_init("rank") ? world_rank : -1; }
int em_dist_world_size(void) { return need_init("world_size") ? world_size : -1; }
int em_dist_local_rank(void) { return need_init("local_rank") ? local_rank : -1; }

int em_dist_finalize(void) {
  if (!need_init("finalize")) return -1;
  if (dist_thread_broken()) {
    em_set_error("ember.distributed.finalize: a collective timed out, MPI cannot be finalized "
                 "(end the job with MPI_Abort)");
    return -1;
  }
  dist_job job = {.kind = DIST_JOB_FINALIZE};
  dist_job_submit(&job);
  int rc = dist_job_wait(&job, "ember.distributed.finalize");
  dist_staging_free_all();
  if (dist_thread_broken()) return -1;
  dist_thread_stop();
  initialized = 0;
  finalized = 1;
  return rc;
}

void em_dist_abort(int code) {
  if (!initialized) return;
  fflush(stdout);
  fflush(stderr);
  dist_mpi_abort(code);
}

/* ---- checks -------------------------------------------------------------------------------- */

static const char *op_name(em_dist_op op) {
  static const char *const names[] = {"sum", "avg", "max", "min"};
  return op >= EM_DIST_SUM && op <= EM_DIST_MIN ? names[op] : "?";
}

static int check_op(const char *what, em_dtype dtype, em_dist_op op) {
  char msg[200];
  if (op < EM_DIST_SUM || op > EM_DIST_MIN) {
    snprintf(msg, sizeof msg, "%s: unknown op %d (expected sum, avg, max or min)", what, (int)op);
  } else if (dtype == EM_BOOL && (op == EM_DIST_SUM || op == EM_DIST_AVG)) {
    snprintf(msg, sizeof msg, "%s: op '%s' is not defined for bool (use max or min)", what,
             op_name(op));
  } else if (op == EM_DIST_AVG && !em_dtype_is_floating(dtype)) {
    snprintf(msg, sizeof msg, "%s: op 'avg' needs a floating dtype, got %s (use sum)", what,
             em_dtype_name(dtype));
  } else {
    return 0;
  }
  em_set_error(msg);
  return -1;
}

static int check_tensor(const char *what, const char *name, const em_tensor *t) {
  if (t == NULL) {
    char msg[120];
    snprintf(msg, sizeof msg, "%s: %s is NULL", what, name);
    em_set_error(msg);
    return -1;
  }
  if (t->dtype_id < 0 || t->dtype_id >= EM_NUM_DTYPES) {
    char msg[120];
    snprintf(msg, sizeof msg, "%s: %s has a dtype collectives cannot move (quantized?)", what, name);
    em_set_error(msg);
    return -1;
  }
  if (em_dtype_is_block((em_dtype)t->dtype_id)) { /* MPI has no type for blocks */
    char msg[200];
    snprintf(msg, sizeof msg, "%s: %s has the quantized dtype %s, which collectives do not move "
             "(send its bytes: ember.quant.bytes)", what, name, em_dtype_name((em_dtype)t->dtype_id));
    em_set_error(msg);
    return -1;
  }
  return 0;
}

/* ---- staging ------------------------------------------------------------------------------- */

static int64_t device_chunk_elems(size_t elem) {
  static int64_t bytes;
  if (bytes == 0) {
    const char *env = getenv("EMBER_DIST_CHUNK_BYTES");
    long long v = env ? atoll(env) : 0;
    bytes = v > 0 ? v : (int64_t)4 << 20;
  }
  int64_t n = bytes / (int64_t)elem;
  if (n < 1) n = 1;
  if (n > INT_MAX) n = INT_MAX;
  return n;
}

/* A flat host buffer for numel elements: pinned memory of `device`, or plain CPU memory. */
static em_tensor *host_buffer(int64_t numel, em_dtype dtype, int device) {
  if (device != 0) {
    em_tensor *p = em_empty_pinned(1, &numel, dtype, device);
    if (p != NULL) return p;
    em_clear_error();
  }
  return em_empty(1, &numel, dtype, 0);
}

static em_tensor *flat_view(const em_tensor *t) {
  int64_t n = em_numel(t);
  return em_view(t, 1, &n);
}

static em_dist_work *work_new(const char *what, em_tensor *dst, const em_tensor *src) {
  em_dist_work *w = calloc(1, sizeof *w);
  if (w == NULL) {
    em_set_error("ember.distributed: out of memory for a work handle");
    return NULL;
  }
  w->what = what;
  w->staging_slot = -1;
  w->dst = em_retain(dst);
  w->src = em_retain((em_tensor *)src);
  return w;
}

static void work_release(em_dist_work *w) {
  em_release(w->dst);
  em_release(w->src);
  em_release(w->host);
  em_release(w->host_in);
  em_release(w->dst_flat);
  em_release(w->src_flat);
  dist_staging_put(w->staging_slot);
  free(w->jobs);
  free(w);
}

static int alloc_jobs(em_dist_work *w, int n) {
  w->njobs = n;
  if (n == 0) return 0;
  w->jobs = calloc((size_t)n, sizeof *w->jobs);
  if (w->jobs == NULL) {
    em_set_error("ember.distributed: out of memory for the transfer's jobs");
    return -1;
  }
  return 0;
}

/* Copies chunk [start, start + len) of the device tensor src_flat into the host buffer. Into
 * pinned memory the copy is only recorded and started (pinned_read_start): the job carries its
 * ticket and the communication thread waits for it, so the caller neither waits for the device
 * nor for the copy, and the device keeps running the caller's work meanwhile. Elsewhere
 * (ordinary memory, a backend without the slot) the copy is synchronous: the thread sends
 * earlier chunks while the caller waits for this one. */
static int stage_chunk(em_dist_work *w, dist_job *j, const em_tensor *src_flat, char *base,
                       int64_t start, int64_t len, size_t elem) {
  const em_backend *be = em_device_backend(src_flat->device_id);
  if (be->pinned_read_start && be->pinned_read_poll &&
      em_pinned_device(w->host) == src_flat->device_id) {
    size_t offset = (size_t)(src_flat->offset + start) * elem;
    j->ticket = be->pinned_read_start(src_flat->storage, offset, base + start * (int64_t)elem,
                                      (size_t)len * elem);
    if (j->ticket == 0) return -1;
    j->poll = be->pinned_read_poll;
    j->device = src_flat->device_id;
    return 0;
  }
  em_tensor *from = em_narrow(src_flat, 0, start, len);
  em_tensor *to = from ? em_narrow(w->host, 0, start, len) : NULL;
  int rc = to ? em_copy_(to, from) : -1;
  em_release(from);
  em_release(to);
  return rc;
}

/* In-place collectives (all_reduce, broadcast) on t: chooses the host buffer, copies t into it
 * chunk by chunk (unless `fill` is 0: a broadcast's receivers need not send their data) and
 * queues one job per chunk, each made by the template. */
static em_dist_work *in_place(const char *what, em_tensor *t, dist_job tmpl, int fill) {
  em_dist_work *w = work_new(what, t, t);
  if (w == NULL) return NULL;
  int64_t numel = em_numel(t);
  size_t elem = em_dtype_size((em_dtype)t->dtype_id);
  int device = t->device_id;
  em_tensor *src_c = NULL, *src_flat = NULL;
  int prev_grad = em_set_grad_enabled(0);
  if (numel == 0) goto done;
  if (device == 0) {
    /* CPU: t itself when contiguous, else a contiguous copy; the whole tensor per job */
    w->host = em_contiguous(t);
    if (w->host == NULL) goto fail;
    w->chunk = INT_MAX / 2;
  } else {
    /* a kept buffer when every chunk is first copied in through the device queue */
    const em_backend *be = em_device_backend(device);
    if (fill && be->pinned_read_start && be->pinned_read_poll) {
      w->host = dist_staging_get(numel, (em_dtype)t->dtype_id, device, &w->staging_slot);
      if (w->host == NULL) em_clear_error();
    }
    if (w->host == NULL) w->host = host_buffer(numel, (em_dtype)t->dtype_id, device);
    if (w->host == NULL) goto fail;
    w->chunk = device_chunk_elems(elem);
    if (fill) {
      src_c = em_contiguous(t);
      if (src_c == NULL || (src_flat = flat_view(src_c)) == NULL) goto fail;
    }
    if (em_is_contiguous(t) && (w->dst_flat = flat_view(t)) == NULL) goto fail;
  }
  int n = (int)((numel + w->chunk - 1) / w->chunk);
  if (alloc_jobs(w, n) != 0) goto fail;
  char *base = em_data_ptr(w->host);
  for (int i = 0; i < n; i++) {
    int64_t start = (int64_t)i * w->chunk;
    int64_t len = numel - start < w->chunk ? numel - start : w->chunk;
    dist_job *j = &w->jobs[i];
    *j = tmpl;
    if (src_flat != NULL && stage_chunk(w, j, src_flat, base, start, len, elem) != 0) {
      w->njobs = i; /* the queued ones must still finish before the buffers go */
      goto fail;
    }
    j->buf = base + start * (int64_t)elem;
    j->count = len;
    j->dtype = (em_dtype)t->dtype_id;
    j->world = world_size;
    dist_job_submit(j);
  }
done:
  w->src_flat = src_flat; /* pending copies read it */
  em_release(src_c);
  em_set_grad_enabled(prev_grad);
  return w;
fail: {
  /* the queued jobs (and their device copies, which read src_flat) finish before anything goes;
   * the error to report is this one, not theirs */
  char error[512];
  snprintf(error, sizeof error, "%s", em_last_error());
  for (int i = 0; i < w->njobs; i++) dist_job_wait(&w->jobs[i], what);
  em_release(src_flat);
  em_release(src_c);
  em_set_grad_enabled(prev_grad);
  work_release(w);
  em_set_error(error);
  return NULL;
}
}

/* ---- the collectives ------------------------------------------------------------------------ */

em_dist_work *em_dist_all_reduce(em_tensor *t, em_dist_op op) {
  const char *what = "all_reduce";
  if (!need_init(what) || check_tensor(what, "t", t) != 0 ||
      check_op(what, (em_dtype)t->dtype_id, op) != 0)
    return NULL;
  dist_job tmpl = {.kind = DIST_JOB_ALLREDUCE, .op = op};
  return in_place(what, t, tmpl, 1);
}

em_dist_work *em_dist_broadcast(em_tensor *t, int root) {
  const char *what = "broadcast";
  if (!need_init(what) || check_tensor(what, "t", t) != 0) return NULL;
  if (root < 0 || root >= world_size) {
    char msg[160];
    snprintf(msg, sizeof msg, "broadcast: root must be a rank from 0 to %d, got %d",
             world_size - 1, root);
    em_set_error(msg);
    return NULL;
  }
  dist_job tmpl = {.kind = DIST_JOB_BCAST, .root = root};
  return in_place(what, t, tmpl, root == world_rank);
}

/* Checks out's dtype, device and sizes against the expected ones. */
static int check_out(const char *what, const em_tensor *t, const em_tensor *out, int ndim,
                     const int64_t *sizes) {
  char msg[400];
  if (out->dtype_id != t->dtype_id || out->device_id != t->device_id) {
    snprintf(msg, sizeof msg, "%s: out must have t's dtype and device (%s on %s), got %s on %s",
             what, em_dtype_name((em_dtype)t->dtype_id), em_device_name(t->device_id),
             em_dtype_name((em_dtype)out->dtype_id), em_device_name(out->device_id));
    em_set_error(msg);
    return -1;
  }
  int same = out->ndim == ndim;
  for (int d = 0; same && d < ndim; d++) same = out->sizes[d] == sizes[d];
  if (same) return 0;
  int k = snprintf(msg, sizeof msg, "%s: out must have sizes [", what);
  for (int d = 0; d < ndim && k < 300; d++) k += snprintf(msg + k, sizeof msg - k, "%s%lld", d ? "," : "", (long long)sizes[d]);
  k += snprintf(msg + k, sizeof msg - k, "], got [");
  for (int d = 0; d < out->ndim && k < 380; d++) k += snprintf(msg + k, sizeof msg - k, "%s%lld", d ? "," : "", (long long)out->sizes[d]);
  snprintf(msg + k, sizeof msg - k, "]");
  em_set_error(msg);
  return -1;
}

/* all_gather and reduce_scatter: stages t (whole) in host memory and queues one job that
 * writes the host form of out. */
static em_dist_work *gather_like(const char *what, const em_tensor *t, em_tensor *out,
                                 dist_job tmpl) {
  em_dist_work *w = work_new(what, out, t);
  if (w == NULL) return NULL;
  int prev_grad = em_set_grad_enabled(0);
  int64_t in_n = em_numel(t), out_n = em_numel(out);
  if (in_n == 0 && out_n == 0) goto done;
  if (in_n > INT_MAX || out_n > INT_MAX) {
    em_set_error("ember.distributed: all_gather and reduce_scatter move at most 2^31-1 "
                 "elements per call (not implemented beyond)");
    goto fail;
  }
  if (t->device_id == 0) {
    w->host_in = em_contiguous(t);
  } else {
    w->host_in = host_buffer(in_n, (em_dtype)t->dtype_id, t->device_id);
    em_tensor *shaped = w->host_in ? em_view(w->host_in, t->ndim, t->sizes) : NULL;
    int rc = shaped ? em_copy_(shaped, t) : -1;
    em_release(shaped);
    if (rc != 0) goto fail;
  }
  if (w->host_in == NULL) goto fail;
  if (out->device_id == 0 && em_is_contiguous(out)) w->host = em_retain(out);
  else w->host = host_buffer(out_n, (em_dtype)out->dtype_id, out->device_id);
  if (w->host == NULL || alloc_jobs(w, 1) != 0) goto fail;
  dist_job *j = &w->jobs[0];
  *j = tmpl;
  j->in = em_data_ptr(w->host_in);
  j->buf = em_data_ptr(w->host);
  j->count = in_n;
  j->dtype = (em_dtype)t->dtype_id;
  j->world = world_size;
  dist_job_submit(j);
done:
  em_set_grad_enabled(prev_grad);
  return w;
fail:
  em_set_grad_enabled(prev_grad);
  work_release(w);
  return NULL;
}

em_dist_work *em_dist_all_gather(const em_tensor *t, em_tensor *out) {
  const char *what = "all_gather";
  if (!need_init(what) || check_tensor(what, "t", t) != 0 || check_tensor(what, "out", out) != 0)
    return NULL;
  if (t->ndim + 1 > EM_MAX_DIMS) {
    em_set_error("all_gather: t has the most dimensions a tensor may have; out needs one more");
    return NULL;
  }
  int64_t sizes[EM_MAX_DIMS];
  sizes[0] = world_size;
  for (int d = 0; d < t->ndim; d++) sizes[d + 1] = t->sizes[d];
  if (check_out(what, t, out, t->ndim + 1, sizes) != 0) return NULL;
  dist_job tmpl = {.kind = DIST_JOB_ALLGATHER};
  return gather_like(what, t, out, tmpl);
}

em_dist_work *em_dist_reduce_scatter(const em_tensor *t, em_tensor *out, em_dist_op op) {
  const char *what = "reduce_scatter";
  if (!need_init(what) || check_tensor(what, "t", t) != 0 || check_tensor(what, "out", out) != 0 ||
      check_op(what, (em_dtype)t->dtype_id, op) != 0)
    return NULL;
  char msg[200];
  if (t->ndim == 0 || t->sizes[0] % world_size != 0) {
    if (t->ndim == 0)
      snprintf(msg, sizeof msg, "reduce_scatter: t must have at least one dimension");
    else
      snprintf(msg, sizeof msg, "reduce_scatter: t's first dimension (%lld) must divide evenly "
               "by the world size (%d)", (long long)t->sizes[0], world_size);
    em_set_error(msg);
    return NULL;
  }
  int64_t sizes[EM_MAX_DIMS];
  memcpy(sizes, t->sizes, sizeof sizes);
  sizes[0] /= world_size;
  if (check_out(what, t, out, t->ndim, sizes) != 0) return NULL;
  dist_job tmpl = {.kind = DIST_JOB_REDUCE_SCATTER, .op = op};
  return gather_like(what, t, out, tmpl);
}

em_dist_work *em_dist_barrier(void) {
  const char *what = "barrier";
  if (!need_init(what)) return NULL;
  em_dist_work *w = work_new(what, NULL, NULL);
  if (w == NULL) return NULL;
  if (alloc_jobs(w, 1) != 0) {
    work_release(w);
    return NULL;
  }
  w->jobs[0].kind = DIST_JOB_BARRIER;
  dist_job_submit(&w->jobs[0]);
  return w;
}

/* ---- completion ----------------------------------------------------------------------------- */

/* Copies the finished chunk i of the host buffer to dst (a device tensor, contiguous). */
static int copy_back_chunk(em_dist_work *w, int i) {
  int64_t start = (int64_t)i * w->chunk, numel = em_numel(w->dst);
  int64_t len = numel - start < w->chunk ? numel - start : w->chunk;
  em_tensor *to = em_narrow(w->dst_flat, 0, start, len);
  em_tensor *from = to ? em_narrow(w->host, 0, start, len) : NULL;
  int rc = from ? em_copy_(to, from) : -1;
  em_release(to);
  em_release(from);
  return rc;
}

/* Copies the whole host buffer into dst (any layout, any device). */
static int copy_back_whole(em_dist_work *w) {
  em_tensor *shaped = em_view(w->host, w->dst->ndim, w->dst->sizes);
  int rc = shaped ? em_copy_(w->dst, shaped) : -1;
  em_release(shaped);
  return rc;
}

int em_dist_wait(em_dist_work *w) {
  if (w == NULL) {
    em_set_error("wait: the work handle is NULL");
    return -1;
  }
  if (w->waited) {
    if (w->status != 0) em_set_error(w->error);
    return w->status;
  }
  int status = 0, chunked = w->dst_flat != NULL && w->host != NULL && w->host != w->dst;
  int prev_grad = em_set_grad_enabled(0);
  for (int i = 0; i < w->njobs; i++) {
    int rc = dist_job_wait(&w->jobs[i], w->what);
    if (rc != 0 && status == 0) {
      status = -1;
      snprintf(w->error, sizeof w->error, "%s", em_last_error());
    }
    if (rc == 0 && status == 0 && chunked && copy_back_chunk(w, i) != 0) {
      status = -1;
      snprintf(w->error, sizeof w->error, "%s", em_last_error());
    }
    if (dist_thread_broken()) break; /* the rest will never finish */
  }
  if (status == 0 && w->dst != NULL && em_numel(w->dst) > 0) {
    if (!chunked && w->host != w->dst && copy_back_whole(w) != 0) {
      status = -1;
      snprintf(w->error, sizeof w->error, "%s", em_last_error());
    }
    if (w->host == w->dst) em_bump_version(w->dst); /* MPI wrote it directly */
  }
  em_set_grad_enabled(prev_grad);
  w->waited = 1;
  w->status = status;
  if (status != 0) em_set_error(w->error);
  return status;
}

int em_dist_is_completed(const em_dist_work *w) {
  if (w == NULL) return 0;
  if (w->waited) return 1;
  for (int i = 0; i < w->njobs; i++)
    if (!dist_job_done(&w->jobs[i])) return 0;
  return 1;
}

void em_dist_work_free(em_dist_work *w) {
  if (w == NULL) return;
  for (int i = 0; i < w->njobs; i++) {
    if (dist_job_done(&w->jobs[i])) continue;
    if (dist_job_wait(&w->jobs[i], w->what) != 0 && !dist_job_done(&w->jobs[i])) {
      /* the thread is stuck in this job's MPI call: its buffers must stay; leak them */
      return;
    }
  }
  work_release(w);
}
