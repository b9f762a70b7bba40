/*
 * pool.c: the CPU's 2-D pooling kernels: max pooling with argmax indices, its gradient (which
 * is also max_unpool2d), average pooling and its gradient; fixed or adaptive windows
 * (em_pool_geom in nn.h says which rows and columns a window covers).
 *
 * Every plane (one image's channel) is independent, so planes are split across threads.
 * Each kernel is generated for float and double by a macro, so debuggers see real functions.
 * Max pooling follows PyTorch: NaN wins (it propagates), and ties keep the first maximum in
 * row-major order.
 */
#include <immintrin.h>
#include <math.h>
#include <omp.h>

#include "../nn.h"
#include "cpu.h"

/* The input rows [*lo, *hi) of output row o along one axis, and the step between taps. For a
 * fixed window the taps are lo, lo + d, ... below hi; they may start in the padding (negative)
 * and are clipped by the caller. */
static inline void window(bool adaptive, int64_t o, int64_t in, int64_t out, int64_t k,
                          int64_t s, int64_t p, int64_t d, int64_t *lo, int64_t *hi) {
  if (adaptive) {
    *lo = o * in / out;
    *hi = ((o + 1) * in + out - 1) / out;
  } else {
    *lo = o * s - p;
    *hi = *lo + (k - 1) * d + 1;
  }
}

/* First tap >= 0 of lo, lo + d, ...; and the clipped end. */
static inline void clip(int64_t *lo, int64_t *hi, int64_t d, int64_t in) {
  if (*lo < 0) *lo += ((-*lo + d - 1) / d) * d;
  if (*hi > in) *hi = in;
}

static int plane_threads(const em_pool_geom *g, int64_t work) {
  int64_t planes = g->N * g->C;
  int t = omp_in_parallel() ? 1 : em_threads_for(work);
  return planes < t ? (int)(planes > 0 ? planes : 1) : t;
}

/* ---- max ------------------------------------------------------------------------------------ */

#define MAX_POOL(NAME, T)                                                                      \
  static void NAME(T *y, int64_t *ind, const T *x, const em_pool_geom *g, int64_t plane) {    \
    const T *xp = x + plane * g->H * g->W;                                                    \
    T *yp = y + plane * g->OH * g->OW;                                                        \
    int64_t *ip = ind + plane * g->OH * g->OW;                                                \
    int64_t dh = g->adaptive ? 1 : g->dh, dw = g->adaptive ? 1 : g->dw;                      \
    for (int64_t oh = 0; oh < g->OH; oh++) {                                                  \
      int64_t h0, h1;                                                                         \
      window(g->adaptive, oh, g->H, g->OH, g->kh, g->sh, g->ph, dh, &h0, &h1);               \
      clip(&h0, &h1, dh, g->H);                                                               \
      for (int64_t ow = 0; ow < g->OW; ow++) {                                                \
        int64_t w0, w1;                                                                       \
        window(g->adaptive, ow, g->W, g->OW, g->kw, g->sw, g->pw, dw, &w0, &w1);             \
        clip(&w0, &w1, dw, g->W);                                                             \
        T best = -INFINITY;                                                                   \
        int64_t at = h0 * g->W + w0; /* an empty window (never, given the checks) */        \
        for (int64_t h = h0; h < h1; h += dh)                                                 \
          for (int64_t w = w0; w < w1; w += dw) {                                             \
            T v = xp[h * g->W + w];                                                           \
            if (v > best || isnan(v)) {                                                       \
              best = v;                                                                       \
              at = h * g->W + w;                                                              \
              if (isnan(v)) goto done_##NAME;                                                 \
            }                                                                                 \
          }                                                                                   \
      done_##NAME:                                                                            \
        yp[oh * g->OW + ow] = best;                                                           \
        ip[oh * g->OW + ow] = at;                                                             \
      }                                                                                       \
    }                                                                                         \
  }
MAX_POOL(max_plane_f32, float)
MAX_POOL(max_plane_f64, double)

/* 2x2 windows, stride 2, no padding or dilation: the common CNN case, without the window
 * arithmetic (measured: several times faster than the general loop on the benchmark CNN). */
