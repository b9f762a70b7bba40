/*
 * reduce.c: CPU kernels for reductions over a set of dims: sum, mean, prod, amax, amin, all,
 * any, logsumexp (em_cpu_reduce), variance and standard deviation (em_cpu_moments) and vector
 * norms (em_cpu_norm).
 *
 * Each op is a "recipe": one or two passes, each folding transformed elements into an
 * accumulator, then a finishing step. Two passes serve the ops that need a per-output centre
 * first: variance (mean, then squared deviations: more accurate than sum-of-squares) and
 * logsumexp (max, then exp(x - max): it cannot overflow).
 *
 * Accuracy: floating inputs accumulate in double. Row sums add 256-element tiles in eight lanes
 * and join the tile sums with Neumaier compensation, so a float64 sum of 1e9 elements keeps
 * nearly full precision. Integer sums and products are exact in int64 (wrapping on overflow,
 * as PyTorch's do).
 *
 * Threads: many outputs are shared out across threads; a few outputs over many elements (a
 * full sum) split each output's reduced range across threads and join the partial results in
 * a fixed order, so a result depends only on the thread count, never on timing.
 */
#include <omp.h>
#include <stdlib.h>

#include "reduce_core.h"

typedef enum acc_kind {
  K_SUM, K_PROD, K_MAX, K_MIN, K_ALL, K_ANY,   /* double accumulators */
  K_ISUM, K_IPROD, K_IMAX, K_IMIN              /* exact int64 accumulators */
} acc_kind;

/* Elementwise transforms applied to a loaded tile before it is folded. */
typedef enum xform {
  T_NONE, T_ABS, T_SQUARE, T_POWABS, T_NONZERO,
  T_SQDEV,     /* (x - centre)^2 */
  T_EXPSHIFT   /* exp(x - centre) */
} xform;

typedef enum finish { F_NONE, F_MEAN, F_ROOT, F_VAR, F_LSE } finish;

typedef struct recipe {
  int npass;
  acc_kind kind[2];
  xform tr[2];
  finish fin;
  double p;          /* norm order: T_POWABS and F_ROOT */
  double correction; /* F_VAR */
  int take_sqrt;     /* F_VAR gives std */
  bool single;       /* T_EXPSHIFT may use expf: the input is narrower than float64 */
} recipe;

typedef struct acc {
  double d, c; /* value, and Neumaier compensation for K_SUM */
  int64_t i;
} acc;

static bool int_kind(acc_kind k) { return k >= K_ISUM; }

static acc acc_init(acc_kind k) {
  acc a = {0, 0, 0};
  switch (k) {
  case K_PROD: case K_ALL: a.d = 1; break;
  case K_MAX: a.d = -INFINITY; break;
  case K_MIN: a.d = INFINITY; break;
  case K_IPROD: a.i = 1; break;
  case K_IMAX: a.i = INT64_MIN; break;
  case K_IMIN: a.i = INT64_MAX; break;
  default: break;
  }
  return a;
}

static void kahan_add(acc *a, double v) {
  double t = a->d + v;
  if (fabs(a->d) >= fabs(v)) a->c += (a->d - t) + v;
  else a->c += (v - t) + a->d;
  a->d = t;
}

/* The compensation is meaningless once the sum is inf or NaN (inf - inf), so it is dropped. */
static double acc_sum_value(const acc *a) { return isfinite(a->d) ? a->d + a->c : a->d; }

/* Joins partial b into a; b covers later elements than a. */
static void acc_merge(acc_kind k, acc *a, const acc *b) {
  switch (k) {
  case K_SUM: kahan_add(a, b->d); a->c += b->c; break;
  case K_PROD: a->d *= b->d; break;
  case K_MAX: a->d = em_red_max(a->d, b->d); break;
  case K_MIN: a->d = em_red_min(a->d, b->d); break;
  case K_ALL: a->d = a->d != 0 && b->d != 0; break;
  case K_ANY: a->d = a->d != 0 || b->d != 0; break;
  case K_ISUM: a->i = em_red_iadd(a->i, b->i); break;
  case K_IPROD: a->i = em_red_imul(a->i, b->i); break;
  case K_IMAX: if (b->i > a->i) a->i = b->i; break;
  case K_IMIN: if (b->i < a->i) a->i = b->i; break;
  }
}

/* ---- tiles --------------------------------------------------------------------------------- */

