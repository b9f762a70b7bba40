/*
 * gemm_bf16.c: Ember's own bfloat16 matrix product (gemm_bf16.h), for CPUs with bf16
 * instructions; Debian 12's OpenBLAS 0.3.21 exports no sbgemm.
 *
 * Both paths read the same packed operands, made once per product:
 *  - A, per block of up to MC rows: row-major, K zero-padded to Kp (a multiple of 32) and rows
 *    to a multiple of TM, so an AMX tile (16 rows x 32 bf16) or a pair of k values is one load;
 *  - B, per panel of 16 columns: "VNNI" pairs, element (k, n) at (k / 2) * 32 + n * 2 + k % 2
 *    within its panel (an AMX tile of B is 16 rows of 16 pairs; an AVX-512 vector one row),
 *    columns padded to a multiple of TN, K to Kp, with zeros.
 * The AMX kernel keeps a 32 x 32 block of C in four tiles (TDPBF16PS: 16x16x32 per
 * instruction); the AVX-512 kernel an 8 x 32 block in 16 registers (VDPBF16PS: one pair of k
 * for 16 columns per instruction). K is walked in slices of KC, so that the B panels' slice
 * stays in L1 while every row block of A passes over it; the partial products stay in float32
 * (a per-thread buffer) until the last slice, where the epilogue applies alpha and beta and
 * rounds once (nearest even, NaN kept quiet, as dtype.c's em_float_to_bf16), or stores float32.
 *
 * Measured on the build machine (Intel Xeon with AMX, 2 cores shared with other work), a tight
 * loop of the instructions alone: VDPBF16PS ran at about half the float32 FMA's FLOP rate, AMX
 * at ~4.5 times it, which is why AMX goes first where the CPU offers it (docs/performance.md
 * has the products' figures). On AMD Zen 4/5 (no AMX) VDPBF16PS runs at twice the FMA's rate.
 *
 * Work is split over OpenMP threads by (batch, block of rows, block of columns), B packed
 * first by (batch, panel); a B shared by every batch (stride 0) is packed once. The target
 * attributes keep the rest of the library generic; em_bf16_gemm_path() checks the CPU (and,
 * for AMX, asks Linux for the tile state: arch_prctl ARCH_REQ_XCOMP_PERM) at run time.
 */
#include <cpuid.h>
#include <immintrin.h>
#include <omp.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "gemm_bf16.h"

enum {
  TM = 32, TN = 32, /* the block of C one kernel call computes */
  KQ = 32,          /* K is padded to a multiple of this: one AMX tile row of bf16 */
  PW = 16,          /* columns per packed B panel */
  MC = 64,          /* rows of A a thread packs at once */
  NC = 256,         /* columns a work item covers at most */
  KC = 256          /* K slice: the two B panels' slice (16 KB) stays in L1 across row blocks */
};

#define AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#define AMXBF16 __attribute__((target("amx-tile,amx-bf16")))

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t round_up(int64_t a, int64_t b) { return cdiv(a, b) * b; }

/* ---- which path --------------------------------------------------------------------------- */

static bool has_avx512bf16(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
}

/* CPUID.7.0:EDX bit 22 AMX-BF16, bit 24 AMX-TILE; then Linux must grant the tile data state
 * (5.16 and later; once per process, for all its threads). */
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18
static bool amx_ready(void) {
  static int cached = -1;
  int c = __atomic_load_n(&cached, __ATOMIC_ACQUIRE);
  if (c < 0) {
    unsigned a, b, cx, d;
    c = __get_cpuid_count(7, 0, &a, &b, &cx, &d) && (d >> 22 & 1) && (d >> 24 & 1) &&
        syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
    __atomic_store_n(&cached, c, __ATOMIC_RELEASE);
  }
  return c != 0;
}

