#version 450
//
// conv_cols.comp: the column matrices of the 16-bit convolutions that run as matrix products
// on tensor cores (runtime/src/vulkan/vk_conv_cols.c). The values are float16 or bfloat16
// words; the kernel moves them (MODE 0) or adds them in float32 and rounds once (MODE 1), so
// it needs no 16-bit arithmetic or storage from the device.
//
//   MODE 0 (im2col)  col[ck][q] = x[n, c, oh*sh - ph + i*dh, ow*sw - pw + j*dw] (0 outside x)
//                    with ck = (c, i, j) < C*kh*kw and q = (n, oh, ow) < N*OH*OW; columns
//                    q in [N*OH*OW, Q) are zeros (Q, the row length, is padded to a multiple
//                    of the products' slice so that every split of K reads whole slices).
//   MODE 1 (col2im)  gx[n, c, h, w] = sum over (i, j) of cg[n][(c, i, j)][(oh, ow)] where
//                    h + ph - i*dh = oh*sh (and likewise w), plus bias[c] when given: the
//                    gather form of the input gradient, each output summed by one invocation
//                    (deterministic, no atomics on values).
//
// Each invocation owns one 32-bit word of the output, two neighbouring elements. MODE 0's
// output is a fresh tensor whose row length Q is even, so its words are whole. MODE 1 writes a
// caller's tensor, which may start at an odd element: the word at either end of the range is
// then merged atomically, as common.glsl's sub-word stores are.
#extension GL_GOOGLE_include_directive : require
#include "half16.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint MODE = 0u;

layout(std430, set = 0, binding = 0) buffer Out { uint o[]; };
layout(std430, set = 0, binding = 1) readonly buffer In { uint a[]; };
layout(std430, set = 0, binding = 2) readonly buffer Bias { uint bias[]; };

layout(push_constant) uniform Params {
  uint N, C, H, W, M, OH, OW, kh, kw;
  int sh, sw, ph, pw, dh, dw;
  uint off_o, off_a, off_bias;  // element offsets in the bound buffers
  uint Q;                       // MODE 0: the column matrix's row length
  uint n;                       // elements written
  uint groups_x;                // workgroups along x of the 2-D grid
  uint has_bias, bf16;
} p;

uint ld16(uint e) { return (a[e >> 1] >> ((e & 1u) * 16u)) & 0xffffu; }
uint bias16(uint e) { return (bias[e >> 1] >> ((e & 1u) * 16u)) & 0xffffu; }
float to_f(uint h) { return p.bf16 != 0u ? bf16_to_float(h) : half_to_float(h); }
uint from_f(float f) { return p.bf16 != 0u ? float_to_bf16(f) : float_to_half(f); }

// MODE 0: column element e of the matrix (row-major, rows of Q).
uint im2col(uint e) {
  uint ck = e / p.Q, q = e - ck * p.Q;
  uint ohw = p.OH * p.OW;
  if (q >= p.N * ohw) return 0u;
  uint nn = q / ohw, s = q - nn * ohw, oh = s / p.OW, ow = s - oh * p.OW;
  uint khw = p.kh * p.kw, c = ck / khw, r = ck - c * khw, i = r / p.kw, j = r - i * p.kw;
  int y = int(oh) * p.sh - p.ph + int(i) * p.dh, x = int(ow) * p.sw - p.pw + int(j) * p.dw;
  if (y < 0 || x < 0 || y >= int(p.H) || x >= int(p.W)) return 0u;
  return ld16(p.off_a + ((nn * p.C + c) * p.H + uint(y)) * p.W + uint(x));
}

// MODE 1: input-gradient element e of [N, C, H, W] (contiguous).
uint col2im(uint e) {
  uint hw = p.H * p.W, chw = p.C * hw;
  uint nn = e / chw, r = e - nn * chw, c = r / hw, s = r - c * hw, h = s / p.W, w = s - h * p.W;
  uint ohw = p.OH * p.OW, khw = p.kh * p.kw;
  uint base = (nn * p.C * khw + c * khw) * ohw;  // cg[n][(c, 0, 0)][0]
  float sum = 0.0;
  for (uint i = 0u; i < p.kh; i++) {
    int ty = int(h) + p.ph - int(i) * p.dh;
    if (ty < 0 || ty % p.sh != 0) continue;
    uint oh = uint(ty / p.sh);
    if (oh >= p.OH) continue;
    for (uint j = 0u; j < p.kw; j++) {
      int tx = int(w) + p.pw - int(j) * p.dw;
      if (tx < 0 || tx % p.sw != 0) continue;
      uint ow = uint(tx / p.sw);
      if (ow >= p.OW) continue;
      sum += to_f(ld16(p.off_a + base + (i * p.kw + j) * ohw + oh * p.OW + ow));
    }
  }
  if (p.has_bias != 0u) sum += to_f(bias16(p.off_bias + c));
  return from_f(sum);
}

uint element(uint e) { return MODE == 0u ? im2col(e) : col2im(e); }

void main() {
  uint t = (gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
  // word t of the output holds elements 2t - (off_o & 1) and the next, relative to off_o
  uint lead = p.off_o & 1u;
  uint first = 2u * t;  // relative index of the word's low half plus lead
  if (first >= p.n + lead) return;
  uint word = (p.off_o >> 1) + t;
  bool lo_ok = !(t == 0u && lead == 1u), hi_ok = first + 1u < p.n + lead;
  uint lo = lo_ok ? element(first - lead) : 0u, hi = hi_ok ? element(first + 1u - lead) : 0u;
  if (lo_ok && hi_ok) {
    o[word] = lo | (hi << 16);
  } else if (lo_ok) {
    atomicAnd(o[word], 0xffff0000u);
    atomicOr(o[word], lo);
  } else {
    atomicAnd(o[word], 0x0000ffffu);
    atomicOr(o[word], hi << 16);
  }
}
