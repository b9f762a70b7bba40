/* quant_matvec_vnni.c: the few-row (batch 1 to 4, token generation) AVX-512 VNNI kernel for
 * Q8_0, Q4_0, Q4_1, Q4_K and Q6_K, where the product is a read of the weight and must run at the memory's speed.
 *
 * The panel kernel (quant_dot_vnni.c) first transposes 16 weight rows into registers whose lanes
 * are rows; with one activation row that transposition is most of the work. Here lanes are k
 * instead: each weight row is read in place, two blocks (64 codes) per vpdpbusd against the
 * activation codes, and the per-block int32 lane sums are scaled in float as they are (lanes of
 * block b times its scale, one permute to spread 16 block scales over the lanes), so nothing
 * is reduced horizontally before the end of the row. The 16 fp16 weight scales of 16 blocks
 * come in one gather. Sign: the codes are unsigned (Q8_0's offset by 128, Q4_0's nibbles) and
 * the activations signed; the zero point's term, -z * dx * (sum of the block's activation
 * codes) times the weight scale, is one more multiply-add per 16 blocks.
 * Threads take contiguous ranges of weight rows, so each streams its share once, in order,
 * with software prefetches 4 KiB ahead (on this machine's Xeon, one core read a DRAM-resident
 * Q8_0 weight at ~7 GB/s without them, ~10 GB/s with them, as fast as a plain read loop). */
#include "../quant_cpu.h"
#include "../../internal.h"

#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#define VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,fma")))
enum { MV_ROWS = 4, PF = 4096 };

static float half_at(const uint8_t *p) {
  uint16_t h;
  memcpy(&h, p, 2);
  return em_half_to_float(h);
}

/* The last nb % 16 blocks' int32 sum, plainly. Compiled for the baseline, not the VNNI target:
 * GCC 12 vectorizes this signed x signed loop with vpdpbusd there, which is unsigned x signed,
 * and gets it wrong. */
enum { MV_Q8_0, MV_Q4_0, MV_Q4_1 };
__attribute__((noinline)) static int32_t tail_dot(int fmt, const uint8_t *blk, const int8_t *x) {
  int32_t sum = 0;
  if (fmt == MV_Q8_0) {
    for (int j = 0; j < 32; j++) sum += (int8_t)blk[2 + j] * x[j];
  } else if (fmt == MV_Q4_0) {
    for (int j = 0; j < 16; j++)
      sum += ((blk[2 + j] & 15) - 8) * x[j] + ((blk[2 + j] >> 4) - 8) * x[16 + j];
  } else {
    for (int j = 0; j < 16; j++) sum += (blk[4 + j] & 15) * x[j] + (blk[4 + j] >> 4) * x[16 + j];
  }
  return sum;
}

/* One weight row against R activation rows: out_r = sum over blocks. xs[r]: the codes in the
 * order the format's register holds them; zc[r][b] = -z * dx * sum q (Q4_1: dx * sum q, for
 * the minimum, which is the high half of the 4 bytes gathered for the scale); dx[r][b]. */
