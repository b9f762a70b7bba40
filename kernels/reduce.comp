#version 450
// reduce.comp: reductions of lines (reduce.glsl): sum, prod, max, min, all, any, argmax and
// argmin, with an elementwise transform before the fold (abs, square, |x|^p, x != 0, squared
// deviation from a per-line centre, exp(x - centre)) and a finishing step after it (divide,
// sqrt, root, log-sum-exp), as runtime/src/cpu/reduce.c's recipes. The host composes var and
// std (a mean, then squared deviations), norms and logsumexp (a max, then exp sums) from them.
//
// Operands: 0 out (values), 1 x, 2 the centres (accumulator format, one per line, line
// order), 3 the indices out (arg; int64), 4 the indices in (arg, second pass: uint32).
// Long lines with few outputs are cut into chunks (grid z); each chunk writes its raw
// accumulator (finish NONE, out format = the accumulator's) to a [chunks, lines] partial
// tensor, which a second launch reduces with the same fold (and the indices of operand 4).
//
// Max and min propagate NaN; argmax and argmin keep the first occurrence, NaN counting as
// both the largest and the smallest value (runtime/src/cpu/arg_reduce.c).
//
// variants: F32 F64 I64
#extension GL_GOOGLE_include_directive : require
#include "reduce.glsl"

// constant_id 0: fold | transform << 4 | finish << 8 | flags; constant_id 1: in | out << 4.
layout(constant_id = 0) const uint OPC = 0u;
layout(constant_id = 1) const uint FMTS = 0u;
const uint FOLD = OPC & 15u, XFORM = (OPC >> 4) & 15u, FINISH = (OPC >> 8) & 15u;
const bool IDX_IN = (OPC & 0x1000u) != 0u;   // arg indices come from operand 4
const bool PARTIAL = (OPC & 0x2000u) != 0u;  // a chunk's raw result (uint32 arg indices)
// float32 lines of contiguous, 16-byte aligned elements (the host checks): 128-bit loads
const bool VEC4 = (OPC & 0x4000u) != 0u;
// x minus the line's first element before the transform: var and std take the mean and the
// squared deviations of the shifted line (exactly 0 for a constant line, as on the CPU)
const bool SHIFT0 = (OPC & 0x8000u) != 0u;
const uint IN_FMT = FMTS & 15u, OUT_FMT = (FMTS >> 4) & 15u;

#define A_SUM 0u
#define A_PROD 1u
#define A_MAX 2u
#define A_MIN 3u
#define A_ALL 4u
#define A_ANY 5u
#define A_ARGMAX 6u
#define A_ARGMIN 7u
#define T_NONE 0u
#define T_ABS 1u
#define T_SQUARE 2u
#define T_POWABS 3u
#define T_NONZERO 4u
#define T_SQDEV 5u
#define T_EXPSHIFT 6u
#define N_NONE 0u
#define N_DIV 1u
#define N_DIVSQRT 2u
#define N_SQRT 3u
#define N_ROOT 4u
#define N_LSE 5u
const bool ARG = FOLD == A_ARGMAX || FOLD == A_ARGMIN;
const uint NO_INDEX = 0xffffffffu;

layout(std430, set = 0, binding = 0) buffer Out { uint w[]; } out_buf;
layout(std430, set = 0, binding = 1) readonly buffer X { uint w[]; } x_buf;
layout(std430, set = 0, binding = 2) readonly buffer C { uint w[]; } c_buf;
layout(std430, set = 0, binding = 3) buffer OutIdx { uint w[]; } oi_buf;
layout(std430, set = 0, binding = 4) readonly buffer InIdx { uint w[]; } ii_buf;

layout(push_constant) uniform Params {
  uint A, R, K, groups;  // lines A * K of R elements; workgroups in the (x, y) grid
  int sa, sr, sk;        // x strides (elements)
  int oa, ok;            // out strides (values and indices share them)
  uint osplit;           // out offset between chunks (partials; 0 otherwise)
  uint xbase, obase, cbase, ibase, pbase;
  uint chunk;            // elements of a line per chunk (grid z)
  uint gx;               // the grid's width in x
  uint pad;
  uvec2 arg0;            // p of |x|^p (accumulator encoding)
  uvec2 arg1;            // the divisor (N_DIV, N_DIVSQRT) or 1 / p (N_ROOT)
} pc;

#if !defined(VARIANT_F64) && !defined(VARIANT_I64)
layout(std430, set = 0, binding = 1) readonly buffer X4 { vec4 q[]; } x4_buf;
#endif

DEFINE_LOAD(load_x, x_buf)
DEFINE_LOAD(load_c, c_buf)
DEFINE_STORE(store_out, out_buf)

shared ACC sh_v[256];
shared uint sh_i[256];

ACC identity() {
#if defined(VARIANT_I64)
  if (FOLD == A_PROD || FOLD == A_ALL) return 1l;
  if (FOLD == A_MAX) return int64_t(0x8000000000000000ul);
  if (FOLD == A_MIN) return 0x7fffffffffffffffl;
  return 0l;
#else
  if (FOLD == A_PROD || FOLD == A_ALL) return ACC(1);
  if (FOLD == A_MAX) return -ACC_INF;
  if (FOLD == A_MIN) return ACC_INF;
  return ACC(0);
#endif
}

bool is_nan(ACC v) {
#if defined(VARIANT_I64)
  return false;
#else
  return isnan(v);
#endif
}

// Does (v, i) beat (bv, bi) for argmax / argmin? Symmetric, so lanes merge in any order.
bool beats(ACC v, uint i, ACC bv, uint bi) {
  if (bi == NO_INDEX) return i != NO_INDEX;
  if (i == NO_INDEX) return false;
  bool vn = is_nan(v), bn = is_nan(bv);
  if (vn || bn) return vn && bn ? i < bi : vn;
  if (v == bv) return i < bi;
  return FOLD == A_ARGMAX ? v > bv : v < bv;
}

