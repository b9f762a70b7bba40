/*
 * softmax.c: the CPU kernel for softmax and log_softmax along one dim.
 *
 * Three passes per line: the max m, then s = sum(exp(x - m)) in double, then exp(x - m) / s
 * (softmax) or x - m - log(s) (log_softmax). Subtracting the max keeps every exponent <= 0, so
 * large inputs ({1000, 1001, 1002}) cannot overflow. A NaN anywhere in a line makes the whole
 * line NaN, and a line of -inf gives NaN, as in PyTorch.
 *
 * exp dominates the cost, so each element takes one: softmax into a float32 or float64 output
 * stores exp(x - m) in the second pass and only rescales it in the third (other output dtypes
 * recompute it rather than round it twice). Inputs narrower than float64 use expf, whose
 * error (< 1 ulp of float) is below what a float32 result can show.
 *
 * Lines are shared out across threads. When the softmax dim is not the most contiguous one
 * (softmax over channels of [N, C, H, W]), a group of neighbouring lines runs together so that
 * every load is a contiguous row segment.
 */
#include <omp.h>
#include <stdlib.h>

#include "reduce_core.h"
#include "vec_math.h"

typedef struct sm_ctx {
  int is_log, pass, w;
  bool single;   /* expf is enough for this input dtype */
  bool keep_exp; /* pass 1 stores exp(x - m) in out; pass 2 rescales it */
  em_dtype xd, od;
  int64_t xstride, ostride;
  double *m, *s; /* per line: the max, then the sum (1 / sum or log(sum) before pass 2) */
} sm_ctx;

/* t[k] = exp(t[k] - m[k * mstep]) */
static void exp_shifted(double *t, int n, const double *m, int mstep, bool single) {
  if (single)
    for (int k = 0; k < n; k++) t[k] = expf((float)(t[k] - m[k * mstep]));
  else
    for (int k = 0; k < n; k++) t[k] = exp(t[k] - m[k * mstep]);
}

/* One tile of n elements of lines whose constants start at m[0], s[0] (mstep 0: one line, the
 * row path; mstep 1: n lines side by side, the column path). */
static void sm_tile(const sm_ctx *c, const char *xp, char *op, int n, double *m, double *s,
                    int mstep) {
  double t[EM_RED_TILE];
  if (c->pass == 2 && c->keep_exp) {
    em_red_load_f64(t, op, c->ostride, n, c->od);
    for (int k = 0; k < n; k++) t[k] *= s[k * mstep];
    em_red_store_f64(op, c->ostride, t, n, c->od);
    return;
  }
  em_red_load_f64(t, xp, c->xstride, n, c->xd);
  if (c->pass == 0) {
    if (mstep == 0) {
      m[0] = em_red_tile_max(t, n, m[0]);
    } else {
      for (int k = 0; k < n; k++) m[k] = em_red_max(m[k], t[k]);
    }
  } else if (c->pass == 1) {
    exp_shifted(t, n, m, mstep, c->single);
    if (mstep == 0) {
      s[0] += em_red_tile_sum(t, n);
    } else {
      for (int k = 0; k < n; k++) s[k] += t[k];
    }
    if (c->keep_exp) em_red_store_f64(op, c->ostride, t, n, c->od);
  } else {
    if (c->is_log) {
      for (int k = 0; k < n; k++) t[k] = t[k] - m[k * mstep] - s[k * mstep];
    } else {
      exp_shifted(t, n, m, mstep, c->single);
      for (int k = 0; k < n; k++) t[k] *= s[k * mstep];
    }
    em_red_store_f64(op, c->ostride, t, n, c->od);
  }
}

/* Row path: a run of n elements of one line. */
static void sm_run(void *vctx, const char *xp, char *op, int n, int64_t r) {
  sm_ctx *c = vctx;
  (void)r;
  sm_tile(c, xp, op, n, c->m, c->s, 0);
}

/* Column path: one position of w neighbouring lines, tile by tile. */
static void sm_row(void *vctx, const char *xp, char *op, int64_t r) {
  sm_ctx *c = vctx;
  (void)r;
  for (int c0 = 0; c0 < c->w; c0 += EM_RED_TILE) {
    int n = c->w - c0 < EM_RED_TILE ? c->w - c0 : EM_RED_TILE;
    sm_tile(c, xp + c0 * c->xstride, op + c0 * c->ostride, n, c->m + c0, c->s + c0, 1);
  }
}

