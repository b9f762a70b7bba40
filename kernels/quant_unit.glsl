// quant_unit.glsl: decoding quantized weight rows 32 weights at a time, for the quantized
// Linear kernels (quant_matvec.comp, quant_mm.comp). runtime/src/quant/quant_blocks.c is the
// reference and docs/api/quant.md has the layouts.
//
// A "unit" is 32 consecutive weights of a row: a whole block of Q8_0/Q4_0/Q4_1, one of the 8
// sub-blocks of a Q4_K or Q6_K super-block, a slice of an affine group (32, 64 or 128). Every
// format's row is whole units (K is a multiple of 32), so the kernels walk K by units and need
// one decoder per format, chosen by the specialization constant FORMAT (em_quant_format).
//
// The includer declares the blocks as `readonly buffer ... { uint w[]; } qw;` (raw bytes read as
// 32-bit words: blocks of 18, 34 or 210 bytes lie across word boundaries) and the constants
// FORMAT, GROUP and SYMMETRIC. A weight decodes with the same float operations, in the same
// order, as the CPU's dequantizer, so a unit's values are the dequantized tensor's bit for bit.

uint q_byte(uint i) { return (qw.w[i >> 2] >> ((i & 3u) * 8u)) & 0xFFu; }
// Four bytes from byte i, little-endian, at any alignment. The second word is read only when
// the bytes reach into it, so a read never passes the end of the blocks.
uint q_word(uint i) {
  uint a = i >> 2, sh = (i & 3u) * 8u;
  uint lo = qw.w[a];
  return sh == 0u ? lo : (lo >> sh) | (qw.w[a + 1u] << (32u - sh));
}
// A NaN scale decodes to the one quiet NaN, as on the CPU.
float q_half_bits(uint h) {
  if ((h & 0x7C00u) == 0x7C00u && (h & 0x3FFu) != 0u) return uintBitsToFloat(0x7FC00000u);
  return unpackHalf2x16(h).x;
}
float q_half(uint i) { return q_half_bits(q_byte(i) | (q_byte(i + 1u) << 8)); }
uint q_nibble(uint word, uint b, bool high) { return (word >> (8u * b + (high ? 4u : 0u))) & 15u; }

