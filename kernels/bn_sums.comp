#version 450
// bn_sums.comp: per-channel partial sums over x [N, C, S], the first pass of batch_norm's
// statistics, batch_norm's backward and group_norm's weight and bias gradients. Workgroup
// (p, c) sums the elements p * chunk .. (p + 1) * chunk - 1 of channel c (in (n, s) order) and
// writes two sums to part[(c * P + p) * 2]; bn_final.comp adds the P partials of a channel.
//
// variants: F32 F64 F32S F64S
// MODE (constant 0):
//   0 statistics: sums of d and d^2 with d = x - x[n=0, c, s=0]. Shifting by a sample of the
//     channel keeps the sum of squares from cancelling when the mean is large against the
//     spread, and leaves plain sums that partials can simply add.
//   1 batch_norm backward: sums of gy and gy * (x - mean[c])
//   2 group_norm gradients: sums of gy and gy * (x - mean[n, g]) * rstd[n, g], g = c / Cg
// COLS (constant 1): 1 when S == 1 (x is [N, C]): a workgroup then covers 32 neighbouring
//   channels, 8 rows at a time, so a warp reads 32 consecutive elements instead of one
//   element per channel-stride.
#extension GL_GOOGLE_include_directive : require
#include "norm.glsl"

layout(constant_id = 0) const uint MODE = 0u;
layout(constant_id = 1) const uint COLS = 0u;

layout(std430, binding = 0) writeonly buffer B0 { T part[]; };
layout(std430, binding = 1) readonly buffer B1 { T x[]; };
layout(std430, binding = 2) readonly buffer B2 { T gy[]; };
layout(std430, binding = 3) readonly buffer B3 { T mean[]; };
layout(std430, binding = 4) readonly buffer B4 { T rstd[]; };

layout(push_constant) uniform PC {
  uint N, C, S, P;
  uint chunk;       // elements (rows when COLS) per partial
  uint G, Cg;       // MODE 2
  uint ox, ogy, om, ors;
} pc;

// One element's contributions to the two sums.
void accumulate(uint n, uint c, uint i, T shift, inout T a, inout T b) {
  T v = x[pc.ox + i];
  if (MODE == 0u) {
    T d = v - shift;
    a += d;
    b += d * d;
  } else if (MODE == 1u) {
    T g = gy[pc.ogy + i];
    a += g;
    b += g * (v - shift);
  } else {
    uint r = n * pc.G + c / pc.Cg;
    T g = gy[pc.ogy + i];
    a += g;
    b += g * (v - mean[pc.om + r]) * rstd[pc.ors + r];
  }
}

T shift_of(uint c) {
  if (MODE == 0u) return x[pc.ox + c * pc.S];
  if (MODE == 1u) return mean[pc.om + c];
  return T(0);
}

void main() {
  uint tid = gl_LocalInvocationID.x, p = gl_WorkGroupID.x;
  if (COLS == 0u) {
    uint c = gl_WorkGroupID.y + gl_WorkGroupID.z * gl_NumWorkGroups.y;
    if (c >= pc.C) return;  // the whole workgroup: barriers stay uniform
    uint NS = pc.N * pc.S, lo = p * pc.chunk, hi = min(lo + pc.chunk, NS);
    T a = T(0), b = T(0), shift = shift_of(c);
    uint j = lo + tid, n = j / pc.S, s = j - n * pc.S;
    for (; j < hi; j += NORM_WG) {
      accumulate(n, c, (n * pc.C + c) * pc.S + s, shift, a, b);
      n += advance(s, NORM_WG, pc.S);
    }
    wg_sum2(a, b);
    if (tid == 0u) {
      part[(c * pc.P + p) * 2u] = a;
      part[(c * pc.P + p) * 2u + 1u] = b;
    }
  } else {
    uint lane = tid & 31u, row = tid >> 5;
    uint c = (gl_WorkGroupID.y + gl_WorkGroupID.z * gl_NumWorkGroups.y) * 32u + lane;
    bool live = c < pc.C;
    uint lo = p * pc.chunk, hi = min(lo + pc.chunk, pc.N);
    T a = T(0), b = T(0), shift = live ? shift_of(c) : T(0);
    if (live)
      for (uint n = lo + row; n < hi; n += NORM_WG / 32u) accumulate(n, c, n * pc.C + c, shift, a, b);
    red0[tid] = a;
    red1[tid] = b;
    barrier();
    for (uint s = NORM_WG / 64u; s > 0u; s >>= 1) {
      if (row < s) {
        red0[tid] += red0[tid + s * 32u];
        red1[tid] += red1[tid + s * 32u];
      }
      barrier();
    }
    if (row == 0u && live) {
      part[(c * pc.P + p) * 2u] = red0[tid];
      part[(c * pc.P + p) * 2u + 1u] = red1[tid];
    }
  }
}