static void transform(const recipe *r, int pass, double *t, int n, const double *centre,
                      int cstep) {
  double p = r->p;
  switch (r->tr[pass]) {
  case T_NONE: break;
  case T_ABS: for (int i = 0; i < n; i++) t[i] = fabs(t[i]); break;
  case T_SQUARE: for (int i = 0; i < n; i++) t[i] *= t[i]; break;
  case T_POWABS: for (int i = 0; i < n; i++) t[i] = pow(fabs(t[i]), p); break;
  case T_NONZERO: for (int i = 0; i < n; i++) t[i] = t[i] != 0; break;
  case T_SQDEV:
    for (int i = 0; i < n; i++) {
      double dv = t[i] - centre[i * cstep];
      t[i] = dv * dv;
    }
    break;
  case T_EXPSHIFT:
    if (r->single) /* below what a float32 result can show; several times faster */
      for (int i = 0; i < n; i++) t[i] = expf((float)(t[i] - centre[i * cstep]));
    else
      for (int i = 0; i < n; i++) t[i] = exp(t[i] - centre[i * cstep]);
    break;
  }
}

/* Folds one tile into a scalar accumulator (row path). */
static void fold_tile(acc_kind k, acc *a, const double *t, const int64_t *ti, int n) {
  switch (k) {
  case K_SUM: kahan_add(a, em_red_tile_sum(t, n)); break;
  case K_PROD: for (int i = 0; i < n; i++) a->d *= t[i]; break;
  case K_MAX: a->d = em_red_tile_max(t, n, a->d); break;
  case K_MIN: a->d = em_red_tile_min(t, n, a->d); break;
  case K_ALL: {
    int zero = 0;
    for (int i = 0; i < n; i++) zero |= t[i] == 0;
    if (zero) a->d = 0;
    break;
  }
  case K_ANY: {
    int nz = 0;
    for (int i = 0; i < n; i++) nz |= t[i] != 0;
    if (nz) a->d = 1;
    break;
  }
  case K_ISUM: {
    uint64_t s = 0;
    for (int i = 0; i < n; i++) s += (uint64_t)ti[i];
    a->i = em_red_iadd(a->i, (int64_t)s);
    break;
  }
  case K_IPROD: for (int i = 0; i < n; i++) a->i = em_red_imul(a->i, ti[i]); break;
  case K_IMAX: for (int i = 0; i < n; i++) if (ti[i] > a->i) a->i = ti[i]; break;
  case K_IMIN: for (int i = 0; i < n; i++) if (ti[i] < a->i) a->i = ti[i]; break;
  }
}

/* Folds one tile row into w column accumulators (column path). */
static void fold_columns(acc_kind k, double *ad, int64_t *ai, const double *t, const int64_t *ti,
                         int w) {
  switch (k) {
  case K_SUM: for (int j = 0; j < w; j++) ad[j] += t[j]; break;
  case K_PROD: for (int j = 0; j < w; j++) ad[j] *= t[j]; break;
  case K_MAX: for (int j = 0; j < w; j++) ad[j] = em_red_max(ad[j], t[j]); break;
  case K_MIN: for (int j = 0; j < w; j++) ad[j] = em_red_min(ad[j], t[j]); break;
  case K_ALL: for (int j = 0; j < w; j++) ad[j] = ad[j] != 0 && t[j] != 0; break;
  case K_ANY: for (int j = 0; j < w; j++) ad[j] = ad[j] != 0 || t[j] != 0; break;
  case K_ISUM: for (int j = 0; j < w; j++) ai[j] = em_red_iadd(ai[j], ti[j]); break;
  case K_IPROD: for (int j = 0; j < w; j++) ai[j] = em_red_imul(ai[j], ti[j]); break;
  case K_IMAX: for (int j = 0; j < w; j++) ai[j] = ti[j] > ai[j] ? ti[j] : ai[j]; break;
  case K_IMIN: for (int j = 0; j < w; j++) ai[j] = ti[j] < ai[j] ? ti[j] : ai[j]; break;
  }
}

/* ---- centres and results ------------------------------------------------------------------- */

/* The second pass's centre, from the first pass's result. */
static double centre_of(const recipe *r, const acc *a0, int64_t n) {
  if (r->fin == F_VAR) return acc_sum_value(a0) / (double)n;
  /* F_LSE: an infinite or NaN max decides the result alone; any finite centre will do. */
  return isfinite(a0->d) ? a0->d : 0;
}

