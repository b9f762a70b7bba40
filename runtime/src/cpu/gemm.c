/*
 * gemm.c: the CPU's matrix product, out[B,M,N] = beta * out + alpha * a[B,M,K] @ b[B,K,N].
 *
 * Every product op (matmul, mm, mv, bmm, dot, outer, addmm, baddbmm) arrives here through the
 * gemm slot (backend.h), 3-D or 4-D: a 4-D call ([B1, B2, M, K], attention's [B, H, T, hd]
 * views) is one pass over its B1 * B2 matrices, the operands' batch offsets computed per flat
 * index (em_gemm_batch_offset), so nothing is set up again per matrix. On top of the slot's
 * contract the definitions guarantee B, M, N > 0
 * (empty results never reach a kernel); K may be 0, which leaves beta * out. beta == 0 means
 * out is not read at all: a fresh output may hold anything, NaN included, and must not leak
 * into the result (PyTorch's rule for addmm with beta = 0).
 *
 * Paths, by dtype:
 *  - float32/float64: OpenBLAS. A matrix view is handed to BLAS as it is when one of its
 *    strides is 1 and the other can serve as a leading dimension (CblasNoTrans/CblasTrans), so
 *    transposed views cost no copy; other layouts are copied to contiguous memory once per
 *    batch. M == 1 or N == 1 go to gemv and M == N == 1 to dot, which OpenBLAS runs much faster
 *    than a degenerate gemm. Tiny products skip BLAS: its per-call overhead dominates there.
 *  - bfloat16: Ember's own kernel on the CPU's bf16 dot-product instructions (gemm_bf16.c)
 *    where the CPU has AVX512_BF16; otherwise as float16.
 *  - float16: converted to float32, multiplied there, converted back.
 *  - integer dtypes: a plain strided loop, accumulating modulo 2^64 in unsigned arithmetic,
 *    so overflow wraps like PyTorch's instead of being undefined behaviour.
 *  - bool: refused (the definitions refuse it first).
 */
#include <cblas.h>
#include <limits.h>
#include <omp.h>
#include <stdlib.h>

#include "cpu.h"
#include "gemm_bf16.h"
#include "sgemm.h"

/* Up to this many multiply-adds (M*N*K, with N > 1) a direct loop beats a BLAS call. Measured
 * on the build machine (2-core AMD EPYC, OpenBLAS 0.3.21 with AVX-512 kernels): sgemm costs
 * ~0.07 us even at 4x4x4, where the loop takes ~0.06 us; at 8x8x8 BLAS already wins (0.09 vs
 * 0.16 us). A 1 x 10 @ 10 x 10 product is ~0.12 us through sgemm but ~0.03 us through sgemv,
 * as fast as the loop, so vector shapes (M == 1 or N == 1) go to gemv/dot instead. */
enum { TINY_WORK = 64 };
/* OpenBLAS threads gemv from about 100 x 100 up, yet on the build machine two threads were
 * slower than one at every size up to 2048 x 2048 (128 x 128: 3.4 us against 0.8 us): waking
 * a thread costs ~3 us and gemv is bound by memory bandwidth, which the cores share. Below
 * this many matrix elements gemv runs on one thread; above it BLAS decides. */
enum { GEMV_THREADED_MIN = 1 << 24 };
/* The packed batch path's buffers (both operands of one matrix, per thread) at most: 32 MiB. */
enum { PACKED_MAX_FLOATS = 1 << 23 };
/* Column chunk of the loop paths: the accumulators of one output row chunk stay in L1. */
enum { JCHUNK = 256 };

/* The matrix dims of a slot operand, 3-D or 4-D. */
#define ROWS(t) ((t)->sizes[(t)->ndim - 2])
#define COLS(t) ((t)->sizes[(t)->ndim - 1])
#define RSTRIDE(t) ((t)->strides[(t)->ndim - 2])
#define CSTRIDE(t) ((t)->strides[(t)->ndim - 1])

