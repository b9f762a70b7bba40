/*
 * reduce_core.h: what the CPU reduction family shares (reductions, moments, norms, arg-reductions,
 * scans, softmax): the reduction plan, tile loads and stores, and the walkers.
 *
 * Every kernel of the family sees its work the same way. The dims of x split into "kept" dims
 * (one output per position) and "reduced" dims (walked for each output: all reduced dims for
 * a reduction, the one scanned dim for scans, softmax and arg-reductions). Each group is sorted
 * by x's stride and coalesced, so a transposed or sliced input costs no more than a contiguous
 * one with the same inner stride. Two loop orders then cover the layouts:
 *  - the row path: one output at a time, the reduced dims read in runs along the innermost
 *    (smallest-stride) reduced dim; contiguous runs give vectorizable tile loops;
 *  - the column path: when a kept dim is more contiguous than every reduced dim (column sums,
 *    softmax over dim 1 of [N, C, H, W]), a tile of up to EM_RED_W neighbouring outputs is
 *    reduced together, each reduced position adding one contiguous tile row.
 * Values are loaded into small double (or int64, for exact integer sums) tiles first, so one
 * typed conversion loop per dtype feeds all the arithmetic.
 */
#ifndef EMBER_CPU_REDUCE_CORE_H
#define EMBER_CPU_REDUCE_CORE_H

#include "cpu.h"

enum {
  EM_RED_TILE = 256, /* elements per run in the row path */
  EM_RED_W = 128     /* outputs per group in the column path */
};

typedef struct em_red_plan {
  /* kept dims then reduced dims, each outermost first; strides in bytes */
  int nk, nr;
  int64_t ksize[EM_MAX_DIMS], kx[EM_MAX_DIMS], ko[EM_MAX_DIMS];
  int64_t rsize[EM_MAX_DIMS], rx[EM_MAX_DIMS], ro[EM_MAX_DIMS];
  int64_t nout;   /* product of ksize */
  int64_t nred;   /* product of rsize (0 when a reduced dim is empty) */
  const char *x;
  char *o;
  em_dtype xd, od;
  /* column path geometry: groups of up to EM_RED_W along the innermost kept dim */
  bool column;
  int64_t nchunks, ngroups;
} em_red_plan;

/* Builds the plan for x reduced over `mask` into out. out has x's rank; a dim of out whose size
 * equals x's is walked with out's stride (scans, softmax), a size-1 dim is not (reductions). */
void em_red_plan_build(em_red_plan *p, em_tensor *out, const em_tensor *x, uint32_t mask);

/* Offsets (bytes) of output o's first element in x and out (row path). */
void em_red_out_offsets(const em_red_plan *p, int64_t o, int64_t *xoff, int64_t *ooff);
/* Column path: group g's offsets, and its width (how many outputs it covers). */
int em_red_group(const em_red_plan *p, int64_t g, int64_t *xoff, int64_t *ooff);

/* One run along the innermost reduced dim: n elements from xp (stride p->rx[nr-1]) and op
 * (stride p->ro[nr-1]); r is the flat reduced index of the first. */
typedef void (*em_red_run_fn)(void *ctx, const char *xp, char *op, int n, int64_t r);
/* Walks reduced indices [b, e) from the given bases in runs of at most EM_RED_TILE. */
void em_red_walk_runs(const em_red_plan *p, const char *xb, char *ob, int64_t b, int64_t e,
                      em_red_run_fn fn, void *ctx);
/* One step per reduced index r in [b, e) (column path): fn gets the row's x and out bases. */
typedef void (*em_red_row_fn)(void *ctx, const char *xp, char *op, int64_t r);
void em_red_walk_rows(const em_red_plan *p, const char *xb, char *ob, int64_t b, int64_t e,
                      em_red_row_fn fn, void *ctx);

/* Tile loads (n elements, byte stride) and stores. Loads to int64 are exact for every integer
 * dtype; float dtypes load exactly into double. */
void em_red_load_f64(double *dst, const char *src, int64_t stride, int n, em_dtype dt);
void em_red_load_i64(int64_t *dst, const char *src, int64_t stride, int n, em_dtype dt);
void em_red_store_f64(char *dst, int64_t stride, const double *src, int n, em_dtype dt);
void em_red_store_i64(char *dst, int64_t stride, const int64_t *src, int n, em_dtype dt);

static inline bool em_red_is_int(em_dtype d) { return !em_dtypes[d].is_float; }

/* NaN-propagating max/min, as PyTorch's amax/amin: once acc is NaN it stays NaN. */
static inline double em_red_max(double acc, double v) { return (v > acc || v != v) ? v : acc; }
static inline double em_red_min(double acc, double v) { return (v < acc || v != v) ? v : acc; }

/* Wrapping int64 arithmetic (integer sums overflow like PyTorch's, without C's UB). */
static inline int64_t em_red_iadd(int64_t a, int64_t b) {
  return (int64_t)((uint64_t)a + (uint64_t)b);
}
static inline int64_t em_red_imul(int64_t a, int64_t b) {
  return (int64_t)((uint64_t)a * (uint64_t)b);
}

#endif
