/*
 * vk_conv.c: the Vulkan convolution kernels (conv2d, its input and weight gradients), as
 * implicit GEMMs in kernels/conv_gemm.comp; the split-K sum in kernels/conv_sum.comp.
 *
 * The op definitions (ops/nn_conv.c) hand over contiguous float32/float64 tensors and the
 * geometry in forward terms (nn.h). Every case (strides, padding, dilation, groups, depthwise)
 * takes the same tiled kernel: the modes differ only in how a tile's elements are gathered.
 * Tile sizes come from specialization constants, chosen here from the GEMM's shape so that
 * small channel counts (the Fashion-MNIST CNN's 1 -> 32 -> 64) do not waste a 64-wide tile.
 */
#include "../nn.h"
#include "vk_conv.h"

/* kernels/conv_gemm.comp's push constants. */
typedef struct conv_push {
  uint32_t N, C, H, W, M, OH, OW, kh, kw;
  int32_t sh, sw, ph, pw, dh, dw;
  uint32_t G;
  uint32_t off_o, off_a, off_b, off_bias;
  uint32_t rows, cols, K, ksplit, splits, has_bias, part_stride;
} conv_push;
_Static_assert(sizeof(conv_push) <= VK_MAX_PUSH, "conv push constants exceed 128 bytes");

enum { MODE_F, MODE_T, MODE_W };
enum { BK = 16 };

/* Thread tile along one GEMM dimension: 16 threads times 1, 2 or 4 (a 16-, 32- or 64-wide
 * tile), so a dimension of 25 or 32 (a first layer's K rows, its 32 channels) fills its tile. */
static uint32_t thread_tile(int64_t n) { return n <= 16 ? 1 : n <= 32 ? 2 : 4; }

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Fills the push constants' geometry; -1 when a size needs more than 32-bit indexing. */
static int conv_push_init(conv_push *p, const char *fn, const em_conv_geom *g,
                          const em_tensor *const *ts, int nts) {
  int64_t v[16] = {g->N, g->C, g->H, g->W, g->M, g->OH, g->OW, g->kh, g->kw,
                   g->sh, g->sw, g->ph, g->pw, g->dh, g->dw, g->groups};
  for (int i = 0; i < 16; i++)
    if (v[i] < 0 || v[i] > INT32_MAX) return em_error("%s: geometry value %lld beyond 32 bits", fn, (long long)v[i]);
  for (int i = 0; i < nts; i++)
    if (ts[i] && (ts[i]->offset + em_numel(ts[i]) > INT32_MAX))
      return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED,
                               "%s: not implemented on vulkan for tensors of more than %d "
                               "elements (got %lld)", fn, INT32_MAX,
                               (long long)(ts[i]->offset + em_numel(ts[i])));
  *p = (conv_push){.N = (uint32_t)g->N, .C = (uint32_t)g->C, .H = (uint32_t)g->H,
                   .W = (uint32_t)g->W, .M = (uint32_t)g->M, .OH = (uint32_t)g->OH,
                   .OW = (uint32_t)g->OW, .kh = (uint32_t)g->kh, .kw = (uint32_t)g->kw,
                   .sh = (int32_t)g->sh, .sw = (int32_t)g->sw, .ph = (int32_t)g->ph,
                   .pw = (int32_t)g->pw, .dh = (int32_t)g->dh, .dw = (int32_t)g->dw,
                   .G = (uint32_t)g->groups};
  p->splits = 1;
  return 0;
}

