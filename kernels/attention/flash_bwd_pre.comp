#version 450
// flash_bwd_pre.comp: the attention backward's first pass (runtime/src/vulkan/vk_attention.c).
// For each query row r = (b Hq + h) Tq + i it writes stats[r] = (lse', delta): delta =
// rowsum(gout * out) (FlashAttention-2's D_i), and lse' = lse, or +inf for a row whose every key
// is masked (lse = -inf), so that the later kernels' p = exp(s - lse') is 0 there without a
// test. One invocation per row. Operands: 0 stats (float32 pairs), 1 lse (its base and strides
// in the k slot of the push constants), 2 out (the q slot), 6 gout (the g slot).
//
// The grid: x * y workgroups of 64 rows (folded over y past the x limit).
//
// Variants by the dtype of out and gout: F32, and F16 / BF16 (read as 16-bit halves of 32-bit
// words, widened to float32; the coopmat2 backward's operands, vk_attention_cm2.c).
// variants: F32 F16 BF16
#extension GL_GOOGLE_include_directive : require
#include "attention/attn.glsl"

#if defined(VARIANT_F16)
float ld16(uint w, uint e) { return unpackHalf2x16(w >> ((e & 1u) * 16u)).x; }
#define LDV(buf, e) ld16((buf).w[(e) >> 1], e)
#elif defined(VARIANT_BF16)
float ld16(uint w, uint e) { return uintBitsToFloat(((w >> ((e & 1u) * 16u)) & 0xffffu) << 16); }
#define LDV(buf, e) ld16((buf).w[(e) >> 1], e)
#else
#define LDV(buf, e) LDX(buf, e)
#endif

layout(local_size_x = 64) in;
layout(std430, binding = 0) writeonly buffer BSO { vec2 so[]; };
layout(std430, binding = 1) readonly buffer BLI { float lse_in[]; };

void main() {
  uint r = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 64u +
           gl_LocalInvocationID.x;
  uint rows = pc.Tk;  // the host puts the row count B * Hq * Tq here
  if (r >= rows) return;
  uint i = r % pc.Tq, bh = r / pc.Tq, h = bh % HQ, b = bh / HQ;
  uint orow = pc.q_base + b * pc.q_sb + h * pc.q_sh + i * pc.q_st;
  uint grow = pc.g_base + b * pc.g_sb + h * pc.g_sh + i * pc.g_st;
  float delta = 0.0;
  for (uint c = 0u; c < HDV; c++) delta += LDV(qb, orow + c) * LDV(gb, grow + c);
  float l = lse_in[pc.k_base + b * pc.k_sb + h * pc.k_sh + i * pc.k_st];
  so[r] = vec2(l == NEG_INF ? -NEG_INF : l, delta);
}
