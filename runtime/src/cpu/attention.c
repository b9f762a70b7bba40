/*
 * attention.c: the CPU kernels of scaled_dot_product_attention (nn.h, em_attn_geom, says what
 * is computed; backend.h the slots' contract). float32 and float64.
 *
 * FlashAttention-2's scheme on tiles of BR queries by BC keys, each tile's products on BLAS
 * (single-threaded inside the parallel region), so nothing of size L x S is ever in memory:
 * every thread owns a few tile buffers and that is all.
 *
 * Forward, one unit per (batch, q head, query tile): the query tile (pre-scaled) meets every
 * key tile in turn; S = Q K^T, plus the mask, causal entries -inf; an online softmax keeps per
 * row the running max m and sum l, rescales the output accumulator when m grows, and adds
 * P V. The unit ends with out = O / l and lse = m + log(l). Causal units stop at the
 * diagonal's last key tile.
 *
 * Backward, recomputing P = exp(S - lse) tile by tile (delta = rowsum(gout * out) first):
 *   dV += P^T dO,  dP = dO V^T,  dS = P * (dP - delta),  dK += dS^T Q * scale,  dQ += dS K * scale
 * (with dropout, P in dV's product and dP are multiplied by the same kept-mask / (1 - p)).
 * Two schedules:
 *  - fused, one unit per (batch, kv head): key tiles in turn, each meeting every query tile of
 *    the heads that share it; dK/dV accumulate in the unit's tile buffers, dQ straight into
 *    gq (no other unit writes those rows). Five products per tile pair.
 *  - two passes, when there are too few (batch, kv head) pairs to keep the threads busy: one
 *    parallel over (batch, kv head, key tile) for dK/dV, one over (batch, q head, query tile)
 *    for dQ, each recomputing S and dP (seven products per pair, every thread busy).
 *
 * Dropout regenerates each score's Philox word from its flat index (nn.h's numbering), so the
 * backward sees the forward's mask without storing it.
 */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "../nn.h"
#include "../random.h"
#include "attention_rows.h"
#include "cpu.h"
#include "sgemm.h"

enum { BR = 64, BC = 64 };

/* ---- the problem, as pointers and element strides -------------------------------------------- */

typedef struct operand {
  char *p;
  int64_t s[4]; /* strides in elements */
} operand;

typedef struct attn {
  const em_attn_geom *g;
  bool f64;
  bool packed;   /* float32 on sgemm.h's kernel and attention_rows.h's loops (AVX-512) */
  size_t es;
  int64_t group; /* q heads per kv head */
  operand q, k, v, out, lse, gout, gq, gk, gv;
  const float *mask;
  int64_t ms[4];
  double *delta; /* backward: rowsum(gout * out), [B, Hq, Tq] */
} attn;

static operand operand_of(const em_tensor *t) {
  operand o = {t ? em_cpu_ptr(t) : NULL, {0, 0, 0, 0}};
  if (t)
    for (int d = 0; d < t->ndim && d < 4; d++) o.s[d] = t->strides[d];
  return o;
}

/* Element (b, h, i, 0) of a [B, H, T, E] operand. */
static char *row_at(const attn *a, const operand *o, int64_t b, int64_t h, int64_t i) {
  return o->p + (size_t)(b * o->s[0] + h * o->s[1] + i * o->s[2]) * a->es;
}

/* ---- BLAS on tiles --------------------------------------------------------------------------- */

/* Row-major C [M, N] = alpha * op(A) op(B) + beta * C. K == 0 leaves beta * C. */
static void gemm(bool f64, bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
                 const void *A, int64_t lda, const void *B, int64_t ldb, double beta, void *C,
                 int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        if (f64) ((double *)C)[i * ldc + j] = beta == 0 ? 0 : beta * ((double *)C)[i * ldc + j];
        else ((float *)C)[i * ldc + j] = beta == 0 ? 0 : (float)beta * ((float *)C)[i * ldc + j];
      }
    return;
  }
  enum CBLAS_TRANSPOSE a = ta ? CblasTrans : CblasNoTrans, b = tb ? CblasTrans : CblasNoTrans;
  if (f64)
    cblas_dgemm(CblasRowMajor, a, b, (int)M, (int)N, (int)K, alpha, A, (int)lda, B, (int)ldb,
                beta, C, (int)ldc);
  else
    cblas_sgemm(CblasRowMajor, a, b, (int)M, (int)N, (int)K, (float)alpha, A, (int)lda, B,
                (int)ldb, (float)beta, C, (int)ldc);
}

