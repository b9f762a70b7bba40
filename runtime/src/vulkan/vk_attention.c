/*
 * vk_attention.c: the fused attention slots (attention, attention_backward; backend.h and nn.h's
 * em_attn_geom say what is computed, cpu/attention.c is the reference).
 *
 * Plain kernels (kernels/attention/, every device, lavapipe included), FlashAttention-2's
 * scheme without tensor cores: no [Tq, Tk] matrix is ever stored, each row's softmax runs
 * online over tiles of keys in float32.
 *   forward   flash_fwd: a workgroup per 64 query rows (and 64 output columns) of one
 *             (batch, head); writes out and lse.
 *   backward  flash_bwd_pre: per row (lse', delta = rowsum(gout * out)) into a float32 scratch;
 *             flash_bwd_dq: gq, a workgroup per 64 query rows, walking the keys;
 *             flash_bwd_dkdv: gk and gv, a workgroup per 64 keys of a k/v head, walking the
 *             query rows of every q head that shares it (grouped-query sums without atomics).
 * CPU-type drivers run the *_lds twins, which keep the per-row state in shared memory
 * (lds_state() below says why).
 *
 * The plain kernels read and write float32. float16 and bfloat16 operands (attention_half) are
 * cast to float32 copies first and the float32 results rounded into the outputs once, which is
 * what widening in registers would compute (kernels/attention/attn.glsl says why it is not done
 * there). float64 is not implemented here.
 *
 * The tensor-core kernels for float16/bfloat16 take over where the device has them: the
 * coopmat2 forward and backward (vk_attention_cm2.c), else the subgroup-scope float16 forward
 * (vk_attention_coop.c); everything else runs here.
 *
 * Every kernel shares one 128-byte push-constant block (kernels/attention/attn.glsl): the
 * operands' bases and strides in elements (32-bit; the kernels index in 32 bits), the mask's
 * strides, and the dropout's Philox stream.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../nn.h"
#include "vk.h"
#include "vk_attention.h"


static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Whether the plain kernels keep their per-row state in shared memory (the *_lds twins): on
 * CPU-type drivers, whose compiler (lavapipe's LLVM) turns barriers into coroutines and took
 * minutes over the register versions, against seconds for these; GPUs keep registers (the
 * twins ran the backward 4x slower on an H100). EMBER_VK_ATTENTION_LDS=0 or 1 forces. */
static bool lds_state(const vk_device *D) {
  const char *v = getenv("EMBER_VK_ATTENTION_LDS");
  if (v && (strcmp(v, "0") == 0 || strcmp(v, "1") == 0)) return v[0] == '1';
  return D->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
}

/* The kernels' variant for q's dtype (0 F32, 1 F16, 2 BF16), or -1 with an error. */
static int variant(vk_device *D, const char *fn, const em_tensor *q) {
  switch (q->dtype_id) {
  case EM_FLOAT32: return 0;
  case EM_FLOAT16: return 1;
  case EM_BFLOAT16: return 2;
  case EM_FLOAT64:
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: not implemented on %s for float64",
                             fn, D->name);
  default:
    return em_error("%s: expected a floating dtype on %s, got %s", fn, D->name,
                    em_dtype_name((em_dtype)q->dtype_id));
  }
}

/* t's element offset and strides of its first three dims as 32-bit words (size-1 dims get 0),
 * or -1 when t reaches beyond what 32-bit indexing covers. */
static int operand(vk_device *D, const char *fn, const em_tensor *t, int n, uint32_t *out) {
  if (em_numel(t) > 0) {
    int64_t lo, hi;
    vk_span(t, &lo, &hi);
    if (lo < 0 || hi > (int64_t)UINT32_MAX)
      return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: not implemented on %s for tensors "
                               "of 2^32 or more elements", fn, D->name);
  }
  out[0] = (uint32_t)t->offset;
  for (int d = 0; d < n; d++) {
    int64_t s = t->sizes[d] > 1 ? t->strides[d] : 0;
    if (s < INT32_MIN || s > INT32_MAX)
      return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: not implemented on %s for strides "
                               "beyond 32 bits", fn, D->name);
    out[1 + d] = (uint32_t)(int32_t)s;
  }
  return 0;
}

