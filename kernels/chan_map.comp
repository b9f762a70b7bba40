#version 450
// chan_map.comp: elementwise maps over x [N, C, S] with per-channel coefficients.
//   MODE 0 (channel_affine): y = x * scale[c] + shift[c]
//   MODE 1 (batch_norm backward's gx): y = A[c] * gy + B[c] * x + K[c], coef = (A, B, K)
//     per channel (bn_final.comp)
// Workgroup k covers elements k * chunk .. (k + 1) * chunk - 1, its invocations WG apart, each
// tracking its (channel, position) as it goes rather than dividing per element.
//
// variants: F32 F64
#extension GL_GOOGLE_include_directive : require
#include "norm.glsl"

layout(constant_id = 0) const uint MODE = 0u;

layout(std430, binding = 0) writeonly buffer B0 { T y[]; };
layout(std430, binding = 1) readonly buffer B1 { T x[]; };
layout(std430, binding = 2) readonly buffer B2 { T gy[]; };
layout(std430, binding = 3) readonly buffer B3 { T scale[]; };
layout(std430, binding = 4) readonly buffer B4 { T shift[]; };

layout(push_constant) uniform PC {
  uint n, C, S, chunk;
  uint oy, ox, ogy, o3, o4;
} pc;

void main() {
  uint lo = group_index() * pc.chunk, hi = min(lo + pc.chunk, pc.n);
  uint i = lo + gl_LocalInvocationID.x, plane = i / pc.S, s = i - plane * pc.S, c = plane % pc.C;
  for (; i < hi; i += NORM_WG) {
    if (MODE == 0u) {
      y[pc.oy + i] = x[pc.ox + i] * scale[pc.o3 + c] + shift[pc.o4 + c];
    } else {
      y[pc.oy + i] = scale[3u * c] * gy[pc.ogy + i] + scale[3u * c + 1u] * x[pc.ox + i] +
                     scale[3u * c + 2u];
    }
    c += advance(s, NORM_WG, pc.S);
    if (c >= pc.C) c %= pc.C;
  }
}
