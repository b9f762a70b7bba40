#version 450
// quant_dequant.comp: dequantizes GGUF Q8_0, Q4_0, Q4_1, Q4_K and Q6_K blocks into float32
// (runtime/src/quant/quant_blocks.c is the reference; the layouts are in docs/api/quant.md).
//
// Operands: 0 the raw blocks (a uint8 tensor, read as 32-bit words: blocks of 34, 18 or 20
// bytes lie across word boundaries, so bytes are picked out of words), from byte in_off;
// 1 the float32 output, contiguous from element out_off. One invocation per weight.
// Specialization constants: 0 the format (0 Q8_0, 1 Q4_0, 2 Q4_1, 3 Q4_K, 4 Q6_K, 5 int8,
// 6 int4, as em_quant_format); 1 and 2 the affine formats' group and symmetry.
// Products and sums are `precise`, so they round as the CPU's separate multiply and add.
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer B0 { uint w[]; } src;
layout(std430, set = 0, binding = 1) writeonly buffer B1 { float x[]; } dst;

layout(constant_id = 0) const uint FORMAT = 0u;
layout(constant_id = 1) const uint GROUP = 32u;     // int8 / int4: weights per group
layout(constant_id = 2) const uint SYMMETRIC = 0u;  // int8 / int4: 1 without a minimum

layout(push_constant) uniform Params {
  uint n;        // weights
  uint in_off;   // first byte of the blocks
  uint out_off;  // first output element
} p;

uint byte_at(uint i) { return (src.w[i >> 2] >> ((i & 3u) * 8u)) & 0xFFu; }
// A NaN scale decodes to the one quiet NaN, as on the CPU (quant_blocks.c says why).
float half_at(uint i) {
  uint h = byte_at(i) | (byte_at(i + 1u) << 8);
  if ((h & 0x7C00u) == 0x7C00u && (h & 0x3FFu) != 0u) return uintBitsToFloat(0x7FC00000u);
  return unpackHalf2x16(h).x;
}

void main() {
  uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
    uint b = i / 32u, j = i % 32u;
    precise float v;
    if (FORMAT == 0u) {
      uint base = p.in_off + b * 34u;
      int q = int(byte_at(base + 2u + j) << 24) >> 24;
      v = float(q) * half_at(base);
    } else if (FORMAT == 1u) {
      uint base = p.in_off + b * 18u;
      uint byt = byte_at(base + 2u + (j & 15u));
      uint q = j < 16u ? (byt & 15u) : (byt >> 4);
      v = float(int(q) - 8) * half_at(base);
    } else if (FORMAT == 3u) {
      // Q4_K: d, dmin, 12 bytes of 6-bit scales/mins for 8 sub-blocks of 32, 128 bytes of codes
      uint sb = i / 256u, r = i % 256u, sub = r / 32u, l = r % 32u;
      uint base = p.in_off + sb * 144u, sc = base + 4u;
      uint s, m;
      if (sub < 4u) { s = byte_at(sc + sub) & 63u; m = byte_at(sc + sub + 4u) & 63u; }
      else {
        s = (byte_at(sc + sub + 4u) & 15u) | ((byte_at(sc + sub - 4u) >> 6) << 4);
        m = (byte_at(sc + sub + 4u) >> 4) | ((byte_at(sc + sub) >> 6) << 4);
      }
      uint byt = byte_at(base + 16u + 32u * (sub / 2u) + l);
      uint q = (sub & 1u) == 0u ? (byt & 15u) : (byt >> 4);
      precise float d1 = half_at(base) * float(s);
      precise float m1 = half_at(base + 2u) * float(m);
      precise float prod = d1 * float(q);
      v = prod - m1;
    } else if (FORMAT == 4u) {
      // Q6_K: 128 bytes of low nibbles, 64 of high bit pairs, 16 int8 scales, fp16 d
      uint sb = i / 256u, r = i % 256u, n = r / 128u, rr = r % 128u, k = rr / 32u, l = rr % 32u;
      uint base = p.in_off + sb * 210u;
      uint ql = byte_at(base + 64u * n + l + ((k & 1u) == 1u ? 32u : 0u));
      uint low = k < 2u ? (ql & 15u) : (ql >> 4);
      uint qh = (byte_at(base + 128u + 32u * n + l) >> (2u * k)) & 3u;
      int sc = int(byte_at(base + 192u + 8u * n + l / 16u + 2u * k) << 24) >> 24;
      precise float ds = half_at(base + 208u) * float(sc);
      v = ds * float(int(low | (qh << 4)) - 32);
    } else if (FORMAT == 5u || FORMAT == 6u) {
      // affine: [fp16 scale][fp16 min, asymmetric only][codes: bytes, or nibbles low first]
      uint bits = FORMAT == 5u ? 8u : 4u;
      uint head = SYMMETRIC == 1u ? 2u : 4u;
      uint g = i / GROUP, j = i % GROUP;
      uint base = p.in_off + g * (head + (bits == 8u ? GROUP : GROUP / 2u));
      uint c = bits == 8u ? byte_at(base + head + j)
                          : ((j & 1u) == 0u ? (byte_at(base + head + j / 2u) & 15u)
                                            : (byte_at(base + head + j / 2u) >> 4));
      float scale = half_at(base);
      if (SYMMETRIC == 1u) v = float(int(c) - int(1u << (bits - 1u))) * scale;
      else {
        precise float prod = float(c) * scale;
        v = prod + half_at(base + 2u);
      }
    } else {
      uint base = p.in_off + b * 20u;
      uint byt = byte_at(base + 4u + (j & 15u));
      uint q = j < 16u ? (byt & 15u) : (byt >> 4);
      precise float prod = float(q) * half_at(base);
      v = prod + half_at(base + 2u);
    }
    dst.x[p.out_off + i] = v;
  }
}
