/*
 * vk_attention_cm2.c: the fused attention on coopmat2 tensor cores (GL_NV_cooperative_matrix2,
 * workgroup-scope matrices with tensor addressing), forward and backward, for float16 and
 * bfloat16 q/k/v with float32 accumulation and softmax:
 *   forward   kernels/coopmat2/flash_fwd_cm2.comp: a workgroup per 64 query rows of a head;
 *   backward  flash_bwd_pre (vk_attention.c, on float32 copies of out and gout: the per-row
 *             lse' and delta), then flash_bwd_dq_cm2 (gq, a workgroup per 64 query rows) and
 *             flash_bwd_dkdv_cm2 (gk and gv, a workgroup per 64 keys of a k/v head, walking
 *             every q head of its group: grouped-query sums without atomics).
 * The bfloat16 modules are the float16 ones rewritten by tools/spirv_bf16.c (the kernels only
 * move 16-bit values, feed them to float32-accumulated products and convert to and from
 * float32). P and dS are rounded to 16 bits before their products, as FlashAttention-2 does.
 *
 * They run where the coopmat2 kernels do (em_vk_coop_cm2_for: EMBER_VK_COOPMAT honoured), for
 * equal head dims D = Dv that are multiples of 16 up to 128, operands whose last dim is
 * contiguous, and no dropout. EMBER_VK_ATTENTION_CM2=0 turns them off (for comparisons).
 * Anything else goes to the subgroup-scope forward (vk_attention_coop.c) or the plain kernels.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_attention.h"
#include "vk_matmul.h"

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

static bool last_contiguous(const em_tensor *t) {
  return t->ndim == 4 && (t->sizes[3] <= 1 || t->strides[3] == 1);
}

/* Whether the kernels take these operands (gout may be NULL: the forward). */
static bool taken(vk_device *D, const em_tensor *q, const em_tensor *k, const em_tensor *v,
                  const em_tensor *gout, const em_attn_geom *g) {
  const char *off = getenv("EMBER_VK_ATTENTION_CM2");
  if (off && strcmp(off, "0") == 0) return false;
  if (!em_vk_coop_cm2_for(D, q->dtype_id) || k->dtype_id != q->dtype_id ||
      v->dtype_id != q->dtype_id || (gout && gout->dtype_id != q->dtype_id))
    return false;
  if (g->D != g->Dv || g->D % 16 != 0 || g->D < 16 || g->D > 128 || g->dropout_p > 0)
    return false;
  if (!last_contiguous(q) || !last_contiguous(k) || !last_contiguous(v) ||
      (gout && !last_contiguous(gout)))
    return false;
  const uint32_t *lim = D->props.limits.maxComputeWorkGroupCount;
  return cdiv(g->Tq, 64) <= lim[0] && cdiv(g->Tk, 64) <= lim[0] && g->Hq <= lim[1] &&
         g->B <= lim[2];
}

static const char *module(const char *base, int dtype, char *buf, size_t n) {
  snprintf(buf, n, "%s%s", base, dtype == EM_BFLOAT16 ? "_bf16" : "");
  return buf;
}

int em_vk_attn_cm2_forward(vk_device *D, em_tensor *out, em_tensor *lse, const em_tensor *q,
                           const em_tensor *k, const em_tensor *v, const em_tensor *mask,
                           const em_attn_geom *g, const attn_push *p) {
  if (!taken(D, q, k, v, NULL, g)) return 1;
  char name[48];
  vk_launch L = {.module = module("flash_fwd_cm2", q->dtype_id, name, sizeof name), .push = p,
                 .push_size = sizeof *p, .spec = {(uint32_t)g->D, ~0u, ~0u, ~0u},
                 .ops = {out, lse, q, k, v, mask}, .writes = 3u,
                 .groups = {(uint32_t)cdiv(g->Tq, 64), (uint32_t)g->Hq, (uint32_t)g->B}};
  return em_vk_launch(D, &L);
}

int em_vk_attn_cm2_backward(vk_device *D, em_tensor *gq, em_tensor *gk, em_tensor *gv,
                            const em_tensor *gout, const em_tensor *q, const em_tensor *k,
                            const em_tensor *v, const em_tensor *out, const em_tensor *lse,
                            const em_tensor *mask, const em_attn_geom *g, const attn_push *p) {
  const char *fn = "scaled_dot_product_attention";
  if (!taken(D, q, k, v, gout, g)) return 1;
  /* the stats pass reads float32 out and gout */
  em_tensor *fo = em_to_dtype(out, EM_FLOAT32), *fg = em_to_dtype(gout, EM_FLOAT32);
  em_tensor *stats = NULL;
  int rc = fo && fg ? 0 : -1;
  if (rc == 0) {
    attn_push pf = *p;  /* the stats pass reads gout's float32 copy in the g slot */
    int64_t sb = fg->strides[0], sh = fg->strides[1], st = fg->strides[2];
    pf.g[0] = (uint32_t)fg->offset;
    pf.g[1] = fg->sizes[0] > 1 ? (uint32_t)sb : 0u;
    pf.g[2] = fg->sizes[1] > 1 ? (uint32_t)sh : 0u;
    pf.g[3] = fg->sizes[2] > 1 ? (uint32_t)st : 0u;
    rc = em_vk_attn_stats(D, fn, &pf, fo, lse, fg, g, &stats);
  }
  if (rc == 0) {
    char name[48];
    pthread_mutex_lock(&D->lock);
    vk_launch L = {.module = module("flash_bwd_dq_cm2", q->dtype_id, name, sizeof name),
                   .push = p, .push_size = sizeof *p, .spec = {(uint32_t)g->D, ~0u, ~0u, ~0u},
                   .ops = {gq, NULL, q, k, v, mask, gout, stats}, .writes = 1u,
                   .groups = {(uint32_t)cdiv(g->Tq, 64), (uint32_t)g->Hq, (uint32_t)g->B}};
    rc = em_vk_launch(D, &L);
    if (rc == 0) {
      vk_launch K = {.module = module("flash_bwd_dkdv_cm2", q->dtype_id, name, sizeof name),
                     .push = p, .push_size = sizeof *p,
                     .spec = {(uint32_t)g->D, ~0u, ~0u, ~0u},
                     .ops = {gk, gv, q, k, v, mask, gout, stats}, .writes = 3u,
                     .groups = {(uint32_t)cdiv(g->Tk, 64), (uint32_t)g->Hkv, (uint32_t)g->B}};
      rc = em_vk_launch(D, &K);
    }
    pthread_mutex_unlock(&D->lock);
  }
  em_release(fo);
  em_release(fg);
  em_release(stats);
  return rc;
}
