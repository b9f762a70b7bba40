/*
 * index.c: CPU kernels for indexing along one dimension: index_select, gather, scatter (assign
 * or accumulate), index_put (index_copy / index_add / index_fill) and nonzero.
 *
 * Index tensors arrive as int64, 0-based and already bounds-checked by the op definitions
 * (ops/index.c), which also narrow every operand to the shape the kernel walks.
 *
 * The kernels share one shape of loop. Every dimension but `dim` forms the "slice"; the slice
 * positions are walked with the shared iterator (coalesced, as runs of the innermost slice
 * dimension), and at each run the kernel loops along `dim`. A thread therefore owns whole lines
 * along `dim`: scatters and index_put with repeated indices never race, and the result is the
 * same on any number of threads (the last repeated index wins). index_select and gather write
 * distinct output elements for distinct positions along `dim`, so when the slice is too small
 * to keep the threads busy they split the `dim` range instead.
 */
#include <omp.h>
#include <stdlib.h>

#include "cpu.h"

/* ---- element runs: dst[k*ds] = src[k*ss] or dst[k*ds] += alpha * src[k*ss], k < n ---------- */

typedef struct alpha_val {
  double f;       /* for floating dtypes */
  int64_t i;      /* for integers (the definition has checked it is integral) */
} alpha_val;

typedef void (*run_fn)(char *d, int64_t ds, const char *s, int64_t ss, int64_t n,
                       const alpha_val *a);

#define COPY_RUN(NAME, T)                                                                     \
  static void NAME(char *d, int64_t ds, const char *s, int64_t ss, int64_t n,                 \
                   const alpha_val *a) {                                                      \
    (void)a;                                                                                  \
    if (ds == (int64_t)sizeof(T) && ss == (int64_t)sizeof(T)) {                               \
      memcpy(d, s, (size_t)n * sizeof(T));                                                    \
      return;                                                                                 \
    }                                                                                         \
    for (int64_t k = 0; k < n; k++) *(T *)(d + k * ds) = *(const T *)(s + k * ss);           \
  }
COPY_RUN(copy_run_1, uint8_t)
COPY_RUN(copy_run_2, uint16_t)
COPY_RUN(copy_run_4, uint32_t)
COPY_RUN(copy_run_8, uint64_t)

static run_fn copy_run_for(size_t esize) {
  switch (esize) {
  case 1: return copy_run_1;
  case 2: return copy_run_2;
  case 4: return copy_run_4;
  default: return copy_run_8;
  }
}

/* Floating adds compute in the element type (float for float32, through float for the 16-bit
 * types), as PyTorch does. */
static void add_run_f32(char *d, int64_t ds, const char *s, int64_t ss, int64_t n,
                        const alpha_val *a) {
  const float alpha = (float)a->f;
  for (int64_t k = 0; k < n; k++) *(float *)(d + k * ds) += alpha * *(const float *)(s + k * ss);
}

static void add_run_f64(char *d, int64_t ds, const char *s, int64_t ss, int64_t n,
                        const alpha_val *a) {
  for (int64_t k = 0; k < n; k++)
    *(double *)(d + k * ds) += a->f * *(const double *)(s + k * ss);
}

static void add_run_f16(char *d, int64_t ds, const char *s, int64_t ss, int64_t n,
                        const alpha_val *a) {
  const float alpha = (float)a->f;
  for (int64_t k = 0; k < n; k++) {
    uint16_t *o = (uint16_t *)(d + k * ds);
    float v = em_half_to_float(*o) + alpha * em_half_to_float(*(const uint16_t *)(s + k * ss));
    *o = em_float_to_half(v);
  }
}

static void add_run_bf16(char *d, int64_t ds, const char *s, int64_t ss, int64_t n,
                         const alpha_val *a) {
  const float alpha = (float)a->f;
  for (int64_t k = 0; k < n; k++) {
    uint16_t *o = (uint16_t *)(d + k * ds);
    float v = em_bf16_to_float(*o) + alpha * em_bf16_to_float(*(const uint16_t *)(s + k * ss));
    *o = em_float_to_bf16(v);
  }
}