/* M*N*K (times B) for choosing paths, saturated: an expanded operand can make it overflow. */
static int64_t work_of(int64_t B, int64_t M, int64_t N, int64_t K) {
  double w = (double)B * (double)M * (double)N * (double)K;
  return w < 1e18 ? (int64_t)w : (int64_t)1e18;
}

/* ---- output scaling (K == 0) ---------------------------------------------------------------- */

/* out *= beta, or out = 0 when beta == 0 (without reading out). */
static void scale_out(em_tensor *out, double beta) {
  int64_t n = em_numel(out);
  char *p = em_cpu_ptr(out);
  em_dtype dt = (em_dtype)out->dtype_id;
  size_t es = em_dtypes[dt].size;
  if (beta == 0) {
    memset(p, 0, (size_t)n * es); /* all-zero bits are 0 in every dtype */
    return;
  }
  if (beta == 1) return;
  if (!em_dtypes[dt].is_float) {
    uint64_t bi = (uint64_t)em_sat_i64(beta);
    for (int64_t i = 0; i < n; i++) {
      char *q = p + (size_t)i * es;
      int64_t v = (int64_t)((uint64_t)em_load_as_int64(q, dt) * bi);
      switch (dt) {
      case EM_INT8: *(int8_t *)q = (int8_t)v; break;
      case EM_UINT8: *(uint8_t *)q = (uint8_t)v; break;
      case EM_INT16: *(int16_t *)q = (int16_t)v; break;
      case EM_INT32: *(int32_t *)q = (int32_t)v; break;
      default: *(int64_t *)q = v; break;
      }
    }
    return;
  }
  for (int64_t i = 0; i < n; i++) {
    char *q = p + (size_t)i * es;
    em_store_from_double(q, dt, em_load_as_double(q, dt) * beta);
  }
}

/* ---- layouts -------------------------------------------------------------------------------- */

/* One operand as BLAS sees it: element (i, j) of flat batch t is at
 * base + (t / nb2) * sb1 + (t % nb2) * sb2 + (trans ? j * ld + i : i * ld + j), in elements
 * (nb2: the inner batch dim's size, em_gemm_inner). */
typedef struct mat {
  const char *base;
  int64_t sb1, sb2; /* batch strides, outer and inner; 0: shared by those batches */
  int64_t ld;
  bool trans;
} mat;

/* Whether a rows x cols view with strides (rs, cs) can go to BLAS as it is, and how. Size-1
 * dimensions have meaningless strides, so they are ignored. */
static bool blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, mat *m) {
  if (cs == 1 || cols == 1) {
    int64_t ld = rows == 1 ? cols : rs;
    if (ld >= cols && ld >= 1 && ld <= INT_MAX) {
      m->ld = ld;
      m->trans = false;
      return true;
    }
  }
  if (rs == 1 || rows == 1) {
    int64_t ld = cols == 1 ? rows : cs;
    if (ld >= rows && ld >= 1 && ld <= INT_MAX) {
      m->ld = ld;
      m->trans = true;
      return true;
    }
  }
  return false;
}

/* A contiguous copy of the [B, R, C] or [B1, B2, R, C] view t in `dtype`, made once: a
 * matrix shared along a batch dim (stride 0) is copied once and viewed again with stride 0
 * there. Returns a new reference, or NULL with an out-of-memory error. */
static em_tensor *contiguous_copy(const em_tensor *t, em_dtype dtype) {
  bool shared = false;
  em_tensor src;
  em_header_copy(&src, t);
  for (int d = 0; d < t->ndim - 2; d++)
    if (t->strides[d] == 0 && t->sizes[d] > 1) src.sizes[d] = 1, shared = true;
  em_tensor *c = em_empty(t->ndim, src.sizes, dtype, EM_CPU);
  if (c == NULL) return NULL;
  em_cpu_copy(c, &src);
  if (!shared) return c;
  int64_t strides[EM_MAX_DIMS];
  em_contiguous_strides(t->ndim, src.sizes, strides);
  for (int d = 0; d < t->ndim - 2; d++)
    if (src.sizes[d] != t->sizes[d]) strides[d] = 0;
  em_tensor *v = em_tensor_view_of(c, t->ndim, t->sizes, strides, 0);
  em_release(c);
  return v;
}

