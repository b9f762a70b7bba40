/*
 * conv_bf16.c: the CPU's bfloat16 convolutions (forward, input gradient, weight gradient) on
 * the processor's bf16 instructions, through the packed product of gemm_bf16.h (AMX tiles or
 * AVX-512 BF16). conv.c's slots come here for bfloat16 tensors.
 *
 * The decomposition is conv.c's, one product per (image, group) unit:
 *   forward       y[n,g]  [Mg, P]  = w[g] [Mg, Kg] @ cols(x[n,g]) [Kg, P]      (+ bias)
 *   input grad    cols [Kg, P]     = w[g]^T @ gy[n,g];   gx[n,g] = col2im(cols) (+ bias)
 *   weight grad   gw[g] [Mg, Kg]  += gy[n,g] @ cols(x[n,g])^T
 * Every product multiplies bf16 pairs and accumulates in float32; each output element is
 * rounded to bfloat16 once, after everything that sums into it:
 *  - forward: the product's epilogue adds the bias (float32) and rounds;
 *  - input gradient: the columns stay float32, col2im sums the overlapping taps in float32,
 *    the bias is added, then the unit is rounded;
 *  - weight gradient: every thread sums its units in a float32 [M, Kg] buffer; the buffers are
 *    added in thread order (deterministic, as conv.c) and the sum is rounded.
 * The weights are packed once per call (every group), shared by every thread. The columns:
 *  - stride 1: none are formed; each row of the column matrix is a contiguous window of the
 *    unit's zero-padded image once the outputs are computed Wp (padded width) to a row, so the
 *    packers read the image in place (the "shifted" section below); the input gradient is then
 *    a stride-1 convolution of gy with the flipped weights, run by the same forward code;
 *  - other strides: im2col writes the unit's bf16 columns (an L2-sized block), which the
 *    gemm_bf16 packer turns into (k, k+1) pairs;
 *  - a 1x1 kernel with stride 1 and no padding packs straight from x.
 *
 * Where the CPU has no bf16 instructions, or EMBER_CPU_BF16=0 asks for the portable path, the
 * operands are widened to float32, conv.c's float32 kernels run, and the result is rounded once:
 * the same numbers the op definition's float32 detour gave before this path existed.
 */
#include <omp.h>
#include <stdlib.h>

#include "conv_impl.h"
#include "gemm_bf16.h"
#include "half_convert.h"

/* ---- the portable path: through float32 ------------------------------------------------------ */

static em_tensor *widen(const em_tensor *t) {
  if (t == NULL) return NULL;
  em_tensor *f = em_empty(t->ndim, t->sizes, EM_FLOAT32, EM_CPU);
  if (f) em_cvt_bf16_to_f32((float *)em_cpu_ptr(f), (const uint16_t *)em_cpu_ptr(t), em_numel(t));
  return f;
}

enum { FWD, IGRAD, WGRAD };

static int through_f32(int kind, em_tensor *out, const em_tensor *a, const em_tensor *b,
                       const em_tensor *bias, const em_conv_geom *g) {
  em_tensor *fa = widen(a), *fb = widen(b), *fbias = widen(bias);
  em_tensor *fo = em_empty(out->ndim, out->sizes, EM_FLOAT32, EM_CPU);
  int rc = -1;
  if (fa && fb && fo && (fbias || !bias)) {
    if (kind == FWD) rc = em_cpu_conv2d(fo, fa, fb, fbias, g);
    else if (kind == IGRAD) rc = em_cpu_conv2d_input_grad(fo, fa, fb, fbias, g);
    else rc = em_cpu_conv2d_weight_grad(fo, fa, fb, g);
  }
  if (rc == 0)
    em_cvt_f32_to_bf16((uint16_t *)em_cpu_ptr(out), (const float *)em_cpu_ptr(fo), em_numel(out));
  em_release(fa);
  em_release(fb);
  em_release(fbias);
  em_release(fo);
  return rc;
}

/* ---- columns --------------------------------------------------------------------------------- */