/* Integers wrap around like C's unsigned arithmetic (signed overflow would be undefined). */
#define INT_ADD_RUN(NAME, T)                                                                  \
  static void NAME(char *d, int64_t ds, const char *s, int64_t ss, int64_t n,                 \
                   const alpha_val *a) {                                                      \
    const uint64_t alpha = (uint64_t)a->i;                                                    \
    for (int64_t k = 0; k < n; k++) {                                                         \
      T *o = (T *)(d + k * ds);                                                               \
      int64_t sv = (int64_t)*(const T *)(s + k * ss);                                         \
      *o = (T)((uint64_t)(int64_t)*o + alpha * (uint64_t)sv);                                 \
    }                                                                                         \
  }
INT_ADD_RUN(add_run_i8, int8_t)
INT_ADD_RUN(add_run_u8, uint8_t)
INT_ADD_RUN(add_run_i16, int16_t)
INT_ADD_RUN(add_run_i32, int32_t)
INT_ADD_RUN(add_run_i64, int64_t)

/* bool + bool is logical or, as in PyTorch. */
static void add_run_b8(char *d, int64_t ds, const char *s, int64_t ss, int64_t n,
                       const alpha_val *a) {
  if (a->i == 0) return;
  for (int64_t k = 0; k < n; k++) {
    uint8_t *o = (uint8_t *)(d + k * ds);
    *o = (uint8_t)(*o != 0 || *(const uint8_t *)(s + k * ss) != 0);
  }
}

#define ADD_ENTRY(E, N, T) [E] = add_run_##N,
static const run_fn add_runs[EM_NUM_DTYPES] = {EM_CPU_DTYPES(ADD_ENTRY)};

static run_fn pick_run(const em_tensor *dst, int accumulate) {
  return accumulate ? add_runs[dst->dtype_id] : copy_run_for(em_dtypes[dst->dtype_id].size);
}

/* ---- slice views ---------------------------------------------------------------------------- */

/* A stack header for t without dimension `dim` (the element at index 0 along it): the slice
 * the iterator walks. Its storage is t's; it must not outlive t. */
static void drop_dim(em_tensor *v, const em_tensor *t, int dim) {
  em_header_copy(v, t);
  v->grad_meta = NULL;
  v->ndim = t->ndim - 1;
  for (int i = dim; i < t->ndim - 1; i++) {
    v->sizes[i] = t->sizes[i + 1];
    v->strides[i] = t->strides[i + 1];
  }
}

static int64_t byte_stride(const em_tensor *t, int dim) {
  return t->strides[dim] * (int64_t)em_dtypes[t->dtype_id].size;
}

/* Threads for work that splits along dim: only when the slice alone would not use them. */
static int dim_split_threads(int64_t slice_numel, int64_t n) {
  int threads = em_threads_for(slice_numel * n);
  if (threads <= 1 || em_threads_for(slice_numel) >= threads) return 1;
  return n < threads ? (int)n : threads;
}

/* ---- loop contexts ---------------------------------------------------------------------- */

typedef struct select_ctx {
  int64_t begin, end;         /* range of i */
  const int64_t *index;
  int64_t out_step, x_step;   /* bytes along dim */
  run_fn run;
} select_ctx;

typedef struct gather_ctx {
  int64_t begin, end;   /* range of j */
  int64_t out_step, index_step, x_step;
  run_fn run;
} gather_ctx;

/* The loops that may split along dim, and the one function that does the splitting. */
typedef union split_ctx {
  select_ctx select;
  gather_ctx gather;
} split_ctx;

/* Splits [0, n) into one chunk per thread and runs the serial iterator once per chunk, each
 * with its own copy of the context holding its chunk. */
