#version 450
// variants: F32 F64
//
// conv_sum.comp: adds up the split-K partial products of conv_gemm.comp's weight gradient,
// out[i] = sum over s of part[s * stride + i], in split order, so the result does not depend
// on scheduling. One thread per output element; consecutive threads read consecutive words.
#ifdef VARIANT_F64
#extension GL_ARB_gpu_shader_fp64 : require
#define T double
#else
#define T float
#endif

layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) buffer Out { T o[]; };
layout(std430, set = 0, binding = 1) readonly buffer Part { T part[]; };

layout(push_constant) uniform Params {
  uint n, splits, stride, off_o, groups_x;
} p;

void main() {
  uint i = (gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
  if (i >= p.n) return;
  T s = T(0);
  for (uint k = 0; k < p.splits; k++) s += part[k * p.stride + i];
  o[p.off_o + i] = s;
}
