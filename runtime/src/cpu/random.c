/*
 * random.c (cpu): the `random` kernel. It fills a contiguous tensor from the Philox stream laid
 * out in random.h: element i takes word(s) w*i .. w*i+w-1, word j being lane j % 4 of block
 * offset + j / 4. Every element is a function of (seed, offset, i) alone, so threads split the
 * blocks in any way and the result never depends on the thread count.
 *
 * From words to values:
 *  - uniform: the top `digits` bits of a word (24 for float32, 11 for float16, 8 for bfloat16)
 *    or 53 bits of a word pair (float64) scaled by 2^-digits: every value is exactly
 *    representable and 1 is never produced. a + (b - a) u is then capped at the largest value of
 *    the dtype below b, so rounding cannot produce b either.
 *  - normal: Box-Muller on two uniforms, u1 in (0, 1] (so log(u1) is finite) and u2 in [0, 1).
 *    Elements 2k and 2k+1 share one pair and take r cos(t) and r sin(t). float64 uses 53-bit
 *    uniforms (tails to 8.6 sigma), the others 32-bit ones (to 6.7 sigma).
 *  - bernoulli: 1 when word * 2^-32 < p (so p = 0 never and p = 1 always gives 1).
 *  - integers: low + the high 64 bits of x * (high - low) for a 64-bit word pair x: Lemire's
 *    multiply-shift without rejection, biased by less than (high - low) / 2^64.
 */
#include "cpu.h"
#include "../random.h"

enum { CHUNK_BLOCKS = 64 }; /* blocks per work item: up to 256 values in a stack buffer */

__extension__ typedef unsigned __int128 u128;

typedef struct fill_job {
  em_random_kind kind;
  em_dtype dtype;
  int words;            /* stream words per element (1 or 2) */
  uint64_t seed, offset;
  double a, b;
  double cap;           /* uniform: the largest value of dtype below b */
  int digits;           /* uniform: mantissa bits used */
  int64_t n, nblocks;
  char *data;
} fill_job;

static int mantissa_digits(em_dtype d) {
  switch (d) {
  case EM_FLOAT64: return 53;
  case EM_FLOAT16: return 11;
  case EM_BFLOAT16: return 8;
  default: return 24;
  }
}

/* ---- one block of words to values ---------------------------------------------------------- */

static inline uint64_t pair64(uint32_t lo, uint32_t hi) { return (uint64_t)lo | (uint64_t)hi << 32; }

static void box_muller(double u1, double u2, double mean, double std, double *out) {
  double r = sqrt(-2.0 * log(u1));
  double t = 6.283185307179586 * u2;
  out[0] = mean + std * r * cos(t);
  out[1] = mean + std * r * sin(t);
}

/* Writes 4 / words values for the words x of one block. */
static void block_values(const fill_job *j, const uint32_t x[4], double *v) {
  switch (j->kind) {
  case EM_RANDOM_UNIFORM:
    if (j->words == 2) {
      for (int k = 0; k < 2; k++) {
        double u = (double)(pair64(x[2 * k], x[2 * k + 1]) >> 11) * 0x1p-53;
        double s = j->a + (j->b - j->a) * u;
        v[k] = s > j->cap ? j->cap : s;
      }
    } else {
      double scale = ldexp(1.0, -j->digits);
      for (int k = 0; k < 4; k++) {
        double u = (double)(x[k] >> (32 - j->digits)) * scale;
        double s = j->a + (j->b - j->a) * u;
        v[k] = s > j->cap ? j->cap : s;
      }
    }
    break;
  case EM_RANDOM_NORMAL:
    if (j->words == 2) {
      double u1 = (double)((pair64(x[0], x[1]) >> 11) + 1) * 0x1p-53;
      double u2 = (double)(pair64(x[2], x[3]) >> 11) * 0x1p-53;
      box_muller(u1, u2, j->a, j->b, v);
    } else {
      for (int k = 0; k < 4; k += 2)
        box_muller(((double)x[k] + 1.0) * 0x1p-32, (double)x[k + 1] * 0x1p-32, j->a, j->b, v + k);
    }
    break;
  case EM_RANDOM_BERNOULLI:
    for (int k = 0; k < 4; k++) v[k] = (double)x[k] * 0x1p-32 < j->a ? 1.0 : 0.0;
    break;
  case EM_RANDOM_INT: {
    int64_t low = (int64_t)j->a;
    uint64_t range = (uint64_t)((int64_t)j->b - low);
    for (int k = 0; k < 2; k++) {
      uint64_t r = (uint64_t)(((u128)pair64(x[2 * k], x[2 * k + 1]) * range) >> 64);
      v[k] = (double)(low + (int64_t)r); /* |value| <= 2^53: exact */
    }
    break;
  }
  }
}

/* ---- stores -------------------------------------------------------------------------------- */

#define STORE_CASE(E, N, T)                                                                   \
  case E:                                                                                     \
    for (int64_t i = 0; i < count; i++) em_st_##N(p + i * (int64_t)sizeof(T), v[i]);          \
    break;

static void store_values(em_dtype dtype, char *p, const double *v, int64_t count) {
  switch (dtype) {
    EM_CPU_DTYPES(STORE_CASE)
  default: break;
  }
}

/* Blocks [chunk * CHUNK_BLOCKS, ...) to their elements. */
static void fill_chunk(const fill_job *j, int64_t chunk) {
  double v[CHUNK_BLOCKS * 4];
  int per_block = 4 / j->words;
  int64_t b0 = chunk * CHUNK_BLOCKS;
  int64_t b1 = b0 + CHUNK_BLOCKS < j->nblocks ? b0 + CHUNK_BLOCKS : j->nblocks;
  int count = 0;
  for (int64_t blk = b0; blk < b1; blk++) {
    uint32_t x[4];
    em_philox_stream_block(j->seed, j->offset + (uint64_t)blk, x);
    block_values(j, x, v + count);
    count += per_block;
  }
  int64_t e0 = b0 * per_block;
  int64_t n = e0 + count <= j->n ? count : j->n - e0;
  store_values(j->dtype, j->data + e0 * (int64_t)em_dtypes[j->dtype].size, v, n);
}

int em_cpu_random(em_tensor *out, em_random_kind kind, uint64_t seed, uint64_t offset, double a,
                  double b) {
  if (!em_is_contiguous(out)) return em_error("random: expected a contiguous output");
  fill_job j = {0};
  j.kind = kind;
  j.dtype = (em_dtype)out->dtype_id;
  j.words = em_random_words(kind, j.dtype);
  j.seed = seed;
  j.offset = offset;
  j.a = a;
  j.b = b;
  j.n = em_numel(out);
  j.nblocks = (int64_t)em_random_blocks(kind, j.dtype, j.n);
  j.data = em_cpu_ptr(out);
  if (kind == EM_RANDOM_UNIFORM) {
    if (!em_dtypes[j.dtype].is_float) return em_error("random: uniform needs a floating dtype");
    j.digits = mantissa_digits(j.dtype);
    j.cap = em_random_uniform_cap(j.dtype, a, b);
  }
  int64_t chunks = (j.nblocks + CHUNK_BLOCKS - 1) / CHUNK_BLOCKS;
  int threads = em_threads_for(j.n);
  if (threads <= 1) {
    for (int64_t c = 0; c < chunks; c++) fill_chunk(&j, c);
    return 0;
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t c = 0; c < chunks; c++) fill_chunk(&j, c);
  return 0;
}
