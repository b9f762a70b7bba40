// reduce.glsl: what the reduction-family kernels share (reduce.comp, scan.comp, softmax.comp;
// runtime/src/vulkan/vk_reduce*.c fill the other side).
//
// The host sees every job as lines: x viewed as [A, R, K] with arbitrary element strides, where
// R is the reduced (or scanned) extent and (a, k) names one line; line o = a * K + k. A
// workgroup of 256 invocations works on 256 / TR lines with TR invocations along each line
// (TR, the lane count, is a specialization constant). The ROW layout puts neighbouring
// invocations along a line (coalesced when R is the contiguous extent); the COL layout puts
// them across lines (coalesced when K is). Lanes combine through shared memory.
//
// Buffers are seen as 32-bit words whatever the dtype (the device may lack 16-bit storage):
// 8- and 16-bit elements are packed in words (stores merge them atomically, since neighbours
// may belong to other invocations), 64-bit ones take two words. The accumulator type follows
// the variant: float (F32: float32, float16, bfloat16 inputs), double (F64), int64 (I64: every
// integer dtype and bool).
#extension GL_ARB_gpu_shader_int64 : require

#define F_F32 0u
#define F_F64 1u
#define F_F16 2u
#define F_BF16 3u
#define F_I8 4u
#define F_U8 5u
#define F_I16 6u
#define F_I32 7u
#define F_I64 8u
#define F_BOOL 9u

layout(local_size_x = 256) in;

// constant_id 0 and 1 are the kernel's op and formats; 2 and 3 the lane count and layout.
layout(constant_id = 2) const uint TR = 1u;
layout(constant_id = 3) const uint LAYOUT = 0u;
const uint LINES = 256u / TR; // lines per workgroup

#if defined(VARIANT_F64)
#include "math64.glsl"
#define ACC double
#define EXP(v) exp_d(v)
#define LOG(v) log_d(v)
#define POW(a, b) pow_d(a, b)
#define ACC_NAN D_NAN
#define ACC_INF D_INF
#define ACC_FMT F_F64
ACC arg_acc(uvec2 bits) { return packDouble2x32(bits); }
#elif defined(VARIANT_I64)
#define ACC int64_t
#define ACC_FMT F_I64
#else
#include "math.glsl"
#define ACC float
#define EXP(v) exp_f(v)
#define LOG(v) log_f(v)
#define POW(a, b) pow_f(a, b)
#define ACC_NAN F_NAN
#define ACC_INF F_INF
#define ACC_FMT F_F32
ACC arg_acc(uvec2 bits) { return uintBitsToFloat(bits.x); }
#endif

#include "half16.glsl"

// ---- loads: element e of format f of a word buffer, as the accumulator type ----
#if defined(VARIANT_I64)
#define DEFINE_LOAD(NAME, BUF)                                                          \
  ACC NAME(uint e, uint f) {                                                            \
    if (f == F_I64) return int64_t(packUint2x32(uvec2(BUF.w[2u * e], BUF.w[2u * e + 1u]))); \
    if (f == F_I32) return int64_t(int(BUF.w[e]));                                      \
    if (f == F_I16) return int64_t(bitfieldExtract(int(BUF.w[e >> 1]), int((e & 1u) * 16u), 16)); \
    if (f == F_I8) return int64_t(bitfieldExtract(int(BUF.w[e >> 2]), int((e & 3u) * 8u), 8)); \
    uint b = (BUF.w[e >> 2] >> ((e & 3u) * 8u)) & 0xffu;                                \
    return f == F_BOOL ? (b != 0u ? 1l : 0l) : int64_t(b);                              \
  }
#elif defined(VARIANT_F64)
// (scans accumulate float32, float16 and bfloat16 in double too, on float64 devices)
#define DEFINE_LOAD(NAME, BUF)                                                          \
  ACC NAME(uint e, uint f) {                                                            \
    if (f == F_F64) return packDouble2x32(uvec2(BUF.w[2u * e], BUF.w[2u * e + 1u]));    \
    if (f == F_F32) return double(uintBitsToFloat(BUF.w[e]));                           \
    uint h = (BUF.w[e >> 1] >> ((e & 1u) * 16u)) & 0xffffu;                             \
    return double(f == F_F16 ? half_to_float(h) : bf16_to_float(h));                    \
  }
#else
#define DEFINE_LOAD(NAME, BUF)                                                          \
  ACC NAME(uint e, uint f) {                                                            \
    if (f == F_F32) return uintBitsToFloat(BUF.w[e]);                                   \
    uint h = (BUF.w[e >> 1] >> ((e & 1u) * 16u)) & 0xffffu;                             \
    return f == F_F16 ? half_to_float(h) : bf16_to_float(h);                            \
  }
#endif

// ---- stores: the accumulator into element e of format f (an integer keeps its low bits,
// bool is v != 0) ----
#define DEFINE_STORE(NAME, BUF)                                                         \
  void NAME##_bits(uint e, uint size, uvec2 v) {                                        \
    if (size == 4u) {                                                                   \
      BUF.w[e] = v.x;                                                                   \
    } else if (size == 8u) {                                                            \
      BUF.w[2u * e] = v.x;                                                              \
      BUF.w[2u * e + 1u] = v.y;                                                         \
    } else {                                                                            \
      uint per = 4u / size, s = (e % per) * 8u * size;                                 \
      uint m = (size == 1u ? 0xffu : 0xffffu) << s;                                     \
      atomicAnd(BUF.w[e / per], ~m);                                                    \
      atomicOr(BUF.w[e / per], (v.x << s) & m);                                         \
    }                                                                                   \
  }                                                                                     \
  void NAME(uint e, uint f, ACC v) {                                                    \
    NAME##_bits(e, fmt_size(f), encode(f, v));                                          \
  }

uint fmt_size(uint f) {
  if (f == F_F64 || f == F_I64) return 8u;
  if (f == F_F32 || f == F_I32) return 4u;
  if (f == F_F16 || f == F_BF16 || f == F_I16) return 2u;
  return 1u;
}

uvec2 encode(uint f, ACC v) {
#if defined(VARIANT_I64)
  if (f == F_BOOL) return uvec2(v != 0l ? 1u : 0u, 0u);
  return unpackUint2x32(uint64_t(v));
#else
  if (f == F_BOOL) return uvec2(v != ACC(0) ? 1u : 0u, 0u);
#if defined(VARIANT_F64)
  if (f == F_F64) return unpackDouble2x32(v);
#endif
  float s = float(v);
  if (f == F_F16) return uvec2(float_to_half(s), 0u);
  if (f == F_BF16) return uvec2(float_to_bf16(s), 0u);
  return uvec2(floatBitsToUint(s), 0u);
#endif
}

// The workgroup's line and lane of this invocation.
void line_lane(out uint line, out uint lane) {
  uint t = gl_LocalInvocationID.x;
  if (LAYOUT == 0u) {
    lane = t % TR;
    line = t / TR;
  } else {
    line = t % LINES;
    lane = t / LINES;
  }
}