#define MAX_POOL_2X2(NAME, T)                                                                  \
  static void NAME(T *y, int64_t *ind, const T *x, const em_pool_geom *g, int64_t plane) {    \
    const T *xp = x + plane * g->H * g->W;                                                    \
    T *yp = y + plane * g->OH * g->OW;                                                        \
    int64_t *ip = ind + plane * g->OH * g->OW;                                                \
    for (int64_t oh = 0; oh < g->OH; oh++) {                                                  \
      const T *r0 = xp + 2 * oh * g->W, *r1 = r0 + g->W;                                     \
      for (int64_t ow = 0; ow < g->OW; ow++) {                                                \
        int64_t c = 2 * ow, at = c;                                                           \
        T best = r0[c];                                                                       \
        if (!isnan(best)) {                                                                   \
          if (r0[c + 1] > best || isnan(r0[c + 1])) best = r0[c + 1], at = c + 1;            \
          if (!isnan(best) && (r1[c] > best || isnan(r1[c])))                                 \
            best = r1[c], at = g->W + c;                                                      \
          if (!isnan(best) && (r1[c + 1] > best || isnan(r1[c + 1])))                         \
            best = r1[c + 1], at = g->W + c + 1;                                              \
        }                                                                                     \
        yp[oh * g->OW + ow] = best;                                                           \
        ip[oh * g->OW + ow] = 2 * oh * g->W + at;                                             \
      }                                                                                       \
    }                                                                                         \
  }
MAX_POOL_2X2(max2_plane_f32, float)
MAX_POOL_2X2(max2_plane_f64, double)

/* The same for float32 with AVX-512, 16 outputs at a time and without branches: on random data
 * the scalar loop's comparisons mispredict (measured: ~45 cycles per output on the benchmark's
 * [64,32,28,28] input, against ~3 here). Lanes hold candidates in window order (row 0 left,
 * right, row 1 left, right); a later candidate wins if it is greater, or NaN over a number,
 * so the first NaN, else the first maximum, is kept, as in the scalar loop. */
#define AVX512 __attribute__((target("avx512f")))
AVX512 static void max2_plane_f32_avx512(float *y, int64_t *ind, const float *x,
                                         const em_pool_geom *g, int64_t plane) {
  const float *xp = x + plane * g->H * g->W;
  float *yp = y + plane * g->OH * g->OW;
  int64_t *ip = ind + plane * g->OH * g->OW;
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  const __m512i lane2 = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  for (int64_t oh = 0; oh < g->OH; oh++) {
    const float *r0 = xp + 2 * oh * g->W, *r1 = r0 + g->W;
    for (int64_t ow = 0; ow < g->OW; ow += 16) {
      int64_t n = g->OW - ow < 16 ? g->OW - ow : 16;
      __mmask16 lo = n >= 8 ? 0xFFFF : (__mmask16)((1u << (2 * n)) - 1);
      __mmask16 hi = n <= 8 ? 0 : (__mmask16)((1u << (2 * (n - 8))) - 1);
      __mmask16 out = (__mmask16)((1u << n) - 1);
      __m512 a0 = _mm512_maskz_loadu_ps(lo, r0 + 2 * ow), a1 = _mm512_maskz_loadu_ps(hi, r0 + 2 * ow + 16);
      __m512 b0 = _mm512_maskz_loadu_ps(lo, r1 + 2 * ow), b1 = _mm512_maskz_loadu_ps(hi, r1 + 2 * ow + 16);
      __m512 cand[4] = {_mm512_permutex2var_ps(a0, even, a1), _mm512_permutex2var_ps(a0, odd, a1),
                        _mm512_permutex2var_ps(b0, even, b1), _mm512_permutex2var_ps(b0, odd, b1)};
      __m512 best = cand[0];
      __m512i code = _mm512_setzero_si512();
      for (int c = 1; c < 4; c++) {
        __mmask16 nan_v = _mm512_cmp_ps_mask(cand[c], cand[c], _CMP_UNORD_Q);
        __mmask16 num_b = _mm512_cmp_ps_mask(best, best, _CMP_ORD_Q);
        __mmask16 take = _mm512_cmp_ps_mask(cand[c], best, _CMP_GT_OQ) | (nan_v & num_b);
        best = _mm512_mask_blend_ps(take, best, cand[c]);
        code = _mm512_mask_blend_epi32(take, code, _mm512_set1_epi32(c));
      }
      /* position = (2*oh + c/2) * W + 2*(ow + lane) + c%2 */
      __m512i col = _mm512_add_epi32(lane2, _mm512_set1_epi32((int)(2 * ow)));
      __m512i rowoff = _mm512_mullo_epi32(_mm512_srli_epi32(code, 1), _mm512_set1_epi32((int)g->W));
      __m512i pos = _mm512_add_epi32(_mm512_add_epi32(col, rowoff),
                                     _mm512_and_si512(code, _mm512_set1_epi32(1)));
      __m512i base = _mm512_set1_epi64(2 * oh * g->W);
      __m512i p0 = _mm512_add_epi64(base, _mm512_cvtepi32_epi64(_mm512_castsi512_si256(pos)));
      __m512i p1 = _mm512_add_epi64(base, _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(pos, 1)));
      _mm512_mask_storeu_ps(yp + oh * g->OW + ow, out, best);
      _mm512_mask_storeu_epi64(ip + oh * g->OW + ow, (__mmask8)(out & 0xFF), p0);
      _mm512_mask_storeu_epi64(ip + oh * g->OW + ow + 8, (__mmask8)(out >> 8), p1);
    }
  }
}

