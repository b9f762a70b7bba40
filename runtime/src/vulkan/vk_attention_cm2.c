/*
 * vk_attention_cm2.c: the fused attention on coopmat2 tensor cores (GL_NV_cooperative_matrix2,
 * workgroup-scope matrices with tensor addressing), forward and backward, for float16 and
 * bfloat16 q/k/v with float32 accumulation and softmax:
 *   forward   kernels/coopmat2/flash_fwd_cm2.comp: a workgroup per 64 query rows of a head;
 *   backward  flash_bwd_pre (vk_attention.c: the per-row lse' and delta from the 16-bit out
 *             and gout), then flash_bwd_dq_cm2 (gq, a workgroup per 64 query rows) and
 *             flash_bwd_dkdv_cm2 (gk and gv, a workgroup per 64 keys of a k/v head, walking
 *             every q head of its group: grouped-query sums without atomics).
 * The bfloat16 modules are the float16 ones rewritten by tools/spirv_bf16.c (the kernels only
 * move 16-bit values, feed them to float32-accumulated products and convert to and from
 * float32). P and dS are rounded to 16 bits before their products, as FlashAttention-2 does.
 *
 * They run where the coopmat2 kernels do (em_vk_coop_cm2_for: EMBER_VK_COOPMAT honoured), for
 * equal head dims D = Dv that are multiples of 16 up to 128, operands whose last dim is
 * contiguous, and no dropout. EMBER_VK_ATTENTION_CM2=0 turns them off (for comparisons).
 *
 * Tiles: each kernel takes its query-tile rows BR and key-tile columns BC as specialization
 * constants 1 and 2; tile_of() holds the defaults (measured on an H200, docs/performance.md),
 * and EMBER_VK_ATTENTION_CM2_<FWD|DQ|DKDV>="BR,BC" overrides them for tuning runs
 * (tests/gpu/attention_tiles.lua).
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
  return cdiv(g->Tq, 16) <= lim[0] && cdiv(g->Tk, 16) <= lim[0] && g->Hq <= lim[1] &&
         g->B <= lim[2];
}

typedef struct tile { uint32_t br, bc; } tile;

/* The tile of kernel `which` (0 forward, 1 dq, 2 dkdv). */
static tile tile_of(int which) {
  static const char *const env[] = {"EMBER_VK_ATTENTION_CM2_FWD", "EMBER_VK_ATTENTION_CM2_DQ",
                                    "EMBER_VK_ATTENTION_CM2_DKDV"};
  tile t = {64, 64};
  const char *v = getenv(env[which]);
  unsigned br, bc;
  if (v && sscanf(v, "%u,%u", &br, &bc) == 2 && br % 16 == 0 && bc % 16 == 0 && br >= 16 &&
      bc >= 16 && br <= 256 && bc <= 256)
    t = (tile){br, bc};
  return t;
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
  tile t = tile_of(0);
  vk_launch L = {.module = module("flash_fwd_cm2", q->dtype_id, name, sizeof name), .push = p,
                 .push_size = sizeof *p, .spec = {(uint32_t)g->D, t.br, t.bc, ~0u},
                 .ops = {out, lse, q, k, v, mask}, .writes = 3u,
                 .groups = {(uint32_t)cdiv(g->Tq, t.br), (uint32_t)g->Hq, (uint32_t)g->B}};
  return em_vk_launch(D, &L);
}

int em_vk_attn_cm2_backward(vk_device *D, em_tensor *gq, em_tensor *gk, em_tensor *gv,
                            const em_tensor *gout, const em_tensor *q, const em_tensor *k,
                            const em_tensor *v, const em_tensor *out, const em_tensor *lse,
                            const em_tensor *mask, const em_attn_geom *g, const attn_push *p) {
  const char *fn = "scaled_dot_product_attention";
  if (!taken(D, q, k, v, gout, g)) return 1;
  em_tensor *stats = NULL;
  int rc = out->dtype_id == q->dtype_id ? 0 : em_error("%s: expected out in q's dtype", fn);
  if (rc == 0) rc = em_vk_attn_stats(D, fn, p, out, lse, gout, g, &stats);
  if (rc == 0) {
    char name[48];
    pthread_mutex_lock(&D->lock);
    tile t = tile_of(1), u = tile_of(2);
    vk_launch L = {.module = module("flash_bwd_dq_cm2", q->dtype_id, name, sizeof name),
                   .push = p, .push_size = sizeof *p, .spec = {(uint32_t)g->D, t.br, t.bc, ~0u},
                   .ops = {gq, NULL, q, k, v, mask, gout, stats}, .writes = 1u,
                   .groups = {(uint32_t)cdiv(g->Tq, t.br), (uint32_t)g->Hq, (uint32_t)g->B}};
    rc = em_vk_launch(D, &L);
    if (rc == 0) {
      vk_launch K = {.module = module("flash_bwd_dkdv_cm2", q->dtype_id, name, sizeof name),
                     .push = p, .push_size = sizeof *p,
                     .spec = {(uint32_t)g->D, u.br, u.bc, ~0u},
                     .ops = {gk, gv, q, k, v, mask, gout, stats}, .writes = 3u,
                     .groups = {(uint32_t)cdiv(g->Tk, u.bc), (uint32_t)g->Hkv, (uint32_t)g->B}};
      rc = em_vk_launch(D, &K);
    }
    pthread_mutex_unlock(&D->lock);
  }
  em_release(stats);
  return rc;
}