static int64_t ld(int64_t cols) { return cols > 0 ? cols : 1; }

/* Floats of each packing buffer a thread needs for sgemm.h's kernel: operands are at most
 * X x X with X = max(64, D, Dv). */
static int64_t pack_floats(const em_attn_geom *g) {
  int64_t x = BR > BC ? BR : BC;
  if (g->D > x) x = g->D;
  if (g->Dv > x) x = g->Dv;
  return em_sg_round(x, EM_SG_NR) * x;
}

/* ---- typed tile helpers ---------------------------------------------------------------------- */

/* dst [rows, cols] (contiguous) = src rows (rs apart) * scale. */
#define LOAD_TILE(NAME, T)                                                                     \
  static void NAME(T *dst, const T *src, int64_t rows, int64_t cols, int64_t rs, T scale) {   \
    for (int64_t r = 0; r < rows; r++)                                                        \
      for (int64_t c = 0; c < cols; c++) dst[r * cols + c] = src[r * rs + c] * scale;         \
  }
LOAD_TILE(load_f32, float)
LOAD_TILE(load_f64, double)

static void load_tile(const attn *a, void *dst, const char *src, int64_t rows, int64_t cols,
                      int64_t rs, double scale) {
  if (a->f64) load_f64(dst, (const double *)src, rows, cols, rs, scale);
  else load_f32(dst, (const float *)src, rows, cols, rs, (float)scale);
}

/* S [br, bc] += mask rows; entries above the causal diagonal (key j > query i) -> -inf. */
#define FIX_SCORES(NAME, T)                                                                    \
  static void NAME(T *S, int64_t br, int64_t bc, const float *m, int64_t msi, int64_t msj,    \
                   bool causal, int64_t i0, int64_t j0) {                                     \
    for (int64_t i = 0; i < br; i++) {                                                        \
      T *s = S + i * bc;                                                                      \
      if (m)                                                                                  \
        for (int64_t j = 0; j < bc; j++) s[j] += (T)m[i * msi + j * msj];                     \
      if (causal)                                                                             \
        for (int64_t j = i0 + i + 1 - j0 > 0 ? i0 + i + 1 - j0 : 0; j < bc; j++)              \
          s[j] = (T)-INFINITY;                                                                \
    }                                                                                         \
  }
FIX_SCORES(fix_f32, float)
FIX_SCORES(fix_f64, double)

static void fix_scores(const attn *a, void *S, int64_t br, int64_t bc, int64_t b, int64_t h,
                       int64_t i0, int64_t j0) {
  const float *m = a->mask ? a->mask + b * a->ms[0] + h * a->ms[1] + i0 * a->ms[2] + j0 * a->ms[3]
                           : NULL;
  bool causal = a->g->causal && j0 + bc - 1 > i0;
  if (m == NULL && !causal) return;
  if (a->f64) fix_f64(S, br, bc, m, a->ms[2], a->ms[3], causal, i0, j0);
  else fix_f32(S, br, bc, m, a->ms[2], a->ms[3], causal, i0, j0);
}

/* The online softmax's step over one tile: per row, the new max m' = max(m, max S), the
 * rescale alpha = exp(m - m'), S <- exp(S - m'), l <- l * alpha + rowsum(S). A row still at
 * -inf (every key so far masked) keeps P = 0 and alpha = 1. */
#define ONLINE(NAME, T, EXP)                                                                   \
  static void NAME(T *S, int64_t br, int64_t bc, double *m, double *l, double *alpha) {       \
    for (int64_t i = 0; i < br; i++) {                                                        \
      T *s = S + i * bc, mx = (T)m[i];                                                        \
      for (int64_t j = 0; j < bc; j++) mx = s[j] > mx ? s[j] : mx;                            \
      if (mx == (T)-INFINITY) {                                                               \
        for (int64_t j = 0; j < bc; j++) s[j] = 0;                                            \
        alpha[i] = 1;                                                                         \
        continue;                                                                             \
      }                                                                                       \
      T sum = 0;                                                                              \
      for (int64_t j = 0; j < bc; j++) {                                                      \
        s[j] = EXP(s[j] - mx);                                                                \
        sum += s[j];                                                                          \
      }                                                                                       \
      alpha[i] = EXP((T)m[i] - mx);                                                           \
      l[i] = l[i] * alpha[i] + sum;                                                           \
      m[i] = mx;                                                                              \
    }                                                                                         \
  }