static void split_along_dim(const split_ctx *ctx, bool is_gather, int64_t n, int threads,
                            int nops, const em_tensor *const *ops, em_cpu_loop loop) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int t = 0; t < threads; t++) {
    split_ctx c = *ctx;
    int64_t begin = n * t / threads, end = n * (t + 1) / threads;
    if (is_gather) {
      c.gather.begin = begin;
      c.gather.end = end;
    } else {
      c.select.begin = begin;
      c.select.end = end;
    }
    if (begin < end) em_cpu_for_each_serial(nops, ops, loop, &c);
  }
}

/* ---- index_select: out.select(dim, i) = x.select(dim, index[i]) ------------------------------ */

/* Which loop goes inside: along dim when the run of positions strides further through memory
 * than dim does (dim is the faster-moving one, e.g. selecting columns), else the run. */
static bool dim_inner(int64_t n, int64_t run_stride, int64_t dim_stride) {
  return n > 1 && llabs(run_stride) > llabs(dim_stride);
}

static void select_loop(char **p, const int64_t *s, int64_t n, void *vctx) {
  const select_ctx *c = vctx;
  if (dim_inner(n, s[1], c->x_step)) {
    for (int64_t k = 0; k < n; k++)
      for (int64_t i = c->begin; i < c->end; i++)
        c->run(p[0] + k * s[0] + i * c->out_step, 0, p[1] + k * s[1] + c->index[i] * c->x_step,
               0, 1, NULL);
    return;
  }
  for (int64_t i = c->begin; i < c->end; i++)
    c->run(p[0] + i * c->out_step, s[0], p[1] + c->index[i] * c->x_step, s[1], n, NULL);
}

int em_cpu_index_select(em_tensor *out, const em_tensor *x, int dim, const em_tensor *index) {
  /* index is contiguous and 1-D (the definition made it so); x and out have the same rank. */
  int64_t n = out->sizes[dim];
  em_tensor out_s, x_s;
  drop_dim(&out_s, out, dim);
  drop_dim(&x_s, x, dim);
  const em_tensor *ops[2] = {&out_s, &x_s};
  split_ctx c = {.select = {0, n, (const int64_t *)em_cpu_ptr(index), byte_stride(out, dim),
                            byte_stride(x, dim), copy_run_for(em_dtypes[out->dtype_id].size)}};
  int threads = dim_split_threads(em_numel(&out_s), n);
  if (threads > 1) {
    split_along_dim(&c, false, n, threads, 2, ops, select_loop);
  } else {
    em_cpu_for_each(2, ops, select_loop, &c);
  }
  return 0;
}

/* ---- gather: out[p, j] = x[p, index[p, j]] ------------------------------------------------- */

static void gather_loop(char **p, const int64_t *s, int64_t n, void *vctx) {
  const gather_ctx *c = vctx;
  if (dim_inner(n, s[2], c->x_step)) {
    for (int64_t k = 0; k < n; k++) {
      char *o = p[0] + k * s[0];
      const char *ix = p[1] + k * s[1], *xp = p[2] + k * s[2];
      for (int64_t j = c->begin; j < c->end; j++) {
        int64_t i = *(const int64_t *)(ix + j * c->index_step);
        c->run(o + j * c->out_step, 0, xp + i * c->x_step, 0, 1, NULL);
      }
    }
    return;
  }
  for (int64_t j = c->begin; j < c->end; j++) {
    char *o = p[0] + j * c->out_step;
    const char *ix = p[1] + j * c->index_step;
    for (int64_t k = 0; k < n; k++) {
      int64_t i = *(const int64_t *)(ix + k * s[1]);
      c->run(o + k * s[0], 0, p[2] + k * s[2] + i * c->x_step, 0, 1, NULL);
    }
  }
}