VNNI static inline __attribute__((always_inline)) void
row_dot(const int R, const int fmt, const uint8_t *row, int64_t nb, const int8_t *const *xs,
        const float *const *zc, const float *const *dx, const int8_t *const *xq, float *res) {
  const int q8 = fmt == MV_Q8_0;
  const int64_t bb = q8 ? 34 : fmt == MV_Q4_0 ? 18 : 20, co = fmt == MV_Q4_1 ? 4 : 2;
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i sidx = _mm512_mullo_epi32(lane, _mm512_set1_epi32((int32_t)bb));
  /* lanes -> block of the pair: Q8_0 [A x8 | B x8], Q4_0 [A x4, B x4, A x4, B x4] */
  const __m512i pair = q8 ? _mm512_srli_epi32(lane, 3) : _mm512_and_si512(_mm512_srli_epi32(lane, 2), _mm512_set1_epi32(1));
  const __m512i flip = _mm512_set1_epi8((char)0x80), nib = _mm512_set1_epi8(0x0F);
  __m512 acc[MV_ROWS], accz[MV_ROWS];
  for (int r = 0; r < R; r++) { acc[r] = _mm512_setzero_ps(); accz[r] = _mm512_setzero_ps(); }
  int64_t g0 = 0;
  for (; g0 + 16 <= nb; g0 += 16) {
    const uint8_t *blk = row + g0 * bb;
    /* the thread's rows are contiguous: ask for the bytes PF ahead, past this row's end too */
    for (int64_t l = 0; l < 16 * bb; l += 64) _mm_prefetch((const char *)blk + PF + l, _MM_HINT_T0);
    const __m512i head = _mm512_i32gather_epi32(sidx, blk, 1);
    const __m512 dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(head));
    const __m512 zw = fmt == MV_Q4_1 ? _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(head, 16))) : dw;
    __m512 s[MV_ROWS];
    for (int r = 0; r < R; r++) {
      s[r] = _mm512_mul_ps(dw, _mm512_loadu_ps(dx[r] + g0));
      accz[r] = _mm512_fmadd_ps(zw, _mm512_loadu_ps(zc[r] + g0), accz[r]);
    }
    for (int p = 0; p < 8; p++) {
      const uint8_t *a = blk + 2 * p * bb + co;
      __m512i wv;
      if (q8) {
        wv = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a)),
                                _mm256_loadu_si256((const __m256i *)(a + 34)), 1);
        wv = _mm512_xor_si512(wv, flip);
      } else {
        __m256i y = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)a)),
                                            _mm_loadu_si128((const __m128i *)(a + bb)), 1);
        wv = _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(y), _mm256_srli_epi16(y, 4), 1), nib);
      }
      const __m512i idx = _mm512_add_epi32(pair, _mm512_set1_epi32(2 * p));
      for (int r = 0; r < R; r++) {
        __m512i is = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wv,
                                         _mm512_loadu_si512((const void *)(xs[r] + (g0 + 2 * p) * 32)));
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), _mm512_permutexvar_ps(idx, s[r]), acc[r]);
      }
    }
  }
  for (int r = 0; r < R; r++) {
    float t = _mm512_reduce_add_ps(_mm512_add_ps(acc[r], accz[r]));
    for (int64_t b = g0; b < nb; b++) {
      const uint8_t *blk = row + b * bb;
      t += half_at(blk) * dx[r][b] * (float)tail_dot(fmt, blk, xq[r] + b * 32);
      if (fmt == MV_Q4_1) t += half_at(blk + 2) * zc[r][b];
    }
    res[r] = t;
  }
}

/* Q4_K: a super-block's 32 code bytes p hold sub-blocks 2p (low nibbles) and 2p+1 (high) in
 * order, so [low | high] is 64 weights in k order against the activation codes as they are.
 * The 8 sub-block scales and minimums are decoded once per super-block for the R rows (8-lane
 * vectors); the minimums' term accumulates in its own vector. */
VNNI static inline __attribute__((always_inline)) void
row_dot_q4k(const int R, const uint8_t *row, int64_t nb, const em_qc_act *a, int64_t r0,
            float *res) {
  const __m512i nib = _mm512_set1_epi8(0x0F);
  const __m512i hi8 = _mm512_srli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 3);
  __m512 acc[MV_ROWS];
  __m256 accm[MV_ROWS];
  for (int r = 0; r < R; r++) { acc[r] = _mm512_setzero_ps(); accm[r] = _mm256_setzero_ps(); }
  for (int64_t sb = 0; sb < nb / 8; sb++) {
    const uint8_t *blk = row + sb * 144;
    for (int l = 0; l < 144; l += 64) _mm_prefetch((const char *)blk + PF + l, _MM_HINT_T0);
    /* the 12 bytes of 6-bit scales and minimums to 8 + 8 bytes (ggml's mask arithmetic) */
    uint32_t u[4];
    memcpy(u, blk + 4, 12);
    u[3] = ((u[2] >> 4) & 0x0f0f0f0fu) | (((u[1] >> 6) & 0x03030303u) << 4);
    const uint32_t mins_lo = u[1] & 0x3f3f3f3fu;
    u[1] = (u[2] & 0x0f0f0f0fu) | (((u[0] >> 6) & 0x03030303u) << 4);
    u[2] = mins_lo;
    u[0] &= 0x3f3f3f3fu;
    const __m256 dsc = _mm256_mul_ps(_mm256_set1_ps(half_at(blk)), _mm256_cvtepi32_ps(
        _mm256_cvtepu8_epi32(_mm_set_epi32(0, 0, (int)u[1], (int)u[0]))));
    const __m256 dmn = _mm256_mul_ps(_mm256_set1_ps(half_at(blk + 2)), _mm256_cvtepi32_ps(
        _mm256_cvtepu8_epi32(_mm_set_epi32(0, 0, (int)u[3], (int)u[2]))));
    __m512 sv[MV_ROWS];
    for (int r = 0; r < R; r++) {
      const int64_t at = (r0 + r) * a->nb + sb * 8;
      const __m256 dx = _mm256_loadu_ps(a->d + at);
      const __m256 sx = _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)(a->s + at)));
      sv[r] = _mm512_castps256_ps512(_mm256_mul_ps(dsc, dx));
      accm[r] = _mm256_fmadd_ps(dmn, _mm256_mul_ps(dx, sx), accm[r]);
    }
    for (int p = 0; p < 4; p++) {
      __m256i y = _mm256_loadu_si256((const __m256i *)(blk + 16 + 32 * p));
      __m512i wv = _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(y), _mm256_srli_epi16(y, 4), 1), nib);
      const __m512i idx = _mm512_add_epi32(hi8, _mm512_set1_epi32(2 * p));
      for (int r = 0; r < R; r++) {
        const int8_t *x = a->q + (r0 + r) * a->k + sb * 256 + 64 * p;
        __m512i is = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wv, _mm512_loadu_si512((const void *)x));
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), _mm512_permutexvar_ps(idx, sv[r]), acc[r]);
      }
    }
  }
  for (int r = 0; r < R; r++) {
    __m256 m = accm[r];
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    res[r] = _mm512_reduce_add_ps(acc[r]) - _mm_cvtss_f32(h);
  }
}

