/*
 * conv.c: the CPU's 2-D convolution kernels: forward (conv2d), input gradient (which is also
 * conv_transpose2d's forward) and weight gradient, for float32 and float64.
 *
 * Each is im2col + GEMM, one (image, group) unit at a time:
 *   forward       y[n,g]  [Mg, P]  = w[g] [Mg, Kg] @ cols(x[n,g]) [Kg, P]      (+ bias)
 *   input grad    cols [Kg, P]     = w[g]^T @ gy[n,g];   gx[n,g] = col2im(cols) (+ bias)
 *   weight grad   gw[g] [Mg, Kg]  += gy[n,g] @ cols(x[n,g])^T
 * with P = OH*OW and Kg = (C/groups)*kh*kw. A 1x1 kernel with stride 1 and no padding needs no
 * im2col: x[n,g] already is its column matrix.
 *
 * Why per unit rather than one GEMM over the whole batch: the whole batch's column matrix is
 * large (the CNN benchmark's second layer: 800 x 12544 floats, 40 MB) and OpenBLAS ran that
 * single product at a quarter of the speed of 64 per-image products (measured: 52 against
 * ~200 GFLOPS), since one image's columns (627 KB) stay in the core's L2 cache between im2col
 * and the product that reads them.
 *
 * Threads: when there are at least as many units as threads, units are split across OpenMP
 * threads, each with its own column buffer, and OpenBLAS runs single-threaded inside them.
 * This avoids waking BLAS threads twice per image and keeps each image on one core. With fewer
 * units (one large image) the units run in turn and OpenBLAS threads each product. The weight
 * gradient sums over units: each thread accumulates into its own [M, Kg] buffer (thread 0 into
 * gw itself), and the buffers are added in thread order, so results do not depend on timing.
 */
#include <cblas.h>
#include <omp.h>
#include <stdlib.h>

#include "conv_impl.h"
#include "sgemm.h"

void em_conv_plan_init(conv_plan *p, const em_conv_geom *g, em_dtype dt) {
  p->g = g;
  p->f64 = dt == EM_FLOAT64;
  p->es = p->f64 ? 8 : 4;
  p->Cg = g->C / g->groups;
  p->Mg = g->M / g->groups;
  p->Kg = p->Cg * g->kh * g->kw;
  p->P = g->OH * g->OW;
  p->HW = g->H * g->W;
  p->direct = g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 &&
              g->pw == 0 && g->OH == g->H && g->OW == g->W;
  p->units = g->N * g->groups;
  int t = omp_in_parallel() ? 1 : em_get_num_threads();
  /* multiply-adds in all: below ~2M a second thread is not worth waking */
  int64_t work = p->units * p->Mg * p->Kg * p->P;
  if (work < 64 * EM_PARALLEL_GRAIN) t = 1;
  if (p->units < t) t = 1;
  p->threads = t;
}

/* The packed AVX-512 path takes float32 wherever the CPU has AVX-512. */
static bool use_packed(const em_tensor *t) {
  return t->dtype_id == EM_FLOAT32 && em_sgemm_available();
}

/* Runs BLAS single-threaded while OpenMP threads share the units (see the head comment). */
static int blas_threads_enter(const conv_plan *p) {
  if (p->threads <= 1) return 0;
  int saved = openblas_get_num_threads();
  openblas_set_num_threads(1);
  return saved;
}

static void blas_threads_leave(int saved) {
  if (saved > 0) openblas_set_num_threads(saved);
}

/* Row-major C[M,N] = alpha * op(A) op(B) + beta * C. */
static void gemm(bool f64, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const void *A,
                 int64_t lda, const void *B, int64_t ldb, double beta, void *C, int64_t ldc) {
  CBLAS_TRANSPOSE a = ta ? CblasTrans : CblasNoTrans, b = tb ? CblasTrans : CblasNoTrans;
  if (f64)
    cblas_dgemm(CblasRowMajor, a, b, (int)M, (int)N, (int)K, 1.0, A, (int)lda, B, (int)ldb,
                beta, C, (int)ldc);
  else
    cblas_sgemm(CblasRowMajor, a, b, (int)M, (int)N, (int)K, 1.0f, A, (int)lda, B, (int)ldb,
                (float)beta, C, (int)ldc);
}

