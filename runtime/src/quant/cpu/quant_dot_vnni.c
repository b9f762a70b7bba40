/* quant_dot_vnni.c: the AVX-512 VNNI kernel of the quantized Linear (runtime/src/quant/
 * quant_cpu.h), compiled for that ISA alone (target attributes) so the rest of the build stays
 * portable; quant_cpu_linear.c calls it only when the CPU reports avx512f/bw/vl/vnni.
 *
 * Lanes are the panel's 16 weight rows, so no horizontal sums: one vpdpbusd multiplies 4 k of
 * the 16 rows (u8 codes) by 4 activation codes broadcast (s8) and adds into the rows' int32
 * sums; 8 of them cover a 32-block. vpdpbusd is unsigned x signed: every format's weight codes
 * are unsigned here (Q8_0's offset by 128) and the activation codes signed, and the zero point
 * comes off exactly by starting each block's int32 sum at -z * (sum of the activation codes).
 * Then one float multiply-add per block (cvt, scale, fma). Four activation rows share each load
 * of the weight vectors.
 *
 * The packers gather the 4-byte code groups of the 16 rows (one vpgatherdd per 4 k, two for
 * Q6_K's split bits): decoding is paid once per panel chunk for all the activation rows, but
 * the portable packer's byte loops cost about as much as the products at batch 64. The affine
 * formats use the portable packer. */
#include "../quant_cpu.h"
#include "../../internal.h"

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,fma")))

static inline int32_t load4(const int8_t *p) {
  int32_t v;
  memcpy(&v, p, 4);
  return v;
}

/* R activation rows (R <= 4) against nkb packed blocks; R, SPLIT (two scales per 32) and MIN
 * (a minimum's term) are constants after inlining, so the loop has no branches. Each row keeps
 * two int32 chains per block (even and odd k groups, or Q6_K's two halves), and the rows'
 * chains interleave: 2R independent vpdpbusd chains hide the instruction's latency. */
VNNI static inline __attribute__((always_inline)) void
rows_vnni(const int R, const int SPLIT, const int MIN, const em_qc_format *f, const em_qc_act *a,
          int64_t row0, int64_t kb0, int64_t nkb, const em_qc_block *blk, float *acc) {
  __m512 av[4];
  const int8_t *xq[4];
  for (int r = 0; r < R; r++) {
    av[r] = _mm512_loadu_ps(acc + r * EM_QC_NR);
    xq[r] = a->q + (row0 + r) * a->k;
  }
  const int z = f->z;
  for (int64_t b = 0; b < nkb; b++) {
    const em_qc_block *o = blk + b;
    const int64_t kb = kb0 + b;
    __m512i is[4][2];
    float d[4], ds[4];
    for (int r = 0; r < R; r++) {
      const int64_t at = (row0 + r) * a->nb + kb;
      const int32_t s = a->s[at];
      d[r] = a->d[at];
      ds[r] = d[r] * (float)s;
      if (SPLIT) {
        const int32_t slo = a->s_lo[at];
        is[r][0] = _mm512_set1_epi32(-z * slo);
        is[r][1] = _mm512_set1_epi32(-z * (s - slo));
      } else {
        is[r][0] = _mm512_set1_epi32(-z * s);
        is[r][1] = _mm512_setzero_si512();
      }
    }
    for (int g = 0; g < 8; g++) {
      const __m512i wv = _mm512_load_si512((const void *)o->codes[g]);
      const int c = SPLIT ? g >> 2 : g & 1;
      for (int r = 0; r < R; r++)
        is[r][c] = _mm512_dpbusd_epi32(is[r][c], wv, _mm512_set1_epi32(load4(xq[r] + kb * 32 + 4 * g)));
    }
    const __m512 alo = _mm512_load_ps(o->a_lo);
    for (int r = 0; r < R; r++) {
      __m512 t;
      if (SPLIT)
        t = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[r][1]), _mm512_load_ps(o->a_hi),
                            _mm512_mul_ps(_mm512_cvtepi32_ps(is[r][0]), alo));
      else
        t = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(is[r][0], is[r][1])), alo);
      av[r] = _mm512_fmadd_ps(t, _mm512_set1_ps(d[r]), av[r]);
      if (MIN) av[r] = _mm512_fmadd_ps(_mm512_load_ps(o->bm), _mm512_set1_ps(ds[r]), av[r]);
    }
  }
  for (int r = 0; r < R; r++) _mm512_storeu_ps(acc + r * EM_QC_NR, av[r]);
}

