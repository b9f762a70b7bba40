/*
 * random.c: the process-wide random generator and the definitions of the random ops.
 *
 * The generator is counter based (Philox-4x32-10, random.h): its whole state is a 64-bit seed
 * and a 64-bit offset counting the 128-bit blocks handed out so far. An op reserves the blocks
 * it needs (em_rng_reserve) and passes (seed, offset) to the device's `random` kernel, which can
 * compute any element independently. So results depend only on the seed and the order of the
 * requests: not on the thread count, not on the device, and a saved (seed, offset) replays.
 *
 * Ops are defined here once (dtype and argument checks, output allocation, non-contiguous
 * targets); the arithmetic is the kernel's. randperm is the exception: Fisher-Yates is
 * sequential, so it runs on the host from the same Philox stream and uploads the result.
 */
#include <math.h>
#include <pthread.h>

#include "random.h"

/* The seed of a run that never calls manual_seed, so unseeded runs are reproducible too. It is
 * the value PyTorch uses for the same purpose; the streams themselves differ from PyTorch's. */
#define EM_DEFAULT_SEED UINT64_C(67280421310721)

static uint64_t rng_seed = EM_DEFAULT_SEED;
static uint64_t rng_offset = 0;
/* A mutex rather than atomics: seed and offset must change together (set_state), and a
 * reservation is one short critical section per op, never per element. */
static pthread_mutex_t rng_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- the generator ------------------------------------------------------------------------ */

void em_manual_seed(uint64_t seed) { em_rng_set_state(seed, 0); }

uint64_t em_initial_seed(void) {
  pthread_mutex_lock(&rng_lock);
  uint64_t s = rng_seed;
  pthread_mutex_unlock(&rng_lock);
  return s;
}

void em_rng_get_state(uint64_t *seed, uint64_t *offset) {
  pthread_mutex_lock(&rng_lock);
  if (seed) *seed = rng_seed;
  if (offset) *offset = rng_offset;
  pthread_mutex_unlock(&rng_lock);
}

void em_rng_set_state(uint64_t seed, uint64_t offset) {
  pthread_mutex_lock(&rng_lock);
  rng_seed = seed;
  rng_offset = offset;
  pthread_mutex_unlock(&rng_lock);
}

uint64_t em_rng_reserve(uint64_t count, uint64_t *seed) {
  pthread_mutex_lock(&rng_lock);
  uint64_t first = rng_offset;
  rng_offset += count; /* wraps after 2^64 blocks (2^68 bytes): never in practice */
  if (seed) *seed = rng_seed;
  pthread_mutex_unlock(&rng_lock);
  return first;
}

void em_philox4x32(uint64_t seed, uint64_t counter, uint32_t out[4]) {
  em_philox_stream_block(seed, counter, out);
}

/* ---- the uniform cap (random.h) ----------------------------------------------------------- */

/* 16-bit floats are sign-magnitude: one step toward -inf or +inf in their bit patterns. */
static uint16_t f16_step_down(uint16_t h) {
  if (h == 0x0000) return 0x8001;
  return (h & 0x8000) ? (uint16_t)(h + 1) : (uint16_t)(h - 1);
}
static uint16_t f16_step_up(uint16_t h) {
  if (h == 0x8000) return 0x0001;
  return (h & 0x8000) ? (uint16_t)(h - 1) : (uint16_t)(h + 1);
}
static double f16_value(uint16_t h, bool bf16) {
  return bf16 ? em_bf16_to_float(h) : em_half_to_float(h);
}

/* The largest value of a floating dtype strictly below b (b finite and in range). */
static double largest_below(em_dtype d, double b) {
  switch (d) {
  case EM_FLOAT64: return nextafter(b, -INFINITY);
  case EM_FLOAT32: {
    float f = (float)b;
    if ((double)f >= b) f = nextafterf(f, -INFINITY);
    return f;
  }
  default: {
    bool bf16 = d == EM_BFLOAT16;
    uint16_t h = bf16 ? em_float_to_bf16((float)b) : em_float_to_half((float)b);
    /* Rounding b twice (to float, then to 16 bits) can miss by a step either way: walk. */
    while (f16_value(h, bf16) >= b) h = f16_step_down(h);
    while (f16_value(f16_step_up(h), bf16) < b) h = f16_step_up(h);
    return f16_value(h, bf16);
  }
  }
}

