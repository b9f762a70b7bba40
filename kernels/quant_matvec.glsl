// quant_matvec.glsl: the body of the quantized matrix-vector kernels (quant_matvec.comp, and
// intdot/quant_matvec_dot.comp with QUANT_DOT defined), out[m, n] = sum_k x[m, k] W[n, k] for a
// few activation rows m (token generation: batch 1 to 8), W quantized (quant_unit.glsl).
//
// The product is bound by reading W once, so the layout is for streaming it: a workgroup of 128
// invocations takes 4 weight rows, 32 lanes per row; lane l reads units l, l + 32, ... of its
// row (integer path), or a quarter of units l / 4, l / 4 + 8, ... (float path, q_part: then the
// lanes also read x contiguously), so the 32 lanes of a row read consecutive blocks (coalesced)
// and each weight is decoded once and used for every activation row of the dispatch (at most 8:
// the grid's y walks chunks of 8 rows of x). The lanes' partial sums meet in a shared-memory tree (no subgroup operations, so
// one module serves every device). The grid's x strides over row groups past the device's
// workgroup-count limit.
//
// Plain: x is float32, read as vec4 from element 4 * x_off. QUANT_DOT (Q8_0, Q4_0, Q4_K, Q6_K):
// x comes quantized per 32 (quant_act.comp: int8 codes packed 4 to a word; per 32 its scale and
// scale times its code sum), the unit's weight codes become signed bytes, and a unit's product
// is 8 packed 4x8-bit integer dot products (GL_EXT_integer_dot_product) times the scales (two
// halves for Q6_K's scale per 16; Q4_K's minimum times x's sum), as the CPU kernel
// (quant_matmul.c) does for Q8_0 and Q4_0 and ggml for the K-quants. Reading int8 x instead of
// float32 cuts the activation's cache traffic per weight byte fourfold.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 128) in;
#define LANES 32u
#define RPW 4u      // weight rows per workgroup
#define MAXM 8u     // activation rows per dispatch row of the grid

layout(constant_id = 0) const uint FORMAT = 0u;
layout(constant_id = 1) const uint GROUP = 32u;
layout(constant_id = 2) const uint SYMMETRIC = 0u;

