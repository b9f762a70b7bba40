/*
 * cpu.h: what the CPU kernels share: the strided elementwise iterator, typed element access,
 * and the kernel entry points that cpu/backend.c puts into the table.
 */
#ifndef EMBER_CPU_H
#define EMBER_CPU_H

#include <math.h>

#include "../backend.h"

enum { EM_ITER_MAX_OPERANDS = 5 };

/* One run of the innermost dimension: ptrs[k] points at operand k's first element, strides[k]
 * is its step in bytes, n the number of elements. */
typedef void (*em_cpu_loop)(char **ptrs, const int64_t *strides, int64_t n, void *ctx);

/* Calls `loop` over every element of n same-shaped tensors (operand 0 is usually the output).
 * Dimensions are coalesced first, so a contiguous tensor is one run; large work is split
 * across threads by element ranges. */
void em_cpu_for_each(int n, const em_tensor *const *ts, em_cpu_loop loop, void *ctx);
/* The same, on one thread: for kernels whose loop keeps state between runs. */
void em_cpu_for_each_serial(int n, const em_tensor *const *ts, em_cpu_loop loop, void *ctx);

static inline char *em_cpu_ptr(const em_tensor *t) {
  return (char *)t->storage->data + t->offset * (int64_t)em_dtypes[t->dtype_id].size;
}

/* The dtype list for X-macros: enum, short name, C storage type. Kernels that generate one
 * function per dtype (or per pair) expand it, so debuggers see real functions. */
#define EM_CPU_DTYPES(X)                                                                      \
  X(EM_FLOAT32, f32, float) X(EM_FLOAT64, f64, double) X(EM_FLOAT16, f16, uint16_t)           \
  X(EM_BFLOAT16, bf16, uint16_t) X(EM_INT8, i8, int8_t) X(EM_UINT8, u8, uint8_t)              \
  X(EM_INT16, i16, int16_t) X(EM_INT32, i32, int32_t) X(EM_INT64, i64, int64_t)              \
  X(EM_BOOL, b8, uint8_t)

/* Float to integer without undefined behaviour: NaN gives 0, out-of-range saturates. */
static inline int64_t em_sat_i64(double v) {
  if (v != v) return 0;
  if (v >= 9.2233720368547758e18) return INT64_MAX;
  if (v <= -9.2233720368547758e18) return INT64_MIN;
  return (int64_t)v;
}

/* Typed loads to double and stores from double. */
static inline double em_ld_f32(const char *p) { return *(const float *)p; }
static inline double em_ld_f64(const char *p) { return *(const double *)p; }
static inline double em_ld_f16(const char *p) { return em_half_to_float(*(const uint16_t *)p); }
static inline double em_ld_bf16(const char *p) { return em_bf16_to_float(*(const uint16_t *)p); }
static inline double em_ld_i8(const char *p) { return *(const int8_t *)p; }
static inline double em_ld_u8(const char *p) { return *(const uint8_t *)p; }
static inline double em_ld_i16(const char *p) { return *(const int16_t *)p; }
static inline double em_ld_i32(const char *p) { return *(const int32_t *)p; }
static inline double em_ld_i64(const char *p) { return (double)*(const int64_t *)p; }
static inline double em_ld_b8(const char *p) { return *(const uint8_t *)p != 0; }

static inline void em_st_f32(char *p, double v) { *(float *)p = (float)v; }
static inline void em_st_f64(char *p, double v) { *(double *)p = v; }
static inline void em_st_f16(char *p, double v) { *(uint16_t *)p = em_float_to_half((float)v); }
static inline void em_st_bf16(char *p, double v) { *(uint16_t *)p = em_float_to_bf16((float)v); }
static inline void em_st_i8(char *p, double v) { *(int8_t *)p = (int8_t)em_sat_i64(v); }
static inline void em_st_u8(char *p, double v) { *(uint8_t *)p = (uint8_t)em_sat_i64(v); }
static inline void em_st_i16(char *p, double v) { *(int16_t *)p = (int16_t)em_sat_i64(v); }
static inline void em_st_i32(char *p, double v) { *(int32_t *)p = (int32_t)em_sat_i64(v); }
static inline void em_st_i64(char *p, double v) { *(int64_t *)p = em_sat_i64(v); }
static inline void em_st_b8(char *p, double v) { *(uint8_t *)p = v != 0; }

