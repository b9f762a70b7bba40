#version 450
// class_total.comp: total = the sum of class_loss.comp's per-row weights (the mean's
// denominator), in one workgroup, so the definition divides on the device without reading
// the number back.
//
// variants: F32 F64 F32S F64S
#extension GL_GOOGLE_include_directive : require
#include "norm.glsl"

layout(std430, binding = 0) writeonly buffer B0 { T total[]; };
layout(std430, binding = 1) readonly buffer B1 { T wrow[]; };

layout(push_constant) uniform PC { uint rows, ototal; } pc;

void main() {
  uint tid = gl_LocalInvocationID.x;
  T a = T(0), unused = T(0);
  for (uint i = tid; i < pc.rows; i += NORM_WG) a += wrow[i];
  wg_sum2(a, unused);
  if (tid == 0u) total[pc.ototal] = a;
}
