/*
 * sort.c: the CPU sort kernel: a stable sort of every slice along one dimension, giving the
 * sorted values and the int64 positions they came from.
 *
 * Each slice is loaded into scratch arrays of keys and positions, sorted, and written back: the
 * values are copied from x at the sorted positions, so they keep their exact bits (-0.0, NaN
 * payloads). Short slices use a bottom-up merge sort (insertion sort on short runs first) on
 * (key, position) pairs, keys as doubles (exact for every dtype but int64, whose keys stay
 * int64). Long slices use an LSD radix sort on order-preserving unsigned keys.
 *
 * Order: NaN sorts as the largest value (last ascending, first descending), as in PyTorch.
 * Equal keys keep their input order in both directions: the merge takes from the right run
 * only when its key must strictly come first.
 *
 * Many slices are spread over threads, one scratch buffer per thread.
 */
#include <omp.h>
#include <stdlib.h>

#include "cpu.h"

typedef struct pair_f { double k; int64_t i; } pair_f;
typedef struct pair_i { int64_t k; int64_t i; } pair_i;

/* "a comes strictly before b": ascending puts NaN last; descending is the mirror image. */
#define BEFORE_F_ASC(a, b) ((a).k < (b).k || ((b).k != (b).k && (a).k == (a).k))
#define BEFORE_F_DESC(a, b) BEFORE_F_ASC(b, a)
#define BEFORE_I_ASC(a, b) ((a).k < (b).k)
#define BEFORE_I_DESC(a, b) ((b).k < (a).k)

enum { RUN = 32 };

/* One stable merge sort per (key type, direction). Sorts a[0..n) using tmp[0..n); returns the
 * array that holds the result (a or tmp). */
#define MERGE_SORT(NAME, P, BEFORE)                                                           \
  static P *NAME(P *a, P *tmp, int64_t n) {                                                   \
    for (int64_t lo = 0; lo < n; lo += RUN) { /* insertion sort of each short run */          \
      int64_t hi = lo + RUN < n ? lo + RUN : n;                                               \
      for (int64_t i = lo + 1; i < hi; i++) {                                                 \
        P v = a[i];                                                                           \
        int64_t j = i;                                                                        \
        while (j > lo && BEFORE(v, a[j - 1])) {                                               \
          a[j] = a[j - 1];                                                                    \
          j--;                                                                                \
        }                                                                                     \
        a[j] = v;                                                                             \
      }                                                                                       \
    }                                                                                         \
    P *src = a, *dst = tmp;                                                                   \
    for (int64_t width = RUN; width < n; width *= 2) {                                        \
      for (int64_t lo = 0; lo < n; lo += 2 * width) {                                         \
        int64_t mid = lo + width < n ? lo + width : n;                                        \
        int64_t hi = lo + 2 * width < n ? lo + 2 * width : n;                                 \
        int64_t i = lo, j = mid, k = lo;                                                      \
        while (i < mid && j < hi) dst[k++] = BEFORE(src[j], src[i]) ? src[j++] : src[i++];    \
        while (i < mid) dst[k++] = src[i++];                                                  \
        while (j < hi) dst[k++] = src[j++];                                                   \
      }                                                                                       \
      P *t = src;                                                                             \
      src = dst;                                                                              \
      dst = t;                                                                                \
    }                                                                                         \
    return src;                                                                               \
  }
MERGE_SORT(sort_f_asc, pair_f, BEFORE_F_ASC)
MERGE_SORT(sort_f_desc, pair_f, BEFORE_F_DESC)
MERGE_SORT(sort_i_asc, pair_i, BEFORE_I_ASC)
MERGE_SORT(sort_i_desc, pair_i, BEFORE_I_DESC)

/* ---- radix sort for long slices -------------------------------------------------------------
 * Keys are mapped to unsigned integers whose order is the sort order: floats by flipping the
 * sign bit (and every bit of negatives), with -0.0 made +0.0 so the two tie, and every NaN made
 * the largest key so NaNs tie with each other; signed integers by flipping the sign bit. A
 * descending sort complements the keys, so it stays stable (ties keep their input order) rather
 * than being an ascending sort reversed. LSD radix sort is stable, one byte per pass; passes
 * where every key has the same byte are skipped (small integers need one or two). */

enum { RADIX_MIN = 256 };   /* shorter slices go to the merge sort */

static uint32_t key_f32(float f) {
  if (f != f) return UINT32_MAX;
  if (f == 0) f = 0; /* -0.0 -> +0.0 */
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return (u & 0x80000000u) ? ~u : u | 0x80000000u;
}

static uint64_t key_f64(double f) {
  if (f != f) return UINT64_MAX;
  if (f == 0) f = 0;
  uint64_t u;
  memcpy(&u, &f, sizeof u);
  return (u & 0x8000000000000000ull) ? ~u : u | 0x8000000000000000ull;
}

