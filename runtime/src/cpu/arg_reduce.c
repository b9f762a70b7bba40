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
#include <omp.h>
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
    /* The tile's extreme first (branch-free lanes); only a tile that beats the best so far is
     * searched for the first position of that value. */
    double t[EM_RED_TILE];
    em_red_load_f64(t, xp, c->stride, n, c->xd);
    double m = c->is_max ? em_red_tile_max(t, n, t[0]) : em_red_tile_min(t, n, t[0]);
    if (!beats_f(c->is_max, m, &c->b)) return;
    int k = 0;
    if (m != m)
      while (t[k] == t[k]) k++;
    else
      while (t[k] != m) k++;
    c->b = (best){t[k], 0, r + k}; /* t[k], not m: -0.0 and 0.0 compare equal */
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

/* Stores n results: indices through the plan's out (int64), values at the same element
 * offsets in the values tensor (same shape, both contiguous). */
static void store_best(const em_red_plan *p, const arg_out *ao, int64_t ooff, int64_t ostride,
                       const double *d, const int64_t *i, const int64_t *idx, int n, bool ints) {
  em_red_store_i64(p->o + ooff, ostride, idx, n, EM_INT64);
  char *v = ao->values + ooff / 8 * ao->ves;
  int64_t vstride = ostride / 8 * ao->ves;
  if (ints) em_red_store_i64(v, vstride, i, n, ao->vd);
  else em_red_store_f64(v, vstride, d, n, ao->vd);
}

static void row_line(const em_red_plan *p, const arg_out *ao, int is_max, int64_t o) {
  int64_t xo, oo;
  em_red_out_offsets(p, o, &xo, &oo);
  best b = arg_range(p, is_max, p->x + xo, 0, p->nred);
  store_best(p, ao, oo, 0, &b.d, &b.i, &b.idx, 1, em_red_is_int(p->xd));
}

/* One long line (argmax of a whole tensor): the range is cut into nt pieces, joined in order
 * so that the first occurrence still wins. */
static int row_line_split(const em_red_plan *p, const arg_out *ao, int is_max, int64_t o,
                          int nt) {
  best *parts = em_red_scratch("argmax", nt, sizeof *parts);
  if (parts == NULL) return -1;
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
  store_best(p, ao, oo, 0, &b.d, &b.i, &b.idx, 1, ints);
  free(parts);
  return 0;
}

/* ---- the column path: a group of neighbouring lines at once -------------------------------- */

typedef struct col_ctx {
  int is_max, ints, w;
  em_dtype xd;
  int64_t kstride;
  double *d;    /* best values (floating inputs) */
  int64_t *i;   /* best values (integer inputs) */
  int64_t *idx; /* their indices, -1 before the first */
} col_ctx;

static void col_row(void *vctx, const char *xp, char *op, int64_t r) {
  col_ctx *c = vctx;
  (void)op;
  for (int c0 = 0; c0 < c->w; c0 += EM_RED_TILE) {
    int n = c->w - c0 < EM_RED_TILE ? c->w - c0 : EM_RED_TILE;
    const char *src = xp + c0 * c->kstride;
    double *d = c->d + c0;
    int64_t *iv = c->i + c0, *idx = c->idx + c0;
    if (c->ints) {
      int64_t t[EM_RED_TILE];
      em_red_load_i64(t, src, c->kstride, n, c->xd);
      for (int j = 0; j < n; j++) {
        best cur = {0, iv[j], idx[j]};
        if (beats_i(c->is_max, t[j], &cur)) iv[j] = t[j], idx[j] = r;
      }
    } else {
      double t[EM_RED_TILE];
      em_red_load_f64(t, src, c->kstride, n, c->xd);
      for (int j = 0; j < n; j++) {
        best cur = {d[j], 0, idx[j]};
        if (beats_f(c->is_max, t[j], &cur)) d[j] = t[j], idx[j] = r;
      }
    }
  }
}

static void col_group(const em_red_plan *p, const arg_out *ao, int is_max, int64_t g,
                      char *scratch) {
  int64_t xo, oo;
  col_ctx c;
  c.w = em_red_group(p, g, &xo, &oo);
  c.is_max = is_max;
  c.ints = em_red_is_int(p->xd);
  c.xd = p->xd;
  c.kstride = p->kx[p->nk - 1];
  c.d = (double *)scratch;
  c.i = (int64_t *)(c.d + p->width);
  c.idx = c.i + p->width;
  for (int j = 0; j < c.w; j++) {
    c.d[j] = 0;
    c.i[j] = 0;
    c.idx[j] = -1;
  }
  em_red_walk_rows(p, p->x + xo, NULL, 0, p->nred, col_row, &c);
  int64_t os = p->ko[p->nk - 1];
  for (int c0 = 0; c0 < c.w; c0 += EM_RED_TILE) {
    int n = c.w - c0 < EM_RED_TILE ? c.w - c0 : EM_RED_TILE;
    store_best(p, ao, oo + c0 * os, os, c.d + c0, c.i + c0, c.idx + c0, n, c.ints);
  }
}

int em_cpu_arg_reduce(int is_max, em_tensor *values, em_tensor *indices, const em_tensor *x,
                      int dim) {
  em_red_plan p;
  em_red_plan_build(&p, indices, x, x->ndim > 0 ? 1u << dim : 0);
  if (p.nout == 0 || p.nred == 0) return 0;
  arg_out ao = {em_cpu_ptr(values), (em_dtype)values->dtype_id,
                (int64_t)em_dtypes[values->dtype_id].size};
  int nt = em_threads_for(p.nout * p.nred);
  if (p.column) {
    em_red_plan_narrow(&p, nt); /* groups are not split: make enough of them */
    if (nt > p.ngroups) nt = (int)p.ngroups;
    size_t bytes = 3 * (size_t)p.width * 8;
    char *scratch = em_red_scratch("argmax", nt, bytes);
    if (scratch == NULL) return -1;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (int64_t g = 0; g < p.ngroups; g++)
      col_group(&p, &ao, is_max, g, scratch + (size_t)omp_get_thread_num() * bytes);
    free(scratch);
    return 0;
  }
  if (nt > 1 && p.nout < 4 * (int64_t)nt && em_threads_for(p.nred) > 1) {
    for (int64_t o = 0; o < p.nout; o++)
      if (row_line_split(&p, &ao, is_max, o, em_threads_for(p.nred)) != 0) return -1;
    return 0;
  }
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (int64_t o = 0; o < p.nout; o++) row_line(&p, &ao, is_max, o);
  return 0;
}
