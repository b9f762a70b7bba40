/*
 * record.h: what op definitions call to record themselves on the autograd tape. Each record
 * function is a no-op for outputs that cannot carry gradients; callers check
 * em_ag_should_record() first so that the common, non-recording path costs one test.
 *
 * In-place ops that must record are computed out of place on a clone of self, then adopted:
 * self takes the result's values and its grad_fn (em_ag_adopt).
 */
#ifndef EMBER_AUTOGRAD_RECORD_H
#define EMBER_AUTOGRAD_RECORD_H

#include "../autocast.h"
#include "autograd.h"

typedef enum em_view_kind {
  EM_VIEW_RESHAPE, EM_VIEW_PERMUTE, EM_VIEW_EXPAND, EM_VIEW_NARROW, EM_VIEW_SELECT,
  EM_VIEW_SLICE, EM_VIEW_UNFOLD, EM_VIEW_IDENTITY
} em_view_kind;

/* Records out = view of x (params: the op's arguments, 0-based dims); returns out, or NULL
 * (out released) on failure. Passes out through untouched when nothing needs recording. */
em_tensor *em_ag_view(const em_tensor *x, em_tensor *out, em_view_kind kind, int n_params,
                      const int64_t *params);
/* Records a copy or cast (clone, to_dtype): the gradient flows back unchanged. */
em_tensor *em_ag_copy(const em_tensor *x, em_tensor *out);
/* In-place support: refuses what autograd cannot follow; then adopts a result computed out of
 * place (copies its values into self and makes its grad_fn self's). */
int em_ag_inplace_check(const char *fn, const em_tensor *self);
int em_ag_adopt(em_tensor *self, em_tensor *result);

/* For an in-place entry point: when autograd must record, evaluates CALL, an out-of-place call
 * in which `self_clone` stands for self, and adopts its result; returns from the caller.
 * Autocast is suspended for CALL: in-place ops keep self's dtype, as in PyTorch. */
#define EM_AG_INPLACE(fn, self, n, ins, CALL)                                                  \
  do {                                                                                        \
    if (em_ag_should_record((n), (ins))) {                                                    \
      if (em_ag_inplace_check((fn), (self)) != 0) return -1;                                  \
      em_tensor *self_clone = em_clone(self);                                                 \
      if (self_clone == NULL) return -1;                                                      \
      em_autocast_suspend();                                                                  \
      em_tensor *ag_result_ = (CALL);                                                         \
      em_autocast_resume();                                                                   \
      em_release(self_clone);                                                                 \
      int ag_rc_ = ag_result_ ? em_ag_adopt((self), ag_result_) : -1;                         \
      em_release(ag_result_);                                                                 \
      return ag_rc_;                                                                          \
    }                                                                                         \
  } while (0)

/* Records an op's output when needed: out passes through, or NULL (released) on failure. */
#define EM_AG_RECORD(out, n, ins, RECORD_CALL)                                                \
  do {                                                                                        \
    if ((out) != NULL && em_ag_should_record((n), (ins)) && (RECORD_CALL) != 0) {             \
      em_release(out);                                                                        \
      (out) = NULL;                                                                           \
    }                                                                                         \
  } while (0)

/* Elementwise families (formulas_pointwise.c). */
int em_ag_record_unary(em_unary_op op, em_tensor *out, const em_tensor *x);
/* formulas_special.c: the unary ops from EM_ASIN on. */
em_tensor *em_ag_special_unary_grad(em_unary_op op, const em_tensor *v, const em_tensor *g);
bool em_ag_special_unary_needs_output(em_unary_op op);
int em_ag_record_binary(em_binary_op op, em_tensor *out, const em_tensor *a, const em_tensor *b,
                        double alpha);
int em_ag_record_where(em_tensor *out, const em_tensor *cond, const em_tensor *a,
                       const em_tensor *b);
int em_ag_record_clamp(em_tensor *out, const em_tensor *x, const em_tensor *lo,
                       const em_tensor *hi);
int em_ag_record_lerp(em_tensor *out, const em_tensor *s, const em_tensor *e,
                      const em_tensor *w);
int em_ag_record_addc(int divide, em_tensor *out, const em_tensor *x, const em_tensor *t1,
                      const em_tensor *t2, double value);

/* Reductions (formulas_reduce.c): out is the keepdim-shaped result, mask the reduced dims. */
int em_ag_record_reduce(em_reduce_op op, em_tensor *out, const em_tensor *x, uint32_t mask);
int em_ag_record_moments(em_tensor *out, const em_tensor *x, uint32_t mask, double correction,
                         int take_sqrt);
int em_ag_record_norm(em_tensor *out, const em_tensor *x, uint32_t mask, double p);
/* values and indices in keepdim shape, dim wrapped. */
int em_ag_record_max_dim(em_tensor *values, const em_tensor *indices, const em_tensor *x,
                         int dim, int is_max);
/* kind: 0 cumsum, 1 cumprod, 2 softmax, 3 log_softmax; dim wrapped. */
int em_ag_record_line(int kind, em_tensor *out, const em_tensor *x, int dim);

/* Indexing, joining, sorting (formulas_index.c); dims wrapped, indices int64 0-based. */
int em_ag_record_index_select(em_tensor *out, const em_tensor *x, int dim, const em_tensor *index);
int em_ag_record_gather(em_tensor *out, const em_tensor *x, int dim, const em_tensor *index);
int em_ag_record_scatter(em_tensor *out, const em_tensor *x, int dim, const em_tensor *index,
                         const em_tensor *src, int accumulate);
/* kind: 0 index_add (alpha), 1 index_copy, 2 index_fill (src NULL) */
int em_ag_record_index_put(em_tensor *out, const em_tensor *x, int dim, const em_tensor *index,
                           const em_tensor *src, double alpha, int kind);
int em_ag_record_cat(em_tensor *out, int n, em_tensor *const *ts, int dim);
int em_ag_record_flip(em_tensor *out, const em_tensor *x, uint32_t mask);
/* shift: per dim of x, in [0, size) */
int em_ag_record_roll(em_tensor *out, const em_tensor *x, const int64_t *shift);
int em_ag_record_repeat(em_tensor *out, const em_tensor *x, int ndim, const int64_t *repeats);
int em_ag_record_triangle(em_tensor *out, const em_tensor *x, int64_t k, int lower);
/* values and indices of x's rank (sort, topk) */
int em_ag_record_sort(em_tensor *values, const em_tensor *indices, const em_tensor *x, int dim);

/* Matrix products (formulas_linalg.c): kind 0 operand as is, 1 a 1-D row, 2 a 1-D column;
 * full is the result's shape with the M and N dims kept ([batch..., M, N]); c may be NULL. */
int em_ag_record_product(em_tensor *out, const em_tensor *a, const em_tensor *b, int kind_a,
                         int kind_b, int nfull, const int64_t *full, const em_tensor *c,
                         double beta, double alpha);

#endif
