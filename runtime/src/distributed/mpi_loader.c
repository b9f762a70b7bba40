/*
 * mpi_loader.c: Open MPI, loaded at run time. libember never links libmpi: a program that does
 * not use ember.distributed must not need MPI installed, and the static build carried to other
 * machines must use whatever Open MPI is there. So this file dlopens libmpi with RTLD_GLOBAL
 * (Open MPI's own plugins, dlopened later by libmpi, resolve libmpi's symbols globally) and
 * takes every function it calls by dlsym. mpi.h is used only for its types and constants: Open
 * MPI's predefined handles (MPI_COMM_WORLD, MPI_FLOAT, MPI_SUM, ...) are macros that take the
 * address of global objects in libmpi (ompi_mpi_comm_world, ...), so they are taken by dlsym
 * too, never by the macros (which would leave undefined symbols in libember).
 *
 * Built without mpi.h (EMBER_HAVE_MPI unset), the same functions exist and say what to install.
 * All calls but dist_mpi_load, dist_mpi_abort and dist_scale run on the communication thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../internal.h"
#include "dist.h"

static const char NOT_FOUND[] =
  "ember.distributed.init: MPI not found: install openmpi-bin and libopenmpi-dev (Debian)";

void dist_scale(void *buf, int64_t count, em_dtype dtype, double factor) {
  switch (dtype) {
  case EM_FLOAT32:
    for (int64_t i = 0; i < count; i++) ((float *)buf)[i] *= (float)factor;
    break;
  case EM_FLOAT64:
    for (int64_t i = 0; i < count; i++) ((double *)buf)[i] *= factor;
    break;
  case EM_FLOAT16:
    for (int64_t i = 0; i < count; i++) {
      uint16_t *p = (uint16_t *)buf + i;
      *p = em_float_to_half(em_half_to_float(*p) * (float)factor);
    }
    break;
  case EM_BFLOAT16:
    for (int64_t i = 0; i < count; i++) {
      uint16_t *p = (uint16_t *)buf + i;
      *p = em_float_to_bf16(em_bf16_to_float(*p) * (float)factor);
    }
    break;
  default: break; /* avg is refused for other dtypes before it gets here */
  }
}

#ifndef EMBER_HAVE_MPI

int dist_mpi_load(void) {
  em_set_error(NOT_FOUND);
  return -1;
}
static int missing(void) {
  em_set_error("ember.distributed: this Ember was built without MPI");
  return -1;
}
int dist_mpi_init(int *rank, int *size, int *local_rank) {
  (void)rank, (void)size, (void)local_rank;
  return missing();
}
int dist_mpi_finalize(void) { return missing(); }
void dist_mpi_abort(int code) { (void)code; }
int dist_mpi_allreduce(void *buf, int64_t count, em_dtype dtype, em_dist_op op) {
  (void)buf, (void)count, (void)dtype, (void)op;
  return missing();
}
int dist_mpi_bcast(void *buf, int64_t count, em_dtype dtype, int root) {
  (void)buf, (void)count, (void)dtype, (void)root;
  return missing();
}
int dist_mpi_allgather(const void *in, void *out, int64_t count, em_dtype dtype) {
  (void)in, (void)out, (void)count, (void)dtype;
  return missing();
}
int dist_mpi_reduce_scatter(const void *in, void *out, int64_t count, em_dtype dtype,
                            em_dist_op op) {
  (void)in, (void)out, (void)count, (void)dtype, (void)op;
  return missing();
}
int dist_mpi_barrier(void) { return missing(); }

#else /* EMBER_HAVE_MPI */

#include <dlfcn.h>
#include <mpi.h>

/* The functions used, by dlsym: X(name) declares a pointer p_name of MPI's own prototype. */
#define MPI_FUNCTIONS(X)                                                                        \
  X(MPI_Init_thread) X(MPI_Initialized) X(MPI_Finalize) X(MPI_Abort) X(MPI_Comm_rank)            \
  X(MPI_Comm_size) X(MPI_Comm_set_errhandler) X(MPI_Error_string) X(MPI_Allreduce)              \
  X(MPI_Bcast) X(MPI_Allgather) X(MPI_Reduce_scatter_block) X(MPI_Barrier) X(MPI_Op_create)     \
  X(MPI_Op_free) X(MPI_Comm_split_type) X(MPI_Comm_free)
#define DECLARE(name) static __typeof__(name) *p_##name;
MPI_FUNCTIONS(DECLARE)

/* The predefined handles, as the addresses of libmpi's global objects. */
static MPI_Comm world;
static MPI_Errhandler errors_return;
static MPI_Info info_null;
static MPI_Op op_sum, op_max, op_min;
static MPI_Datatype type_of[EM_NUM_DTYPES];
/* User ops for float16 and bfloat16 (MPI has no such types): [0] float16, [1] bfloat16. */
static MPI_Op half_ops[2][3];
static void *lib;

