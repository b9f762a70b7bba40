/*
 * norm.c: the CPU's normalization kernels: batch statistics, the per-channel affine map that
 * applies batch_norm, batch_norm's backward, and group_norm (which is also layer_norm) with
 * its backward. float32 and float64; statistics accumulate in double.
 *
 * Variances are computed in two passes per plane (mean, then squared deviations), with planes
 * merged by Chan's formula, so a large mean does not cancel the variance away as a one-pass
 * sum of squares would.
 *
 * Threads split channels (batch_norm) or normalized rows (group_norm). Where rows of one
 * channel meet in a sum (group_norm's weight and bias gradients) each thread keeps its own
 * partial sums, added in thread order afterwards: results do not depend on timing.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "../nn.h"
#include "cpu.h"

static int threads_for(int64_t units, int64_t work) {
  int t = omp_in_parallel() ? 1 : em_threads_for(work);
  return units < t ? (int)(units > 0 ? units : 1) : t;
}

/* ---- batch statistics --------------------------------------------------------------------- */

/* Per channel c of x [N, C, S]: mean and biased variance over N and S. */
#define BN_STATS(NAME, T)                                                                      \
  static void NAME(double *mean, double *var, const T *x, int64_t N, int64_t C, int64_t S,    \
                   int64_t c) {                                                               \
    double m = 0, m2 = 0, count = 0;                                                          \
    for (int64_t n = 0; n < N; n++) {                                                         \
      const T *p = x + (n * C + c) * S;                                                       \
      double s = 0, q = 0;                                                                    \
      for (int64_t i = 0; i < S; i++) s += p[i];                                              \
      double pm = s / (double)S;                                                              \
      for (int64_t i = 0; i < S; i++) {                                                       \
        double d = p[i] - pm;                                                                 \
        q += d * d;                                                                           \
      }                                                                                       \
      double total = count + (double)S, delta = pm - m;                                       \
      m += delta * (double)S / total;                                                         \
      m2 += q + delta * delta * count * (double)S / total;                                    \
      count = total;                                                                          \
    }                                                                                         \
    *mean = m;                                                                                \
    *var = count > 0 ? m2 / count : NAN;                                                      \
  }
BN_STATS(bn_stats_f32, float)
BN_STATS(bn_stats_f64, double)

static void store(em_tensor *t, int64_t i, double v) {
  if (t->dtype_id == EM_FLOAT64) ((double *)em_cpu_ptr(t))[i] = v;
  else ((float *)em_cpu_ptr(t))[i] = (float)v;
}

static double load(const em_tensor *t, int64_t i) {
  if (t->dtype_id == EM_FLOAT64) return ((const double *)em_cpu_ptr(t))[i];
  return ((const float *)em_cpu_ptr(t))[i];
}

/* x is [N, C, S] (the definition views any [N, C, ...] input so). */
int em_cpu_batch_norm_stats(em_tensor *mean, em_tensor *var, const em_tensor *x) {
  int64_t N = x->sizes[0], C = x->sizes[1], S = x->sizes[2];
  int threads = threads_for(C, em_numel(x));
  bool f64 = x->dtype_id == EM_FLOAT64;
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (int64_t c = 0; c < C; c++) {
    double m, v;
    if (f64) bn_stats_f64(&m, &v, (const double *)em_cpu_ptr(x), N, C, S, c);
    else bn_stats_f32(&m, &v, (const float *)em_cpu_ptr(x), N, C, S, c);
    store(mean, c, m);
    store(var, c, v);
  }
  return 0;
}

/* ---- y = x * scale[c] + shift[c] ---------------------------------------------------------- */

#define AFFINE(NAME, T)                                                                        \
  static void NAME(T *y, const T *x, const T *scale, const T *shift, int64_t C, int64_t S,    \
                   int64_t plane) {                                                           \
    int64_t c = plane % C;                                                                    \
    T a = scale[c], b = shift[c];                                                             \
    const T *xp = x + plane * S;                                                              \
    T *yp = y + plane * S;                                                                    \
    for (int64_t i = 0; i < S; i++) yp[i] = xp[i] * a + b;                                    \
  }