/* ---- the tiny-product loop (float32/float64) ------------------------------------------------ */

/* Any strides, no allocation. Rows are accumulated JCHUNK columns at a time. */
#define TINY_LOOP(NAME, T)                                                                     \
  static void NAME(T *o, const T *a, int64_t ar, int64_t ac, const T *b, int64_t br,          \
                   int64_t bc, int64_t M, int64_t N, int64_t K, T alpha, T beta) {            \
    T acc[JCHUNK];                                                                            \
    for (int64_t i = 0; i < M; i++) {                                                         \
      for (int64_t j0 = 0; j0 < N; j0 += JCHUNK) {                                            \
        int64_t jn = N - j0 < JCHUNK ? N - j0 : JCHUNK;                                       \
        for (int64_t j = 0; j < jn; j++) acc[j] = 0;                                          \
        for (int64_t k = 0; k < K; k++) {                                                     \
          T av = a[i * ar + k * ac];                                                          \
          const T *brow = b + k * br + j0 * bc;                                               \
          if (bc == 1)                                                                        \
            for (int64_t j = 0; j < jn; j++) acc[j] += av * brow[j];                          \
          else                                                                                \
            for (int64_t j = 0; j < jn; j++) acc[j] += av * brow[j * bc];                     \
        }                                                                                     \
        T *orow = o + i * N + j0;                                                             \
        if (beta == 0)                                                                        \
          for (int64_t j = 0; j < jn; j++) orow[j] = alpha * acc[j];                          \
        else                                                                                  \
          for (int64_t j = 0; j < jn; j++) orow[j] = alpha * acc[j] + beta * orow[j];         \
      }                                                                                       \
    }                                                                                         \
  }
TINY_LOOP(tiny_f32, float)
TINY_LOOP(tiny_f64, double)

static void tiny_gemm(em_tensor *out, const em_tensor *a, const em_tensor *b, double alpha,
                      double beta) {
  int64_t B = em_gemm_batches(out), M = ROWS(out), N = COLS(out), K = COLS(a);
  size_t es = em_dtypes[out->dtype_id].size;
  /* many tiny matrices (attention over short sequences) share the cores */
  int threads = omp_in_parallel() ? 1 : em_threads_for(work_of(B, M, N, K));
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (int64_t t = 0; t < B; t++) {
    char *o = em_cpu_ptr(out) + (size_t)(t * M * N) * es;
    const char *ap = em_cpu_ptr(a) + em_gemm_batch_offset(a, t) * (int64_t)es;
    const char *bp = em_cpu_ptr(b) + em_gemm_batch_offset(b, t) * (int64_t)es;
    if (out->dtype_id == EM_FLOAT32)
      tiny_f32((float *)o, (const float *)ap, RSTRIDE(a), CSTRIDE(a), (const float *)bp,
               RSTRIDE(b), CSTRIDE(b), M, N, K, (float)alpha, (float)beta);
    else
      tiny_f64((double *)o, (const double *)ap, RSTRIDE(a), CSTRIDE(a), (const double *)bp,
               RSTRIDE(b), CSTRIDE(b), M, N, K, alpha, beta);
  }
}

/* ---- BLAS (float32/float64) ----------------------------------------------------------------- */

#define CT(m) ((m)->trans ? CblasTrans : CblasNoTrans)
/* Strides of the matrix rows and columns under a layout. */
#define ROW_STEP(m) ((m)->trans ? 1 : (m)->ld)
#define COL_STEP(m) ((m)->trans ? (m)->ld : 1)

