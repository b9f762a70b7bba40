/*
 * multinomial.c (cpu): the `multinomial` kernel, multinomial.h's algorithm step for step.
 *
 * Weights are float32 or float64; both are handled in double with each addition and the one
 * multiplication rounded back to float32 for float32 weights. A float32 sum or product computed
 * in double and rounded once is the correctly rounded float32 result (double has more than
 * 2 x 24 + 2 bits), so this is float32 arithmetic, the arithmetic the Vulkan kernel does.
 * Rows are independent: checked first (the first bad row is the error), then drawn in parallel.
 * Without replacement the kernel only turns weights into exponential-race keys (multinomial.h).
 */
#include <math.h>

#include "cpu.h"
#include "../multinomial.h"
#include "../random.h"

typedef struct mn_job {
  char *w;             /* [R, K] weights, replaced by keys without replacement */
  int64_t *out;        /* [R, n]; NULL without replacement */
  int64_t R, K, n, chunk, nch;
  bool f32, replacement;
  uint64_t seed, offset;
} mn_job;

static inline double rnd(const mn_job *j, double x) { return j->f32 ? (double)(float)x : x; }

static inline double weight(const mn_job *j, int64_t r, int64_t i) {
  return j->f32 ? (double)((const float *)j->w)[r * j->K + i] : ((const double *)j->w)[r * j->K + i];
}

/* Chunk c's sum, left to right. */
static double chunk_sum(const mn_job *j, int64_t r, int64_t c) {
  int64_t end = (c + 1) * j->chunk < j->K ? (c + 1) * j->chunk : j->K;
  double s = 0;
  for (int64_t i = c * j->chunk; i < end; i++) s = rnd(j, s + weight(j, r, i));
  return s;
}

/* base[c] from the chunk sums, left to right; returns the total. */
static double bases(const mn_job *j, const double *sum, double *base) {
  base[0] = 0;
  for (int64_t c = 1; c < j->nch; c++) base[c] = rnd(j, base[c - 1] + sum[c - 1]);
  return rnd(j, base[j->nch - 1] + sum[j->nch - 1]);
}

/* The uniform of draw k (word k of the request), exact in the compute dtype. */
static double uniform(const mn_job *j, uint64_t k) {
  uint32_t x[4];
  em_philox_stream_block(j->seed, j->offset + k / 4, x);
  uint32_t word = x[k % 4];
  return j->f32 ? (double)(word >> 8) * 0x1p-24 : (double)word * 0x1p-32;
}

/* The last nonzero weight of chunk c or of the nearest chunk before it that has one. */
static int64_t last_nonzero(const mn_job *j, int64_t r, int64_t c) {
  for (int64_t i = (c + 1) * j->chunk < j->K ? (c + 1) * j->chunk : j->K; i-- > 0;)
    if (weight(j, r, i) > 0) return i;
  return 0; /* not reached: the row's checks found a nonzero weight */
}

/* One draw: multinomial.h's search. */
static int64_t draw(const mn_job *j, int64_t r, const double *base, double total, double u) {
  double target = rnd(j, u * total);
  int64_t lo = 0, hi = j->nch - 1; /* the largest c with base[c] <= target; base[0] = 0 */
  while (lo < hi) {
    int64_t mid = (lo + hi + 1) / 2;
    if (base[mid] <= target) lo = mid;
    else hi = mid - 1;
  }
  int64_t end = (lo + 1) * j->chunk < j->K ? (lo + 1) * j->chunk : j->K;
  double acc = base[lo];
  for (int64_t i = lo * j->chunk; i < end; i++) {
    double w = weight(j, r, i);
    if (w > 0) {
      acc = rnd(j, acc + w);
      if (acc > target) return i;
    }
  }
  return last_nonzero(j, r, lo);
}