ONLINE(online_f32, float, expf)
ONLINE(online_f64, double, exp)

/* P = exp(S - lse) per row (a row with lse = -inf has P = 0). */
#define PROBS(NAME, T, EXP)                                                                    \
  static void NAME(T *S, int64_t br, int64_t bc, const double *lse) {                         \
    for (int64_t i = 0; i < br; i++) {                                                        \
      T *s = S + i * bc, m = (T)lse[i];                                                       \
      if (m == (T)-INFINITY) {                                                                \
        for (int64_t j = 0; j < bc; j++) s[j] = 0;                                            \
        continue;                                                                             \
      }                                                                                       \
      for (int64_t j = 0; j < bc; j++) s[j] = EXP(s[j] - m);                                  \
    }                                                                                         \
  }
PROBS(probs_f32, float, expf)
PROBS(probs_f64, double, exp)

/* X [rows, cols] row r *= f[r]. */
#define SCALE_ROWS(NAME, T)                                                                    \
  static void NAME(T *X, int64_t rows, int64_t cols, const double *f) {                       \
    for (int64_t r = 0; r < rows; r++) {                                                      \
      T v = (T)f[r];                                                                          \
      if (v != 1)                                                                             \
        for (int64_t c = 0; c < cols; c++) X[r * cols + c] *= v;                              \
    }                                                                                         \
  }
SCALE_ROWS(scale_rows_f32, float)
SCALE_ROWS(scale_rows_f64, double)

static void scale_rows(const attn *a, void *X, int64_t rows, int64_t cols, const double *f) {
  if (a->f64) scale_rows_f64(X, rows, cols, f);
  else scale_rows_f32(X, rows, cols, f);
}

/* dS = P * (dP - delta) into dP. */
#define DSCORES(NAME, T)                                                                       \
  static void NAME(T *dP, const T *P, int64_t br, int64_t bc, const double *delta) {          \
    for (int64_t i = 0; i < br; i++) {                                                        \
      T d = (T)delta[i];                                                                      \
      for (int64_t j = 0; j < bc; j++) dP[i * bc + j] = P[i * bc + j] * (dP[i * bc + j] - d); \
    }                                                                                         \
  }
DSCORES(dscores_f32, float)
DSCORES(dscores_f64, double)

/* rowsum(x * y) over n elements of two rows. */
#define ROWDOT(NAME, T)                                                                        \
  static double NAME(const T *x, const T *y, int64_t n) {                                     \
    double s = 0;                                                                             \
    for (int64_t c = 0; c < n; c++) s += (double)x[c] * (double)y[c];                         \
    return s;                                                                                 \
  }
ROWDOT(rowdot_f32, float)
ROWDOT(rowdot_f64, double)

/* ---- dropout --------------------------------------------------------------------------------- */

/* X [br, bc] (scores of rows i0.., keys j0.. of head (b, h)) *= kept / (1 - p): each score's
 * word is lane e % 4 of Philox block offset + e / 4 (nn.h). */
#define DROPOUT(NAME, T)                                                                       \
  static void NAME(T *X, int64_t br, int64_t bc, uint64_t e0, uint64_t Tk,                    \
                   const em_attn_geom *g) {                                                   \
    T inv = (T)(1.0 / (1.0 - g->dropout_p));                                                  \
    for (int64_t i = 0; i < br; i++) {                                                        \
      uint64_t e = e0 + (uint64_t)i * Tk, have = UINT64_MAX;                                  \
      uint32_t w[4];                                                                          \
      for (int64_t j = 0; j < bc; j++) {                                                      \
        uint64_t idx = e + (uint64_t)j, blk = g->offset + idx / 4;                            \
        if (blk != have) {                                                                    \
          em_philox_stream_block(g->seed, blk, w);                                            \
          have = blk;                                                                         \
        }                                                                                     \
        bool keep = (w[idx % 4] >> 8) >= g->drop_below;                                       \
        X[i * bc + j] = keep ? X[i * bc + j] * inv : 0;                                       \
      }                                                                                       \
    }                                                                                         \
  }
DROPOUT(dropout_f32, float)
DROPOUT(dropout_f64, double)

static void dropout(const attn *a, void *X, int64_t br, int64_t bc, int64_t b, int64_t h,
                    int64_t i0, int64_t j0) {
  const em_attn_geom *g = a->g;
  uint64_t e0 = (uint64_t)(((b * g->Hq + h) * g->Tq + i0) * g->Tk + j0);
  if (a->f64) dropout_f64(X, br, bc, e0, (uint64_t)g->Tk, g);
  else dropout_f32(X, br, bc, e0, (uint64_t)g->Tk, g);
}

