/*
 * attention_rows.c: attention_rows.h's row loops, on AVX-512 and portable.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "attention_rows.h"
#include "sgemm.h"

#define AVX512 __attribute__((target("avx512f")))

bool em_attn_rows_simd(void) { return em_sgemm_available(); }

/* Cephes' expf constants: ln2 split in two for the reduction, then the polynomial. */
#define LOG2E 1.44269504088896341f
#define LN2_HI 0.693359375f
#define LN2_LO (-2.12194440e-4f)
#define P0 1.9875691500e-4f
#define P1 1.3981999507e-3f
#define P2 8.3334519073e-3f
#define P3 4.1665795894e-2f
#define P4 1.6666665459e-1f
#define P5 5.0000001201e-1f

/* ---- AVX-512 ------------------------------------------------------------------------------- */

/* e^x, 16 lanes (scalef underflows to 0 below about -104; -inf gives 0, NaN stays NaN). */
AVX512 static inline __m512 exp16(__m512 x) {
  __mmask16 live = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-104.0f), _CMP_NLT_UQ);
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(LOG2E)),
                                  _MM_FROUND_TO_NEAREST_INT);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_HI), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_LO), r);
  __m512 p = _mm512_set1_ps(P0);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P1));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P2));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P3));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P4));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P5));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_maskz_scalef_ps(live, p, n);
}

static inline __mmask16 tail(int64_t n) { return n >= 16 ? 0xFFFF : (__mmask16)((1u << n) - 1); }

AVX512 static float max16(const float *s, int64_t n, float m) {
  __m512 acc = _mm512_set1_ps(m);
  for (int64_t j = 0; j < n; j += 16)
    acc = _mm512_max_ps(acc, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), tail(n - j), s + j));
  return _mm512_reduce_max_ps(acc);
}

/* s <- exp(s - m); returns the sum. */
AVX512 static float exp_sum16(float *s, int64_t n, float m) {
  __m512 acc = _mm512_setzero_ps(), mv = _mm512_set1_ps(m);
  for (int64_t j = 0; j < n; j += 16) {
    __mmask16 k = tail(n - j);
    __m512 v = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, s + j), mv));
    _mm512_mask_storeu_ps(s + j, k, v);
    acc = _mm512_add_ps(acc, _mm512_maskz_mov_ps(k, v));
  }
  return _mm512_reduce_add_ps(acc);
}

/* ---- portable ------------------------------------------------------------------------------ */

enum { LANES = 8 };

/* Without it, GCC keeps each float compare-and-select a branch (the compare could raise an
 * exception flag) and vectorizes none of these loops. Ember never reads the flags. */
#if defined(__clang__)
#define PORTABLE /* clang if-converts them as they are */
#else
#define PORTABLE __attribute__((optimize("no-trapping-math")))
#endif

/* e^x without a call and without branches, so that loops over it vectorize: the rounding of
 * x log2(e) by adding and removing 1.5 * 2^23, 2^n built in the exponent bits. Results below
 * e^-87 (2^n out of the normal range) are 0; NaN stays NaN. */
PORTABLE static inline float exp_portable(float x) {
  float t = x * LOG2E;
  t = t < -126.0f ? -126.0f : t > 127.0f ? 127.0f : t;
  float n = (t + 12582912.0f) - 12582912.0f;
  float r = x - n * LN2_HI;
  r = r - n * LN2_LO;
  float p = ((((P0 * r + P1) * r + P2) * r + P3) * r + P4) * r + P5;
  p = p * (r * r) + (r + 1.0f);
  int32_t bits = ((int32_t)n + 127) * (1 << 23);
  float scale;
  memcpy(&scale, &bits, sizeof scale);
  float y = p * scale;
  return x < -87.0f ? 0.0f : y;
}

PORTABLE static float max_portable(const float *s, int64_t n, float m) {
  float acc[LANES];
  for (int k = 0; k < LANES; k++) acc[k] = m;
  int64_t j = 0;
  for (; j + LANES <= n; j += LANES)
    for (int k = 0; k < LANES; k++) acc[k] = s[j + k] > acc[k] ? s[j + k] : acc[k];
  for (; j < n; j++) acc[0] = s[j] > acc[0] ? s[j] : acc[0];
  float r = acc[0];
  for (int k = 1; k < LANES; k++) r = acc[k] > r ? acc[k] : r;
  return r;
}

PORTABLE static float exp_sum_portable(float *s, int64_t n, float m) {
  float acc[LANES] = {0};
  int64_t j = 0;
  for (; j + LANES <= n; j += LANES)
    for (int k = 0; k < LANES; k++) {
      s[j + k] = exp_portable(s[j + k] - m);
      acc[k] += s[j + k];
    }
  for (; j < n; j++) {
    s[j] = exp_portable(s[j] - m);
    acc[0] += s[j];
  }
  float r = 0;
  for (int k = 0; k < LANES; k++) r += acc[k];
  return r;
}

/* ---- the row loops --------------------------------------------------------------------------- */

static float row_max(bool simd, const float *s, int64_t n, float m) {
  return simd ? max16(s, n, m) : max_portable(s, n, m);
}

static float row_exp_sum(bool simd, float *s, int64_t n, float m) {
  return simd ? exp_sum16(s, n, m) : exp_sum_portable(s, n, m);
}

void em_attn_online_f32(bool simd, float *S, int64_t br, int64_t bc, double *m, double *l,
                        double *alpha) {
  for (int64_t i = 0; i < br; i++) {
    float *s = S + i * bc;
    float mx = row_max(simd, s, bc, (float)m[i]);
    if (mx == -INFINITY) {
      memset(s, 0, (size_t)bc * sizeof(float));
      alpha[i] = 1;
      continue;
    }
    float sum = row_exp_sum(simd, s, bc, mx);
    alpha[i] = expf((float)m[i] - mx);
    l[i] = l[i] * alpha[i] + sum;
    m[i] = mx;
  }
}

void em_attn_probs_f32(bool simd, float *S, int64_t br, int64_t bc, const double *lse) {
  for (int64_t i = 0; i < br; i++) {
    float *s = S + i * bc;
    if (lse[i] == -INFINITY) memset(s, 0, (size_t)bc * sizeof(float));
    else row_exp_sum(simd, s, bc, (float)lse[i]);
  }
}