AFFINE(affine_f32, float)
AFFINE(affine_f64, double)

int em_cpu_channel_affine(em_tensor *y, const em_tensor *x, const em_tensor *scale,
                          const em_tensor *shift) {
  int64_t N = x->sizes[0], C = x->sizes[1], S = x->sizes[2], planes = N * C;
  int threads = threads_for(planes, em_numel(x));
  bool f64 = x->dtype_id == EM_FLOAT64;
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (int64_t p = 0; p < planes; p++) {
    if (f64)
      affine_f64((double *)em_cpu_ptr(y), (const double *)em_cpu_ptr(x),
                 (const double *)em_cpu_ptr(scale), (const double *)em_cpu_ptr(shift), C, S, p);
    else
      affine_f32((float *)em_cpu_ptr(y), (const float *)em_cpu_ptr(x),
                 (const float *)em_cpu_ptr(scale), (const float *)em_cpu_ptr(shift), C, S, p);
  }
  return 0;
}

/* ---- batch_norm backward ---------------------------------------------------------------------
 * Per channel, with xhat = (x - mean) * invstd and M = N * S:
 *   gb = sum(gy), gw = sum(gy * xhat)
 *   training: gx = w * invstd * (gy - gb / M - xhat * gw / M)   (the statistics depend on x)
 *   eval:     gx = w * invstd * gy */
#define BN_BACK(NAME, T)                                                                       \
  static void NAME(T *gx, const T *gy, const T *x, int64_t N, int64_t C, int64_t S,           \
                   int64_t c, double mean, double invstd, double w, bool training,            \
                   double *sum_gy, double *sum_gyx) {                                         \
    double a = 0, b = 0;                                                                      \
    for (int64_t n = 0; n < N; n++) {                                                         \
      const T *yp = gy + (n * C + c) * S, *xp = x + (n * C + c) * S;                          \
      for (int64_t i = 0; i < S; i++) {                                                       \
        a += yp[i];                                                                           \
        b += yp[i] * (xp[i] - mean);                                                          \
      }                                                                                       \
    }                                                                                         \
    b *= invstd;                                                                              \
    *sum_gy = a;                                                                              \
    *sum_gyx = b;                                                                             \
    if (gx == NULL) return;                                                                   \
    double M = (double)(N * S), k = w * invstd;                                               \
    double mg = training ? a / M : 0, mgx = training ? b / M : 0;                             \
    for (int64_t n = 0; n < N; n++) {                                                         \
      const T *yp = gy + (n * C + c) * S, *xp = x + (n * C + c) * S;                          \
      T *o = gx + (n * C + c) * S;                                                            \
      for (int64_t i = 0; i < S; i++) {                                                       \
        double xhat = (xp[i] - mean) * invstd;                                                \
        o[i] = (T)(k * (yp[i] - mg - xhat * mgx));                                            \
      }                                                                                       \
    }                                                                                         \
  }
BN_BACK(bn_back_f32, float)
BN_BACK(bn_back_f64, double)

int em_cpu_batch_norm_backward(em_tensor *gx, em_tensor *gw, em_tensor *gb, const em_tensor *gy,
                               const em_tensor *x, const em_tensor *mean,
                               const em_tensor *invstd, const em_tensor *weight, int training) {
  int64_t N = x->sizes[0], C = x->sizes[1], S = x->sizes[2];
  int threads = threads_for(C, 2 * em_numel(x));
  bool f64 = x->dtype_id == EM_FLOAT64;
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (int64_t c = 0; c < C; c++) {
    double a, b, m = load(mean, c), is = load(invstd, c), w = weight ? load(weight, c) : 1.0;
    if (f64)
      bn_back_f64(gx ? (double *)em_cpu_ptr(gx) : NULL, (const double *)em_cpu_ptr(gy),
                  (const double *)em_cpu_ptr(x), N, C, S, c, m, is, w, training != 0, &a, &b);
    else
      bn_back_f32(gx ? (float *)em_cpu_ptr(gx) : NULL, (const float *)em_cpu_ptr(gy),
                  (const float *)em_cpu_ptr(x), N, C, S, c, m, is, w, training != 0, &a, &b);
    if (gb) store(gb, c, a);
    if (gw) store(gw, c, b);
  }
  return 0;
}

