#version 450
// variants: GATHER SCATTER SCATTER_F64
//
// index.comp: indexing along one dimension (runtime/src/cpu/index.c is the reference).
//   GATHER   a[e] = b[e_b + index(e) * xstep]: gather and index_select (whose 1-D index has
//            stride 0 along every other dimension). One invocation per output element.
//   SCATTER  a[e_a + index(e) * xstep] = b[e] (or += alpha * b[e]) for scatter and index_put.
//            SEQ == 0: one invocation per source element, accumulating with atomics (a
//            compare-and-swap loop on the containing 32-bit word, so every dtype up to 4
//            bytes works). SEQ == 1: one invocation per line along dim, walking it in order:
//            the last repeated index wins exactly as on the CPU, and float64 accumulation
//            needs no 64-bit atomics (int64 accumulates with SEQ == 0: two 32-bit atomic adds
//            and the carry, see accumulate()). SCATTER_F64 is SCATTER with float64
//            arithmetic (its own module, since it needs the Float64 capability).
// Buffers are 32-bit words: 1- and 2-byte elements are packed (stores use atomics, since the
// neighbours in a word may belong to other invocations), 8-byte elements take two words.
// Index values are int64 (two words): in range exactly when the high word is 0 and the low
// one is below xsize, which also refuses negative values.
// Spec constants: 0 ESIZE (element bytes), 1 ACC (the dtype when accumulating, else ~0),
// 2 SEQ (SCATTER's walk). Dimensions are coalesced by the host, innermost first.
#extension GL_ARB_gpu_shader_int64 : require
#extension GL_GOOGLE_include_directive : require
#ifdef VARIANT_SCATTER_F64
#extension GL_ARB_gpu_shader_fp64 : require
#define SCATTER 1
#endif
#ifdef VARIANT_SCATTER
#define SCATTER 1
#endif

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint ESIZE = 4u;
layout(constant_id = 1) const uint ACC = 0xffffffffu;
layout(constant_id = 2) const uint SEQ = 0u;

