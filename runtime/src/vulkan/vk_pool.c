/*
 * vk_pool.c: the Vulkan pooling kernels: max pooling with int64 argmax indices, max unpooling
 * (max pooling's gradient), average pooling and its gradient (kernels/pool.comp and
 * unpool.comp). The definitions (ops/nn_pool.c) pass contiguous 4-D float32/float64 tensors
 * and the window geometry (nn.h's em_pool_geom), fixed or adaptive.
 */
#include "../nn.h"
#include "vk_conv.h"

/* kernels/pool.comp's push constants. */
typedef struct pool_push {
  uint32_t planes, H, W, OH, OW;
  int32_t kh, kw, sh, sw, ph, pw, dh, dw;
  uint32_t adaptive, count_include_pad, divisor;
  uint32_t off_o, off_x, off_i;
  uint32_t n;
} pool_push;

static int pool_push_init(pool_push *p, const char *fn, const em_pool_geom *g,
                          const em_tensor *const *ts, int nts) {
  int64_t v[16] = {g->N * g->C, g->H, g->W, g->OH, g->OW, g->kh, g->kw, g->sh,
                   g->sw, g->ph, g->pw, g->dh, g->dw, g->divisor, g->N, g->C};
  for (int i = 0; i < 16; i++)
    if (v[i] < 0 || v[i] > INT32_MAX)
      return em_error("%s: geometry value %lld beyond 32 bits", fn, (long long)v[i]);
  for (int i = 0; i < nts; i++)
    if (ts[i]->offset + em_numel(ts[i]) > INT32_MAX)
      return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED,
                               "%s: not implemented on vulkan for tensors of more than %d "
                               "elements (got %lld)", fn, INT32_MAX,
                               (long long)(ts[i]->offset + em_numel(ts[i])));
  *p = (pool_push){.planes = (uint32_t)(g->N * g->C), .H = (uint32_t)g->H,
                   .W = (uint32_t)g->W, .OH = (uint32_t)g->OH, .OW = (uint32_t)g->OW,
                   .kh = (int32_t)g->kh, .kw = (int32_t)g->kw, .sh = (int32_t)g->sh,
                   .sw = (int32_t)g->sw, .ph = (int32_t)g->ph, .pw = (int32_t)g->pw,
                   .dh = (int32_t)g->dh, .dw = (int32_t)g->dw, .adaptive = g->adaptive,
                   .count_include_pad = g->count_include_pad,
                   .divisor = (uint32_t)(g->divisor > 0 ? g->divisor : 0)};
  return 0;
}

static int pool_launch(const char *module, pool_push *p, int64_t n, const em_tensor *out,
                       const em_tensor *in, const em_tensor *ind) {
  p->n = (uint32_t)n;
  p->off_o = (uint32_t)out->offset;
  p->off_x = (uint32_t)in->offset;
  p->off_i = ind ? (uint32_t)ind->offset : 0;
  vk_launch L = {
      .module = module,
      .push = p,
      .push_size = sizeof *p,
      .spec = {~0u, ~0u, ~0u, ~0u},
      .ops = {out, in, ind},
      .writes = ind ? 5u : 1u,
      .groups = {em_vk_conv_blocks(n), 1, 1},
  };
  return em_vk_launch_locked(&L);
}

int em_vk_max_pool2d(em_tensor *y, em_tensor *indices, const em_tensor *x,
                     const em_pool_geom *g) {
  if (em_vk_conv_float(y, "max_pool2d") != 0) return -1;
  pool_push p;
  const em_tensor *ts[3] = {y, indices, x};
  if (pool_push_init(&p, "max_pool2d", g, ts, 3) != 0) return -1;
  const char *m = y->dtype_id == EM_FLOAT64 ? "pool_MAX_F64" : "pool_MAX_F32";
  return pool_launch(m, &p, em_numel(y), y, x, indices);
}

int em_vk_avg_pool2d(em_tensor *y, const em_tensor *x, const em_pool_geom *g) {
  if (em_vk_conv_float(y, "avg_pool2d") != 0) return -1;
  pool_push p;
  const em_tensor *ts[2] = {y, x};
  if (pool_push_init(&p, "avg_pool2d", g, ts, 2) != 0) return -1;
  const char *m = y->dtype_id == EM_FLOAT64 ? "pool_AVG_F64" : "pool_AVG_F32";
  return pool_launch(m, &p, em_numel(y), y, x, NULL);
}