// The 32 weights of unit u of the row whose blocks start at byte rb.
void q_unit(uint rb, uint u, out float v[32]) {
  if (FORMAT == 0u) {         // Q8_0: fp16 d, 32 int8 codes
    uint base = rb + u * 34u;
    float d = q_half(base);
    for (uint i = 0u; i < 8u; i++) {
      uint c = q_word(base + 2u + 4u * i);
      for (uint b = 0u; b < 4u; b++) v[4u * i + b] = float(int(c << (24u - 8u * b)) >> 24) * d;
    }
  } else if (FORMAT == 1u || FORMAT == 2u) {  // Q4_0: fp16 d, 16 bytes; Q4_1 adds fp16 m
    uint base = rb + u * (FORMAT == 1u ? 18u : 20u), head = FORMAT == 1u ? 2u : 4u;
    float d = q_half(base), m = FORMAT == 2u ? q_half(base + 2u) : 0.0;
    for (uint i = 0u; i < 4u; i++) {
      uint c = q_word(base + head + 4u * i);
      for (uint b = 0u; b < 4u; b++) {
        uint lo = q_nibble(c, b, false), hi = q_nibble(c, b, true);
        if (FORMAT == 1u) {
          v[4u * i + b] = float(int(lo) - 8) * d;
          v[16u + 4u * i + b] = float(int(hi) - 8) * d;
        } else {
          precise float a0 = float(lo) * d, a1 = float(hi) * d;
          v[4u * i + b] = a0 + m;
          v[16u + 4u * i + b] = a1 + m;
        }
      }
    }
  } else if (FORMAT == 3u) {  // Q4_K: d, dmin, 12 bytes of 6-bit scales/mins, 128 bytes codes
    uint sub = u & 7u, base = rb + (u >> 3) * 144u, sc = base + 4u;
    uint s, mn;
    if (sub < 4u) { s = q_byte(sc + sub) & 63u; mn = q_byte(sc + sub + 4u) & 63u; }
    else {
      s = (q_byte(sc + sub + 4u) & 15u) | ((q_byte(sc + sub - 4u) >> 6) << 4);
      mn = (q_byte(sc + sub + 4u) >> 4) | ((q_byte(sc + sub) >> 6) << 4);
    }
    precise float d1 = q_half(base) * float(s);
    precise float m1 = q_half(base + 2u) * float(mn);
    uint codes = base + 16u + 32u * (sub >> 1);
    for (uint i = 0u; i < 8u; i++) {
      uint c = q_word(codes + 4u * i);
      for (uint b = 0u; b < 4u; b++) {
        precise float prod = d1 * float(q_nibble(c, b, (sub & 1u) == 1u));
        v[4u * i + b] = prod - m1;
      }
    }
  } else if (FORMAT == 4u) {  // Q6_K: 128 bytes low nibbles, 64 of high bit pairs, 16 scales, d
    uint sub = u & 7u, half_ = sub >> 2, qr = sub & 3u, base = rb + (u >> 3) * 210u;
    uint ql = base + 64u * half_ + ((qr & 1u) == 1u ? 32u : 0u), qh = base + 128u + 32u * half_;
    uint scb = base + 192u + 8u * half_ + 2u * qr;
    float d = q_half(base + 208u);
    precise float ds0 = d * float(int(q_byte(scb) << 24) >> 24);
    precise float ds1 = d * float(int(q_byte(scb + 1u) << 24) >> 24);
    for (uint i = 0u; i < 8u; i++) {
      uint a = q_word(ql + 4u * i), h = q_word(qh + 4u * i);
      for (uint b = 0u; b < 4u; b++) {
        uint low = q_nibble(a, b, qr >= 2u), hi = (h >> (8u * b + 2u * qr)) & 3u;
        precise float ds = i < 4u ? ds0 : ds1;
        v[4u * i + b] = ds * float(int(low | (hi << 4)) - 32);
      }
    }
  } else {                    // affine int8/int4: fp16 scale [fp16 min], codes
    bool eight = FORMAT == 5u;
    uint head = SYMMETRIC == 1u ? 2u : 4u, gb = head + (eight ? GROUP : GROUP / 2u);
    uint e0 = u * 32u, base = rb + (e0 / GROUP) * gb, j0 = e0 % GROUP;
    float scale = q_half(base), mn = SYMMETRIC == 1u ? 0.0 : q_half(base + 2u);
    int zero = SYMMETRIC == 1u ? (eight ? 128 : 8) : 0;
    for (uint i = 0u; i < (eight ? 8u : 4u); i++) {
      uint c = q_word(base + head + (eight ? j0 : j0 / 2u) + 4u * i);
      for (uint b = 0u; b < 4u; b++) {
        if (eight) {
          uint q = (c >> (8u * b)) & 0xFFu;
          precise float prod = float(int(q) - zero) * scale;
          v[4u * i + b] = SYMMETRIC == 1u ? prod : prod + mn;
        } else {
          precise float p0 = float(int(q_nibble(c, b, false)) - zero) * scale;
          precise float p1 = float(int(q_nibble(c, b, true)) - zero) * scale;
          v[8u * i + 2u * b] = SYMMETRIC == 1u ? p0 : p0 + mn;
          v[8u * i + 2u * b + 1u] = SYMMETRIC == 1u ? p1 : p1 + mn;
        }
      }
    }
  }
}