/* cols [Kg, P] (bf16) from one unit x [Cg, H, W]; padding reads as zeros (conv.c's im2col). */
static void im2col_bf16(const conv_plan *p, const uint16_t *x, uint16_t *cols) {
  const em_conv_geom *g = p->g;
  for (int64_t c = 0; c < p->Cg; c++)
    for (int64_t ki = 0; ki < g->kh; ki++)
      for (int64_t kj = 0; kj < g->kw; kj++) {
        uint16_t *row = cols + ((c * g->kh + ki) * g->kw + kj) * p->P;
        int64_t off = kj * g->dw - g->pw, lo, hi;
        em_conv_valid_range(g->OW, g->W, g->sw, off, &lo, &hi);
        for (int64_t oh = 0; oh < g->OH; oh++) {
          uint16_t *dst = row + oh * g->OW;
          int64_t ih = oh * g->sh - g->ph + ki * g->dh;
          if (ih < 0 || ih >= g->H) {
            memset(dst, 0, (size_t)g->OW * sizeof *dst);
            continue;
          }
          const uint16_t *src = x + (c * g->H + ih) * g->W;
          for (int64_t i = 0; i < lo; i++) dst[i] = 0;
          if (g->sw == 1) memcpy(dst + lo, src + lo + off, (size_t)(hi - lo) * sizeof *dst);
          else
            for (int64_t i = lo; i < hi; i++) dst[i] = src[i * g->sw + off];
          for (int64_t i = hi; i < g->OW; i++) dst[i] = 0;
        }
      }
}

/* ---- buffers --------------------------------------------------------------------------------- */

typedef struct bf_plan {
  conv_plan p;   /* float32 plan: col2im and the bias rows run in float32 */
  int path;
  int64_t scratch; /* bytes per thread, a multiple of 64 */
  char *mem;       /* threads * scratch */
} bf_plan;

static int64_t round64(int64_t bytes) { return (bytes + 63) / 64 * 64; }

static char *thread_mem(const bf_plan *b) {
  int t = b->p.threads > 1 ? omp_get_thread_num() : 0;
  return b->mem + (size_t)t * (size_t)b->scratch;
}

static int alloc_scratch(bf_plan *b, int64_t per_thread) {
  b->scratch = round64(per_thread);
  size_t bytes = (size_t)b->scratch * (size_t)b->p.threads;
  b->mem = aligned_alloc(64, bytes);
  if (b->mem == NULL)
    return em_error_kind_set(EM_ERR_OOM,
                             "out of memory for the bfloat16 convolution's scratch (%zu bytes)",
                             bytes);
  return 0;
}

/* The packed weights of every group: w[g] [Mg, Kg] (or its transpose), [groups][a_size]. */
static uint16_t *pack_weights(const conv_plan *p, const uint16_t *w, bool transposed,
                              int64_t *per) {
  int64_t M = transposed ? p->Kg : p->Mg, K = transposed ? p->Mg : p->Kg;
  *per = em_bf16_a_size(M, K);
  uint16_t *wp = aligned_alloc(64, (size_t)round64(*per * p->g->groups * 2));
  if (wp == NULL) {
    em_error_kind_set(EM_ERR_OOM, "out of memory packing the bfloat16 convolution's weights");
    return NULL;
  }
  for (int64_t grp = 0; grp < p->g->groups; grp++) {
    const uint16_t *wg = w + grp * p->Mg * p->Kg;
    if (transposed) em_bf16_pack_a(wg, 1, p->Kg, M, K, wp + grp * *per);
    else em_bf16_pack_a(wg, p->Kg, 1, M, K, wp + grp * *per);
  }
  return wp;
}

/* The float32 bias (added before the one rounding; NULL without one), the packed weights and
 * the threads' scratch; -1 with an error, nothing left allocated. */
static int setup(bf_plan *b, const em_tensor *bias, int64_t channels, float **fb,
                 const uint16_t *w, bool transposed, uint16_t **wp, int64_t *wper,
                 int64_t per_thread) {
  if (bias) {
    *fb = malloc((size_t)channels * sizeof **fb);
    if (*fb == NULL) return em_error_kind_set(EM_ERR_OOM, "out of memory");
    em_cvt_bf16_to_f32(*fb, (const uint16_t *)em_cpu_ptr(bias), channels);
  }
  *wp = pack_weights(&b->p, w, transposed, wper);
  if (*wp == NULL || alloc_scratch(b, per_thread) != 0) {
    free(*fb);
    free(*wp);
    *fb = NULL;
    *wp = NULL;
    return -1;
  }
  return 0;
}

/* Plans the call; returns the bf16 path (EM_BF16_PORTABLE: the caller goes through_f32), or -1
 * for a misspelt EMBER_CPU_BF16. */
