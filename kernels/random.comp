#version 450
// variants: D F
//
// random.comp: the `random` slot. Fills a contiguous tensor from Ember's Philox-4x32-10 stream,
// exactly as runtime/src/cpu/random.c does (the layout is in runtime/src/random.h): element i
// takes words [w i, w i + w) of the stream, word j being lane j % 4 of block offset + j / 4,
// with w = 2 for integers and float64 uniform/normal values, else 1. One invocation computes
// one Philox block and stores the 4 / w elements it yields, in a grid-stride loop.
//
// From words to values (the CPU's constructions, in the CPU's precision):
//   uniform    the top `digits` bits of a word, or 53 bits of a word pair, times 2^-digits;
//              a + (b - a) u in double, capped below b (the host computes the cap)
//   normal     Box-Muller on (u1, u2), u1 in (0, 1]: in double (math64.glsl's log, sin, cos)
//   bernoulli  word * 2^-32 < p, done in integers: word < ceil(p 2^32) (computed on the host)
//   int        low + the high 64 bits of (word pair) * (high - low), in integers
// Variant D computes uniform and normal values in double (bit-identical with the CPU for
// uniform; normal within a few ulp, the transcendentals differ). Variant F is for devices
// without float64: uniform and normal in float (float32 and 16-bit outputs only), bernoulli and
// int exactly as in D.
// Specialization constants: 0 the em_random_kind, 1 the output's em_dtype.
#extension GL_ARB_gpu_shader_int64 : require
#extension GL_GOOGLE_include_directive : require
#ifdef VARIANT_D
#extension GL_ARB_gpu_shader_fp64 : require
#include "math64.glsl"
#else
#include "math.glsl"
#endif
#include "half16.glsl"

layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) buffer Out { uint w[]; } o;
// The same buffer as 128-bit words: a block's 16 bytes (4 values of 4 bytes, 2 of 8) are one store when
// it is aligned (coalesced 16-byte stores on a GPU).
layout(std430, set = 0, binding = 0) buffer Out4 { uvec4 w[]; } o4;

layout(constant_id = 0) const uint KIND = 0u;
layout(constant_id = 1) const uint DT = 0u;

#define K_UNIFORM 0u
#define K_NORMAL 1u
#define K_BERNOULLI 2u
#define K_INT 3u
#define D_F32 0u
#define D_F64 1u
#define D_F16 2u
#define D_BF16 3u
#define D_I8 4u
#define D_U8 5u
#define D_I16 6u
#define D_I32 7u
#define D_I64 8u
#define D_BOOL 9u

layout(push_constant) uniform Params {
  uint n;          // elements
  uint nblocks;    // Philox blocks they take
  uint base;       // element offset of the output in its buffer
  uint seed_lo, seed_hi, ctr_lo, ctr_hi;
  uint i0, i1, i2; // bernoulli: threshold (i0 | i1 << 32); int: low (i0 | i1 << 32), range
  uint i3;         //   (i2 | i3 << 32)
  float fa, fr, fcap;  // variant F: a, b - a (or std), the uniform cap
#ifdef VARIANT_D
  double a, r, cap;    // variant D: the same in double
#endif
} p;