/* Kernel entry points, one file per family. Strong references on purpose: the table in
 * backend.c is what pulls each family's object out of libember.a (a weak reference does not,
 * and a statically linked program then lost its kernels). A slot left empty on purpose is
 * NULL in the table, and its op reports "not implemented on cpu". */
int em_cpu_copy(em_tensor *dst, const em_tensor *src);
int em_cpu_fill(em_tensor *dst, double value);
int em_cpu_arange(em_tensor *out, double start, double step);
int em_cpu_linspace(em_tensor *out, double start, double end);
int em_cpu_random(em_tensor *out, em_random_kind kind, uint64_t seed, uint64_t offset, double a,
                  double b);
int em_cpu_multinomial(em_tensor *out, em_tensor *w, int64_t n, int replacement, uint64_t seed,
                       uint64_t offset);
int em_cpu_unary(em_unary_op op, em_tensor *out, const em_tensor *x);
int em_cpu_binary(em_binary_op op, em_tensor *out, const em_tensor *a, const em_tensor *b,
                  double alpha);
int em_cpu_binary_contiguous(em_binary_op op, em_tensor *out, const em_tensor *a,
                             const em_tensor *b, double alpha);
int em_cpu_where(em_tensor *out, const em_tensor *cond, const em_tensor *a, const em_tensor *b);
int em_cpu_clamp(em_tensor *out, const em_tensor *x, const em_tensor *lo, const em_tensor *hi);
int em_cpu_lerp(em_tensor *out, const em_tensor *start, const em_tensor *end,
                const em_tensor *weight);
int em_cpu_addc(int divide, em_tensor *out, const em_tensor *x, const em_tensor *t1,
                const em_tensor *t2, double value);
int em_cpu_reduce(em_reduce_op op, em_tensor *out, const em_tensor *x, uint32_t mask);
int em_cpu_moments(em_tensor *out, const em_tensor *x, uint32_t mask, double correction,
                   int take_sqrt);
int em_cpu_norm(em_tensor *out, const em_tensor *x, uint32_t mask, double p);
int em_cpu_arg_reduce(int is_max, em_tensor *values, em_tensor *indices, const em_tensor *x,
                      int dim);
int em_cpu_scan(int is_prod, em_tensor *out, const em_tensor *x, int dim);
int em_cpu_softmax(int is_log, em_tensor *out, const em_tensor *x, int dim);
int em_cpu_gemm(em_tensor *out, const em_tensor *a, const em_tensor *b, double alpha,
                double beta);
int em_cpu_index_select(em_tensor *out, const em_tensor *x, int dim, const em_tensor *index);
int em_cpu_gather(em_tensor *out, const em_tensor *x, int dim, const em_tensor *index);
int em_cpu_scatter(em_tensor *x, int dim, const em_tensor *index, const em_tensor *src,
                   int accumulate);
int em_cpu_index_put(em_tensor *x, int dim, const em_tensor *index, const em_tensor *src,
                     double alpha, int accumulate);
int em_cpu_nonzero(em_tensor *out, const em_tensor *x);
int em_cpu_sort(em_tensor *values, em_tensor *indices, const em_tensor *x, int dim,
                int descending);
int em_cpu_sgd_step(em_tensor *param, const em_tensor *grad, em_tensor *buf,
                    const em_sgd_options *o);
int em_cpu_adam_step(em_tensor *param, const em_tensor *grad, em_tensor *exp_avg,
                     em_tensor *exp_avg_sq, em_tensor *max_exp_avg_sq,
                     const em_adam_options *o);
int em_cpu_amp_unscale(em_tensor *const *grads, int n, em_tensor *found_inf,
                       double inv_scale);

#endif