/* ---- im2col / col2im ---------------------------------------------------------------------- */

/* The output columns [lo, hi) whose input column ow*s + off falls inside [0, W). */
void em_conv_valid_range(int64_t OW, int64_t W, int64_t s, int64_t off, int64_t *lo,
                         int64_t *hi) {
  int64_t a = off >= 0 ? 0 : (-off + s - 1) / s;
  int64_t b = W - 1 - off < 0 ? 0 : (W - 1 - off) / s + 1;
  if (b > OW) b = OW;
  if (a > b) a = b;
  *lo = a;
  *hi = b;
}

static void gather_row(char *dst, const char *src, int64_t n, int64_t step, bool f64) {
  if (f64) {
    double *d = (double *)dst;
    const double *s = (const double *)src;
    for (int64_t i = 0; i < n; i++) d[i] = s[i * step];
  } else {
    float *d = (float *)dst;
    const float *s = (const float *)src;
    for (int64_t i = 0; i < n; i++) d[i] = s[i * step];
  }
}

static void scatter_add_row(char *dst, const char *src, int64_t n, int64_t step, bool f64) {
  if (f64) {
    double *d = (double *)dst;
    const double *s = (const double *)src;
    for (int64_t i = 0; i < n; i++) d[i * step] += s[i];
  } else {
    float *d = (float *)dst;
    const float *s = (const float *)src;
    for (int64_t i = 0; i < n; i++) d[i * step] += s[i];
  }
}

/* cols [Kg, P] from one (image, group) block x [Cg, H, W]; padding reads as zeros. */
static void im2col(const conv_plan *p, const char *x, char *cols) {
  const em_conv_geom *g = p->g;
  size_t es = p->es;
  for (int64_t c = 0; c < p->Cg; c++)
    for (int64_t ki = 0; ki < g->kh; ki++)
      for (int64_t kj = 0; kj < g->kw; kj++) {
        char *row = cols + (size_t)(((c * g->kh + ki) * g->kw + kj) * p->P) * es;
        int64_t off = kj * g->dw - g->pw, lo, hi;
        em_conv_valid_range(g->OW, g->W, g->sw, off, &lo, &hi);
        for (int64_t oh = 0; oh < g->OH; oh++) {
          char *dst = row + (size_t)(oh * g->OW) * es;
          int64_t ih = oh * g->sh - g->ph + ki * g->dh;
          if (ih < 0 || ih >= g->H) {
            memset(dst, 0, (size_t)g->OW * es);
            continue;
          }
          const char *src = x + (size_t)((c * g->H + ih) * g->W) * es;
          if (lo > 0) memset(dst, 0, (size_t)lo * es);
          if (g->sw == 1)
            memcpy(dst + lo * es, src + (lo + off) * (int64_t)es, (size_t)(hi - lo) * es);
          else
            gather_row(dst + lo * es, src + (lo * g->sw + off) * (int64_t)es, hi - lo, g->sw,
                       p->f64);
          if (hi < g->OW) memset(dst + hi * es, 0, (size_t)(g->OW - hi) * es);
        }
      }
}

/* x [Cg, H, W] += col2im(cols); taps that fall into the padding are dropped. */
void em_conv_col2im_add(const conv_plan *p, const char *cols, char *x) {
  const em_conv_geom *g = p->g;
  size_t es = p->es;
  for (int64_t c = 0; c < p->Cg; c++)
    for (int64_t ki = 0; ki < g->kh; ki++)
      for (int64_t kj = 0; kj < g->kw; kj++) {
        const char *row = cols + (size_t)(((c * g->kh + ki) * g->kw + kj) * p->P) * es;
        int64_t off = kj * g->dw - g->pw, lo, hi;
        em_conv_valid_range(g->OW, g->W, g->sw, off, &lo, &hi);
        if (hi <= lo) continue;
        for (int64_t oh = 0; oh < g->OH; oh++) {
          int64_t ih = oh * g->sh - g->ph + ki * g->dh;
          if (ih < 0 || ih >= g->H) continue;
          char *dst = x + (size_t)((c * g->H + ih) * g->W + lo * g->sw + off) * es;
          scatter_add_row(dst, row + (size_t)(oh * g->OW + lo) * es, hi - lo, g->sw, p->f64);
        }
      }
}