/* Checks row r (multinomial.h's order); *pos and *value describe a failure. */
static em_mn_status check_row(const mn_job *j, int64_t r, double *sum, double *base, int64_t *pos,
                              double *value) {
  int64_t nonzero = 0;
  for (int64_t i = 0; i < j->K; i++) {
    double w = weight(j, r, i);
    if (!(w >= 0) || isinf(w)) {
      *pos = i, *value = w;
      return EM_MN_BAD_WEIGHT;
    }
    nonzero += w > 0;
  }
  for (int64_t c = 0; c < j->nch; c++) sum[c] = chunk_sum(j, r, c);
  double total = bases(j, sum, base);
  if (total == 0) return EM_MN_ZERO_ROW;
  if (isinf(total)) return EM_MN_OVERFLOW;
  if (!j->replacement && nonzero < j->n) {
    *pos = nonzero;
    return EM_MN_TOO_FEW;
  }
  return EM_MN_OK;
}

/* The draws of a checked row; sum and base hold its chunk sums. */
static void draw_row(const mn_job *j, int64_t r, double *sum, double *base) {
  int64_t *out = j->out + r * j->n;
  uint64_t first = (uint64_t)r * (uint64_t)j->n;
  double total = bases(j, sum, base);
  for (int64_t k = 0; k < j->n; k++) out[k] = draw(j, r, base, total, uniform(j, first + k));
}

/* Without replacement: each weight becomes its exponential-race key -log(u) / w (word r K + i,
 * u in (0, 1]; +inf for a zero weight), in place; the definition keeps the n smallest. */
static void keys_row(const mn_job *j, int64_t r) {
  uint64_t first = (uint64_t)r * (uint64_t)j->K;
  for (int64_t i = 0; i < j->K; i++) {
    double w = weight(j, r, i);
    if (j->f32) {
      float u = (float)(uniform(j, first + (uint64_t)i) + 0x1p-24);
      ((float *)j->w)[r * j->K + i] = w > 0 ? -logf(u) / (float)w : INFINITY;
    } else {
      double u = uniform(j, first + (uint64_t)i) + 0x1p-32;
      ((double *)j->w)[r * j->K + i] = w > 0 ? -log(u) / w : INFINITY;
    }
  }
}

/* Row r's work once checked. */
static void row_work(const mn_job *j, int64_t r, double *sum, double *base) {
  if (!j->replacement) {
    keys_row(j, r);
    return;
  }
  for (int64_t c = 0; c < j->nch; c++) sum[c] = chunk_sum(j, r, c);
  draw_row(j, r, sum, base);
}

int em_cpu_multinomial(em_tensor *out, em_tensor *w, int64_t n, int replacement, uint64_t seed,
                       uint64_t offset) {
  mn_job j = {.w = em_cpu_ptr(w), .out = out ? (int64_t *)em_cpu_ptr(out) : NULL, .R = w->sizes[0],
              .K = w->sizes[1], .n = n, .f32 = w->dtype_id == EM_FLOAT32,
              .replacement = replacement != 0, .seed = seed, .offset = offset};
  j.chunk = em_mn_chunk(j.K);
  j.nch = (j.K + j.chunk - 1) / j.chunk;
  /* chunk sums and bases live on the stack: at most 2 x 2048 doubles (multinomial.h) */
  double sum[EM_MN_MAX_CHUNKS], base[EM_MN_MAX_CHUNKS];
  for (int64_t r = 0; r < j.R; r++) {
    int64_t pos = 0;
    double value = 0;
    em_mn_status st = check_row(&j, r, sum, base, &pos, &value);
    if (st != EM_MN_OK) {
      char msg[256];
      em_multinomial_message(msg, sizeof msg, st, r, pos, value, n,
                             em_dtype_name((em_dtype)w->dtype_id));
      return em_error("%s", msg);
    }
  }
  int threads = em_threads_for(j.R * j.K);
  if (threads <= 1 || j.R == 1) {
    for (int64_t r = 0; r < j.R; r++) row_work(&j, r, sum, base);
    return 0;
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t r = 0; r < j.R; r++) {
    double tsum[EM_MN_MAX_CHUNKS], tbase[EM_MN_MAX_CHUNKS];
    row_work(&j, r, tsum, tbase);
  }
  return 0;
}
