/*
 * vk_conv_cols.c: float16 and bfloat16 convolutions on Vulkan, as matrix products on the
 * tensor-core kernels (vk_matmul_coop.c) over column matrices (kernels/conv_cols.comp).
 *
 * The float32 convolutions (vk_conv.c) gather their operands inside one tiled kernel and never
 * store a column matrix. The tensor-core kernels read their operands through tensor layouts
 * that cannot gather windows, so a 16-bit convolution stores its column matrix first (16 bits
 * an element, C*kh*kw rows of N*OH*OW) and runs the products the matmul slot runs:
 *
 *   forward       y[n] (M x OH*OW)  = w (M x CK) @ col[:, n's columns]      one batched product
 *   input grad    cg[n] (CK x OH*OW) = w^T @ gy[n], then col2im adds cg's taps into gx
 *   weight grad   gw (M x CK) = gy^T (M x N*OH*OW) @ col^T, K split over workgroups, each
 *                 split's product kept in float32 and the splits added in float32
 *
 * Everything accumulates in float32; y and gw are rounded once; gx is rounded twice (cg's
 * entries, then their sum over the kh*kw taps), as the column method does anywhere.
 *
 * Which convolutions come here (em_vk_conv_half): 16-bit ones on a device whose tensor-core
 * kernels take the dtype, or anywhere when EMBER_VK_CONV_COLS=1 (the tests run this path on
 * lavapipe, whose matmul then takes the tiled 16-bit kernel, and the weight gradient's
 * products float32 copies of its operands). Grouped convolutions (depthwise
 * above all, where the products are too thin for tensor cores), sizes beyond 32-bit indexing,
 * and weight gradients on devices without the coopmat2 kernel (whose float32 results the
 * split needs) convert to float32 on the device and take vk_conv.c's kernels.
 */
#include <stdlib.h>
#include <string.h>

#include "../nn.h"
#include "vk_conv.h"
#include "vk_matmul.h"

/* kernels/conv_cols.comp's push constants. */
typedef struct cols_push {
  uint32_t N, C, H, W, M, OH, OW, kh, kw;
  int32_t sh, sw, ph, pw, dh, dw;
  uint32_t off_o, off_a, off_bias, Q, n, groups_x, has_bias, bf16;
} cols_push;
_Static_assert(sizeof(cols_push) <= VK_MAX_PUSH, "conv_cols push constants exceed 128 bytes");

enum { MODE_IM2COL, MODE_COL2IM };
enum { SLICE = 32 };          /* the tensor-core kernels' K slice: splits of K are multiples */
enum { SPLIT_TARGET = 264 };  /* workgroups the weight gradient aims for (vk_conv.c's target) */
static const int64_t MIN_SPLIT_K = 1024;            /* K per split at least */
static const int64_t MAX_PARTIALS = 64ll << 20;     /* float32 partial sums: 256 MiB at most */

static bool forced(void) {
  const char *e = getenv("EMBER_VK_CONV_COLS");
  return e != NULL && strcmp(e, "1") == 0;
}

static bool is_half(int dt) { return dt == EM_FLOAT16 || dt == EM_BFLOAT16; }

bool em_vk_conv_half(int device, em_dtype dt) {
  if (!is_half(dt)) return false;
  return forced() || em_vk_coop_dtype(em_vk_device(device), dt, false);
}

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Whether the column method's 32-bit indexing holds for this geometry with row length Q. */
static bool cols_fit(const em_conv_geom *g, int64_t Q) {
  int64_t CK = g->C * g->kh * g->kw, P = g->OH * g->OW;
  int64_t v[] = {CK * Q, g->N * CK * P, g->N * g->C * g->H * g->W, g->N * g->M * P,
                 g->M * CK, g->sh, g->sw, g->ph, g->pw, g->dh, g->dw};
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
    if (v[i] < 0 || v[i] >= INT32_MAX) return false;
  return g->groups == 1 && cdiv(Q, 2048) <= 65535; /* im2col's grid */
}

/* ---- the column kernels ---------------------------------------------------------------------- */

