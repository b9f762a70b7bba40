#version 450
// scan.comp: cumulative sums and products along lines (reduce.glsl), as
// runtime/src/cpu/scan.c: floats accumulate in float (float32, float16, bfloat16 inputs) or
// double, integers and bool in wrapping int64 (the output is then int64).
//
// ROW layout (lanes along a line): the line goes by in tiles of TR elements, one per lane
// (coalesced loads); each tile is scanned in shared memory (Hillis-Steele) and offset by the
// carry of the tiles before it. COL layout (neighbouring lines side by side): each lane takes
// one segment of its line, sums it, the lanes' totals are scanned, and each lane rescans its
// segment from its offset.
//
// Operands: 0 out, 1 x.
//
// variants: F32 F64 I64
#extension GL_GOOGLE_include_directive : require
#include "reduce.glsl"

layout(constant_id = 0) const uint IS_PROD = 0u;
layout(constant_id = 1) const uint FMTS = 0u;
const uint IN_FMT = FMTS & 15u, OUT_FMT = (FMTS >> 4) & 15u;

layout(std430, set = 0, binding = 0) buffer Out { uint w[]; } out_buf;
layout(std430, set = 0, binding = 1) readonly buffer X { uint w[]; } x_buf;

layout(push_constant) uniform Params {
  uint A, R, K, groups;
  int sa, sr, sk;
  int oa, orr, ok;       // out strides: across lines, along a line
  uint xbase, obase, gx;
} pc;

DEFINE_LOAD(load_x, x_buf)
DEFINE_STORE(store_out, out_buf)

shared ACC sh[256];

ACC identity() { return IS_PROD != 0u ? ACC(1) : ACC(0); }
ACC op(ACC a, ACC b) { return IS_PROD != 0u ? a * b : a + b; }

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
  uint s = line * TR + lane;
  if (LAYOUT == 0u) {
    ACC carry = identity();
    for (uint t = 0u; t < pc.R; t += TR) {
      uint r = t + lane;
      bool here = valid && r < pc.R;
      ACC v = here ? load_x(xoff + r * uint(pc.sr), IN_FMT) : identity();
      for (uint d = 1u; d < TR; d <<= 1) {
        sh[s] = v;
        memoryBarrierShared();
        barrier();
        if (lane >= d) v = op(sh[s - d], v);
        memoryBarrierShared();
        barrier();
      }
      if (here) store_out(ooff + r * uint(pc.orr), OUT_FMT, op(carry, v));
      if (TR > 1u) {
        sh[s] = v;  // the tile's total sits in the last lane
        memoryBarrierShared();
        barrier();
        v = sh[line * TR + TR - 1u];
        memoryBarrierShared();
        barrier();
      }
      carry = op(carry, v);
    }
    return;
  }
  uint seg = (pc.R + TR - 1u) / TR;
  uint r0 = min(pc.R, lane * seg), r1 = min(pc.R, r0 + seg);
  ACC before = identity();
  if (TR > 1u) {
    ACC total = identity();
    if (valid)
      for (uint r = r0; r < r1; r++) total = op(total, load_x(xoff + r * uint(pc.sr), IN_FMT));
    sh[s] = total;
    memoryBarrierShared();
    barrier();
    for (uint j = 0u; j < lane; j++) before = op(before, sh[line * TR + j]);
  }
  if (!valid) return;
  for (uint r = r0; r < r1; r++) {
    before = op(before, load_x(xoff + r * uint(pc.sr), IN_FMT));
    store_out(ooff + r * uint(pc.orr), OUT_FMT, before);
  }
}