/* The order-preserving key of one element of dtype d (32 bits for every dtype but the 64-bit
 * ones). */
static uint32_t key32(const char *p, em_dtype d) {
  switch (d) {
  case EM_FLOAT32: return key_f32(*(const float *)p);
  case EM_FLOAT16: return key_f32(em_half_to_float(*(const uint16_t *)p));
  case EM_BFLOAT16: return key_f32(em_bf16_to_float(*(const uint16_t *)p));
  case EM_INT8: return (uint32_t)(int32_t)*(const int8_t *)p ^ 0x80000000u;
  case EM_INT16: return (uint32_t)(int32_t)*(const int16_t *)p ^ 0x80000000u;
  case EM_INT32: return (uint32_t)*(const int32_t *)p ^ 0x80000000u;
  case EM_BOOL: return *(const uint8_t *)p != 0;
  default: return *(const uint8_t *)p; /* uint8 */
  }
}

static uint64_t key64(const char *p, em_dtype d) {
  if (d == EM_FLOAT64) return key_f64(*(const double *)p);
  return (uint64_t)*(const int64_t *)p ^ 0x8000000000000000ull; /* int64 */
}

/* Sorts key[0..n) carrying pos along, using tkey/tpos as the other buffer; returns the buffer
 * pair (0: key/pos, 1: tkey/tpos) that holds the result. */
#define RADIX_SORT(NAME, K)                                                                   \
  static int NAME(K *key, int64_t *pos, K *tkey, int64_t *tpos, int64_t n) {                  \
    enum { BYTES = sizeof(K) };                                                               \
    int64_t count[sizeof(K)][256];                                                            \
    memset(count, 0, sizeof count);                                                           \
    for (int64_t i = 0; i < n; i++)                                                           \
      for (int b = 0; b < BYTES; b++) count[b][(key[i] >> (8 * b)) & 255]++;                  \
    K *sk = key, *dk = tkey;                                                                  \
    int64_t *sp = pos, *dp = tpos;                                                            \
    int where = 0;                                                                            \
    for (int b = 0; b < BYTES; b++) {                                                         \
      int64_t *c = count[b];                                                                  \
      if (c[(sk[0] >> (8 * b)) & 255] == n) continue; /* one byte value: nothing moves */    \
      int64_t sum = 0;                                                                        \
      for (int d = 0; d < 256; d++) {                                                         \
        int64_t t = c[d];                                                                     \
        c[d] = sum;                                                                           \
        sum += t;                                                                             \
      }                                                                                       \
      for (int64_t i = 0; i < n; i++) {                                                       \
        int64_t o = c[(sk[i] >> (8 * b)) & 255]++;                                            \
        dk[o] = sk[i];                                                                        \
        dp[o] = sp[i];                                                                        \
      }                                                                                       \
      K *tk = sk; sk = dk; dk = tk;                                                           \
      int64_t *tp = sp; sp = dp; dp = tp;                                                     \
      where ^= 1;                                                                             \
    }                                                                                         \
    return where;                                                                             \
  }
RADIX_SORT(radix_sort32, uint32_t)
RADIX_SORT(radix_sort64, uint64_t)

/* ---- one slice ------------------------------------------------------------------------------ */

typedef struct slice_job {
  const em_tensor *x, *values, *indices;
  int dim;
  int descending;
  int64_t n;          /* slice length */
  size_t esize;
} slice_job;

/* Byte offsets of slice s's first element in x, values and indices: s is decomposed over every
 * dimension but dim, in row-major order. */
static void slice_offsets(const slice_job *job, int64_t s, int64_t off[3]) {
  const em_tensor *ts[3] = {job->x, job->values, job->indices};
  off[0] = off[1] = off[2] = 0;
  for (int d = job->x->ndim - 1; d >= 0; d--) {
    if (d == job->dim) continue;
    int64_t c = s % job->x->sizes[d];
    s /= job->x->sizes[d];
    for (int k = 0; k < 3; k++)
      off[k] += c * ts[k]->strides[d] * (int64_t)em_dtypes[ts[k]->dtype_id].size;
  }
}

static double load_key(const char *p, em_dtype d) {
  switch (d) {
  case EM_FLOAT32: return em_ld_f32(p);
  case EM_FLOAT64: return em_ld_f64(p);
  case EM_FLOAT16: return em_ld_f16(p);
  case EM_BFLOAT16: return em_ld_bf16(p);
  case EM_INT8: return em_ld_i8(p);
  case EM_UINT8: return em_ld_u8(p);
  case EM_INT16: return em_ld_i16(p);
  case EM_INT32: return em_ld_i32(p);
  default: return em_ld_b8(p);
  }
}