/* ---- work sharing ---------------------------------------------------------------------------- */

static int threads_for(const em_attn_geom *g, int64_t units) {
  if (omp_in_parallel()) return 1;
  double work = (double)g->B * (double)g->Hq * (double)g->Tq * (double)g->Tk *
                (double)(g->D + g->Dv + 1) / 16;
  int t = em_threads_for(work > 1e15 ? (int64_t)1e15 : (int64_t)work);
  return units < t ? (int)(units > 0 ? units : 1) : t;
}

static int64_t tiles(int64_t n, int64_t t) { return (n + t - 1) / t; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* The key tiles a causal query tile [i0, i0 + br) sees end at key i0 + br - 1. */
static int64_t key_end(const attn *a, int64_t i0, int64_t br) {
  return a->g->causal ? min64(a->g->Tk, i0 + br) : a->g->Tk;
}

/* ---- prepared operands and products ------------------------------------------------------------
 * An operand read by several products is prepared once: on the float32 AVX-512 path, packed
 * in sgemm.h's layouts straight from its strided rows; elsewhere copied to a contiguous tile.
 * Both fold in a scale. A product's other operand, a tile the thread just computed (P, dS),
 * is packed by the product itself. */

static void scale_floats(float *x, int64_t n, double scale) {
  if (scale != 1)
    for (int64_t i = 0; i < n; i++) x[i] *= (float)scale;
}

/* src [rows, cols] (rows rs apart) as a product's left operand. */
static void prep_a(const attn *a, void *buf, const char *src, int64_t rows, int64_t cols,
                   int64_t rs, double scale) {
  if (!a->packed) return load_tile(a, buf, src, rows, cols, rs, scale);
  em_sgemm_pack_a(false, rows, cols, (const float *)src, rs, buf);
  scale_floats(buf, em_sgemm_a_size(rows, cols), scale);
}

/* src [rows, cols] as a right operand: B = src ([K = rows, N = cols]), or with bt B = src^T. */
static void prep_b(const attn *a, void *buf, bool bt, const char *src, int64_t rows,
                   int64_t cols, int64_t rs, double scale) {
  if (!a->packed) return load_tile(a, buf, src, rows, cols, rs, scale);
  if (bt) em_sgemm_pack_b(true, cols, rows, (const float *)src, rs, buf);
  else em_sgemm_pack_b(false, rows, cols, (const float *)src, rs, buf);
  scale_floats(buf, bt ? em_sgemm_b_size(cols, rows) : em_sgemm_b_size(rows, cols), scale);
}

/* C [M, N] (ldc) = beta * C + op(A) B. A is a prepared [M, K] operand, or with raw a tile of
 * the workspace, row-major [M, K] (lda apart) or with ta [K, M]; B was prepared by prep_b
 * (bt as given there). */
static void prod(const attn *a, float *pa, bool raw, bool ta, const void *A, int64_t lda,
                 bool bt, const void *B, int64_t M, int64_t N, int64_t K, double beta, void *C,
                 int64_t ldc) {
  if (!a->packed) {
    if (!raw) lda = ld(K), ta = false;
    gemm(a->f64, ta, bt, M, N, K, 1.0, A, lda, B, bt ? ld(K) : ld(N), beta, C, ldc);
    return;
  }
  if (raw) {
    em_sgemm_pack_a(ta, M, K, A, lda, pa);
    A = pa;
  }
  em_sgemm_packed(M, N, K, A, B, (float)beta, NULL, C, ldc);
}

/* ---- workspaces ------------------------------------------------------------------------------ */

/* Every buffer of a thread's workspace holds any tile or prepared operand: X x X elements
 * with X = max(64, D, Dv), the packed forms' padding included. */
static size_t buf_bytes(const attn *a) { return (size_t)pack_floats(a->g) * a->es; }

enum { FWD_BUFS = 6, BWD_BUFS = 13, ROW_ARRAYS = 3 };

static size_t ws_bytes(const attn *a, int bufs) {
  return (size_t)bufs * ((buf_bytes(a) + 63) / 64 * 64) + ROW_ARRAYS * BR * sizeof(double);
}

/* The i-th buffer of a workspace, and the row arrays after them. */
static void *ws_buf(const attn *a, char *ws, int i) {
  return ws + (size_t)i * ((buf_bytes(a) + 63) / 64 * 64);
}

/* ---- forward --------------------------------------------------------------------------------- */

typedef struct fwd_ws {
  void *Q, *K, *V, *S, *O;
  float *pa;
  double *m, *l, *alpha;
} fwd_ws;

static fwd_ws fwd_ws_of(const attn *a, char *ws) {
  fwd_ws w = {ws_buf(a, ws, 0), ws_buf(a, ws, 1), ws_buf(a, ws, 2), ws_buf(a, ws, 3),
              ws_buf(a, ws, 4), ws_buf(a, ws, 5), NULL, NULL, NULL};
  double *rows = ws_buf(a, ws, FWD_BUFS);
  w.m = rows, w.l = rows + BR, w.alpha = rows + 2 * BR;
  return w;
}

/* out rows = O / l, lse = m + log(l); a row with l = 0 (every key masked) is 0 with lse -inf. */
static void fwd_finish(const attn *a, const fwd_ws *w, int64_t b, int64_t h, int64_t i0,
                       int64_t br) {
  const em_attn_geom *g = a->g;
  for (int64_t i = 0; i < br; i++) w->alpha[i] = w->l[i] > 0 ? 1.0 / w->l[i] : 0.0;
  scale_rows(a, w->O, br, g->Dv, w->alpha);
  for (int64_t i = 0; i < br; i++) {
    char *o = row_at(a, &a->out, b, h, i0 + i);
    memcpy(o, (char *)w->O + (size_t)(i * g->Dv) * a->es, (size_t)g->Dv * a->es);
    double lse = w->l[i] > 0 ? w->m[i] + log(w->l[i]) : -INFINITY;
    char *lp = row_at(a, &a->lse, b, h, i0 + i);
    if (a->f64) *(double *)lp = lse;
    else *(float *)lp = (float)lse;
  }
}

static void online(const attn *a, const fwd_ws *w, int64_t br, int64_t bc) {
  if (a->f64) online_f64(w->S, br, bc, w->m, w->l, w->alpha);
  else if (a->packed) em_attn_online_f32(w->S, br, bc, w->m, w->l, w->alpha);
  else online_f32(w->S, br, bc, w->m, w->l, w->alpha);
}

static void fwd_unit(const attn *a, const fwd_ws *w, int64_t u) {
  const em_attn_geom *g = a->g;
  int64_t nq = tiles(g->Tq, BR), D = g->D, Dv = g->Dv;
  int64_t it = u % nq, bh = u / nq, h = bh % g->Hq, b = bh / g->Hq, kh = h / a->group;
  int64_t i0 = it * BR, br = min64(BR, g->Tq - i0);
  prep_a(a, w->Q, row_at(a, &a->q, b, h, i0), br, D, a->q.s[2], g->scale);
  memset(w->O, 0, (size_t)(br * Dv) * a->es);
  for (int64_t i = 0; i < br; i++) w->m[i] = -INFINITY, w->l[i] = 0;
  int64_t jend = key_end(a, i0, br);
  for (int64_t j0 = 0; j0 < jend; j0 += BC) {
    int64_t bc = min64(BC, jend - j0);
    prep_b(a, w->K, true, row_at(a, &a->k, b, kh, j0), bc, D, a->k.s[2], 1.0);
    prep_b(a, w->V, false, row_at(a, &a->v, b, kh, j0), bc, Dv, a->v.s[2], 1.0);
    prod(a, w->pa, false, false, w->Q, 0, true, w->K, br, bc, D, 0.0, w->S, bc);
    fix_scores(a, w->S, br, bc, b, h, i0, j0);
    online(a, w, br, bc);
    scale_rows(a, w->O, br, Dv, w->alpha);
    if (g->dropout_p > 0) dropout(a, w->S, br, bc, b, h, i0, j0);
    prod(a, w->pa, true, false, w->S, bc, false, w->V, br, Dv, bc, 1.0, w->O, ld(Dv));
  }
  fwd_finish(a, w, b, h, i0, br);
}

static void setup(attn *a, const em_tensor *q, const em_tensor *k, const em_tensor *v,
                  const em_tensor *mask, const em_attn_geom *g) {
  memset(a, 0, sizeof *a);
  a->g = g;
  a->f64 = q->dtype_id == EM_FLOAT64;
  /* EMBER_CPU_ATTENTION_PLAIN=1 takes the plain path anyway (the tests cover both) */
  const char *plain = getenv("EMBER_CPU_ATTENTION_PLAIN");
  a->packed = !a->f64 && em_sgemm_available() && em_attn_rows_available() &&
              !(plain && plain[0] == '1');
  a->es = em_dtypes[q->dtype_id].size;
  a->group = g->Hq / g->Hkv;
  a->q = operand_of(q), a->k = operand_of(k), a->v = operand_of(v);
  if (mask) {
    a->mask = (const float *)em_cpu_ptr(mask);
    for (int d = 0; d < 4; d++) a->ms[d] = mask->strides[d];
  }
}

/* Runs body(a, workspace, unit) over units on nt threads, each with its own workspace of
 * `bytes`. Dynamic scheduling: causal units differ in cost. */
typedef void (*unit_fn)(const attn *a, char *ws, int64_t u);

static int run_units(const char *fn, const attn *a, int64_t units, size_t bytes, unit_fn body) {
  int nt = threads_for(a->g, units);
  int failed = 0;
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    char *ws = malloc(bytes);
    if (ws == NULL) {
#pragma omp atomic write
      failed = 1;
    }
#pragma omp for schedule(dynamic, 1)
    for (int64_t u = 0; u < units; u++)
      if (ws) body(a, ws, u);
    free(ws);
  }
  if (failed) return em_error_kind_set(EM_ERR_OOM, "out of memory on cpu: %s workspace", fn);
  return 0;
}