double em_random_uniform_cap(em_dtype d, double a, double b) {
  double cap = largest_below(d, b);
  return cap < a ? a : cap; /* [a, b) holds no value of the dtype but a itself */
}

/* ---- shared checks and the kernel call ---------------------------------------------------- */

static bool is_float(em_dtype d) { return em_dtypes[d].is_float; }

/* Largest magnitude a finite value of a floating dtype may have. */
static double float_max(em_dtype d) {
  switch (d) {
  case EM_FLOAT16: return 65504.0;
  case EM_BFLOAT16: return 3.3895313892515355e38;
  case EM_FLOAT32: return 3.4028234663852886e38;
  default: return INFINITY;
  }
}

/* Integers a dtype holds exactly: [lo, hi]. int64 stops at 2^53 because the kernel slot takes
 * its bounds as doubles; floating dtypes stop where consecutive integers stop existing. */
static void int_limits(em_dtype d, double *lo, double *hi) {
  static const double two53 = 9007199254740992.0;
  switch (d) {
  case EM_INT8: *lo = -128, *hi = 127; return;
  case EM_UINT8: *lo = 0, *hi = 255; return;
  case EM_INT16: *lo = -32768, *hi = 32767; return;
  case EM_INT32: *lo = -2147483648.0, *hi = 2147483647.0; return;
  case EM_INT64: *lo = -two53, *hi = two53 - 1; return;
  case EM_BOOL: *lo = 0, *hi = 1; return;
  case EM_FLOAT16: *lo = -2048, *hi = 2048; return;
  case EM_BFLOAT16: *lo = -256, *hi = 256; return;
  case EM_FLOAT32: *lo = -16777216.0, *hi = 16777216.0; return;
  default: *lo = -two53, *hi = two53; return;
  }
}

/* A random write into t must not land two elements on one address (expanded views). */
static int check_no_overlap(const char *fn, const em_tensor *t) {
  if (!em_has_internal_overlap(t)) return 0;
  return em_error("%s: cannot write into a tensor whose elements share memory (an expanded "
                  "view or overlapping windows); clone it first", fn);
}

/* Fills the contiguous, freshly owned `out` from the stream. */
static int fill_contiguous(const char *fn, em_tensor *out, em_random_kind kind, double a,
                           double b) {
  const em_backend *be = em_device_backend(out->device_id);
  EM_NEED_KERNEL(fn, be, random);
  int64_t n = em_numel(out);
  if (n == 0) return 0; /* nothing drawn, the stream does not move */
  uint64_t seed;
  uint64_t offset = em_rng_reserve(em_random_blocks(kind, (em_dtype)out->dtype_id, n), &seed);
  if (be->random(out, kind, seed, offset, a, b) != 0) return -1;
  em_bump_version(out);
  return 0;
}

/* Fills any tensor t: directly when contiguous, else through a contiguous temporary, so that
 * element i in row-major order gets the same value whatever t's strides are. */
static int fill_any(const char *fn, em_tensor *t, em_random_kind kind, double a, double b) {
  if (check_no_overlap(fn, t) != 0) return -1;
  if (em_is_contiguous(t)) return fill_contiguous(fn, t, kind, a, b);
  em_tensor *tmp = em_empty(t->ndim, t->sizes, (em_dtype)t->dtype_id, t->device_id);
  int rc = tmp ? fill_contiguous(fn, tmp, kind, a, b) : -1;
  if (rc == 0) rc = em_copy_(t, tmp);
  em_release(tmp);
  return rc;
}

/* A new tensor of the given shape filled from the stream; the caller checked the arguments. */
static em_tensor *new_filled(const char *fn, int ndim, const int64_t *sizes, em_dtype dtype,
                             int device, em_random_kind kind, double a, double b) {
  if (em_check_shape(fn, ndim, sizes) || em_check_device(fn, device)) return NULL;
  em_tensor *t = em_empty(ndim, sizes, dtype, device);
  if (t && fill_contiguous(fn, t, kind, a, b) != 0) {
    em_release(t);
    return NULL;
  }
  return t;
}

static int check_float_dtype(const char *fn, int dtype) {
  if (em_check_dtype(fn, dtype) != 0) return -1;
  if (!is_float((em_dtype)dtype))
    return em_error("%s: expected a floating point dtype, got %s", fn,
                    em_dtype_name((em_dtype)dtype));
  return 0;
}