layout(std430, set = 0, binding = 0) buffer A { uint a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { uint b[]; };
layout(std430, set = 0, binding = 2) readonly buffer I { uint ix[]; };

layout(push_constant) uniform Params {
  uint n;          // invocations of work: elements, or lines when SEQ == 1
  uint ndim;       // coalesced dimensions, at most 5
  uint m;          // SEQ == 1: the line length along dim
  int xstep;       // stride along dim of the indexed operand (b for GATHER, a for SCATTER)
  uint alpha[2];   // int64 alpha for integers, double bits for float64, float bits for others
  uint size[5];
  int st[15];      // st[5 * k + d]: operand k's stride (a, b, index) along dimension d
  uint base[3];    // element offsets of a, b, index
  uint xsize;      // the indexed operand's size along dim: an index outside [0, xsize) is
                   // skipped (GATHER writes 0), since a device checking its indices on the
                   // device (vk_index_check.c) runs this with the check still pending
  int jst[2];      // SEQ == 1: strides along dim of b and index
} pc;

#define F_F32 0u
#define F_F64 1u
#define F_F16 2u
#define F_BF16 3u
#define F_I8 4u
#define F_U8 5u
#define F_I16 6u
#define F_I32 7u
#define F_I64 8u
#define F_BOOL 9u

#include "half16.glsl"

// The bits of b's element e (low ESIZE*8 bits; two words for 8-byte elements).
uvec2 load_b(uint e) {
  if (ESIZE == 4u) return uvec2(b[e], 0u);
  if (ESIZE == 8u) return uvec2(b[2u * e], b[2u * e + 1u]);
  if (ESIZE == 2u) return uvec2((b[e >> 1] >> ((e & 1u) * 16u)) & 0xffffu, 0u);
  return uvec2((b[e >> 2] >> ((e & 3u) * 8u)) & 0xffu, 0u);
}

void store_a(uint e, uvec2 v) {
  if (ESIZE == 4u) {
    a[e] = v.x;
  } else if (ESIZE == 8u) {
    a[2u * e] = v.x;
    a[2u * e + 1u] = v.y;
  } else {
    uint per = 4u / ESIZE, sh = (e % per) * 8u * ESIZE;
    uint mask = (ESIZE == 2u ? 0xffffu : 0xffu) << sh;
    uint w = e / per;
    atomicAnd(a[w], ~mask);
    atomicOr(a[w], (v.x << sh) & mask);
  }
}

#ifdef SCATTER
// old + alpha * src in dtype ACC, on the low bits of 1-, 2- and 4-byte elements.
uint add32(uint old, uint src) {
  if (ACC == F_F32) return floatBitsToUint(uintBitsToFloat(old) + uintBitsToFloat(pc.alpha[0]) * uintBitsToFloat(src));
  if (ACC == F_F16) return float_to_half(half_to_float(old) + uintBitsToFloat(pc.alpha[0]) * half_to_float(src));
  if (ACC == F_BF16) return float_to_bf16(bf16_to_float(old) + uintBitsToFloat(pc.alpha[0]) * bf16_to_float(src));
  if (ACC == F_BOOL) return (pc.alpha[0] | pc.alpha[1]) == 0u ? old : uint(old != 0u || src != 0u);
  return old + pc.alpha[0] * src;  // integers wrap; the low bits only depend on the low bits
}

uvec2 add64(uvec2 old, uvec2 src) {
#ifdef VARIANT_SCATTER_F64
  double r = packDouble2x32(old) + packDouble2x32(uvec2(pc.alpha[0], pc.alpha[1])) * packDouble2x32(src);
  return unpackDouble2x32(r);
#else
  uint64_t r = packUint2x32(old) + packUint2x32(uvec2(pc.alpha[0], pc.alpha[1])) * packUint2x32(src);
  return unpackUint2x32(r);
#endif
}

// a[e] += alpha * v. With atomics unless `alone` (this invocation owns the element).
void accumulate(uint e, uvec2 v, bool alone) {
#ifndef VARIANT_SCATTER_F64
  if (ACC == F_I64 && !alone) {
    // a 64-bit atomic add from two 32-bit ones: the low word's add returns the old low word,
    // which gives this add's carry into the high word; the sum of every add comes out exact
    // (only the intermediate states are torn, and nothing reads them meanwhile)
    uvec2 d = unpackUint2x32(packUint2x32(uvec2(pc.alpha[0], pc.alpha[1])) * packUint2x32(v));
    uint old = atomicAdd(a[2u * e], d.x);
    atomicAdd(a[2u * e + 1u], d.y + (old > 0xffffffffu - d.x ? 1u : 0u));
    return;
  }
#endif
  if (ESIZE == 8u) {
    uvec2 r = add64(uvec2(a[2u * e], a[2u * e + 1u]), v);
    a[2u * e] = r.x;
    a[2u * e + 1u] = r.y;
    return;
  }
  uint per = 4u / ESIZE, sh = (e % per) * 8u * ESIZE;
  uint emask = ESIZE == 4u ? 0xffffffffu : ESIZE == 2u ? 0xffffu : 0xffu;
  uint w = e / per;
  if (ACC == F_I32 && !alone) {
    atomicAdd(a[w], pc.alpha[0] * v.x);
    return;
  }
  if (alone && ESIZE == 4u) {
    a[w] = add32(a[w], v.x);
    return;
  }
  uint old = a[w];
  for (;;) {
    uint nv = add32((old >> sh) & emask, v.x) & emask;
    uint word = (old & ~(emask << sh)) | (nv << sh);
    uint prev = atomicCompSwap(a[w], old, word);
    if (prev == old) break;
    old = prev;
  }
}
#endif

// The index value at element ei, or -1 when it lies outside [0, xsize).
int index_at(int ei) {
  uint lo = ix[2u * uint(ei)], hi = ix[2u * uint(ei) + 1u];
  return hi == 0u && lo < pc.xsize ? int(lo) : -1;
}

void main() {
  uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint id = gl_GlobalInvocationID.x; id < pc.n; id += step) {
    int ea = int(pc.base[0]), eb = int(pc.base[1]), ei = int(pc.base[2]);
    uint r = id;
    for (uint d = 0u; d < pc.ndim; d++) {
      uint c = r % pc.size[d];
      r /= pc.size[d];
      ea += int(c) * pc.st[d];
      eb += int(c) * pc.st[5u + d];
      ei += int(c) * pc.st[10u + d];
    }
#ifdef SCATTER
    if (SEQ == 1u) {
      for (uint j = 0u; j < pc.m; j++) {
        int i = index_at(ei + int(j) * pc.jst[1]);
        if (i < 0) continue;
        uint e = uint(ea + i * pc.xstep);
        uvec2 v = load_b(uint(eb + int(j) * pc.jst[0]));
        if (ACC == 0xffffffffu) store_a(e, v);
        else accumulate(e, v, ESIZE == 4u);
      }
    } else {
      int i = index_at(ei);
      if (i < 0) continue;
      uint e = uint(ea + i * pc.xstep);
      uvec2 v = load_b(uint(eb));
      if (ACC == 0xffffffffu) store_a(e, v);
      else accumulate(e, v, false);
    }
#else
    int i = index_at(ei);
    store_a(uint(ea), i < 0 ? uvec2(0u) : load_b(uint(eb + i * pc.xstep)));
#endif
  }
}