/* A fresh output: contiguous from element 0, under 2^32 elements. */
static int fresh(vk_device *D, const char *fn, const em_tensor *t) {
  if (!em_is_contiguous(t) || t->offset != 0)
    return em_error("%s: expected fresh contiguous outputs on %s", fn, D->name);
  if (em_numel(t) > (int64_t)UINT32_MAX)
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: not implemented on %s for tensors "
                             "of 2^32 or more elements", fn, D->name);
  return 0;
}

int em_vk_attn_push(vk_device *D, const char *fn, attn_push *p, const em_tensor *q,
                    const em_tensor *k, const em_tensor *v, const em_tensor *gout,
                    const em_tensor *mask, const em_attn_geom *g) {
  memset(p, 0, sizeof *p);
  int64_t group = g->Hkv > 0 ? g->Hq / g->Hkv : 1;
  if (g->Hq > 0xffff || group > 0xffff || g->D > 0xffff || g->Dv > 0xffff ||
      g->Tq > (int64_t)UINT32_MAX || g->Tk > (int64_t)UINT32_MAX ||
      g->B * g->Hq * g->Tq > (int64_t)UINT32_MAX)
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: not implemented on %s for more than "
                             "65535 heads or head dims, or 2^32 query rows", fn, D->name);
  p->heads = (uint32_t)g->Hq | (uint32_t)group << 16;
  p->Tq = (uint32_t)g->Tq, p->Tk = (uint32_t)g->Tk;
  p->dims = (uint32_t)g->D | (uint32_t)g->Dv << 16;
  if (operand(D, fn, q, 3, p->q) != 0 || operand(D, fn, k, 3, p->k) != 0 ||
      operand(D, fn, v, 3, p->v) != 0 || (gout && operand(D, fn, gout, 3, p->g) != 0) ||
      (mask && operand(D, fn, mask, 4, p->m) != 0))
    return -1;
  if (mask && mask->dtype_id != EM_FLOAT32)
    return em_error("%s: expected a float32 additive mask on %s, got %s", fn, D->name,
                    em_dtype_name((em_dtype)mask->dtype_id));
  p->scale = (float)g->scale;
  p->flags = (g->causal ? 1u : 0u) | (mask ? 2u : 0u) | (g->dropout_p > 0 ? 4u : 0u);
  p->drop_below = g->drop_below;
  p->seed_lo = (uint32_t)g->seed, p->seed_hi = (uint32_t)(g->seed >> 32);
  p->off_lo = (uint32_t)g->offset, p->off_hi = (uint32_t)(g->offset >> 32);
  return 0;
}

/* Records L over `total` workgroups along x (by y, z), or raises where the device's limits are
 * smaller. */
static int launch(vk_device *D, vk_launch *L, int64_t x, int64_t y, int64_t z) {
  const uint32_t *lim = D->props.limits.maxComputeWorkGroupCount;
  if (x > lim[0] || y > lim[1] || z > lim[2])
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: not implemented on %s for a grid of "
                             "%lld x %lld x %lld workgroups", L->module, D->name, (long long)x,
                             (long long)y, (long long)z);
  L->groups[0] = (uint32_t)x, L->groups[1] = (uint32_t)y, L->groups[2] = (uint32_t)z;
  return em_vk_launch(D, L);
}

/* float32 copies of 16-bit operands (NULL stays NULL); -1 on failure. */
static int widen(int n, const em_tensor *const *in, em_tensor **out) {
  for (int i = 0; i < n; i++) out[i] = NULL;
  for (int i = 0; i < n; i++)
    if (in[i] && (out[i] = em_to_dtype(in[i], EM_FLOAT32)) == NULL) return -1;
  return 0;
}

static void release_all(int n, em_tensor **t) {
  for (int i = 0; i < n; i++) em_release(t[i]);
}

/* A fresh float32 tensor shaped like t. */
static em_tensor *f32_like(const em_tensor *t) {
  return em_empty(t->ndim, t->sizes, EM_FLOAT32, t->device_id);
}