int em_bf16_gemm_path(void) {
  const char *v = getenv("EMBER_CPU_BF16");
  int want = EM_BF16_AMX;
  if (v != NULL && v[0] != '\0') {
    if (strcmp(v, "0") == 0) return EM_BF16_PORTABLE;
    if (strcmp(v, "avx512") == 0) want = EM_BF16_AVX512;
    else if (strcmp(v, "1") != 0 && strcmp(v, "auto") != 0 && strcmp(v, "amx") != 0)
      return em_error("EMBER_CPU_BF16: expected 0, 1, auto, amx or avx512, got '%s'", v);
  }
  if (!has_avx512bf16()) return EM_BF16_PORTABLE;
  return want == EM_BF16_AMX && amx_ready() ? EM_BF16_AMX : EM_BF16_AVX512;
}

/* ---- packing ------------------------------------------------------------------------------ */

/* rows x K of a (strides rs, cs) into ap: rows_pad rows of Kp, zero-padded. */
static void pack_a(const uint16_t *a, int64_t rs, int64_t cs, int64_t rows, int64_t K,
                   int64_t Kp, int64_t rows_pad, uint16_t *ap) {
  memset(ap, 0, (size_t)(rows_pad * Kp) * sizeof *ap);
  if (cs != 1 && rs == 1) { /* transposed: walk each stored row (one k) along its rows */
    for (int64_t k = 0; k < K; k++)
      for (int64_t i = 0; i < rows; i++) ap[i * Kp + k] = a[k * cs + i];
    return;
  }
  for (int64_t i = 0; i < rows; i++) {
    const uint16_t *src = a + i * rs;
    uint16_t *dst = ap + i * Kp;
    if (cs == 1) memcpy(dst, src, (size_t)K * sizeof *dst);
    else
      for (int64_t k = 0; k < K; k++) dst[k] = src[k * cs];
  }
}

/* Columns j0 .. j0+15 of b (K x N, strides rs, cs) as one panel of pairs (Kp / 2 rows of 32).
 * Only the bf16 paths pack, so the CPU has AVX-512 here. */
AVX512BF16 static void pack_b_panel(const uint16_t *b, int64_t rs, int64_t cs, int64_t K, int64_t N,
                         int64_t Kp, int64_t j0, uint16_t *dst) {
  int64_t nj = N - j0 < PW ? N - j0 : PW;
  if (nj < 0) nj = 0; /* a panel wholly past N (N is padded to TN = two panels) */
  if (cs == 1) { /* rows contiguous (x @ w): two rows make one row of pairs, written whole */
    for (int64_t p = 0; p < Kp / 2; p++) {
      uint32_t row[PW];
      const uint16_t *s0 = b + 2 * p * rs + j0, *s1 = s0 + rs;
      int64_t n = 2 * p < K ? nj : 0;
      if (n == PW && 2 * p + 1 < K) { /* 16 columns of two rows: widen, shift, merge */
        __m512i lo = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)s0));
        __m512i hi = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)s1));
        _mm512_storeu_si512(dst + p * 2 * PW, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
        continue;
      }
      if (2 * p + 1 < K)
        for (int64_t j = 0; j < n; j++) row[j] = s0[j] | (uint32_t)s1[j] << 16;
      else
        for (int64_t j = 0; j < n; j++) row[j] = s0[j];
      for (int64_t j = n; j < PW; j++) row[j] = 0;
      memcpy(dst + p * 2 * PW, row, sizeof row);
    }
    return;
  }
  if (rs == 1) { /* b = w^T (a Linear's weight): each pair of k is one 32-bit load per column */
    for (int64_t p = 0; p < Kp / 2; p++) {
      uint32_t row[PW] = {0};
      int64_t k = 2 * p;
      for (int64_t j = 0; j < nj && k < K; j++) {
        const uint16_t *src = b + (j0 + j) * cs + k;
        if (k + 1 < K) memcpy(&row[j], src, sizeof row[j]); /* little-endian: k low, k+1 high */
        else row[j] = src[0];
      }
      memcpy(dst + p * 2 * PW, row, sizeof row);
    }
    return;
  }
  memset(dst, 0, (size_t)(Kp * PW) * sizeof *dst);
  for (int64_t k = 0; k < K; k++)
    for (int64_t j = 0; j < nj; j++)
      dst[(k >> 1) * 2 * PW + 2 * j + (k & 1)] = b[k * rs + (j0 + j) * cs];
}

