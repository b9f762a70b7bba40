/*
 * conv_packed.c: the float32 convolution kernels on the packed AVX-512 product (sgemm.h),
 * used by conv.c where the CPU has AVX-512.
 *
 * Same decomposition as conv.c (one GEMM per (image, group) unit), with the packing folded in:
 *  - the weights are packed once per call and shared by every unit and thread;
 *  - im2col writes its columns straight into the packed operand layout (forward: B = cols;
 *    weight gradient: B = cols^T), so the column matrix is never written in plain form and
 *    never copied again by a packing routine;
 *  - the bias is added by the product's epilogue.
 * The input gradient still forms a plain column matrix per unit and scatters it back
 * (col2im), since its columns are an output.
 */
#include <omp.h>

#include "../nn.h"
#include "conv_impl.h"
#include "sgemm.h"

/* Floats a thread needs: the packed columns plus one run of output positions. */
typedef struct packed_plan {
  conv_plan p;
  int64_t scratch;   /* per thread */
} packed_plan;

/* ---- im2col into packed layouts ---------------------------------------------------------------- */

/* One output row's worth of column values for kernel tap (ki, kj) of channel plane xc; the
 * valid output columns [lo, hi) and the input column offset `off` depend only on kj, so the
 * caller computes them once per tap. */
static void make_run(const em_conv_geom *g, const float *xc, int64_t ki, int64_t oh, int64_t off,
                     int64_t lo, int64_t hi, float *run) {
  int64_t ih = oh * g->sh - g->ph + ki * g->dh;
  if (ih < 0 || ih >= g->H) {
    memset(run, 0, (size_t)g->OW * sizeof(float));
    return;
  }
  const float *src = xc + ih * g->W;
  for (int64_t i = 0; i < lo; i++) run[i] = 0;
  if (g->sw == 1) memcpy(run + lo, src + lo + off, (size_t)(hi - lo) * sizeof(float));
  else
    for (int64_t i = lo; i < hi; i++) run[i] = src[i * g->sw + off];
  for (int64_t i = hi; i < g->OW; i++) run[i] = 0;
}

/* B = cols [Kg, P]: row r of the columns, positions [p, p + n), into the packed layout. */
static void put_cols(float *bp, int64_t Kg, int64_t r, int64_t p, const float *run, int64_t n) {
  while (n > 0) {
    int64_t j = p % EM_SG_NR, m = EM_SG_NR - j < n ? EM_SG_NR - j : n;
    memcpy(bp + em_sgemm_b_at(Kg, r, p), run, (size_t)m * sizeof(float));
    p += m;
    run += m;
    n -= m;
  }
}

/* B = cols^T [P, Kg]: column r of it (row r of the columns), positions [p, p + n). */
static void put_cols_t(float *bp, int64_t P, int64_t r, int64_t p, const float *run, int64_t n) {
  float *dst = bp + em_sgemm_b_at(P, p, r);
  for (int64_t i = 0; i < n; i++) dst[i * EM_SG_NR] = run[i];
}

/* Packs the columns of one unit (x [Cg, H, W]) as B (transposed: as B^T). */
static void im2col_packed(const conv_plan *p, const float *x, float *bp, float *run,
                          bool transposed) {
  const em_conv_geom *g = p->g;
  if (p->direct) { /* the columns are x itself, [Cg, H*W] */
    if (transposed) em_sgemm_pack_b(true, p->P, p->Cg, x, p->HW, bp);
    else em_sgemm_pack_b(false, p->Cg, p->P, x, p->HW, bp);
    return;
  }
  for (int64_t c = 0; c < p->Cg; c++)
    for (int64_t ki = 0; ki < g->kh; ki++)
      for (int64_t kj = 0; kj < g->kw; kj++) {
        int64_t r = (c * g->kh + ki) * g->kw + kj, off = kj * g->dw - g->pw, lo, hi;
        em_conv_valid_range(g->OW, g->W, g->sw, off, &lo, &hi);
        for (int64_t oh = 0; oh < g->OH; oh++) {
          make_run(g, x + c * p->HW, ki, oh, off, lo, hi, run);
          if (transposed) put_cols_t(bp, p->P, r, oh * g->OW, run, g->OW);
          else put_cols(bp, p->Kg, r, oh * g->OW, run, g->OW);
        }
      }
}