static int plan(bf_plan *b, const em_conv_geom *g) {
  em_conv_plan_init(&b->p, g, EM_FLOAT32);
  b->mem = NULL;
  b->path = em_bf16_gemm_path();
  return b->path;
}

/* The bias in float32, added before the one rounding; NULL without one (or, with *ok false,
 * out of memory). */
static float *widen_bias(const em_tensor *bias, int64_t n, bool *ok) {
  if (bias == NULL) return NULL;
  float *f = malloc((size_t)n * sizeof *f);
  if (f == NULL) {
    em_error_kind_set(EM_ERR_OOM, "out of memory");
    *ok = false;
  }
  else em_cvt_bf16_to_f32(f, (const uint16_t *)em_cpu_ptr(bias), n);
  return f;
}

/* ---- stride 1: the columns are shifted windows of the padded image --------------------------- */

/* With stride 1, column value (k, oh*OW + ow) of tap k = (c, ki, kj) is xpad[off[k] + oh*Wp + ow],
 * xpad being the unit's input zero-padded to [Cg, Hp, Wp] and off[k] = (c*Hp + ki*dh)*Wp + kj*dw.
 * Computing Wp outputs per output row instead of OW (positions q = oh*Wp + ow, Pp = OH*Wp of
 * them) makes row k of the column matrix the contiguous run xpad[off[k] .. off[k] + Pp): the
 * packers read it in place and nothing is gathered (im2col and its packing were 60% of the
 * bf16 conv's time on the benchmark's conv2). The Wp - OW extra outputs of each row (windows
 * that wrap into the next row) are dropped (forward) or meet zeros (weight gradient): (kw-1)*dw
 * of every Wp products more (12% for the benchmark's 5x5 layers), on instructions several
 * times faster than the copies saved. */
typedef struct shifted {
  int64_t Hp, Wp, Pp;
  int64_t xlen;   /* the padded image, plus the last window's overrun past it */
  int64_t *off;   /* [Kg] */
} shifted;

static bool stride1(const em_conv_geom *g) { return g->sh == 1 && g->sw == 1; }

static int shifted_init(shifted *s, const conv_plan *p) {
  const em_conv_geom *g = p->g;
  s->Hp = g->H + 2 * g->ph, s->Wp = g->W + 2 * g->pw, s->Pp = g->OH * s->Wp;
  s->xlen = p->Cg * s->Hp * s->Wp + (g->kw - 1) * g->dw;
  s->off = malloc((size_t)p->Kg * sizeof *s->off);
  if (s->off == NULL) return em_error_kind_set(EM_ERR_OOM, "out of memory");
  for (int64_t c = 0; c < p->Cg; c++)
    for (int64_t ki = 0; ki < g->kh; ki++)
      for (int64_t kj = 0; kj < g->kw; kj++)
        s->off[(c * g->kh + ki) * g->kw + kj] = (c * s->Hp + ki * g->dh) * s->Wp + kj * g->dw;
  return 0;
}

/* xpad [Cg, Hp, Wp] (+ overrun) from one unit x [Cg, H, W]. */
static void pad_unit(const conv_plan *p, const shifted *s, const uint16_t *x, uint16_t *xpad) {
  const em_conv_geom *g = p->g;
  memset(xpad, 0, (size_t)s->xlen * sizeof *xpad);
  for (int64_t c = 0; c < p->Cg; c++)
    for (int64_t ih = 0; ih < g->H; ih++)
      memcpy(xpad + (c * s->Hp + ih + g->ph) * s->Wp + g->pw, x + (c * g->H + ih) * g->W,
             (size_t)g->W * sizeof *xpad);
}

/* y = conv(x, w) + bias for a stride-1 geometry g (x [N, C, H, W], w [M, Cg, kh, kw] bf16,
 * bias float32 or NULL), each output rounded once. */
