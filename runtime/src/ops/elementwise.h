/*
 * elementwise.h: the shared machinery of elementwise op definitions: result types over several
 * operands, broadcasting into stack-allocated view headers (no heap traffic on the hot path),
 * and the in-place output checks.
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
  int device_id;
} em_ew;

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
int em_ew_check_inplace(em_ew *ew, const em_tensor *self, em_dtype result);
/* A 0-dim wrapped-number tensor on the stack holding v. */
void em_stack_scalar(em_tensor *t, em_storage *s, double *cell, double v, int device);

#endif
