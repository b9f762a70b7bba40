#version 450
// special.comp: the unary float functions beyond pointwise.comp's (asin ... digamma, in
// em_unary_op order from EM_ASIN: the op code is op - EM_ASIN). A pipeline of their own keeps
// pointwise.comp, which every op uses, as small to compile as it was.
//
// variants: F32 F64
//   F32: float arithmetic; storage float32, float16, bfloat16 (converted, rounded to nearest even)
//   F64: double arithmetic (special64.glsl on math64.glsl: GLSL has no double transcendentals)
#extension GL_ARB_gpu_shader_int64 : require
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#if defined(VARIANT_F32)
#define T float
#include "math.glsl"
#include "special.glsl"
T load1(uint e) {
  uint f = fmt_of(1u);
  if (f == F_F32) return uintBitsToFloat(LD32(1, e));
  if (f == F_F16) return half_to_float(LD16(1, e));
  return bf16_to_float(LD16(1, e));
}
uvec2 encode(T v) {
  uint f = fmt_of(0u);
  if (f == F_F32) return uvec2(floatBitsToUint(v), 0u);
  if (f == F_F16) return uvec2(float_to_half(v), 0u);
  return uvec2(float_to_bf16(v), 0u);
}
#define FN(name) name##_f
#else
#define T double
#include "math64.glsl"
#include "special64.glsl"
T load1(uint e) { return packDouble2x32(LD64(1, e)); }
uvec2 encode(T v) { return unpackDouble2x32(v); }
#define FN(name) name##_d
#endif

T special_op(uint op, T x) {
  switch (op) {
  case 0u: return FN(asin)(x);
  case 1u: return FN(acos)(x);
  case 2u: return FN(atan2)(x, T(1));
  case 3u: return FN(sinh)(x);
  case 4u: return FN(cosh)(x);
  case 5u: return FN(asinh)(x);
  case 6u: return FN(acosh)(x);
  case 7u: return FN(atanh)(x);
  case 8u: return FN(log2)(x);
  case 9u: return FN(log10)(x);
  case 10u: return FN(exp2)(x);
  case 11u: return FN(erfc)(x);
  case 12u: return FN(erfinv)(x);
  case 13u: return FN(lgamma)(x);
  }
  return FN(digamma)(x);
}

uvec2 element_bits(uint i, uvec4 off) { return encode(special_op(kop(), load1(off.y))); }

KERNEL_MAIN