int em_cpu_gather(em_tensor *out, const em_tensor *x, int dim, const em_tensor *index) {
  /* out and index share a shape; x has it too except along dim. */
  int64_t m = out->sizes[dim];
  em_tensor out_s, index_s, x_s;
  drop_dim(&out_s, out, dim);
  drop_dim(&index_s, index, dim);
  drop_dim(&x_s, x, dim);
  const em_tensor *ops[3] = {&out_s, &index_s, &x_s};
  split_ctx c = {.gather = {0, m, byte_stride(out, dim), byte_stride(index, dim),
                            byte_stride(x, dim), copy_run_for(em_dtypes[out->dtype_id].size)}};
  int threads = dim_split_threads(em_numel(&out_s), m);
  if (threads > 1) {
    split_along_dim(&c, true, m, threads, 3, ops, gather_loop);
  } else {
    em_cpu_for_each(3, ops, gather_loop, &c);
  }
  return 0;
}

/* ---- scatter: x[p, index[p, j]] = src[p, j] (or +=) ----------------------------------------- */

typedef struct scatter_ctx {
  int64_t x_step, index_step, src_step, m;
  run_fn run;
  alpha_val alpha;
} scatter_ctx;

static void scatter_loop(char **p, const int64_t *s, int64_t n, void *vctx) {
  const scatter_ctx *c = vctx;
  /* Each position k owns x's line p[0] + k * s[0]; j runs in order, so the last repeat wins
   * whichever loop is inside. */
  if (dim_inner(n, s[0], c->x_step)) {
    for (int64_t k = 0; k < n; k++) {
      char *xp = p[0] + k * s[0];
      const char *ix = p[1] + k * s[1], *sp = p[2] + k * s[2];
      for (int64_t j = 0; j < c->m; j++) {
        int64_t i = *(const int64_t *)(ix + j * c->index_step);
        c->run(xp + i * c->x_step, 0, sp + j * c->src_step, 0, 1, &c->alpha);
      }
    }
    return;
  }
  for (int64_t j = 0; j < c->m; j++) {
    const char *ix = p[1] + j * c->index_step;
    const char *sp = p[2] + j * c->src_step;
    for (int64_t k = 0; k < n; k++) {
      int64_t i = *(const int64_t *)(ix + k * s[1]);
      c->run(p[0] + k * s[0] + i * c->x_step, 0, sp + k * s[2], 0, 1, &c->alpha);
    }
  }
}

int em_cpu_scatter(em_tensor *x, int dim, const em_tensor *index, const em_tensor *src,
                   int accumulate) {
  /* index and src share a shape; x has it too except along dim (the definition narrowed x). */
  em_tensor x_s, index_s, src_s;
  drop_dim(&x_s, x, dim);
  drop_dim(&index_s, index, dim);
  drop_dim(&src_s, src, dim);
  const em_tensor *ops[3] = {&x_s, &index_s, &src_s};
  scatter_ctx c = {byte_stride(x, dim), byte_stride(index, dim), byte_stride(src, dim),
                   index->sizes[dim], pick_run(x, accumulate), {1.0, 1}};
  em_cpu_for_each(3, ops, scatter_loop, &c);
  return 0;
}

/* ---- index_put: x.select(dim, index[i]) = src.select(dim, i) (or += alpha * ...) ------------ */

typedef struct put_ctx {
  const int64_t *index;
  int64_t n, x_step, src_step;
  run_fn run;
  alpha_val alpha;
} put_ctx;

static void put_loop(char **p, const int64_t *s, int64_t n, void *vctx) {
  const put_ctx *c = vctx;
  if (dim_inner(n, s[0], c->x_step)) {
    for (int64_t k = 0; k < n; k++)
      for (int64_t i = 0; i < c->n; i++)
        c->run(p[0] + k * s[0] + c->index[i] * c->x_step, 0, p[1] + k * s[1] + i * c->src_step,
               0, 1, &c->alpha);
    return;
  }
  for (int64_t i = 0; i < c->n; i++)
    c->run(p[0] + c->index[i] * c->x_step, s[0], p[1] + i * c->src_step, s[1], n, &c->alpha);
}