typedef struct product {
  bool f64;
  int M, N, K;
  int64_t nb2; /* the inner batch dim's size */
  mat a, b;
  char *out;
  double alpha, beta;
} product;

/* N == 1: y[M] = A[M,K] x[K], where x is b's column. */
static void gemv_a(const product *p, const char *a, const char *b, char *o) {
  const mat *ma = &p->a, *mb = &p->b;
  int rows = ma->trans ? p->K : p->M, cols = ma->trans ? p->M : p->K;
  if (p->f64)
    cblas_dgemv(CblasRowMajor, CT(ma), rows, cols, p->alpha, (const double *)a, (int)ma->ld,
                (const double *)b, (int)ROW_STEP(mb), p->beta, (double *)o, 1);
  else
    cblas_sgemv(CblasRowMajor, CT(ma), rows, cols, (float)p->alpha, (const float *)a,
                (int)ma->ld, (const float *)b, (int)ROW_STEP(mb), (float)p->beta, (float *)o, 1);
}

/* M == 1: y[N] = B[K,N]^T x[K], where x is a's row. */
static void gemv_b(const product *p, const char *a, const char *b, char *o) {
  const mat *ma = &p->a, *mb = &p->b;
  int rows = mb->trans ? p->N : p->K, cols = mb->trans ? p->K : p->N;
  CBLAS_TRANSPOSE tr = mb->trans ? CblasNoTrans : CblasTrans;
  if (p->f64)
    cblas_dgemv(CblasRowMajor, tr, rows, cols, p->alpha, (const double *)b, (int)mb->ld,
                (const double *)a, (int)COL_STEP(ma), p->beta, (double *)o, 1);
  else
    cblas_sgemv(CblasRowMajor, tr, rows, cols, (float)p->alpha, (const float *)b, (int)mb->ld,
                (const float *)a, (int)COL_STEP(ma), (float)p->beta, (float *)o, 1);
}

/* out[t] for one batch index t. */
static void blas_one(const product *p, int64_t t) {
  size_t es = p->f64 ? 8 : 4;
  int64_t t1 = t / p->nb2, t2 = t % p->nb2; /* batch strides may be < 0 */
  const char *a = p->a.base + (t1 * p->a.sb1 + t2 * p->a.sb2) * (int64_t)es;
  const char *b = p->b.base + (t1 * p->b.sb1 + t2 * p->b.sb2) * (int64_t)es;
  char *o = p->out + (size_t)t * (size_t)p->M * (size_t)p->N * es;
  int M = p->M, N = p->N, K = p->K;
  const mat *ma = &p->a, *mb = &p->b;
  if (M == 1 && N == 1) {
    /* dot: a's row against b's column */
    double d = p->f64 ? cblas_ddot(K, (const double *)a, (int)COL_STEP(ma), (const double *)b,
                                   (int)ROW_STEP(mb))
                      : cblas_sdot(K, (const float *)a, (int)COL_STEP(ma), (const float *)b,
                                   (int)ROW_STEP(mb));
    em_dtype dt = p->f64 ? EM_FLOAT64 : EM_FLOAT32;
    double prev = p->beta == 0 ? 0 : p->beta * em_load_as_double(o, dt);
    em_store_from_double(o, dt, p->alpha * d + prev);
    return;
  }
  if (M == 1 || N == 1) {
    /* gemv reads y even when beta == 0 in some OpenBLAS versions (scal by 0 keeps NaN), so
     * the output is zeroed first: M or N writes against M*K or K*N reads. */
    if (p->beta == 0) memset(o, 0, (size_t)M * (size_t)N * es);
    int saved = openblas_get_num_threads();
    bool one = saved > 1 && (int64_t)K * (M == 1 ? N : M) < GEMV_THREADED_MIN;
    if (one) openblas_set_num_threads(1);
    if (N == 1) gemv_a(p, a, b, o);
    else gemv_b(p, a, b, o);
    if (one) openblas_set_num_threads(saved);
    return;
  }
  if (p->f64)
    cblas_dgemm(CblasRowMajor, CT(ma), CT(mb), M, N, K, p->alpha, (const double *)a,
                (int)ma->ld, (const double *)b, (int)mb->ld, p->beta, (double *)o, N);
  else
    cblas_sgemm(CblasRowMajor, CT(ma), CT(mb), M, N, K, (float)p->alpha, (const float *)a,
                (int)ma->ld, (const float *)b, (int)mb->ld, (float)p->beta, (float *)o, N);
}