/* ---- helpers ------------------------------------------------------------------------------ */

/* Fills rows [rows, n] of `out` (row length n) with bias[b0 + r]. */
static void fill_rows(char *out, const char *bias, int64_t rows, int64_t n, bool f64) {
  for (int64_t r = 0; r < rows; r++) {
    if (f64) {
      double v = ((const double *)bias)[r], *o = (double *)out + r * n;
      for (int64_t i = 0; i < n; i++) o[i] = v;
    } else {
      float v = ((const float *)bias)[r], *o = (float *)out + r * n;
      for (int64_t i = 0; i < n; i++) o[i] = v;
    }
  }
}

void em_conv_add_rows(char *out, const char *bias, int64_t rows, int64_t n, bool f64) {
  for (int64_t r = 0; r < rows; r++) {
    if (f64) {
      double v = ((const double *)bias)[r], *o = (double *)out + r * n;
      for (int64_t i = 0; i < n; i++) o[i] += v;
    } else {
      float v = ((const float *)bias)[r], *o = (float *)out + r * n;
      for (int64_t i = 0; i < n; i++) o[i] += v;
    }
  }
}

/* One column buffer per thread ([threads, Kg * P]); NULL when the kernel needs none. */
static int scratch(const conv_plan *p, bool needed, em_tensor **buf) {
  *buf = NULL;
  if (!needed) return 0;
  int64_t sizes[2] = {p->threads, p->Kg * p->P};
  *buf = em_empty(2, sizes, p->f64 ? EM_FLOAT64 : EM_FLOAT32, EM_CPU);
  return *buf ? 0 : -1;
}

static char *thread_cols(const conv_plan *p, em_tensor *buf) {
  if (buf == NULL) return NULL;
  int t = p->threads > 1 ? omp_get_thread_num() : 0;
  return em_cpu_ptr(buf) + (size_t)(t * p->Kg * p->P) * p->es;
}

/* ---- forward ------------------------------------------------------------------------------ */

typedef struct fwd_args {
  const conv_plan *p;
  char *y;
  const char *x, *w, *bias;
  em_tensor *buf;
} fwd_args;

static void fwd_unit(const fwd_args *a, int64_t u) {
  const conv_plan *p = a->p;
  int64_t n = u / p->g->groups, grp = u % p->g->groups;
  size_t es = p->es;
  const char *x = a->x + (size_t)((n * p->g->C + grp * p->Cg) * p->HW) * es;
  char *y = a->y + (size_t)((n * p->g->M + grp * p->Mg) * p->P) * es;
  const char *w = a->w + (size_t)(grp * p->Mg * p->Kg) * es;
  const char *cols = x;
  if (!p->direct) {
    char *c = thread_cols(p, a->buf);
    im2col(p, x, c);
    cols = c;
  }
  double beta = 0;
  if (a->bias) {
    fill_rows(y, a->bias + (size_t)(grp * p->Mg) * es, p->Mg, p->P, p->f64);
    beta = 1;
  }
  gemm(p->f64, false, false, p->Mg, p->P, p->Kg, w, p->Kg, cols, p->P, beta, y, p->P);
}