#ifdef QUANT_DOT
layout(std430, set = 0, binding = 0) readonly buffer B0 { ivec4 xq[]; };  // [m][k / 16]
layout(std430, set = 0, binding = 3) readonly buffer B3 { float xd[]; };  // [m][k / 32][2]
#else
layout(std430, set = 0, binding = 0) readonly buffer B0 { vec4 x4[]; };
#endif
layout(std430, set = 0, binding = 1) readonly buffer B1 { uint w[]; } qw;
#ifdef QUANT_DOT
layout(std430, set = 0, binding = 1) readonly buffer B1V { uvec4 w4[]; } qw4;  // the same bytes
#endif
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
#ifdef QUANT_DOT
      for (uint u = lane; u < nu; u += LANES) {
        // the unit's 32 codes as signed bytes, 4 to a word, and how to scale the two halves'
        // integer sums (d0, d1) and x's code sum (dm: Q4_K's minimum)
        int c[8];
        float d0, d1, dm = 0.0;
        if (FORMAT == 0u || FORMAT == 1u) {  // Q8_0; Q4_0: nibble - 8
          uint base = rb + u * (FORMAT == 0u ? 34u : 18u), nw = FORMAT == 0u ? 8u : 4u;
          uint cw[8];
          if ((base & 1u) == 0u) {
            // the block is 2-aligned: its 9 (5) covering words, each read once
            uint a = base >> 2, w0 = qw.w[a];
            bool odd = (base & 2u) != 0u;
            d0 = d1 = q_half_bits(odd ? w0 >> 16 : w0 & 0xFFFFu);
            for (uint j = 0u; j < nw; j++) {
              uint w1 = qw.w[a + 1u + j];
              cw[j] = odd ? w1 : (w0 >> 16) | (w1 << 16);
              w0 = w1;
            }
          } else {
            d0 = d1 = q_half(base);
            for (uint j = 0u; j < nw; j++) cw[j] = q_word(base + 2u + 4u * j);
          }
          if (FORMAT == 0u) {
            for (uint j = 0u; j < 8u; j++) c[j] = int(cw[j]);
          } else {
            for (uint j = 0u; j < 4u; j++) {
              c[j] = q4_signed(cw[j] & 0x0F0F0F0Fu);
              c[4u + j] = q4_signed((cw[j] >> 4) & 0x0F0F0F0Fu);
            }
          }
        } else if (FORMAT == 3u) {  // Q4_K: d * s * nibble - dmin * m
          uint sub = u & 7u, base = rb + (u >> 3) * 144u, sc = base + 4u;
          uint codes = base + 16u + 32u * (sub >> 1), sh = 4u * (sub & 1u);
          uint s, mn;
          if ((rb & 15u) == 0u) {
            // 16-aligned super-blocks (the usual case): the header and the unit's 32 code bytes
            // in three 128-bit loads
            uvec4 h = qw4.w4[base >> 4], c0 = qw4.w4[codes >> 4], c1 = qw4.w4[(codes >> 4) + 1u];
            uint hb[16];
            for (uint j = 0u; j < 16u; j++) hb[j] = (h[j >> 2] >> (8u * (j & 3u))) & 0xFFu;
            if (sub < 4u) { s = hb[4u + sub] & 63u; mn = hb[8u + sub] & 63u; }
            else {
              s = (hb[8u + sub] & 15u) | ((hb[sub] >> 6) << 4);
              mn = (hb[8u + sub] >> 4) | ((hb[4u + sub] >> 6) << 4);
            }
            d0 = d1 = q_half_bits(h.x & 0xFFFFu) * float(s);
            dm = q_half_bits(h.x >> 16) * float(mn);
            for (uint j = 0u; j < 4u; j++) {
              c[j] = int((c0[j] >> sh) & 0x0F0F0F0Fu);
              c[4u + j] = int((c1[j] >> sh) & 0x0F0F0F0Fu);
            }
          } else {
            if (sub < 4u) { s = q_byte(sc + sub) & 63u; mn = q_byte(sc + sub + 4u) & 63u; }
            else {
              s = (q_byte(sc + sub + 4u) & 15u) | ((q_byte(sc + sub - 4u) >> 6) << 4);
              mn = (q_byte(sc + sub + 4u) >> 4) | ((q_byte(sc + sub) >> 6) << 4);
            }
            d0 = d1 = q_half(base) * float(s);
            dm = q_half(base + 2u) * float(mn);
            for (uint j = 0u; j < 8u; j++) c[j] = int((q_word(codes + 4u * j) >> sh) & 0x0F0F0F0Fu);
          }
        } else {                    // Q6_K: d * scale * (6-bit code - 32), a scale per 16
          uint sub = u & 7u, half_ = sub >> 2, qr = sub & 3u, base = rb + (u >> 3) * 210u;
          uint ql = base + 64u * half_ + ((qr & 1u) == 1u ? 32u : 0u), qh = base + 128u + 32u * half_;
          uint scb = base + 192u + 8u * half_ + 2u * qr;
          float d = q_half(base + 208u);
          d0 = d * float(int(q_byte(scb) << 24) >> 24);
          d1 = d * float(int(q_byte(scb + 1u) << 24) >> 24);
          for (uint j = 0u; j < 8u; j++) {
            uint lo = (q_word(ql + 4u * j) >> (qr >= 2u ? 4u : 0u)) & 0x0F0F0F0Fu;
            uint hi = (q_word(qh + 4u * j) >> (2u * qr)) & 0x03030303u;
            uint t6 = (lo | (hi << 4)) ^ 0x20202020u;
            c[j] = int(t6 | ((t6 & 0x20202020u) * 6u));
          }
        }
        for (uint i = 0u; i < MAXM; i++) {
          if (i >= mc) break;
          // x's 32 codes in two 128-bit loads: lanes read 32 bytes apart, so wider loads mean
          // fewer cache transactions per byte
          uint xb = (m0 + i) * (p.k / 16u) + u * 2u, xs = 2u * ((m0 + i) * nu + u);
          ivec4 xa = xq[xb], xc = xq[xb + 1u];
          int s0 = 0, s1 = 0;
          for (uint j = 0u; j < 4u; j++) s0 = dotPacked4x8AccSatEXT(c[j], xa[j], s0);
          for (uint j = 0u; j < 4u; j++) s1 = dotPacked4x8AccSatEXT(c[4u + j], xc[j], s1);
          float part = xd[xs] * (d0 * float(s0) + d1 * float(s1));
          acc[i] += FORMAT == 3u ? part - dm * xd[xs + 1u] : part;
        }
      }
#else
      // float32 x: 4 invocations per unit, 8 weights each, so that a row's 32 lanes read 1 KB
      // of x contiguously (a lane per unit would read 128 bytes apart: 4 times the cache
      // transactions)
      for (uint u = lane >> 2; u < nu; u += LANES / 4u) {
        float v[8];
        uint part = lane & 3u;
        q_part(rb, u, part, v);
        for (uint i = 0u; i < MAXM; i++) {
          if (i >= mc) break;
          uint xb = p.x_off + (m0 + i) * (p.k / 4u) + u * 8u + part * 2u;
          acc[i] += dot(vec4(v[0], v[1], v[2], v[3]), x4[xb]) + dot(vec4(v[4], v[5], v[6], v[7]), x4[xb + 1u]);
        }
      }
#endif
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
