/*
 * dist.h: the internals of ember.distributed (docs/distributed.md, docs/design.md).
 *   mpi_loader.c   loads Open MPI at run time (dlopen) and wraps the few MPI calls used, in
 *                  Ember's terms (dtypes, ops); the only file that sees mpi.h
 *   comm_thread.c  the communication thread: runs every MPI call, in order, from a queue,
 *                  and the waits with a timeout
 *   collectives.c  the public em_dist_* functions: checks, host staging, chunking
 *   staging.c      the pinned host buffers device tensors go through, kept for reuse
 * Every MPI call runs on the communication thread (init included), so MPI sees one thread.
 */
#ifndef EMBER_DIST_H
#define EMBER_DIST_H

#include <stdint.h>

#include "ember.h"

/* ---- mpi_loader.c: each returns 0, or -1 after em_set_error (on the calling thread) ---- */
/* Loads libmpi (EMBER_MPI_LIB, else libmpi.so.40, else libmpi.so) and its symbols. */
int dist_mpi_load(void);
/* MPI_Init_thread, MPI_ERRORS_RETURN, the 16-bit reduction ops; rank, size and local rank. */
int dist_mpi_init(int *rank, int *size, int *local_rank);
int dist_mpi_finalize(void);
/* MPI_Abort on MPI_COMM_WORLD (any thread: it ends the job, see comm_thread.c). */
void dist_mpi_abort(int code);
/* The collectives on MPI_COMM_WORLD; count is in elements of dtype (at most INT32_MAX). */
int dist_mpi_allreduce(void *buf, int64_t count, em_dtype dtype, em_dist_op op);
int dist_mpi_bcast(void *buf, int64_t count, em_dtype dtype, int root);
int dist_mpi_allgather(const void *in, void *out, int64_t count, em_dtype dtype);
int dist_mpi_reduce_scatter(const void *in, void *out, int64_t count, em_dtype dtype,
                            em_dist_op op);
int dist_mpi_barrier(void);
/* buf[i] *= factor for a floating dtype (avg = sum, then this), in host memory. */
void dist_scale(void *buf, int64_t count, em_dtype dtype, double factor);

/* ---- staging.c: pinned host buffers kept for reuse ---- */
/* A flat pinned view of numel elements for a collective that first copies device data into it
 * through the device queue; *slot names what to give back (dist_staging_put) once the work is
 * done. NULL (with *slot -1 and maybe an error) when none can be had: the caller allocates. */
em_tensor *dist_staging_get(int64_t numel, em_dtype dtype, int device, int *slot);
void dist_staging_put(int slot);
/* Releases the kept buffers that no work uses (at finalize). */
void dist_staging_free_all(void);

/* ---- comm_thread.c ---- */
typedef enum dist_job_kind {
  DIST_JOB_INIT, DIST_JOB_FINALIZE, DIST_JOB_ALLREDUCE, DIST_JOB_BCAST, DIST_JOB_ALLGATHER,
  DIST_JOB_REDUCE_SCATTER, DIST_JOB_BARRIER
} dist_job_kind;

/* One MPI call for the thread. The submitter owns the job and the buffers it points at; it
 * frees them only once the job is done (dist_job_wait returned, or dist_job_done says 1). */
typedef struct dist_job {
  dist_job_kind kind;
  void *buf;            /* in place (allreduce, bcast); the output (allgather, reduce_scatter) */
  const void *in;       /* the input of allgather and reduce_scatter */
  int64_t count;        /* elements: of buf, or of `in` for allgather and reduce_scatter */
  em_dtype dtype;
  em_dist_op op;
  int root;
  int world;            /* avg divides by it */
  /* A copy from the device into buf that must finish before the MPI call: the thread polls
   * poll(device, ticket) until it returns 1 (backend.h, pinned_read_start); poll NULL: none. */
  int (*poll)(int device, uint64_t ticket);
  int device;
  uint64_t ticket;
  int rank, size, local_rank; /* results of DIST_JOB_INIT */
  /* set by the thread */
  int done, status;
  char error[512];
  struct dist_job *next;
} dist_job;

/* Starts the thread (once; 0 or -1 with an error). */
int dist_thread_start(void);
/* Queues the job; it runs after every job queued before it. */
void dist_job_submit(dist_job *job);
/* Waits for the job: 0, or -1 with its error, or with a timeout error when the thread has spent
 * more than the timeout in one call (a peer died or never joined): the thread is then stuck in
 * MPI for good, and every later job fails at once (dist_thread_broken). `what` names the call. */
int dist_job_wait(dist_job *job, const char *what);
int dist_job_done(dist_job *job);
void dist_thread_set_timeout(double seconds);
double dist_thread_timeout(void);
int dist_thread_broken(void);
/* Asks the thread to exit after its queue and joins it (not when broken). */
void dist_thread_stop(void);

#endif