/* Resolves one operand's layout, copying it when BLAS cannot read it as it is. *keep receives
 * the copy (or NULL) to release after the product. */
static int operand(const em_tensor *t, mat *m, em_tensor **keep) {
  *keep = NULL;
  if (!blas_layout(ROWS(t), COLS(t), RSTRIDE(t), CSTRIDE(t), m)) {
    em_tensor *c = contiguous_copy(t, (em_dtype)t->dtype_id);
    if (c == NULL) return -1;
    blas_layout(ROWS(c), COLS(c), RSTRIDE(c), CSTRIDE(c), m);
    t = *keep = c;
  }
  m->base = em_cpu_ptr(t);
  m->sb1 = em_gemm_outer_stride(t);
  m->sb2 = em_gemm_inner_stride(t);
  return 0;
}

/* float32 batches (alpha 1, matrices, not vectors) on the AVX-512 kernel of sgemm.h, one
 * matrix per iteration of a parallel loop over the batch, each packed into its thread's
 * buffers: no BLAS call, so no per-matrix setup. Attention's products over [B, H, T, hd]
 * views (B * H matrices of T x T x hd) ran at ~2 GFLOP/s one BLAS call at a time on the build
 * machine. Returns 0, or 1 when it does not apply (the caller then takes BLAS). */
static int packed_batches(const product *p, int64_t B) {
  if (p->f64 || p->alpha != 1 || p->M == 1 || p->N == 1 || !em_sgemm_available()) return 1;
  int64_t M = p->M, N = p->N, K = p->K;
  int64_t asz = em_sgemm_a_size(M, K), bsz = em_sgemm_b_size(K, N);
  int threads = omp_in_parallel() ? 1 : em_threads_for(work_of(B, M, N, K) / 64);
  if (threads > B) threads = (int)B;
  /* large matrices: BLAS threads each product itself, and needs no packed copies */
  if ((asz + bsz) * threads > PACKED_MAX_FLOATS) return 1;
  float *buf = malloc((size_t)threads * (size_t)(asz + bsz) * sizeof *buf);
  if (buf == NULL) return 1;
  const mat *ma = &p->a, *mb = &p->b;
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (int64_t t = 0; t < B; t++) {
    float *ap = buf + (size_t)omp_get_thread_num() * (size_t)(asz + bsz), *bp = ap + asz;
    int64_t t1 = t / p->nb2, t2 = t % p->nb2;
    const float *a = (const float *)ma->base + t1 * ma->sb1 + t2 * ma->sb2;
    const float *b = (const float *)mb->base + t1 * mb->sb1 + t2 * mb->sb2;
    em_sgemm_pack_a(ma->trans, M, K, a, ma->ld, ap);
    em_sgemm_pack_b(mb->trans, K, N, b, mb->ld, bp);
    em_sgemm_packed(M, N, K, ap, bp, (float)p->beta, NULL, (float *)p->out + t * M * N, N);
  }
  free(buf);
  return 0;
}

/* One float32 matrix (alpha 1, not a vector) on the AVX-512 kernel of sgemm.h, threads sharing
 * the packing and then the blocks of C: rows in panels of MR when there are enough of them,
 * otherwise columns in panels of NR. Where OpenBLAS does not know the CPU it runs its SSE3
 * kernels (docs/performance.md): a GPT step's Linear products went from ~26 to ~90 GFLOP/s
 * per core. Returns 0, or 1 when it does not apply (the caller then takes BLAS). */