VNNI static int matvec_q4k(const em_qc_act *a, int64_t m, const uint8_t *w, int64_t n, float *out,
                      int threads) {
  const int64_t row_bytes = a->nb / 8 * 144;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t j = 0; j < n; j++) {
    float res[MV_ROWS];
    const uint8_t *row = w + j * row_bytes;
    switch (m) {
    case 1: row_dot_q4k(1, row, a->nb, a, 0, res); break;
    case 2: row_dot_q4k(2, row, a->nb, a, 0, res); break;
    case 3: row_dot_q4k(3, row, a->nb, a, 0, res); break;
    default: row_dot_q4k(4, row, a->nb, a, 0, res); break;
    }
    for (int64_t r = 0; r < m; r++) out[r * n + j] = res[r];
  }
  return 1;
}

/* Q6_K: in each 128-half, the low nibbles of ql[0..63] with qh's bit pairs 0 and 1 are weights
 * 0..63 in k order, the high nibbles with pairs 2 and 3 weights 64..127; each 4 lanes share one
 * 16-weight scale. The zero point (32) comes off with the per-16 activation code sums. */
VNNI static inline __attribute__((always_inline)) void
row_dot_q6k(const int R, const uint8_t *row, int64_t nb, const em_qc_act *a, int64_t r0,
            float *res) {
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i by4 = _mm512_srli_epi32(lane, 2), by2 = _mm512_srli_epi32(lane, 1);
  /* per-16 sums from per-32 ones: lanes 2b and 2b+1 take the first and second 16 of block b */
  const __m512i lo_hi = _mm512_add_epi32(by2, _mm512_slli_epi32(_mm512_and_si512(lane, _mm512_set1_epi32(1)), 3));
  const __m512i m0f = _mm512_set1_epi8(0x0F), m03 = _mm512_set1_epi8(0x03);
  __m512 acc[MV_ROWS], accz[MV_ROWS];
  for (int r = 0; r < R; r++) { acc[r] = _mm512_setzero_ps(); accz[r] = _mm512_setzero_ps(); }
  for (int64_t sb = 0; sb < nb / 8; sb++) {
    const uint8_t *blk = row + sb * 210;
    for (int l = 0; l < 210; l += 64) _mm_prefetch((const char *)blk + PF + l, _MM_HINT_T0);
    const __m512 dsc = _mm512_mul_ps(_mm512_set1_ps(half_at(blk + 208)),
        _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 192)))));
    __m512 sv[MV_ROWS];
    for (int r = 0; r < R; r++) {
      const int64_t at = (r0 + r) * a->nb + sb * 8;
      const __m512 dx = _mm512_permutexvar_ps(by2, _mm512_castps256_ps512(_mm256_loadu_ps(a->d + at)));
      sv[r] = _mm512_mul_ps(dsc, dx);
      const __m256i s32 = _mm256_loadu_si256((const __m256i *)(a->s + at));
      const __m256i slo = _mm256_loadu_si256((const __m256i *)(a->s_lo + at));
      const __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(slo), _mm256_sub_epi32(s32, slo), 1);
      const __m512 s16 = _mm512_cvtepi32_ps(_mm512_permutexvar_epi32(lo_hi, both));
      accz[r] = _mm512_fmadd_ps(sv[r], _mm512_mul_ps(s16, _mm512_set1_ps(-32.0f)), accz[r]);
    }
    for (int h = 0; h < 2; h++) {
      const __m512i zl = _mm512_loadu_si512((const void *)(blk + 64 * h));
      const __m256i yh = _mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * h));
      const __m512i zh = _mm512_inserti64x4(_mm512_castsi256_si512(yh), _mm256_srli_epi16(yh, 2), 1);
      __m512i wv[2];
      wv[0] = _mm512_or_si512(_mm512_and_si512(zl, m0f), _mm512_slli_epi16(_mm512_and_si512(zh, m03), 4));
      wv[1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(zl, 4), m0f),
                              _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(zh, 4), m03), 4));
      for (int c = 0; c < 2; c++) {
        const __m512i idx = _mm512_add_epi32(by4, _mm512_set1_epi32(8 * h + 4 * c));
        for (int r = 0; r < R; r++) {
          const int8_t *x = a->q + (r0 + r) * a->k + sb * 256 + 128 * h + 64 * c;
          __m512i is = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wv[c], _mm512_loadu_si512((const void *)x));
          acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), _mm512_permutexvar_ps(idx, sv[r]), acc[r]);
        }
      }
    }
  }
  for (int r = 0; r < R; r++) res[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc[r], accz[r]));
}

