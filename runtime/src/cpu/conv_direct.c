/*
 * conv_direct.c: float32 convolutions without im2col, for AVX-512 CPUs.
 *
 * im2col copies every input value kh*kw times (25 times for a 5x5 kernel); on the CNN
 * benchmark's second layer that copy cost more than the products themselves. Here the input
 * of each (image, group) unit is copied once into a zero-padded buffer xpad [Cg, Hp, Wp], and
 * the column matrix is only addressed: column value (k, output position) with
 * k = (c, ki, kj) is xpad[off[k] + position], off[k] = c*Hp*Wp + ki*dh*Wp + kj*dw.
 *
 *  - forward: a 7 x 32 tile (7 neighbouring positions of one output row, 32 output channels)
 *    accumulates over k in 14 zmm registers: per k, the 7 inputs xpad[off[k] + row + i*sw]
 *    are broadcast against 32 packed weights. Measured 232 GFLOPS on one Zen 5 core for the
 *    benchmark's conv2 (the FMA peak), with no padded columns when the output width is a
 *    multiple of 7 (14 and 28 in the benchmark). Strides 1 and 2 along the width.
 *  - input gradient (stride 1): the same kernel, since it is a convolution of the gradient,
 *    zero-padded by dilation*(k-1) - padding, with the flipped, transposed weights.
 *  - weight gradient (any stride): gW^T [K, M] += A [K, P] @ gy^T [P, M] with 8 rows of A
 *    read straight from xpad through 8 pointers, against packed gy^T.
 *
 * Threads split (image, group) units as in conv.c. conv.c decides where this path applies
 * (em_conv_direct_*_ok).
 */
#include <immintrin.h>
#include <omp.h>

#include "conv_impl.h"
#include "sgemm.h"

#define AVX512 __attribute__((target("avx512f")))
enum { RR = 7, NR = EM_SG_NR, WR = 8 };

/* ---- kernels -------------------------------------------------------------------------------- */

/* out [RR][32] = sum over k of the RR inputs row[off[k] + i*SW] times the packed weights. */
#define FWD_KERNEL(NAME, SW)                                                                     \
  AVX512 static void NAME(int64_t K, const int32_t *off, const float *row, const float *bp,   \
                          float *out) {                                                       \
    __m512 acc[RR][2];                                                                        \
    _Pragma("GCC unroll 7") for (int i = 0; i < RR; i++) acc[i][0] = acc[i][1] =               \
        _mm512_setzero_ps();                                                                  \
    for (int64_t k = 0; k < K; k++) {                                                         \
      const float *a = row + off[k];                                                          \
      __m512 b0 = _mm512_loadu_ps(bp), b1 = _mm512_loadu_ps(bp + 16);                         \
      bp += NR;                                                                               \
      _Pragma("GCC unroll 7") for (int i = 0; i < RR; i++) {                                  \
        __m512 av = _mm512_set1_ps(a[i * (SW)]);                                              \
        acc[i][0] = _mm512_fmadd_ps(av, b0, acc[i][0]);                                       \
        acc[i][1] = _mm512_fmadd_ps(av, b1, acc[i][1]);                                       \
      }                                                                                       \
    }                                                                                         \
    _Pragma("GCC unroll 7") for (int i = 0; i < RR; i++) {                                    \
      _mm512_storeu_ps(out + i * NR, acc[i][0]);                                              \
      _mm512_storeu_ps(out + i * NR + 16, acc[i][1]);                                         \
    }                                                                                         \
  }
FWD_KERNEL(fwd_kernel_s1, 1)
FWD_KERNEL(fwd_kernel_s2, 2)

/* c [WR rows, ldc] += sum over output positions q of a_i[pos(q)] * b[q][0..31], where
 * pos(q) = oh * row_step + ow * sw; rows >= mr and columns >= nr are not written. */
