#version 450
//
// sort.comp: a stable sort of every line along one dimension (runtime/src/cpu/sort.c is the
// reference): one workgroup per line, a bitonic sort in shared memory of (key, position)
// pairs. Keys are 64-bit unsigned integers ordered as the values: NaN above everything, -0.0
// equal to 0.0, and complemented when descending; the position breaks ties, so the order is
// total and the sort is stable in both directions. Values are then copied from x at the sorted
// positions (their exact bits), with the int64 positions.
// Spec constants: 0 CAP (power of two >= the line length; the shared arrays' size),
// 1 DT (em_dtype of x), 2 DESC.
#extension GL_ARB_gpu_shader_int64 : require
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint CAP = 2048u;
layout(constant_id = 1) const uint DT = 0u;
layout(constant_id = 2) const uint DESC = 0u;

layout(std430, set = 0, binding = 0) buffer Values { uint v[]; };
layout(std430, set = 0, binding = 1) buffer Indices { uint ind[]; };
layout(std430, set = 0, binding = 2) readonly buffer X { uint x[]; };

layout(push_constant) uniform Params {
  uint n;        // line length
  uint p2;       // the power of two the bitonic network sorts (n <= p2 <= CAP)
  uint rows;     // lines
  uint ndim;     // the other dimensions, at most 5 (innermost first)
  int xstep;     // x's stride along dim
  int vstep;     // values' and indices' stride along dim (the same layout)
  uint size[5];
  int xs[5];
  int vs[5];
  uint xbase, vbase, ibase;
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

shared uint64_t skey[CAP];
shared uint sidx[CAP];

uint esize() {
  if (DT == F_F64 || DT == F_I64) return 8u;
  if (DT == F_F32 || DT == F_I32) return 4u;
  if (DT == F_F16 || DT == F_BF16 || DT == F_I16) return 2u;
  return 1u;
}

uvec2 load_x(uint e) {
  uint s = esize();
  if (s == 4u) return uvec2(x[e], 0u);
  if (s == 8u) return uvec2(x[2u * e], x[2u * e + 1u]);
  if (s == 2u) return uvec2((x[e >> 1] >> ((e & 1u) * 16u)) & 0xffffu, 0u);
  return uvec2((x[e >> 2] >> ((e & 3u) * 8u)) & 0xffu, 0u);
}

#include "half16.glsl"

// Order-preserving keys.
uint64_t f32_key(uint u) {
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0xffffffffffffffffUL;  // NaN: the largest
  if (u == 0x80000000u) u = 0u;                                          // -0.0 == 0.0
  return uint64_t((u & 0x80000000u) != 0u ? ~u : u | 0x80000000u);
}

uint64_t key_of(uvec2 b) {
  uint64_t k;
  if (DT == F_F32) k = f32_key(b.x);
  else if (DT == F_F16) k = f32_key(floatBitsToUint(half_to_float(b.x)));
  else if (DT == F_BF16) k = f32_key(b.x << 16);
  else if (DT == F_F64) {
    uint64_t u = packUint2x32(b);
    if ((u & 0x7fffffffffffffffUL) > 0x7ff0000000000000UL) k = 0xffffffffffffffffUL;
    else {
      if (u == 0x8000000000000000UL) u = 0UL;
      k = (u & 0x8000000000000000UL) != 0UL ? ~u : u | 0x8000000000000000UL;
    }
  } else if (DT == F_I64) k = packUint2x32(b) ^ 0x8000000000000000UL;
  else if (DT == F_I32) k = uint64_t(int64_t(int(b.x))) ^ 0x8000000000000000UL;
  else if (DT == F_I16) k = uint64_t(int64_t(bitfieldExtract(int(b.x), 0, 16))) ^ 0x8000000000000000UL;
  else if (DT == F_I8) k = uint64_t(int64_t(bitfieldExtract(int(b.x), 0, 8))) ^ 0x8000000000000000UL;
  else k = uint64_t(b.x);  // uint8, bool
  // Descending: the mirror order (NaN first). Keys stay below the padding's maximum key
  // except a NaN's; the position breaks that tie, as padding comes after every element.
  return DESC != 0u ? ~k : k;
}

void store_v(uint e, uvec2 b) {
  uint s = esize();
  if (s == 4u) {
    v[e] = b.x;
  } else if (s == 8u) {
    v[2u * e] = b.x;
    v[2u * e + 1u] = b.y;
  } else {
    uint per = 4u / s, sh = (e % per) * 8u * s;
    uint mask = (s == 2u ? 0xffffu : 0xffu) << sh;
    atomicAnd(v[e / per], ~mask);
    atomicOr(v[e / per], (b.x << sh) & mask);
  }
}

// (key, position) a strictly after b.
bool after(uint a, uint b) {
  return skey[a] > skey[b] || (skey[a] == skey[b] && sidx[a] > sidx[b]);
}

void main() {
  uint lid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
  for (uint row = gl_WorkGroupID.x; row < pc.rows; row += gl_NumWorkGroups.x) {
    int xo = int(pc.xbase), vo = 0;
    uint r = row;
    for (uint d = 0u; d < pc.ndim; d++) {
      uint c = r % pc.size[d];
      r /= pc.size[d];
      xo += int(c) * pc.xs[d];
      vo += int(c) * pc.vs[d];
    }
    for (uint t = lid; t < pc.p2; t += wg) {
      if (t < pc.n) {
        skey[t] = key_of(load_x(uint(xo + int(t) * pc.xstep)));
        sidx[t] = t;
      } else {
        skey[t] = 0xffffffffffffffffUL;
        sidx[t] = 0xffffffffu;
      }
    }
    barrier();
    for (uint k = 2u; k <= pc.p2; k <<= 1) {
      for (uint j = k >> 1; j > 0u; j >>= 1) {
        for (uint t = lid; t < pc.p2 / 2u; t += wg) {
          uint i = (t / j) * 2u * j + (t % j), l = i + j;
          bool up = (i & k) == 0u;
          if (after(i, l) == up) {
            uint64_t tk = skey[i];
            skey[i] = skey[l];
            skey[l] = tk;
            uint ti = sidx[i];
            sidx[i] = sidx[l];
            sidx[l] = ti;
          }
        }
        barrier();
      }
    }
    for (uint t = lid; t < pc.n; t += wg) {
      uint src = sidx[t];
      int e = vo + int(t) * pc.vstep;
      store_v(uint(int(pc.vbase) + e), load_x(uint(xo + int(src) * pc.xstep)));
      uint ie = uint(int(pc.ibase) + e);
      ind[2u * ie] = src;
      ind[2u * ie + 1u] = 0u;
    }
    barrier();  // the shared arrays are reused by the next line
  }
}
