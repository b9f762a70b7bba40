/*
 * ctc.c: the CPU kernel of the CTC loss (ops/nn_ctc.c defines the op).
 *
 * For batch element n with target l (length L) the extended target l' puts a blank around
 * every label: l' = (b, l1, b, l2, ..., lL, b), S = 2L + 1 states. The forward variable
 * alpha[t][s] is the log-probability of all prefixes of alignments that emit l'(s) at time t,
 * the backward variable beta[t][s] that of the suffixes starting at l'(s) at t (both include
 * the emission at t, Graves et al. 2006). A state takes from s and s - 1, and from s - 2 when
 * l'(s) is a label different from l'(s - 2): repeated labels need a blank between them.
 *
 *   nll = -logsumexp(alpha[T-1][S-1], alpha[T-1][S-2])
 *   d nll / d lp[t][c] = -exp(logsumexp_{s: l'(s) = c} (alpha[t][s] + beta[t][s]) - lp[t][c] + nll)
 *
 * Everything runs in double in log space (the products of T probabilities underflow at once
 * otherwise); batch elements are independent and run in parallel.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "../nn.h"
#include "cpu.h"

static inline double lse2(double a, double b) {
  if (a == -INFINITY) return b;
  if (b == -INFINITY) return a;
  double m = a > b ? a : b;
  return m + log1p(exp(-fabs(a - b)));
}

typedef struct ctc_view {
  const void *lp; /* [T, N, C] */
  bool f64;
  int64_t N, C;
} ctc_view;

static inline double lp_at(const ctc_view *v, int64_t t, int64_t n, int64_t c) {
  int64_t i = (t * v->N + n) * v->C + c;
  return v->f64 ? ((const double *)v->lp)[i] : (double)((const float *)v->lp)[i];
}

/* l'(s): blank on even states, the ((s - 1) / 2)-th label on odd ones. */
static inline int64_t label(const int64_t *tg, int64_t s, int64_t blank) {
  return s % 2 == 0 ? blank : tg[(s - 1) / 2];
}

/* One batch element: nll, and the gradient rows [t, n, :] when g (the [T, N, C] base) is not
 * NULL. work holds 2 * T * S doubles. */
