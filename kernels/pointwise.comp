#version 450
// pointwise.comp: the unary, binary and ternary elementwise ops (clamp, lerp, addcmul,
// addcdiv) of one compute class, chosen by the op code in the push constants: one pipeline per
// class instead of one per op keeps lavapipe's LLVM compilations few.
//
// variants: F32 I32 F64 I64
//   F32: float arithmetic; storage float32, float16, bfloat16 (converted, rounded to nearest even)
//   I32: 32-bit integer arithmetic; storage int8, uint8, int16, int32, bool (results truncate to
//        the storage width, so they wrap as the CPU's do)
//   F64: double arithmetic (transcendental functions from math64.glsl: GLSL has none)
//   I64: 64-bit integer arithmetic
// Operand 0 is the output (the compute format, or bool for predicates and comparisons), then x
// (unary), a and b (binary), or x and two more (ternary). Integer division by zero gives 0 (the
// CPU raises an error instead; docs/devices.md).
#extension GL_ARB_gpu_shader_int64 : require
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#if defined(VARIANT_F32)
#define T float
#define IS_FLOAT 1
#define NAN_T uintBitsToFloat(0x7fc00000u)
#include "math.glsl"
#elif defined(VARIANT_F64)
#define T double
#define IS_FLOAT 1
#define NAN_T packDouble2x32(uvec2(0u, 0x7ff80000u))
#include "math64.glsl"
#elif defined(VARIANT_I32)
#define T int
#define IS_FLOAT 0
#else
#define T int64_t
#define IS_FLOAT 0
#endif

// Op codes: em_unary_op values, 32 + em_binary_op values, then these.
#define OP_ADD_ALPHA 57u
#define OP_CLAMP 64u
#define OP_LERP 65u
#define OP_ADDCMUL 66u
#define OP_ADDCDIV 67u
#define FLAG_HAS_LO (1u << 16)
#define FLAG_HAS_HI (1u << 17)

// ---- typed access: operands 1-3 share the compute format; operand 0 may be bool ----
#if defined(VARIANT_F32)
#define DEFINE_LOAD(K)                                                                   \
  T fetch##K(uint e) {                                                                   \
    uint f = fmt_of(K);                                                                 \
    if (f == F_F32) return uintBitsToFloat(LD32(K, e));                                 \
    if (f == F_F16) return half_to_float(LD16(K, e));                                   \
    return bf16_to_float(LD16(K, e));                                                   \
  }
uvec2 encode(T v) {
  uint f = fmt_of(0u);
  if (f == F_F32) return uvec2(floatBitsToUint(v), 0u);
  if (f == F_F16) return uvec2(float_to_half(v), 0u);
  return uvec2(float_to_bf16(v), 0u);
}
T scalar_arg() { return uintBitsToFloat(pc.arg[0]); }
#elif defined(VARIANT_F64)
#define DEFINE_LOAD(K)                                                                   \
  T fetch##K(uint e) { return packDouble2x32(LD64(K, e)); }
uvec2 encode(T v) { return unpackDouble2x32(v); }
T scalar_arg() { return packDouble2x32(uvec2(pc.arg[0], pc.arg[1])); }
#elif defined(VARIANT_I32)
// Sign- or zero-extended to int; bool reads as 0 or 1.
#define DEFINE_LOAD(K)                                                                   \
  T fetch##K(uint e) {                                                                   \
    uint f = fmt_of(K);                                                                 \
    if (f == F_I32) return int(LD32(K, e));                                             \
    if (f == F_I16) return bitfieldExtract(int(LD16(K, e)), 0, 16);                     \
    if (f == F_I8) return bitfieldExtract(int(LD8(K, e)), 0, 8);                        \
    if (f == F_U8) return int(LD8(K, e));                                               \
    return LD8(K, e) != 0u ? 1 : 0;                                                     \
  }
uvec2 encode(T v) {  // the low bits: the store keeps what the format holds
  return uvec2(fmt_of(0u) == F_BOOL ? (v != 0 ? 1u : 0u) : uint(v), 0u);
}
T scalar_arg() { return int(pc.arg[0]); }
#else
#define DEFINE_LOAD(K)                                                                   \
  T fetch##K(uint e) { return int64_t(packUint2x32(LD64(K, e))); }
