#version 450
// variants: F32 F64 H16
//
// index_seg.comp: floating-point scatter_add and index_add in parallel, deterministic and in
// the CPU's order (so bit for bit the CPU's result), without atomic adds: float64 has no
// 64-bit atomics to use, and compare-and-swap loops would add in a racy order and contend on
// repeated rows (an embedding's gradient). H16 is float16 (BF == 0) and bfloat16 (BF == 1),
// computed in float32 and rounded back after every add, as the CPU does; their packed words
// are stored with atomic and/or, since a word's other half may be another run's target.
// The host sorts the index along dim (stably: values sv and original positions sp), so every
// run of equal values in a line is one target element's list of contributions, in source
// order. One invocation per (line, sorted position) does the work
// where a run starts: it adds alpha * src over the run into the target one after another,
// the same sequence of roundings as runtime/src/cpu/index.c's walk; the others return.
// index_add's index is the same for every line (sv, sp 1-D: line strides 0).
// The walk: line dimensions coalesced by the host (at most 5, innermost first); the thread
// index runs fastest along the lines when LFAST (src contiguous along them: coalesced loads).
// Spec constants: 0 LFAST, 1 BF (H16).
#extension GL_ARB_gpu_shader_int64 : require
#extension GL_GOOGLE_include_directive : require
#ifdef VARIANT_F64
#extension GL_ARB_gpu_shader_fp64 : require
#define REAL double
#define ALPHA packDouble2x32(uvec2(pc.alpha[0], pc.alpha[1]))
#else
#define REAL float
#define ALPHA uintBitsToFloat(pc.alpha[0])
#endif

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint LFAST = 0u;
layout(constant_id = 1) const uint BF = 0u;

#ifdef VARIANT_H16
layout(std430, set = 0, binding = 0) buffer A { uint a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { uint b[]; };
#else
layout(std430, set = 0, binding = 0) buffer A { REAL a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { REAL b[]; };
#endif
layout(std430, set = 0, binding = 2) readonly buffer SV { uint sv[]; };
layout(std430, set = 0, binding = 3) readonly buffer SP { uint sp[]; };

layout(push_constant) uniform Params {
  uint lines, m, ndim;
  int xstep;       // x's stride along dim
  uint alpha[2];   // double bits (F64) or float bits (F32, in alpha[0])
  uint size[5];
  int st[15];      // st[5 * k + d]: a, b, and the sorted pair's strides along line dimension d
  uint base[3];    // element offsets of a, b, and the sorted pair (fresh: 0)
  int jst[2];      // strides along dim of b and of the sorted pair
  uint X;          // x.size(dim): a run of a value outside [0, X) is skipped (a device that
                   // checks on the device reports it at its next sync)
} pc;

#ifdef VARIANT_H16
#include "half16.glsl"
float to_float(uint h) { return BF != 0u ? bf16_to_float(h) : half_to_float(h); }
uint from_float(float f) {
  return BF != 0u ? float_to_bf16(f) : float_to_half(f);
}
uint half_at_b(uint e) { return (b[e >> 1] >> ((e & 1u) * 16u)) & 0xffffu; }
#endif

// The sorted value at element k (an int64: low and high words).
uvec2 value_at(int k) { return uvec2(sv[2u * uint(k)], sv[2u * uint(k) + 1u]); }

void main() {
  uint n = pc.lines * pc.m;
  uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  REAL alpha = ALPHA;
  for (uint id = gl_GlobalInvocationID.x; id < n; id += step) {
    uint line = LFAST != 0u ? id % pc.lines : id / pc.m;
    uint p = LFAST != 0u ? id / pc.lines : id - line * pc.m;
    int ea = int(pc.base[0]), eb = int(pc.base[1]), es = int(pc.base[2]);
    uint r = line;
    for (uint d = 0u; d < pc.ndim; d++) {
      uint c = r % pc.size[d];
      r /= pc.size[d];
      ea += int(c) * pc.st[d];
      eb += int(c) * pc.st[5u + d];
      es += int(c) * pc.st[10u + d];
    }
    // values compare as both words: int64s equal in the low word alone are different runs
    uvec2 tv = value_at(es + int(p) * pc.jst[1]);
    if (p > 0u && value_at(es + int(p - 1u) * pc.jst[1]) == tv) continue;  // not a start
    if (tv.y != 0u || tv.x >= pc.X) continue;  // out of range (negative: high word set)
    uint t = tv.x;
    uint e = uint(ea + int(t) * pc.xstep);
#ifdef VARIANT_H16
    uint sh = (e & 1u) * 16u, v = (a[e >> 1] >> sh) & 0xffffu;
    for (uint q = p; q < pc.m; q++) {
      uint k = uint(es + int(q) * pc.jst[1]);
      if (value_at(int(k)) != tv) break;
      precise float prod = alpha * to_float(half_at_b(uint(eb + int(sp[2u * k]) * pc.jst[0])));
      precise float sum = to_float(v) + prod;
      v = from_float(sum);
    }
    atomicAnd(a[e >> 1], ~(0xffffu << sh));
    atomicOr(a[e >> 1], v << sh);
#else
    precise REAL v = a[e];
    for (uint q = p; q < pc.m; q++) {
      uint k = uint(es + int(q) * pc.jst[1]);
      if (value_at(int(k)) != tv) break;
      precise REAL prod = alpha * b[uint(eb + int(sp[2u * k]) * pc.jst[0])];
      v = v + prod;
    }
    a[e] = v;
#endif
  }
}