static int cols_launch(uint32_t mode, cols_push *p, const em_tensor *out, const em_tensor *in,
                       const em_tensor *bias) {
  uint32_t groups[3];
  if (mode == MODE_IM2COL) { /* 2048 columns of a row per workgroup, rows along y (and z) */
    int64_t rows = (int64_t)p->C * p->kh * p->kw;
    groups[0] = (uint32_t)cdiv(p->Q, 2048);
    groups[1] = (uint32_t)(rows < 65535 ? rows : 65535);
    groups[2] = (uint32_t)cdiv(rows, 65535);
  } else { /* one word of the output per invocation, over a 2-D grid */
    int64_t words = (p->n + (p->off_o & 1u) + 1) / 2, blocks = cdiv(words, 256);
    int64_t bx = blocks < 65535 ? blocks : 65535;
    groups[0] = (uint32_t)bx, groups[1] = (uint32_t)cdiv(blocks, bx), groups[2] = 1;
  }
  p->groups_x = groups[0];
  p->bf16 = out->dtype_id == EM_BFLOAT16;
  p->has_bias = bias != NULL;
  p->off_bias = bias ? (uint32_t)bias->offset : 0;
  vk_launch L = {
      .module = "conv_cols",
      .push = p,
      .push_size = sizeof *p,
      .spec = {mode, ~0u, ~0u, ~0u},
      .ops = {out, in, bias ? bias : in},
      .writes = 1u,
      .groups = {groups[0], groups[1], groups[2]},
  };
  return em_vk_launch_locked(&L);
}

static cols_push cols_geom(const em_conv_geom *g) {
  return (cols_push){.N = (uint32_t)g->N, .C = (uint32_t)g->C, .H = (uint32_t)g->H,
                     .W = (uint32_t)g->W, .M = (uint32_t)g->M, .OH = (uint32_t)g->OH,
                     .OW = (uint32_t)g->OW, .kh = (uint32_t)g->kh, .kw = (uint32_t)g->kw,
                     .sh = (int32_t)g->sh, .sw = (int32_t)g->sw, .ph = (int32_t)g->ph,
                     .pw = (int32_t)g->pw, .dh = (int32_t)g->dh, .dw = (int32_t)g->dw};
}

/* The column matrix of x: [C*kh*kw, Q], columns beyond N*OH*OW zero; Q a multiple of 8. */
static em_tensor *im2col(const em_tensor *x, const em_conv_geom *g, int64_t Q) {
  int64_t sizes[2] = {g->C * g->kh * g->kw, Q};
  em_tensor *col = em_empty(2, sizes, (em_dtype)x->dtype_id, x->device_id);
  if (col == NULL) return NULL;
  cols_push p = cols_geom(g);
  p.off_a = (uint32_t)x->offset;
  p.Q = (uint32_t)Q;
  if (cols_launch(MODE_IM2COL, &p, col, x, NULL) != 0) {
    em_release(col);
    return NULL;
  }
  return col;
}

/* A view of t's storage (no autograd: the slots work below the op layer). */
static em_tensor *view(const em_tensor *t, int nd, const int64_t *sizes, const int64_t *strides,
                       int64_t offset) {
  return em_tensor_view_of(t, nd, sizes, strides, offset);
}

/* ---- float32 on the device, for what the column method does not take -------------------------- */

typedef int (*conv_fn)(em_tensor *, const em_tensor *, const em_tensor *, const em_tensor *,
                       const em_conv_geom *);

static em_tensor *as_float32(const em_tensor *t, bool *ok) {
  if (t == NULL || !*ok) return NULL;
  em_tensor *f = em_empty(t->ndim, t->sizes, EM_FLOAT32, t->device_id);
  if (f == NULL || em_vk_copy(f, t) != 0) {
    em_release(f);
    *ok = false;
    return NULL;
  }
  return f;
}

/* out = the float32 kernel's result over float32 copies of a, b and bias, rounded once. */
static int via_float32(em_tensor *out, const em_tensor *a, const em_tensor *b,
                       const em_tensor *bias, const em_conv_geom *g, conv_fn fn) {
  bool ok = true;
  em_tensor *fa = as_float32(a, &ok), *fb = as_float32(b, &ok), *fbias = as_float32(bias, &ok);
  em_tensor *fo = ok ? em_empty(out->ndim, out->sizes, EM_FLOAT32, out->device_id) : NULL;
  int rc = fo ? fn(fo, fa, fb, fbias, g) : -1;
  if (rc == 0) rc = em_vk_copy(out, fo);
  em_release(fa);
  em_release(fb);
  em_release(fbias);
  em_release(fo);
  return rc;
}

