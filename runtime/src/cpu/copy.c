/*
 * copy.c: CPU copies with casts, fills, and ranges. A cast is one generated loop per
 * (source, destination) dtype pair; a same-dtype copy moves bytes.
 */
#include "cpu.h"
#include "half_convert.h"
#include <math.h>

/* ---- same-dtype copies ---- */
#define COPY_SAME(NAME, T)                                                                    \
  static void NAME(char **p, const int64_t *s, int64_t n, void *ctx) {                       \
    (void)ctx;                                                                                \
    if (s[0] == (int64_t)sizeof(T) && s[1] == (int64_t)sizeof(T)) {                           \
      memmove(p[0], p[1], (size_t)n * sizeof(T));                                             \
      return;                                                                                 \
    }                                                                                         \
    for (int64_t i = 0; i < n; i++) *(T *)(p[0] + i * s[0]) = *(const T *)(p[1] + i * s[1]); \
  }
COPY_SAME(copy_1, uint8_t)
COPY_SAME(copy_2, uint16_t)
COPY_SAME(copy_4, uint32_t)
COPY_SAME(copy_8, uint64_t)
/* Any other element size (a quantized block): the op layer copies blocks as bytes, but a
 * kernel handed one still moves whole elements rather than reading past a table. */
static void copy_n(char **p, const int64_t *s, int64_t n, void *ctx) {
  size_t size = *(const size_t *)ctx;
  for (int64_t i = 0; i < n; i++) memmove(p[0] + i * s[0], p[1] + i * s[1], size);
}

/* ---- casts: one loop per pair ---- */
#define EM_CPU_DTYPES_INNER(X)                                                                \
  X(EM_FLOAT32, f32, float) X(EM_FLOAT64, f64, double) X(EM_FLOAT16, f16, uint16_t)           \
  X(EM_BFLOAT16, bf16, uint16_t) X(EM_INT8, i8, int8_t) X(EM_UINT8, u8, uint8_t)              \
  X(EM_INT16, i16, int16_t) X(EM_INT32, i32, int32_t) X(EM_INT64, i64, int64_t)              \
  X(EM_BOOL, b8, uint8_t)

/* float32 <-> float16/bfloat16 over contiguous runs: the bulk converters (half_convert.c),
 * which casts under autocast use on every step. Other pairs and strided runs: the loop. */
static bool cast_bulk(em_dtype dd, em_dtype sd, char **p, const int64_t *s, int64_t n) {
  if (s[0] != (int64_t)em_dtypes[dd].size || s[1] != (int64_t)em_dtypes[sd].size) return false;
  if (sd == EM_FLOAT32 && dd == EM_BFLOAT16) em_cvt_f32_to_bf16((uint16_t *)p[0], (const float *)p[1], n);
  else if (sd == EM_FLOAT32 && dd == EM_FLOAT16) em_cvt_f32_to_f16((uint16_t *)p[0], (const float *)p[1], n);
  else if (sd == EM_BFLOAT16 && dd == EM_FLOAT32) em_cvt_bf16_to_f32((float *)p[0], (const uint16_t *)p[1], n);
  else if (sd == EM_FLOAT16 && dd == EM_FLOAT32) em_cvt_f16_to_f32((float *)p[0], (const uint16_t *)p[1], n);
  else return false;
  return true;
}

#define CAST_FN(DE, DN, DT, SE, SN, ST)                                                       \
  static void cast_##SN##_to_##DN(char **p, const int64_t *s, int64_t n, void *ctx) {         \
    (void)ctx;                                                                                \
    if ((DE == EM_FLOAT32 || SE == EM_FLOAT32) && cast_bulk(DE, SE, p, s, n)) return;         \
    for (int64_t i = 0; i < n; i++) em_st_##DN(p[0] + i * s[0], em_ld_##SN(p[1] + i * s[1])); \
  }
#define CAST_FOR_DST(DE, DN, DT) EM_CPU_DTYPES_INNER(CAST_FN_SRC_##DN)
/* Expanding the pair table needs one helper per destination (the preprocessor will not
 * re-expand a list macro inside itself). */
