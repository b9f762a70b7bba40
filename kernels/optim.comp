#version 450
// variants: F32 F64 F16 BF16
//
// optim.comp: the fused optimizer steps, sgd_step and adam_step (runtime/src/cpu/optim.c is
// the reference; the formulas are in ember.h and docs/api/optim.md). One pass: each element of
// param, grad and the state is read once and param and the state written once.
//
// Operands: 0 param, 1 grad (read only), 2 momentum buffer / exp_avg, 3 exp_avg_sq,
// 4 max_exp_avg_sq, 5 found_inf (float32, read only; flag FOUND_INF). The written ones are contiguous (the host makes them so); grad has any
// strides, up to 3 coalesced dimensions, or is contiguous (flag GRAD_CONTIG).
// float32 and float64 compute in their own type, as the CPU's contiguous loops do; float16 and
// bfloat16 in float (the CPU uses double: the rounded results agree to a 16-bit ulp).
// Specialization constants: 0 the algorithm (0 SGD, 1 Adam), 1 the flags below, so the loop
// has no branches on options. The hyperparameters travel in push constants: a new learning
// rate or step needs no upload and no new pipeline.
// A conditional step (FOUND_INF: GradScaler's inf/NaN flag, em_amp_unscale_) reads the flag
// before anything else and writes nothing when it is nonzero: the step is skipped on the device
// without the host learning the verdict first.
#extension GL_ARB_gpu_shader_int64 : require
#extension GL_GOOGLE_include_directive : require
#if defined(VARIANT_F64)
#extension GL_ARB_gpu_shader_fp64 : require
#define T double
#define ELEM double
bool is_nan(double v) {
  uvec2 u = unpackDouble2x32(v);
  return (u.y & 0x7fffffffu) > 0x7ff00000u || ((u.y & 0x7fffffffu) == 0x7ff00000u && u.x != 0u);
}
#else
#define T float
bool is_nan(float v) { return (floatBitsToUint(v) & 0x7fffffffu) > 0x7f800000u; }
#if defined(VARIANT_F32)
#define ELEM float
#else
#define ELEM uint
#define PACKED16 1
#include "half16.glsl"
#endif
#endif

layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) buffer B0 { ELEM x[]; } b0;
layout(std430, set = 0, binding = 1) readonly buffer B1 { ELEM x[]; } b1;
layout(std430, set = 0, binding = 2) buffer B2 { ELEM x[]; } b2;
layout(std430, set = 0, binding = 3) buffer B3 { ELEM x[]; } b3;
layout(std430, set = 0, binding = 4) buffer B4 { ELEM x[]; } b4;
layout(std430, set = 0, binding = 5) readonly buffer B5 { float x[]; } found;

layout(constant_id = 0) const uint ALGO = 0u;
layout(constant_id = 1) const uint FLAGS = 0u;
const bool HAS_BUF = (FLAGS & 1u) != 0u;
const bool NESTEROV = (FLAGS & 2u) != 0u;
const bool FIRST = (FLAGS & 4u) != 0u;
const bool MAXIMIZE = (FLAGS & 8u) != 0u;
const bool WD = (FLAGS & 16u) != 0u;
const bool DECOUPLED = (FLAGS & 32u) != 0u;
const bool AMSGRAD = (FLAGS & 64u) != 0u;
const bool GRAD_CONTIG = (FLAGS & 128u) != 0u;
const bool FOUND_INF = (FLAGS & 256u) != 0u;

layout(push_constant) uniform Params {
  uint n;
  uint off[5];     // element offsets of the operands
  uint gsize[3];   // grad's coalesced dimensions, innermost first
  int gstride[3];
  uint found_off;  // found_inf's element
  uint pad;        // s[] starts 8-byte aligned (double)
  // SGD: lr, momentum, 1 - dampening, weight_decay
  // Adam: beta1, beta2, 1 - beta1, 1 - beta2, eps, weight_decay, 1 - lr weight_decay,
  //       lr / (1 - beta1^t), sqrt(1 - beta2^t)
  T s[9];
} p;

#ifdef PACKED16
#ifdef VARIANT_F16
#define TO_T(h) half_to_float(h)
#define FROM_T(v) float_to_half(v)
#else
#define TO_T(h) bf16_to_float(h)
#define FROM_T(v) float_to_bf16(v)
#endif
#define LD(B, e) TO_T((B.x[(e) >> 1] >> (((e) & 1u) * 16u)) & 0xffffu)
// Neighbouring elements of a word belong to other invocations: clear, then set, atomically.
#define ST(B, e, v)                                                                     \
  do {                                                                                  \
    uint st_w_ = (e) >> 1, st_s_ = ((e) & 1u) * 16u;                                    \
    atomicAnd(B.x[st_w_], ~(0xffffu << st_s_));                                         \
    atomicOr(B.x[st_w_], FROM_T(v) << st_s_);                                           \
  } while (false)
#else
#define LD(B, e) B.x[e]
#define ST(B, e, v) B.x[e] = (v)
#endif

uint grad_index(uint i) {
  if (GRAD_CONTIG) return p.off[1] + i;
  uint c0 = i % p.gsize[0], r = i / p.gsize[0];
  uint c1 = r % p.gsize[1], c2 = r / p.gsize[1];
  // int -> uint keeps the bit pattern: negative strides wrap back correctly
  return p.off[1] + c0 * uint(p.gstride[0]) + c1 * uint(p.gstride[1]) + c2 * uint(p.gstride[2]);
}

void sgd(uint i) {
  uint e = p.off[0] + i;
  T pv = LD(b0, e), g = LD(b1, grad_index(i));
  T lr = p.s[0], mom = p.s[1], keep = p.s[2], wd = p.s[3];
  T d = MAXIMIZE ? -g : g;
  if (WD) d += wd * pv;
  if (HAS_BUF) {
    uint eb = p.off[2] + i;
    T bv = FIRST ? d : mom * LD(b2, eb) + keep * d;
    ST(b2, eb, bv);
    d = NESTEROV ? d + mom * bv : bv;
  }
  ST(b0, e, pv - lr * d);
}

void adam(uint i) {
  uint e = p.off[0] + i, em = p.off[2] + i, ev = p.off[3] + i;
  T pv = LD(b0, e), g = LD(b1, grad_index(i));
  T d = MAXIMIZE ? -g : g;
  if (WD) {
    if (DECOUPLED) pv *= p.s[6];
    else d += p.s[5] * pv;
  }
  T mv = p.s[0] * LD(b2, em) + p.s[2] * d;
  T vv = p.s[1] * LD(b3, ev) + p.s[3] * d * d;
  ST(b2, em, mv);
  ST(b3, ev, vv);
  if (AMSGRAD) {
    uint ex = p.off[4] + i;
    T prev = LD(b4, ex);
    T mx = vv > prev ? vv : prev;
    mx = is_nan(prev) ? prev : mx;  // NaN wins, as in torch.maximum
    vv = is_nan(vv) ? vv : mx;
    ST(b4, ex, vv);
  }
  T denom = sqrt(vv) / p.s[8] + p.s[4];
  ST(b0, e, pv - p.s[7] * (mv / denom));
}

void main() {
  // uniform across the dispatch: every invocation returns, or none
  if (FOUND_INF && found.x[p.found_off] != 0.0) return;
  uint step = gl_NumWorkGroups.x * 256u;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += step) {
    if (ALGO == 0u) sgd(i);
    else adam(i);
    if (p.n - i <= step) break;
  }
}
