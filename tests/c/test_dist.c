/*
 * test_dist.c: the distributed C API (em_dist_*) as an embedder meets it without a launcher:
 * the errors before em_dist_init, and em_dist_init's message when libmpi cannot be loaded
 * (EMBER_MPI_LIB names a library that does not exist). The collectives themselves run in real
 * MPI jobs: tests/lua/distributed_spec.lua.
 */
#include <stdlib.h>

#include "check.h"

static void test_before_init(void) {
  CHECK(em_dist_is_initialized() == 0);
  CHECK_ERROR(em_dist_rank() == -1 ? -1 : 0, "rank: ember.distributed is not initialized");
  CHECK(em_dist_rank() == -1 && em_dist_world_size() == -1 && em_dist_local_rank() == -1);
  int64_t n = 4;
  em_tensor *t = em_ones(1, &n, EM_FLOAT32, 0);
  CHECK_ERROR(em_dist_all_reduce(t, EM_DIST_SUM) == NULL ? -1 : 0,
              "all_reduce: ember.distributed is not initialized");
  CHECK_ERROR(em_dist_broadcast(t, 0) == NULL ? -1 : 0, "broadcast: ember.distributed is not");
  CHECK_ERROR(em_dist_all_gather(t, t) == NULL ? -1 : 0, "all_gather: ember.distributed is not");
  CHECK_ERROR(em_dist_reduce_scatter(t, t, EM_DIST_SUM) == NULL ? -1 : 0, "reduce_scatter: ");
  CHECK_ERROR(em_dist_barrier() == NULL ? -1 : 0, "barrier: ember.distributed is not");
  CHECK_ERROR(em_dist_finalize(), "finalize: ember.distributed is not initialized");
  CHECK_ERROR(em_dist_wait(NULL), "wait: the work handle is NULL");
  CHECK(em_dist_is_completed(NULL) == 0);
  em_dist_work_free(NULL);
  em_dist_abort(3); /* not initialized: returns */
  em_release(t);
}

static void test_init_without_libmpi(void) {
  setenv("EMBER_MPI_LIB", "/nonexistent/libmpi.so.40", 1);
  CHECK_ERROR(em_dist_init(10), "ember.distributed.init: MPI not found: install openmpi-bin and "
                                "libopenmpi-dev (Debian)");
  CHECK(em_dist_is_initialized() == 0);
  CHECK_ERROR(em_dist_init(0), "timeout must be a positive number of seconds");
  unsetenv("EMBER_MPI_LIB");
}

int main(void) {
  test_before_init();
  test_init_without_libmpi();
  return check_report();
}