enum { PACKED_SINGLE_MIN_WORK = 1 << 18 };
static int packed_single(const product *p) {
  if (p->f64 || p->alpha != 1 || p->M < EM_SG_MR || p->N < EM_SG_NR || !em_sgemm_available() ||
      work_of(1, p->M, p->N, p->K) < PACKED_SINGLE_MIN_WORK)
    return 1;
  int64_t M = p->M, N = p->N, K = p->K;
  int64_t asz = em_sgemm_a_size(M, K), bsz = em_sgemm_b_size(K, N);
  if (asz + bsz > PACKED_MAX_FLOATS) return 1;
  float *ap = malloc((size_t)(asz + bsz) * sizeof *ap);
  if (ap == NULL) return 1;
  float *bp = ap + asz;
  const mat *ma = &p->a, *mb = &p->b;
  int64_t mpanels = (M + EM_SG_MR - 1) / EM_SG_MR, npanels = (N + EM_SG_NR - 1) / EM_SG_NR;
  int threads = omp_in_parallel() ? 1 : em_threads_for(work_of(1, M, N, K) / 64);
  bool by_rows = mpanels >= 4 * (int64_t)threads || mpanels >= npanels;
  float beta = (float)p->beta;
  float *c = (float *)p->out;
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    int t = threads > 1 ? omp_get_thread_num() : 0, nt = threads > 1 ? omp_get_num_threads() : 1;
    /* packing: row panels of A, then column panels of B, each split between threads */
    int64_t lo = mpanels * t / nt * EM_SG_MR, hi = mpanels * (t + 1) / nt * EM_SG_MR;
    if (hi > M) hi = M;
    if (lo < hi) {
      const float *a = (const float *)ma->base + (ma->trans ? lo : lo * ma->ld);
      em_sgemm_pack_a(ma->trans, hi - lo, K, a, ma->ld, ap + lo * K);
    }
    int64_t jlo = npanels * t / nt * EM_SG_NR, jhi = npanels * (t + 1) / nt * EM_SG_NR;
    if (jhi > N) jhi = N;
    if (jlo < jhi) {
      const float *b = (const float *)mb->base + (mb->trans ? jlo * mb->ld : jlo);
      em_sgemm_pack_b(mb->trans, K, jhi - jlo, b, mb->ld, bp + jlo * K);
    }
#pragma omp barrier
    if (by_rows) {
      if (lo < hi) em_sgemm_packed(hi - lo, N, K, ap + lo * K, bp, beta, NULL, c + lo * N, N);
    } else if (jlo < jhi) {
      em_sgemm_packed(M, jhi - jlo, K, ap, bp + jlo * K, beta, NULL, c + jlo, N);
    }
  }
  free(ap);
  return 0;
}

/* a is [B,M,K] and b is shared: when a's rows are evenly spaced across its batches, the whole
 * batch is one [B*M, K] @ [K, N] product (a Linear layer on a [batch, seq, features] input). */
static bool fold_batch(const em_tensor *a, const em_tensor *b, int64_t *rows, int64_t *rs) {
  if (a->ndim != 3) return false; /* the definition has merged what folds into one dim */
  int64_t B = a->sizes[0], M = a->sizes[1];
  if (B == 1 || b->strides[0] != 0 || (a->sizes[2] > 1 && a->strides[2] != 1)) return false;
  int64_t step = M == 1 ? a->strides[0] : a->strides[1];
  if (a->strides[0] != M * step) return false;
  *rows = B * M;
  *rs = step;
  return true;
}