/* Sorts slice s with the scratch buffer (32 bytes per element: 2 * n pairs of 16 bytes for the
 * merge sort, or 2 * n keys and 2 * n positions of 8 bytes for the radix sort). */
static void sort_slice(const slice_job *job, int64_t s, void *scratch) {
  int64_t off[3];
  slice_offsets(job, s, off);
  const em_tensor *x = job->x;
  const char *xp = em_cpu_ptr(x) + off[0];
  char *vp = em_cpu_ptr(job->values) + off[1];
  char *ip = em_cpu_ptr(job->indices) + off[2];
  int64_t xs = x->strides[job->dim] * (int64_t)job->esize;
  int64_t vs = job->values->strides[job->dim] * (int64_t)job->esize;
  int64_t is = job->indices->strides[job->dim] * (int64_t)sizeof(int64_t);
  int64_t n = job->n;
  size_t es = job->esize;
  em_dtype dt = (em_dtype)x->dtype_id;
  if (n >= RADIX_MIN) {
    /* scratch: two key buffers of n 8-byte slots, then two position buffers */
    int64_t *pos = (int64_t *)scratch + 2 * n, *tpos = pos + n;
    for (int64_t j = 0; j < n; j++) pos[j] = j;
    const int64_t *order;
    if (es == 8) {
      uint64_t *key = scratch, *tkey = key + n;
      uint64_t flip = job->descending ? UINT64_MAX : 0;
      for (int64_t j = 0; j < n; j++) key[j] = key64(xp + j * xs, dt) ^ flip;
      order = radix_sort64(key, pos, tkey, tpos, n) ? tpos : pos;
    } else {
      uint32_t *key = scratch, *tkey = key + n;
      uint32_t flip = job->descending ? UINT32_MAX : 0;
      for (int64_t j = 0; j < n; j++) key[j] = key32(xp + j * xs, dt) ^ flip;
      order = radix_sort32(key, pos, tkey, tpos, n) ? tpos : pos;
    }
    for (int64_t j = 0; j < n; j++) {
      memcpy(vp + j * vs, xp + order[j] * xs, es);
      *(int64_t *)(ip + j * is) = order[j];
    }
    return;
  }
  if (dt == EM_INT64) {
    pair_i *a = scratch, *tmp = a + n;
    for (int64_t j = 0; j < n; j++) a[j] = (pair_i){*(const int64_t *)(xp + j * xs), j};
    pair_i *r = job->descending ? sort_i_desc(a, tmp, n) : sort_i_asc(a, tmp, n);
    for (int64_t j = 0; j < n; j++) {
      memcpy(vp + j * vs, xp + r[j].i * xs, es);
      *(int64_t *)(ip + j * is) = r[j].i;
    }
  } else {
    pair_f *a = scratch, *tmp = a + n;
    for (int64_t j = 0; j < n; j++) a[j] = (pair_f){load_key(xp + j * xs, dt), j};
    pair_f *r = job->descending ? sort_f_desc(a, tmp, n) : sort_f_asc(a, tmp, n);
    for (int64_t j = 0; j < n; j++) {
      memcpy(vp + j * vs, xp + r[j].i * xs, es);
      *(int64_t *)(ip + j * is) = r[j].i;
    }
  }
}

int em_cpu_sort(em_tensor *values, em_tensor *indices, const em_tensor *x, int dim,
                int descending) {
  /* values and indices have x's shape; x has at least one dimension and one element. */
  slice_job job = {x, values, indices, dim, descending, x->sizes[dim],
                   em_dtypes[x->dtype_id].size};
  int64_t slices = em_numel(x) / job.n;
  size_t scratch_bytes = 2 * (size_t)job.n * sizeof(pair_f);
  int threads = em_threads_for(em_numel(x));
  if (threads > slices) threads = (int)slices;
  if (threads <= 1) {
    void *scratch = malloc(scratch_bytes);
    if (scratch == NULL)
      return em_error_kind_set(EM_ERR_OOM, "sort: out of memory for a scratch buffer of %zu "
                               "bytes", scratch_bytes);
    for (int64_t s = 0; s < slices; s++) sort_slice(&job, s, scratch);
    free(scratch);
    return 0;
  }
  /* Errors are thread-local, so a worker that cannot allocate only raises a flag. */
  int failed = 0;
#pragma omp parallel num_threads(threads)
  {
    void *scratch = malloc(scratch_bytes);
    if (scratch == NULL) {
#pragma omp atomic write
      failed = 1;
    }
#pragma omp for schedule(dynamic, 16)
    for (int64_t s = 0; s < slices; s++)
      if (scratch != NULL) sort_slice(&job, s, scratch);
    free(scratch);
  }
  if (failed)
    return em_error_kind_set(EM_ERR_OOM, "sort: out of memory for a scratch buffer of %zu bytes",
                             scratch_bytes);
  return 0;
}