/* One conv_gemm dispatch: out = A * B per group (operands as conv_gemm.comp's MODE says). */
static int gemm_launch(int mode, conv_push *p, const em_tensor *out, const em_tensor *a,
                       const em_tensor *b, const em_tensor *bias, int64_t groups) {
  vk_device *D = em_vk_device(out->device_id);
  uint32_t tm = thread_tile(p->rows), tn = thread_tile(p->cols);
  int64_t gx = ceil_div(p->rows, 16 * tm), gy = ceil_div(p->cols, 16 * tn);
  int64_t gz = groups * p->splits;
  const char *module = out->dtype_id == EM_FLOAT64 ? "conv_gemm_F64" : "conv_gemm_F32";
  if (gz > D->props.limits.maxComputeWorkGroupCount[2])
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED,
                             "%s: not implemented on %s for %lld groups x splits (at most %u)",
                             module, D->name, (long long)gz,
                             D->props.limits.maxComputeWorkGroupCount[2]);
  p->off_o = (uint32_t)out->offset;
  p->off_a = (uint32_t)a->offset;
  p->off_b = (uint32_t)b->offset;
  p->has_bias = bias != NULL;
  p->off_bias = bias ? (uint32_t)bias->offset : 0;
  vk_launch L = {
      .module = module,
      .push = p,
      .push_size = sizeof *p,
      .spec = {(uint32_t)mode, tm, tn, ~0u},
      .ops = {out, a, b, bias ? bias : a},
      .writes = 1u,
      .groups = {(uint32_t)gx, (uint32_t)gy, (uint32_t)gz},
  };
  return em_vk_launch_locked(&L);
}

int em_vk_conv2d(em_tensor *y, const em_tensor *x, const em_tensor *w, const em_tensor *bias,
                 const em_conv_geom *g) {
  if (y->dtype_id == EM_FLOAT16 || y->dtype_id == EM_BFLOAT16)
    return em_vk_conv2d_cols(y, x, w, bias, g);
  if (em_vk_conv_float(y, "conv2d") != 0) return -1;
  conv_push p;
  const em_tensor *ts[4] = {y, x, w, bias};
  if (conv_push_init(&p, "conv2d", g, ts, 4) != 0) return -1;
  p.rows = (uint32_t)(g->N * g->OH * g->OW);
  p.cols = (uint32_t)(g->M / g->groups);
  p.K = (uint32_t)(g->C / g->groups * g->kh * g->kw);
  p.ksplit = p.K;
  return gemm_launch(MODE_F, &p, y, x, w, bias, g->groups);
}

int em_vk_conv2d_input_grad(em_tensor *gx, const em_tensor *gy, const em_tensor *w,
                            const em_tensor *bias, const em_conv_geom *g) {
  if (gx->dtype_id == EM_FLOAT16 || gx->dtype_id == EM_BFLOAT16)
    return em_vk_conv2d_input_grad_cols(gx, gy, w, bias, g);
  if (em_vk_conv_float(gx, "conv2d_input_grad") != 0) return -1;
  conv_push p;
  const em_tensor *ts[4] = {gx, gy, w, bias};
  if (conv_push_init(&p, "conv2d_input_grad", g, ts, 4) != 0) return -1;
  p.rows = (uint32_t)(g->N * g->H * g->W);
  p.cols = (uint32_t)(g->C / g->groups);
  p.K = (uint32_t)(g->M / g->groups * g->kh * g->kw);
  p.ksplit = p.K;
  return gemm_launch(MODE_T, &p, gx, gy, w, bias, g->groups);
}

/* The weight gradient's K (N*OH*OW) is long and its output small, so K is split across
 * workgroups until there are about two per multiprocessor of a large GPU (an H100 has 132);
 * each split still runs at least 16 steps of BK, so the partial sums' traffic stays below
 * 1/256 of the multiply-adds. */
enum { WG_TARGET = 264, MIN_SPLIT_STEPS = 16 };
static uint32_t weight_grad_splits(const conv_push *p, int64_t groups) {
  int64_t tiles = ceil_div(p->rows, 16 * thread_tile(p->rows)) *
                  ceil_div(p->cols, 16 * thread_tile(p->cols)) * groups;
  int64_t want = ceil_div(WG_TARGET, tiles), most = ceil_div(p->K, BK) / MIN_SPLIT_STEPS;
  int64_t s = want < most ? want : most;
  if (s > 65535 / groups) s = 65535 / groups;
  return s < 1 ? 1 : (uint32_t)s;
}

