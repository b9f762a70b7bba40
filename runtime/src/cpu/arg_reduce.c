/*
 * arg_reduce.c: the CPU kernel behind max/min along a dim and argmax/argmin: the extreme value
 * of each line along `dim` and its 0-based index.
 *
 * PyTorch's rules: the first occurrence wins ties, and NaN counts as larger (and smaller) than
 * everything, so the first NaN of a line is both its max and its min. Floating values compare
 * exactly in double (every float dtype converts to double exactly); integers compare in int64.
 *
 * The plan (reduce_core.h) has one reduced dim. values and indices are freshly allocated and
 * contiguous in the same keepdim shape, so one element offset serves both.
 */
#include <stdlib.h>

#include "reduce_core.h"

typedef struct best {
  double d;
  int64_t i;   /* the value, for integer inputs */
  int64_t idx; /* -1 while nothing has been seen */
} best;

/* Does value (d, i) beat the current best? */
static inline bool beats_f(int is_max, double v, const best *b) {
  if (b->idx < 0) return true;
  if (v != v) return b->d == b->d; /* the first NaN wins; a later one does not */
  return is_max ? v > b->d : v < b->d;
}
static inline bool beats_i(int is_max, int64_t v, const best *b) {
  return b->idx < 0 || (is_max ? v > b->i : v < b->i);
}

typedef struct arg_ctx {
  int is_max, ints;
  em_dtype xd;
  int64_t stride;
  best b;
} arg_ctx;

static void arg_run(void *vctx, const char *xp, char *op, int n, int64_t r) {
  arg_ctx *c = vctx;
  (void)op;
  if (c->ints) {
    int64_t t[EM_RED_TILE];
    em_red_load_i64(t, xp, c->stride, n, c->xd);
    for (int k = 0; k < n; k++)
      if (beats_i(c->is_max, t[k], &c->b)) c->b = (best){0, t[k], r + k};
  } else {
    double t[EM_RED_TILE];
    em_red_load_f64(t, xp, c->stride, n, c->xd);
    for (int k = 0; k < n; k++)
      if (beats_f(c->is_max, t[k], &c->b)) c->b = (best){t[k], 0, r + k};
  }
}

static best arg_range(const em_red_plan *p, int is_max, const char *xb, int64_t b, int64_t e) {
  arg_ctx c = {is_max, em_red_is_int(p->xd), p->xd, p->rx[p->nr - 1], {0, 0, -1}};
  em_red_walk_runs(p, xb, NULL, b, e, arg_run, &c);
  return c.b;
}

typedef struct arg_out {
  char *values;
  em_dtype vd;
  int64_t ves;
} arg_out;

/* Stores w results: indices through the plan's out (int64), values at the same element
 * offsets in the values tensor. */
static void store_best(const em_red_plan *p, const arg_out *ao, int64_t ooff, int64_t ostride,
                       const best *b, int w, bool ints) {
  int64_t idx[EM_RED_W];
  for (int j = 0; j < w; j++) idx[j] = b[j].idx;
  em_red_store_i64(p->o + ooff, ostride, idx, w, EM_INT64);
  char *v = ao->values + ooff / 8 * ao->ves;
  int64_t vstride = ostride / 8 * ao->ves;
  if (ints) {
    int64_t vi[EM_RED_W];
    for (int j = 0; j < w; j++) vi[j] = b[j].i;
    em_red_store_i64(v, vstride, vi, w, ao->vd);
  } else {
    double vd[EM_RED_W];
    for (int j = 0; j < w; j++) vd[j] = b[j].d;
    em_red_store_f64(v, vstride, vd, w, ao->vd);
  }
}

static void row_line(const em_red_plan *p, const arg_out *ao, int is_max, int64_t o) {
  int64_t xo, oo;
  em_red_out_offsets(p, o, &xo, &oo);
  best b = arg_range(p, is_max, p->x + xo, 0, p->nred);
  store_best(p, ao, oo, 0, &b, 1, em_red_is_int(p->xd));
}

/* One long line (argmax of a whole tensor): the range is cut into nt pieces, joined in order
 * so that the first occurrence still wins. */