static void fwd_body(const attn *a, char *ws, int64_t u) {
  fwd_ws w = fwd_ws_of(a, ws);
  fwd_unit(a, &w, u);
}

int em_cpu_attention(em_tensor *out, em_tensor *lse, const em_tensor *q, const em_tensor *k,
                     const em_tensor *v, const em_tensor *mask, const em_attn_geom *g) {
  attn a;
  setup(&a, q, k, v, mask, g);
  a.out = operand_of(out), a.lse = operand_of(lse);
  int64_t units = g->B * g->Hq * tiles(g->Tq, BR);
  return run_units("scaled_dot_product_attention", &a, units, ws_bytes(&a, FWD_BUFS), fwd_body);
}

/* ---- backward -------------------------------------------------------------------------------- */

/* Q and dO are prepared as left (Qa, dOa) and right (Qb, dOb) operands, K and V as right
 * operands transposed (Kt, Vt) and K as is, scaled (Ks, for dQ). */
typedef struct bwd_ws {
  void *Qa, *Qb, *dOa, *dOb, *Kt, *Vt, *Ks, *S, *Pd, *dP, *dK, *dV;
  float *pa;
  double *lse, *delta;
} bwd_ws;

static bwd_ws bwd_ws_of(const attn *a, char *ws) {
  void *b[BWD_BUFS];
  for (int i = 0; i < BWD_BUFS; i++) b[i] = ws_buf(a, ws, i);
  bwd_ws w = {b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
              NULL, NULL};
  double *rows = ws_buf(a, ws, BWD_BUFS);
  w.lse = rows, w.delta = rows + BR;
  return w;
}

