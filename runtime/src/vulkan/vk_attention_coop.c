/*
 * vk_attention_coop.c: the fused attention's forward on tensor cores (cooperative matrices) for
 * float16 and bfloat16. Not yet written: every call returns 1 (the plain kernel runs).
 */
#include "vk_attention.h"

int em_vk_attn_coop_forward(vk_device *D, em_tensor *out, em_tensor *lse, const em_tensor *q,
                            const em_tensor *k, const em_tensor *v, const em_tensor *mask,
                            const em_attn_geom *g, const attn_push *p) {
  (void)D, (void)out, (void)lse, (void)q, (void)k, (void)v, (void)mask, (void)g, (void)p;
  return 1;
}