/* Gather form: one thread per gx element, so every element is written (no zeroing pass). */
int em_vk_avg_pool2d_backward(em_tensor *gx, const em_tensor *gy, const em_pool_geom *g) {
  if (em_vk_conv_float(gx, "avg_pool2d_backward") != 0) return -1;
  pool_push p;
  const em_tensor *ts[2] = {gx, gy};
  if (pool_push_init(&p, "avg_pool2d_backward", g, ts, 2) != 0) return -1;
  const char *m = gx->dtype_id == EM_FLOAT64 ? "pool_AVGB_F64" : "pool_AVGB_F32";
  return pool_launch(m, &p, em_numel(gx), gx, gy, NULL);
}

/* kernels/unpool.comp's push constants. */
typedef struct unpool_push {
  uint32_t n, in_plane, out_plane, off_gx, off_gy, off_i;
} unpool_push;

static int unpool_launch(const char *module, unpool_push *p, int64_t n, const em_tensor *o0,
                         const em_tensor *o1, const em_tensor *o2, const em_tensor *o3,
                         uint32_t writes) {
  p->n = (uint32_t)n;
  vk_launch L = {
      .module = module,
      .push = p,
      .push_size = sizeof *p,
      .spec = {~0u, ~0u, ~0u, ~0u},
      .ops = {o0, o1, o2, o3},
      .writes = writes,
      .groups = {em_vk_conv_blocks(n), 1, 1},
  };
  return em_vk_launch_locked(&L);
}

/* float64 has no atomic add (nor 64-bit atomics in Ember's device features), so its additions
 * go through per-element lists built with 32-bit atomics, then one sum per gx element. */
static int unpool_f64(em_tensor *gx, const em_tensor *gy, const em_tensor *indices,
                      unpool_push *p) {
  int64_t nx = em_numel(gx), ny = em_numel(gy);
  em_tensor *heads = em_empty(1, &nx, EM_INT32, gx->device_id);
  em_tensor *next = ny > 0 ? em_empty(1, &ny, EM_INT32, gx->device_id) : NULL;
  int rc = heads && (next || ny == 0) ? em_vk_fill(heads, -1) : -1;
  if (rc == 0 && ny > 0) rc = unpool_launch("unpool_LINK", p, ny, heads, next, indices, NULL, 3u);
  if (rc == 0) {
    /* GATHER reads gy by its element index: off_gy as is; its own output offset */
    rc = unpool_launch("unpool_GATHER", p, nx, gx, gy, heads, next ? next : heads, 1u);
  }
  em_release(heads);
  em_release(next);
  return rc;
}

int em_vk_max_unpool2d(em_tensor *gx, const em_tensor *gy, const em_tensor *indices) {
  if (em_vk_conv_float(gx, "max_unpool2d") != 0) return -1;
  const em_tensor *ts[3] = {gx, gy, indices};
  for (int i = 0; i < 3; i++)
    if (ts[i]->offset + em_numel(ts[i]) > INT32_MAX)
      return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED,
                               "max_unpool2d: not implemented on vulkan for tensors of more "
                               "than %d elements", INT32_MAX);
  unpool_push p = {.in_plane = (uint32_t)(gx->sizes[2] * gx->sizes[3]),
                   .out_plane = (uint32_t)(gy->sizes[2] * gy->sizes[3]),
                   .off_gx = (uint32_t)gx->offset, .off_gy = (uint32_t)gy->offset,
                   .off_i = (uint32_t)indices->offset};
  if (em_numel(gx) == 0) return 0;
  if (gx->dtype_id == EM_FLOAT64) return unpool_f64(gx, gy, indices, &p);
  if (em_vk_fill(gx, 0.0) != 0) return -1;
  if (em_numel(gy) == 0) return 0;
  return unpool_launch("unpool_SCATTER", &p, em_numel(gy), gx, gy, indices, NULL, 1u);
}
