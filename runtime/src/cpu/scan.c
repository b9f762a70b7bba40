/*
 * scan.c: the CPU kernel for cumulative sums and products along one dim (cumsum, cumprod).
 *
 * Floating inputs carry the running value in double and round only when storing, so a long
 * float32 cumsum does not drift; integer inputs run in exact, wrapping int64 (the definition
 * makes their output int64). Lines are independent and are shared out across threads; each
 * line runs in order.
 */
#include <omp.h>
#include <stdlib.h>

#include "reduce_core.h"

typedef struct scan_ctx {
  int is_prod, ints, w;
  em_dtype xd, od;
  int64_t xstride, ostride;
  double *d;   /* running values: one in the row path, w in the column path */
  int64_t *i;
} scan_ctx;

static void scan_init(scan_ctx *c, int w) {
  for (int j = 0; j < w; j++) {
    c->d[j] = c->is_prod ? 1 : 0;
    c->i[j] = c->is_prod ? 1 : 0;
  }
}

/* Row path: a run of n elements of one line. */
static void scan_run(void *vctx, const char *xp, char *op, int n, int64_t r) {
  scan_ctx *c = vctx;
  (void)r;
  if (c->ints) {
    int64_t t[EM_RED_TILE];
    em_red_load_i64(t, xp, c->xstride, n, c->xd);
    int64_t a = c->i[0];
    if (c->is_prod)
      for (int k = 0; k < n; k++) t[k] = a = em_red_imul(a, t[k]);
    else
      for (int k = 0; k < n; k++) t[k] = a = em_red_iadd(a, t[k]);
    c->i[0] = a;
    em_red_store_i64(op, c->ostride, t, n, c->od);
  } else {
    double t[EM_RED_TILE];
    em_red_load_f64(t, xp, c->xstride, n, c->xd);
    double a = c->d[0];
    if (c->is_prod)
      for (int k = 0; k < n; k++) t[k] = a *= t[k];
    else
      for (int k = 0; k < n; k++) t[k] = a += t[k];
    c->d[0] = a;
    em_red_store_f64(op, c->ostride, t, n, c->od);
  }
}

/* Column path: one step of w neighbouring lines, tile by tile. */
static void scan_row(void *vctx, const char *xp, char *op, int64_t r) {
  scan_ctx *c = vctx;
  (void)r;
  for (int c0 = 0; c0 < c->w; c0 += EM_RED_TILE) {
    int n = c->w - c0 < EM_RED_TILE ? c->w - c0 : EM_RED_TILE;
    const char *src = xp + c0 * c->xstride;
    char *dst = op + c0 * c->ostride;
    if (c->ints) {
      int64_t t[EM_RED_TILE], *a = c->i + c0;
      em_red_load_i64(t, src, c->xstride, n, c->xd);
      if (c->is_prod)
        for (int j = 0; j < n; j++) a[j] = em_red_imul(a[j], t[j]);
      else
        for (int j = 0; j < n; j++) a[j] = em_red_iadd(a[j], t[j]);
      em_red_store_i64(dst, c->ostride, a, n, c->od);
    } else {
      double t[EM_RED_TILE], *a = c->d + c0;
      em_red_load_f64(t, src, c->xstride, n, c->xd);
      if (c->is_prod)
        for (int j = 0; j < n; j++) a[j] *= t[j];
      else
        for (int j = 0; j < n; j++) a[j] += t[j];
      em_red_store_f64(dst, c->ostride, a, n, c->od);
    }
  }
}

static void scan_unit(const em_red_plan *p, int is_prod, int64_t u, char *scratch) {
  scan_ctx c;
  double d1;
  int64_t i1;
  c.is_prod = is_prod;
  c.ints = em_red_is_int(p->xd);
  c.xd = p->xd;
  c.od = p->od;
  int64_t xo, oo;
  if (p->column) {
    c.w = em_red_group(p, u, &xo, &oo);
    c.xstride = p->kx[p->nk - 1];
    c.ostride = p->ko[p->nk - 1];
    c.d = (double *)scratch;
    c.i = (int64_t *)(c.d + p->width);
    scan_init(&c, c.w);
    em_red_walk_rows(p, p->x + xo, p->o + oo, 0, p->nred, scan_row, &c);
  } else {
    em_red_out_offsets(p, u, &xo, &oo);
    c.w = 1;
    c.xstride = p->rx[p->nr - 1];
    c.ostride = p->ro[p->nr - 1];
    c.d = &d1;
    c.i = &i1;
    scan_init(&c, 1);
    em_red_walk_runs(p, p->x + xo, p->o + oo, 0, p->nred, scan_run, &c);
  }
}

int em_cpu_scan(int is_prod, em_tensor *out, const em_tensor *x, int dim) {
  em_red_plan p;
  em_red_plan_build(&p, out, x, x->ndim > 0 ? 1u << dim : 0);
  if (p.nout == 0 || p.nred == 0) return 0;
  int nt = em_threads_for(p.nout * p.nred);
  if (p.column) em_red_plan_narrow(&p, nt); /* lines run in order: make enough groups */
  int64_t units = p.column ? p.ngroups : p.nout;
  if (nt > units) nt = (int)units;
  size_t bytes = p.column ? 2 * (size_t)p.width * 8 : 0;
  char *scratch = NULL;
  if (p.column && (scratch = em_red_scratch("cumsum", nt, bytes)) == NULL) return -1;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (int64_t u = 0; u < units; u++)
    scan_unit(&p, is_prod, u, scratch ? scratch + (size_t)omp_get_thread_num() * bytes : NULL);
  free(scratch);
  return 0;
}