static double result_of(const recipe *r, const acc *a0, const acc *a1, int64_t n) {
  double v = r->kind[0] == K_SUM ? acc_sum_value(a0) : a0->d;
  switch (r->fin) {
  case F_NONE: return v;
  case F_MEAN: return v / (double)n;
  case F_ROOT: return r->p == 2 ? sqrt(v) : pow(v, 1.0 / r->p);
  case F_VAR: {
    double divisor = (double)n - r->correction;
    double var = acc_sum_value(a1) / (divisor > 0 ? divisor : 0);
    return r->take_sqrt ? sqrt(var) : var;
  }
  case F_LSE: return isfinite(v) ? v + log(acc_sum_value(a1)) : v;
  }
  return v;
}

/* Stores one output of the row path. */
static void store_one(const em_red_plan *p, const recipe *r, char *o, const acc *a0,
                      const acc *a1) {
  if (int_kind(r->kind[0])) {
    em_red_store_i64(o, 0, &a0->i, 1, p->od);
  } else {
    double v = result_of(r, a0, a1, p->nred);
    em_red_store_f64(o, 0, &v, 1, p->od);
  }
}

/* ---- the row path -------------------------------------------------------------------------- */

typedef struct row_ctx {
  const recipe *r;
  int pass;
  em_dtype xd;
  int64_t stride;
  double centre;
  acc a;
} row_ctx;

static void row_run(void *vctx, const char *xp, char *op, int n, int64_t ri) {
  row_ctx *c = vctx;
  (void)op;
  (void)ri;
  acc_kind k = c->r->kind[c->pass];
  if (int_kind(k)) {
    int64_t ti[EM_RED_TILE];
    em_red_load_i64(ti, xp, c->stride, n, c->xd);
    fold_tile(k, &c->a, NULL, ti, n);
  } else {
    double t[EM_RED_TILE];
    em_red_load_f64(t, xp, c->stride, n, c->xd);
    transform(c->r, c->pass, t, n, &c->centre, 0);
    fold_tile(k, &c->a, t, NULL, n);
  }
}

/* One pass over reduced indices [b, e) of the output whose x base is xb. */
static acc row_range(const em_red_plan *p, const recipe *r, int pass, const char *xb, int64_t b,
                     int64_t e, double centre) {
  row_ctx c = {r, pass, p->xd, p->rx[p->nr - 1], centre, acc_init(r->kind[pass])};
  em_red_walk_runs(p, xb, NULL, b, e, row_run, &c);
  return c.a;
}

static void row_output(const em_red_plan *p, const recipe *r, int64_t o) {
  int64_t xo, oo;
  em_red_out_offsets(p, o, &xo, &oo);
  acc a0 = row_range(p, r, 0, p->x + xo, 0, p->nred, 0), a1 = acc_init(K_SUM);
  if (r->npass == 2) a1 = row_range(p, r, 1, p->x + xo, 0, p->nred, centre_of(r, &a0, p->nred));
  store_one(p, r, p->o + oo, &a0, &a1);
}

/* A few outputs over many elements: each output's reduced range is cut into nt pieces, joined
 * in order. */
static int row_output_split(const em_red_plan *p, const recipe *r, int64_t o, int nt) {
  acc *parts = em_red_scratch("reduce", nt, sizeof *parts);
  if (parts == NULL) return -1;
  int64_t xo, oo;
  em_red_out_offsets(p, o, &xo, &oo);
  acc res[2] = {acc_init(K_SUM), acc_init(K_SUM)};
  double centre = 0;
  for (int pass = 0; pass < r->npass; pass++) {
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int t = 0; t < nt; t++) {
      int64_t b = p->nred * t / nt, e = p->nred * (t + 1) / nt;
      parts[t] = row_range(p, r, pass, p->x + xo, b, e, centre);
    }
    res[pass] = parts[0];
    for (int t = 1; t < nt; t++) acc_merge(r->kind[pass], &res[pass], &parts[t]);
    if (pass == 0 && r->npass == 2) centre = centre_of(r, &res[0], p->nred);
  }
  store_one(p, r, p->o + oo, &res[0], &res[1]);
  free(parts);
  return 0;
}

/* ---- the column path ----------------------------------------------------------------------- */

