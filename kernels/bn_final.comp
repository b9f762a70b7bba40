#version 450
// bn_final.comp: adds each channel's partial sums from bn_sums.comp (one workgroup per
// channel) and turns them into the op's per-channel results. M = N * S values per channel.
//
// variants: F32 F64 F32S F64S
// MODE (constant 0), as in bn_sums.comp:
//   0 statistics: out1 = mean, out2 = biased variance
//   1 batch_norm backward: out1 = gw = sum(gy * xhat), out2 = gb = sum(gy), and out3 = the
//     coefficients (A, B, K) of gx = A * gy + B * x + K, which chan_map.comp applies:
//       k = w * invstd, mg = gb / M, mgx = gw / M (both 0 in evaluation mode)
//       gx = k * (gy - mg - (x - mean) * invstd * mgx)
//   2 group_norm gradients: out1 = gw, out2 = gb
// Operand 0 (the partials) is only read; absent outputs are flagged in `has`.
#extension GL_GOOGLE_include_directive : require
#include "norm.glsl"

layout(constant_id = 0) const uint MODE = 0u;

layout(std430, binding = 0) readonly buffer B0 { T part[]; };
layout(std430, binding = 1) buffer B1 { T out1[]; };
layout(std430, binding = 2) buffer B2 { T out2[]; };
layout(std430, binding = 3) buffer B3 { T coef[]; };
layout(std430, binding = 4) readonly buffer B4 { T x[]; };
layout(std430, binding = 5) readonly buffer B5 { T mean[]; };
layout(std430, binding = 6) readonly buffer B6 { T invstd[]; };
layout(std430, binding = 7) readonly buffer B7 { T weight[]; };

layout(push_constant) uniform PC {
  uint C, S, P, M;
  uint has;         // bit 0 out1, bit 1 out2, bit 2 coef, bit 3 weight, bit 4 training
  uint o1, o2, ox, om, oi, ow;
} pc;

void main() {
  uint c = group_index(), tid = gl_LocalInvocationID.x;
  if (c >= pc.C) return;
  T a = T(0), b = T(0);
  for (uint p = tid; p < pc.P; p += NORM_WG) {
    a += part[(c * pc.P + p) * 2u];
    b += part[(c * pc.P + p) * 2u + 1u];
  }
  wg_sum2(a, b);
  if (tid != 0u) return;
  T M = T(pc.M);
  if (MODE == 0u) {
    T ma = a / M;
    out1[pc.o1 + c] = x[pc.ox + c * pc.S] + ma;
    out2[pc.o2 + c] = max(b / M - ma * ma, T(0));
  } else if (MODE == 1u) {
    T is = invstd[pc.oi + c], gw = b * is;
    if ((pc.has & 1u) != 0u) out1[pc.o1 + c] = gw;
    if ((pc.has & 2u) != 0u) out2[pc.o2 + c] = a;
    if ((pc.has & 4u) != 0u) {
      T w = (pc.has & 8u) != 0u ? weight[pc.ow + c] : T(1), k = w * is;
      bool training = (pc.has & 16u) != 0u;
      T mg = training ? a / M : T(0), mgx = training ? gw / M : T(0), m = mean[pc.om + c];
      coef[3u * c] = k;
      coef[3u * c + 1u] = -k * is * mgx;
      coef[3u * c + 2u] = k * (m * is * mgx - mg);
    }
  } else {
    if ((pc.has & 1u) != 0u) out1[pc.o1 + c] = b;
    if ((pc.has & 2u) != 0u) out2[pc.o2 + c] = a;
  }
}
