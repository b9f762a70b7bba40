#version 450
// group_norm.comp: group_norm and layer_norm forward, one workgroup per row r = (n, g) of x
// viewed [N * G, D], D = Cg * S: the row's mean, then its variance from squared deviations
// (two passes, as the CPU does: no cancellation), then y = x * a[c] + (b[c] - mean * a[c]),
// a[c] = rstd * w[c], for channel c = g * Cg + i / S of element i.
//
// variants: F32 F64 F32S F64S
#extension GL_GOOGLE_include_directive : require
#include "norm.glsl"

layout(std430, binding = 0) writeonly buffer B0 { T y[]; };
layout(std430, binding = 1) writeonly buffer B1 { T mean[]; };
layout(std430, binding = 2) writeonly buffer B2 { T rstd[]; };
layout(std430, binding = 3) readonly buffer B3 { T x[]; };
layout(std430, binding = 4) readonly buffer B4 { T weight[]; };
layout(std430, binding = 5) readonly buffer B5 { T bias[]; };

layout(push_constant) uniform PC {
  uint rows, D, G, Cg, S;
  uint has;          // bit 0 weight, bit 1 bias
  uvec2 eps_d;       // eps as a double (the F64 variant) or a float (eps_f)
  uint eps_f;
  uint oy, om, ors, ox, ow, ob;
} pc;

void main() {
  uint r = group_index(), tid = gl_LocalInvocationID.x;
  if (r >= pc.rows) return;
  uint base = r * pc.D, c0 = (r % pc.G) * pc.Cg;
  T s = T(0), unused = T(0);
  for (uint i = tid; i < pc.D; i += NORM_WG) s += x[pc.ox + base + i];
  wg_sum2(s, unused);
  T m = pc.D > 0u ? s / T(pc.D) : T(0), q = T(0);  // an empty row: mean 0, variance 0
  for (uint i = tid; i < pc.D; i += NORM_WG) {
    T d = x[pc.ox + base + i] - m;
    q += d * d;
  }
  wg_sum2(q, unused);
  T rs = T(1) / sqrt((pc.D > 0u ? q / T(pc.D) : T(0)) + ARG(pc.eps_f, pc.eps_d));
  if (tid == 0u) {
    mean[pc.om + r] = m;
    rstd[pc.ors + r] = rs;
  }
  bool hw = (pc.has & 1u) != 0u, hb = (pc.has & 2u) != 0u;
  uint c = c0 + tid / pc.S, pos = tid % pc.S;
  for (uint i = tid; i < pc.D; i += NORM_WG) {
    T a = hw ? rs * weight[pc.ow + c] : rs;
    T sh = (hb ? bias[pc.ob + c] : T(0)) - m * a;
    y[pc.oy + base + i] = x[pc.ox + base + i] * a + sh;
    c += advance(pos, NORM_WG, pc.S);
  }
}