/* ---- buffers --------------------------------------------------------------------------------- */

/* The packed weights of every group, [groups][a_size]; transposed for the input gradient. */
static em_tensor *pack_weights(const conv_plan *p, const float *w, bool transposed) {
  int64_t per = transposed ? em_sgemm_a_size(p->Kg, p->Mg) : em_sgemm_a_size(p->Mg, p->Kg);
  em_tensor *t = em_empty(1, (int64_t[]){per * p->g->groups}, EM_FLOAT32, EM_CPU);
  if (t == NULL) return NULL;
  float *dst = (float *)em_cpu_ptr(t);
  for (int64_t grp = 0; grp < p->g->groups; grp++) {
    const float *wg = w + grp * p->Mg * p->Kg;
    if (transposed) em_sgemm_pack_a(true, p->Kg, p->Mg, wg, p->Kg, dst + grp * per);
    else em_sgemm_pack_a(false, p->Mg, p->Kg, wg, p->Kg, dst + grp * per);
  }
  return t;
}

/* Per-thread scratch, zero-filled once: packed layouts pad with columns nobody writes. */
static em_tensor *thread_scratch(const conv_plan *p, int64_t per_thread) {
  return em_zeros(1, (int64_t[]){per_thread * p->threads}, EM_FLOAT32, EM_CPU);
}

static float *scratch_of(const conv_plan *p, em_tensor *s, int64_t per_thread) {
  int t = p->threads > 1 ? omp_get_thread_num() : 0;
  return (float *)em_cpu_ptr(s) + t * per_thread;
}

/* ---- forward ----------------------------------------------------------------------------------- */

int em_conv_packed_forward(em_tensor *y, const em_tensor *x, const em_tensor *w,
                           const em_tensor *bias, const em_conv_geom *g) {
  conv_plan p;
  em_conv_plan_init(&p, g, EM_FLOAT32);
  int64_t bsize = em_sgemm_b_size(p.Kg, p.P), per = bsize + g->OW;
  em_tensor *wp = pack_weights(&p, (const float *)em_cpu_ptr(w), false);
  em_tensor *s = wp ? thread_scratch(&p, per) : NULL;
  if (s == NULL) {
    em_release(wp);
    return -1;
  }
  const float *xd = (const float *)em_cpu_ptr(x), *bd = bias ? (const float *)em_cpu_ptr(bias) : NULL;
  const float *wd = (const float *)em_cpu_ptr(wp);
  float *yd = (float *)em_cpu_ptr(y);
  int64_t wper = em_sgemm_a_size(p.Mg, p.Kg);
#pragma omp parallel for num_threads(p.threads) schedule(static) if (p.threads > 1)
  for (int64_t u = 0; u < p.units; u++) {
    int64_t n = u / g->groups, grp = u % g->groups;
    float *bp = scratch_of(&p, s, per), *run = bp + bsize;
    im2col_packed(&p, xd + (n * g->C + grp * p.Cg) * p.HW, bp, run, false);
    em_sgemm_packed(p.Mg, p.P, p.Kg, wd + grp * wper, bp, 0, bd ? bd + grp * p.Mg : NULL,
                    yd + (n * g->M + grp * p.Mg) * p.P, p.P);
  }
  em_release(wp);
  em_release(s);
  return 0;
}

/* ---- input gradient ------------------------------------------------------------------------------ */