// Weights 8 * part .. 8 * part + 7 (part 0..3) of unit u of the row at byte rb, decoded as
// q_unit decodes them (the same operations, so the same values). The matrix-vector kernel
// spreads a unit over 4 invocations with it, so that neighbouring invocations read neighbouring
// activations.
void q_part(uint rb, uint u, uint part, out float v[8]) {
  if (FORMAT == 0u) {
    uint base = rb + u * 34u;
    float d = q_half(base);
    for (uint i = 0u; i < 2u; i++) {
      uint c = q_word(base + 2u + 8u * part + 4u * i);
      for (uint b = 0u; b < 4u; b++) v[4u * i + b] = float(int(c << (24u - 8u * b)) >> 24) * d;
    }
  } else if (FORMAT == 1u || FORMAT == 2u) {
    uint base = rb + u * (FORMAT == 1u ? 18u : 20u), head = FORMAT == 1u ? 2u : 4u;
    float d = q_half(base), m = FORMAT == 2u ? q_half(base + 2u) : 0.0;
    for (uint i = 0u; i < 2u; i++) {
      uint c = q_word(base + head + 8u * (part & 1u) + 4u * i);
      for (uint b = 0u; b < 4u; b++) {
        uint q = q_nibble(c, b, part >= 2u);
        if (FORMAT == 1u) v[4u * i + b] = float(int(q) - 8) * d;
        else {
          precise float a = float(q) * d;
          v[4u * i + b] = a + m;
        }
      }
    }
  } else if (FORMAT == 3u) {
    uint sub = u & 7u, base = rb + (u >> 3) * 144u, sc = base + 4u;
    uint s, mn;
    if (sub < 4u) { s = q_byte(sc + sub) & 63u; mn = q_byte(sc + sub + 4u) & 63u; }
    else {
      s = (q_byte(sc + sub + 4u) & 15u) | ((q_byte(sc + sub - 4u) >> 6) << 4);
      mn = (q_byte(sc + sub + 4u) >> 4) | ((q_byte(sc + sub) >> 6) << 4);
    }
    precise float d1 = q_half(base) * float(s);
    precise float m1 = q_half(base + 2u) * float(mn);
    uint codes = base + 16u + 32u * (sub >> 1) + 8u * part;
    for (uint i = 0u; i < 2u; i++) {
      uint c = q_word(codes + 4u * i);
      for (uint b = 0u; b < 4u; b++) {
        precise float prod = d1 * float(q_nibble(c, b, (sub & 1u) == 1u));
        v[4u * i + b] = prod - m1;
      }
    }
  } else if (FORMAT == 4u) {
    uint sub = u & 7u, half_ = sub >> 2, qr = sub & 3u, base = rb + (u >> 3) * 210u;
    uint ql = base + 64u * half_ + ((qr & 1u) == 1u ? 32u : 0u) + 8u * part;
    uint qh = base + 128u + 32u * half_ + 8u * part;
    uint scb = base + 192u + 8u * half_ + 2u * qr + (part >> 1);
    precise float ds = q_half(base + 208u) * float(int(q_byte(scb) << 24) >> 24);
    for (uint i = 0u; i < 2u; i++) {
      uint a = q_word(ql + 4u * i), h = q_word(qh + 4u * i);
      for (uint b = 0u; b < 4u; b++) {
        uint low = q_nibble(a, b, qr >= 2u), hi = (h >> (8u * b + 2u * qr)) & 3u;
        v[4u * i + b] = ds * float(int(low | (hi << 4)) - 32);
      }
    }
  } else {
    bool eight = FORMAT == 5u;
    uint head = SYMMETRIC == 1u ? 2u : 4u, gb = head + (eight ? GROUP : GROUP / 2u);
    uint e0 = u * 32u, base = rb + (e0 / GROUP) * gb, j0 = e0 % GROUP + 8u * part;
    float scale = q_half(base), mn = SYMMETRIC == 1u ? 0.0 : q_half(base + 2u);
    int zero = SYMMETRIC == 1u ? (eight ? 128 : 8) : 0;
    if (eight) {
      for (uint i = 0u; i < 2u; i++) {
        uint c = q_word(base + head + j0 + 4u * i);
        for (uint b = 0u; b < 4u; b++) {
          precise float prod = float(int((c >> (8u * b)) & 0xFFu) - zero) * scale;
          v[4u * i + b] = SYMMETRIC == 1u ? prod : prod + mn;
        }
      }
    } else {
      uint c = q_word(base + head + j0 / 2u);
      for (uint b = 0u; b < 4u; b++) {
        precise float p0 = float(int(q_nibble(c, b, false)) - zero) * scale;
        precise float p1 = float(int(q_nibble(c, b, true)) - zero) * scale;
        v[2u * b] = SYMMETRIC == 1u ? p0 : p0 + mn;
        v[2u * b + 1u] = SYMMETRIC == 1u ? p1 : p1 + mn;
      }
    }
  }
}
