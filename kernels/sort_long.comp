#version 450
// variants: BLOCK MERGE TILE WRITE ROWS
//
// sort_long.comp: the stable sort of lines too long for one workgroup's shared memory
// (kernels/sort.comp sorts the others; runtime/src/cpu/sort.c is the reference). Every line is
// sorted as sequences of (key, position) records, 16 bytes each (uvec4: key low, key high,
// position, unused), in two scratch buffers the host ping-pongs between:
//   BLOCK  one workgroup per chunk of CAP elements of a line: a bitonic sort in shared memory,
//          giving sorted runs of CAP records.
//   MERGE  one invocation per record: merges pairs of sorted runs of width W into runs of
//          2W. A record's place in the merged run is its place in its own run plus the number
//          of records of the other run before it (a binary search). Keys are made unique by
//          the position, so the order is total and the merge is stable without tie rules.
//   TILE   MERGE with shared memory, the GPU merge path: each workgroup makes 1024 records of
//          a merged run; a binary search along its first and last output diagonals finds the
//          slices of the two runs that feed them, which are loaded into shared memory, and
//          each invocation merges 4 records from its own diagonal there. (MERGE is kept for
//          chunks below 1024, on devices with less than 12 KiB of shared memory.)
//   WRITE  one invocation per record: values take x's element at the record's position (its
//          exact bits), indices the position.
// And ROWS, on its own: lines of at most 128, 512 / CAP of them per workgroup (CAP: the line's
// power of two), each sorted in its own aligned segment of one bitonic network in shared
// memory, then written as WRITE does.
// Keys order the values as the CPU does: NaN above everything, -0.0 equal to 0.0, and
// complemented when descending (so ties keep their input order in both directions).
// Spec constants: 0 CAP (BLOCK's chunk, a power of two), 1 DT (em_dtype of x), 2 DESC.
#extension GL_ARB_gpu_shader_int64 : require
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint CAP = 2048u;
layout(constant_id = 1) const uint DT = 0u;
layout(constant_id = 2) const uint DESC = 0u;

#if defined(VARIANT_WRITE) || defined(VARIANT_ROWS)
layout(std430, set = 0, binding = 0) buffer Values { uint v[]; };
layout(std430, set = 0, binding = 1) buffer Indices { uint ind[]; };
layout(std430, set = 0, binding = 2) readonly buffer X { uint x[]; };
#ifdef VARIANT_WRITE
layout(std430, set = 0, binding = 3) readonly buffer Src { uvec4 src[]; };
#endif
#elif defined(VARIANT_MERGE) || defined(VARIANT_TILE)
layout(std430, set = 0, binding = 0) buffer Dst { uvec4 dst[]; };
layout(std430, set = 0, binding = 1) readonly buffer Src { uvec4 src[]; };
#else
layout(std430, set = 0, binding = 0) buffer Dst { uvec4 dst[]; };
layout(std430, set = 0, binding = 1) readonly buffer X { uint x[]; };
#endif

layout(push_constant) uniform Params {
  uint n;        // line length
  uint rows;     // lines
  uint total;    // n * rows records
  uint w;        // MERGE: the width of the sorted runs being merged
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

uint esize() {
  if (DT == F_F64 || DT == F_I64) return 8u;
  if (DT == F_F32 || DT == F_I32) return 4u;
  if (DT == F_F16 || DT == F_BF16 || DT == F_I16) return 2u;
  return 1u;
}

// The offsets of line `row` in x (element index) and in values (relative to vbase/ibase).
ivec2 line_offsets(uint row) {
  int xo = int(pc.xbase), vo = 0;
  uint r = row;
  for (uint d = 0u; d < pc.ndim; d++) {
    uint c = r % pc.size[d];
    r /= pc.size[d];
    xo += int(c) * pc.xs[d];
    vo += int(c) * pc.vs[d];
  }
  return ivec2(xo, vo);
}

#if !defined(VARIANT_MERGE) && !defined(VARIANT_TILE)
uvec2 load_x(uint e) {
  uint s = esize();
  if (s == 4u) return uvec2(x[e], 0u);
  if (s == 8u) return uvec2(x[2u * e], x[2u * e + 1u]);
  if (s == 2u) return uvec2((x[e >> 1] >> ((e & 1u) * 16u)) & 0xffffu, 0u);
  return uvec2((x[e >> 2] >> ((e & 3u) * 8u)) & 0xffu, 0u);
}
#endif

#if defined(VARIANT_BLOCK) || defined(VARIANT_ROWS)
#include "half16.glsl"

// Order-preserving keys (as kernels/sort.comp).
const uint64_t SIGN64 = 0x8000000000000000UL;
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
  else if (DT == F_I16) k = uint64_t(int64_t(bitfieldExtract(int(b.x), 0, 16))) ^ SIGN64;
  else if (DT == F_I8) k = uint64_t(int64_t(bitfieldExtract(int(b.x), 0, 8))) ^ SIGN64;
  else k = uint64_t(b.x);  // uint8, bool
  return DESC != 0u ? ~k : k;
}