/* ---- group_norm / layer_norm ---------------------------------------------------------------- */

/* Row r = (n, g) of x viewed [N * G, D] with D = Cg * S: its channel for element i is
 * g * Cg + i / S. */
#define GN_ROW(NAME, T)                                                                        \
  static void NAME(T *y, double *mean_out, double *rstd_out, const T *x, const T *w,          \
                   const T *b, const em_norm_geom *g, int64_t r) {                            \
    int64_t D = g->Cg * g->S, c0 = (r % g->G) * g->Cg;                                        \
    const T *xp = x + r * D;                                                                  \
    T *yp = y + r * D;                                                                        \
    double s = 0, q = 0;                                                                      \
    for (int64_t i = 0; i < D; i++) s += xp[i];                                               \
    double m = D > 0 ? s / (double)D : 0;                                                     \
    for (int64_t i = 0; i < D; i++) {                                                         \
      double d = xp[i] - m;                                                                   \
      q += d * d;                                                                             \
    }                                                                                         \
    double rstd = 1.0 / sqrt((D > 0 ? q / (double)D : 0) + g->eps);                           \
    *mean_out = m;                                                                            \
    *rstd_out = rstd;                                                                         \
    for (int64_t c = 0; c < g->Cg; c++) {                                                     \
      double a = rstd * (w ? (double)w[c0 + c] : 1.0);                                        \
      double sh = (b ? (double)b[c0 + c] : 0.0) - m * a;                                      \
      const T *xc = xp + c * g->S;                                                            \
      T *yc = yp + c * g->S;                                                                  \
      if (g->S == 1) yc[0] = (T)(xc[0] * a + sh);                                             \
      else {                                                                                  \
        T at = (T)a, st = (T)sh;                                                              \
        for (int64_t i = 0; i < g->S; i++) yc[i] = xc[i] * at + st;                           \
      }                                                                                       \
    }                                                                                         \
  }
GN_ROW(gn_row_f32, float)
GN_ROW(gn_row_f64, double)

/* layer_norm's rows in float32 (S == 1: a weight per element, the common case): the same
 * two-pass statistics in double, but summed in 8 independent lanes so that the loops
 * vectorize, and the affine map in float. The generic row above, one double chain per sum,
 * ran 4-5x slower than PyTorch on [1024, 256]. Compiled for AVX-512, AVX2 and the baseline. */
enum { LN_LANES = 8 };
#define LN_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

LN_CLONES static void ln_row_f32(float *y, double *mean_out, double *rstd_out, const float *x,
                                 const float *w, const float *b, int64_t D, double eps) {
  double acc[LN_LANES] = {0}, s = 0, q = 0;
  int64_t body = D / LN_LANES * LN_LANES;
  for (int64_t i = 0; i < body; i += LN_LANES)
    for (int j = 0; j < LN_LANES; j++) acc[j] += x[i + j];
  for (int64_t i = body; i < D; i++) s += x[i];
  for (int j = 0; j < LN_LANES; j++) s += acc[j];
  double m = D > 0 ? s / (double)D : 0;
  for (int j = 0; j < LN_LANES; j++) acc[j] = 0;
  for (int64_t i = 0; i < body; i += LN_LANES)
    for (int j = 0; j < LN_LANES; j++) {
      double d = x[i + j] - m;
      acc[j] += d * d;
    }
  for (int64_t i = body; i < D; i++) q += (x[i] - m) * (x[i] - m);
  for (int j = 0; j < LN_LANES; j++) q += acc[j];
  double rstd = 1.0 / sqrt((D > 0 ? q / (double)D : 0) + eps);
  *mean_out = m;
  *rstd_out = rstd;
  float fm = (float)m, fr = (float)rstd;
  for (int64_t i = 0; i < D; i++) {
    float v = (x[i] - fm) * fr;
    if (w) v *= w[i];
    if (b) v += b[i];
    y[i] = v;
  }
}

