/*
 * sort.c: the CPU sort kernel: a stable sort of every slice along one dimension, giving the
 * sorted values and the int64 positions they came from.
 *
 * Each slice is loaded into a scratch array of (key, position) pairs, sorted by a bottom-up
 * merge sort (insertion sort on short runs first), and written back: the values are copied from
 * x at the sorted positions, so they keep their exact bits (-0.0, NaN payloads). Keys are
 * doubles, which hold every value of every dtype exactly except int64, whose keys stay int64.
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

/* Sorts slice s with the scratch buffer (2 * n pairs of 16 bytes). */
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
  if (x->dtype_id == EM_INT64) {
    pair_i *a = scratch, *tmp = a + n;
    for (int64_t j = 0; j < n; j++) a[j] = (pair_i){*(const int64_t *)(xp + j * xs), j};
    pair_i *r = job->descending ? sort_i_desc(a, tmp, n) : sort_i_asc(a, tmp, n);
    for (int64_t j = 0; j < n; j++) {
      memcpy(vp + j * vs, xp + r[j].i * xs, es);
      *(int64_t *)(ip + j * is) = r[j].i;
    }
  } else {
    pair_f *a = scratch, *tmp = a + n;
    em_dtype dt = (em_dtype)x->dtype_id;
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