#ifdef VARIANT_ROWS
const uint SLOTS = 512u;
#else
const uint SLOTS = CAP;
#endif
shared uint64_t skey[SLOTS];
shared uint sidx[SLOTS];

bool after(uint a, uint b) {
  return skey[a] > skey[b] || (skey[a] == skey[b] && sidx[a] > sidx[b]);
}
#endif

#ifdef VARIANT_BLOCK
void main() {
  uint lid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
  uint chunks = (pc.n + CAP - 1u) / CAP;
  uint tiles = chunks * pc.rows;
  for (uint tile = gl_WorkGroupID.x; tile < tiles; tile += gl_NumWorkGroups.x) {
    uint row = tile / chunks, start = (tile % chunks) * CAP;
    uint len = min(CAP, pc.n - start);
    uint p2 = 2u;
    while (p2 < len) p2 <<= 1;
    int xo = line_offsets(row).x;
    for (uint t = lid; t < p2; t += wg) {
      if (t < len) {
        skey[t] = key_of(load_x(uint(xo + int(start + t) * pc.xstep)));
        sidx[t] = start + t;
      } else {  // padding sorts after every record (NaN's key ties, the position decides)
        skey[t] = 0xffffffffffffffffUL;
        sidx[t] = 0xffffffffu;
      }
    }
    barrier();
    for (uint k = 2u; k <= p2; k <<= 1) {
      for (uint j = k >> 1; j > 0u; j >>= 1) {
        for (uint t = lid; t < p2 / 2u; t += wg) {
          uint i = (t / j) * 2u * j + (t % j), l = i + j;
          if (after(i, l) == ((i & k) == 0u)) {
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
    uint first = row * pc.n + start;
    for (uint t = lid; t < len; t += wg) {
      uvec2 k = unpackUint2x32(skey[t]);
      dst[first + t] = uvec4(k.x, k.y, sidx[t], 0u);
    }
    barrier();  // the shared arrays are reused by the next tile
  }
}
#endif

#if defined(VARIANT_MERGE) || defined(VARIANT_TILE)
// Record a strictly before record b: keys (high, low), then positions.
bool before(uvec4 a, uvec4 b) {
  if (a.y != b.y) return a.y < b.y;
  if (a.x != b.x) return a.x < b.x;
  return a.z < b.z;
}
#endif

#ifdef VARIANT_MERGE
void main() {
  uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint e = gl_GlobalInvocationID.x; e < pc.total; e += step) {
    uint row = e / pc.n, p = e - row * pc.n, line = row * pc.n;
    uint r = p / pc.w, base = (r & ~1u) * pc.w;
    uvec4 me = src[e];
    // the other run of the pair: after this one (r even) or before it (r odd)
    uint lo = (r & 1u) == 0u ? min(base + pc.w, pc.n) : base;
    uint hi = (r & 1u) == 0u ? min(base + 2u * pc.w, pc.n) : base + pc.w;
    uint own = p - r * pc.w;
    // records of the other run before this one: the first not before it
    uint a = lo, b = hi;
    while (a < b) {
      uint mid = (a + b) >> 1;
      if (before(src[line + mid], me)) a = mid + 1u;
      else b = mid;
    }
    dst[line + base + own + (a - lo)] = me;
  }
}
#endif

#ifdef VARIANT_TILE
const uint T = 1024u, E = 4u;
shared uvec4 s[T];
shared uint split[2];

// How many of the first d records of the merge of A = src[a, a + la) and B = src[b, b + lb)
// come from A (the merge path's crossing of diagonal d).
uint path_global(uint a, uint la, uint b, uint lb, uint d) {
  uint lo = d > lb ? d - lb : 0u, hi = min(d, la);
  while (lo < hi) {
    uint mid = (lo + hi) >> 1;
    if (before(src[a + mid], src[b + d - 1u - mid])) lo = mid + 1u;
    else hi = mid;
  }
  return lo;
}

// The same in shared memory: A = s[0, la), B = s[la, la + lb).
uint path_shared(uint la, uint lb, uint d) {
  uint lo = d > lb ? d - lb : 0u, hi = min(d, la);
  while (lo < hi) {
    uint mid = (lo + hi) >> 1;
    if (before(s[mid], s[la + d - 1u - mid])) lo = mid + 1u;
    else hi = mid;
  }
  return lo;
}

void main() {
  uint lid = gl_LocalInvocationID.x;
  uint per_row = (pc.n + T - 1u) / T, tiles = per_row * pc.rows;
  for (uint tile = gl_WorkGroupID.x; tile < tiles; tile += gl_NumWorkGroups.x) {
    uint row = tile / per_row, o0 = (tile - row * per_row) * T, line = row * pc.n;
    uint o1 = min(o0 + T, pc.n);
    // the pair of runs this tile lies in (2w is a multiple of T, so it lies in one)
    uint base = (o0 / (2u * pc.w)) * 2u * pc.w;
    uint la = min(pc.w, pc.n - base), lb = pc.n - base > pc.w ? min(pc.w, pc.n - base - pc.w) : 0u;
    uint a = line + base, b = a + la;
    if (lid < 2u) split[lid] = path_global(a, la, b, lb, (lid == 0u ? o0 : o1) - base);
    barrier();
    uint a0 = split[0], a1 = split[1];
    uint b0 = o0 - base - a0, b1 = o1 - base - a1;
    uint na = a1 - a0, nb = b1 - b0;
    for (uint t = lid; t < na + nb; t += gl_WorkGroupSize.x)
      s[t] = t < na ? src[a + a0 + t] : src[b + b0 + (t - na)];
    barrier();
    uint d = lid * E;
    if (d < na + nb) {
      uint i = path_shared(na, nb, d), j = d - i;
      uint end = min(d + E, na + nb);
      for (uint k = d; k < end; k++) {
        bool take_a = j >= nb || (i < na && before(s[i], s[na + j]));
        dst[line + o0 + k] = take_a ? s[i] : s[na + j];
        if (take_a) i++;
        else j++;
      }
    }
    barrier();  // s and split are rewritten by the next tile
  }
}
#endif

#if defined(VARIANT_WRITE) || defined(VARIANT_ROWS)
void store_v(uint e, uvec2 b) {
  uint s = esize();
  if (s == 4u) {
    v[e] = b.x;
  } else if (s == 8u) {
    v[2u * e] = b.x;
    v[2u * e + 1u] = b.y;
  } else {  // neighbours in the word belong to other invocations
    uint per = 4u / s, sh = (e % per) * 8u * s;
    uint mask = (s == 2u ? 0xffffu : 0xffu) << sh;
    atomicAnd(v[e / per], ~mask);
    atomicOr(v[e / per], (b.x << sh) & mask);
  }
}
#endif

#ifdef VARIANT_WRITE

void main() {
  uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint e = gl_GlobalInvocationID.x; e < pc.total; e += step) {
    uint row = e / pc.n, t = e - row * pc.n;
    ivec2 o = line_offsets(row);
    uint pos = src[e].z;
    int ve = o.y + int(t) * pc.vstep;
    store_v(uint(int(pc.vbase) + ve), load_x(uint(o.x + int(pos) * pc.xstep)));
    uint ie = uint(int(pc.ibase) + ve);
    ind[2u * ie] = pos;
    ind[2u * ie + 1u] = 0u;
  }
}
#endif

#ifdef VARIANT_ROWS
void main() {
  uint lid = gl_LocalInvocationID.x;
  uint per = SLOTS / CAP, groups = (pc.rows + per - 1u) / per;
  for (uint g = gl_WorkGroupID.x; g < groups; g += gl_NumWorkGroups.x) {
    for (uint e = lid; e < SLOTS; e += 256u) {
      uint row = g * per + e / CAP, t = e % CAP;
      if (row < pc.rows && t < pc.n) {
        skey[e] = key_of(load_x(uint(line_offsets(row).x + int(t) * pc.xstep)));
        sidx[e] = t;
      } else {  // padding sorts after every element of its segment
        skey[e] = 0xffffffffffffffffUL;
        sidx[e] = 0xffffffffu;
      }
    }
    barrier();
    // one compare-exchange per invocation per step: SLOTS / 2 == 256 pairs; pairs never cross
    // a segment, and the last merge (k == CAP) sorts every segment ascending
    for (uint k = 2u; k <= CAP; k <<= 1) {
      for (uint j = k >> 1; j > 0u; j >>= 1) {
        uint i = (lid / j) * 2u * j + (lid % j), l = i + j;
        if (after(i, l) == (k == CAP || (i & k) == 0u)) {
          uint64_t tk = skey[i];
          skey[i] = skey[l];
          skey[l] = tk;
          uint ti = sidx[i];
          sidx[i] = sidx[l];
          sidx[l] = ti;
        }
        barrier();
      }
    }
    for (uint e = lid; e < SLOTS; e += 256u) {
      uint row = g * per + e / CAP, t = e % CAP;
      if (row >= pc.rows || t >= pc.n) continue;
      ivec2 o = line_offsets(row);
      uint pos = sidx[e];
      int ve = o.y + int(t) * pc.vstep;
      store_v(uint(int(pc.vbase) + ve), load_x(uint(o.x + int(pos) * pc.xstep)));
      uint ie = uint(int(pc.ibase) + ve);
      ind[2u * ie] = pos;
      ind[2u * ie + 1u] = 0u;
    }
    barrier();  // the shared arrays are reused by the next group of lines
  }
}
#endif