/* The query side of tile pairs: rows i0.. of head (b, h). */
static void bwd_load_q(const attn *a, bwd_ws *w, int64_t b, int64_t h, int64_t i0, int64_t br,
                       bool kv) {
  const em_attn_geom *g = a->g;
  const char *q = row_at(a, &a->q, b, h, i0), *go = row_at(a, &a->gout, b, h, i0);
  prep_a(a, w->Qa, q, br, g->D, a->q.s[2], g->scale);
  prep_a(a, w->dOa, go, br, g->Dv, a->gout.s[2], 1.0);
  if (kv) {
    prep_b(a, w->Qb, false, q, br, g->D, a->q.s[2], g->scale);
    prep_b(a, w->dOb, false, go, br, g->Dv, a->gout.s[2], 1.0);
  }
  for (int64_t i = 0; i < br; i++) {
    const char *lp = row_at(a, &a->lse, b, h, i0 + i);
    w->lse[i] = a->f64 ? *(const double *)lp : *(const float *)lp;
    w->delta[i] = a->delta[(b * g->Hq + h) * g->Tq + i0 + i];
  }
}

/* The key side: rows j0.. of kv head (b, kh). */
static void bwd_load_kv(const attn *a, bwd_ws *w, int64_t b, int64_t kh, int64_t j0,
                        int64_t bc, bool q) {
  const em_attn_geom *g = a->g;
  const char *k = row_at(a, &a->k, b, kh, j0);
  prep_b(a, w->Kt, true, k, bc, g->D, a->k.s[2], 1.0);
  prep_b(a, w->Vt, true, row_at(a, &a->v, b, kh, j0), bc, g->Dv, a->v.s[2], 1.0);
  if (q) prep_b(a, w->Ks, false, k, bc, g->D, a->k.s[2], g->scale);
}