int em_cpu_conv2d(em_tensor *y, const em_tensor *x, const em_tensor *w, const em_tensor *bias,
                  const em_conv_geom *g) {
  if (y->dtype_id == EM_BFLOAT16) return em_conv_bf16_forward(y, x, w, bias, g);
  conv_plan p;
  em_conv_plan_init(&p, g, (em_dtype)y->dtype_id);
  if (p.Kg > 0 && use_packed(y))
    return em_conv_direct_forward_ok(g) ? em_conv_direct_forward(y, x, w, bias, g)
                                        : em_conv_packed_forward(y, x, w, bias, g);
  if (p.Kg == 0) { /* no input channels: y is the bias, or zeros */
    if (bias) fill_rows(em_cpu_ptr(y), em_cpu_ptr(bias), g->M, p.P, p.f64);
    for (int64_t n = 1; bias && n < g->N; n++)
      memcpy(em_cpu_ptr(y) + (size_t)(n * g->M * p.P) * p.es, em_cpu_ptr(y),
             (size_t)(g->M * p.P) * p.es);
    if (!bias) memset(em_cpu_ptr(y), 0, (size_t)em_numel(y) * p.es);
    return 0;
  }
  fwd_args a = {&p, em_cpu_ptr(y), em_cpu_ptr(x), em_cpu_ptr(w), bias ? em_cpu_ptr(bias) : NULL,
                NULL};
  if (scratch(&p, !p.direct, &a.buf) != 0) return -1;
  int saved = blas_threads_enter(&p);
#pragma omp parallel for num_threads(p.threads) schedule(static) if (p.threads > 1)
  for (int64_t u = 0; u < p.units; u++) fwd_unit(&a, u);
  blas_threads_leave(saved);
  em_release(a.buf);
  return 0;
}

/* ---- input gradient (conv_transpose2d) ------------------------------------------------------ */

typedef struct bwd_args {
  const conv_plan *p;
  char *gx;
  const char *gy, *w, *bias;
  em_tensor *buf;
} bwd_args;

static void input_grad_unit(const bwd_args *a, int64_t u) {
  const conv_plan *p = a->p;
  int64_t n = u / p->g->groups, grp = u % p->g->groups;
  size_t es = p->es;
  char *gx = a->gx + (size_t)((n * p->g->C + grp * p->Cg) * p->HW) * es;
  const char *gy = a->gy + (size_t)((n * p->g->M + grp * p->Mg) * p->P) * es;
  const char *w = a->w + (size_t)(grp * p->Mg * p->Kg) * es;
  if (p->direct) {
    gemm(p->f64, true, false, p->Kg, p->P, p->Mg, w, p->Kg, gy, p->P, 0, gx, p->P);
  } else {
    char *cols = thread_cols(p, a->buf);
    gemm(p->f64, true, false, p->Kg, p->P, p->Mg, w, p->Kg, gy, p->P, 0, cols, p->P);
    memset(gx, 0, (size_t)(p->Cg * p->HW) * es);
    em_conv_col2im_add(p, cols, gx);
  }
  if (a->bias) em_conv_add_rows(gx, a->bias + (size_t)(grp * p->Cg) * es, p->Cg, p->HW, p->f64);
}

int em_cpu_conv2d_input_grad(em_tensor *gx, const em_tensor *gy, const em_tensor *w,
                             const em_tensor *bias, const em_conv_geom *g) {
  if (gx->dtype_id == EM_BFLOAT16) return em_conv_bf16_input_grad(gx, gy, w, bias, g);
  conv_plan p;
  em_conv_plan_init(&p, g, (em_dtype)gx->dtype_id);
  if (p.Mg > 0 && p.P > 0 && use_packed(gx))
    return em_conv_direct_input_grad_ok(g) ? em_conv_direct_input_grad(gx, gy, w, bias, g)
                                           : em_conv_packed_input_grad(gx, gy, w, bias, g);
  if (p.Mg == 0 || p.P == 0) { /* nothing flows back: zeros, plus the bias */
    memset(em_cpu_ptr(gx), 0, (size_t)em_numel(gx) * p.es);
    for (int64_t n = 0; bias && n < g->N; n++)
      em_conv_add_rows(em_cpu_ptr(gx) + (size_t)(n * g->C * p.HW) * p.es, em_cpu_ptr(bias), g->C, p.HW,
               p.f64);
    return 0;
  }
  bwd_args a = {&p, em_cpu_ptr(gx), em_cpu_ptr(gy), em_cpu_ptr(w),
                bias ? em_cpu_ptr(bias) : NULL, NULL};
  if (scratch(&p, !p.direct, &a.buf) != 0) return -1;
  int saved = blas_threads_enter(&p);
#pragma omp parallel for num_threads(p.threads) schedule(static) if (p.threads > 1)
  for (int64_t u = 0; u < p.units; u++) input_grad_unit(&a, u);
  blas_threads_leave(saved);
  em_release(a.buf);
  return 0;
}