/* Columns j0 .. j0+15 of a K x N matrix whose row k is the N contiguous values at rows[k], as
 * one panel of pairs (em_bf16_pack_b_rows). */
AVX512BF16 static void pack_rows_panel(const uint16_t *const *rows, int64_t K, int64_t N,
                                       int64_t Kp, int64_t j0, uint16_t *dst) {
  int64_t nj = N - j0 < PW ? N - j0 : PW;
  if (nj < 0) nj = 0;
  __mmask16 m = (__mmask16)((1u << nj) - 1);
  for (int64_t p = 0; p < Kp / 2; p++) {
    __m512i lo = _mm512_setzero_si512(), hi = _mm512_setzero_si512();
    if (2 * p < K)
      lo = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, rows[2 * p] + j0));
    if (2 * p + 1 < K)
      hi = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, rows[2 * p + 1] + j0));
    _mm512_storeu_si512(dst + p * 2 * PW, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
  }
}

/* Columns j0 .. j0+15 of B given transposed (element (k, n) at bt[n * ld + k]) as one panel
 * of pairs: each pair (k, k+1) of a column is one 32-bit element of its stored row, so a pair
 * row of the panel is one 16-lane gather (em_bf16_pack_b_t). */
AVX512BF16 static void pack_t_panel(const uint16_t *bt, int64_t ld, int64_t K, int64_t N,
                                    int64_t Kp, int64_t j0, uint16_t *dst) {
  int64_t nj = N - j0 < PW ? N - j0 : PW;
  if (nj < 0) nj = 0;
  __mmask16 m = (__mmask16)((1u << nj) - 1);
  const uint16_t *base = bt + j0 * ld;
  __m512i idx = _mm512_mullo_epi32(
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
      _mm512_set1_epi32((int)(ld * 2)));
  int64_t p = 0;
  for (; p < K / 2; p++) {
    __m512i pairs = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx, base + 2 * p, 1);
    _mm512_storeu_si512(dst + p * 2 * PW, pairs);
  }
  for (; p < Kp / 2; p++) { /* the odd last k (its pair is zero), then K's padding */
    uint32_t row[PW] = {0};
    for (int64_t j = 0; j < nj && 2 * p < K; j++) row[j] = base[j * ld + 2 * p];
    memcpy(dst + p * 2 * PW, row, sizeof row);
  }
}

/* ---- the kernels: c (TM x TN floats) = A rows @ two B panels ------------------------------- */

/* c (ldc) [+]= rows x 32 of A (rows of lda, kc values from a) @ the two B panels' slices b0, b1
 * (kc / 2 pair rows each); acc: add to c (a later K slice), else overwrite. */
AVX512BF16 static void kernel_avx512(int64_t lda, int64_t kc, const uint16_t *a,
                                     const uint16_t *b0, const uint16_t *b1, float *c,
                                     int64_t ldc, bool acc_c, int64_t rows) {
  for (int64_t r0 = 0; r0 < rows; r0 += 8) {
    __m512 acc[8][2];
    float *cr = c + r0 * ldc;
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
      acc[i][0] = acc_c ? _mm512_loadu_ps(cr + i * ldc) : _mm512_setzero_ps();
      acc[i][1] = acc_c ? _mm512_loadu_ps(cr + i * ldc + 16) : _mm512_setzero_ps();
    }
    const uint16_t *ar = a + r0 * lda;
    for (int64_t p = 0; p < kc / 2; p++) {
      __m512bh x0 = (__m512bh)_mm512_loadu_si512(b0 + p * 2 * PW);
      __m512bh x1 = (__m512bh)_mm512_loadu_si512(b1 + p * 2 * PW);
#pragma GCC unroll 8
      for (int i = 0; i < 8; i++) {
        uint32_t pair;
        memcpy(&pair, ar + i * lda + 2 * p, sizeof pair);
        __m512bh av = (__m512bh)_mm512_set1_epi32((int)pair);
        acc[i][0] = _mm512_dpbf16_ps(acc[i][0], av, x0);
        acc[i][1] = _mm512_dpbf16_ps(acc[i][1], av, x1);
      }
    }
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
      _mm512_storeu_ps(cr + i * ldc, acc[i][0]);
      _mm512_storeu_ps(cr + i * ldc + 16, acc[i][1]);
    }
  }
}

