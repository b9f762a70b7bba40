#version 450
// quant_dequant.comp: dequantizes GGUF Q8_0, Q4_0 and Q4_1 blocks into float32
// (runtime/src/quant/quant_blocks.c is the reference; the layouts are in docs/api/quant.md).
//
// Operands: 0 the raw blocks (a uint8 tensor, read as 32-bit words: blocks of 34, 18 or 20
// bytes lie across word boundaries, so bytes are picked out of words), from byte in_off;
// 1 the float32 output, contiguous from element out_off. One invocation per weight.
// Specialization constant 0: the format (0 Q8_0, 1 Q4_0, 2 Q4_1, as em_quant_format).
// Products and sums are `precise`, so they round as the CPU's separate multiply and add.
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer B0 { uint w[]; } src;
layout(std430, set = 0, binding = 1) writeonly buffer B1 { float x[]; } dst;

layout(constant_id = 0) const uint FORMAT = 0u;

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
