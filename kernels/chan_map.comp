#version 450
// chan_map.comp: elementwise maps over x [N, C, S] with per-channel coefficients.
//   MODE 0 (channel_affine): y = x * scale[c] + shift[c]
//   MODE 1 (batch_norm backward's gx): y = A[c] * gy + B[c] * x + K[c], coef = (A, B, K)
//     per channel (bn_final.comp)
// A grid-stride loop over the flattened elements; c = (i / S) % C.
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
  uint n, C, S;
  uint oy, ox, ogy, o3, o4;
} pc;

void main() {
  uint stride = gl_NumWorkGroups.x * gl_NumWorkGroups.y * NORM_WG;
  for (uint i = group_index() * NORM_WG + gl_LocalInvocationID.x; i < pc.n; i += stride) {
    uint c = (i / pc.S) % pc.C;
    if (MODE == 0u) {
      y[pc.oy + i] = x[pc.ox + i] * scale[pc.o3 + c] + shift[pc.o4 + c];
    } else {
      y[pc.oy + i] = scale[3u * c] * gy[pc.ogy + i] + scale[3u * c + 1u] * x[pc.ox + i] +
                     scale[3u * c + 2u];
    }
  }
}