static bool has_avx512(void) {
  static int cached = -1; /* relaxed atomics: threads may ask at once, all get the same answer */
  int c = __atomic_load_n(&cached, __ATOMIC_RELAXED);
  if (c < 0) {
    __builtin_cpu_init();
    c = __builtin_cpu_supports("avx512f") != 0;
    __atomic_store_n(&cached, c, __ATOMIC_RELAXED);
  }
  return c != 0;
}

static bool is_2x2(const em_pool_geom *g) {
  return !g->adaptive && g->kh == 2 && g->kw == 2 && g->sh == 2 && g->sw == 2 && g->ph == 0 &&
         g->pw == 0 && g->dh == 1 && g->dw == 1 && 2 * g->OH <= g->H && 2 * g->OW <= g->W;
}

int em_cpu_max_pool2d(em_tensor *y, em_tensor *indices, const em_tensor *x,
                      const em_pool_geom *g) {
  int64_t planes = g->N * g->C;
  int64_t *ind = (int64_t *)em_cpu_ptr(indices);
  int threads = plane_threads(g, em_numel(x));
  bool two = is_2x2(g);
  if (y->dtype_id == EM_FLOAT64) {
    double *yp = (double *)em_cpu_ptr(y);
    const double *xp = (const double *)em_cpu_ptr(x);
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
    for (int64_t p = 0; p < planes; p++)
      (two ? max2_plane_f64 : max_plane_f64)(yp, ind, xp, g, p);
  } else {
    float *yp = (float *)em_cpu_ptr(y);
    const float *xp = (const float *)em_cpu_ptr(x);
    bool vec = two && has_avx512() && g->H * g->W < INT32_MAX / 2;
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
    for (int64_t p = 0; p < planes; p++)
      (vec ? max2_plane_f32_avx512 : two ? max2_plane_f32 : max_plane_f32)(yp, ind, xp, g, p);
  }
  return 0;
}

/* gx = 0, then gx[plane][ind] += gy: each plane's indices point into that plane only. */
#define UNPOOL(NAME, T)                                                                        \
  static void NAME(T *gx, const T *gy, const int64_t *ind, int64_t in_plane,                  \
                   int64_t out_plane, int64_t plane) {                                        \
    T *xp = gx + plane * in_plane;                                                            \
    const T *yp = gy + plane * out_plane;                                                     \
    const int64_t *ip = ind + plane * out_plane;                                              \
    memset(xp, 0, (size_t)in_plane * sizeof(T));                                              \
    for (int64_t o = 0; o < out_plane; o++) xp[ip[o]] += yp[o];                               \
  }
UNPOOL(unpool_plane_f32, float)
UNPOOL(unpool_plane_f64, double)

int em_cpu_max_unpool2d(em_tensor *gx, const em_tensor *gy, const em_tensor *indices) {
  int64_t planes = gx->sizes[0] * gx->sizes[1];
  int64_t in_plane = gx->sizes[2] * gx->sizes[3], out_plane = gy->sizes[2] * gy->sizes[3];
  const int64_t *ind = (const int64_t *)em_cpu_ptr(indices);
  int t = omp_in_parallel() ? 1 : em_threads_for(em_numel(gx) + em_numel(gy));
  int threads = planes < t ? 1 : t;
  if (gx->dtype_id == EM_FLOAT64) {
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
    for (int64_t p = 0; p < planes; p++)
      unpool_plane_f64((double *)em_cpu_ptr(gx), (const double *)em_cpu_ptr(gy), ind, in_plane,
                       out_plane, p);
  } else {
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
    for (int64_t p = 0; p < planes; p++)
      unpool_plane_f32((float *)em_cpu_ptr(gx), (const float *)em_cpu_ptr(gy), ind, in_plane,
                       out_plane, p);
  }
  return 0;
}

/* ---- average -------------------------------------------------------------------------------- */

/* The window of output (oh, ow) clipped to the input, and what its sum is divided by (PyTorch's
 * rules: the divisor override, else the window clipped to the padded input when padding
 * counts, else the clipped window). 0 means an empty window (its output is 0). */