uvec4 philox(uvec2 ctr, uvec2 key) {
  uint c0 = ctr.x, c1 = ctr.y, c2 = 0u, c3 = 0u, k0 = key.x, k1 = key.y;
  for (int round = 0; round < 10; round++) {
    uint hi0, lo0, hi1, lo1;
    umulExtended(0xD2511F53u, c0, hi0, lo0);
    umulExtended(0xCD9E8D57u, c2, hi1, lo1);
    uint n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c1 = lo1;
    c3 = lo0;
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return uvec4(c0, c1, c2, c3);
}

uint64_t pair64(uint lo, uint hi) { return packUint2x32(uvec2(lo, hi)); }

// The high 64 bits of a * b.
uint64_t mulhi64(uint64_t a, uint64_t b) {
  uint64_t a0 = a & 0xffffffffUL, a1 = a >> 32, b0 = b & 0xffffffffUL, b1 = b >> 32;
  uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
  uint64_t mid = (p00 >> 32) + (p01 & 0xffffffffUL) + (p10 & 0xffffffffUL);
  return p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
}

// Written with ifs: glslang emits invalid SPIR-V for ?: over specialization constants.
bool two_words() {
  if (KIND == K_INT) return true;
  if (DT == D_F64 && (KIND == K_UNIFORM || KIND == K_NORMAL)) return true;
  return false;
}

uint digits() {
  if (DT == D_F16) return 11u;
  if (DT == D_BF16) return 8u;
  return 24u;
}

uint dt_size() {
  if (DT == D_F64 || DT == D_I64) return 8u;
  if (DT == D_F32 || DT == D_I32) return 4u;
  if (DT == D_F16 || DT == D_BF16 || DT == D_I16) return 2u;
  return 1u;
}

// The float64 bits of an integer of magnitude at most 2^53 (exact), without float64 math.
uvec2 i64_to_f64_bits(int64_t v) {
  if (v == 0L) return uvec2(0u);
  uint sign = v < 0L ? 0x80000000u : 0u;
  uint64_t a = uint64_t(v < 0L ? -v : v);
  uint hi = uint(a >> 32), lo = uint(a);
  int msb = hi != 0u ? 32 + findMSB(hi) : findMSB(lo);
  uint64_t m = msb <= 52 ? a << uint(52 - msb) : a >> uint(msb - 52);
  uvec2 mw = unpackUint2x32(m & 0xfffffffffffffUL);
  return uvec2(mw.x, sign | (uint(1023 + msb) << 20) | mw.y);
}

// The bits of an integer value (int kind, bernoulli) stored as the output dtype, as the CPU's
// em_st_* of the (exact) double value would store it.
uvec2 int_bits(int64_t v) {
  if (DT == D_I64) return unpackUint2x32(uint64_t(v));
  if (DT == D_BOOL) return uvec2(v != 0L ? 1u : 0u, 0u);
  if (DT == D_F64) return i64_to_f64_bits(v);
  if (DT == D_F32) return uvec2(floatBitsToUint(float(v)), 0u);  // |v| <= 2^24: exact
  if (DT == D_F16) return uvec2(float_to_half(float(v)), 0u);
  if (DT == D_BF16) return uvec2(float_to_bf16(float(v)), 0u);
  return uvec2(uint(v), 0u);  // the store keeps the low 8, 16 or 32 bits
}

uvec2 float_bits(float f) {
  if (DT == D_F16) return uvec2(float_to_half(f), 0u);
  if (DT == D_BF16) return uvec2(float_to_bf16(f), 0u);
  return uvec2(floatBitsToUint(f), 0u);
}

#ifdef VARIANT_D
// double -> float rounded to nearest even whatever the driver's conversion does (C's cast
// rounds to nearest; Vulkan leaves OpFConvert's rounding to the implementation).
float d2f_pos(double d) {
  float f = float(d);
  double fd = double(f);
  if (fd == d || isinf(f) || isnan(d)) return f;
  uint u = floatBitsToUint(f);
  float g = uintBitsToFloat(fd < d ? u + 1u : u - 1u);
  double dg = abs(double(g) - d), df = abs(fd - d);
  if (dg < df) return g;
  if (df < dg) return f;
  return (floatBitsToUint(f) & 1u) == 0u ? f : g;
}
float d2f(double d) { return d < 0.0lf ? -d2f_pos(-d) : d2f_pos(d); }

uvec2 double_bits(double v) {
  if (DT == D_F64) return unpackDouble2x32(v);
  return float_bits(d2f(v));
}
#define VAL double
#define VAL_BITS double_bits
#else
#define VAL float
#define VAL_BITS float_bits
#endif

// The bits of the up to 4 elements block `blk` of the request yields.
void block_bits(uint blk, out uvec2 v[4]) {
  uint lo = p.ctr_lo + blk;
  uvec4 x = philox(uvec2(lo, p.ctr_hi + (lo < blk ? 1u : 0u)), uvec2(p.seed_lo, p.seed_hi));
  bool two = two_words();
  if (KIND == K_BERNOULLI) {
    uint64_t t = pair64(p.i0, p.i1);
    for (int k = 0; k < 4; k++) v[k] = int_bits(uint64_t(x[k]) < t ? 1L : 0L);
  } else if (KIND == K_INT) {
    int64_t low = int64_t(pair64(p.i0, p.i1));
    uint64_t range = pair64(p.i2, p.i3);
    for (int k = 0; k < 2; k++)
      v[k] = int_bits(low + int64_t(mulhi64(pair64(x[2 * k], x[2 * k + 1]), range)));
  } else if (KIND == K_UNIFORM) {
#ifdef VARIANT_D
    double a = p.a, r = p.r, cap = p.cap;
#else
    float a = p.fa, r = p.fr, cap = p.fcap;
#endif
    if (two) {
      for (int k = 0; k < 2; k++) {
        precise VAL u = VAL(pair64(x[2 * k], x[2 * k + 1]) >> 11) * VAL(1.1102230246251565e-16);
        precise VAL s = a + r * u;  // no fused multiply-add: the CPU rounds twice
        v[k] = VAL_BITS(s > cap ? cap : s);
      }
    } else {
      uint dg = digits();
      VAL scale = VAL(uintBitsToFloat((127u - dg) << 23));  // 2^-digits
      for (int k = 0; k < 4; k++) {
        precise VAL u = VAL(x[k] >> (32u - dg)) * scale;
        precise VAL s = a + r * u;
        v[k] = VAL_BITS(s > cap ? cap : s);
      }
    }
  } else {  // normal: mean a, std r
#ifdef VARIANT_D
    double mean = p.a, sd = p.r;
    const double tau = 6.283185307179586lf, two53 = 1.1102230246251565e-16lf;
    dvec2 u[2];
    if (two) {
      u[0] = dvec2(double((pair64(x[0], x[1]) >> 11) + 1UL) * two53,
                   double(pair64(x[2], x[3]) >> 11) * two53);
    } else {
      u[0] = dvec2((double(x[0]) + 1.0lf) * 2.3283064365386963e-10lf, double(x[1]) * 2.3283064365386963e-10lf);
      u[1] = dvec2((double(x[2]) + 1.0lf) * 2.3283064365386963e-10lf, double(x[3]) * 2.3283064365386963e-10lf);
    }
    for (int k = 0; k < (two ? 1 : 2); k++) {
      precise double rad = sqrt(-2.0lf * log_d(u[k].x));
      precise double t = tau * u[k].y;
      precise double c = mean + sd * rad * cos_d(t);
      precise double s = mean + sd * rad * sin_d(t);
      v[2 * k] = double_bits(c);
      v[2 * k + 1] = double_bits(s);
    }
#else
    // float Box-Muller (float64 outputs need variant D)
    float mean = p.fa, sd = p.fr;
    for (int k = 0; k < 4; k += 2) {
      // log(u1) near u1 = 1 as log1p(-(1 - u1)), 1 - u1 = ~x 2^-32 taken from the integer, so
      // the rounding of x to float's 24 bits does not swamp the small logarithm
      float u1 = (float(x[k]) + 1.0) * 2.3283064365386963e-10, u2 = float(x[k + 1]) * 2.3283064365386963e-10;
      float lg = u1 > 0.5 ? log1p_f(-float(~x[k]) * 2.3283064365386963e-10) : log_f(u1);
      float rad = sqrt(-2.0 * lg), t = 6.283185307179586 * u2;
      v[k] = float_bits(mean + sd * rad * cos(t));
      v[k + 1] = float_bits(mean + sd * rad * sin(t));
    }
#endif
  }
}

// Sub-word stores: whole words are written plainly; a word shared with another block's (or
// another tensor's) elements is merged with atomics, touching only this block's bits.
void flush(uint wi, uint word, uint valid) {
  if (valid == 0xffffffffu) {
    o.w[wi] = word;
  } else if (valid != 0u) {
    atomicAnd(o.w[wi], ~valid);
    atomicOr(o.w[wi], word);
  }
}

void main() {
  uint per = two_words() ? 2u : 4u;
  uint size = dt_size();
  uint step = gl_NumWorkGroups.x * 256u;
  for (uint blk = gl_GlobalInvocationID.x; blk < p.nblocks; blk += step) {
    uvec2 v[4];
    block_bits(blk, v);
    uint i0 = blk * per, count = min(per, p.n - i0);
    uint first_word = (p.base + i0) * (size / 4u);  // for 4- and 8-byte elements
    if (size * per == 16u && count == per && (first_word & 3u) == 0u) {
      o4.w[first_word >> 2] = size == 4u ? uvec4(v[0].x, v[1].x, v[2].x, v[3].x)
                                         : uvec4(v[0].x, v[0].y, v[1].x, v[1].y);
    } else if (size == 4u) {
      for (uint k = 0u; k < count; k++) o.w[p.base + i0 + k] = v[k].x;
    } else if (size == 8u) {
      for (uint k = 0u; k < count; k++) {
        uint e = 2u * (p.base + i0 + k);
        o.w[e] = v[k].x;
        o.w[e + 1u] = v[k].y;
      }
    } else {
      uint per_word = 4u / size, bits = 8u * size, mask = size == 1u ? 0xffu : 0xffffu;
      uint cur = 0xffffffffu, word = 0u, valid = 0u;
      for (uint k = 0u; k < count; k++) {
        uint e = p.base + i0 + k, wi = e / per_word, sh = (e % per_word) * bits;
        if (wi != cur) {
          if (cur != 0xffffffffu) flush(cur, word, valid);
          cur = wi;
          word = 0u;
          valid = 0u;
        }
        word |= (v[k].x & mask) << sh;
        valid |= mask << sh;
      }
      if (cur != 0xffffffffu) flush(cur, word, valid);
    }
    if (p.nblocks - blk <= step) break;
  }
}
