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
  case T_EXPSHIFT: for (int i = 0; i < n; i++) t[i] = exp(t[i] - centre[i * cstep]); break;
  }
}

/* Eight independent lanes: vectorizable, and more accurate than one running sum. */
static double tile_sum(const double *t, int n) {
  double l[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; k++) l[k] += t[i + k];
  double tail = 0;
  for (; i < n; i++) tail += t[i];
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7])) + tail;
}

/* Folds one tile into a scalar accumulator (row path). */
static void fold_tile(acc_kind k, acc *a, const double *t, const int64_t *ti, int n) {
  switch (k) {
  case K_SUM: kahan_add(a, tile_sum(t, n)); break;
  case K_PROD: for (int i = 0; i < n; i++) a->d *= t[i]; break;
  case K_MAX: {
    double m = a->d;
    for (int i = 0; i < n; i++) m = em_red_max(m, t[i]);
    a->d = m;
    break;
  }
  case K_MIN: {
    double m = a->d;
    for (int i = 0; i < n; i++) m = em_red_min(m, t[i]);
    a->d = m;
    break;
  }
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

static void store_results(const em_red_plan *p, const recipe *r, char *o, int64_t ostride,
                          const acc *a0, const acc *a1, int w) {
  if (int_kind(r->kind[0])) {
    int64_t v[EM_RED_W];
    for (int j = 0; j < w; j++) v[j] = a0[j].i;
    em_red_store_i64(o, ostride, v, w, p->od);
  } else {
    double v[EM_RED_W];
    for (int j = 0; j < w; j++) v[j] = result_of(r, &a0[j], &a1[j], p->nred);
    em_red_store_f64(o, ostride, v, w, p->od);
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
  store_results(p, r, p->o + oo, 0, &a0, &a1, 1);
}

/* A few outputs over many elements: each output's reduced range is cut into nt pieces. */
static int row_output_split(const em_red_plan *p, const recipe *r, int64_t o, int nt) {
  acc *parts = malloc((size_t)nt * sizeof *parts);
  if (parts == NULL) return em_error_kind_set(EM_ERR_OOM, "reduce: out of memory on cpu");
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
  store_results(p, r, p->o + oo, 0, &res[0], &res[1], 1);
  free(parts);
  return 0;
}

/* ---- the column path ----------------------------------------------------------------------- */

typedef struct col_ctx {
  const recipe *r;
  int pass, w;
  em_dtype xd;
  int64_t kstride;
  const double *centres;
  double ad[EM_RED_W];
  int64_t ai[EM_RED_W];
} col_ctx;

static void col_row(void *vctx, const char *xp, char *op, int64_t ri) {
  col_ctx *c = vctx;
  (void)op;
  (void)ri;
  acc_kind k = c->r->kind[c->pass];
  if (int_kind(k)) {
    int64_t ti[EM_RED_W];
    em_red_load_i64(ti, xp, c->kstride, c->w, c->xd);
    fold_columns(k, c->ad, c->ai, NULL, ti, c->w);
  } else {
    double t[EM_RED_W];
    em_red_load_f64(t, xp, c->kstride, c->w, c->xd);
    transform(c->r, c->pass, t, c->w, c->centres, 1);
    fold_columns(k, c->ad, c->ai, t, NULL, c->w);
  }
}

/* One pass over reduced indices [b, e) for the w outputs of a group; results into a[0..w). */
static void col_range(const em_red_plan *p, const recipe *r, int pass, const char *xg, int w,
                      int64_t b, int64_t e, const double *centres, acc *a) {
  col_ctx c;
  c.r = r;
  c.pass = pass;
  c.w = w;
  c.xd = p->xd;
  c.kstride = p->kx[p->nk - 1];
  c.centres = centres;
  acc init = acc_init(r->kind[pass]);
  for (int j = 0; j < w; j++) {
    c.ad[j] = init.d;
    c.ai[j] = init.i;
  }
  em_red_walk_rows(p, xg, NULL, b, e, col_row, &c);
  for (int j = 0; j < w; j++) a[j] = (acc){c.ad[j], 0, c.ai[j]};
}

static void col_group(const em_red_plan *p, const recipe *r, int64_t g) {
  int64_t xo, oo;
  int w = em_red_group(p, g, &xo, &oo);
  acc a0[EM_RED_W], a1[EM_RED_W];
  double centres[EM_RED_W];
  col_range(p, r, 0, p->x + xo, w, 0, p->nred, NULL, a0);
  if (r->npass == 2) {
    for (int j = 0; j < w; j++) centres[j] = centre_of(r, &a0[j], p->nred);
    col_range(p, r, 1, p->x + xo, w, 0, p->nred, centres, a1);
  }
  store_results(p, r, p->o + oo, p->ko[p->nk - 1], a0, a1, w);
}

/* Few groups over many rows (a tall, narrow column sum): rows are cut into nt pieces. */
static int col_group_split(const em_red_plan *p, const recipe *r, int64_t g, int nt) {
  acc *parts = malloc((size_t)nt * EM_RED_W * sizeof *parts);
  if (parts == NULL) return em_error_kind_set(EM_ERR_OOM, "reduce: out of memory on cpu");
  int64_t xo, oo;
  int w = em_red_group(p, g, &xo, &oo);
  acc res[2][EM_RED_W];
  double centres[EM_RED_W] = {0};
  for (int pass = 0; pass < r->npass; pass++) {
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int t = 0; t < nt; t++) {
      int64_t b = p->nred * t / nt, e = p->nred * (t + 1) / nt;
      col_range(p, r, pass, p->x + xo, w, b, e, centres, parts + (size_t)t * EM_RED_W);
    }
    for (int j = 0; j < w; j++) {
      res[pass][j] = parts[j];
      for (int t = 1; t < nt; t++) acc_merge(r->kind[pass], &res[pass][j], &parts[t * EM_RED_W + j]);
      if (pass == 0 && r->npass == 2) centres[j] = centre_of(r, &res[0][j], p->nred);
    }
  }
  store_results(p, r, p->o + oo, p->ko[p->nk - 1], res[0], res[1], w);
  free(parts);
  return 0;
}

/* ---- the driver ---------------------------------------------------------------------------- */

static int run_recipe(const recipe *r, em_tensor *out, const em_tensor *x, uint32_t mask) {
  em_red_plan p;
  em_red_plan_build(&p, out, x, mask);
  if (p.nout == 0) return 0;
  int64_t units = p.column ? p.ngroups : p.nout;
  int64_t width = p.ksize[p.nk - 1] < EM_RED_W ? p.ksize[p.nk - 1] : EM_RED_W;
  int64_t per_unit = (p.nred > 0 ? p.nred : 1) * r->npass * (p.column ? width : 1);
  int nt = em_threads_for(units * per_unit);
  int split = em_threads_for(per_unit);
  if (nt > 1 && units < 4 * (int64_t)nt && split > 1) {
    for (int64_t u = 0; u < units; u++) {
      int rc = p.column ? col_group_split(&p, r, u, split) : row_output_split(&p, r, u, split);
      if (rc != 0) return rc;
    }
    return 0;
  }
  if (p.column) {
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (int64_t g = 0; g < units; g++) col_group(&p, r, g);
  } else {
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (int64_t o = 0; o < units; o++) row_output(&p, r, o);
  }
  return 0;
}

static recipe one_pass(acc_kind k, xform t, finish f) {
  recipe r = {1, {k, K_SUM}, {t, T_NONE}, f, 0, 0, 0};
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