/* The tile configuration: palette 1, tiles 0-7 each 16 rows of 64 bytes (tiles 0-3 hold C,
 * 4-5 the two 16-row halves of A, 6-7 the two B panels). */
typedef struct tile_config {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} tile_config;

/* Static, not built on the stack: GCC 12 does not see _tile_loadconfig read its argument, and
 * dropped the stores of a local configuration as dead. */
static const tile_config amx_config = {
  .palette = 1,
  .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
  .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

AMXBF16 static void amx_begin(void) { _tile_loadconfig(&amx_config); }

AMXBF16 static void amx_end(void) { _tile_release(); }

/* As kernel_avx512, for 32 rows: C in tiles 0-3 (loaded from c for a later K slice). */
AMXBF16 static void kernel_amx(int64_t lda, int64_t kc, const uint16_t *a, const uint16_t *b0,
                               const uint16_t *b1, float *c, int64_t ldc, bool acc_c) {
  long cb = (long)(ldc * 4), ab = (long)(lda * 2);
  if (acc_c) {
    _tile_loadd(0, c, cb);
    _tile_loadd(1, c + 16, cb);
    _tile_loadd(2, c + 16 * ldc, cb);
    _tile_loadd(3, c + 16 * ldc + 16, cb);
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  for (int64_t k0 = 0; k0 < kc; k0 += KQ) {
    _tile_loadd(4, a + k0, ab);
    _tile_loadd(5, a + 16 * lda + k0, ab);
    _tile_loadd(6, b0 + k0 * PW, 64);
    _tile_loadd(7, b1 + k0 * PW, 64);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, c, cb);
  _tile_stored(1, c + 16, cb);
  _tile_stored(2, c + 16 * ldc, cb);
  _tile_stored(3, c + 16 * ldc + 16, cb);
}

/* ---- the epilogue: out = alpha * c + beta * out, rounded once ------------------------------- */

/* 16 floats to bfloat16, round to nearest even; NaN stays NaN, quieted (dtype.c's rule). */
AVX512BF16 static __m256i round_bf16(__m512 v) {
  __m512i u = _mm512_castps_si512(v);
  __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i bias = _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, bias), 16);
  __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                          _mm512_set1_epi32(0x7f800000));
  __m512i q = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, r, q));
}

AVX512BF16 static void epilogue(const float *c, int64_t ldc, int64_t mr, int64_t nr, char *out,
                                bool f32, int64_t ldo, float alpha, float beta,
                                const float *bias) {
  __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  for (int64_t i = 0; i < mr; i++)
    for (int64_t h = 0; h < nr; h += 16) {
      int64_t n = nr - h < 16 ? nr - h : 16;
      __mmask16 m = n == 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1);
      __m512 v = _mm512_mul_ps(va, _mm512_loadu_ps(c + i * ldc + h));
      if (bias) v = _mm512_add_ps(v, _mm512_set1_ps(bias[i]));
      if (f32) {
        float *o = (float *)out + i * ldo + h;
        if (beta != 0) v = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m, o), v);
        _mm512_mask_storeu_ps(o, m, v);
      } else {
        uint16_t *o = (uint16_t *)out + i * ldo + h;
        if (beta != 0) {
          __m256i prev = _mm256_maskz_loadu_epi16(m, o);
          __m512i old = _mm512_slli_epi32(_mm512_cvtepu16_epi32(prev), 16);
          v = _mm512_fmadd_ps(vb, _mm512_castsi512_ps(old), v);
        }
        _mm256_mask_storeu_epi16(o, m, round_bf16(v));
      }
    }
}

