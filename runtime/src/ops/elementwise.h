/*
 * elementwise.h: the shared machinery of elementwise op definitions: result types over several
 * operands, broadcasting into stack-allocated view headers (no heap traffic on the hot path),
 * the in-place output checks, and the two drivers that run a kernel into a new tensor or in
 * place.
 *
 * An op definition reads:
 *     em_ew ew;
 *     if (em_ew_begin(&ew, "add", 2, ts) != 0) return NULL;   // devices, broadcast shape
 *     ew.compute = <the dtype the kernel computes in>;
 *     return em_ew_run(&ew, out_dtype, kernel, arg);           // cast, broadcast, run, clean up
 */
#ifndef EMBER_ELEMENTWISE_H
#define EMBER_ELEMENTWISE_H

#include "../backend.h"

enum { EM_EW_MAX = 4 };

typedef struct em_ew {
  const char *fn;
  int n;                          /* operands (NULL entries allowed: "no bound" for clamp) */
  const em_tensor *in[EM_EW_MAX];
  em_tensor view[EM_EW_MAX];      /* broadcast + cast views, on the stack */
  em_tensor *owned[EM_EW_MAX];    /* casts that had to allocate */
  const em_tensor *ready[EM_EW_MAX];
  double cell[EM_EW_MAX];          /* scalars converted to the compute dtype, on the stack */
  em_storage cell_storage[EM_EW_MAX];
  int ndim;
  int64_t sizes[EM_MAX_DIMS];
  em_dtype compute;
  uint32_t keep;                  /* bit i: operand i keeps its dtype (where's bool condition) */
  int device_id;
} em_ew;

/* The kernel call of a driver: `in` holds the prepared operands (NULL where the op was given
 * NULL), `out` the output. Never called for zero-size results. */
typedef int (*em_ew_kernel)(const char *fn, const em_backend *be, em_tensor *out,
                            const em_tensor *const *in, const void *arg);

/* PyTorch's result type over n operands (NULLs skipped). */
em_dtype em_result_type_n(int n, const em_tensor *const *ts);
/* True when a value of `from` may be written into `to` in place (no float into int, ...). */
bool em_can_cast(em_dtype from, em_dtype to);
/* Checks devices, broadcasts shapes; fills ew->ndim/sizes/device. compute must be set after. */
int em_ew_begin(em_ew *ew, const char *fn, int n, const em_tensor *const *ts);
/* Casts operands to ew->compute (allocating only when dtypes differ) and broadcasts them. */
int em_ew_prepare(em_ew *ew);
void em_ew_end(em_ew *ew);
/* Output for an op: a new tensor, or checks that `inplace` can receive the result. */
em_tensor *em_ew_output(em_ew *ew, em_dtype out_dtype);
/* Shape, dtype (the result must cast safely), no stride-0 dims, and no partial memory overlap
 * between self and an input (PyTorch's rule: an input may alias self only exactly). */
int em_ew_check_inplace(em_ew *ew, const em_tensor *self, em_dtype result);
/* Prepares, allocates the output of out_dtype, runs k, and ends ew (always). */
em_tensor *em_ew_run(em_ew *ew, em_dtype out_dtype, em_ew_kernel k, const void *arg);
/* The in-place form: writes into self directly when out_dtype and the compute dtype are self's
 * dtype, otherwise computes a new tensor and copies it in (a cast). Ends ew (always). */
int em_ew_run_inplace(em_ew *ew, em_tensor *self, em_dtype out_dtype, em_ew_kernel k,
                      const void *arg);
/* A 0-dim wrapped-number tensor on the stack holding v (int64 when v is integral, else
 * float64, so that promotion treats it like a Python scalar). */
void em_stack_scalar(em_tensor *t, em_storage *s, double *cell, double v, int device);
/* A 0-dim tensor of the given dtype on the stack holding v (converted to that dtype). */
void em_stack_scalar_typed(em_tensor *t, em_storage *s, double *cell, double v, em_dtype dtype,
                           int device);

#endif