/* conv_sum.comp: out = alpha * (the sum of the splits' partial products) + beta * out; LANES
 * threads per output share the splits, about 8 splits each. Also matmul's split-K sum. */
int em_vk_sum_splits(em_tensor *out, const em_tensor *part, uint32_t splits, int64_t total,
                     double alpha, double beta) {
  uint32_t lanes = 1;
  while (lanes < 16 && lanes * 8 < splits) lanes *= 2;
  int64_t per = 256 / lanes, blocks = ceil_div(total, per), bx = blocks < 65535 ? blocks : 65535;
  bool f64 = out->dtype_id == EM_FLOAT64;
  struct {
    uint32_t n, splits, stride, off_o, groups_x, pad;
    union {
      float f[2];
      double d[2];
    } s;
  } sp = {(uint32_t)total, splits, (uint32_t)total, (uint32_t)out->offset, (uint32_t)bx, 0, {{0}}};
  if (f64) {
    sp.s.d[0] = alpha;
    sp.s.d[1] = beta;
  } else {
    sp.s.f[0] = (float)alpha;
    sp.s.f[1] = (float)beta;
  }
  vk_launch L = {
      .module = f64 ? "conv_sum_F64" : "conv_sum_F32",
      .push = &sp,
      .push_size = f64 ? 40 : 32,
      .spec = {lanes, ~0u, ~0u, ~0u},
      .ops = {out, part},
      .writes = 1u,
      .groups = {(uint32_t)bx, (uint32_t)ceil_div(blocks, bx), 1},
  };
  return em_vk_launch_locked(&L);
}

int em_vk_conv2d_weight_grad(em_tensor *gw, const em_tensor *x, const em_tensor *gy,
                             const em_conv_geom *g) {
  if (gw->dtype_id == EM_FLOAT16 || gw->dtype_id == EM_BFLOAT16)
    return em_vk_conv2d_weight_grad_cols(gw, x, gy, g);
  if (em_vk_conv_float(gw, "conv2d_weight_grad") != 0) return -1;
  conv_push p;
  const em_tensor *ts[3] = {gw, x, gy};
  if (conv_push_init(&p, "conv2d_weight_grad", g, ts, 3) != 0) return -1;
  p.rows = (uint32_t)(g->C / g->groups * g->kh * g->kw);
  p.cols = (uint32_t)(g->M / g->groups);
  p.K = (uint32_t)(g->N * g->OH * g->OW);
  uint32_t splits = weight_grad_splits(&p, g->groups);
  int64_t steps = ceil_div(p.K, BK), per = ceil_div(steps, splits);
  p.ksplit = (uint32_t)(per * BK);
  p.splits = p.K == 0 ? 1 : (uint32_t)ceil_div(p.K, p.ksplit);
  if (p.K == 0) p.ksplit = BK;
  int64_t total = em_numel(gw);
  if (p.splits == 1) return gemm_launch(MODE_W, &p, gw, x, gy, NULL, g->groups);
  if ((int64_t)p.splits * total > INT32_MAX)
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED,
                             "conv2d_weight_grad: not implemented on vulkan for %u partial "
                             "sums of %lld elements", p.splits, (long long)total);
  int64_t n = (int64_t)p.splits * total;
  em_tensor *part = em_empty(1, &n, (em_dtype)gw->dtype_id, gw->device_id);
  if (part == NULL) return -1;
  p.part_stride = (uint32_t)total;
  int rc = gemm_launch(MODE_W, &p, part, x, gy, NULL, g->groups);
  if (rc == 0) rc = em_vk_sum_splits(gw, part, p.splits, total, 1.0, 0.0);
  em_release(part);
  return rc;
}