static int weight_grad_f32(em_tensor *gw, const em_tensor *x, const em_tensor *gy,
                           const em_tensor *unused, const em_conv_geom *g) {
  (void)unused;
  return em_vk_conv2d_weight_grad(gw, x, gy, g);
}

/* ---- the three convolutions ------------------------------------------------------------------- */

int em_vk_conv2d_cols(em_tensor *y, const em_tensor *x, const em_tensor *w,
                      const em_tensor *bias, const em_conv_geom *g) {
  int64_t P = g->OH * g->OW, CK = g->C * g->kh * g->kw, NP = g->N * P, Q = cdiv(NP, 8) * 8;
  if (!cols_fit(g, Q)) return via_float32(y, x, w, bias, g, em_vk_conv2d);
  em_tensor *col = im2col(x, g, Q);
  if (col == NULL) return -1;
  int64_t s3[3] = {g->N, g->M, P};
  int64_t ys[3] = {g->M * P, P, 1}, ws[3] = {0, CK, 1}, cs[3] = {P, Q, 1};
  int64_t wsz[3] = {g->N, g->M, CK}, csz[3] = {g->N, CK, P};
  em_tensor *y3 = view(y, 3, s3, ys, y->offset), *w3 = view(w, 3, wsz, ws, w->offset);
  em_tensor *c3 = view(col, 3, csz, cs, 0);
  int rc = y3 && w3 && c3 ? 0 : -1;
  if (rc == 0 && bias) { /* y = bias per channel, then y += w @ col */
    int64_t bs[3] = {0, 1, 0};
    em_tensor *b3 = view(bias, 3, s3, bs, bias->offset);
    rc = b3 ? em_vk_copy(y3, b3) : -1;
    em_release(b3);
  }
  if (rc == 0) rc = em_vk_gemm(y3, w3, c3, 1.0, bias ? 1.0 : 0.0);
  em_release(y3);
  em_release(w3);
  em_release(c3);
  em_release(col);
  return rc;
}

int em_vk_conv2d_input_grad_cols(em_tensor *gx, const em_tensor *gy, const em_tensor *w,
                                 const em_tensor *bias, const em_conv_geom *g) {
  int64_t P = g->OH * g->OW, CK = g->C * g->kh * g->kw;
  if (!cols_fit(g, 2)) return via_float32(gx, gy, w, bias, g, em_vk_conv2d_input_grad);
  int64_t csz[3] = {g->N, CK, P};
  em_tensor *cg = em_empty(3, csz, (em_dtype)gx->dtype_id, gx->device_id);
  if (cg == NULL) return -1;
  int64_t wsz[3] = {g->N, CK, g->M}, ws[3] = {0, 1, CK};
  int64_t gsz[3] = {g->N, g->M, P}, gs[3] = {g->M * P, P, 1};
  em_tensor *wt = view(w, 3, wsz, ws, w->offset), *g3 = view(gy, 3, gsz, gs, gy->offset);
  int rc = wt && g3 ? em_vk_gemm(cg, wt, g3, 1.0, 0.0) : -1;
  em_release(wt);
  em_release(g3);
  if (rc == 0) {
    cols_push p = cols_geom(g);
    p.off_o = (uint32_t)gx->offset;
    p.n = (uint32_t)em_numel(gx);
    rc = cols_launch(MODE_COL2IM, &p, gx, cg, bias);
  }
  em_release(cg);
  return rc;
}

/* The weight gradient's splits of K = N*OH*OW: enough for about SPLIT_TARGET workgroups of the
 * product's 128 x 128 tiles, each at least MIN_SPLIT_K long, their float32 partial sums within
 * MAX_PARTIALS; a split's length is a multiple of the kernels' slice. */
static int64_t split_len(const em_conv_geom *g, int64_t *splits) {
  int64_t NP = g->N * g->OH * g->OW, CK = g->C * g->kh * g->kw;
  int64_t tiles = cdiv(g->M, 128) * cdiv(CK, 128);
  int64_t s = cdiv(SPLIT_TARGET, tiles), most = NP / MIN_SPLIT_K, room = MAX_PARTIALS / (g->M * CK);
  if (s > most) s = most;
  if (s > room) s = room;
  if (s < 1) s = 1;
  int64_t len = cdiv(cdiv(NP, s), SLICE) * SLICE;
  *splits = cdiv(NP, len);
  return len;
}