/* ---- weight gradient ------------------------------------------------------------------------ */

typedef struct wgrad_args {
  const conv_plan *p;
  char *gw;
  const char *x, *gy;
  em_tensor *buf;   /* columns */
  em_tensor *acc;   /* [threads - 1, M * Kg]: the other threads' sums */
} wgrad_args;

static void weight_grad_unit(const wgrad_args *a, int64_t u, char *acc) {
  const conv_plan *p = a->p;
  int64_t n = u / p->g->groups, grp = u % p->g->groups;
  size_t es = p->es;
  const char *x = a->x + (size_t)((n * p->g->C + grp * p->Cg) * p->HW) * es;
  const char *gy = a->gy + (size_t)((n * p->g->M + grp * p->Mg) * p->P) * es;
  char *gw = acc + (size_t)(grp * p->Mg * p->Kg) * es;
  const char *cols = x;
  if (!p->direct) {
    char *c = thread_cols(p, a->buf);
    im2col(p, x, c);
    cols = c;
  }
  gemm(p->f64, false, true, p->Mg, p->Kg, p->P, gy, p->P, cols, p->P, 1, gw, p->Kg);
}

static void sum_into(char *dst, const char *src, int64_t n, bool f64) {
  if (f64)
    for (int64_t i = 0; i < n; i++) ((double *)dst)[i] += ((const double *)src)[i];
  else
    for (int64_t i = 0; i < n; i++) ((float *)dst)[i] += ((const float *)src)[i];
}

int em_cpu_conv2d_weight_grad(em_tensor *gw, const em_tensor *x, const em_tensor *gy,
                              const em_conv_geom *g) {
  if (gw->dtype_id == EM_BFLOAT16) return em_conv_bf16_weight_grad(gw, x, gy, g);
  conv_plan p;
  em_conv_plan_init(&p, g, (em_dtype)gw->dtype_id);
  if (p.P > 0 && p.units > 0 && use_packed(gw))
    return em_conv_direct_weight_grad_ok(g) ? em_conv_direct_weight_grad(gw, x, gy, g)
                                            : em_conv_packed_weight_grad(gw, x, gy, g);
  int64_t total = em_numel(gw);
  memset(em_cpu_ptr(gw), 0, (size_t)total * p.es);
  if (p.P == 0 || p.units == 0) return 0;
  wgrad_args a = {&p, em_cpu_ptr(gw), em_cpu_ptr(x), em_cpu_ptr(gy), NULL, NULL};
  if (scratch(&p, !p.direct, &a.buf) != 0) return -1;
  if (p.threads > 1) {
    a.acc = em_zeros(1, (int64_t[]){(p.threads - 1) * total}, (em_dtype)gw->dtype_id, EM_CPU);
    if (a.acc == NULL) {
      em_release(a.buf);
      return -1;
    }
  }
  int saved = blas_threads_enter(&p);
  if (p.threads <= 1) {
    for (int64_t u = 0; u < p.units; u++) weight_grad_unit(&a, u, a.gw);
  } else {
#pragma omp parallel num_threads(p.threads)
    {
      int t = omp_get_thread_num(), nt = omp_get_num_threads();
      char *acc = t == 0 ? a.gw : em_cpu_ptr(a.acc) + (size_t)((t - 1) * total) * p.es;
      /* the same contiguous split as schedule(static), written out so each thread knows its
       * accumulator */
      int64_t lo = p.units * t / nt, hi = p.units * (t + 1) / nt;
      for (int64_t u = lo; u < hi; u++) weight_grad_unit(&a, u, acc);
    }
    for (int t = 1; t < p.threads; t++)
      sum_into(a.gw, em_cpu_ptr(a.acc) + (size_t)((t - 1) * total) * p.es, total, p.f64);
  }
  blas_threads_leave(saved);
  em_release(a.buf);
  em_release(a.acc);
  return 0;
}
