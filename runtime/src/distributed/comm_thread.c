/*
 * comm_thread.c: the communication thread. Every MPI call of ember.distributed runs here, one
 * at a time, in the order the collectives were issued (MPI requires every rank to issue them
 * in the same order; one thread keeps that order and lets MPI run with MPI_THREAD_FUNNELED).
 * The caller queues a job and goes on with its own work; a later wait blocks until the job is
 * done. That is what makes the async collectives overlap the caller's computation.
 *
 * The timeout. A blocking MPI call whose peer died (or never issues the matching call) may
 * never return. MPI cannot interrupt it, so the waiter watches instead: it wakes every 100 ms,
 * and when the thread has been inside its current call for longer than the timeout, the wait
 * fails with a message naming the call, and the thread is marked broken: later jobs fail at
 * once, and em_dist_finalize refuses (the `ember` program then ends the job with MPI_Abort).
 * The timeout is a wait's failure, not a measurement: nothing depends on its exact length.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../internal.h"
#include "dist.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_ready = PTHREAD_COND_INITIALIZER; /* the thread waits on it */
static pthread_cond_t job_done = PTHREAD_COND_INITIALIZER;   /* waiters wait on it */
static dist_job *head, *tail;
static dist_job *current;          /* the job inside MPI now, or NULL */
static double current_since;       /* when it started (monotonic seconds) */
static double timeout_s = 1800;
static int running, stopping, broken, joinable;
static pthread_t thread;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Waits for the job's device copy (staging): polls the fences, sleeping 20 us between polls,
 * so the device lock is held only for each poll and the caller's thread keeps recording. */
static int wait_device_copy(dist_job *j) {
  if (j->poll == NULL) return 0;
  for (;;) {
    int rc = j->poll(j->device, j->ticket);
    if (rc != 0) return rc > 0 ? 0 : -1;
    struct timespec pause = {0, 20 * 1000};
    nanosleep(&pause, NULL);
  }
}

static int run_job(dist_job *j) {
  if (wait_device_copy(j) != 0) return -1;
  switch (j->kind) {
  case DIST_JOB_INIT:
    return dist_mpi_init(&j->rank, &j->size, &j->local_rank);
  case DIST_JOB_FINALIZE:
    return dist_mpi_finalize();
  case DIST_JOB_ALLREDUCE:
    if (dist_mpi_allreduce(j->buf, j->count, j->dtype, j->op) != 0) return -1;
    if (j->op == EM_DIST_AVG) dist_scale(j->buf, j->count, j->dtype, 1.0 / j->world);
    return 0;
  case DIST_JOB_BCAST:
    return dist_mpi_bcast(j->buf, j->count, j->dtype, j->root);
  case DIST_JOB_ALLGATHER:
    return dist_mpi_allgather(j->in, j->buf, j->count, j->dtype);
  case DIST_JOB_REDUCE_SCATTER:
    if (dist_mpi_reduce_scatter(j->in, j->buf, j->count / j->world, j->dtype, j->op) != 0)
      return -1;
    if (j->op == EM_DIST_AVG) dist_scale(j->buf, j->count / j->world, j->dtype, 1.0 / j->world);
    return 0;
  case DIST_JOB_BARRIER:
    return dist_mpi_barrier();
  }
  em_set_error("ember.distributed: unknown job");
  return -1;
}

static void *thread_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&lock);
  for (;;) {
    while (head == NULL && !stopping) pthread_cond_wait(&work_ready, &lock);
    if (head == NULL) break; /* stopping, queue drained */
    dist_job *j = head;
    head = j->next;
    if (head == NULL) tail = NULL;
    current = j;
    current_since = now_s();
    pthread_mutex_unlock(&lock);
    int status = run_job(j);
    pthread_mutex_lock(&lock);
    j->status = status;
    if (status != 0) snprintf(j->error, sizeof j->error, "%s", em_last_error());
    j->done = 1;
    current = NULL;
    pthread_cond_broadcast(&job_done);
    if (j->kind == DIST_JOB_FINALIZE) break;
  }
  running = 0;
  pthread_mutex_unlock(&lock);
  return NULL;
}

int dist_thread_start(void) {
  pthread_mutex_lock(&lock);
  int rc = 0;
  if (!running) {
    stopping = 0;
    if (pthread_create(&thread, NULL, thread_main, NULL) != 0) {
      em_set_error("ember.distributed.init: cannot start the communication thread");
      rc = -1;
    } else {
      running = joinable = 1;
    }
  }
  pthread_mutex_unlock(&lock);
  return rc;
}

void dist_job_submit(dist_job *job) {
  job->done = 0;
  job->status = 0;
  job->error[0] = '\0';
  job->next = NULL;
  pthread_mutex_lock(&lock);
  if (broken || !running) {
    job->done = 1;
    job->status = -1;
    snprintf(job->error, sizeof job->error, "%s",
             broken ? "ember.distributed: an earlier collective timed out; the communication "
                      "thread is stuck in MPI and cannot run more"
                    : "ember.distributed: not initialized (call ember.distributed.init first)");
  } else {
    if (tail) tail->next = job;
    else head = job;
    tail = job;
    pthread_cond_signal(&work_ready);
  }
  pthread_mutex_unlock(&lock);
}

int dist_job_wait(dist_job *job, const char *what) {
  pthread_mutex_lock(&lock);
  while (!job->done && !broken) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 100 * 1000 * 1000;
    if (until.tv_nsec >= 1000000000) until.tv_sec++, until.tv_nsec -= 1000000000;
    pthread_cond_timedwait(&job_done, &lock, &until);
    if (!job->done && current != NULL && now_s() - current_since > timeout_s) broken = 1;
  }
  int status = job->done ? job->status : -1;
  char msg[600];
  if (!job->done)
    snprintf(msg, sizeof msg, "%s: timed out after %g s waiting for the other ranks (one may "
             "have stopped, or not called the same collective); distributed is now unusable",
             what, timeout_s);
  else
    snprintf(msg, sizeof msg, "%s", job->error);
  pthread_mutex_unlock(&lock);
  if (status != 0) em_set_error(msg);
  return status;
}

int dist_job_done(dist_job *job) {
  pthread_mutex_lock(&lock);
  int done = job->done;
  pthread_mutex_unlock(&lock);
  return done;
}

void dist_thread_set_timeout(double seconds) {
  pthread_mutex_lock(&lock);
  timeout_s = seconds;
  pthread_mutex_unlock(&lock);
}

double dist_thread_timeout(void) {
  pthread_mutex_lock(&lock);
  double t = timeout_s;
  pthread_mutex_unlock(&lock);
  return t;
}

int dist_thread_broken(void) {
  pthread_mutex_lock(&lock);
  int b = broken;
  pthread_mutex_unlock(&lock);
  return b;
}

void dist_thread_stop(void) {
  pthread_mutex_lock(&lock);
  int join = joinable && !broken;
  stopping = 1;
  joinable = 0;
  pthread_cond_signal(&work_ready);
  pthread_mutex_unlock(&lock);
  if (join) pthread_join(thread, NULL);
}
