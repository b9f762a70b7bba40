#version 450
// cast.comp: conversions between dtypes, and the generated ranges arange and linspace, with
// the CPU's rules (runtime/src/cpu/copy.c): a float becomes an integer by truncation, with NaN
// giving 0 and values beyond int64 saturating, then keeps the low bits of the target width;
// integers convert exactly between integer types; bool is value != 0; 16-bit floats round to
// nearest even.
//   op 0  cast:     out = operand 1 converted
//   op 1  arange:   out[i] = start + i * step          (operand 0 only; 1-D contiguous)
//   op 2  linspace: out[i] = start + i * step for the first half, end - (n - 1 - i) * step
//                   for the second, so both ends are exact
//   op 3  arange over integers: start + i * step in int64 (exact)
// Arguments: start in arg[0..1], step in arg[2..3], end in stride[8..9] (doubles in the F64
// variant, floats in arg[0], arg[2], stride[8] in the BASE variant, int64 for op 3).
//
// variants: BASE F64
//   BASE: every dtype but float64 (no 64-bit float arithmetic needed)
//   F64:  every pair, through double exactly as the CPU does (float64 devices)
#extension GL_ARB_gpu_shader_int64 : require
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

bool is_float_fmt(uint f) { return f <= F_BF16; }

int64_t load_int1(uint e, uint f) {
  if (f == F_I64) return int64_t(packUint2x32(LD64(1, e)));
  if (f == F_I32) return int64_t(int(LD32(1, e)));
  if (f == F_I16) return int64_t(bitfieldExtract(int(LD16(1, e)), 0, 16));
  if (f == F_I8) return int64_t(bitfieldExtract(int(LD8(1, e)), 0, 8));
  if (f == F_U8) return int64_t(LD8(1, e));
  return LD8(1, e) != 0u ? 1l : 0l;
}

// The output's bits: the low bits of an integer (the store keeps what the format holds).
uvec2 encode_int(uint f, int64_t v) {
  if (f == F_I64) return unpackUint2x32(uint64_t(v));
  if (f == F_BOOL) return uvec2(v != 0l ? 1u : 0u, 0u);
  return uvec2(uint(v), 0u);
}

float load_float1(uint e, uint f) {
  if (f == F_F32) return uintBitsToFloat(LD32(1, e));
  if (f == F_F16) return half_to_float(LD16(1, e));
  return bf16_to_float(LD16(1, e));
}

uvec2 encode_float(uint f, float v) {
  if (f == F_F32) return uvec2(floatBitsToUint(v), 0u);
  if (f == F_F16) return uvec2(float_to_half(v), 0u);
  return uvec2(float_to_bf16(v), 0u);
}

#if defined(VARIANT_F64)
#define R double
#define R_INT64_MAX 9.2233720368547758e18lf
R load_real1(uint e, uint f) {
  if (f == F_F64) return packDouble2x32(LD64(1, e));
  if (is_float_fmt(f)) return double(load_float1(e, f));
  return double(load_int1(e, f));
}
R arg_real(uint lo, uint hi) { return packDouble2x32(uvec2(lo, hi)); }
#else
#define R float
#define R_INT64_MAX 9.2233720368547758e18
R load_real1(uint e, uint f) {
  if (is_float_fmt(f)) return load_float1(e, f);
  return float(load_int1(e, f));
}
R arg_real(uint lo, uint hi) { return uintBitsToFloat(lo); }
#endif

// A real to an int64, as the CPU's double_to_int64: NaN is 0, out of range saturates.
int64_t real_to_int(R v) {
  if (isnan(v)) return 0l;
  if (v >= R_INT64_MAX) return 0x7fffffffffffffffl;
  if (v <= -R_INT64_MAX) return int64_t(0x8000000000000000ul);
  return int64_t(v);
}

uvec2 encode_real(uint f, R v) {
#if defined(VARIANT_F64)
  if (f == F_F64) return unpackDouble2x32(v);
#endif
  if (f == F_BOOL) return uvec2(v != R(0) ? 1u : 0u, 0u);
  if (is_float_fmt(f)) return encode_float(f, float(v));
  return encode_int(f, real_to_int(v));
}

uvec2 element_bits(uint i, uvec4 off) {
  uint fo = fmt_of(0u), fi = fmt_of(1u);
  if (kop() == 0u) {
    if (!is_float_fmt(fo) && !is_float_fmt(fi)) return encode_int(fo, load_int1(off.y, fi));
    return encode_real(fo, load_real1(off.y, fi));
  }
  if (kop() == 3u) {
    int64_t start = int64_t(packUint2x32(uvec2(pc.arg[0], pc.arg[1])));
    int64_t step = int64_t(packUint2x32(uvec2(pc.arg[2], pc.arg[3])));
    return encode_int(fo, start + int64_t(i) * step);
  }
  R start = arg_real(pc.arg[0], pc.arg[1]), step = arg_real(pc.arg[2], pc.arg[3]);
  if (kop() == 1u || i < pc.n / 2u) return encode_real(fo, start + step * R(i));
  R end = arg_real(uint(pc.stride[8]), uint(pc.stride[9]));
  return encode_real(fo, end - step * R(pc.n - 1u - i));
}

KERNEL_MAIN