static void *symbol(const char *name, const char *libname) {
  void *p = dlsym(lib, name);
  if (p == NULL) {
    char msg[512];
    snprintf(msg, sizeof msg,
             "ember.distributed.init: %s has no symbol %s: Ember needs Open MPI 4 or newer "
             "(openmpi-bin and libopenmpi-dev on Debian)", libname, name);
    em_set_error(msg);
  }
  return p;
}

/* <prefix>/lib/libmpi.so.40 next to the mpirun found on PATH (<prefix>/bin/mpirun): an Open
 * MPI installed outside the loader's paths (/opt/..., HPC-X) that mpirun started us from. */
static int beside_mpirun(char *out, size_t n) {
  const char *path = getenv("PATH");
  char candidate[4096], real[4096];
  while (path && *path) {
    size_t len = strcspn(path, ":");
    snprintf(candidate, sizeof candidate, "%.*s/mpirun", (int)len, path);
    path += len + (path[len] == ':');
    if (realpath(candidate, real) == NULL) continue;
    char *slash = strrchr(real, '/');
    if (slash == NULL) continue;
    *slash = '\0';
    slash = strrchr(real, '/');
    if (slash == NULL) continue;
    *slash = '\0';
    int k = snprintf(out, n, "%s/lib/libmpi.so.40", real);
    return k > 0 && (size_t)k < n;
  }
  return 0;
}

int dist_mpi_load(void) {
  if (lib != NULL) return 0;
  const char *env = getenv("EMBER_MPI_LIB");
  static char near_mpirun[4096 + 32];
  const char *names[] = {env, "libmpi.so.40", "libmpi.so", NULL};
  if (beside_mpirun(near_mpirun, sizeof near_mpirun)) names[3] = near_mpirun;
  const char *chosen = NULL;
  char first_error[256] = "";
  for (size_t i = env && env[0] ? 0 : 1; i < 4 && lib == NULL; i++) {
    if (names[i] == NULL) continue;
    lib = dlopen(names[i], RTLD_NOW | RTLD_GLOBAL);
    if (lib != NULL) chosen = names[i];
    else if (!first_error[0]) snprintf(first_error, sizeof first_error, "%s", dlerror());
    if (env && env[0]) break; /* a library named by the user is the only one tried */
  }
  if (lib == NULL) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s (%s)", NOT_FOUND, first_error);
    em_set_error(msg);
    return -1;
  }
#define LOAD(name) if ((p_##name = (__typeof__(name) *)symbol(#name, chosen)) == NULL) goto fail;
  MPI_FUNCTIONS(LOAD)
#undef LOAD
  struct { void *dst; const char *name; } handles[] = {
    {&world, "ompi_mpi_comm_world"}, {&errors_return, "ompi_mpi_errors_return"},
    {&info_null, "ompi_mpi_info_null"}, {&op_sum, "ompi_mpi_op_sum"},
    {&op_max, "ompi_mpi_op_max"}, {&op_min, "ompi_mpi_op_min"},
    {&type_of[EM_FLOAT32], "ompi_mpi_float"}, {&type_of[EM_FLOAT64], "ompi_mpi_double"},
    {&type_of[EM_FLOAT16], "ompi_mpi_uint16_t"}, {&type_of[EM_BFLOAT16], "ompi_mpi_uint16_t"},
    {&type_of[EM_INT8], "ompi_mpi_int8_t"}, {&type_of[EM_UINT8], "ompi_mpi_uint8_t"},
    {&type_of[EM_INT16], "ompi_mpi_int16_t"}, {&type_of[EM_INT32], "ompi_mpi_int32_t"},
    {&type_of[EM_INT64], "ompi_mpi_int64_t"}, {&type_of[EM_BOOL], "ompi_mpi_uint8_t"},
  };
  for (size_t i = 0; i < sizeof handles / sizeof handles[0]; i++) {
    void *p = symbol(handles[i].name, chosen);
    if (p == NULL) goto fail;
    memcpy(handles[i].dst, &p, sizeof p); /* every handle type is a pointer in Open MPI */
  }
  return 0;
fail:
  dlclose(lib);
  lib = NULL;
  return -1;
}