/* Per-output arrays of one group (p->width each): pass-0 and pass-1 accumulators, centres. */
typedef struct col_bufs {
  double *d0, *d1, *centre;
  int64_t *i0;
} col_bufs;
enum { COL_BUF_ARRAYS = 4 };

static col_bufs col_bufs_at(char *block, int64_t width) {
  col_bufs b;
  b.d0 = (double *)block;
  b.d1 = b.d0 + width;
  b.centre = b.d1 + width;
  b.i0 = (int64_t *)(b.centre + width);
  return b;
}

typedef struct col_ctx {
  const recipe *r;
  int pass, w;
  em_dtype xd;
  int64_t kstride, rstride;
  const double *centres;
  double *d;
  int64_t *i;
} col_ctx;

/* One reduced position: the group's row segment, tile by tile, into the accumulators. */
static void col_row(const col_ctx *c, const char *xp) {
  acc_kind k = c->r->kind[c->pass];
  for (int c0 = 0; c0 < c->w; c0 += EM_RED_TILE) {
    int n = c->w - c0 < EM_RED_TILE ? c->w - c0 : EM_RED_TILE;
    const char *src = xp + c0 * c->kstride;
    if (int_kind(k)) {
      int64_t ti[EM_RED_TILE];
      em_red_load_i64(ti, src, c->kstride, n, c->xd);
      fold_columns(k, NULL, c->i + c0, NULL, ti, n);
    } else {
      double t[EM_RED_TILE];
      em_red_load_f64(t, src, c->kstride, n, c->xd);
      transform(c->r, c->pass, t, n, c->centres + c0, 1);
      fold_columns(k, c->d + c0, NULL, t, NULL, n);
    }
  }
}

/* The common column sums / maxima of contiguous float32 and float64 rows skip the tile and
 * fold four rows per pass over the accumulators, which quarters their memory traffic. */
#define FAST_COLUMNS(NAME, T)                                                                 \
  static int64_t NAME(const col_ctx *c, const char *xp, int64_t nrows) {                     \
    acc_kind k = c->r->kind[c->pass];                                                         \
    double *acc = c->d;                                                                       \
    int w = c->w;                                                                             \
    int64_t q = 0, rs = c->rstride;                                                           \
    for (; q + 4 <= nrows; q += 4) {                                                          \
      const T *a = (const T *)(xp + q * rs), *b = (const T *)(xp + (q + 1) * rs);             \
      const T *e = (const T *)(xp + (q + 2) * rs), *f = (const T *)(xp + (q + 3) * rs);       \
      if (k == K_SUM) {                                                                       \
        for (int j = 0; j < w; j++)                                                           \
          acc[j] += ((double)a[j] + (double)b[j]) + ((double)e[j] + (double)f[j]);            \
      } else if (k == K_MAX) {                                                                \
        for (int j = 0; j < w; j++)                                                           \
          acc[j] = em_red_max(em_red_max(em_red_max(em_red_max(acc[j], a[j]), b[j]), e[j]),  \
                              f[j]);                                                          \
      } else {                                                                                \
        for (int j = 0; j < w; j++)                                                           \
          acc[j] = em_red_min(em_red_min(em_red_min(em_red_min(acc[j], a[j]), b[j]), e[j]),  \
                              f[j]);                                                          \
      }                                                                                       \
    }                                                                                         \
    return q;                                                                                 \
  }
FAST_COLUMNS(fast_columns_f32, float)
FAST_COLUMNS(fast_columns_f64, double)

/* n consecutive reduced positions (rows at stride rstride). */
static void col_rows(void *vctx, const char *xp, char *op, int n, int64_t ri) {
  const col_ctx *c = vctx;
  (void)op;
  (void)ri;
  acc_kind k = c->r->kind[c->pass];
  int64_t done = 0;
  if ((k == K_SUM || k == K_MAX || k == K_MIN) && c->r->tr[c->pass] == T_NONE) {
    if (c->xd == EM_FLOAT32 && c->kstride == 4) done = fast_columns_f32(c, xp, n);
    else if (c->xd == EM_FLOAT64 && c->kstride == 8) done = fast_columns_f64(c, xp, n);
  }
  for (int64_t q = done; q < n; q++) col_row(c, xp + q * c->rstride);
}