/* One tile pair, the loaded query rows [i0, i0 + br) of head (b, h) against the loaded keys
 * [j0, j0 + bc): accumulates dK, dV into the workspace (kv) and / or scale * dS K into the
 * gq rows (q; gq is contiguous [B, Hq, Tq, D]). */
static void bwd_tile(const attn *a, bwd_ws *w, int64_t b, int64_t h, int64_t i0, int64_t br,
                     int64_t j0, int64_t bc, bool kv, bool q) {
  const em_attn_geom *g = a->g;
  bool drop = g->dropout_p > 0;
  int64_t D = g->D, Dv = g->Dv;
  prod(a, w->pa, false, false, w->Qa, 0, true, w->Kt, br, bc, D, 0.0, w->S, bc);
  fix_scores(a, w->S, br, bc, b, h, i0, j0);
  if (a->f64) probs_f64(w->S, br, bc, w->lse);
  else if (a->packed) em_attn_probs_f32(w->S, br, bc, w->lse);
  else probs_f32(w->S, br, bc, w->lse);
  if (kv) { /* dV += dropout(P)^T dO */
    void *Pd = w->S;
    if (drop) {
      memcpy(w->Pd, w->S, (size_t)(br * bc) * a->es);
      dropout(a, w->Pd, br, bc, b, h, i0, j0);
      Pd = w->Pd;
    }
    prod(a, w->pa, true, true, Pd, bc, false, w->dOb, bc, Dv, br, 1.0, w->dV, ld(Dv));
  }
  prod(a, w->pa, false, false, w->dOa, 0, true, w->Vt, br, bc, Dv, 0.0, w->dP, bc);
  if (drop) dropout(a, w->dP, br, bc, b, h, i0, j0);
  if (a->f64) dscores_f64(w->dP, w->S, br, bc, w->delta);
  else dscores_f32(w->dP, w->S, br, bc, w->delta);
  /* Qb is pre-scaled, so dS^T Q is already dK's scale * dS^T q; Ks likewise for dQ */
  if (kv) prod(a, w->pa, true, true, w->dP, bc, false, w->Qb, bc, D, br, 1.0, w->dK, ld(D));
  if (q)
    prod(a, w->pa, true, false, w->dP, bc, false, w->Ks, br, D, bc, 1.0,
         row_at(a, &a->gq, b, h, i0), ld(D));
}

/* dK, dV of key rows [j0, j0 + bc) of kv head (b, kh) from the workspace into gk, gv. */
static void bwd_store_kv(const attn *a, const bwd_ws *w, int64_t b, int64_t kh, int64_t j0,
                         int64_t bc) {
  const em_attn_geom *g = a->g;
  memcpy(row_at(a, &a->gk, b, kh, j0), w->dK, (size_t)(bc * g->D) * a->es);
  memcpy(row_at(a, &a->gv, b, kh, j0), w->dV, (size_t)(bc * g->Dv) * a->es);
}

/* Every query tile of the heads sharing kv head (b, kh) against its key tile j0. Causal: the
 * query tiles before the key tile see none of its keys. */
static void bwd_key_tile(const attn *a, bwd_ws *w, int64_t b, int64_t kh, int64_t j0,
                         int64_t bc, bool q) {
  const em_attn_geom *g = a->g;
  bwd_load_kv(a, w, b, kh, j0, bc, q);
  memset(w->dK, 0, (size_t)(bc * g->D) * a->es);
  memset(w->dV, 0, (size_t)(bc * g->Dv) * a->es);
  int64_t first = g->causal ? j0 / BR * BR : 0;
  for (int64_t h = kh * a->group; h < (kh + 1) * a->group; h++)
    for (int64_t i0 = first; i0 < g->Tq; i0 += BR) {
      int64_t br = min64(BR, g->Tq - i0);
      bwd_load_q(a, w, b, h, i0, br, true);
      bwd_tile(a, w, b, h, i0, br, j0, bc, true, q);
    }
  bwd_store_kv(a, w, b, kh, j0, bc);
}