VNNI static int matvec_q6k(const em_qc_act *a, int64_t m, const uint8_t *w, int64_t n, float *out,
                           int threads) {
  const int64_t row_bytes = a->nb / 8 * 210;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t j = 0; j < n; j++) {
    float res[MV_ROWS];
    const uint8_t *row = w + j * row_bytes;
    switch (m) {
    case 1: row_dot_q6k(1, row, a->nb, a, 0, res); break;
    case 2: row_dot_q6k(2, row, a->nb, a, 0, res); break;
    case 3: row_dot_q6k(3, row, a->nb, a, 0, res); break;
    default: row_dot_q6k(4, row, a->nb, a, 0, res); break;
    }
    for (int64_t r = 0; r < m; r++) out[r * n + j] = res[r];
  }
  return 1;
}

/* R and the format as constants: one specialized loop each */
#define MV_CASES(F)                                                                            \
  switch (m) {                                                                               \
    case 1: row_dot(1, F, row, nb, xs, zcr, dx, xq, res); break;                               \
    case 2: row_dot(2, F, row, nb, xs, zcr, dx, xq, res); break;                               \
    case 3: row_dot(3, F, row, nb, xs, zcr, dx, xq, res); break;                               \
    default: row_dot(4, F, row, nb, xs, zcr, dx, xq, res); break;                              \
    }

VNNI int em_qc_matvec_vnni(const em_qc_format *f, const em_qc_act *a, int64_t m,
                           const uint8_t *w, int64_t n, float *out, int threads) {
  if (m > MV_ROWS) return 0;
  if (f->format == EM_QUANT_Q4_K) return matvec_q4k(a, m, w, n, out, threads);
  if (f->format == EM_QUANT_Q6_K) return matvec_q6k(a, m, w, n, out, threads);
  if (f->format != EM_QUANT_Q8_0 && f->format != EM_QUANT_Q4_0 && f->format != EM_QUANT_Q4_1)
    return 0;
  const int q8 = f->format == EM_QUANT_Q8_0, q41 = f->format == EM_QUANT_Q4_1;
  const int64_t nb = a->nb, k = a->k, row_bytes = nb * f->block_bytes;
  /* per activation row: the codes in register order (Q4_0: [A 0-15, B 0-15, A 16-31, B 16-31]
   * per pair of blocks, as the nibbles unpack) and -z * dx * sum q per block */
  int8_t *perm = q8 ? NULL : malloc((size_t)(m * k));
  float *zc = malloc((size_t)(m * nb) * sizeof(float));
  if ((!q8 && !perm) || !zc) { free(perm); free(zc); return -1; }
  const int8_t *xs[MV_ROWS], *xq[MV_ROWS];
  const float *zcr[MV_ROWS], *dx[MV_ROWS];
  for (int64_t r = 0; r < m; r++) {
    xq[r] = a->q + r * k;
    dx[r] = a->d + r * nb;
    zcr[r] = zc + r * nb;
    for (int64_t b = 0; b < nb; b++)
      zc[r * nb + b] = (q41 ? 1.0f : -(float)f->z) * a->d[r * nb + b] * (float)a->s[r * nb + b];
    if (q8) { xs[r] = xq[r]; continue; }
    int8_t *pr = perm + r * k;
    for (int64_t b = 0; b + 1 < nb; b += 2) {
      const int8_t *x = xq[r] + b * 32;
      memcpy(pr + b * 32, x, 16); memcpy(pr + b * 32 + 16, x + 32, 16);
      memcpy(pr + b * 32 + 32, x + 16, 16); memcpy(pr + b * 32 + 48, x + 48, 16);
    }
    xs[r] = pr;
  }
  /* a zero-scale block's NaN-free product: the tail and the vector loop agree on finite input;
   * a NaN activation block has dx NaN, which both propagate */
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t j = 0; j < n; j++) {
    float res[MV_ROWS];
    const uint8_t *row = w + j * row_bytes;
    if (q8) MV_CASES(MV_Q8_0) else if (q41) MV_CASES(MV_Q4_1) else MV_CASES(MV_Q4_0)
    for (int64_t r = 0; r < m; r++) out[r * n + j] = res[r];
  }
  free(perm); free(zc);
  return 1;
}