/* The plain forward on float32 operands. */
static int plain_forward(vk_device *D, const char *fn, em_tensor *out, em_tensor *lse,
                         const em_tensor *q, const em_tensor *k, const em_tensor *v,
                         const em_tensor *mask, const em_attn_geom *g) {
  attn_push p;
  if (em_vk_attn_push(D, fn, &p, q, k, v, NULL, mask, g) != 0) return -1;
  vk_launch L = {.module = lds_state(D) ? "flash_fwd_lds" : "flash_fwd",
                 .push = &p, .push_size = sizeof p,
                 .spec = {~0u, ~0u, ~0u, ~0u}, .ops = {out, lse, q, k, v, mask}, .writes = 3u};
  int64_t cols = g->Dv > 0 ? cdiv(g->Dv, 64) : 1;
  pthread_mutex_lock(&D->lock);
  int rc = launch(D, &L, cdiv(g->Tq, 64) * cols, g->Hq, g->B);
  pthread_mutex_unlock(&D->lock);
  return rc;
}

int em_vk_attention(em_tensor *out, em_tensor *lse, const em_tensor *q, const em_tensor *k,
                    const em_tensor *v, const em_tensor *mask, const em_attn_geom *g) {
  const char *fn = "scaled_dot_product_attention";
  vk_device *D = em_vk_device(q->device_id);
  int var = variant(D, fn, q);
  if (var < 0) return -1;
  attn_push p;
  if (fresh(D, fn, out) != 0 || fresh(D, fn, lse) != 0 ||
      em_vk_attn_push(D, fn, &p, q, k, v, NULL, mask, g) != 0)
    return -1;
  if (g->B * g->Hq * g->Tq == 0) return 0;
  if (var == 0) return plain_forward(D, fn, out, lse, q, k, v, mask, g);
  pthread_mutex_lock(&D->lock);
  int rc = em_vk_attn_cm2_forward(D, out, lse, q, k, v, mask, g, &p);
  if (rc == 1) rc = em_vk_attn_coop_forward(D, out, lse, q, k, v, mask, g, &p);
  pthread_mutex_unlock(&D->lock);
  if (rc <= 0) return rc;
  /* 16-bit without tensor cores: in float32 between casts, out rounded once */
  const em_tensor *in[3] = {q, k, v};
  em_tensor *w[4] = {NULL};
  rc = widen(3, in, w);
  if (rc == 0 && (w[3] = f32_like(out)) == NULL) rc = -1;
  if (rc == 0) rc = plain_forward(D, fn, w[3], lse, w[0], w[1], w[2], mask, g);
  if (rc == 0) rc = em_vk_copy(out, w[3]);
  release_all(4, w);
  return rc;
}

/* flash_bwd_pre's per-row (lse', delta) for the backward kernels, from out and gout (float32, or
 * both float16 or both bfloat16),
 * into a new float32 tensor [B * Hq * Tq * 2] (*stats); p is the backward's push block. */
int em_vk_attn_stats(vk_device *D, const char *fn, const attn_push *p, const em_tensor *out,
                     const em_tensor *lse, const em_tensor *gout, const em_attn_geom *g,
                     em_tensor **stats) {
  /* flash_bwd_pre reads out in the q slot, lse in the k slot, and takes the row count in Tk */
  int64_t rows = g->B * g->Hq * g->Tq;
  attn_push pp = *p;
  *stats = NULL;
  if (operand(D, fn, out, 3, pp.q) != 0 || operand(D, fn, lse, 3, pp.k) != 0) return -1;
  pp.Tk = (uint32_t)rows;
  int64_t n = rows > 0 ? rows * 2 : 2;
  if ((*stats = em_empty(1, &n, EM_FLOAT32, out->device_id)) == NULL) return -1;
  if (rows == 0) return 0;
  const char *pre = out->dtype_id == EM_FLOAT16    ? "flash_bwd_pre_F16"
                    : out->dtype_id == EM_BFLOAT16 ? "flash_bwd_pre_BF16"
                                                   : "flash_bwd_pre_F32";
  vk_launch L = {.module = pre, .push = &pp, .push_size = sizeof pp,
                 .spec = {~0u, ~0u, ~0u, ~0u}, .ops = {*stats, lse, out, [6] = gout},
                 .writes = 1u};
  int64_t groups = cdiv(rows, 64), gx = groups < 65535 ? groups : 65535;
  pthread_mutex_lock(&D->lock);
  int rc = launch(D, &L, gx, cdiv(groups, gx), 1);
  pthread_mutex_unlock(&D->lock);
  if (rc != 0) {
    em_release(*stats);
    *stats = NULL;
  }
  return rc;
}