#define CAST_FN_SRC_f32(SE, SN, ST) CAST_FN(EM_FLOAT32, f32, float, SE, SN, ST)
#define CAST_FN_SRC_f64(SE, SN, ST) CAST_FN(EM_FLOAT64, f64, double, SE, SN, ST)
#define CAST_FN_SRC_f16(SE, SN, ST) CAST_FN(EM_FLOAT16, f16, uint16_t, SE, SN, ST)
#define CAST_FN_SRC_bf16(SE, SN, ST) CAST_FN(EM_BFLOAT16, bf16, uint16_t, SE, SN, ST)
#define CAST_FN_SRC_i8(SE, SN, ST) CAST_FN(EM_INT8, i8, int8_t, SE, SN, ST)
#define CAST_FN_SRC_u8(SE, SN, ST) CAST_FN(EM_UINT8, u8, uint8_t, SE, SN, ST)
#define CAST_FN_SRC_i16(SE, SN, ST) CAST_FN(EM_INT16, i16, int16_t, SE, SN, ST)
#define CAST_FN_SRC_i32(SE, SN, ST) CAST_FN(EM_INT32, i32, int32_t, SE, SN, ST)
#define CAST_FN_SRC_i64(SE, SN, ST) CAST_FN(EM_INT64, i64, int64_t, SE, SN, ST)
#define CAST_FN_SRC_b8(SE, SN, ST) CAST_FN(EM_BOOL, b8, uint8_t, SE, SN, ST)
EM_CPU_DTYPES(CAST_FOR_DST)

#define CAST_ENTRY(DE, DN, DT, SE, SN, ST) [DE][SE] = cast_##SN##_to_##DN,
#define CAST_ROW(DE, DN, DT) EM_CPU_DTYPES_INNER(CAST_ENTRY_SRC_##DN)
#define CAST_ENTRY_SRC_f32(SE, SN, ST) CAST_ENTRY(EM_FLOAT32, f32, float, SE, SN, ST)
#define CAST_ENTRY_SRC_f64(SE, SN, ST) CAST_ENTRY(EM_FLOAT64, f64, double, SE, SN, ST)
#define CAST_ENTRY_SRC_f16(SE, SN, ST) CAST_ENTRY(EM_FLOAT16, f16, uint16_t, SE, SN, ST)
#define CAST_ENTRY_SRC_bf16(SE, SN, ST) CAST_ENTRY(EM_BFLOAT16, bf16, uint16_t, SE, SN, ST)
#define CAST_ENTRY_SRC_i8(SE, SN, ST) CAST_ENTRY(EM_INT8, i8, int8_t, SE, SN, ST)
#define CAST_ENTRY_SRC_u8(SE, SN, ST) CAST_ENTRY(EM_UINT8, u8, uint8_t, SE, SN, ST)
#define CAST_ENTRY_SRC_i16(SE, SN, ST) CAST_ENTRY(EM_INT16, i16, int16_t, SE, SN, ST)
#define CAST_ENTRY_SRC_i32(SE, SN, ST) CAST_ENTRY(EM_INT32, i32, int32_t, SE, SN, ST)
#define CAST_ENTRY_SRC_i64(SE, SN, ST) CAST_ENTRY(EM_INT64, i64, int64_t, SE, SN, ST)
#define CAST_ENTRY_SRC_b8(SE, SN, ST) CAST_ENTRY(EM_BOOL, b8, uint8_t, SE, SN, ST)
static const em_cpu_loop cast_table[EM_NUM_DTYPES][EM_NUM_DTYPES] = {EM_CPU_DTYPES(CAST_ROW)};

/* An exact int64 path: going through double would round values beyond 2^53. */
static void cast_int_to_int(char **p, const int64_t *s, int64_t n, void *ctx) {
  const em_dtype *d = ctx; /* d[0] destination, d[1] source */
  for (int64_t i = 0; i < n; i++) {
    int64_t v = em_load_as_int64(p[1] + i * s[1], d[1]);
    char *o = p[0] + i * s[0];
    switch (d[0]) {
    case EM_INT8: *(int8_t *)o = (int8_t)v; break;
    case EM_UINT8: *(uint8_t *)o = (uint8_t)v; break;
    case EM_INT16: *(int16_t *)o = (int16_t)v; break;
    case EM_INT32: *(int32_t *)o = (int32_t)v; break;
    case EM_INT64: *(int64_t *)o = v; break;
    default: *(uint8_t *)o = v != 0; break;
    }
  }
}

static bool is_integral(em_dtype d) { return !em_dtypes[d].is_float; }

/* A contiguous [rows, cols] destination from a column-major source (a transposed matrix): the
 * element loop would stride through memory by a whole column per element, so copy 32x32
 * tiles instead, each of which stays in cache. */