int em_conv_packed_input_grad(em_tensor *gx, const em_tensor *gy, const em_tensor *w,
                              const em_tensor *bias, const em_conv_geom *g) {
  conv_plan p;
  em_conv_plan_init(&p, g, EM_FLOAT32);
  int64_t bsize = em_sgemm_b_size(p.Mg, p.P), per = bsize + (p.direct ? 0 : p.Kg * p.P);
  em_tensor *wp = pack_weights(&p, (const float *)em_cpu_ptr(w), true);
  em_tensor *s = wp ? thread_scratch(&p, per) : NULL;
  if (s == NULL) {
    em_release(wp);
    return -1;
  }
  const float *gyd = (const float *)em_cpu_ptr(gy), *wd = (const float *)em_cpu_ptr(wp);
  const float *bd = bias ? (const float *)em_cpu_ptr(bias) : NULL;
  float *gxd = (float *)em_cpu_ptr(gx);
  int64_t wper = em_sgemm_a_size(p.Kg, p.Mg);
#pragma omp parallel for num_threads(p.threads) schedule(static) if (p.threads > 1)
  for (int64_t u = 0; u < p.units; u++) {
    int64_t n = u / g->groups, grp = u % g->groups;
    float *bp = scratch_of(&p, s, per), *cols = bp + bsize;
    float *gxu = gxd + (n * g->C + grp * p.Cg) * p.HW;
    em_sgemm_pack_b(false, p.Mg, p.P, gyd + (n * g->M + grp * p.Mg) * p.P, p.P, bp);
    if (p.direct) {
      em_sgemm_packed(p.Kg, p.P, p.Mg, wd + grp * wper, bp, 0, NULL, gxu, p.P);
    } else {
      em_sgemm_packed(p.Kg, p.P, p.Mg, wd + grp * wper, bp, 0, NULL, cols, p.P);
      memset(gxu, 0, (size_t)(p.Cg * p.HW) * sizeof(float));
      em_conv_col2im_add(&p, (const char *)cols, (char *)gxu);
    }
    if (bd) em_conv_add_rows((char *)gxu, (const char *)(bd + grp * p.Cg), p.Cg, p.HW, false);
  }
  em_release(wp);
  em_release(s);
  return 0;
}

/* ---- weight gradient ------------------------------------------------------------------------------ */

int em_conv_packed_weight_grad(em_tensor *gw, const em_tensor *x, const em_tensor *gy,
                               const em_conv_geom *g) {
  conv_plan p;
  em_conv_plan_init(&p, g, EM_FLOAT32);
  int64_t total = em_numel(gw);
  int64_t asize = em_sgemm_a_size(p.Mg, p.P), bsize = em_sgemm_b_size(p.P, p.Kg);
  int64_t per = asize + bsize + g->OW + (p.threads > 1 ? total : 0);
  em_tensor *s = thread_scratch(&p, per);
  if (s == NULL) return -1;
  const float *xd = (const float *)em_cpu_ptr(x), *gyd = (const float *)em_cpu_ptr(gy);
  float *gwd = (float *)em_cpu_ptr(gw);
  memset(gwd, 0, (size_t)total * sizeof(float));
#pragma omp parallel num_threads(p.threads) if (p.threads > 1)
  {
    int t = p.threads > 1 ? omp_get_thread_num() : 0, nt = p.threads > 1 ? omp_get_num_threads() : 1;
    float *ap = scratch_of(&p, s, per), *bp = ap + asize, *run = bp + bsize;
    /* thread 0 sums into gw; the others into their scratch, added in order below */
    float *acc = t == 0 ? gwd : run + g->OW;
    int64_t lo = p.units * t / nt, hi = p.units * (t + 1) / nt;
    for (int64_t u = lo; u < hi; u++) {
      int64_t n = u / g->groups, grp = u % g->groups;
      em_sgemm_pack_a(false, p.Mg, p.P, gyd + (n * g->M + grp * p.Mg) * p.P, p.P, ap);
      im2col_packed(&p, xd + (n * g->C + grp * p.Cg) * p.HW, bp, run, true);
      em_sgemm_packed(p.Mg, p.Kg, p.P, ap, bp, 1, NULL, acc + grp * p.Mg * p.Kg, p.Kg);
    }
  }
  for (int t = 1; t < p.threads; t++) {
    const float *acc = (const float *)em_cpu_ptr(s) + t * per + asize + bsize + g->OW;
    for (int64_t i = 0; i < total; i++) gwd[i] += acc[i];
  }
  em_release(s);
  return 0;
}