/* part (float32) = a @ b of 16-bit operands: on the coopmat2 kernel, or (EMBER_VK_CONV_COLS=1
 * on a device without it: the tests' route on lavapipe) over float32 copies of a and b. */
static int product_f32(vk_device *D, em_tensor *part, const em_tensor *a, const em_tensor *b) {
  if (em_vk_coop_dtype(D, (em_dtype)a->dtype_id, true)) {
    pthread_mutex_lock(&D->lock);
    int rc = em_vk_coop_gemm_f32(D, part, a, b);
    pthread_mutex_unlock(&D->lock);
    return rc;
  }
  bool ok = true;
  em_tensor *fa = as_float32(a, &ok), *fb = as_float32(b, &ok);
  int rc = ok ? em_vk_gemm(part, fa, fb, 1.0, 0.0) : -1;
  em_release(fa);
  em_release(fb);
  return rc;
}

int em_vk_conv2d_weight_grad_cols(em_tensor *gw, const em_tensor *x, const em_tensor *gy,
                                  const em_conv_geom *g) {
  vk_device *D = em_vk_device(gw->device_id);
  int64_t P = g->OH * g->OW, CK = g->C * g->kh * g->kw, NP = g->N * P, S;
  int64_t len = split_len(g, &S), Q = S * len;
  if (!cols_fit(g, Q) || !(em_vk_coop_dtype(D, (em_dtype)gw->dtype_id, true) || forced()))
    return via_float32(gw, x, gy, NULL, g, weight_grad_f32);
  /* gy^T: [M, Q], zero beyond N*OH*OW */
  int64_t tsz[2] = {g->M, Q};
  em_tensor *gyt = em_empty(2, tsz, (em_dtype)gy->dtype_id, gy->device_id);
  em_tensor *col = gyt ? im2col(x, g, Q) : NULL;
  int rc = col ? 0 : -1;
  if (rc == 0 && Q > NP) {
    int64_t psz[2] = {g->M, Q - NP}, ps[2] = {Q, 1};
    em_tensor *pad = view(gyt, 2, psz, ps, NP);
    rc = pad ? em_vk_fill(pad, 0.0) : -1;
    em_release(pad);
  }
  if (rc == 0) {
    int64_t sz[3] = {g->M, g->N, P}, ds[3] = {Q, P, 1}, ss[3] = {P, g->M * P, 1};
    em_tensor *dst = view(gyt, 3, sz, ds, 0), *src = view(gy, 3, sz, ss, gy->offset);
    rc = dst && src ? em_vk_copy(dst, src) : -1;
    em_release(dst);
    em_release(src);
  }
  /* partial products [S, M, CK] in float32, then their sum, rounded once into gw */
  int64_t psz[3] = {S, g->M, CK}, fsz[2] = {g->M, CK};
  em_tensor *part = rc == 0 ? em_empty(3, psz, EM_FLOAT32, gw->device_id) : NULL;
  em_tensor *sum = part && S > 1 ? em_empty(2, fsz, EM_FLOAT32, gw->device_id) : NULL;
  if (part == NULL || (S > 1 && sum == NULL)) rc = -1;
  if (rc == 0) {
    int64_t asz[3] = {S, g->M, len}, as[3] = {len, Q, 1};
    int64_t bsz[3] = {S, len, CK}, bs[3] = {len, 1, Q};
    em_tensor *a = view(gyt, 3, asz, as, 0), *b = view(col, 3, bsz, bs, 0);
    rc = a && b ? product_f32(D, part, a, b) : -1;
    em_release(a);
    em_release(b);
  }
  if (rc == 0 && S > 1) rc = em_vk_sum_splits(sum, part, (uint32_t)S, g->M * CK, 1.0, 0.0);
  if (rc == 0) {
    const em_tensor *f = S > 1 ? sum : part;
    int64_t s2[2] = {g->M, CK}, st[2] = {CK, 1};
    em_tensor *f2 = view(f, 2, s2, st, 0), *g2 = view(gw, 2, s2, st, gw->offset);
    rc = f2 && g2 ? em_vk_copy(g2, f2) : -1;
    em_release(f2);
    em_release(g2);
  }
  em_release(sum);
  em_release(part);
  em_release(col);
  em_release(gyt);
  return rc;
}