#define TRANSPOSE_TILE(NAME, T)                                                               \
  static void NAME(char *dst, const char *src, int64_t rows, int64_t cols, int64_t ld) {    \
    enum { B = 32 };                                                                          \
    T *o = (T *)dst;                                                                          \
    const T *in = (const T *)src;                                                             \
    _Pragma("omp parallel for if(rows * cols >= EM_PARALLEL_GRAIN * 4) schedule(static)")   \
    for (int64_t i0 = 0; i0 < rows; i0 += B)                                                 \
      for (int64_t j0 = 0; j0 < cols; j0 += B) {                                              \
        int64_t i1 = i0 + B < rows ? i0 + B : rows, j1 = j0 + B < cols ? j0 + B : cols;      \
        for (int64_t i = i0; i < i1; i++)                                                     \
          for (int64_t j = j0; j < j1; j++) o[i * cols + j] = in[j * ld + i];                 \
      }                                                                                       \
  }
TRANSPOSE_TILE(transpose_4, uint32_t)
TRANSPOSE_TILE(transpose_8, uint64_t)

static bool copy_transposed(em_tensor *dst, const em_tensor *src) {
  size_t es = em_dtypes[dst->dtype_id].size;
  if (dst->ndim != 2 || src->ndim != 2 || (es != 4 && es != 8) || !em_is_contiguous(dst))
    return false;
  int64_t rows = dst->sizes[0], cols = dst->sizes[1];
  if (rows < 32 || cols < 32 || src->strides[0] != 1 || src->strides[1] < rows) return false;
  if (es == 4) transpose_4(em_cpu_ptr(dst), em_cpu_ptr(src), rows, cols, src->strides[1]);
  else transpose_8(em_cpu_ptr(dst), em_cpu_ptr(src), rows, cols, src->strides[1]);
  return true;
}

int em_cpu_copy(em_tensor *dst, const em_tensor *src) {
  const em_tensor *ts[2] = {dst, src};
  em_dtype dd = (em_dtype)dst->dtype_id, sd = (em_dtype)src->dtype_id;
  if (dd == sd && copy_transposed(dst, src)) return 0;
  if (dd == sd) {
    static const em_cpu_loop by_size[9] = {NULL, copy_1, copy_2, NULL, copy_4,
                                           NULL, NULL,   NULL,   copy_8};
    size_t size = em_dtypes[dd].size;
    if (size < 9 && by_size[size]) em_cpu_for_each(2, ts, by_size[size], NULL);
    else em_cpu_for_each(2, ts, copy_n, &size);
  } else if (is_integral(dd) && is_integral(sd) && (dd == EM_INT64 || sd == EM_INT64)) {
    em_dtype pair[2] = {dd, sd};
    em_cpu_for_each(2, ts, cast_int_to_int, pair);
  } else {
    em_cpu_for_each(2, ts, cast_table[dd][sd], NULL);
  }
  return 0;
}

/* ---- fill: replicate one element's bytes ---- */
static void fill_loop(char **p, const int64_t *s, int64_t n, void *ctx) {
  const uint64_t *pattern = ctx;
  size_t size = (size_t)pattern[1];
  if (size == 4) {
    uint32_t v = (uint32_t)pattern[0];
    if (s[0] == 4) {
      uint32_t *o = (uint32_t *)p[0];
      for (int64_t i = 0; i < n; i++) o[i] = v;
      return;
    }
  }
  for (int64_t i = 0; i < n; i++) memcpy(p[0] + i * s[0], pattern, size);
}

int em_cpu_fill(em_tensor *dst, double value) {
  uint64_t pattern[2] = {0, em_dtypes[dst->dtype_id].size};
  em_store_from_double(pattern, (em_dtype)dst->dtype_id, value);
  const em_tensor *ts[1] = {dst};
  em_cpu_for_each(1, ts, fill_loop, pattern);
  return 0;
}

/* ---- ranges ---- */
int em_cpu_arange(em_tensor *out, double start, double step) {
  char *o = em_cpu_ptr(out);
  size_t es = em_dtypes[out->dtype_id].size;
  for (int64_t i = 0; i < out->sizes[0]; i++)
    em_store_from_double(o + (size_t)i * es, (em_dtype)out->dtype_id, start + (double)i * step);
  return 0;
}

int em_cpu_linspace(em_tensor *out, double start, double end) {
  char *o = em_cpu_ptr(out);
  int64_t n = out->sizes[0];
  size_t es = em_dtypes[out->dtype_id].size;
  double step = n > 1 ? (end - start) / (double)(n - 1) : 0;
  /* The first half counts up from start, the second down from end, so both ends are exact.
   * Each point is one fused multiply-add (one rounding), which is also what PyTorch's compiled
   * formula gives, so integer dtypes truncate the same values. */
  for (int64_t i = 0; i < n; i++) {
    double v = i < n / 2 ? fma(step, (double)i, start) : fma(-step, (double)(n - 1 - i), end);
    em_store_from_double(o + (size_t)i * es, (em_dtype)out->dtype_id, v);
  }
  return 0;
}