static int check_float_tensor(const char *fn, const em_tensor *t) {
  if (t == NULL) return em_error("%s: expected a tensor, got NULL", fn);
  if (!is_float((em_dtype)t->dtype_id))
    return em_error("%s: expected a floating point tensor, got %s", fn,
                    em_dtype_name((em_dtype)t->dtype_id));
  return 0;
}

/* ---- uniform and normal ------------------------------------------------------------------- */

em_tensor *em_rand(int ndim, const int64_t *sizes, em_dtype dtype, int device) {
  if (check_float_dtype("rand", dtype) != 0) return NULL;
  return new_filled("rand", ndim, sizes, dtype, device, EM_RANDOM_UNIFORM, 0.0, 1.0);
}

em_tensor *em_randn(int ndim, const int64_t *sizes, em_dtype dtype, int device) {
  if (check_float_dtype("randn", dtype) != 0) return NULL;
  return new_filled("randn", ndim, sizes, dtype, device, EM_RANDOM_NORMAL, 0.0, 1.0);
}

int em_uniform_(em_tensor *t, double low, double high) {
  const char *fn = "uniform_";
  if (check_float_tensor(fn, t) != 0) return -1;
  if (!isfinite(low) || !isfinite(high))
    return em_error("%s: expected finite bounds, got [%g, %g)", fn, low, high);
  if (low > high)
    return em_error("%s: expected low <= high, got low=%g, high=%g", fn, low, high);
  double m = float_max((em_dtype)t->dtype_id);
  if (fabs(low) > m || fabs(high) > m || !isfinite(high - low))
    return em_error("%s: bounds [%g, %g) are outside the range of %s", fn, low, high,
                    em_dtype_name((em_dtype)t->dtype_id));
  if (low == high) { /* an empty interval: PyTorch fills with low */
    if (check_no_overlap(fn, t) != 0) return -1;
    return em_fill_(t, low);
  }
  return fill_any(fn, t, EM_RANDOM_UNIFORM, low, high);
}

int em_normal_(em_tensor *t, double mean, double std) {
  const char *fn = "normal_";
  if (check_float_tensor(fn, t) != 0) return -1;
  if (!isfinite(mean) || !isfinite(std))
    return em_error("%s: expected a finite mean and std, got mean=%g, std=%g", fn, mean, std);
  if (std < 0) return em_error("%s: expected std >= 0, got %g", fn, std);
  return fill_any(fn, t, EM_RANDOM_NORMAL, mean, std);
}

/* ---- integers ----------------------------------------------------------------------------- */

em_tensor *em_randint(int64_t low, int64_t high, int ndim, const int64_t *sizes, em_dtype dtype,
                      int device) {
  const char *fn = "randint";
  if (em_check_dtype(fn, dtype) != 0 || em_check_dense_dtype(fn, dtype) != 0) return NULL;
  if (low >= high)
    return em_error_null("%s: expected low < high, got low=%lld, high=%lld", fn,
                         (long long)low, (long long)high);
  double lo, hi;
  int_limits(dtype, &lo, &hi);
  if ((double)low < lo || (double)(high - 1) > hi)
    return em_error_null("%s: range [%lld, %lld) does not fit in %s (values from %.0f to %.0f)",
                         fn, (long long)low, (long long)high, em_dtype_name(dtype), lo, hi);
  return new_filled(fn, ndim, sizes, dtype, device, EM_RANDOM_INT, (double)low, (double)high);
}

/* Fisher-Yates on the host: step k (k = 0 .. n-2) swaps position i = n-1-k with a position j
 * uniform in [0, i], drawn as the high 64 bits of x * (i + 1) for the 64-bit word pair k of the
 * stream (bias below (i + 1) / 2^64). The stream advances by ceil(2 (n - 1) / 4) blocks. */
__extension__ typedef unsigned __int128 em_u128;

static void fisher_yates(int64_t *v, int64_t n, uint64_t seed, uint64_t offset) {
  for (int64_t i = 0; i < n; i++) v[i] = i;
  uint32_t block[4];
  for (int64_t k = 0; k + 1 < n; k++) {
    if (k % 2 == 0) em_philox_stream_block(seed, offset + (uint64_t)k / 2, block);
    int lane = (int)(k % 2) * 2;
    uint64_t x = (uint64_t)block[lane] | (uint64_t)block[lane + 1] << 32;
    int64_t i = n - 1 - k;
    int64_t j = (int64_t)(((em_u128)x * (uint64_t)(i + 1)) >> 64);
    int64_t tmp = v[i];
    v[i] = v[j];
    v[j] = tmp;
  }
}

