/*
 * loss.c: the CPU's fused class losses: cross entropy (log-softmax and NLL in one pass over
 * each row of scores, with class weights, ignore_index and label smoothing) and NLL over
 * log-probabilities, with their backward.
 *
 * Scores are x [N, C, S]: row (n, s) is the C scores x[n, :, s], S apart in memory (S == 1 for
 * the usual [N, C] input). For row i with target t, p = softmax(row), logp = log(p), weights
 * w (all 1 without a weight tensor), W = sum(w) and smoothing e:
 *   loss_i = (1 - e) * -w[t] * logp[t] + (e / C) * -sum_c w[c] * logp[c]
 *   d loss_i / d x_c = (1 - e) * w[t] * (p_c - [c == t]) + (e / C) * (W * p_c - w[c])
 * which is PyTorch's definition. Rows whose target is ignore_index give 0 and no gradient.
 * NLL is loss_i = -w[t] * x[t] (no smoothing). Sums are in double.
 */
#include <math.h>
#include <omp.h>

#include "../nn.h"
#include "cpu.h"
#include "vec_math.h"

static int threads_for(int64_t rows, int64_t work) {
  int t = omp_in_parallel() ? 1 : em_threads_for(work);
  return rows < t ? 1 : t;
}

static double weight_of(const em_tensor *w, int64_t c) {
  if (w == NULL) return 1.0;
  if (w->dtype_id == EM_FLOAT64) return ((const double *)em_cpu_ptr(w))[c];
  return ((const float *)em_cpu_ptr(w))[c];
}

/* sum_c w[c] (W above). */
static double weight_sum(const em_tensor *w, int64_t C) {
  double s = 0;
  for (int64_t c = 0; c < C; c++) s += weight_of(w, c);
  return s;
}

/* The first target out of [0, C) that is not ignored, as an error. */
static int check_targets(const int64_t *t, int64_t n, const em_class_loss *L, bool lsm) {
  for (int64_t i = 0; i < n; i++)
    if (t[i] != L->ignore_index && (t[i] < 0 || t[i] >= L->C))
      return em_error("%s: class index %lld is out of range for %lld classes",
                      lsm ? "cross_entropy" : "nll_loss", (long long)t[i], (long long)L->C);
  return 0;
}

/* float32 rows of a plain [N, C] input (S == 1): the log-sum-exp and the softmax of the
 * backward with vec_math.h's exp and 8-lane sums, so that they vectorize (a double exp per
 * element ran 3-4x slower than PyTorch on [1024, 65]). Same results as the loops below: an
 * all -inf (or +inf) row keeps m = 0 and lets the sum say so. */
enum { CE_LANES = 8 };
__attribute__((target_clones("avx512f", "avx2", "default")))
static double lse_f32(const float *row, int64_t C) {
  float mx[CE_LANES];
  for (int j = 0; j < CE_LANES; j++) mx[j] = -INFINITY;
  int64_t body = C / CE_LANES * CE_LANES;
  for (int64_t c = 0; c < body; c += CE_LANES)
    for (int j = 0; j < CE_LANES; j++) mx[j] = row[c + j] > mx[j] ? row[c + j] : mx[j];
  float m = -INFINITY;
  for (int j = 0; j < CE_LANES; j++) m = mx[j] > m ? mx[j] : m;
  for (int64_t c = body; c < C; c++) m = row[c] > m ? row[c] : m;
  if (isinf(m)) m = 0;
  double acc[CE_LANES] = {0}, sum = 0;
  for (int64_t c = 0; c < body; c += CE_LANES)
    for (int j = 0; j < CE_LANES; j++) acc[j] += em_vexpf(row[c + j] - m);
  for (int64_t c = body; c < C; c++) sum += em_vexpf(row[c] - m);
  for (int j = 0; j < CE_LANES; j++) sum += acc[j];
  return (double)m + log(sum);
}

/* out[c] = a * exp(row[c] - lse): the backward's softmax term without smoothing or weights. */
__attribute__((target_clones("avx512f", "avx2", "default")))
static void softmax_scaled_f32(float *out, const float *row, int64_t C, float lse, float a) {
  for (int64_t c = 0; c < C; c++) out[c] = a * em_vexpf(row[c] - lse);
}

#define CLASS_LOSS(NAME, T)                                                                    \
  static double NAME(bool lsm, T *loss, T *lse_out, const T *x, const int64_t *target,        \
                     const em_tensor *w, double W, const em_class_loss *L, int64_t i) {       \
    int64_t n = i / L->S, s = i % L->S, C = L->C, S = L->S;                                   \
    const T *row = x + n * C * S + s;                                                         \
    int64_t t = target[i];                                                                    \
    double lse = 0;                                                                           \
    if (lsm && sizeof(T) == sizeof(float) && S == 1) {                                        \
      lse = lse_f32((const float *)row, C);                                                   \
      lse_out[i] = (T)lse;                                                                    \
    } else if (lsm) {                                                                         \
      double m = -INFINITY, sum = 0;                                                          \
      for (int64_t c = 0; c < C; c++) m = row[c * S] > m ? row[c * S] : m;                    \
      if (isinf(m)) m = 0; /* all -inf (or +inf): let the sum say so */                       \
      for (int64_t c = 0; c < C; c++) sum += exp(row[c * S] - m);                             \
      lse = m + log(sum);                                                                     \
      lse_out[i] = (T)lse;                                                                    \
    }                                                                                         \
    if (t == L->ignore_index) {                                                               \
      loss[i] = 0;                                                                            \
      return 0;                                                                               \
    }                                                                                         \
    double wt = weight_of(w, t), v = -wt * (row[t * S] - lse);                                \
    if (L->smoothing > 0) {                                                                   \
      double sm = 0;                                                                          \
      for (int64_t c = 0; c < C; c++) sm -= weight_of(w, c) * (row[c * S] - lse);             \
      v = (1 - L->smoothing) * v + L->smoothing / (double)C * sm;                             \
    }                                                                                         \
    (void)W;                                                                                  \
    loss[i] = (T)v;                                                                           \
    return wt;                                                                                \
  }