static void sm_unit(const em_red_plan *p, int is_log, int64_t u, double *scratch) {
  sm_ctx c;
  double m1, s1;
  c.is_log = is_log;
  c.xd = p->xd;
  c.od = p->od;
  c.single = p->xd != EM_FLOAT64;
  c.keep_exp = !is_log && (p->od == EM_FLOAT32 || p->od == EM_FLOAT64);
  int64_t xo, oo;
  if (p->column) {
    c.w = em_red_group(p, u, &xo, &oo);
    c.xstride = p->kx[p->nk - 1];
    c.ostride = p->ko[p->nk - 1];
    c.m = scratch;
    c.s = scratch + p->width;
  } else {
    em_red_out_offsets(p, u, &xo, &oo);
    c.w = 1;
    c.xstride = p->rx[p->nr - 1];
    c.ostride = p->ro[p->nr - 1];
    c.m = &m1;
    c.s = &s1;
  }
  for (int j = 0; j < c.w; j++) {
    c.m[j] = -INFINITY;
    c.s[j] = 0;
  }
  for (c.pass = 0; c.pass < 3; c.pass++) {
    if (c.pass == 2) /* the write pass wants ready per-line constants */
      for (int j = 0; j < c.w; j++) c.s[j] = is_log ? log(c.s[j]) : 1.0 / c.s[j];
    if (p->column) em_red_walk_rows(p, p->x + xo, p->o + oo, 0, p->nred, sm_row, &c);
    else em_red_walk_runs(p, p->x + xo, p->o + oo, 0, p->nred, sm_run, &c);
  }
}

/* float32 lines along the last dim of contiguous tensors (the classifier's and attention's
 * case): the same three passes, with vec_math.h's exp and the sum in 8 double lanes, so that
 * every pass vectorizes. The general path above, one expf call and one double chain per
 * element, ran 4-5x slower than PyTorch on [1024, 65]. NaN and -inf lines come out NaN as
 * there (x - m is NaN for them). */
enum { SM_LANES = 8 };
__attribute__((target_clones("avx512f", "avx2", "default")))
static void sm_line_f32(int is_log, float *o, const float *x, int64_t n) {
  float mx[SM_LANES];
  for (int j = 0; j < SM_LANES; j++) mx[j] = -INFINITY;
  int64_t body = n / SM_LANES * SM_LANES;
  for (int64_t i = 0; i < body; i += SM_LANES)
    for (int j = 0; j < SM_LANES; j++) mx[j] = x[i + j] > mx[j] ? x[i + j] : mx[j];
  float m = -INFINITY;
  for (int j = 0; j < SM_LANES; j++) m = mx[j] > m ? mx[j] : m;
  for (int64_t i = body; i < n; i++) m = x[i] > m ? x[i] : m;
  double acc[SM_LANES] = {0}, s = 0;
  for (int64_t i = 0; i < body; i += SM_LANES)
    for (int j = 0; j < SM_LANES; j++) {
      float e = em_vexpf_nonpos(x[i + j] - m);
      if (!is_log) o[i + j] = e;
      acc[j] += e;
    }
  for (int64_t i = body; i < n; i++) {
    float e = em_vexpf_nonpos(x[i] - m);
    if (!is_log) o[i] = e;
    s += e;
  }
  for (int j = 0; j < SM_LANES; j++) s += acc[j];
  if (is_log) {
    float ls = (float)log(s); /* x - m first: exact, where m + log(s) would round at m's scale */
    for (int64_t i = 0; i < n; i++) o[i] = (x[i] - m) - ls;
  } else {
    float inv = (float)(1.0 / s);
    for (int64_t i = 0; i < n; i++) o[i] *= inv;
  }
}

static bool last_dim_f32(const em_tensor *out, const em_tensor *x, int dim) {
  return x->dtype_id == EM_FLOAT32 && out->dtype_id == EM_FLOAT32 && x->ndim > 0 &&
         dim == x->ndim - 1 && em_is_contiguous(x) && em_is_contiguous(out) &&
         x->storage != out->storage;
}

int em_cpu_softmax(int is_log, em_tensor *out, const em_tensor *x, int dim) {
  if (last_dim_f32(out, x, dim)) {
    int64_t n = x->sizes[dim], lines = n > 0 ? em_numel(x) / n : 0;
    if (lines == 0 || n == 0) return 0;
    int nt = em_threads_for(lines * n * 3);
    if (nt > lines) nt = (int)lines;
    float *o = (float *)em_cpu_ptr(out);
    const float *xp = (const float *)em_cpu_ptr(x);
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (int64_t r = 0; r < lines; r++) sm_line_f32(is_log, o + r * n, xp + r * n, n);
    return 0;
  }
  em_red_plan p;
  em_red_plan_build(&p, out, x, x->ndim > 0 ? 1u << dim : 0);
  if (p.nout == 0 || p.nred == 0) return 0;
  int nt = em_threads_for(p.nout * p.nred * 3);
  if (p.column) em_red_plan_narrow(&p, nt); /* lines are not split: make enough groups */
  int64_t units = p.column ? p.ngroups : p.nout;
  if (nt > units) nt = (int)units;
  size_t bytes = p.column ? 2 * (size_t)p.width * sizeof(double) : 0;
  char *scratch = NULL;
  if (p.column && (scratch = em_red_scratch("softmax", nt, bytes)) == NULL) return -1;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (int64_t u = 0; u < units; u++)
    sm_unit(&p, is_log, u,
            scratch ? (double *)(scratch + (size_t)omp_get_thread_num() * bytes) : NULL);
  free(scratch);
  return 0;
}