/* Fused: unit (b, kh), every key tile; dQ accumulates in gq. */
static void bwd_fused_body(const attn *a, char *ws, int64_t u) {
  bwd_ws w = bwd_ws_of(a, ws);
  int64_t b = u / a->g->Hkv, kh = u % a->g->Hkv;
  for (int64_t j0 = 0; j0 < a->g->Tk; j0 += BC)
    bwd_key_tile(a, &w, b, kh, j0, min64(BC, a->g->Tk - j0), true);
}

/* Pass 1 of two: unit (b, kh, key tile), dK and dV only. */
static void bwd_kv_body(const attn *a, char *ws, int64_t u) {
  bwd_ws w = bwd_ws_of(a, ws);
  int64_t nk = tiles(a->g->Tk, BC), jt = u % nk, bk = u / nk;
  int64_t b = bk / a->g->Hkv, kh = bk % a->g->Hkv, j0 = jt * BC;
  bwd_key_tile(a, &w, b, kh, j0, min64(BC, a->g->Tk - j0), false);
}

/* Pass 2 of two: unit (b, h, query tile), dQ only. */
static void bwd_q_body(const attn *a, char *ws, int64_t u) {
  bwd_ws w = bwd_ws_of(a, ws);
  const em_attn_geom *g = a->g;
  int64_t nq = tiles(g->Tq, BR), it = u % nq, bh = u / nq;
  int64_t b = bh / g->Hq, h = bh % g->Hq, i0 = it * BR, br = min64(BR, g->Tq - i0);
  bwd_load_q(a, &w, b, h, i0, br, false);
  int64_t jend = key_end(a, i0, br);
  for (int64_t j0 = 0; j0 < jend; j0 += BC) {
    int64_t bc = min64(BC, jend - j0);
    bwd_load_kv(a, &w, b, h / a->group, j0, bc, true);
    bwd_tile(a, &w, b, h, i0, br, j0, bc, false, true);
  }
}

/* delta = rowsum(gout * out) per query row. */
static void bwd_delta(const attn *a) {
  const em_attn_geom *g = a->g;
  int64_t rows = g->B * g->Hq * g->Tq;
  int nt = omp_in_parallel() ? 1 : em_threads_for(rows * g->Dv);
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (int64_t r = 0; r < rows; r++) {
    int64_t i = r % g->Tq, h = r / g->Tq % g->Hq, b = r / g->Tq / g->Hq;
    const char *x = row_at(a, &a->gout, b, h, i), *y = row_at(a, &a->out, b, h, i);
    a->delta[r] = a->f64 ? rowdot_f64((const double *)x, (const double *)y, g->Dv)
                         : rowdot_f32((const float *)x, (const float *)y, g->Dv);
  }
}

int em_cpu_attention_backward(em_tensor *gq, em_tensor *gk, em_tensor *gv, const em_tensor *gout,
                              const em_tensor *q, const em_tensor *k, const em_tensor *v,
                              const em_tensor *out, const em_tensor *lse, const em_tensor *mask,
                              const em_attn_geom *g) {
  const char *fn = "scaled_dot_product_attention_backward";
  attn a;
  setup(&a, q, k, v, mask, g);
  a.out = operand_of(out), a.lse = operand_of(lse), a.gout = operand_of(gout);
  a.gq = operand_of(gq), a.gk = operand_of(gk), a.gv = operand_of(gv);
  size_t rows = (size_t)(g->B * g->Hq * g->Tq);
  a.delta = malloc(rows * sizeof(double));
  if (a.delta == NULL) return em_error_kind_set(EM_ERR_OOM, "out of memory on cpu: %s", fn);
  bwd_delta(&a);
  memset(em_cpu_ptr(gq), 0, (size_t)em_numel(gq) * a.es); /* dQ accumulates */
  size_t bytes = ws_bytes(&a, BWD_BUFS);
  int nt = threads_for(g, g->B * g->Hq * tiles(g->Tq, BR));
  int rc;
  if (nt == 1 || g->B * g->Hkv >= 4 * (int64_t)nt) {
    rc = run_units(fn, &a, g->B * g->Hkv, bytes, bwd_fused_body);
  } else {
    rc = run_units(fn, &a, g->B * g->Hkv * tiles(g->Tk, BC), bytes, bwd_kv_body);
    if (rc == 0) rc = run_units(fn, &a, g->B * g->Hq * tiles(g->Tq, BR), bytes, bwd_q_body);
  }
  free(a.delta);
  return rc;
}