/* Its backward (see GN_BACK below for the formula); acc_w and acc_b may be NULL. */
LN_CLONES static void ln_back_f32(float *gx, const float *gy, const float *x, const float *w,
                                  double mean, double rstd, int64_t D, double *acc_w,
                                  double *acc_b) {
  float fm = (float)mean, fr = (float)rstd;
  double a1[LN_LANES] = {0}, a2[LN_LANES] = {0}, s1 = 0, s2 = 0;
  int64_t body = D / LN_LANES * LN_LANES;
  for (int64_t i = 0; i < body; i += LN_LANES)
    for (int j = 0; j < LN_LANES; j++) {
      float xhat = (x[i + j] - fm) * fr, g = gy[i + j] * (w ? w[i + j] : 1.0f);
      a1[j] += g;
      a2[j] += g * xhat;
    }
  for (int64_t i = body; i < D; i++) {
    float xhat = (x[i] - fm) * fr, g = gy[i] * (w ? w[i] : 1.0f);
    s1 += g;
    s2 += g * xhat;
  }
  for (int j = 0; j < LN_LANES; j++) {
    s1 += a1[j];
    s2 += a2[j];
  }
  if (acc_w)
    for (int64_t i = 0; i < D; i++) acc_w[i] += gy[i] * ((x[i] - fm) * fr);
  if (acc_b)
    for (int64_t i = 0; i < D; i++) acc_b[i] += gy[i];
  if (gx == NULL) return;
  float m1 = (float)(s1 / (double)D), m2 = (float)(s2 / (double)D);
  for (int64_t i = 0; i < D; i++) {
    float xhat = (x[i] - fm) * fr;
    gx[i] = fr * (gy[i] * (w ? w[i] : 1.0f) - m1 - xhat * m2);
  }
}

static const void *ptr_or_null(const em_tensor *t) { return t ? em_cpu_ptr(t) : NULL; }

int em_cpu_group_norm(em_tensor *y, em_tensor *mean, em_tensor *rstd, const em_tensor *x,
                      const em_tensor *weight, const em_tensor *bias, const em_norm_geom *g) {
  int64_t rows = g->N * g->G;
  int threads = threads_for(rows, 2 * em_numel(x));
  bool f64 = x->dtype_id == EM_FLOAT64;
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (int64_t r = 0; r < rows; r++) {
    double m, s;
    if (!f64 && g->S == 1 && g->G == 1) {
      int64_t D = g->Cg;
      ln_row_f32((float *)em_cpu_ptr(y) + r * D, &m, &s, (const float *)em_cpu_ptr(x) + r * D,
                 ptr_or_null(weight), ptr_or_null(bias), D, g->eps);
    } else if (f64)
      gn_row_f64((double *)em_cpu_ptr(y), &m, &s, (const double *)em_cpu_ptr(x),
                 ptr_or_null(weight), ptr_or_null(bias), g, r);
    else
      gn_row_f32((float *)em_cpu_ptr(y), &m, &s, (const float *)em_cpu_ptr(x),
                 ptr_or_null(weight), ptr_or_null(bias), g, r);
    store(mean, r, m);
    store(rstd, r, s);
  }
  return 0;
}

/* One row's backward: gx (when wanted) and the row's contributions to the per-channel sums
 * acc_w (gy * xhat) and acc_b (gy), each [C]. With gxhat = gy * w[c]:
 *   gx = rstd * (gxhat - mean(gxhat) - xhat * mean(gxhat * xhat)) */