/* One pass over reduced indices [b, e) for the w outputs of a group, into d[] / i[]. */
static void col_range(const em_red_plan *p, const recipe *r, int pass, const char *xg, int w,
                      int64_t b, int64_t e, const double *centres, double *d, int64_t *i) {
  acc init = acc_init(r->kind[pass]);
  for (int j = 0; j < w; j++) {
    d[j] = init.d;
    i[j] = init.i;
  }
  col_ctx c = {r, pass, w, p->xd, p->kx[p->nk - 1], p->rx[p->nr - 1], centres, d, i};
  em_red_walk_runs(p, xg, NULL, b, e, col_rows, &c);
}

static void col_centres(const recipe *r, const col_bufs *b, int w, int64_t n) {
  for (int j = 0; j < w; j++) {
    acc a = {b->d0[j], 0, b->i0[j]};
    b->centre[j] = centre_of(r, &a, n);
  }
}

static void col_store(const em_red_plan *p, const recipe *r, char *o, const col_bufs *b, int w) {
  int64_t os = p->ko[p->nk - 1];
  for (int c0 = 0; c0 < w; c0 += EM_RED_TILE) {
    int n = w - c0 < EM_RED_TILE ? w - c0 : EM_RED_TILE;
    if (int_kind(r->kind[0])) {
      em_red_store_i64(o + c0 * os, os, b->i0 + c0, n, p->od);
    } else {
      double v[EM_RED_TILE];
      for (int j = 0; j < n; j++) {
        acc a0 = {b->d0[c0 + j], 0, 0}, a1 = {b->d1[c0 + j], 0, 0};
        v[j] = result_of(r, &a0, &a1, p->nred);
      }
      em_red_store_f64(o + c0 * os, os, v, n, p->od);
    }
  }
}

static void col_group(const em_red_plan *p, const recipe *r, int64_t g, char *scratch) {
  int64_t xo, oo;
  int w = em_red_group(p, g, &xo, &oo);
  col_bufs b = col_bufs_at(scratch, p->width);
  col_range(p, r, 0, p->x + xo, w, 0, p->nred, b.centre, b.d0, b.i0);
  if (r->npass == 2) {
    col_centres(r, &b, w, p->nred);
    /* two-pass recipes accumulate in double: i0 is free to serve as pass 1's unused ints */
    col_range(p, r, 1, p->x + xo, w, 0, p->nred, b.centre, b.d1, b.i0);
  }
  col_store(p, r, p->o + oo, &b, w);
}

/* Few groups over many rows (a tall column sum): rows are cut into nt pieces; each thread
 * fills its own partial arrays, joined in order. scratch holds the group's buffers, then nt
 * pairs of partial arrays. */
static void col_group_split(const em_red_plan *p, const recipe *r, int64_t g, int nt,
                            char *scratch) {
  int64_t xo, oo, width = p->width;
  int w = em_red_group(p, g, &xo, &oo);
  col_bufs b = col_bufs_at(scratch, width);
  double *pd = (double *)(scratch + COL_BUF_ARRAYS * width * 8);
  int64_t *pi = (int64_t *)(pd + nt * width);
  for (int pass = 0; pass < r->npass; pass++) {
    acc_kind k = r->kind[pass];
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int t = 0; t < nt; t++) {
      int64_t lo = p->nred * t / nt, hi = p->nred * (t + 1) / nt;
      col_range(p, r, pass, p->x + xo, w, lo, hi, b.centre, pd + t * width, pi + t * width);
    }
    double *dst = pass == 0 ? b.d0 : b.d1;
    for (int j = 0; j < w; j++) {
      acc a = {pd[j], 0, pi[j]};
      for (int t = 1; t < nt; t++) {
        acc part = {pd[t * width + j], 0, pi[t * width + j]};
        acc_merge(k, &a, &part);
      }
      dst[j] = k == K_SUM ? acc_sum_value(&a) : a.d;
      if (pass == 0) b.i0[j] = a.i;
    }
    if (pass == 0 && r->npass == 2) col_centres(r, &b, w, p->nred);
  }
  col_store(p, r, p->o + oo, &b, w);
}

/* ---- the driver ---------------------------------------------------------------------------- */