/* ---- one block: mc rows of packed A against columns [c0, cend) of packed B ------------------ */

typedef struct block_out {
  char *out;        /* the block's row 0, column 0 of the whole output */
  bool f32;
  int64_t ldo;
  float alpha, beta;
  const float *bias; /* per row of the block, or NULL */
} block_out;

/* ap: mc rows (padded to TM) of Kp; bz: the packed B; cs: float32 scratch (ldc >= cend - c0
 * rounded up to TN, TM-rounded mc rows), accumulated over the K slices and rounded once at
 * the last. */
static void run_block(int path, int64_t mc, int64_t Kp, const uint16_t *ap, const uint16_t *bz,
                      int64_t c0, int64_t cend, float *cs, int64_t ldc, const block_out *o) {
  size_t es = o->f32 ? 4 : 2;
  for (int64_t k0 = 0; k0 < Kp; k0 += KC) {
    int64_t kc = Kp - k0 < KC ? Kp - k0 : KC;
    bool first = k0 == 0, last = k0 + kc >= Kp;
    for (int64_t j0 = c0; j0 < cend; j0 += TN) {
      const uint16_t *b0 = bz + (j0 / PW) * Kp * PW + k0 * PW, *b1 = b0 + Kp * PW;
      for (int64_t i0 = 0; i0 < mc; i0 += TM) {
        int64_t mr = mc - i0 < TM ? mc - i0 : TM, nr = cend - j0 < TN ? cend - j0 : TN;
        float *c = cs + i0 * ldc + (j0 - c0);
        if (path == EM_BF16_AMX) kernel_amx(Kp, kc, ap + i0 * Kp + k0, b0, b1, c, ldc, !first);
        else kernel_avx512(Kp, kc, ap + i0 * Kp + k0, b0, b1, c, ldc, !first, round_up(mr, 8));
        if (last)
          epilogue(c, ldc, mr, nr, o->out + (i0 * o->ldo + j0) * (int64_t)es, o->f32, o->ldo,
                   o->alpha, o->beta, o->bias ? o->bias + i0 : NULL);
      }
    }
  }
}

/* ---- the product -------------------------------------------------------------------------- */

typedef struct job {
  int path;
  int64_t M, N, K, Kp;
  const em_tensor *a;
  const uint16_t *bp;  /* packed B of every distinct batch */
  int64_t bp_batch;    /* uint16s per packed batch; 0: one B for all */
  char *out;
  bool f32;
  float alpha, beta;
  int64_t mblocks, nc, nblocks;
} job;

/* Work item t: batch z, rows r0 .. r0+MC-1, columns c0 .. c0+nc-1. ap: room for the packed A
 * block; cs: its float32 product (ldc = nc rounded up to TN). */
static void run_item(const job *j, int64_t t, uint16_t *ap, float *cs) {
  int64_t z = t / (j->mblocks * j->nblocks), rest = t % (j->mblocks * j->nblocks);
  int64_t r0 = rest / j->nblocks * MC, c0 = rest % j->nblocks * j->nc;
  int64_t mc = j->M - r0 < MC ? j->M - r0 : MC, cend = c0 + j->nc < j->N ? c0 + j->nc : j->N;
  int64_t Kp = j->Kp;
  const em_tensor *a = j->a;
  const uint16_t *pa = (const uint16_t *)em_cpu_ptr(a) + em_gemm_batch_offset(a, z);
  int64_t rs = a->strides[a->ndim - 2], cs_a = a->strides[a->ndim - 1];
  pack_a(pa + r0 * rs, rs, cs_a, mc, j->K, Kp, round_up(mc, TM), ap);
  size_t es = j->f32 ? 4 : 2;
  block_out o = {j->out + (z * j->M + r0) * j->N * (int64_t)es, j->f32, j->N, j->alpha, j->beta,
                 NULL};
  run_block(j->path, mc, Kp, ap, j->bp + z * j->bp_batch, c0, cend, cs, round_up(j->nc, TN), &o);
}