uvec2 encode(T v) { return unpackUint2x32(uint64_t(v)); }
T scalar_arg() { return int64_t(packUint2x32(uvec2(pc.arg[0], pc.arg[1]))); }
#endif
DEFINE_LOAD(1)
DEFINE_LOAD(2)
DEFINE_LOAD(3)

// Immediate operands (FLAG_IMM1-3, set by the host): a scalar from the host arrives in the
// push constants instead of a device buffer, already in the compute format: stride[4k + 2]
// and stride[4k + 3] hold operand k's value (its strides are all 0, and those two slots are
// not read for a stride-0 operand's geometry).
#define FLAG_IMM1 (1u << 22)
#define FLAG_IMM2 (1u << 23)
#define FLAG_IMM3 (1u << 24)
T imm_value(uint k) {
  uvec2 bits = uvec2(uint(pc.stride[4u * k + 2u]), uint(pc.stride[4u * k + 3u]));
#if defined(VARIANT_F32)
  return uintBitsToFloat(bits.x);
#elif defined(VARIANT_F64)
  return packDouble2x32(bits);
#elif defined(VARIANT_I32)
  return int(bits.x);
#else
  return int64_t(packUint2x32(bits));
#endif
}
T load1(uint e) { return (kfmt() & FLAG_IMM1) != 0u ? imm_value(1u) : fetch1(e); }
T load2(uint e) { return (kfmt() & FLAG_IMM2) != 0u ? imm_value(2u) : fetch2(e); }
T load3(uint e) { return (kfmt() & FLAG_IMM3) != 0u ? imm_value(3u) : fetch3(e); }

uvec2 encode_bool(bool v) { return uvec2(v ? 1u : 0u, 0u); }

const T ZERO = T(0), ONE = T(1);

#if IS_FLOAT
bool is_nan(T x) { return isnan(x); }
#else
bool is_nan(T x) { return false; }
// Width of the storage format, for shifts.
uint int_bits() {
  uint f = fmt_of(1u);
#if defined(VARIANT_I32)
  return f == F_I32 ? 32u : f == F_I16 ? 16u : 8u;
#else
  return 64u;
#endif
}
T int_floordiv(T a, T b) {
  if (b == ZERO) return ZERO;
  if (b == -ONE) return -a;  // wraps for the most negative value, as the CPU's does
  T q = a / b, r = a - q * b;
  return (r != ZERO && (r < ZERO) != (b < ZERO)) ? q - ONE : q;
}
T int_fmod(T a, T b) {
  if (b == ZERO || b == -ONE) return ZERO;
  return a - (a / b) * b;
}
T int_pow(T a, T b) {
  if (b < ZERO) return ZERO;
  T r = ONE, base = a;
  for (T e = b; e != ZERO; e >>= 1) {  // at most 64 rounds; products wrap
    if ((e & ONE) != ZERO) r *= base;
    base *= base;
  }
  return r;
}
#endif