static int forward_shifted(int path, const em_conv_geom *g, const uint16_t *xd, const uint16_t *w,
                           const float *fb, uint16_t *yd) {
  bf_plan b;
  em_conv_plan_init(&b.p, g, EM_FLOAT32);
  b.path = path;
  b.mem = NULL;
  conv_plan *p = &b.p;
  shifted s;
  if (shifted_init(&s, p) != 0) return -1;
  int64_t wper;
  uint16_t *wp = pack_weights(p, w, false, &wper);
  int64_t rows_off = round64(s.xlen * 2), bp_off = rows_off + round64(p->Kg * 8);
  int64_t cs_off = bp_off + round64(em_bf16_b_size(p->Kg, s.Pp) * 2);
  int64_t y_off = cs_off + round64(em_bf16_scratch_size() * 4);
  if (wp == NULL || alloc_scratch(&b, y_off + p->Mg * s.Pp * 2) != 0) {
    free(s.off);
    free(wp);
    return -1;
  }
#pragma omp parallel for num_threads(p->threads) schedule(static) if (p->threads > 1)
  for (int64_t u = 0; u < p->units; u++) {
    int64_t n = u / g->groups, grp = u % g->groups;
    char *mem = thread_mem(&b);
    uint16_t *xpad = (uint16_t *)mem, *bp = (uint16_t *)(mem + bp_off);
    uint16_t *yp = (uint16_t *)(mem + y_off);
    const uint16_t **rows = (const uint16_t **)(void *)(mem + rows_off);
    pad_unit(p, &s, xd + (n * g->C + grp * p->Cg) * p->HW, xpad);
    for (int64_t k = 0; k < p->Kg; k++) rows[k] = xpad + s.off[k];
    em_bf16_pack_b_rows(rows, p->Kg, s.Pp, bp);
    em_bf16_gemm_packed(b.path, p->Mg, s.Pp, p->Kg, wp + grp * wper, bp, 0,
                        fb ? fb + grp * p->Mg : NULL, yp, false, s.Pp, (float *)(mem + cs_off));
    uint16_t *yu = yd + (n * g->M + grp * p->Mg) * p->P;
    for (int64_t m = 0; m < p->Mg; m++)
      for (int64_t oh = 0; oh < g->OH; oh++)
        memcpy(yu + (m * g->OH + oh) * g->OW, yp + m * s.Pp + oh * s.Wp,
               (size_t)g->OW * sizeof *yu);
  }
  free(s.off);
  free(wp);
  free(b.mem);
  return 0;
}

/* The input gradient of a stride-1 conv is itself a stride-1 conv: of gy, padded by
 * dilation*(k-1) - padding, with the weights flipped and their two channel dims swapped per
 * group. Where that padding is negative, the im2col path runs. */
static bool input_grad_shifted_ok(const em_conv_geom *g) {
  return stride1(g) && g->dh * (g->kh - 1) >= g->ph && g->dw * (g->kw - 1) >= g->pw;
}

static int input_grad_shifted(int path, const em_conv_geom *g, const uint16_t *gyd,
                              const uint16_t *w, const float *fb, uint16_t *gxd) {
  em_conv_geom t = *g;
  t.C = g->M, t.M = g->C, t.H = g->OH, t.W = g->OW, t.OH = g->H, t.OW = g->W;
  t.ph = g->dh * (g->kh - 1) - g->ph, t.pw = g->dw * (g->kw - 1) - g->pw;
  int64_t Cg = g->C / g->groups, Mg = g->M / g->groups, kk = g->kh * g->kw;
  uint16_t *wt = malloc((size_t)(g->M * Cg * kk) * sizeof *wt);
  if (wt == NULL) return em_error_kind_set(EM_ERR_OOM, "out of memory");
  for (int64_t grp = 0; grp < g->groups; grp++)
    for (int64_t m = 0; m < Mg; m++)
      for (int64_t c = 0; c < Cg; c++)
        for (int64_t k = 0; k < kk; k++)
          wt[((grp * Cg + c) * Mg + m) * kk + (kk - 1 - k)] = w[((grp * Mg + m) * Cg + c) * kk + k];
  int rc = forward_shifted(path, &t, gyd, wt, fb, gxd);
  free(wt);
  return rc;
}

/* gw = sum over units of gy[n,g] @ cols^T, as gw^T [Kg, Mg] = cols [Kg, Pp] @ gy'^T [Pp, Mg]:
 * the columns are the A operand, read row by row in place, and gy' is gy widened to Wp
 * positions per row with zeros, so the wrapped windows add nothing. */