static double ctc_one(const ctc_view *v, int64_t n, const int64_t *tg, int64_t T, int64_t L,
                      int64_t blank, double *work, void *g, bool gf64, int64_t Tall,
                      int zero_infinity) {
  int64_t S = 2 * L + 1;
  double *alpha = work, *beta = work + T * S;
  double nll;
  if (T == 0) {
    nll = L == 0 ? 0.0 : INFINITY;
  } else {
    for (int64_t s = 0; s < S; s++) alpha[s] = -INFINITY;
    alpha[0] = lp_at(v, 0, n, blank);
    if (S > 1) alpha[1] = lp_at(v, 0, n, tg[0]);
    for (int64_t t = 1; t < T; t++) {
      const double *prev = alpha + (t - 1) * S;
      double *cur = alpha + t * S;
      for (int64_t s = 0; s < S; s++) {
        int64_t c = label(tg, s, blank);
        double a = prev[s];
        if (s >= 1) a = lse2(a, prev[s - 1]);
        if (s >= 2 && c != blank && c != tg[(s - 3) / 2]) a = lse2(a, prev[s - 2]);
        cur[s] = a == -INFINITY ? -INFINITY : a + lp_at(v, t, n, c);
      }
    }
    const double *last = alpha + (T - 1) * S;
    nll = -(S > 1 ? lse2(last[S - 1], last[S - 2]) : last[0]);
  }
  bool zeroed = zero_infinity && isinf(nll);
  if (g == NULL) return zeroed ? 0.0 : nll;
  int64_t C = v->C;
  /* rows past the input's length, and every row of a zeroed loss, get 0 */
  for (int64_t t = zeroed ? 0 : T; t < Tall; t++)
    for (int64_t c = 0; c < C; c++) {
      int64_t i = (t * v->N + n) * C + c;
      if (gf64) ((double *)g)[i] = 0; else ((float *)g)[i] = 0;
    }
  if (zeroed || T == 0) return zeroed ? 0.0 : nll;
  for (int64_t s = 0; s < S; s++) beta[(T - 1) * S + s] = -INFINITY;
  beta[(T - 1) * S + S - 1] = lp_at(v, T - 1, n, label(tg, S - 1, blank));
  if (S > 1) beta[(T - 1) * S + S - 2] = lp_at(v, T - 1, n, label(tg, S - 2, blank));
  for (int64_t t = T - 2; t >= 0; t--) {
    const double *next = beta + (t + 1) * S;
    double *cur = beta + t * S;
    for (int64_t s = 0; s < S; s++) {
      int64_t c = label(tg, s, blank);
      double b = next[s];
      if (s + 1 < S) b = lse2(b, next[s + 1]);
      if (s + 2 < S && s % 2 == 1 && tg[(s + 1) / 2] != c) b = lse2(b, next[s + 2]);
      cur[s] = b == -INFINITY ? -INFINITY : b + lp_at(v, t, n, c);
    }
  }
  /* lcab[c] accumulates per class in a row of C doubles (the tail of work) */
  double *lcab = work + 2 * T * S;
  for (int64_t t = 0; t < T; t++) {
    for (int64_t c = 0; c < C; c++) lcab[c] = -INFINITY;
    for (int64_t s = 0; s < S; s++) {
      int64_t c = label(tg, s, blank);
      lcab[c] = lse2(lcab[c], alpha[t * S + s] + beta[t * S + s]);
    }
    for (int64_t c = 0; c < C; c++) {
      double d = lcab[c] == -INFINITY ? 0.0 : -exp(lcab[c] - lp_at(v, t, n, c) + nll);
      int64_t i = (t * v->N + n) * C + c;
      if (gf64) ((double *)g)[i] = d; else ((float *)g)[i] = (float)d;
    }
  }
  return nll;
}

int em_cpu_ctc_loss(em_tensor *nll, em_tensor *grad, const em_tensor *log_probs,
                    const em_tensor *targets, const int64_t *input_lengths,
                    const int64_t *target_lengths, const int64_t *target_offsets, int64_t blank,
                    int zero_infinity) {
  ctc_view v = {em_cpu_ptr(log_probs), log_probs->dtype_id == EM_FLOAT64, log_probs->sizes[1],
                log_probs->sizes[2]};
  int64_t Tall = log_probs->sizes[0], N = v.N;
  const int64_t *tg = (const int64_t *)(const void *)em_cpu_ptr(targets);
  bool f64 = nll->dtype_id == EM_FLOAT64;
  void *g = grad ? em_cpu_ptr(grad) : NULL;
  int64_t maxw = 0;
  for (int64_t n = 0; n < N; n++) {
    int64_t w = 2 * input_lengths[n] * (2 * target_lengths[n] + 1) + v.C;
    if (w > maxw) maxw = w;
  }
  int failed = 0;
  int nt = em_get_num_threads(); /* the process-wide count, whichever host thread calls */
#pragma omp parallel for num_threads(nt) schedule(dynamic) if (N > 1 && nt > 1 && !omp_in_parallel())
  for (int64_t n = 0; n < N; n++) {
    double *work = malloc(sizeof(double) * (size_t)(maxw > 0 ? maxw : 1));
    if (work == NULL) {
#pragma omp atomic write
      failed = 1;
      continue;
    }
    double r = ctc_one(&v, n, tg + target_offsets[n], input_lengths[n], target_lengths[n], blank,
                       work, g, f64, Tall, zero_infinity);
    if (f64) ((double *)em_cpu_ptr(nll))[n] = r; else ((float *)em_cpu_ptr(nll))[n] = (float)r;
    free(work);
  }
  if (failed) return em_error_kind_set(EM_ERR_OOM, "ctc_loss: out of memory for the recursion");
  return 0;
}