#define ROWS_VARIANT(name, SPLIT, MIN)                                                          \
  VNNI static void name(const em_qc_format *f, const em_qc_act *a, int64_t i0, int64_t ni,      \
                        int64_t kb0, int64_t nkb, const em_qc_block *blk, float *acc) {         \
    int64_t i = 0;                                                                              \
    for (; i + 4 <= ni; i += 4) rows_vnni(4, SPLIT, MIN, f, a, i0 + i, kb0, nkb, blk, acc + i * EM_QC_NR); \
    for (; i < ni; i++) rows_vnni(1, SPLIT, MIN, f, a, i0 + i, kb0, nkb, blk, acc + i * EM_QC_NR);        \
  }
ROWS_VARIANT(rows_plain, 0, 0)
ROWS_VARIANT(rows_min, 0, 1)
ROWS_VARIANT(rows_split, 1, 0)

VNNI void em_qc_kernel_vnni(const em_qc_format *f, const em_qc_act *a, int64_t i0, int64_t ni,
                            int64_t kb0, int64_t nkb, const em_qc_block *blk, float *acc) {
  if (f->split) rows_split(f, a, i0, ni, kb0, nkb, blk, acc);  /* Q6_K: no minimum */
  else if (f->has_min) rows_min(f, a, i0, ni, kb0, nkb, blk, acc);
  else rows_plain(f, a, i0, ni, kb0, nkb, blk, acc);
}

static float half_at(const uint8_t *p) {
  uint16_t h;
  memcpy(&h, p, 2);
  return em_half_to_float(h);
}

/* Q4_K: x-block kb is sub-block kb % 8 of super-block kb / 8, its 32 codes the low (even
 * sub-block) or high (odd) nibbles of 32 bytes: 8 gathers. The scales and minimums are decoded
 * per row, plainly (16 rows x 1 sub-block). */
VNNI static void pack_q4k(const uint8_t *w, int64_t row_bytes, int64_t r0, int nr, int64_t kb0,
                          int64_t nkb, em_qc_block *blk, __m512i idx, __mmask16 m) {
  const __m512i zero = _mm512_setzero_si512(), nib = _mm512_set1_epi8(0x0F);
  const uint8_t *base = w + r0 * row_bytes;
  for (int64_t b = 0; b < nkb; b++) {
    const int64_t kb = kb0 + b, sb = kb / 8;
    const int s = (int)(kb % 8);
    const uint8_t *q = base + sb * 144 + 16 + 32 * (s / 2);
    em_qc_block *o = blk + b;
    for (int g = 0; g < 8; g++) {
      __m512i v = _mm512_mask_i32gather_epi32(zero, m, idx, q + 4 * g, 1);
      if (s & 1) v = _mm512_srli_epi16(v, 4);
      _mm512_store_si512((void *)o->codes[g], _mm512_and_si512(v, nib));
    }
    for (int c = 0; c < EM_QC_NR; c++) {
      float a = 0, bm = 0;
      if (c < nr) {
        const uint8_t *sbp = base + c * row_bytes + sb * 144, *sc = sbp + 4;
        int scale, mn;
        if (s < 4) { scale = sc[s] & 63; mn = sc[s + 4] & 63; }
        else {
          scale = (sc[s + 4] & 0xF) | ((sc[s - 4] >> 6) << 4);
          mn = (sc[s + 4] >> 4) | ((sc[s] >> 6) << 4);
        }
        a = half_at(sbp) * (float)scale;
        bm = -half_at(sbp + 2) * (float)mn;
      }
      o->a_lo[c] = o->a_hi[c] = a;
      o->bm[c] = bm;
    }
  }
}

/* Q6_K: x-block kb is 32-slice qi of 128-half h of super-block kb / 8. Its low 4 bits are the
 * low (qi 0, 1) or high (qi 2, 3) nibbles of ql[64 h + 32 (qi & 1) + l], its high 2 bits the
 * pair qi of qh[32 h + l]: 16 gathers. Its two 16-weight scales are bytes 2 qi and 2 qi + 1 of
 * the half's 8, and d the high half of bytes 206..209 (a 4-byte read that stays in the block). */