static int row_line_split(const em_red_plan *p, const arg_out *ao, int is_max, int64_t o,
                          int nt) {
  best *parts = malloc((size_t)nt * sizeof *parts);
  if (parts == NULL) return em_error_kind_set(EM_ERR_OOM, "argmax: out of memory on cpu");
  int64_t xo, oo;
  em_red_out_offsets(p, o, &xo, &oo);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int t = 0; t < nt; t++)
    parts[t] = arg_range(p, is_max, p->x + xo, p->nred * t / nt, p->nred * (t + 1) / nt);
  bool ints = em_red_is_int(p->xd);
  best b = parts[0];
  for (int t = 1; t < nt; t++) {
    if (parts[t].idx < 0) continue;
    bool win = ints ? beats_i(is_max, parts[t].i, &b) : beats_f(is_max, parts[t].d, &b);
    if (win) b = parts[t];
  }
  store_best(p, ao, oo, 0, &b, 1, ints);
  free(parts);
  return 0;
}

/* ---- the column path: w neighbouring lines at once ----------------------------------------- */

typedef struct col_ctx {
  int is_max, ints, w;
  em_dtype xd;
  int64_t kstride;
  best b[EM_RED_W];
} col_ctx;

static void col_row(void *vctx, const char *xp, char *op, int64_t r) {
  col_ctx *c = vctx;
  (void)op;
  if (c->ints) {
    int64_t t[EM_RED_W];
    em_red_load_i64(t, xp, c->kstride, c->w, c->xd);
    for (int j = 0; j < c->w; j++)
      if (beats_i(c->is_max, t[j], &c->b[j])) c->b[j] = (best){0, t[j], r};
  } else {
    double t[EM_RED_W];
    em_red_load_f64(t, xp, c->kstride, c->w, c->xd);
    for (int j = 0; j < c->w; j++)
      if (beats_f(c->is_max, t[j], &c->b[j])) c->b[j] = (best){t[j], 0, r};
  }
}

static void col_group(const em_red_plan *p, const arg_out *ao, int is_max, int64_t g) {
  int64_t xo, oo;
  col_ctx c;
  c.w = em_red_group(p, g, &xo, &oo);
  c.is_max = is_max;
  c.ints = em_red_is_int(p->xd);
  c.xd = p->xd;
  c.kstride = p->kx[p->nk - 1];
  for (int j = 0; j < c.w; j++) c.b[j] = (best){0, 0, -1};
  em_red_walk_rows(p, p->x + xo, NULL, 0, p->nred, col_row, &c);
  store_best(p, ao, oo, p->ko[p->nk - 1], c.b, c.w, c.ints);
}

int em_cpu_arg_reduce(int is_max, em_tensor *values, em_tensor *indices, const em_tensor *x,
                      int dim) {
  em_red_plan p;
  em_red_plan_build(&p, indices, x, x->ndim > 0 ? 1u << dim : 0);
  if (p.nout == 0 || p.nred == 0) return 0;
  arg_out ao = {em_cpu_ptr(values), (em_dtype)values->dtype_id,
                (int64_t)em_dtypes[values->dtype_id].size};
  int64_t units = p.column ? p.ngroups : p.nout;
  int64_t width = p.ksize[p.nk - 1] < EM_RED_W ? p.ksize[p.nk - 1] : EM_RED_W;
  int64_t per_unit = p.nred * (p.column ? width : 1);
  int nt = em_threads_for(units * per_unit);
  if (!p.column && nt > 1 && units < 4 * (int64_t)nt && em_threads_for(per_unit) > 1) {
    for (int64_t o = 0; o < units; o++) {
      int rc = row_line_split(&p, &ao, is_max, o, em_threads_for(per_unit));
      if (rc != 0) return rc;
    }
    return 0;
  }
  if (p.column) {
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (int64_t g = 0; g < units; g++) col_group(&p, &ao, is_max, g);
  } else {
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (int64_t o = 0; o < units; o++) row_line(&p, &ao, is_max, o);
  }
  return 0;
}
