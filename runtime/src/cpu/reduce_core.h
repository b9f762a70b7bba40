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
 *    softmax over dim 1 of [N, C, H, W]), a group of up to EM_RED_SPAN neighbouring outputs is
 *    reduced together: each reduced position adds one contiguous row segment, read in tiles,
 *    into a scratch array of per-output accumulators. Long contiguous segments keep the
 *    hardware prefetcher streaming; short ones (a few KB at a large stride) starve it.
 * Values are loaded into small double (or int64, for exact integer sums) tiles first, so one
 * typed conversion loop per dtype feeds all the arithmetic.
 */
#ifndef EMBER_CPU_REDUCE_CORE_H
#define EMBER_CPU_REDUCE_CORE_H

#include "cpu.h"

enum {
  EM_RED_TILE = 256,  /* elements per tile (a run in the row path, a chunk in the column path) */
  EM_RED_SPAN = 4096, /* most outputs per group in the column path */
  EM_RED_SHORT = 24,  /* reductions this short take the column path whatever the strides */
  EM_RED_GROUP_BYTES = 256 * 1024 /* most bytes of x a column group spans per position */
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
  /* column path geometry: groups of `width` outputs along the innermost kept dim */
  bool column;
  int64_t width, nchunks, ngroups;
} em_red_plan;

/* Builds the plan for x reduced over `mask` into out. out has x's rank; a dim of out whose size
 * equals x's is walked with out's stride (scans, softmax), a size-1 dim is not (reductions). */
void em_red_plan_build(em_red_plan *p, em_tensor *out, const em_tensor *x, uint32_t mask);

/* Narrows the column path's groups (in whole tiles) until there are at least min_groups of
 * them, so that kernels which cannot split a group still give every thread work. */
void em_red_plan_narrow(em_red_plan *p, int64_t min_groups);

/* Offsets (bytes) of output o's first element in x and out (row path). */
void em_red_out_offsets(const em_red_plan *p, int64_t o, int64_t *xoff, int64_t *ooff);
/* Column path: group g's offsets, and how many outputs it covers (at most p->width). */
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

/* Per-thread scratch for the column path: nt blocks of `bytes`, one malloc before the parallel
 * region; NULL with an out-of-memory error set. */
void *em_red_scratch(const char *fn, int nt, size_t bytes);

/* NaN-propagating max/min, as PyTorch's amax/amin: once acc is NaN it stays NaN. */
static inline double em_red_max(double acc, double v) { return (v > acc || v != v) ? v : acc; }
static inline double em_red_min(double acc, double v) { return (v < acc || v != v) ? v : acc; }

/* Tile folds shared by the family. The sum runs eight lanes (vectorizable, and more accurate
 * than one running sum); max and min propagate NaN and start from `init`. */
double em_red_tile_sum(const double *t, int n);
double em_red_tile_max(const double *t, int n, double init);
double em_red_tile_min(const double *t, int n, double init);

/* Wrapping int64 arithmetic (integer sums overflow like PyTorch's, without C's UB). */
static inline int64_t em_red_iadd(int64_t a, int64_t b) {
  return (int64_t)((uint64_t)a + (uint64_t)b);
}
static inline int64_t em_red_imul(int64_t a, int64_t b) {
  return (int64_t)((uint64_t)a * (uint64_t)b);
}

#endif