CLASS_LOSS(class_loss_f32, float)
CLASS_LOSS(class_loss_f64, double)

int em_cpu_class_loss(int log_softmax, em_tensor *loss, em_tensor *lse, em_tensor *total_weight,
                      const em_tensor *x, const em_tensor *target, const em_tensor *weight,
                      const em_class_loss *L) {
  bool lsm = log_softmax != 0, f64 = x->dtype_id == EM_FLOAT64;
  int64_t rows = L->N * L->S;
  const int64_t *t = (const int64_t *)em_cpu_ptr(target);
  if (check_targets(t, rows, L, lsm) != 0) return -1;
  double W = weight_sum(weight, L->C), total = 0;
  int threads = threads_for(rows, em_numel(x));
#pragma omp parallel for num_threads(threads) schedule(static) reduction(+ : total) if (threads > 1)
  for (int64_t i = 0; i < rows; i++) {
    if (f64)
      total += class_loss_f64(lsm, (double *)em_cpu_ptr(loss), lse ? (double *)em_cpu_ptr(lse) : NULL,
                              (const double *)em_cpu_ptr(x), t, weight, W, L, i);
    else
      total += class_loss_f32(lsm, (float *)em_cpu_ptr(loss), lse ? (float *)em_cpu_ptr(lse) : NULL,
                              (const float *)em_cpu_ptr(x), t, weight, W, L, i);
  }
  if (total_weight->dtype_id == EM_FLOAT64) *(double *)em_cpu_ptr(total_weight) = total;
  else *(float *)em_cpu_ptr(total_weight) = (float)total;
  return 0;
}

#define CLASS_LOSS_BACK(NAME, T)                                                               \
  static void NAME(bool lsm, T *gx, const T *gl, const T *x, const T *lse_in,                 \
                   const int64_t *target, const em_tensor *w, double W,                       \
                   const em_class_loss *L, int64_t i) {                                       \
    int64_t n = i / L->S, s = i % L->S, C = L->C, S = L->S;                                   \
    const T *row = x + n * C * S + s;                                                         \
    T *out = gx + n * C * S + s;                                                              \
    int64_t t = target[i];                                                                    \
    if (t == L->ignore_index) {                                                               \
      for (int64_t c = 0; c < C; c++) out[c * S] = 0;                                         \
      return;                                                                                 \
    }                                                                                         \
    double g = gl[i], wt = weight_of(w, t);                                                   \
    if (!lsm) {                                                                               \
      for (int64_t c = 0; c < C; c++) out[c * S] = 0;                                         \
      out[t * S] = (T)(-g * wt);                                                              \
      return;                                                                                 \
    }                                                                                         \
    double lse = lse_in[i], e = L->smoothing, a = g * (1 - e) * wt, b = g * e / (double)C;    \
    if (sizeof(T) == sizeof(float) && S == 1 && e == 0) {                                     \
      softmax_scaled_f32((float *)out, (const float *)row, C, (float)lse, (float)a);          \
      out[t] = (T)(out[t] - a);                                                               \
      return;                                                                                 \
    }                                                                                         \
    for (int64_t c = 0; c < C; c++) {                                                         \
      double p = exp(row[c * S] - lse);                                                       \
      double v = a * p + (e > 0 ? b * (W * p - weight_of(w, c)) : 0);                         \
      out[c * S] = (T)v;                                                                      \
    }                                                                                         \
    out[t * S] = (T)(out[t * S] - a);                                                         \
  }
CLASS_LOSS_BACK(class_loss_back_f32, float)
CLASS_LOSS_BACK(class_loss_back_f64, double)

int em_cpu_class_loss_backward(int log_softmax, em_tensor *gx, const em_tensor *gloss,
                               const em_tensor *x, const em_tensor *lse, const em_tensor *target,
                               const em_tensor *weight, const em_class_loss *L) {
  bool lsm = log_softmax != 0, f64 = x->dtype_id == EM_FLOAT64;
  int64_t rows = L->N * L->S;
  const int64_t *t = (const int64_t *)em_cpu_ptr(target);
  double W = weight_sum(weight, L->C);
  int threads = threads_for(rows, em_numel(x));
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (int64_t i = 0; i < rows; i++) {
    if (f64)
      class_loss_back_f64(lsm, (double *)em_cpu_ptr(gx), (const double *)em_cpu_ptr(gloss),
                          (const double *)em_cpu_ptr(x), lse ? (const double *)em_cpu_ptr(lse) : NULL,
                          t, weight, W, L, i);
    else
      class_loss_back_f32(lsm, (float *)em_cpu_ptr(gx), (const float *)em_cpu_ptr(gloss),
                          (const float *)em_cpu_ptr(x), lse ? (const float *)em_cpu_ptr(lse) : NULL,
                          t, weight, W, L, i);
  }
  return 0;
}
