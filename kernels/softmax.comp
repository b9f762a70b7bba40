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

layout(constant_id = 0) const uint IS_LOG = 0u;
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

DEFINE_LOAD(load_x, x_buf)
DEFINE_STORE(store_out, out_buf)

shared ACC sh_m[256];
shared ACC sh_s[256];

// s * exp(m - to), where a zero s stays zero (m may be -inf) and a NaN s stays NaN.
ACC rescale(ACC s, ACC m, ACC to) { return s == ACC(0) ? ACC(0) : s * EXP(m - to); }

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
  if (valid) {
    for (uint r = lane; r < pc.R; r += TR) {
      ACC v = load_x(xoff + r * uint(pc.sr), IN_FMT);
      if (v > m) {
        s = rescale(s, m, v) + ACC(1);
        m = v;
      } else if (v != -ACC_INF) {
        s += EXP(v - m);  // a NaN v (never above m) makes s NaN
      }
    }
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
  for (uint r = lane; r < pc.R; r += TR) {
    ACC v = load_x(xoff + r * uint(pc.sr), IN_FMT);
    ACC y = IS_LOG != 0u ? v - m - ls : EXP(v - m) * inv;
    store_out(ooff + r * uint(pc.orr), OUT_FMT, bad ? ACC_NAN : y);
  }
}
