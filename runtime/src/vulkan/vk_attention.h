/*
 * vk_attention.h: what the fused attention's Vulkan files share (vk_attention.c, the plain
 * kernels; vk_attention_coop.c, the tensor-core ones): the push constants every attention
 * kernel takes (kernels/attention/attn.glsl) and the tensor-core entry point.
 */
#ifndef EMBER_VK_ATTENTION_H
#define EMBER_VK_ATTENTION_H

#include "../nn.h"
#include "vk.h"

/* kernels/attention/attn.glsl's block: bases and (batch, head, row) strides in elements. */
typedef struct attn_push {
  uint32_t heads;        /* Hq | (Hq / Hkv) << 16 */
  uint32_t Tq, Tk;
  uint32_t dims;         /* D | Dv << 16 */
  uint32_t q[4], k[4], v[4], g[4];
  uint32_t m[5];         /* the mask: base, then b, h, i, j strides */
  float scale;
  uint32_t flags;        /* bit 0 causal, bit 1 mask, bit 2 dropout */
  uint32_t drop_below;
  uint32_t seed_lo, seed_hi, off_lo, off_hi;
} attn_push;
_Static_assert(sizeof(attn_push) == 128, "the attention kernels' push constants");

/* Fills p from the operands (gout and mask may be NULL); -1 with an error where the kernels'
 * 32-bit indexing or the block's 16-bit fields do not reach. */
int em_vk_attn_push(vk_device *D, const char *fn, attn_push *p, const em_tensor *q,
                    const em_tensor *k, const em_tensor *v, const em_tensor *gout,
                    const em_tensor *mask, const em_attn_geom *g);

/* The forward on tensor cores (vk_attention_coop.c): 0 done, -1 error, 1 not taken (no such
 * kernel on D, or operands it does not read: the plain kernel runs). D->lock held. */
int em_vk_attn_coop_forward(vk_device *D, em_tensor *out, em_tensor *lse, const em_tensor *q,
                            const em_tensor *k, const em_tensor *v, const em_tensor *mask,
                            const em_attn_geom *g, const attn_push *p);

/* The forward and backward on coopmat2 tensor cores (vk_attention_cm2.c), float16 and bfloat16:
 * 0 done, -1 error, 1 not taken (the next kernel runs). The forward is called with D->lock
 * held; the backward takes it itself (it casts first). */
int em_vk_attn_cm2_forward(vk_device *D, em_tensor *out, em_tensor *lse, const em_tensor *q,
                           const em_tensor *k, const em_tensor *v, const em_tensor *mask,
                           const em_attn_geom *g, const attn_push *p);
int em_vk_attn_cm2_backward(vk_device *D, em_tensor *gq, em_tensor *gk, em_tensor *gv,
                            const em_tensor *gout, const em_tensor *q, const em_tensor *k,
                            const em_tensor *v, const em_tensor *out, const em_tensor *lse,
                            const em_tensor *mask, const em_attn_geom *g, const attn_push *p);
/* flash_bwd_pre's stats (lse', delta per query row) from out and gout (float32, or both of
 * one 16-bit dtype), into a new
 * tensor (vk_attention.c); takes D->lock. */
int em_vk_attn_stats(vk_device *D, const char *fn, const attn_push *p, const em_tensor *out,
                     const em_tensor *lse, const em_tensor *gout, const em_attn_geom *g,
                     em_tensor **stats);

#endif
