#version 450
// class_loss_back.comp: the input gradient of class_loss.comp, row by row (same layout and
// constants). With g = the row's loss gradient, p = exp(x - lse), W = sum(w):
//   cross entropy: gx[c] = a * p[c] + b * (W * p[c] - w[c]) - a [c == t],
//                  a = g (1 - e) w[t], b = g e / C
//   NLL:           gx[c] = -g w[t] [c == t]
// Ignored rows get zeros; a target out of range (the forward flagged it) gets NaNs.
//
// variants: F32 F64 F32S F64S
#extension GL_GOOGLE_include_directive : require
#include "norm.glsl"

layout(constant_id = 0) const uint LSM = 1u;
layout(constant_id = 1) const uint PER_THREAD = 0u;

layout(std430, binding = 0) writeonly buffer B0 { T gx[]; };
layout(std430, binding = 1) readonly buffer B1 { T gl[]; };
layout(std430, binding = 2) readonly buffer B2 { T x[]; };
layout(std430, binding = 3) readonly buffer B3 { T lse_in[]; };
layout(std430, binding = 4) readonly buffer B4 { int64_t target[]; };
layout(std430, binding = 5) readonly buffer B5 { T weight[]; };

layout(push_constant) uniform PC {
  uint rows, C, S, has;        // has: bit 0 weight
  int64_t ignore_index;
  uvec2 smooth_d;
  uint smooth_f;
  uint ogx, ogl, ox, olse, ot, ow;
} pc;

void main() {
  uint tid = gl_LocalInvocationID.x;
  uint row = PER_THREAD != 0u ? group_index() * NORM_WG + tid : group_index();
  if (row >= pc.rows) return;
  uint lane = PER_THREAD != 0u ? 0u : tid, step = PER_THREAD != 0u ? 1u : NORM_WG;
  uint n = row / pc.S, s = row - n * pc.S;
  uint xb = pc.ox + n * pc.C * pc.S + s, ob = pc.ogx + n * pc.C * pc.S + s;
  bool hw = (pc.has & 1u) != 0u;
  int64_t t = target[pc.ot + row];
  if (t == pc.ignore_index || t < 0l || t >= int64_t(pc.C)) {
    T v = t == pc.ignore_index ? T(0) : NAN_T;
    for (uint c = lane; c < pc.C; c += step) gx[ob + c * pc.S] = v;
    return;
  }
  uint ti = uint(t);
  T g = gl[pc.ogl + row], wt = hw ? weight[pc.ow + ti] : T(1);
  if (LSM == 0u) {
    for (uint c = lane; c < pc.C; c += step) gx[ob + c * pc.S] = c == ti ? -g * wt : T(0);
    return;
  }
  T e = ARG(pc.smooth_f, pc.smooth_d), lse = lse_in[pc.olse + row];
  T a = g * (T(1) - e) * wt, b = g * e / T(pc.C), W = T(pc.C);
  if (e > T(0) && hw) {
    W = T(0);
    for (uint c = lane; c < pc.C; c += step) W += weight[pc.ow + c];
    if (PER_THREAD == 0u) {
      T unused = T(0);
      wg_sum2(W, unused);
    }
  }
  for (uint c = lane; c < pc.C; c += step) {
    T p = EXP(x[xb + c * pc.S] - lse);
    T v = a * p;
    if (e > T(0)) v += b * (W * p - (hw ? weight[pc.ow + c] : T(1)));
    gx[ob + c * pc.S] = c == ti ? v - a : v;
  }
}
