/*
 * attention_rows.c: attention_rows.h's AVX-512 row loops.
 */
#include <immintrin.h>
#include <math.h>

#include "attention_rows.h"
#include "sgemm.h"

#define AVX512 __attribute__((target("avx512f")))

bool em_attn_rows_available(void) { return em_sgemm_available(); }

/* e^x, 16 lanes: x = n ln2 + r with |r| <= ln2 / 2, e^r by Cephes' expf polynomial, then
 * scaled by 2^n (scalef underflows to 0 below about -104 and gives inf above 88.7). -inf gives
 * 0 and NaN stays NaN. */
AVX512 static inline __m512 exp16(__m512 x) {
  const __m512 log2e = _mm512_set1_ps(1.44269504088896341f);
  const __m512 c1 = _mm512_set1_ps(0.693359375f), c2 = _mm512_set1_ps(-2.12194440e-4f);
  __mmask16 live = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-104.0f), _CMP_NLT_UQ);
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT);
  __m512 r = _mm512_fnmadd_ps(n, c1, x);
  r = _mm512_fnmadd_ps(n, c2, r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  __m512 r2 = _mm512_mul_ps(r, r);
  p = _mm512_fmadd_ps(p, r2, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_maskz_scalef_ps(live, p, n);
}

static inline __mmask16 tail(int64_t n) { return n >= 16 ? 0xFFFF : (__mmask16)((1u << n) - 1); }

AVX512 static float row_max(const float *s, int64_t n, float m) {
  __m512 acc = _mm512_set1_ps(m);
  for (int64_t j = 0; j < n; j += 16) {
    __m512 v = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), tail(n - j), s + j);
    acc = _mm512_max_ps(acc, v);
  }
  return _mm512_reduce_max_ps(acc);
}

/* s <- exp(s - m); returns the sum. */
AVX512 static float row_exp(float *s, int64_t n, float m) {
  __m512 acc = _mm512_setzero_ps(), mv = _mm512_set1_ps(m);
  for (int64_t j = 0; j < n; j += 16) {
    __mmask16 k = tail(n - j);
    __m512 v = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, s + j), mv));
    _mm512_mask_storeu_ps(s + j, k, v);
    acc = _mm512_add_ps(acc, _mm512_maskz_mov_ps(k, v));
  }
  return _mm512_reduce_add_ps(acc);
}

AVX512 static void row_zero(float *s, int64_t n) {
  for (int64_t j = 0; j < n; j += 16)
    _mm512_mask_storeu_ps(s + j, tail(n - j), _mm512_setzero_ps());
}

AVX512 void em_attn_online_f32(float *S, int64_t br, int64_t bc, double *m, double *l,
                               double *alpha) {
  for (int64_t i = 0; i < br; i++) {
    float *s = S + i * bc;
    float mx = row_max(s, bc, (float)m[i]);
    if (mx == -INFINITY) {
      row_zero(s, bc);
      alpha[i] = 1;
      continue;
    }
    float sum = row_exp(s, bc, mx);
    alpha[i] = expf((float)m[i] - mx);
    l[i] = l[i] * alpha[i] + sum;
    m[i] = mx;
  }
}

AVX512 void em_attn_probs_f32(float *S, int64_t br, int64_t bc, const double *lse) {
  for (int64_t i = 0; i < br; i++) {
    float *s = S + i * bc;
    if (lse[i] == -INFINITY) row_zero(s, bc);
    else row_exp(s, bc, (float)lse[i]);
  }
}