static int blas_gemm(em_tensor *out, const em_tensor *a, const em_tensor *b, double alpha,
                     double beta) {
  int64_t B = em_gemm_batches(out), M = ROWS(out), N = COLS(out), K = COLS(a);
  em_tensor folded;
  int64_t rows, rs;
  if (fold_batch(a, b, &rows, &rs)) {
    em_header_copy(&folded, a);
    folded.sizes[0] = 1;
    folded.sizes[1] = rows;
    folded.strides[1] = rs;
    a = &folded;
    B = 1;
    M = rows;
  }
  if (M > INT_MAX || N > INT_MAX || K > INT_MAX)
    return em_error("sizes beyond %d are not supported by BLAS (M = %lld, N = %lld, K = %lld)",
                    INT_MAX, (long long)M, (long long)N, (long long)K);
  product p = {out->dtype_id == EM_FLOAT64, (int)M, (int)N, (int)K, B == 1 ? 1 : em_gemm_inner(out),
               {0}, {0}, em_cpu_ptr(out), alpha, beta};
  em_tensor *keep_a = NULL, *keep_b = NULL;
  int rc = -1;
  if (operand(a, &p.a, &keep_a) != 0 || operand(b, &p.b, &keep_b) != 0) goto done;
  /* float32 batches on an AVX-512 CPU: one parallel loop over the batch on Ember's packed
   * kernel. Otherwise one matrix after another, each call free to use BLAS's threads. Running
   * small matrices one per OpenMP thread with BLAS at one thread was measured and rejected:
   * OpenBLAS 0.3.21 (pthreads build) serializes concurrent callers on a lock, and a [1024,8,8]
   * bmm went from 0.1 ms to 2.8 ms. */
  if (B > 1 ? packed_batches(&p, B) == 0 : packed_single(&p) == 0) {
    rc = 0;
    goto done;
  }
  for (int64_t t = 0; t < B; t++) blas_one(&p, t);
  rc = 0;
done:
  em_release(keep_a);
  em_release(keep_b);
  return rc;
}

/* ---- float16 / bfloat16: through float32 ---------------------------------------------------- */

static int gemm_floating(em_tensor *out, const em_tensor *a, const em_tensor *b, double alpha,
                         double beta);

static int half_gemm(em_tensor *out, const em_tensor *a, const em_tensor *b, double alpha,
                     double beta) {
  em_tensor *fa = contiguous_copy(a, EM_FLOAT32), *fb = contiguous_copy(b, EM_FLOAT32);
  em_tensor *fo = em_empty(out->ndim, out->sizes, EM_FLOAT32, EM_CPU);
  int rc = -1;
  if (fa && fb && fo) {
    if (beta != 0) em_cpu_copy(fo, out);
    rc = gemm_floating(fo, fa, fb, alpha, beta);
    if (rc == 0) em_cpu_copy(out, fo);
  }
  em_release(fa);
  em_release(fb);
  em_release(fo);
  return rc;
}

static int gemm_floating(em_tensor *out, const em_tensor *a, const em_tensor *b, double alpha,
                         double beta) {
  if (out->dtype_id == EM_BFLOAT16) {
    int path = em_bf16_gemm_path();
    if (path < 0) return -1;
    if (path != EM_BF16_PORTABLE) return em_bf16_gemm(path, out, a, b, alpha, beta);
  }
  if (out->dtype_id == EM_FLOAT16 || out->dtype_id == EM_BFLOAT16)
    return half_gemm(out, a, b, alpha, beta);
  if (work_of(1, ROWS(out), COLS(out), COLS(a)) <= TINY_WORK && COLS(out) > 1) {
    tiny_gemm(out, a, b, alpha, beta);
    return 0;
  }
  return blas_gemm(out, a, b, alpha, beta);
}

/* ---- integers ------------------------------------------------------------------------------- */

/* One output row, any strides, no copies (an expanded operand stays a view). Products are
 * summed in uint64_t: wrapping arithmetic, exact modulo 2^64, narrowed like PyTorch's. */