VNNI static void pack_q6k(const uint8_t *w, int64_t row_bytes, int64_t r0, int64_t kb0, int64_t nkb,
                          em_qc_block *blk, __m512i idx, __mmask16 m) {
  const __m512i zero = _mm512_setzero_si512(), nib = _mm512_set1_epi8(0x0F);
  const __m512i two = _mm512_set1_epi8(0x03);
  const uint8_t *base = w + r0 * row_bytes;
  for (int64_t b = 0; b < nkb; b++) {
    const int64_t kb = kb0 + b;
    const int s = (int)(kb % 8), h = s / 4, qi = s % 4;
    const uint8_t *sb = base + kb / 8 * 210;
    const uint8_t *ql = sb + 64 * h + 32 * (qi & 1), *qh = sb + 128 + 32 * h;
    em_qc_block *o = blk + b;
    for (int g = 0; g < 8; g++) {
      __m512i lo = _mm512_mask_i32gather_epi32(zero, m, idx, ql + 4 * g, 1);
      __m512i hi = _mm512_mask_i32gather_epi32(zero, m, idx, qh + 4 * g, 1);
      if (qi >= 2) lo = _mm512_srli_epi16(lo, 4);
      hi = _mm512_and_si512(_mm512_srli_epi16(hi, 2 * qi), two);
      _mm512_store_si512((void *)o->codes[g],
                         _mm512_or_si512(_mm512_and_si512(lo, nib), _mm512_slli_epi16(hi, 4)));
    }
    const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(
        _mm512_mask_i32gather_epi32(zero, m, idx, sb + 206, 1), 16)));
    const __m512i sc = _mm512_mask_i32gather_epi32(zero, m, idx, sb + 192 + 8 * h + 2 * qi, 1);
    const __m512 slo = _mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(sc, 24), 24));
    const __m512 shi = _mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(sc, 16), 24));
    _mm512_store_ps(o->a_lo, _mm512_mul_ps(d, slo));
    _mm512_store_ps(o->a_hi, _mm512_mul_ps(d, shi));
    _mm512_store_ps(o->bm, _mm512_setzero_ps());
  }
}

VNNI int em_qc_pack_vnni(const em_qc_format *f, const uint8_t *w, int64_t row_bytes, int64_t r0,
                         int nr, int64_t kb0, int64_t nkb, em_qc_block *blk) {
  if (f->format != EM_QUANT_Q8_0 && f->format != EM_QUANT_Q4_0 && f->format != EM_QUANT_Q4_1 &&
      f->format != EM_QUANT_Q4_K && f->format != EM_QUANT_Q6_K)
    return 0;
  if (row_bytes > INT32_MAX / EM_QC_NR) return 0; /* gather offsets are int32 */
  const __m512i idx = _mm512_mullo_epi32(
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
      _mm512_set1_epi32((int32_t)row_bytes));
  const __mmask16 m = nr >= EM_QC_NR ? (__mmask16)0xFFFF : (__mmask16)((1u << nr) - 1);
  const __m512i zero = _mm512_setzero_si512(), nib = _mm512_set1_epi8(0x0F);
  const int64_t bb = f->block_bytes;
  const uint8_t *base = w + r0 * row_bytes;
  if (f->format == EM_QUANT_Q4_K) {
    pack_q4k(w, row_bytes, r0, nr, kb0, nkb, blk, idx, m);
    return 1;
  }
  if (f->format == EM_QUANT_Q6_K) {
    pack_q6k(w, row_bytes, r0, kb0, nkb, blk, idx, m);
    return 1;
  }
  for (int64_t b = 0; b < nkb; b++) {
    const uint8_t *p = base + (kb0 + b) * bb;
    em_qc_block *o = blk + b;
    /* the fp16 scale is the low half of the first 4 bytes of each row's block */
    __m512i sv = _mm512_mask_i32gather_epi32(zero, m, idx, p, 1);
    __m512 sc = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(sv));
    _mm512_store_ps(o->a_lo, sc);
    _mm512_store_ps(o->a_hi, sc);
    /* Q4_1's minimum is the high half of the same 4 bytes */
    _mm512_store_ps(o->bm, f->format == EM_QUANT_Q4_1
                               ? _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(sv, 16)))
                               : _mm512_setzero_ps());
    const int co = f->format == EM_QUANT_Q4_1 ? 4 : 2;
    if (f->format == EM_QUANT_Q8_0) {
      const __m512i flip = _mm512_set1_epi8((char)0x80);
      for (int g = 0; g < 8; g++) {
        __m512i v = _mm512_mask_i32gather_epi32(zero, m, idx, p + 2 + 4 * g, 1);
        _mm512_store_si512((void *)o->codes[g], _mm512_xor_si512(v, flip));
      }
    } else {
      for (int g = 0; g < 4; g++) {
        __m512i v = _mm512_mask_i32gather_epi32(zero, m, idx, p + co + 4 * g, 1);
        _mm512_store_si512((void *)o->codes[g], _mm512_and_si512(v, nib));
        _mm512_store_si512((void *)o->codes[4 + g], _mm512_and_si512(_mm512_srli_epi16(v, 4), nib));
      }
    }
  }
  return 1;
}
