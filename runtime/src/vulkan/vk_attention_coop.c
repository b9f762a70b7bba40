/*
 * vk_attention_coop.c: the fused attention's forward on tensor cores
 * (kernels/coopmat/flash_fwd_coop.comp: subgroup-scope 16x16x16 float16 cooperative matrices,
 * float32 accumulation and softmax), for float16 q/k/v.
 *
 * It runs where the device has a subgroup-scope float16 flavor enabled (vk_matmul_coop.c sets
 * them up: KHR, or NV with EMBER_VK_COOPMAT=nv; EMBER_VK_COOPMAT=0 turns it off with the
 * matmul's), the head dims are equal multiples of 16 up to 64, every base and stride of q/k/v
 * is even (the kernel loads element pairs as 32-bit words) and its shared memory fits.
 * EMBER_VK_ATTENTION_COOP=0 forces the plain kernel (for comparisons). Anything else, bfloat16
 * and the backward included, runs the plain kernels (vk_attention.c).
 */
#include <stdlib.h>
#include <string.h>

#include "vk_attention.h"
#include "vk_matmul.h"

/* The kernel's shared memory for head dim hd (flash_fwd_coop.comp's arrays). */
static uint64_t shared_bytes(uint64_t hd) {
  return 2 * 64 * (hd + 8) * 2 + 4 * 16 * (64 + 4) * 4 + 4 * 16 * (64 + 8) * 2;
}

static bool even(const uint32_t s[4]) { return ((s[0] | s[1] | s[2] | s[3]) & 1u) == 0; }

int em_vk_attn_coop_forward(vk_device *D, em_tensor *out, em_tensor *lse, const em_tensor *q,
                            const em_tensor *k, const em_tensor *v, const em_tensor *mask,
                            const em_attn_geom *g, const attn_push *p) {
  const char *off = getenv("EMBER_VK_ATTENTION_COOP");
  if (off && strcmp(off, "0") == 0) return 1;
  if (q->dtype_id != EM_FLOAT16 || g->D != g->Dv || g->D % 16 != 0 || g->D < 16 || g->D > 64)
    return 1;
  if (!even(p->q) || !even(p->k) || !even(p->v) ||
      shared_bytes((uint64_t)g->D) > D->props.limits.maxComputeSharedMemorySize)
    return 1;
  const char *module = NULL;
  switch (em_vk_coop_subgroup_flavor(D)) {
#ifdef EMBER_VK_COOPMAT_KHR
  case 2: module = "flash_fwd_coop_KHR"; break;
#endif
#ifdef EMBER_VK_COOPMAT_NV
  case 1: module = "flash_fwd_coop_NV"; break;
#endif
  default: return 1;
  }
  int64_t x = (g->Tq + 63) / 64;
  const uint32_t *lim = D->props.limits.maxComputeWorkGroupCount;
  if (x > lim[0] || g->Hq > lim[1] || g->B > lim[2]) return 1;
  vk_launch L = {.module = module, .push = p, .push_size = sizeof *p,
                 .spec = {(uint32_t)g->D, ~0u, ~0u, ~0u}, .ops = {out, lse, q, k, v, mask},
                 .writes = 3u, .groups = {(uint32_t)x, (uint32_t)g->Hq, (uint32_t)g->B}};
  return em_vk_launch(D, &L);
}
