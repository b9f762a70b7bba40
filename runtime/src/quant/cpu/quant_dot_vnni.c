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
 * The packers for Q8_0 and Q4_0 gather the 4-byte code groups of the 16 rows (one vpgatherdd
 * per 4 k), which keeps the batch-1 case, where packing is all the work besides the loads,
 * close to the memory's speed. The other formats use the portable packer. */
#include "../quant_cpu.h"
#include "../../internal.h"

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

static inline int32_t load4(const int8_t *p) {
  int32_t v;
  memcpy(&v, p, 4);
  return v;
}

/* R activation rows (R <= 4, a constant after inlining) against nkb packed blocks. */
VNNI static inline __attribute__((always_inline)) void
rows_vnni(const int R, const em_qc_format *f, const em_qc_act *a, int64_t row0, int64_t kb0,
          int64_t nkb, const em_qc_block *blk, float *acc) {
  __m512 av[4];
  const int8_t *xq[4];
  for (int r = 0; r < R; r++) {
    av[r] = _mm512_loadu_ps(acc + r * EM_QC_NR);
    xq[r] = a->q + (row0 + r) * a->k;
  }
  const int z = f->z, split = f->split, has_min = f->has_min;
  for (int64_t b = 0; b < nkb; b++) {
    const em_qc_block *o = blk + b;
    const int64_t kb = kb0 + b;
    __m512i wv[8];
    for (int g = 0; g < 8; g++) wv[g] = _mm512_load_si512((const void *)o->codes[g]);
    const __m512 alo = _mm512_load_ps(o->a_lo);
    for (int r = 0; r < R; r++) {
      const int64_t at = (row0 + r) * a->nb + kb;
      const int32_t s = a->s[at];
      const float d = a->d[at];
      const int8_t *xb = xq[r] + kb * 32;
      if (!split) {
        __m512i is = _mm512_set1_epi32(-z * s);
        for (int g = 0; g < 8; g++)
          is = _mm512_dpbusd_epi32(is, wv[g], _mm512_set1_epi32(load4(xb + 4 * g)));
        av[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), _mm512_mul_ps(alo, _mm512_set1_ps(d)), av[r]);
      } else {
        const int32_t slo = a->s_lo[at];
        __m512i lo = _mm512_set1_epi32(-z * slo), hi = _mm512_set1_epi32(-z * (s - slo));
        for (int g = 0; g < 4; g++) {
          lo = _mm512_dpbusd_epi32(lo, wv[g], _mm512_set1_epi32(load4(xb + 4 * g)));
          hi = _mm512_dpbusd_epi32(hi, wv[4 + g], _mm512_set1_epi32(load4(xb + 16 + 4 * g)));
        }
        __m512 t = _mm512_mul_ps(_mm512_cvtepi32_ps(lo), alo);
        t = _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi), _mm512_load_ps(o->a_hi), t);
        av[r] = _mm512_fmadd_ps(t, _mm512_set1_ps(d), av[r]);
      }
      if (has_min)
        av[r] = _mm512_fmadd_ps(_mm512_load_ps(o->bm), _mm512_set1_ps(d * (float)s), av[r]);
    }
  }
  for (int r = 0; r < R; r++) _mm512_storeu_ps(acc + r * EM_QC_NR, av[r]);
}

VNNI void em_qc_kernel_vnni(const em_qc_format *f, const em_qc_act *a, int64_t i0, int64_t ni,
                            int64_t kb0, int64_t nkb, const em_qc_block *blk, float *acc) {
  int64_t i = 0;
  for (; i + 4 <= ni; i += 4) rows_vnni(4, f, a, i0 + i, kb0, nkb, blk, acc + i * EM_QC_NR);
  for (; i < ni; i++) rows_vnni(1, f, a, i0 + i, kb0, nkb, blk, acc + i * EM_QC_NR);
}

VNNI int em_qc_pack_vnni(const em_qc_format *f, const uint8_t *w, int64_t row_bytes, int64_t r0,
                         int nr, int64_t kb0, int64_t nkb, em_qc_block *blk) {
  if (f->format != EM_QUANT_Q8_0 && f->format != EM_QUANT_Q4_0) return 0;
  if (row_bytes > INT32_MAX / EM_QC_NR) return 0; /* gather offsets are int32 */
  const __m512i idx = _mm512_mullo_epi32(
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
      _mm512_set1_epi32((int32_t)row_bytes));
  const __mmask16 m = nr >= EM_QC_NR ? (__mmask16)0xFFFF : (__mmask16)((1u << nr) - 1);
  const __m512i zero = _mm512_setzero_si512(), nib = _mm512_set1_epi8(0x0F);
  const int64_t bb = f->block_bytes;
  const uint8_t *base = w + r0 * row_bytes;
  for (int64_t b = 0; b < nkb; b++) {
    const uint8_t *p = base + (kb0 + b) * bb;
    em_qc_block *o = blk + b;
    /* the fp16 scale is the low half of the first 4 bytes of each row's block */
    __m512i sv = _mm512_mask_i32gather_epi32(zero, m, idx, p, 1);
    __m512 sc = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(sv));
    _mm512_store_ps(o->a_lo, sc);
    _mm512_store_ps(o->a_hi, sc);
    _mm512_store_ps(o->bm, _mm512_setzero_ps());
    if (f->format == EM_QUANT_Q8_0) {
      const __m512i flip = _mm512_set1_epi8((char)0x80);
      for (int g = 0; g < 8; g++) {
        __m512i v = _mm512_mask_i32gather_epi32(zero, m, idx, p + 2 + 4 * g, 1);
        _mm512_store_si512((void *)o->codes[g], _mm512_xor_si512(v, flip));
      }
    } else {
      for (int g = 0; g < 4; g++) {
        __m512i v = _mm512_mask_i32gather_epi32(zero, m, idx, p + 2 + 4 * g, 1);
        _mm512_store_si512((void *)o->codes[g], _mm512_and_si512(v, nib));
        _mm512_store_si512((void *)o->codes[4 + g], _mm512_and_si512(_mm512_srli_epi16(v, 4), nib));
      }
    }
  }
  return 1;
}