static int weight_grad_shifted(bf_plan *b, const uint16_t *xd, const uint16_t *gyd,
                               uint16_t *gwd) {
  conv_plan *p = &b->p;
  const em_conv_geom *g = p->g;
  shifted s;
  if (shifted_init(&s, p) != 0) return -1;
  int64_t total = g->M * p->Kg;
  int64_t rows_off = round64(s.xlen * 2), ap_off = rows_off + round64(p->Kg * 8);
  int64_t gy_off = ap_off + round64(em_bf16_a_size(p->Kg, s.Pp) * 2);
  int64_t bp_off = gy_off + round64(p->Mg * s.Pp * 2);
  int64_t cs_off = bp_off + round64(em_bf16_b_size(s.Pp, p->Mg) * 2);
  int64_t acc_off = cs_off + round64(em_bf16_scratch_size() * 4);
  if (alloc_scratch(b, acc_off + total * 4) != 0) {
    free(s.off);
    return -1;
  }
#pragma omp parallel num_threads(p->threads) if (p->threads > 1)
  {
    int t = p->threads > 1 ? omp_get_thread_num() : 0;
    int nt = p->threads > 1 ? omp_get_num_threads() : 1;
    char *mem = thread_mem(b);
    uint16_t *xpad = (uint16_t *)mem, *ap = (uint16_t *)(mem + ap_off);
    uint16_t *gyp = (uint16_t *)(mem + gy_off), *bp = (uint16_t *)(mem + bp_off);
    const uint16_t **rows = (const uint16_t **)(void *)(mem + rows_off);
    float *acc = (float *)(mem + acc_off); /* [groups][Kg, Mg] */
    memset(acc, 0, (size_t)total * sizeof *acc);
    memset(gyp, 0, (size_t)(p->Mg * s.Pp) * sizeof *gyp);
    int64_t lo = p->units * t / nt, hi = p->units * (t + 1) / nt;
    for (int64_t u = lo; u < hi; u++) {
      int64_t n = u / g->groups, grp = u % g->groups;
      pad_unit(p, &s, xd + (n * g->C + grp * p->Cg) * p->HW, xpad);
      for (int64_t k = 0; k < p->Kg; k++) rows[k] = xpad + s.off[k];
      em_bf16_pack_a_rows(rows, p->Kg, s.Pp, ap);
      const uint16_t *gyu = gyd + (n * g->M + grp * p->Mg) * p->P;
      for (int64_t m = 0; m < p->Mg; m++)
        for (int64_t oh = 0; oh < g->OH; oh++)
          memcpy(gyp + m * s.Pp + oh * s.Wp, gyu + (m * g->OH + oh) * g->OW,
                 (size_t)g->OW * sizeof *gyp);
      em_bf16_pack_b_t(gyp, s.Pp, s.Pp, p->Mg, bp);
      em_bf16_gemm_packed(b->path, p->Kg, p->Mg, s.Pp, ap, bp, 1, NULL,
                          acc + grp * p->Kg * p->Mg, true, p->Mg, (float *)(mem + cs_off));
    }
  }
  float *sum = (float *)(b->mem + acc_off);
  for (int t = 1; t < p->threads; t++) {
    const float *acc = (const float *)(b->mem + (size_t)t * (size_t)b->scratch + acc_off);
    for (int64_t i = 0; i < total; i++) sum[i] += acc[i];
  }
  /* gw[g*Mg + m, k] = acc[g][k, m], rounded once */
  float *row = malloc((size_t)p->Kg * sizeof *row);
  if (row == NULL) {
    free(s.off);
    free(b->mem);
    return em_error_kind_set(EM_ERR_OOM, "out of memory");
  }
  for (int64_t grp = 0; grp < g->groups; grp++)
    for (int64_t m = 0; m < p->Mg; m++) {
      const float *a = sum + grp * p->Kg * p->Mg + m;
      for (int64_t k = 0; k < p->Kg; k++) row[k] = a[k * p->Mg];
      em_cvt_f32_to_bf16(gwd + (grp * p->Mg + m) * p->Kg, row, p->Kg);
    }
  free(row);
  free(s.off);
  free(b->mem);
  return 0;
}

/* ---- forward --------------------------------------------------------------------------------- */