/* An MPI error code as an Ember error: "<what>: MPI error: <MPI's text>". */
static int mpi_error(const char *what, int code) {
  char text[MPI_MAX_ERROR_STRING + 1] = "";
  int len = 0;
  if (p_MPI_Error_string(code, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "code %d", code);
  char msg[MPI_MAX_ERROR_STRING + 128];
  snprintf(msg, sizeof msg, "%s: MPI error: %s", what, text);
  em_set_error(msg);
  return -1;
}
#define CHECK(what, call) do { int rc_ = (call); if (rc_ != MPI_SUCCESS) return mpi_error(what, rc_); } while (0)

/* The 16-bit reductions: each element converted to float32, combined, rounded back. */
#define HALF_OP(name, to_f, from_f, combine)                                                   \
  static void name(void *in, void *inout, int *len, MPI_Datatype *type) {                     \
    (void)type;                                                                                \
    const uint16_t *a = in;                                                                    \
    uint16_t *b = inout;                                                                       \
    for (int i = 0; i < *len; i++) {                                                           \
      float x = to_f(a[i]), y = to_f(b[i]);                                                    \
      b[i] = from_f(combine);                                                                  \
    }                                                                                          \
  }
HALF_OP(f16_sum, em_half_to_float, em_float_to_half, x + y)
HALF_OP(f16_max, em_half_to_float, em_float_to_half, (x > y || x != x) ? x : y)
HALF_OP(f16_min, em_half_to_float, em_float_to_half, (x < y || x != x) ? x : y)
HALF_OP(bf16_sum, em_bf16_to_float, em_float_to_bf16, x + y)
HALF_OP(bf16_max, em_bf16_to_float, em_float_to_bf16, (x > y || x != x) ? x : y)
HALF_OP(bf16_min, em_bf16_to_float, em_float_to_bf16, (x < y || x != x) ? x : y)

static int local_rank_of(int rank) {
  const char *env = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  if (env && env[0]) return atoi(env);
  /* another launcher: the rank among the processes that share this host's memory */
  MPI_Comm node;
  int local = 0;
  if (p_MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, rank, info_null, &node) == MPI_SUCCESS) {
    p_MPI_Comm_rank(node, &local);
    p_MPI_Comm_free(&node);
  }
  return local;
}

int dist_mpi_init(int *rank, int *size, int *local_rank) {
  const char *what = "ember.distributed.init";
  int initialized = 0, provided = 0;
  CHECK(what, p_MPI_Initialized(&initialized));
  /* Every call comes from the communication thread, which also initializes: FUNNELED. */
  if (!initialized) CHECK(what, p_MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided));
  CHECK(what, p_MPI_Comm_set_errhandler(world, errors_return));
  CHECK(what, p_MPI_Comm_rank(world, rank));
  CHECK(what, p_MPI_Comm_size(world, size));
  MPI_User_function *fns[2][3] = {{f16_sum, f16_max, f16_min}, {bf16_sum, bf16_max, bf16_min}};
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++) CHECK(what, p_MPI_Op_create(fns[i][j], 1, &half_ops[i][j]));
  *local_rank = local_rank_of(*rank);
  return 0;
}

int dist_mpi_finalize(void) {
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++) p_MPI_Op_free(&half_ops[i][j]);
  CHECK("ember.distributed.finalize", p_MPI_Finalize());
  return 0;
}

void dist_mpi_abort(int code) {
  if (p_MPI_Abort) p_MPI_Abort(world, code);
}

/* The MPI op for a reduction on dtype; avg sums (the caller divides). */
static MPI_Op op_for(em_dtype dtype, em_dist_op op) {
  int j = op == EM_DIST_MAX ? 1 : op == EM_DIST_MIN ? 2 : 0;
  if (dtype == EM_FLOAT16) return half_ops[0][j];
  if (dtype == EM_BFLOAT16) return half_ops[1][j];
  return j == 1 ? op_max : j == 2 ? op_min : op_sum;
}

int dist_mpi_allreduce(void *buf, int64_t count, em_dtype dtype, em_dist_op op) {
  CHECK("all_reduce", p_MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, type_of[dtype],
                                      op_for(dtype, op), world));
  return 0;
}

int dist_mpi_bcast(void *buf, int64_t count, em_dtype dtype, int root) {
  CHECK("broadcast", p_MPI_Bcast(buf, (int)count, type_of[dtype], root, world));
  return 0;
}

int dist_mpi_allgather(const void *in, void *out, int64_t count, em_dtype dtype) {
  CHECK("all_gather", p_MPI_Allgather(in, (int)count, type_of[dtype], out, (int)count,
                                      type_of[dtype], world));
  return 0;
}

int dist_mpi_reduce_scatter(const void *in, void *out, int64_t count, em_dtype dtype,
                            em_dist_op op) {
  CHECK("reduce_scatter", p_MPI_Reduce_scatter_block(in, out, (int)count, type_of[dtype],
                                                     op_for(dtype, op), world));
  return 0;
}

int dist_mpi_barrier(void) {
  CHECK("barrier", p_MPI_Barrier(world));
  return 0;
}

#endif /* EMBER_HAVE_MPI */