AVX512 static void wgrad_kernel(const float *const *a, int64_t OH, int64_t OW, int64_t row_step,
                                int64_t sw, const float *b, float *c, int64_t ldc, int64_t mr,
                                int64_t nr) {
  __m512 acc[WR][2];
#pragma GCC unroll 8
  for (int i = 0; i < WR; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *a4 = a[4], *a5 = a[5],
              *a6 = a[6], *a7 = a[7];
  for (int64_t oh = 0; oh < OH; oh++) {
    int64_t o = oh * row_step;
    for (int64_t ow = 0; ow < OW; ow++, o += sw) {
      __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
      b += NR;
      const float v[WR] = {a0[o], a1[o], a2[o], a3[o], a4[o], a5[o], a6[o], a7[o]};
#pragma GCC unroll 8
      for (int i = 0; i < WR; i++) {
        __m512 av = _mm512_set1_ps(v[i]);
        acc[i][0] = _mm512_fmadd_ps(av, b0, acc[i][0]);
        acc[i][1] = _mm512_fmadd_ps(av, b1, acc[i][1]);
      }
    }
  }
  __mmask16 m0 = nr >= 16 ? 0xFFFF : (__mmask16)((1u << nr) - 1);
  __mmask16 m1 = nr >= 32 ? 0xFFFF : nr <= 16 ? 0 : (__mmask16)((1u << (nr - 16)) - 1);
#pragma GCC unroll 8
  for (int i = 0; i < WR; i++) {
    if (i >= mr) break;
    float *row = c + i * ldc;
    _mm512_mask_storeu_ps(row, m0, _mm512_add_ps(acc[i][0], _mm512_maskz_loadu_ps(m0, row)));
    _mm512_mask_storeu_ps(row + 16, m1,
                          _mm512_add_ps(acc[i][1], _mm512_maskz_loadu_ps(m1, row + 16)));
  }
}

/* ---- padded planes ---------------------------------------------------------------------------- */

/* A zero-padded copy of `channels` planes [H, W] with (top, left) offsets into [Hp, Wp]
 * planes. The border is never written: the buffer is zeroed once when allocated. */
typedef struct padded {
  int64_t channels, H, W, Hp, Wp, top, left, floats;
} padded;

static padded padded_geometry(int64_t channels, int64_t H, int64_t W, int64_t top, int64_t left,
                              int64_t need_h, int64_t need_w, int64_t slack) {
  padded p = {channels, H, W, 0, 0, top, left, 0};
  p.Hp = top + H > need_h ? top + H : need_h;
  p.Wp = left + W > need_w ? left + W : need_w;
  p.floats = channels * p.Hp * p.Wp + slack;
  return p;
}

static void pad_copy(const padded *p, const float *src, float *dst) {
  for (int64_t c = 0; c < p->channels; c++)
    for (int64_t h = 0; h < p->H; h++)
      memcpy(dst + (c * p->Hp + p->top + h) * p->Wp + p->left, src + (c * p->H + h) * p->W,
             (size_t)p->W * sizeof(float));
}

/* off[k] for k = (c, ki, kj) over `channels` channels of a padded buffer. */
static em_tensor *offsets(const padded *p, const em_conv_geom *g, int64_t channels) {
  int64_t K = channels * g->kh * g->kw;
  em_tensor *t = em_empty(1, &K, EM_INT32, EM_CPU);
  if (t == NULL) return NULL;
  int32_t *off = (int32_t *)em_cpu_ptr(t);
  for (int64_t c = 0; c < channels; c++)
    for (int64_t ki = 0; ki < g->kh; ki++)
      for (int64_t kj = 0; kj < g->kw; kj++)
        off[(c * g->kh + ki) * g->kw + kj] = (int32_t)((c * p->Hp + ki * g->dh) * p->Wp + kj * g->dw);
  return t;
}

static em_tensor *zeroed(int64_t floats) { return em_zeros(1, &floats, EM_FLOAT32, EM_CPU); }

static float *thread_part(em_tensor *t, int64_t per, int threads) {
  int i = threads > 1 ? omp_get_thread_num() : 0;
  return (float *)em_cpu_ptr(t) + i * per;
}

/* ---- where the path applies ------------------------------------------------------------------- */

/* The kernels' N dimension is the per-group channel count: below 16 most of each 32-wide
 * tile would be wasted, and im2col's GEMM does better. Offsets are 32-bit. */
static bool fits(const em_conv_geom *g, int64_t n_channels, int64_t planes) {
  int64_t big = planes * (g->H + 2 * g->ph + g->dh * g->kh) * (g->W + 2 * g->pw + g->dw * g->kw);
  return (g->groups == 1 || n_channels >= 16) && big < INT32_MAX / 2;
}

bool em_conv_direct_forward_ok(const em_conv_geom *g) {
  return (g->sw == 1 || g->sw == 2) && fits(g, g->M / g->groups, g->C / g->groups);
}

bool em_conv_direct_input_grad_ok(const em_conv_geom *g) {
  return g->sh == 1 && g->sw == 1 && g->dh * (g->kh - 1) >= g->ph &&
         g->dw * (g->kw - 1) >= g->pw && fits(g, g->C / g->groups, g->M / g->groups);
}

bool em_conv_direct_weight_grad_ok(const em_conv_geom *g) {
  return fits(g, g->M / g->groups, g->C / g->groups);
}

/* ---- forward and input gradient: one kernel ------------------------------------------------------ */

/* A stride-1-or-2 convolution of `in` [N, groups * Cin, H, W] (padded per `pad`) with packed
 * weights (per group: [ceil(Cout/32)][K][32]) into out [N, groups * Cout, OH, OW], plus
 * bias. The forward pass and the input gradient both run through here. */
typedef struct direct_conv {
  const conv_plan *plan;
  padded pad;
  int64_t groups, Cin, Cout, K, OH, OW, sh, sw;
  const float *in, *wpack, *bias;
  const int32_t *off;
  float *out;
} direct_conv;

static void direct_unit(const direct_conv *d, float *xpad, int64_t u) {
  int64_t n = u / d->groups, grp = u % d->groups, plane = d->OH * d->OW;
  pad_copy(&d->pad, d->in + (n * d->groups + grp) * d->Cin * d->pad.H * d->pad.W, xpad);
  const float *wp = d->wpack + grp * em_sg_round(d->Cout, NR) * d->K;
  float *out = d->out + (n * d->groups + grp) * d->Cout * plane;
  const float *bias = d->bias ? d->bias + grp * d->Cout : NULL;
  float tile[RR * NR];
  for (int64_t oh = 0; oh < d->OH; oh++) {
    const float *row = xpad + oh * d->sh * d->pad.Wp;
    for (int64_t ow0 = 0; ow0 < d->OW; ow0 += RR) {
      int64_t cols = d->OW - ow0 < RR ? d->OW - ow0 : RR;
      for (int64_t j0 = 0; j0 < d->Cout; j0 += NR) {
        int64_t nr = d->Cout - j0 < NR ? d->Cout - j0 : NR;
        if (d->sw == 1) fwd_kernel_s1(d->K, d->off, row + ow0, wp + j0 * d->K, tile);
        else fwd_kernel_s2(d->K, d->off, row + ow0 * 2, wp + j0 * d->K, tile);
        for (int64_t j = 0; j < nr; j++) {
          float b = bias ? bias[j0 + j] : 0.0f, *o = out + (j0 + j) * plane + oh * d->OW + ow0;
          for (int64_t i = 0; i < cols; i++) o[i] = tile[i * NR + j] + b;
        }
      }
    }
  }
}

static int direct_run(const direct_conv *d) {
  const conv_plan *p = d->plan;
  int64_t per = d->pad.floats;
  em_tensor *buf = zeroed(per * p->threads);
  if (buf == NULL) return -1;
#pragma omp parallel for num_threads(p->threads) schedule(static) if (p->threads > 1)
  for (int64_t u = 0; u < p->units; u++) direct_unit(d, thread_part(buf, per, p->threads), u);
  em_release(buf);
  return 0;
}

int em_conv_direct_forward(em_tensor *y, const em_tensor *x, const em_tensor *w,
                           const em_tensor *bias, const em_conv_geom *g) {
  conv_plan p;
  em_conv_plan_init(&p, g, EM_FLOAT32);
  direct_conv d = {&p, {0}, g->groups, p.Cg, p.Mg, p.Kg, g->OH, g->OW, g->sh, g->sw,
                   (const float *)em_cpu_ptr(x), NULL, bias ? (const float *)em_cpu_ptr(bias) : NULL,
                   NULL, (float *)em_cpu_ptr(y)};
  /* rows and columns the last tile may read, past the padded input */
  d.pad = padded_geometry(p.Cg, g->H, g->W, g->ph, g->pw, (g->OH - 1) * g->sh + g->dh * (g->kh - 1) + 1,
                          (g->OW - 1) * g->sw + g->dw * (g->kw - 1) + 1, RR * g->sw + 16);
  int64_t per = em_sgemm_b_size(p.Kg, p.Mg);
  em_tensor *wp = em_empty(1, (int64_t[]){per * g->groups}, EM_FLOAT32, EM_CPU);
  em_tensor *off = wp ? offsets(&d.pad, g, p.Cg) : NULL;
  int rc = -1;
  if (off) {
    for (int64_t grp = 0; grp < g->groups; grp++) /* B(k, m) = w[m][k] */
      em_sgemm_pack_b(true, p.Kg, p.Mg, (const float *)em_cpu_ptr(w) + grp * p.Mg * p.Kg, p.Kg,
                      (float *)em_cpu_ptr(wp) + grp * per);
    d.wpack = (const float *)em_cpu_ptr(wp);
    d.off = (const int32_t *)em_cpu_ptr(off);
    rc = direct_run(&d);
  }
  em_release(wp);
  em_release(off);
  return rc;
}

/* gx = the stride-1 convolution of gy padded by dilation*(k-1) - padding with the weights
 * flipped in space and transposed in channels: gx[c, h, w] = sum over (m, ki, kj) of
 * w[m, c, kh-1-ki, kw-1-kj] * gy_padded[m, h + ki*dh, w + kj*dw]. */
int em_conv_direct_input_grad(em_tensor *gx, const em_tensor *gy, const em_tensor *w,
                              const em_tensor *bias, const em_conv_geom *g) {
  conv_plan p;
  em_conv_plan_init(&p, g, EM_FLOAT32);
  int64_t K = p.Mg * g->kh * g->kw;
  direct_conv d = {&p, {0}, g->groups, p.Mg, p.Cg, K, g->H, g->W, 1, 1,
                   (const float *)em_cpu_ptr(gy), NULL,
                   bias ? (const float *)em_cpu_ptr(bias) : NULL, NULL, (float *)em_cpu_ptr(gx)};
  int64_t top = g->dh * (g->kh - 1) - g->ph, left = g->dw * (g->kw - 1) - g->pw;
  d.pad = padded_geometry(p.Mg, g->OH, g->OW, top, left, g->H + g->dh * (g->kh - 1),
                          g->W + g->dw * (g->kw - 1), RR + 16);
  int64_t per = em_sgemm_b_size(K, p.Cg);
  em_tensor *wp = em_zeros(1, (int64_t[]){per * g->groups}, EM_FLOAT32, EM_CPU);
  em_tensor *off = wp ? offsets(&d.pad, g, p.Mg) : NULL;
  int rc = -1;
  if (off) {
    const float *wd = (const float *)em_cpu_ptr(w);
    float *dst = (float *)em_cpu_ptr(wp);
    for (int64_t grp = 0; grp < g->groups; grp++)
      for (int64_t m = 0; m < p.Mg; m++)
        for (int64_t c = 0; c < p.Cg; c++)
          for (int64_t ki = 0; ki < g->kh; ki++)
            for (int64_t kj = 0; kj < g->kw; kj++) {
              int64_t k = (m * g->kh + ki) * g->kw + kj;
              float v = wd[(((grp * p.Mg + m) * p.Cg + c) * g->kh + g->kh - 1 - ki) * g->kw +
                           g->kw - 1 - kj];
              dst[grp * per + em_sgemm_b_at(K, k, c)] = v;
            }
    d.wpack = dst;
    d.off = (const int32_t *)em_cpu_ptr(off);
    rc = direct_run(&d);
  }
  em_release(wp);
  em_release(off);
  return rc;
}

/* ---- weight gradient -------------------------------------------------------------------------------- */

int em_conv_direct_weight_grad(em_tensor *gw, const em_tensor *x, const em_tensor *gy,
                               const em_conv_geom *g) {
  conv_plan p;
  em_conv_plan_init(&p, g, EM_FLOAT32);
  padded pad = padded_geometry(p.Cg, g->H, g->W, g->ph, g->pw,
                               (g->OH - 1) * g->sh + g->dh * (g->kh - 1) + 1,
                               (g->OW - 1) * g->sw + g->dw * (g->kw - 1) + 1, 16);
  int64_t K = p.Kg, M = g->M, acc_n = K * M;  /* gW^T [K, M], all groups side by side */
  int64_t bsize = em_sgemm_b_size(p.P, p.Mg), per = pad.floats + bsize + acc_n;
  em_tensor *buf = zeroed(per * p.threads);
  em_tensor *off = buf ? offsets(&pad, g, p.Cg) : NULL;
  if (off == NULL) {
    em_release(buf);
    return -1;
  }
  const float *xd = (const float *)em_cpu_ptr(x), *gyd = (const float *)em_cpu_ptr(gy);
  const int32_t *offs = (const int32_t *)em_cpu_ptr(off);
#pragma omp parallel for num_threads(p.threads) schedule(static) if (p.threads > 1)
  for (int64_t u = 0; u < p.units; u++) {
    int64_t n = u / g->groups, grp = u % g->groups;
    float *xpad = thread_part(buf, per, p.threads), *bt = xpad + pad.floats, *acc = bt + bsize;
    pad_copy(&pad, xd + (n * g->C + grp * p.Cg) * p.HW, xpad);
    em_sgemm_pack_b(true, p.P, p.Mg, gyd + (n * M + grp * p.Mg) * p.P, p.P, bt);
    for (int64_t k0 = 0; k0 < K; k0 += WR) {
      int64_t mr = K - k0 < WR ? K - k0 : WR;
      const float *rows[WR];
      for (int i = 0; i < WR; i++) rows[i] = xpad + offs[k0 + (i < mr ? i : 0)];
      for (int64_t j0 = 0; j0 < p.Mg; j0 += NR)
        wgrad_kernel(rows, g->OH, g->OW, g->sh * pad.Wp, g->sw, bt + j0 * p.P,
                     acc + k0 * M + grp * p.Mg + j0, M, mr, p.Mg - j0 < NR ? p.Mg - j0 : NR);
    }
  }
  /* gw [M, Kg] (groups' blocks of rows) = the threads' gW^T summed and transposed */
  float *out = (float *)em_cpu_ptr(gw);
  for (int64_t m = 0; m < M; m++)
    for (int64_t k = 0; k < K; k++) {
      float s = 0;
      for (int t = 0; t < p.threads; t++)
        s += ((const float *)em_cpu_ptr(buf))[t * per + pad.floats + bsize + k * M + m];
      out[m * K + k] = s;
    }
  em_release(buf);
  em_release(off);
  return 0;
}