#define GN_BACK(NAME, T)                                                                       \
  static void NAME(T *gx, const T *gy, const T *x, const T *w, double mean, double rstd,     \
                   const em_norm_geom *g, int64_t r, double *acc_w, double *acc_b) {          \
    int64_t D = g->Cg * g->S, c0 = (r % g->G) * g->Cg;                                        \
    const T *xp = x + r * D, *yp = gy + r * D;                                                \
    double s1 = 0, s2 = 0;                                                                    \
    for (int64_t c = 0; c < g->Cg; c++) {                                                     \
      double wc = w ? (double)w[c0 + c] : 1.0, cw = 0, cb = 0;                                \
      for (int64_t i = c * g->S; i < (c + 1) * g->S; i++) {                                   \
        double xhat = (xp[i] - mean) * rstd;                                                  \
        cb += yp[i];                                                                          \
        cw += yp[i] * xhat;                                                                   \
      }                                                                                       \
      s1 += wc * cb;                                                                          \
      s2 += wc * cw;                                                                          \
      if (acc_w) acc_w[c0 + c] += cw;                                                         \
      if (acc_b) acc_b[c0 + c] += cb;                                                         \
    }                                                                                         \
    if (gx == NULL) return;                                                                   \
    double m1 = s1 / (double)D, m2 = s2 / (double)D;                                          \
    T *o = gx + r * D;                                                                        \
    for (int64_t c = 0; c < g->Cg; c++) {                                                     \
      double wc = w ? (double)w[c0 + c] : 1.0;                                                \
      for (int64_t i = c * g->S; i < (c + 1) * g->S; i++) {                                   \
        double xhat = (xp[i] - mean) * rstd;                                                  \
        o[i] = (T)(rstd * (yp[i] * wc - m1 - xhat * m2));                                     \
      }                                                                                       \
    }                                                                                         \
  }
GN_BACK(gn_back_f32, float)
GN_BACK(gn_back_f64, double)

int em_cpu_group_norm_backward(em_tensor *gx, em_tensor *gw, em_tensor *gb, const em_tensor *gy,
                               const em_tensor *x, const em_tensor *mean, const em_tensor *rstd,
                               const em_tensor *weight, const em_norm_geom *g) {
  int64_t rows = g->N * g->G, C = g->G * g->Cg;
  int threads = threads_for(rows, 2 * em_numel(x));
  bool f64 = x->dtype_id == EM_FLOAT64, sums = gw || gb;
  double *acc = NULL;
  if (sums) {
    acc = calloc((size_t)(threads * 2 * C), sizeof *acc);
    if (acc == NULL) return em_error_kind_set(EM_ERR_OOM, "group_norm: out of memory on cpu");
  }
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    int t = threads > 1 ? omp_get_thread_num() : 0, nt = threads > 1 ? omp_get_num_threads() : 1;
    double *aw = sums ? acc + (size_t)(t * 2 * C) : NULL, *ab = sums ? aw + C : NULL;
    int64_t lo = rows * t / nt, hi = rows * (t + 1) / nt;
    for (int64_t r = lo; r < hi; r++) {
      double m = load(mean, r), s = load(rstd, r);
      if (!f64 && g->S == 1 && g->G == 1) {
        int64_t D = g->Cg;
        ln_back_f32(gx ? (float *)em_cpu_ptr(gx) + r * D : NULL, (const float *)em_cpu_ptr(gy) + r * D,
                    (const float *)em_cpu_ptr(x) + r * D, ptr_or_null(weight), m, s, D, aw, ab);
      } else if (f64)
        gn_back_f64(gx ? (double *)em_cpu_ptr(gx) : NULL, (const double *)em_cpu_ptr(gy),
                    (const double *)em_cpu_ptr(x), ptr_or_null(weight), m, s, g, r, aw, ab);
      else
        gn_back_f32(gx ? (float *)em_cpu_ptr(gx) : NULL, (const float *)em_cpu_ptr(gy),
                    (const float *)em_cpu_ptr(x), ptr_or_null(weight), m, s, g, r, aw, ab);
    }
  }
  if (sums) {
    for (int64_t c = 0; c < C; c++) {
      double sw = 0, sb = 0;
      for (int t = 0; t < threads; t++) {
        sw += acc[(size_t)(t * 2 * C + c)];
        sb += acc[(size_t)(t * 2 * C + C + c)];
      }
      if (gw) store(gw, c, sw);
      if (gb) store(gb, c, sb);
    }
    free(acc);
  }
  return 0;
}