static inline double avg_window(const em_pool_geom *g, int64_t oh, int64_t ow, int64_t *h0,
                                int64_t *h1, int64_t *w0, int64_t *w1) {
  window(g->adaptive, oh, g->H, g->OH, g->kh, g->sh, g->ph, 1, h0, h1);
  window(g->adaptive, ow, g->W, g->OW, g->kw, g->sw, g->pw, 1, w0, w1);
  double padded = 0;
  if (!g->adaptive) {
    int64_t ph1 = *h1 < g->H + g->ph ? *h1 : g->H + g->ph;
    int64_t pw1 = *w1 < g->W + g->pw ? *w1 : g->W + g->pw;
    padded = (double)((ph1 - *h0) * (pw1 - *w0));
  }
  clip(h0, h1, 1, g->H);
  clip(w0, w1, 1, g->W);
  if (*h1 <= *h0 || *w1 <= *w0) return 0;
  if (g->divisor > 0) return (double)g->divisor;
  if (!g->adaptive && g->count_include_pad) return padded;
  return (double)((*h1 - *h0) * (*w1 - *w0));
}

#define AVG_POOL(NAME, T)                                                                      \
  static void NAME(T *y, const T *x, const em_pool_geom *g, int64_t plane) {                  \
    const T *xp = x + plane * g->H * g->W;                                                    \
    T *yp = y + plane * g->OH * g->OW;                                                        \
    for (int64_t oh = 0; oh < g->OH; oh++)                                                    \
      for (int64_t ow = 0; ow < g->OW; ow++) {                                                \
        int64_t h0, h1, w0, w1;                                                               \
        double div = avg_window(g, oh, ow, &h0, &h1, &w0, &w1);                               \
        T sum = 0;                                                                            \
        for (int64_t h = h0; h < h1; h++)                                                     \
          for (int64_t w = w0; w < w1; w++) sum += xp[h * g->W + w];                          \
        yp[oh * g->OW + ow] = div == 0 ? (T)0 : (T)(sum / div);                               \
      }                                                                                       \
  }
AVG_POOL(avg_plane_f32, float)
AVG_POOL(avg_plane_f64, double)

#define AVG_POOL_BACK(NAME, T)                                                                 \
  static void NAME(T *gx, const T *gy, const em_pool_geom *g, int64_t plane) {                \
    T *xp = gx + plane * g->H * g->W;                                                         \
    const T *yp = gy + plane * g->OH * g->OW;                                                 \
    memset(xp, 0, (size_t)(g->H * g->W) * sizeof(T));                                         \
    for (int64_t oh = 0; oh < g->OH; oh++)                                                    \
      for (int64_t ow = 0; ow < g->OW; ow++) {                                                \
        int64_t h0, h1, w0, w1;                                                               \
        double div = avg_window(g, oh, ow, &h0, &h1, &w0, &w1);                               \
        if (div == 0) continue;                                                               \
        T v = (T)(yp[oh * g->OW + ow] / div);                                                 \
        for (int64_t h = h0; h < h1; h++)                                                     \
          for (int64_t w = w0; w < w1; w++) xp[h * g->W + w] += v;                            \
      }                                                                                       \
  }
AVG_POOL_BACK(avg_back_plane_f32, float)
AVG_POOL_BACK(avg_back_plane_f64, double)

int em_cpu_avg_pool2d(em_tensor *y, const em_tensor *x, const em_pool_geom *g) {
  int64_t planes = g->N * g->C;
  int threads = plane_threads(g, em_numel(x) + em_numel(y));
  if (y->dtype_id == EM_FLOAT64) {
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
    for (int64_t p = 0; p < planes; p++)
      avg_plane_f64((double *)em_cpu_ptr(y), (const double *)em_cpu_ptr(x), g, p);
  } else {
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
    for (int64_t p = 0; p < planes; p++)
      avg_plane_f32((float *)em_cpu_ptr(y), (const float *)em_cpu_ptr(x), g, p);
  }
  return 0;
}

int em_cpu_avg_pool2d_backward(em_tensor *gx, const em_tensor *gy, const em_pool_geom *g) {
  int64_t planes = g->N * g->C;
  int threads = plane_threads(g, em_numel(gx) + em_numel(gy));
  if (gx->dtype_id == EM_FLOAT64) {
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
    for (int64_t p = 0; p < planes; p++)
      avg_back_plane_f64((double *)em_cpu_ptr(gx), (const double *)em_cpu_ptr(gy), g, p);
  } else {
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
    for (int64_t p = 0; p < planes; p++)
      avg_back_plane_f32((float *)em_cpu_ptr(gx), (const float *)em_cpu_ptr(gy), g, p);
  }
  return 0;
}