/* The plain backward on float32 operands (gq/gk/gv fresh float32 or q's dtype = float32). */
static int plain_backward(vk_device *D, const char *fn, em_tensor *gq, em_tensor *gk,
                          em_tensor *gv, const em_tensor *gout, const em_tensor *q,
                          const em_tensor *k, const em_tensor *v, const em_tensor *out,
                          const em_tensor *lse, const em_tensor *mask, const em_attn_geom *g) {
  attn_push p;
  if (em_vk_attn_push(D, fn, &p, q, k, v, gout, mask, g) != 0) return -1;
  int64_t rows = g->B * g->Hq * g->Tq;
  bool lds = lds_state(D);
  em_tensor *stats;
  if (em_vk_attn_stats(D, fn, &p, out, lse, gout, g, &stats) != 0) return -1;
  pthread_mutex_lock(&D->lock);
  int rc = 0;
  if (rc == 0 && rows > 0 && g->D > 0) {
    vk_launch L = {.module = lds ? "flash_bwd_dq_lds" : "flash_bwd_dq",
                   .push = &p, .push_size = sizeof p,
                   .spec = {~0u, ~0u, ~0u, ~0u},
                   .ops = {gq, NULL, q, k, v, mask, gout, stats}, .writes = 1u};
    rc = launch(D, &L, cdiv(g->Tq, 64) * cdiv(g->D, 64), g->Hq, g->B);
  }
  /* flash_bwd_dkdv's column blocks: 64 columns, 32 in its shared-memory twin */
  int64_t cols = cdiv(g->D > g->Dv ? g->D : g->Dv, lds ? 32 : 64);
  if (rc == 0 && g->Tk > 0 && cols > 0) {
    vk_launch L = {.module = lds ? "flash_bwd_dkdv_lds" : "flash_bwd_dkdv",
                   .push = &p, .push_size = sizeof p,
                   .spec = {~0u, ~0u, ~0u, ~0u},
                   .ops = {gk, gv, q, k, v, mask, gout, stats}, .writes = 3u};
    rc = launch(D, &L, cdiv(g->Tk, 64) * cols, g->Hkv, g->B);
  }
  pthread_mutex_unlock(&D->lock);
  em_release(stats);
  return rc;
}

int em_vk_attention_backward(em_tensor *gq, em_tensor *gk, em_tensor *gv, const em_tensor *gout,
                             const em_tensor *q, const em_tensor *k, const em_tensor *v,
                             const em_tensor *out, const em_tensor *lse, const em_tensor *mask,
                             const em_attn_geom *g) {
  const char *fn = "scaled_dot_product_attention";
  vk_device *D = em_vk_device(q->device_id);
  int var = variant(D, fn, q);
  if (var < 0) return -1;
  attn_push p;
  if (fresh(D, fn, gq) != 0 || fresh(D, fn, gk) != 0 || fresh(D, fn, gv) != 0 ||
      em_vk_attn_push(D, fn, &p, q, k, v, gout, mask, g) != 0)
    return -1;
  if (g->B * g->Hkv == 0) return 0;
  if (var == 0) return plain_backward(D, fn, gq, gk, gv, gout, q, k, v, out, lse, mask, g);
  int rc = em_vk_attn_cm2_backward(D, gq, gk, gv, gout, q, k, v, out, lse, mask, g, &p);
  if (rc <= 0) return rc;
  /* 16-bit without tensor cores: in float32 between casts, each gradient rounded once */
  const em_tensor *in[5] = {q, k, v, gout, out};
  em_tensor *w[8] = {NULL};
  rc = widen(5, in, w);
  if (rc == 0 && ((w[5] = f32_like(gq)) == NULL || (w[6] = f32_like(gk)) == NULL ||
                  (w[7] = f32_like(gv)) == NULL))
    rc = -1;
  if (rc == 0)
    rc = plain_backward(D, fn, w[5], w[6], w[7], w[3], w[0], w[1], w[2], w[4], lse, mask, g);
  if (rc == 0) rc = em_vk_copy(gq, w[5]);
  if (rc == 0) rc = em_vk_copy(gk, w[6]);
  if (rc == 0) rc = em_vk_copy(gv, w[7]);
  release_all(8, w);
  return rc;
}
