#version 450
// variants: MARK WRITE
//
// index_last.comp: scatter and index_put without accumulation, in parallel, with the CPU's
// rule that the last of repeated indices wins (runtime/src/cpu/index.c walks the source in
// order). Every source element (line l, position j along dim) targets x's element at index
// value i along dim in the same line:
//   MARK   win[target] = max(win[target], j + 1) with an atomic (win starts zeroed), so it
//          ends holding the last j that targets each element;
//   WRITE  a[target] = b[element] only for the winners: one write per target, no race.
// index_put's index is the same for every line, so there the target is i alone (win has
// x.size(dim) entries, MARK runs over one line); scatter's is line * X + i.
// The walk: line dimensions coalesced by the host (at most 5, innermost first) and j along
// dim; the thread index runs fastest along j when JFAST (dim innermost in the source).
// Buffers are 32-bit words: 1- and 2-byte elements are packed (stores use atomics, since the
// neighbours in a word may be other invocations' targets), 8-byte elements take two words.
// Spec constants: 0 ESIZE (element bytes), 1 PUT (index_put: target i alone), 2 JFAST.
#extension GL_ARB_gpu_shader_int64 : require

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint ESIZE = 4u;
layout(constant_id = 1) const uint PUT = 0u;
layout(constant_id = 2) const uint JFAST = 0u;

#ifdef VARIANT_MARK
layout(std430, set = 0, binding = 0) buffer W { uint win[]; };
layout(std430, set = 0, binding = 1) readonly buffer I { uint ix[]; };
#else
layout(std430, set = 0, binding = 0) buffer A { uint a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { uint b[]; };
layout(std430, set = 0, binding = 2) readonly buffer I { uint ix[]; };
layout(std430, set = 0, binding = 3) readonly buffer W { uint win[]; };
#endif

layout(push_constant) uniform Params {
  uint lines;      // lines of the walk (MARK of index_put: 1)
  uint m;          // positions along dim in the source
  uint ndim;       // coalesced line dimensions
  uint X;          // x.size(dim): targets per line
  int xstep;       // x's stride along dim
  uint size[5];
  int st[15];      // st[5 * k + d]: operand k's stride (a, b, index) along line dimension d
  uint base[3];    // element offsets of a, b, index
  int jst[2];      // strides along dim of b and index
} pc;

void main() {
  uint n = pc.lines * pc.m;
  uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint id = gl_GlobalInvocationID.x; id < n; id += step) {
    uint line = JFAST != 0u ? id / pc.m : id % pc.lines;
    uint j = JFAST != 0u ? id - line * pc.m : id / pc.lines;
    int ea = int(pc.base[0]), eb = int(pc.base[1]), ei = int(pc.base[2]);
    uint r = line;
    for (uint d = 0u; d < pc.ndim; d++) {
      uint c = r % pc.size[d];
      r /= pc.size[d];
      ea += int(c) * pc.st[d];
      eb += int(c) * pc.st[5u + d];
      ei += int(c) * pc.st[10u + d];
    }
    uint k = 2u * uint(ei + int(j) * pc.jst[1]);
    // an index outside [0, X) is skipped by both passes (the int64's high word set, or the low
    // one too large): a device that checks on the device reports it at its next sync
    if (ix[k + 1u] != 0u || ix[k] >= pc.X) continue;
    int i = int(ix[k]);
    uint target = (PUT != 0u ? 0u : line * pc.X) + uint(i);
#ifdef VARIANT_MARK
    atomicMax(win[target], j + 1u);
#else
    if (win[target] != j + 1u) continue;  // a later position along dim writes this element
    uint e = uint(ea + i * pc.xstep), s = uint(eb + int(j) * pc.jst[0]);
    if (ESIZE == 4u) {
      a[e] = b[s];
    } else if (ESIZE == 8u) {
      a[2u * e] = b[2u * s];
      a[2u * e + 1u] = b[2u * s + 1u];
    } else {
      uint per = 4u / ESIZE, emask = ESIZE == 2u ? 0xffffu : 0xffu;
      uint v = (b[s / per] >> ((s % per) * 8u * ESIZE)) & emask;
      uint sh = (e % per) * 8u * ESIZE;
      atomicAnd(a[e / per], ~(emask << sh));
      atomicOr(a[e / per], v << sh);
    }
#endif
  }
}