static int run_column(const em_red_plan *p, const recipe *r, int nt, int split) {
  size_t bufs = COL_BUF_ARRAYS * (size_t)p->width * 8;
  if (split > 1) {
    char *scratch = em_red_scratch("reduce", 1, bufs + 2 * (size_t)split * p->width * 8);
    if (scratch == NULL) return -1;
    for (int64_t g = 0; g < p->ngroups; g++) col_group_split(p, r, g, split, scratch);
    free(scratch);
    return 0;
  }
  char *scratch = em_red_scratch("reduce", nt, bufs);
  if (scratch == NULL) return -1;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (int64_t g = 0; g < p->ngroups; g++)
    col_group(p, r, g, scratch + (size_t)omp_get_thread_num() * bufs);
  free(scratch);
  return 0;
}

static int run_recipe(recipe *r, em_tensor *out, const em_tensor *x, uint32_t mask) {
  em_red_plan p;
  em_red_plan_build(&p, out, x, mask);
  r->single = p.xd != EM_FLOAT64;
  if (p.nout == 0) return 0;
  int64_t units = p.column ? p.ngroups : p.nout;
  int64_t per_unit = (p.nred > 0 ? p.nred : 1) * r->npass * (p.column ? p.width : 1);
  int nt = em_threads_for(units * per_unit);
  /* Fewer units than a few per thread: split each unit's reduced range instead. */
  int split = nt > 1 && units < 4 * (int64_t)nt ? em_threads_for(per_unit) : 1;
  if (p.column) return run_column(&p, r, nt, split);
  if (split > 1) {
    for (int64_t o = 0; o < units; o++)
      if (row_output_split(&p, r, o, split) != 0) return -1;
    return 0;
  }
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (int64_t o = 0; o < units; o++) row_output(&p, r, o);
  return 0;
}

static recipe one_pass(acc_kind k, xform t, finish f) {
  recipe r = {1, {k, K_SUM}, {t, T_NONE}, f, 0, 0, 0, false};
  return r;
}

int em_cpu_reduce(em_reduce_op op, em_tensor *out, const em_tensor *x, uint32_t mask) {
  bool ints = em_red_is_int((em_dtype)x->dtype_id);
  recipe r;
  switch (op) {
  case EM_SUM: r = one_pass(ints ? K_ISUM : K_SUM, T_NONE, F_NONE); break;
  case EM_MEAN: r = one_pass(K_SUM, T_NONE, F_MEAN); break;
  case EM_PROD: r = one_pass(ints ? K_IPROD : K_PROD, T_NONE, F_NONE); break;
  case EM_AMAX: r = one_pass(ints ? K_IMAX : K_MAX, T_NONE, F_NONE); break;
  case EM_AMIN: r = one_pass(ints ? K_IMIN : K_MIN, T_NONE, F_NONE); break;
  case EM_ALL: r = one_pass(K_ALL, T_NONE, F_NONE); break;
  case EM_ANY: r = one_pass(K_ANY, T_NONE, F_NONE); break;
  case EM_LOGSUMEXP:
    r = one_pass(K_MAX, T_NONE, F_LSE);
    r.npass = 2;
    r.kind[1] = K_SUM;
    r.tr[1] = T_EXPSHIFT;
    break;
  default: return em_error("reduce: invalid op %d", (int)op);
  }
  return run_recipe(&r, out, x, mask);
}

int em_cpu_moments(em_tensor *out, const em_tensor *x, uint32_t mask, double correction,
                   int take_sqrt) {
  recipe r = one_pass(K_SUM, T_NONE, F_VAR);
  r.npass = 2;
  r.kind[1] = K_SUM;
  r.tr[1] = T_SQDEV;
  r.correction = correction;
  r.take_sqrt = take_sqrt;
  return run_recipe(&r, out, x, mask);
}

int em_cpu_norm(em_tensor *out, const em_tensor *x, uint32_t mask, double p) {
  recipe r;
  if (p == 0) r = one_pass(K_SUM, T_NONZERO, F_NONE);
  else if (p == 1) r = one_pass(K_SUM, T_ABS, F_NONE);
  else if (p == 2) r = one_pass(K_SUM, T_SQUARE, F_ROOT);
  else if (p == INFINITY) r = one_pass(K_MAX, T_ABS, F_NONE);
  else if (p == -INFINITY) r = one_pass(K_MIN, T_ABS, F_NONE);
  else r = one_pass(K_SUM, T_POWABS, F_ROOT);
  r.p = p;
  return run_recipe(&r, out, x, mask);
}