#define INT_ROW(NAME, T)                                                                       \
  static void NAME(char *o_, const char *a_, int64_t ac, const char *b_, int64_t br,          \
                   int64_t bc, int64_t N, int64_t K, uint64_t alpha, uint64_t beta,            \
                   bool read_out) {                                                           \
    T *o = (T *)o_;                                                                           \
    const T *a = (const T *)a_, *b = (const T *)b_;                                           \
    uint64_t acc[JCHUNK];                                                                     \
    for (int64_t j0 = 0; j0 < N; j0 += JCHUNK) {                                              \
      int64_t jn = N - j0 < JCHUNK ? N - j0 : JCHUNK;                                         \
      for (int64_t j = 0; j < jn; j++) acc[j] = 0;                                            \
      for (int64_t k = 0; k < K; k++) {                                                       \
        uint64_t av = (uint64_t)(int64_t)a[k * ac];                                           \
        const T *brow = b + k * br + j0 * bc;                                                 \
        if (bc == 1)                                                                          \
          for (int64_t j = 0; j < jn; j++) acc[j] += av * (uint64_t)(int64_t)brow[j];         \
        else                                                                                  \
          for (int64_t j = 0; j < jn; j++) acc[j] += av * (uint64_t)(int64_t)brow[j * bc];    \
      }                                                                                       \
      for (int64_t j = 0; j < jn; j++) {                                                      \
        uint64_t v = alpha * acc[j];                                                          \
        if (read_out) v += beta * (uint64_t)(int64_t)o[j0 + j];                               \
        o[j0 + j] = (T)(int64_t)v;                                                            \
      }                                                                                       \
    }                                                                                         \
  }
INT_ROW(int_row_i8, int8_t)
INT_ROW(int_row_u8, uint8_t)
INT_ROW(int_row_i16, int16_t)
INT_ROW(int_row_i32, int32_t)
INT_ROW(int_row_i64, int64_t)

typedef void (*int_row_fn)(char *, const char *, int64_t, const char *, int64_t, int64_t,
                           int64_t, int64_t, uint64_t, uint64_t, bool);

static void int_gemm(em_tensor *out, const em_tensor *a, const em_tensor *b, double alpha,
                     double beta) {
  int_row_fn row;
  switch (out->dtype_id) {
  case EM_INT8: row = int_row_i8; break;
  case EM_UINT8: row = int_row_u8; break;
  case EM_INT16: row = int_row_i16; break;
  case EM_INT32: row = int_row_i32; break;
  default: row = int_row_i64; break;
  }
  int64_t B = em_gemm_batches(out), M = ROWS(out), N = COLS(out), K = COLS(a);
  int64_t es = (int64_t)em_dtypes[out->dtype_id].size;
  char *po = em_cpu_ptr(out);
  const char *pa = em_cpu_ptr(a), *pb = em_cpu_ptr(b);
  uint64_t al = (uint64_t)em_sat_i64(alpha), be = (uint64_t)em_sat_i64(beta);
  int threads = omp_in_parallel() ? 1 : em_threads_for(work_of(B, M, N, K));
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (int64_t r = 0; r < B * M; r++) {
    int64_t t = r / M, i = r % M;
    row(po + r * N * es, pa + (em_gemm_batch_offset(a, t) + i * RSTRIDE(a)) * es, CSTRIDE(a),
        pb + em_gemm_batch_offset(b, t) * es, RSTRIDE(b), CSTRIDE(b), N, K, al, be, beta != 0);
  }
}

/* ---- the slot ------------------------------------------------------------------------------- */

int em_cpu_gemm(em_tensor *out, const em_tensor *a, const em_tensor *b, double alpha,
                double beta) {
  em_dtype dt = (em_dtype)out->dtype_id;
  if (dt == EM_BOOL) return em_error("gemm: expected a floating or integer dtype, got bool");
  if (em_numel(out) == 0) return 0;
  if (COLS(a) == 0) {
    scale_out(out, beta);
    return 0;
  }
  if (em_dtypes[dt].is_float) return gemm_floating(out, a, b, alpha, beta);
  int_gemm(out, a, b, alpha, beta);
  return 0;
}
