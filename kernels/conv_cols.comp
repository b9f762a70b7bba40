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
//                    of 8, and for the weight gradient of the products' slice, so that every
//                    split of K reads whole slices).
//   MODE 1 (col2im)  gx[n, c, h, w] = sum over (i, j) of cg[n][(c, i, j)][(oh, ow)] where
//                    h + ph - i*dh = oh*sh (and likewise w), plus bias[c] when given: the
//                    gather form of the input gradient, each output summed by one invocation
//                    (deterministic, no atomics on values).
//
// MODE 0: workgroups (x, y + 65535 z) own 2048 columns of row y + 65535 z, each invocation 8
// of them (one 16-byte store: the output is a fresh tensor whose row length Q is a multiple
// of 8). MODE 1: each invocation owns one 32-bit word of the output, two neighbouring
// elements; it writes a caller's tensor, which may start at an odd element: the word at either
// end of the range is then merged atomically, as common.glsl's sub-word stores are.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : enable
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
  uint Q;                       // MODE 0: the column matrix's row length (a multiple of 8)
  uint n;                       // MODE 1: elements written
  uint groups_x;                // MODE 1: workgroups along x of the 2-D grid
  uint has_bias, bf16;
} p;

uint ld16(uint e) { return (a[e >> 1] >> ((e & 1u) * 16u)) & 0xffffu; }
uint bias16(uint e) { return (bias[e >> 1] >> ((e & 1u) * 16u)) & 0xffffu; }
float to_f(uint h) { return p.bf16 != 0u ? bf16_to_float(h) : half_to_float(h); }
uint from_f(float f) { return p.bf16 != 0u ? float_to_bf16(f) : float_to_half(f); }

// MODE 1: input-gradient element e of [N, C, H, W] (contiguous). Stride 1 (the common case)
// skips the divisions that place a tap.
uint col2im(uint e) {
  uint hw = p.H * p.W, chw = p.C * hw;
  uint nn = e / chw, r = e - nn * chw, c = r / hw, s = r - c * hw, h = s / p.W, w = s - h * p.W;
  uint ohw = p.OH * p.OW, khw = p.kh * p.kw;
  uint base = (nn * p.C * khw + c * khw) * ohw;  // cg[n][(c, 0, 0)][0]
  float sum = 0.0;
  for (uint i = 0u; i < p.kh; i++) {
    int ty = int(h) + p.ph - int(i) * p.dh;
    if (ty < 0) break;  // ty falls as i grows
    if (p.sh != 1 && ty % p.sh != 0) continue;
    uint oh = uint(p.sh == 1 ? ty : ty / p.sh);
    if (oh >= p.OH) continue;
    for (uint j = 0u; j < p.kw; j++) {
      int tx = int(w) + p.pw - int(j) * p.dw;
      if (tx < 0) break;
      if (p.sw != 1 && tx % p.sw != 0) continue;
      uint ow = uint(p.sw == 1 ? tx : tx / p.sw);
      if (ow >= p.OW) continue;
      sum += to_f(ld16(p.off_a + base + (i * p.kw + j) * ohw + oh * p.OW + ow));
    }
  }
  if (p.has_bias != 0u) sum += to_f(bias16(p.off_bias + c));
  return from_f(sum);
}

// MODE 0: row ck (workgroup y) of the column matrix, 8 columns from q0 per invocation: one
// division to place the first column, then steps along ow; 16 bytes stored at once (Q and so
// every row start are multiples of 8 elements).
void im2col_run(uint ck, uint q0) {
  uint ohw = p.OH * p.OW, NP = p.N * ohw;
  uint khw = p.kh * p.kw, c = ck / khw, r = ck - c * khw, i = r / p.kw, j = r - i * p.kw;
  int yoff = int(i) * p.dh - p.ph, xoff = int(j) * p.dw - p.pw;
  uint nn = q0 / ohw, sp = q0 - nn * ohw, oh = sp / p.OW, ow = sp - oh * p.OW;
  uint v[8];
  [[unroll]] for (uint u = 0u; u < 8u; u++) {
    uint val = 0u;
    if (q0 + u < NP) {
      int y = int(oh) * p.sh + yoff, x = int(ow) * p.sw + xoff;
      if (y >= 0 && x >= 0 && y < int(p.H) && x < int(p.W))
        val = ld16(p.off_a + ((nn * p.C + c) * p.H + uint(y)) * p.W + uint(x));
    }
    v[u] = val;
    if (++ow == p.OW) {
      ow = 0u;
      if (++oh == p.OH) {
        oh = 0u;
        nn++;
      }
    }
  }
  uint w0 = (ck * p.Q + q0) >> 1;
  o[w0] = v[0] | (v[1] << 16);
  o[w0 + 1u] = v[2] | (v[3] << 16);
  o[w0 + 2u] = v[4] | (v[5] << 16);
  o[w0 + 3u] = v[6] | (v[7] << 16);
}

void main() {
  if (MODE == 0u) {
    uint q0 = (gl_WorkGroupID.x * 256u + gl_LocalInvocationID.x) * 8u;
    uint ck = gl_WorkGroupID.y + gl_WorkGroupID.z * 65535u;
    if (q0 < p.Q && ck < p.C * p.kh * p.kw) im2col_run(ck, q0);
    return;
  }
  uint t = (gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
  // word t of the output holds elements 2t - (off_o & 1) and the next, relative to off_o
  uint lead = p.off_o & 1u;
  uint first = 2u * t;  // relative index of the word's low half plus lead
  if (first >= p.n + lead) return;
  uint word = (p.off_o >> 1) + t;
  bool lo_ok = !(t == 0u && lead == 1u), hi_ok = first + 1u < p.n + lead;
  uint lo = lo_ok ? col2im(first - lead) : 0u, hi = hi_ok ? col2im(first + 1u - lead) : 0u;
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
