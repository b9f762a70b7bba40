/* quant_dot_ref.c: the portable compute kernel of the quantized Linear (runtime/src/quant/
 * quant_cpu.h), and the same loops compiled for AVX2+FMA, which GCC vectorizes there with
 * 256-bit integer multiplies: the AVX2 path costs no hand-written intrinsics, and the two paths
 * cannot drift apart. Per activation row and 32-block: int32 dot products of the u8 weight codes
 * with the s8 activation codes for the 16 rows of the panel, the zero point removed in int32,
 * then one float multiply-add (two for Q6_K's 16-element scales). */
#include "../quant_cpu.h"

static inline __attribute__((always_inline)) void
kernel_body(const em_qc_format *f, const em_qc_act *a, int64_t i0, int64_t ni, int64_t kb0,
            int64_t nkb, const em_qc_block *blk, float *acc) {
  const int z = f->z;
  for (int64_t i = 0; i < ni; i++) {
    const int64_t row = i0 + i;
    const int8_t *xq = a->q + row * a->k;
    float *ac = acc + i * EM_QC_NR;
    for (int64_t b = 0; b < nkb; b++) {
      const int64_t kb = kb0 + b;
      const em_qc_block *o = blk + b;
      const int8_t *xb = xq + kb * 32;
      int32_t lo[EM_QC_NR] = {0}, hi[EM_QC_NR] = {0};
      for (int g = 0; g < 4; g++)
        for (int t = 0; t < 4; t++) {
          int32_t xl = xb[4 * g + t], xh = xb[16 + 4 * g + t];
          for (int c = 0; c < EM_QC_NR; c++) {
            lo[c] += (int32_t)o->codes[g][c][t] * xl;
            hi[c] += (int32_t)o->codes[4 + g][c][t] * xh;
          }
        }
      const float d = a->d[row * a->nb + kb];
      const int32_t s = a->s[row * a->nb + kb], slo = a->s_lo[row * a->nb + kb];
      const float ds = d * (float)s;
      if (f->split) {
        for (int c = 0; c < EM_QC_NR; c++)
          ac[c] += d * (o->a_lo[c] * (float)(lo[c] - z * slo) +
                        o->a_hi[c] * (float)(hi[c] - z * (s - slo))) + o->bm[c] * ds;
      } else {
        for (int c = 0; c < EM_QC_NR; c++)
          ac[c] += o->a_lo[c] * d * (float)(lo[c] + hi[c] - z * s) + o->bm[c] * ds;
      }
    }
  }
}

void em_qc_kernel_portable(const em_qc_format *f, const em_qc_act *a, int64_t i0, int64_t ni,
                           int64_t kb0, int64_t nkb, const em_qc_block *blk, float *acc) {
  kernel_body(f, a, i0, ni, kb0, nkb, blk, acc);
}

__attribute__((target("avx2,fma")))
void em_qc_kernel_avx2(const em_qc_format *f, const em_qc_act *a, int64_t i0, int64_t ni,
                       int64_t kb0, int64_t nkb, const em_qc_block *blk, float *acc) {
  kernel_body(f, a, i0, ni, kb0, nkb, blk, acc);
}