int em_conv_bf16_forward(em_tensor *y, const em_tensor *x, const em_tensor *w,
                         const em_tensor *bias, const em_conv_geom *g) {
  bf_plan b;
  if (plan(&b, g) < 0) return -1;
  conv_plan *p = &b.p;
  if (b.path == EM_BF16_PORTABLE || p->Kg == 0) return through_f32(FWD, y, x, w, bias, g);
  if (stride1(g) && !p->direct) {
    bool ok = true;
    float *fb = widen_bias(bias, g->M, &ok);
    int rc = ok ? forward_shifted(b.path, g, (const uint16_t *)em_cpu_ptr(x),
                                  (const uint16_t *)em_cpu_ptr(w), fb, (uint16_t *)em_cpu_ptr(y))
                : -1;
    free(fb);
    return rc;
  }
  int64_t bsize = em_bf16_b_size(p->Kg, p->P), wper;
  int64_t cs_off = round64(bsize * 2), cols_off = cs_off + round64(em_bf16_scratch_size() * 4);
  float *fb = NULL;
  uint16_t *wp = NULL;
  if (setup(&b, bias, g->M, &fb, (const uint16_t *)em_cpu_ptr(w), false, &wp, &wper,
            cols_off + (p->direct ? 0 : p->Kg * p->P * 2)) != 0)
    return -1;
  const uint16_t *xd = (const uint16_t *)em_cpu_ptr(x);
  uint16_t *yd = (uint16_t *)em_cpu_ptr(y);
#pragma omp parallel for num_threads(p->threads) schedule(static) if (p->threads > 1)
  for (int64_t u = 0; u < p->units; u++) {
    int64_t n = u / g->groups, grp = u % g->groups;
    char *mem = thread_mem(&b);
    uint16_t *bp = (uint16_t *)mem, *cols = (uint16_t *)(mem + cols_off);
    const uint16_t *xu = xd + (n * g->C + grp * p->Cg) * p->HW;
    if (p->direct) em_bf16_pack_b(xu, p->HW, 1, p->Kg, p->P, bp);
    else {
      im2col_bf16(p, xu, cols);
      em_bf16_pack_b(cols, p->P, 1, p->Kg, p->P, bp);
    }
    em_bf16_gemm_packed(b.path, p->Mg, p->P, p->Kg, wp + grp * wper, bp, 0,
                        fb ? fb + grp * p->Mg : NULL, yd + (n * g->M + grp * p->Mg) * p->P, false,
                        p->P, (float *)(mem + cs_off));
  }
  free(fb);
  free(wp);
  free(b.mem);
  return 0;
}

/* ---- input gradient -------------------------------------------------------------------------- */

int em_conv_bf16_input_grad(em_tensor *gx, const em_tensor *gy, const em_tensor *w,
                            const em_tensor *bias, const em_conv_geom *g) {
  bf_plan b;
  if (plan(&b, g) < 0) return -1;
  conv_plan *p = &b.p;
  if (b.path == EM_BF16_PORTABLE || p->Mg == 0 || p->P == 0)
    return through_f32(IGRAD, gx, gy, w, bias, g);
  if (input_grad_shifted_ok(g) && !p->direct) {
    bool ok = true;
    float *fb = widen_bias(bias, g->C, &ok);
    int rc = ok ? input_grad_shifted(b.path, g, (const uint16_t *)em_cpu_ptr(gy),
                                     (const uint16_t *)em_cpu_ptr(w), fb,
                                     (uint16_t *)em_cpu_ptr(gx))
                : -1;
    free(fb);
    return rc;
  }
  int64_t bsize = em_bf16_b_size(p->Mg, p->P), wper;
  int64_t cs_off = round64(bsize * 2), cols_off = cs_off + round64(em_bf16_scratch_size() * 4);
  /* float32: the columns [Kg, P], then the unit's gradient [Cg, H*W] (the columns themselves
   * when direct) */
  int64_t gx_off = cols_off + round64(p->Kg * p->P * 4);
  float *fb = NULL;
  uint16_t *wp = NULL;
  if (setup(&b, bias, g->C, &fb, (const uint16_t *)em_cpu_ptr(w), true, &wp, &wper,
            gx_off + (p->direct ? 0 : p->Cg * p->HW * 4)) != 0)
    return -1;
  const uint16_t *gyd = (const uint16_t *)em_cpu_ptr(gy);
  uint16_t *gxd = (uint16_t *)em_cpu_ptr(gx);
#pragma omp parallel for num_threads(p->threads) schedule(static) if (p->threads > 1)
  for (int64_t u = 0; u < p->units; u++) {
    int64_t n = u / g->groups, grp = u % g->groups;
    char *mem = thread_mem(&b);
    uint16_t *bp = (uint16_t *)mem;
    float *cols = (float *)(mem + cols_off);
    float *gxf = p->direct ? cols : (float *)(mem + gx_off);
    em_bf16_pack_b(gyd + (n * g->M + grp * p->Mg) * p->P, p->P, 1, p->Mg, p->P, bp);
    em_bf16_gemm_packed(b.path, p->Kg, p->P, p->Mg, wp + grp * wper, bp, 0, NULL, cols, true,
                        p->P, (float *)(mem + cs_off));
    if (!p->direct) {
      memset(gxf, 0, (size_t)(p->Cg * p->HW) * sizeof *gxf);
      em_conv_col2im_add(p, (const char *)cols, (char *)gxf);
    }
    if (fb) em_conv_add_rows((char *)gxf, (const char *)(fb + grp * p->Cg), p->Cg, p->HW, false);
    em_cvt_f32_to_bf16(gxd + (n * g->C + grp * p->Cg) * p->HW, gxf, p->Cg * p->HW);
  }
  free(fb);
  free(wp);
  free(b.mem);
  return 0;
}

