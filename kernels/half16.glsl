// half16.glsl: 16-bit float conversions, bit-exact with runtime/src/dtype.c (round to nearest
// even). The one copy for every kernel: common.glsl includes it, and kernels that declare their
// own buffers and push constants (random, optim, index, sort, matmul ...) include it directly.
#ifndef EMBER_HALF16_GLSL
#define EMBER_HALF16_GLSL

float half_to_float(uint h) {
  uint sign = (h & 0x8000u) << 16;
  uint e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0u) {
    float f = float(m) * 5.9604644775390625e-8;  // subnormal: m * 2^-24
    return sign != 0u ? -f : f;
  }
  if (e == 31u) return uintBitsToFloat(sign | 0x7f800000u | (m << 13));
  return uintBitsToFloat(sign | ((e + 112u) << 23) | (m << 13));
}

uint float_to_half(float f) {
  uint u = floatBitsToUint(f);
  uint sign = (u >> 16) & 0x8000u;
  uint a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u);
  if (a >= 0x477ff000u) return sign | 0x7c00u;  // rounds to infinity
  if (a < 0x38800000u) {                          // a subnormal half: a multiple of 2^-24
    uint m = uint(roundEven(uintBitsToFloat(a) * 16777216.0));
    return sign | m;
  }
  a += 0xc8000fffu + ((a >> 13) & 1u);  // rebias the exponent, round to nearest even
  return (sign | (a >> 13)) & 0xffffu;
}

float bf16_to_float(uint b) { return uintBitsToFloat(b << 16); }

uint float_to_bf16(float f) {
  uint u = floatBitsToUint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return ((u >> 16) | 0x40u) & 0xffffu;  // quiet NaN
  return ((u + 0x7fffu + ((u >> 16) & 1u)) >> 16) & 0xffffu;
}

#endif