// ---- unary ----
T unary_op(uint op, T x) {
  switch (op) {
  case 0u: return -x;
  case 1u: return abs(x);
  case 2u: return x > ZERO ? ONE : (x < ZERO ? -ONE : ZERO);  // sign(NaN) = 0
#if IS_FLOAT
  // relu keeps NaN and -0; NVIDIA's compiler turns a bare compare-and-select into a max that
  // drops NaN, so NaN is tested first
  case 14u: return isnan(x) ? x : (x < ZERO ? ZERO : x);
#else
  case 14u: return x < ZERO ? ZERO : x;
#endif
  case 24u: return x * x;
#if IS_FLOAT
  case 7u: return x < ZERO ? NAN_T : sqrt(x);  // NaN outside the domain, as in C
  case 8u: return x < ZERO ? NAN_T : ONE / sqrt(x);
  case 19u: return floor(x);
  case 20u: return ceil(x);
  case 21u: return roundEven(x);
  case 22u: return trunc(x);
  case 23u: return ONE / x;
#else
  case 19u: case 20u: case 21u: case 22u: return x;  // roundings are the identity on integers
  case 30u: return fmt_of(1u) == F_BOOL ? (x == ZERO ? ONE : ZERO) : ~x;
#endif
#if defined(VARIANT_F64)
  case 3u: return exp_d(x);
  case 4u: return log_d(x);
  case 5u: return log1p_d(x);
  case 6u: return expm1_d(x);
  case 9u: return sin_d(x);
  case 10u: return cos_d(x);
  case 11u: return tan_d(x);
  case 12u: return tanh_d(x);
  case 13u: return 1.0lf / (1.0lf + exp_d(-x));
  case 15u: return 0.5lf * x * (1.0lf + erf_d(x * 0.70710678118654752440lf));
  case 16u: return 0.5lf * x * (1.0lf + tanh_d(0.79788456080286535588lf * (x + 0.044715lf * x * x * x)));
  case 17u: return x / (1.0lf + exp_d(-x));
  case 18u: return x > 20.0lf ? x : log1p_d(exp_d(x));
  case 25u: return erf_d(x);
#endif
#if defined(VARIANT_F32)
  case 3u: return exp_f(x);
  case 4u: return log_f(x);
  case 5u: return log1p_f(x);
  case 6u: return expm1_f(x);
  case 9u: return sin(reduce_2pi(x));
  case 10u: return cos(reduce_2pi(x));
  case 11u: return tan(reduce_2pi(x));
  case 12u: return tanh_f(x);
  case 13u: return 1.0 / (1.0 + exp_f(-x));
  case 15u: return 0.5 * x * (1.0 + erf_f(x * 0.70710678118654752440));
  case 16u: return 0.5 * x * (1.0 + tanh_f(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
  case 17u: return x / (1.0 + exp_f(-x));
  case 18u: return x > 20.0 ? x : log1p_f(exp_f(x));
  case 25u: return erf_f(x);
#endif
  }
  return x;
}

bool predicate_op(uint op, T x) {
  switch (op) {
#if IS_FLOAT
  case 26u: return isnan(x);
  case 27u: return isinf(x);
  case 28u: return !isnan(x) && !isinf(x);
#else
  case 26u: return false;
  case 27u: return false;
  case 28u: return true;
#endif
  }
  return x == ZERO;  // logical_not
}

// ---- binary ----
T binary_op(uint op, T a, T b) {
#if !IS_FLOAT
  if (fmt_of(1u) == F_BOOL) {  // bool arithmetic is logic: add = or, mul = and
    bool x = a != ZERO, y = b != ZERO;
    switch (op) {
    case 32u: case 40u: return (x || y) ? ONE : ZERO;
    case 34u: case 41u: return (x && y) ? ONE : ZERO;
    case OP_ADD_ALPHA: return (x || (scalar_arg() != ZERO && y)) ? ONE : ZERO;
    }
  }
#endif
  switch (op) {
  case 32u: return a + b;
  case 33u: return a - b;
  case 34u: return a * b;
  case OP_ADD_ALPHA: {  // not fused into an FMA: the CPU rounds the product first
    precise T prod = scalar_arg() * b;
    precise T sum = a + prod;
    return sum;
  }
#if IS_FLOAT
  case 35u: return a / b;
  case 40u: return (a > b || is_nan(a)) ? a : b;  // NaN on either side wins
  case 41u: return (a < b || is_nan(a)) ? a : b;
#else
  case 35u: return int_floordiv(a, b);
  case 40u: return a > b ? a : b;
  case 41u: return a < b ? a : b;
  case 36u: return int_floordiv(a, b);
  case 37u: return int_pow(a, b);
  case 38u: return int_fmod(a, b);
  case 39u: {
    T r = int_fmod(a, b);
    return (r != ZERO && (r < ZERO) != (b < ZERO)) ? r + b : r;
  }
  case 52u: return a & b;
  case 53u: return a | b;
  case 54u: return a ^ b;
  case 55u: return (b < ZERO || b >= T(int_bits())) ? ZERO : a << b;
  case 56u: return (b < ZERO || b >= T(int_bits())) ? (a < ZERO ? -ONE : ZERO) : a >> b;
#endif
#if defined(VARIANT_F32)
  case 36u: return floordiv_f(a, b);
  case 37u: return pow_f(a, b);
  case 38u: return fmod_f(a, b);
  case 39u: return remainder_f(a, b);
  case 42u: return atan2_f(a, b);
#elif defined(VARIANT_F64)
  case 36u: return floordiv_d(a, b);
  case 37u: return pow_d(a, b);
  case 42u: return atan2_d(a, b);
  case 38u: return fmod_d(a, b);
  case 39u: return remainder_d(a, b);
#endif
  }
  return a;
}

bool compare_op(uint op, T a, T b) {
  switch (op) {
  case 43u: return a == b;
  case 44u: return a != b;
  case 45u: return a < b;
  case 46u: return a <= b;
  case 47u: return a > b;
  case 48u: return a >= b;
  case 49u: return a != ZERO && b != ZERO;
  case 50u: return a != ZERO || b != ZERO;
  }
  return (a != ZERO) != (b != ZERO);  // logical_xor
}

// The bits of one result from the operands' values (v2, v3: ZERO where the op does not read
// them). Both drivers below call it, so the vec4 path computes exactly what the general one does.
uvec2 compute_bits(uint op, T v1, T v2, T v3) {
  if (op < 32u) {
    if (op >= 26u && op <= 29u) return encode_bool(predicate_op(op, v1));
    return encode(unary_op(op, v1));
  }
  if (op < 64u) {
    if (op >= 43u && op <= 51u) return encode_bool(compare_op(op, v1, v2));
    return encode(binary_op(op, v1, v2));
  }
  if (op == OP_CLAMP) {
    T v = v1;
    if ((kfmt() & FLAG_HAS_LO) != 0u && (v < v2 || is_nan(v2))) v = v2;
    if ((kfmt() & FLAG_HAS_HI) != 0u && (v > v3 || is_nan(v3))) v = v3;
    return encode(v);
  }
  if (op == OP_ADDCMUL) return encode(v1 + scalar_arg() * v2 * v3);
#if IS_FLOAT
  if (op == OP_ADDCDIV) return encode(v1 + scalar_arg() * v2 / v3);
  // lerp(start = v1, end = v2, weight = v3), exact at both ends (PyTorch's formula)
  return encode((v3 < T(0.5) && v3 > T(-0.5)) ? v1 + v3 * (v2 - v1) : v2 - (v2 - v1) * (ONE - v3));
#else
  return encode(v1);
#endif
}

// Which operands beyond the first an op reads (clamp's bounds are optional).
bool reads2(uint op) { return op >= 32u && (op != OP_CLAMP || (kfmt() & FLAG_HAS_LO) != 0u); }
bool reads3(uint op) { return op >= 64u && (op != OP_CLAMP || (kfmt() & FLAG_HAS_HI) != 0u); }

uvec2 element_bits(uint i, uvec4 off) {
  uint op = kop();
  T v1 = load1(off.y);
  T v2 = reads2(op) ? load2(off.z) : ZERO;
  T v3 = reads3(op) ? load3(off.w) : ZERO;
  return compute_bits(op, v1, v2, v3);
}

#if defined(VARIANT_F32) || defined(VARIANT_I32)
// ---- the vec4 path: contiguous 32-bit operands (FLAG_VEC4, decided by the host) ----
// When the output and every input are float32 (F32) or int32 (I32), one dimension, the output
// and the non-scalar inputs contiguous and 16-byte aligned, and the other inputs stride-0
// scalars, each invocation loads and stores 4 elements at once (128-bit accesses: what a GPU
// needs to reach its memory bandwidth) in a grid-stride loop over a bounded grid. pc.size[0] is
// the element count (pc.n only sized the grid); the last n % 4 elements go one at a time.
#define FLAG_VEC4 (1u << 21)
layout(std430, set = 0, binding = 0) buffer Quads0 { uvec4 q[]; } qbuf0;
layout(std430, set = 0, binding = 1) readonly buffer Quads1 { uvec4 q[]; } qbuf1;
layout(std430, set = 0, binding = 2) readonly buffer Quads2 { uvec4 q[]; } qbuf2;
layout(std430, set = 0, binding = 3) readonly buffer Quads3 { uvec4 q[]; } qbuf3;
#if defined(VARIANT_F32)
#define T4 vec4
T4 from_bits4(uvec4 w) { return uintBitsToFloat(w); }
#else
#define T4 ivec4
T4 from_bits4(uvec4 w) { return ivec4(w); }
#endif

void vec4_main() {
  uint op = kop(), n = pc.size[0], nq = n >> 2;
  uint gid = gl_GlobalInvocationID.x, step_ = gl_NumWorkGroups.x * uint(WG_SIZE);
  bool r2 = reads2(op), r3 = reads3(op);
  // stride 0: a scalar operand, read once; otherwise the index of its first quad
  bool s1 = pc.stride[4] == 0, s2 = pc.stride[8] == 0, s3 = pc.stride[12] == 0;
  T c1 = s1 ? load1(pc.base[1]) : ZERO;
  T c2 = r2 && s2 ? load2(pc.base[2]) : ZERO;
  T c3 = r3 && s3 ? load3(pc.base[3]) : ZERO;
  uvec4 q0 = uvec4(pc.base[0], pc.base[1], pc.base[2], pc.base[3]) >> 2u;
  // Four quads per iteration, step_ apart (so each load instruction stays coalesced across the
  // subgroup), all loaded before any is stored: the output may alias an input as far as the
  // compiler knows, so only loads written first are in flight together. One quad at a time
  // kept an H200 at 3.3 of its 4.3 TB/s.
#define QUAD_IN(x1, x2, x3, v)                                                               \
  T4 x1 = s1 ? T4(c1) : from_bits4(qbuf1.q[q0.y + v]);                                       \
  T4 x2 = !r2 ? T4(ZERO) : s2 ? T4(c2) : from_bits4(qbuf2.q[q0.z + v]);                      \
  T4 x3 = !r3 ? T4(ZERO) : s3 ? T4(c3) : from_bits4(qbuf3.q[q0.w + v]);
#define QUAD_OUT(x1, x2, x3, v)                                                              \
  qbuf0.q[q0.x + v] = uvec4(compute_bits(op, x1.x, x2.x, x3.x).x,                           \
                            compute_bits(op, x1.y, x2.y, x3.y).x,                           \
                            compute_bits(op, x1.z, x2.z, x3.z).x,                           \
                            compute_bits(op, x1.w, x2.w, x3.w).x);
  uint v = gid;
  for (; nq >= 3u * step_ && v < nq - 3u * step_; v += 4u * step_) {
    uint v1 = v + step_, v2 = v1 + step_, v3 = v2 + step_;
    QUAD_IN(a1, a2, a3, v) QUAD_IN(b1, b2, b3, v1) QUAD_IN(c1_, c2_, c3_, v2)
    QUAD_IN(d1, d2, d3, v3)
    QUAD_OUT(a1, a2, a3, v) QUAD_OUT(b1, b2, b3, v1) QUAD_OUT(c1_, c2_, c3_, v2)
    QUAD_OUT(d1, d2, d3, v3)
  }
  for (; v < nq; v += step_) {  // the last quads, one at a time
    QUAD_IN(x1, x2, x3, v)
    QUAD_OUT(x1, x2, x3, v)
    if (nq - v <= step_) break;
  }
  if (gid < (n & 3u)) {  // the tail, one element per invocation
    uint e = 4u * nq + gid;
    T v1 = s1 ? c1 : load1(pc.base[1] + e);
    T v2 = !r2 ? ZERO : s2 ? c2 : load2(pc.base[2] + e);
    T v3 = !r3 ? ZERO : s3 ? c3 : load3(pc.base[3] + e);
    ST32(0, pc.base[0] + e, compute_bits(op, v1, v2, v3).x);
  }
}

KERNEL_MAIN_AS(general_main)
void main() {
  if ((kfmt() & FLAG_VEC4) != 0u) vec4_main();
  else general_main();
}
#else
KERNEL_MAIN
#endif
