#version 450
// class_loss.comp: cross entropy (fused log_softmax and NLL) or NLL over x [N, C, S], one row
// (n, s) at a time: the C scores x[n, :, s], S apart. For target t, weights w and smoothing e
// (runtime/src/cpu/loss.c has the formulas):
//   lse = max + log(sum(exp(x - max)))                    (cross entropy only)
//   loss = (1 - e) * -w[t] * (x[t] - lse) + (e / C) * -sum_c w[c] * (x[c] - lse)
//   NLL: loss = -w[t] * x[t]
// Ignored rows give loss 0 and weight 0. wrow receives each row's w[t] (class_total.comp sums
// them into the mean's denominator on the device). A target outside [0, C) gives a NaN loss
// and sets the device's error flag (flag[0] = 1, flag[1] = the target, clamped to int32,
// flag[2] = C, flag[3] = LSM), which the host checks the next time it waits for the device.
//
// variants: F32 F64 F32S F64S
// LSM (constant 0): 1 cross entropy, 0 NLL.
// PER_THREAD (constant 1): 1 gives each invocation a whole row (few classes); 0 gives each
//   row a workgroup, its invocations striding over the classes.
#extension GL_GOOGLE_include_directive : require
#include "norm.glsl"

layout(constant_id = 0) const uint LSM = 1u;
layout(constant_id = 1) const uint PER_THREAD = 0u;

layout(std430, binding = 0) writeonly buffer B0 { T loss[]; };
layout(std430, binding = 1) writeonly buffer B1 { T lse_out[]; };
layout(std430, binding = 2) writeonly buffer B2 { T wrow[]; };
layout(std430, binding = 3) buffer B3 { uint flag[]; };
layout(std430, binding = 4) readonly buffer B4 { T x[]; };
layout(std430, binding = 5) readonly buffer B5 { int64_t target[]; };
layout(std430, binding = 6) readonly buffer B6 { T weight[]; };

layout(push_constant) uniform PC {
  uint rows, C, S, has;        // has: bit 0 weight
  int64_t ignore_index;
  uvec2 smooth_d;
  uint smooth_f;
  uint oloss, olse, ox, ot, ow;
} pc;

T wsum(T v) {
  if (PER_THREAD == 0u) {
    T unused = T(0);
    wg_sum2(v, unused);
  }
  return v;
}

void main() {
  uint tid = gl_LocalInvocationID.x;
  uint row = PER_THREAD != 0u ? group_index() * NORM_WG + tid : group_index();
  if (row >= pc.rows) return;  // per workgroup when a workgroup shares a row
  uint lane = PER_THREAD != 0u ? 0u : tid, step = PER_THREAD != 0u ? 1u : NORM_WG;
  uint n = row / pc.S, s = row - n * pc.S;
  uint base = pc.ox + n * pc.C * pc.S + s;
  bool hw = (pc.has & 1u) != 0u;
  T lse = T(0);
  if (LSM != 0u) {
    T m = -INF_T;
    for (uint c = lane; c < pc.C; c += step) m = max(m, x[base + c * pc.S]);
    if (PER_THREAD == 0u) m = wg_max(m);
    if (isinf(m)) m = T(0);  // all -inf (or +inf): let the sum say so
    T sum = T(0);
    for (uint c = lane; c < pc.C; c += step) sum += EXP(x[base + c * pc.S] - m);
    lse = m + LOG(wsum(sum));
    if (lane == 0u) lse_out[pc.olse + row] = lse;
  }
  int64_t t = target[pc.ot + row];
  if (t == pc.ignore_index) {
    if (lane == 0u) {
      loss[pc.oloss + row] = T(0);
      wrow[row] = T(0);
    }
    return;
  }
  if (t < 0l || t >= int64_t(pc.C)) {
    if (lane == 0u) {
      loss[pc.oloss + row] = NAN_T;
      wrow[row] = T(0);
      flag[1] = uint(int(clamp(t, -2147483648l, 2147483647l)));
      flag[2] = pc.C;
      flag[3] = LSM;
      flag[0] = 1u;  // VK_FLAG_CLASS_INDEX
    }
    return;
  }
  uint ti = uint(t);
  T wt = hw ? weight[pc.ow + ti] : T(1), v = -wt * (x[base + ti * pc.S] - lse);
  T e = ARG(pc.smooth_f, pc.smooth_d);
  if (LSM != 0u && e > T(0)) {
    T sm = T(0);
    for (uint c = lane; c < pc.C; c += step)
      sm -= (hw ? weight[pc.ow + c] : T(1)) * (x[base + c * pc.S] - lse);
    v = (T(1) - e) * v + e / T(pc.C) * wsum(sm);
  }
  if (lane == 0u) {
    loss[pc.oloss + row] = v;
    wrow[row] = wt;
  }
}