static void *alloc64(size_t bytes) { return aligned_alloc(64, (bytes + 63) / 64 * 64); }

int em_bf16_gemm(int path, em_tensor *out, const em_tensor *a, const em_tensor *b, double alpha,
                 double beta) {
  int nd = out->ndim;
  int64_t B = em_gemm_batches(out), M = out->sizes[nd - 2], N = out->sizes[nd - 1];
  int64_t K = a->sizes[nd - 1], Kp = round_up(K, KQ), panels = round_up(N, TN) / PW;
  bool shared_b = em_gemm_outer_stride(b) == 0 && em_gemm_inner_stride(b) == 0;
  int64_t nbd = shared_b ? 1 : B, per_b = panels * Kp * PW;
  /* a thread gets at least 128 grains of multiply-adds (4M, ~20 us on AMX): waking the other
   * threads costs more than smaller products gain */
  double work = (double)B * (double)M * (double)N * (double)K / 128;
  int threads = omp_in_parallel() ? 1 : em_threads_for(work < 1e18 ? (int64_t)work : (int64_t)1e18);
  job j = {path, M, N, K, Kp, a, NULL, shared_b ? 0 : per_b, em_cpu_ptr(out),
           out->dtype_id == EM_FLOAT32, (float)alpha, (float)beta, cdiv(M, MC), 0, 0};
  /* columns per item: NC, or fewer so that every thread gets a few items */
  j.nc = NC;
  int64_t want = 4 * (int64_t)threads, rows = B * j.mblocks;
  if (rows * cdiv(N, NC) < want) j.nc = round_up(cdiv(N, cdiv(want, rows)), TN);
  j.nblocks = cdiv(N, j.nc);
  uint16_t *bp = alloc64((size_t)(nbd * per_b) * sizeof *bp);
  /* per thread: the packed A block, then its float32 product (64-byte aligned) */
  size_t a_bytes = (size_t)round_up(round_up(MC, TM) * Kp * 2, 64);
  size_t per_thread = a_bytes + (size_t)(round_up(MC, TM) * round_up(j.nc, TN)) * sizeof(float);
  char *ap = alloc64((size_t)threads * per_thread);
  if (bp == NULL || ap == NULL) {
    free(bp);
    free(ap);
    long long bytes = (long long)(nbd * per_b * 2 + threads * (int64_t)per_thread);
    return em_error_kind_set(EM_ERR_OOM, "gemm: out of memory packing bfloat16 operands "
                             "(%lld bytes)", bytes);
  }
  j.bp = bp;
  const uint16_t *pb = (const uint16_t *)em_cpu_ptr(b);
  int64_t brs = b->strides[nd - 2], bcs = b->strides[nd - 1];
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (int64_t t = 0; t < nbd * panels; t++) {
    int64_t z = t / panels, p = t % panels;
    pack_b_panel(pb + em_gemm_batch_offset(b, z), brs, bcs, K, N, Kp, p * PW,
                 bp + z * per_b + p * Kp * PW);
  }
  int64_t items = B * j.mblocks * j.nblocks;
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    char *mine = ap + (size_t)omp_get_thread_num() * per_thread;
    if (path == EM_BF16_AMX) amx_begin();
#pragma omp for schedule(static)
    for (int64_t t = 0; t < items; t++)
      run_item(&j, t, (uint16_t *)mine, (float *)(mine + a_bytes));
    if (path == EM_BF16_AMX) amx_end();
  }
  free(bp);
  free(ap);
  return 0;
}