em_tensor *em_randperm(int64_t n, em_dtype dtype, int device) {
  const char *fn = "randperm";
  if (em_check_dtype(fn, dtype) != 0 || em_check_device(fn, device) != 0) return NULL;
  if (n < 0) return em_error_null("%s: expected n >= 0, got %lld", fn, (long long)n);
  if (dtype == EM_BOOL)
    return em_error_null("%s: expected an integer or floating point dtype, got bool", fn);
  double lo, hi;
  int_limits(dtype, &lo, &hi);
  if (n > 0 && (double)(n - 1) > hi)
    return em_error_null("%s: n=%lld is too large for %s (values up to %.0f)", fn, (long long)n,
                         em_dtype_name(dtype), hi);
  if (em_check_shape(fn, 1, &n) != 0) return NULL;
  /* The permutation is built in an int64 CPU tensor (through the allocator, so limits and the
   * out-of-memory retry apply), then cast and moved. */
  em_tensor *host = em_empty(1, &n, EM_INT64, EM_CPU);
  if (host == NULL) return NULL;
  if (n > 0) {
    /* n - 1 steps of two words each: ceil((n - 1) / 2) blocks. */
    uint64_t seed, offset = em_rng_reserve((uint64_t)n / 2, &seed);
    fisher_yates((int64_t *)host->storage->data, n, seed, offset);
  }
  if (dtype == EM_INT64 && device == EM_CPU) return host;
  em_tensor *out = em_empty(1, &n, dtype, device);
  if (out && em_copy_(out, host) != 0) {
    em_release(out);
    out = NULL;
  }
  em_release(host);
  return out;
}

/* ---- bernoulli ---------------------------------------------------------------------------- */

int em_bernoulli_(em_tensor *t, double p) {
  const char *fn = "bernoulli_";
  if (t == NULL) return em_error("%s: expected a tensor, got NULL", fn);
  if (!(p >= 0 && p <= 1)) return em_error("%s: expected p in [0, 1], got %g", fn, p);
  return fill_any(fn, t, EM_RANDOM_BERNOULLI, p, 0.0);
}

/* Checks that p holds probabilities, with two reductions on p's device (NaN fails too: amin
 * and amax propagate it). */
static int check_probabilities(const char *fn, const em_tensor *p) {
  if (em_numel(p) == 0) return 0;
  double lo = 0, hi = 0;
  em_tensor *mn = em_reduce(EM_AMIN, p, 0, NULL, 0);
  em_tensor *mx = mn ? em_reduce(EM_AMAX, p, 0, NULL, 0) : NULL;
  int rc = mx && em_item(mn, &lo) == 0 && em_item(mx, &hi) == 0 ? 0 : -1;
  em_release(mn);
  em_release(mx);
  if (rc != 0) {
    em_error_prefix(fn);
    return -1;
  }
  if (lo != lo || hi != hi)
    return em_error("%s: expected probabilities in [0, 1], got NaN", fn);
  if (!(lo >= 0 && hi <= 1))
    return em_error("%s: expected probabilities in [0, 1], got values from %g to %g", fn, lo, hi);
  return 0;
}

/* Each element is 1 with probability p[i]: a float64 uniform u (one per element, row-major)
 * compared with p, so the draw uses the stream like rand(p.shape, float64). */
em_tensor *em_bernoulli(const em_tensor *p) {
  const char *fn = "bernoulli";
  if (check_float_tensor(fn, p) != 0 || check_probabilities(fn, p) != 0) return NULL;
  em_tensor *u = new_filled(fn, p->ndim, p->sizes, EM_FLOAT64, p->device_id, EM_RANDOM_UNIFORM,
                            0.0, 1.0);
  em_tensor *mask = u ? em_binary(EM_LT, u, p) : NULL;
  em_tensor *out = mask ? em_to_dtype(mask, (em_dtype)p->dtype_id) : NULL;
  if (out == NULL) em_error_prefix(fn);
  em_release(u);
  em_release(mask);
  return out;
}