ACC fold(ACC a, ACC v) {
  switch (FOLD) {
  case A_SUM: return a + v;
  case A_PROD: return a * v;
  case A_MAX: return (v > a || is_nan(v)) ? v : a;
  case A_MIN: return (v < a || is_nan(v)) ? v : a;
  case A_ALL: return (a != ACC(0) && v != ACC(0)) ? ACC(1) : ACC(0);
  case A_ANY: return (a != ACC(0) || v != ACC(0)) ? ACC(1) : ACC(0);
  }
  return a;
}

ACC transform(ACC v, ACC c) {
#if !defined(VARIANT_I64)
  switch (XFORM) {
  case T_ABS: return abs(v);
  case T_SQUARE: return v * v;
  case T_POWABS: return POW(abs(v), arg_acc(pc.arg0));
  case T_NONZERO: return v != ACC(0) ? ACC(1) : ACC(0);
  case T_SQDEV: {
    ACC d = v - c;
    return d * d;
  }
  case T_EXPSHIFT: return EXP(v - c);
  }
#endif
  return v;
}

ACC finish(ACC v, ACC c) {
#if !defined(VARIANT_I64)
  ACC div = arg_acc(pc.arg1);
  switch (FINISH) {
  case N_DIV:
  case N_DIVSQRT: {
    // n - correction <= 0: the CPU divides by zero (a NaN for 0 / 0, else infinity)
    ACC q = div > ACC(0) ? v / div : (v == ACC(0) || isnan(v) ? ACC_NAN : v * ACC_INF);
    return FINISH == N_DIVSQRT ? sqrt(q) : q;
  }
  case N_SQRT: return sqrt(v);
  case N_ROOT: return POW(v, div);
  case N_LSE: return (isinf(c) || isnan(c)) ? c : c + LOG(v);
  }
#endif
  return v;
}

void main() {
  uint line, lane;
  line_lane(line, lane);
  uint g = gl_WorkGroupID.x + gl_WorkGroupID.y * pc.gx;
  uint o = g * LINES + line;
  bool valid = g < pc.groups && o < pc.A * pc.K;
  uint a = 0u, k = 0u;
  if (valid) {
    a = o / pc.K;
    k = o - a * pc.K;
  }
  ACC acc = identity();
  uint best = NO_INDEX;
  ACC c = ACC(0);
  if (valid && (XFORM == T_SQDEV || XFORM == T_EXPSHIFT || FINISH == N_LSE)) {
    c = load_c(pc.cbase + o, ACC_FMT);
  }
  if (valid) {
    ACC shift = c;
#if !defined(VARIANT_I64)
    // exp(x - max): an infinite or NaN max decides the result alone, any centre will do
    if (XFORM == T_EXPSHIFT && (isinf(c) || isnan(c))) shift = ACC(0);
#endif
    uint r0 = gl_WorkGroupID.z * pc.chunk, r1 = min(pc.R, r0 + pc.chunk);
    uint off = a * uint(pc.sa) + k * uint(pc.sk);
    uint rs = r0 + lane;
    ACC x0 = ACC(0);
    if (SHIFT0 && pc.R > 0u) x0 = load_x(pc.xbase + off, IN_FMT);
#if !defined(VARIANT_F64) && !defined(VARIANT_I64)
    if (VEC4) {
      uint q0 = (pc.xbase + off + r0) >> 2, nq = (r1 - r0) >> 2;
      for (uint j = lane; j < nq; j += TR) {
        vec4 v = x4_buf.q[q0 + j];
        v -= x0;
        acc = fold(fold(acc, transform(v.x, shift)), transform(v.y, shift));
        acc = fold(fold(acc, transform(v.z, shift)), transform(v.w, shift));
      }
      rs = r0 + 4u * nq + lane;  // the tail
    }
#endif
    for (uint r = rs; r < r1; r += TR) {
      uint e = off + r * uint(pc.sr);
      ACC v = load_x(pc.xbase + e, IN_FMT);
      if (ARG) {
        uint i = IDX_IN ? ii_buf.w[pc.pbase + e] : r;
        if (beats(v, i, acc, best)) {
          acc = v;
          best = i;
        }
      } else {
        acc = fold(acc, transform(v - x0, shift));
      }
    }
  }
  if (TR > 1u) {
    uint s = line * TR + lane;
    sh_v[s] = acc;
    if (ARG) sh_i[s] = best;
    for (uint step = TR / 2u; step > 0u; step >>= 1) {
      memoryBarrierShared();
      barrier();
      if (lane < step) {
        ACC v = sh_v[s + step];
        if (ARG) {
          uint i = sh_i[s + step];
          if (beats(v, i, acc, best)) {
            acc = v;
            best = i;
            sh_v[s] = v;
            sh_i[s] = i;
          }
        } else {
          acc = fold(acc, v);
          sh_v[s] = acc;
        }
      }
    }
  }
  if (!valid || lane != 0u) return;
  uint oe = gl_WorkGroupID.z * pc.osplit + a * uint(pc.oa) + k * uint(pc.ok);
  if (ARG) {
    store_out(pc.obase + oe, OUT_FMT, acc);
    if (!PARTIAL) {  // final: int64 indices
      oi_buf.w[2u * (pc.ibase + oe)] = best;
      oi_buf.w[2u * (pc.ibase + oe) + 1u] = 0u;
    } else {         // a chunk's partial: uint32 indices
      oi_buf.w[pc.ibase + oe] = best;
    }
    return;
  }
  store_out(pc.obase + oe, OUT_FMT, finish(acc, c));
}