/* ---- packed operands owned by the caller (gemm_bf16.h) ------------------------------------- */

int64_t em_bf16_kp(int64_t K) { return round_up(K, KQ); }
int64_t em_bf16_a_size(int64_t M, int64_t K) { return round_up(M, TM) * round_up(K, KQ); }
int64_t em_bf16_b_size(int64_t K, int64_t N) { return round_up(N, TN) * round_up(K, KQ); }
int64_t em_bf16_scratch_size(void) { return round_up(MC, TM) * round_up(NC, TN); }

void em_bf16_pack_a(const uint16_t *a, int64_t rs, int64_t cs, int64_t M, int64_t K,
                    uint16_t *ap) {
  pack_a(a, rs, cs, M, K, round_up(K, KQ), round_up(M, TM), ap);
}

void em_bf16_pack_b(const uint16_t *b, int64_t rs, int64_t cs, int64_t K, int64_t N,
                    uint16_t *bp) {
  int64_t Kp = round_up(K, KQ), panels = round_up(N, TN) / PW;
  for (int64_t p = 0; p < panels; p++) pack_b_panel(b, rs, cs, K, N, Kp, p * PW, bp + p * Kp * PW);
}

void em_bf16_pack_a_rows(const uint16_t *const *rows, int64_t M, int64_t K, uint16_t *ap) {
  int64_t Kp = round_up(K, KQ);
  for (int64_t i = 0; i < M; i++) {
    memcpy(ap + i * Kp, rows[i], (size_t)K * sizeof *ap);
    memset(ap + i * Kp + K, 0, (size_t)(Kp - K) * sizeof *ap);
  }
  memset(ap + M * Kp, 0, (size_t)((round_up(M, TM) - M) * Kp) * sizeof *ap);
}

void em_bf16_pack_b_rows(const uint16_t *const *rows, int64_t K, int64_t N, uint16_t *bp) {
  int64_t Kp = round_up(K, KQ), panels = round_up(N, TN) / PW;
  for (int64_t p = 0; p < panels; p++) pack_rows_panel(rows, K, N, Kp, p * PW, bp + p * Kp * PW);
}

void em_bf16_pack_b_t(const uint16_t *bt, int64_t ld, int64_t K, int64_t N, uint16_t *bp) {
  int64_t Kp = round_up(K, KQ), panels = round_up(N, TN) / PW;
  if (ld > INT32_MAX / (2 * PW)) { /* gather offsets are 32-bit */
    em_bf16_pack_b(bt, 1, ld, K, N, bp);
    return;
  }
  for (int64_t p = 0; p < panels; p++) pack_t_panel(bt, ld, K, N, Kp, p * PW, bp + p * Kp * PW);
}

void em_bf16_gemm_packed(int path, int64_t M, int64_t N, int64_t K, const uint16_t *ap,
                         const uint16_t *bp, float beta, const float *row_bias, void *out,
                         bool out_f32, int64_t ldo, float *scratch) {
  int64_t Kp = round_up(K, KQ);
  size_t es = out_f32 ? 4 : 2;
  if (path == EM_BF16_AMX) amx_begin();
  for (int64_t r0 = 0; r0 < M; r0 += MC) {
    int64_t mc = M - r0 < MC ? M - r0 : MC;
    block_out o = {(char *)out + r0 * ldo * (int64_t)es, out_f32, ldo, 1.0f, beta,
                   row_bias ? row_bias + r0 : NULL};
    for (int64_t c0 = 0; c0 < N; c0 += NC)
      run_block(path, mc, Kp, ap + r0 * Kp, bp, c0, c0 + NC < N ? c0 + NC : N, scratch,
                round_up(NC, TN), &o);
  }
  if (path == EM_BF16_AMX) amx_end();
}
