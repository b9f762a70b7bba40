#version 450
// group_norm_back.comp: the input gradient of group_norm / layer_norm, one workgroup per row
// r = (n, g) of length D = Cg * S. With xhat = (x - mean) * rstd and gxhat = gy * w[c]:
//   gx = rstd * (gxhat - mean(gxhat) - xhat * mean(gxhat * xhat))
// The weight and bias gradients are per-channel sums over rows: bn_sums.comp (MODE 2).
//
// variants: F32 F64 F32S F64S
#extension GL_GOOGLE_include_directive : require
#include "norm.glsl"

layout(std430, binding = 0) writeonly buffer B0 { T gx[]; };
layout(std430, binding = 1) readonly buffer B1 { T gy[]; };
layout(std430, binding = 2) readonly buffer B2 { T x[]; };
layout(std430, binding = 3) readonly buffer B3 { T mean[]; };
layout(std430, binding = 4) readonly buffer B4 { T rstd[]; };
layout(std430, binding = 5) readonly buffer B5 { T weight[]; };

layout(push_constant) uniform PC {
  uint rows, D, G, Cg, S;
  uint has;          // bit 0 weight
  uint ogx, ogy, ox, om, ors, ow;
} pc;

void main() {
  uint r = group_index(), tid = gl_LocalInvocationID.x;
  if (r >= pc.rows) return;
  uint base = r * pc.D, c0 = (r % pc.G) * pc.Cg;
  bool hw = (pc.has & 1u) != 0u;
  T m = mean[pc.om + r], rs = rstd[pc.ors + r], s1 = T(0), s2 = T(0);
  uint c = c0 + tid / pc.S, s = tid % pc.S;
  for (uint i = tid; i < pc.D; i += NORM_WG) {
    T g = gy[pc.ogy + base + i] * (hw ? weight[pc.ow + c] : T(1));
    s1 += g;
    s2 += g * (x[pc.ox + base + i] - m) * rs;
    c += advance(s, NORM_WG, pc.S);
  }
  wg_sum2(s1, s2);
  T m1 = s1 / T(pc.D), m2 = s2 / T(pc.D);
  c = c0 + tid / pc.S;
  s = tid % pc.S;
  for (uint i = tid; i < pc.D; i += NORM_WG) {
    T g = gy[pc.ogy + base + i] * (hw ? weight[pc.ow + c] : T(1));
    T xhat = (x[pc.ox + base + i] - m) * rs;
    gx[pc.ogx + base + i] = rs * (g - m1 - xhat * m2);
    c += advance(s, NORM_WG, pc.S);
  }
}