int em_cpu_index_put(em_tensor *x, int dim, const em_tensor *index, const em_tensor *src,
                     double alpha, int accumulate) {
  /* index is contiguous and 1-D; src is x's shape with index's length along dim. */
  em_tensor x_s, src_s;
  drop_dim(&x_s, x, dim);
  drop_dim(&src_s, src, dim);
  const em_tensor *ops[2] = {&x_s, &src_s};
  put_ctx c = {(const int64_t *)em_cpu_ptr(index), src->sizes[dim], byte_stride(x, dim),
               byte_stride(src, dim), pick_run(x, accumulate), {alpha, em_sat_i64(alpha)}};
  em_cpu_for_each(2, ops, put_loop, &c);
  return 0;
}

/* ---- nonzero: the coordinates of nonzero elements, in row-major order ----------------------- */

static bool is_nonzero(const char *p, em_dtype d) {
  switch (d) {
  case EM_FLOAT32: return *(const float *)p != 0;   /* NaN counts as nonzero, -0.0 as zero */
  case EM_FLOAT64: return *(const double *)p != 0;
  case EM_FLOAT16: case EM_BFLOAT16: return (*(const uint16_t *)p & 0x7fff) != 0;
  case EM_INT16: return *(const int16_t *)p != 0;
  case EM_INT32: return *(const int32_t *)p != 0;
  case EM_INT64: return *(const int64_t *)p != 0;
  default: return *(const uint8_t *)p != 0;
  }
}

/* Walks elements [begin, end) of x in row-major order. With out == NULL it only counts; else it
 * writes each nonzero element's coordinates as a row of out, starting at row `row`, and never
 * past row `limit`. Returns the number found. */
static int64_t nonzero_range(const em_tensor *x, int64_t begin, int64_t end, int64_t *out,
                             int64_t row, int64_t limit) {
  int nd = x->ndim;
  int64_t coord[EM_MAX_DIMS];
  int64_t rest = begin, off = 0;
  for (int d = nd - 1; d >= 0; d--) {
    coord[d] = rest % x->sizes[d];
    rest /= x->sizes[d];
    off += coord[d] * x->strides[d];
  }
  const char *base = em_cpu_ptr(x);
  int64_t esize = (int64_t)em_dtypes[x->dtype_id].size;
  em_dtype dt = (em_dtype)x->dtype_id;
  int64_t found = 0;
  for (int64_t pos = begin; pos < end; pos++) {
    if (is_nonzero(base + off * esize, dt)) {
      if (out != NULL && nd > 0 && row + found < limit)
        memcpy(out + (row + found) * nd, coord, sizeof(int64_t) * (size_t)nd);
      found++;
    }
    for (int d = nd - 1; d >= 0; d--) { /* advance the row-major counter */
      off += x->strides[d];
      if (++coord[d] < x->sizes[d]) break;
      off -= coord[d] * x->strides[d];
      coord[d] = 0;
    }
  }
  return found;
}

int em_cpu_nonzero(em_tensor *out, const em_tensor *x) {
  /* out is [count, ndim], contiguous. Large inputs use two passes: each thread counts its
   * range, then writes at the offset the counts before it give. */
  int64_t numel = em_numel(x), count = out->sizes[0];
  int64_t *o = (int64_t *)em_cpu_ptr(out);
  int threads = em_threads_for(numel);
  int64_t total = 0;
  if (threads <= 1) {
    total = nonzero_range(x, 0, numel, o, 0, count);
  } else {
    int64_t found[64];
    if (threads > 64) threads = 64;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int t = 0; t < threads; t++)
      found[t] = nonzero_range(x, numel * t / threads, numel * (t + 1) / threads, NULL, 0, 0);
    int64_t start[64];
    for (int t = 0; t < threads; t++) {
      start[t] = total;
      total += found[t];
    }
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int t = 0; t < threads; t++)
      nonzero_range(x, numel * t / threads, numel * (t + 1) / threads, o, start[t], count);
  }
  /* The definition counted first; a different total means x changed under us. */
  if (total != count)
    return em_error("nonzero: found %lld nonzero elements, expected %lld (was the tensor "
                    "modified concurrently?)", (long long)total, (long long)count);
  return 0;
}
