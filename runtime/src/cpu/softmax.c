/*
 * softmax.c: the CPU kernel for softmax and log_softmax along one dim.
 *
 * Three passes per line, all in double: the max m, then s = sum(exp(x - m)), then
 * exp(x - m) / s (softmax) or x - m - log(s) (log_softmax). Subtracting the max keeps every
 * exponent <= 0, so large inputs ({1000, 1001, 1002}) cannot overflow. A NaN anywhere in a line
 * makes the whole line NaN, and a line of -inf gives NaN, as in PyTorch.
 *
 * Lines are shared out across threads. When the softmax dim is not the most contiguous one
 * (softmax over channels of [N, C, H, W]), EM_RED_W neighbouring lines run together so that
 * every load is a contiguous tile row.
 */
#include "reduce_core.h"

typedef struct sm_ctx {
  int is_log, pass, w;
  em_dtype xd, od;
  int64_t xstride, ostride;
  double m[EM_RED_W], s[EM_RED_W];
} sm_ctx;

/* Row path: a run of n elements of one line. */
static void sm_run(void *vctx, const char *xp, char *op, int n, int64_t r) {
  sm_ctx *c = vctx;
  (void)r;
  double t[EM_RED_TILE];
  em_red_load_f64(t, xp, c->xstride, n, c->xd);
  double m = c->m[0];
  if (c->pass == 0) {
    for (int k = 0; k < n; k++) m = em_red_max(m, t[k]);
    c->m[0] = m;
  } else if (c->pass == 1) {
    double s = 0;
    for (int k = 0; k < n; k++) s += exp(t[k] - m);
    c->s[0] += s;
  } else {
    if (c->is_log) {
      double shift = m + log(c->s[0]);
      for (int k = 0; k < n; k++) t[k] = t[k] - shift;
    } else {
      double inv = 1.0 / c->s[0];
      for (int k = 0; k < n; k++) t[k] = exp(t[k] - m) * inv;
    }
    em_red_store_f64(op, c->ostride, t, n, c->od);
  }
}

/* Column path: one position of w neighbouring lines. */
static void sm_row(void *vctx, const char *xp, char *op, int64_t r) {
  sm_ctx *c = vctx;
  (void)r;
  int w = c->w;
  double t[EM_RED_W];
  em_red_load_f64(t, xp, c->xstride, w, c->xd);
  if (c->pass == 0) {
    for (int j = 0; j < w; j++) c->m[j] = em_red_max(c->m[j], t[j]);
  } else if (c->pass == 1) {
    for (int j = 0; j < w; j++) c->s[j] += exp(t[j] - c->m[j]);
  } else {
    if (c->is_log)
      for (int j = 0; j < w; j++) t[j] = t[j] - c->m[j] - c->s[j];
    else
      for (int j = 0; j < w; j++) t[j] = exp(t[j] - c->m[j]) * c->s[j];
    em_red_store_f64(op, c->ostride, t, w, c->od);
  }
}

static void sm_unit(const em_red_plan *p, int is_log, int64_t u) {
  sm_ctx c;
  c.is_log = is_log;
  c.xd = p->xd;
  c.od = p->od;
  int64_t xo, oo;
  if (p->column) {
    c.w = em_red_group(p, u, &xo, &oo);
    c.xstride = p->kx[p->nk - 1];
    c.ostride = p->ko[p->nk - 1];
  } else {
    em_red_out_offsets(p, u, &xo, &oo);
    c.w = 1;
    c.xstride = p->rx[p->nr - 1];
    c.ostride = p->ro[p->nr - 1];
  }
  for (int j = 0; j < c.w; j++) {
    c.m[j] = -INFINITY;
    c.s[j] = 0;
  }
  for (c.pass = 0; c.pass < 3; c.pass++) {
    if (p->column) {
      /* The column loop wants per-line constants ready before the write pass. */
      if (c.pass == 2)
        for (int j = 0; j < c.w; j++) c.s[j] = is_log ? log(c.s[j]) : 1.0 / c.s[j];
      em_red_walk_rows(p, p->x + xo, p->o + oo, 0, p->nred, sm_row, &c);
    } else {
      em_red_walk_runs(p, p->x + xo, p->o + oo, 0, p->nred, sm_run, &c);
    }
  }
}

int em_cpu_softmax(int is_log, em_tensor *out, const em_tensor *x, int dim) {
  em_red_plan p;
  em_red_plan_build(&p, out, x, x->ndim > 0 ? 1u << dim : 0);
  if (p.nout == 0 || p.nred == 0) return 0;
  int64_t units = p.column ? p.ngroups : p.nout;
  int nt = em_threads_for(p.nout * p.nred * 3);
  if (nt > units) nt = (int)units;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (int64_t u = 0; u < units; u++) sm_unit(&p, is_log, u);
  return 0;
}
