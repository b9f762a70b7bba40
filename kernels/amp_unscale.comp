#version 450
// variants: F32 F64 F16 BF16
//
// amp_unscale.comp: GradScaler's fused pass over one gradient (runtime/src/cpu/amp.c is the
// reference): each element is checked for inf / NaN as read and multiplied by inv_scale in
// place; any invocation that read a non-finite element writes 1.0 into found_inf. The flag
// only ever goes from 0 to 1, so concurrent writers need no atomics, and the host reads it
// once per step, after every gradient's dispatch.
//
// Operands: 0 the gradient (contiguous from element off; the host copies a strided one to a
// contiguous temporary first), 1 found_inf (float32, element flag_off). 16-bit gradients are
// packed two to a 32-bit word, and each invocation owns whole words (the halves outside
// [off, off + n) are written back unchanged), so no word has two writers. The checks test the
// exponent bits, which no compiler may fold away as it may isinf / isnan.
// Specialization constant 0: 1 for a check-only pass (inv_scale is exactly 1: nothing written).
#extension GL_GOOGLE_include_directive : require
#if defined(VARIANT_F64)
#extension GL_ARB_gpu_shader_fp64 : require
#define ELEM double
#elif defined(VARIANT_F32)
#define ELEM float
#else
#define ELEM uint
#include "half16.glsl"
#endif

layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) buffer B0 { ELEM x[]; } g;
layout(std430, set = 0, binding = 1) buffer B1 { float x[]; } flag;

layout(constant_id = 0) const uint CHECK_ONLY = 0u;

layout(push_constant) uniform Params {
  uint n;        // elements of the gradient
  uint off;      // its first element
  uint flag_off; // found_inf's element
  float inv;     // inv_scale, as float32 (PyTorch's scale tensor is float32)
} p;

#if defined(VARIANT_F16) || defined(VARIANT_BF16)
#if defined(VARIANT_F16)
bool bad16(uint h) { return (h & 0x7c00u) == 0x7c00u; }
#define TO_F(h) half_to_float(h)
#define FROM_F(v) float_to_half(v)
#else
bool bad16(uint h) { return (h & 0x7f80u) == 0x7f80u; }
#define TO_F(h) bf16_to_float(h)
#define FROM_F(v) float_to_bf16(v)
#endif

// Word w holds elements 2w and 2w + 1: only those in [off, off + n) are ours.
bool word(uint w) {
  uint v = g.x[w], res = v;
  bool bad = false;
  for (uint k = 0u; k < 2u; k++) {
    uint e = 2u * w + k;
    if (e < p.off || e - p.off >= p.n) continue;
    uint h = (v >> (16u * k)) & 0xffffu;
    bad = bad || bad16(h);
    if (CHECK_ONLY == 0u) {
      uint r = FROM_F(TO_F(h) * p.inv);
      res = (res & ~(0xffffu << (16u * k))) | (r << (16u * k));
    }
  }
  if (CHECK_ONLY == 0u && res != v) g.x[w] = res;
  return bad;
}

void main() {
  uint first = p.off >> 1, count = ((p.off + p.n - 1u) >> 1) - first + 1u;
  uint step = gl_NumWorkGroups.x * 256u;
  bool bad = false;
  for (uint i = gl_GlobalInvocationID.x; i < count; i += step) {
    bad = word(first + i) || bad;
    if (count - i <= step) break;
  }
  if (bad) flag.x[p.flag_off] = 1.0;
}
#else
bool bad_elem(float v) { return (floatBitsToUint(v) & 0x7f800000u) == 0x7f800000u; }
#if defined(VARIANT_F64)
bool bad_elem(double v) { return (unpackDouble2x32(v).y & 0x7ff00000u) == 0x7ff00000u; }
#endif

void main() {
  uint step = gl_NumWorkGroups.x * 256u;
  bool bad = false;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += step) {
    uint e = p.off + i;
    ELEM v = g.x[e];
    bad = bad || bad_elem(v);
    if (CHECK_ONLY == 0u) g.x[e] = v * ELEM(p.inv);
    if (p.n - i <= step) break;
  }
  if (bad) flag.x[p.flag_off] = 1.0;
}
#endif