/* ---- weight gradient ------------------------------------------------------------------------- */

int em_conv_bf16_weight_grad(em_tensor *gw, const em_tensor *x, const em_tensor *gy,
                             const em_conv_geom *g) {
  bf_plan b;
  if (plan(&b, g) < 0) return -1;
  conv_plan *p = &b.p;
  if (b.path == EM_BF16_PORTABLE || p->P == 0 || p->units == 0)
    return through_f32(WGRAD, gw, x, gy, NULL, g);
  if (stride1(g) && !p->direct)
    return weight_grad_shifted(&b, (const uint16_t *)em_cpu_ptr(x),
                               (const uint16_t *)em_cpu_ptr(gy), (uint16_t *)em_cpu_ptr(gw));
  int64_t total = em_numel(gw);
  /* A = gy[n,g] [Mg, P], B = cols^T [P, Kg] */
  int64_t asize = em_bf16_a_size(p->Mg, p->P), bsize = em_bf16_b_size(p->P, p->Kg);
  int64_t bp_off = round64(asize * 2), cs_off = bp_off + round64(bsize * 2);
  int64_t acc_off = cs_off + round64(em_bf16_scratch_size() * 4);
  int64_t cols_off = acc_off + round64(total * 4);
  if (alloc_scratch(&b, cols_off + (p->direct ? 0 : p->Kg * p->P * 2)) != 0) return -1;
  const uint16_t *xd = (const uint16_t *)em_cpu_ptr(x), *gyd = (const uint16_t *)em_cpu_ptr(gy);
#pragma omp parallel num_threads(p->threads) if (p->threads > 1)
  {
    int t = p->threads > 1 ? omp_get_thread_num() : 0;
    int nt = p->threads > 1 ? omp_get_num_threads() : 1;
    char *mem = thread_mem(&b);
    uint16_t *ap = (uint16_t *)mem, *bp = (uint16_t *)(mem + bp_off);
    uint16_t *cols = (uint16_t *)(mem + cols_off);
    float *acc = (float *)(mem + acc_off);
    memset(acc, 0, (size_t)total * sizeof *acc);
    /* a contiguous split, as schedule(static), so each thread's sum is a fixed set of units */
    int64_t lo = p->units * t / nt, hi = p->units * (t + 1) / nt;
    for (int64_t u = lo; u < hi; u++) {
      int64_t n = u / g->groups, grp = u % g->groups;
      const uint16_t *xu = xd + (n * g->C + grp * p->Cg) * p->HW;
      em_bf16_pack_a(gyd + (n * g->M + grp * p->Mg) * p->P, p->P, 1, p->Mg, p->P, ap);
      if (!p->direct) im2col_bf16(p, xu, cols);
      /* cols [Kg, P] read as its transpose [P, Kg]: row stride 1, column stride P */
      em_bf16_pack_b_t(p->direct ? xu : cols, p->P, p->P, p->Kg, bp);
      em_bf16_gemm_packed(b.path, p->Mg, p->Kg, p->P, ap, bp, 1, NULL,
                          acc + grp * p->Mg * p->Kg, true, p->Kg, (float *)(mem + cs_off));
    }
  }
  float *sum = (float *)(b.mem + acc_off);
  for (int t = 1; t < p->threads; t++) {
    const float *acc = (const float *)(b.mem + (size_t)t * (size_t)b.scratch + acc_off);
    for (int64_t i = 0; i < total; i++) sum[i] += acc[i];
  }
  em_cvt_f32_to_bf16((uint16_t *)em_cpu_ptr(gw), sum, total);
  free(b.mem);
  return 0;
}
