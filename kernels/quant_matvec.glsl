// quant_matvec.glsl: the body of the quantized matrix-vector kernels (quant_matvec.comp, and
// intdot/quant_matvec_dot.comp with QUANT_DOT defined), out[m, n] = sum_k x[m, k] W[n, k] for a
// few activation rows m (token generation: batch 1 to 8), W quantized (quant_unit.glsl).
//
// The product is bound by reading W once, so the layout is for streaming it: a workgroup of 128
// invocations takes 4 weight rows, 32 lanes per row; lane l reads units l, l + 32, ... of its
// row, so the 32 lanes of a row read consecutive blocks (coalesced) and each weight is decoded
// once and used for every activation row of the dispatch (at most 8: the grid's y walks chunks of
// 8 rows of x). The lanes' partial sums meet in a shared-memory tree (no subgroup operations, so
// one module serves every device). The grid's x strides over row groups past the device's
// workgroup-count limit.
//
// Plain: x is float32, read as vec4 from element 4 * x_off. QUANT_DOT (Q8_0 and Q4_0): x comes
// quantized per 32 (quant_act.comp: int8 codes packed 4 to a word, one float scale per 32), and a
// unit's product is 8 packed 4x8-bit integer dot products (GL_EXT_integer_dot_product) times the
// two scales, as the CPU kernel (quant_matmul.c) computes it.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 128) in;
#define LANES 32u
#define RPW 4u      // weight rows per workgroup
#define MAXM 8u     // activation rows per dispatch row of the grid

layout(constant_id = 0) const uint FORMAT = 0u;
layout(constant_id = 1) const uint GROUP = 32u;
layout(constant_id = 2) const uint SYMMETRIC = 0u;

#ifdef QUANT_DOT
layout(std430, set = 0, binding = 0) readonly buffer B0 { int xq[]; };    // [m][k / 4]
layout(std430, set = 0, binding = 3) readonly buffer B3 { float xd[]; };  // [m][k / 32]
#else
layout(std430, set = 0, binding = 0) readonly buffer B0 { vec4 x4[]; };
#endif
layout(std430, set = 0, binding = 1) readonly buffer B1 { uint w[]; } qw;
layout(std430, set = 0, binding = 2) writeonly buffer B2 { float o[]; };

layout(push_constant) uniform Params {
  uint m, n, k;
  uint row_bytes;  // bytes of one weight row's blocks
  uint x_off;      // first vec4 of x (plain)
  uint w_off;      // first byte of the blocks
  uint o_off;      // first element of out
} p;

#include "quant_unit.glsl"

shared float red[MAXM * 128u];

#ifdef QUANT_DOT
// Nibbles 0..15 (one per byte) as the signed bytes nibble - 8.
int q4_signed(uint nib) {
  uint t = nib ^ 0x08080808u;
  return int(t | ((t & 0x08080808u) * 0x1Eu));
}
#endif

void main() {
  uint t = gl_LocalInvocationID.x, lane = t % LANES, slot = t / LANES;
  uint m0 = gl_WorkGroupID.y * MAXM, mc = min(MAXM, p.m - m0);
  uint nu = p.k / 32u;
  for (uint r0 = gl_WorkGroupID.x * RPW; r0 < p.n; r0 += gl_NumWorkGroups.x * RPW) {
    uint row = r0 + slot;
    float acc[MAXM];
    for (uint i = 0u; i < MAXM; i++) acc[i] = 0.0;
    if (row < p.n) {
      uint rb = p.w_off + row * p.row_bytes;
      for (uint u = lane; u < nu; u += LANES) {
#ifdef QUANT_DOT
        int c[8];
        float d;
        if (FORMAT == 0u) {
          uint base = rb + u * 34u;
          d = q_half(base);
          for (uint j = 0u; j < 8u; j++) c[j] = int(q_word(base + 2u + 4u * j));
        } else {
          uint base = rb + u * 18u;
          d = q_half(base);
          for (uint j = 0u; j < 4u; j++) {
            uint wd = q_word(base + 2u + 4u * j);
            c[j] = q4_signed(wd & 0x0F0F0F0Fu);
            c[4u + j] = q4_signed((wd >> 4) & 0x0F0F0F0Fu);
          }
        }
        for (uint i = 0u; i < MAXM; i++) {
          if (i >= mc) break;
          uint xb = (m0 + i) * (p.k / 4u) + u * 8u;
          int s = 0;
          for (uint j = 0u; j < 8u; j++) s = dotPacked4x8AccSatEXT(c[j], xq[xb + j], s);
          acc[i] += float(s) * (d * xd[(m0 + i) * nu + u]);
        }
#else
        float v[32];
        q_unit(rb, u, v);
        for (uint i = 0u; i < MAXM; i++) {
          if (i >= mc) break;
          uint xb = p.x_off + (m0 + i) * (p.k / 4u) + u * 8u;
          float s = 0.0;
          for (uint j = 0u; j < 8u; j++)
            s += dot(vec4(v[4u * j], v[4u * j + 1u], v[4u * j + 2u], v[4u * j + 3u]), x4[xb + j]);
          acc[i] += s;
        }
#endif
      }
    }
    for (uint i = 0u; i < MAXM; i++) red[i * 128u + t] = acc[i];
    barrier();
    for (uint s = LANES / 2u; s > 0u; s >>= 1) {
      if (lane < s)
        for (uint i = 0u; i < mc; i++) red[i * 128u + t] += red[i * 128u + t + s];
      barrier();
    }
    if (lane < mc && row < p.n) o[p.o_off + (m0 + lane) * p.n + row] = red[lane * 128u + slot * LANES];
    barrier();
  }
}
