#version 450
//
// index_seg.comp: float64 scatter_add and index_add in parallel and in the CPU's order,
// without 64-bit atomics. The host sorts the index along dim (stably: values sv and original
// positions sp), so every run of equal values in a line is one target element's list of
// contributions, in source order. One invocation per (line, sorted position) does the work
// where a run starts: it adds alpha * src over the run into the target one after another,
// the same sequence of roundings as runtime/src/cpu/index.c's walk; the others return.
// index_add's index is the same for every line (sv, sp 1-D: line strides 0).
// The walk: line dimensions coalesced by the host (at most 5, innermost first).
#extension GL_ARB_gpu_shader_int64 : require
#extension GL_ARB_gpu_shader_fp64 : require

layout(local_size_x = 256) in;

layout(std430, set = 0, binding = 0) buffer A { double a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { double b[]; };
layout(std430, set = 0, binding = 2) readonly buffer SV { uint sv[]; };
layout(std430, set = 0, binding = 3) readonly buffer SP { uint sp[]; };

layout(push_constant) uniform Params {
  uint lines, m, ndim;
  int xstep;       // x's stride along dim
  uint alpha[2];   // double bits
  uint size[5];
  int st[15];      // st[5 * k + d]: a, b, and the sorted pair's strides along line dimension d
  uint base[3];    // element offsets of a, b, and the sorted pair (fresh: 0)
  int jst[2];      // strides along dim of b and of the sorted pair
} pc;

void main() {
  uint n = pc.lines * pc.m;
  uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  double alpha = packDouble2x32(uvec2(pc.alpha[0], pc.alpha[1]));
  for (uint id = gl_GlobalInvocationID.x; id < n; id += step) {
    uint line = id / pc.m, p = id - line * pc.m;
    int ea = int(pc.base[0]), eb = int(pc.base[1]), es = int(pc.base[2]);
    uint r = line;
    for (uint d = 0u; d < pc.ndim; d++) {
      uint c = r % pc.size[d];
      r /= pc.size[d];
      ea += int(c) * pc.st[d];
      eb += int(c) * pc.st[5u + d];
      es += int(c) * pc.st[10u + d];
    }
    uint t = sv[2u * uint(es + int(p) * pc.jst[1])];
    if (p > 0u && sv[2u * uint(es + int(p - 1u) * pc.jst[1])] == t) continue;  // not a start
    uint e = uint(ea + int(t) * pc.xstep);
    precise double v = a[e];
    for (uint q = p; q < pc.m; q++) {
      uint k = uint(es + int(q) * pc.jst[1]);
      if (sv[2u * k] != t) break;
      precise double prod = alpha * b[uint(eb + int(sp[2u * k]) * pc.jst[0])];
      v = v + prod;
    }
    a[e] = v;
  }
}
