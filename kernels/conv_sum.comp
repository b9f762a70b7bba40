#version 450
// variants: F32 F64
//
// conv_sum.comp: adds up the split-K partial products of conv_gemm.comp's weight gradient and
// of matmul.comp, out[i] = alpha * (sum over s of part[s * stride + i]) + beta * out[i] (out
// unread when beta is 0). A workgroup takes 256 / LANES outputs; the
// LANES threads of an output sum every LANES-th split, then add their sums in lane order
// through shared memory, so the result does not depend on scheduling (no atomics) and a long
// list of splits over few outputs (a first layer's weights) still spreads over many threads.
#ifdef VARIANT_F64
#extension GL_ARB_gpu_shader_fp64 : require
#define T double
#else
#define T float
#endif

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint LANES = 1;   // a power of two, at most 256
const uint PER = 256 / LANES;

layout(std430, set = 0, binding = 0) buffer Out { T o[]; };
layout(std430, set = 0, binding = 1) readonly buffer Part { T part[]; };

layout(push_constant) uniform Params {
  uint n, splits, stride, off_o, groups_x, pad_;
  T alpha, beta;
} p;

void put(uint i, T s) {
  T v = p.alpha * s;
  if (p.beta != T(0)) v += p.beta * o[p.off_o + i];
  o[p.off_o + i] = v;
}

shared T sums[256];

void main() {
  uint t = gl_LocalInvocationID.x, e = t % PER, lane = t / PER;
  uint i = (gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x) * PER + e;
  T s = T(0);
  if (i < p.n)
    for (uint k = lane; k < p.splits; k += LANES) s += part[k * p.stride + i];
  if (LANES == 1u) {
    if (i < p.n) put(i, s);
    return;
  }
  sums[t] = s;
  barrier();
  if (lane == 0u && i < p.n) {
    T r = sums[e];
    for (uint l = 1; l < LANES; l++) r += sums[l * PER + e];
    put(i, r);
  }
}
