#version 450
// softmax.comp: softmax and log_softmax along lines (reduce.glsl), as
// runtime/src/cpu/softmax.c: with m the line's max and s = sum(exp(x - m)), softmax is
// exp(x - m) / s and log_softmax x - m - log(s), so no exponent overflows. Each lane keeps a
// running (m, s) over its elements (rescaling s when m grows: one read of x instead of two), the
// lanes' pairs merge in shared memory, and a second read writes the line. A NaN anywhere, an
// infinite max or a line of -inf makes the whole line NaN, as on the CPU.
//
// Operands: 0 out, 1 x.
//
// variants: F32 F64
#extension GL_GOOGLE_include_directive : require
#include "reduce.glsl"

layout(constant_id = 0) const uint OPC = 0u;  // is_log | vec4 << 1
const bool IS_LOG = (OPC & 1u) != 0u;
// float32 lines, contiguous and 16-byte aligned in x and out (the host checks): 128-bit loads
// and stores
const bool VEC4 = (OPC & 2u) != 0u;
layout(constant_id = 1) const uint FMTS = 0u;
const uint IN_FMT = FMTS & 15u, OUT_FMT = (FMTS >> 4) & 15u;

layout(std430, set = 0, binding = 0) buffer Out { uint w[]; } out_buf;
layout(std430, set = 0, binding = 1) readonly buffer X { uint w[]; } x_buf;

layout(push_constant) uniform Params {
  uint A, R, K, groups;
  int sa, sr, sk;
  int oa, orr, ok;
  uint xbase, obase, gx;
} pc;

#if !defined(VARIANT_F64)
layout(std430, set = 0, binding = 0) buffer Out4 { vec4 q[]; } out4_buf;
layout(std430, set = 0, binding = 1) readonly buffer X4 { vec4 q[]; } x4_buf;
#endif

DEFINE_LOAD(load_x, x_buf)
DEFINE_STORE(store_out, out_buf)

shared ACC sh_m[256];
shared ACC sh_s[256];

// s * exp(m - to), where a zero s stays zero (m may be -inf) and a NaN s stays NaN.
ACC rescale(ACC s, ACC m, ACC to) { return s == ACC(0) ? ACC(0) : s * EXP(m - to); }

// Folds v into the running (m, s).
void add(inout ACC m, inout ACC s, ACC v) {
  if (v > m) {
    s = rescale(s, m, v) + ACC(1);
    m = v;
  } else if (v != -ACC_INF) {
    s += EXP(v - m);  // a NaN v (never above m) makes s NaN
  }
}

ACC result(ACC v, ACC m, ACC inv, ACC ls, bool bad) {
  if (bad) return ACC_NAN;
  return IS_LOG ? v - m - ls : EXP(v - m) * inv;
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
  uint xoff = pc.xbase + a * uint(pc.sa) + k * uint(pc.sk);
  uint ooff = pc.obase + a * uint(pc.oa) + k * uint(pc.ok);
  ACC m = -ACC_INF, s = ACC(0);
  uint nq = VEC4 ? pc.R >> 2 : 0u;  // quads, then the tail one by one
  if (valid) {
#if !defined(VARIANT_F64)
    for (uint j = lane; j < nq; j += TR) {
      vec4 q = x4_buf.q[(xoff >> 2) + j];
      add(m, s, q.x);
      add(m, s, q.y);
      add(m, s, q.z);
      add(m, s, q.w);
    }
#endif
    for (uint r = 4u * nq + lane; r < pc.R; r += TR) add(m, s, load_x(xoff + r * uint(pc.sr), IN_FMT));
  }
  if (TR > 1u) {
    uint i = line * TR + lane;
    sh_m[i] = m;
    sh_s[i] = s;
    for (uint step = TR / 2u; step > 0u; step >>= 1) {
      memoryBarrierShared();
      barrier();
      if (lane < step) {
        ACC m2 = sh_m[i + step], s2 = sh_s[i + step];
        ACC mm = max(m, m2);
        s = rescale(s, m, mm) + rescale(s2, m2, mm);
        m = mm;
        sh_m[i] = m;
        sh_s[i] = s;
      }
    }
    memoryBarrierShared();
    barrier();
    m = sh_m[line * TR];
    s = sh_s[line * TR];
  }
  if (!valid) return;
  bool bad = isinf(m) || isnan(m) || isnan(s);
  ACC inv = ACC(1) / s, ls = LOG(s);
#if !defined(VARIANT_F64)
  for (uint j = lane; j < nq; j += TR) {
    vec4 q = x4_buf.q[(xoff >> 2) + j];
    out4_buf.q[(ooff >> 2) + j] = vec4(result(q.x, m, inv, ls, bad), result(q.y, m, inv, ls, bad),
                                       result(q.z, m, inv, ls, bad), result(q.w, m, inv, ls, bad));
  }
#endif
  for (uint r = 4u * nq + lane; r < pc.R; r += TR) {
    ACC v = load_x(xoff + r * uint(pc.sr), IN_FMT);
    store_out(ooff + r * uint(pc.orr), OUT_FMT, result(v, m, inv, ls, bad));
  }
}
