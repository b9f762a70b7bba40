// norm.glsl: what the normalization and loss kernels share (runtime/src/vulkan/vk_norm.c fills
// the other side): the element type of the variant, exp and log to match the CPU's libm, and
// workgroup reductions.
//
// Variants F32 and F64 reduce through shared memory alone; F32S and F64S (for devices with
// subgroup arithmetic in compute shaders) add within subgroups first, so a workgroup sum takes
// two barriers instead of one per halving.
//
// Every tensor these kernels touch is contiguous (the op definitions made it so) and of one
// floating dtype, so buffers are plain T arrays indexed from the element offset the push
// constants give. Indices are 32-bit: a storage buffer binding holds fewer than 2^32 bytes.
#extension GL_ARB_gpu_shader_int64 : require

#if defined(VARIANT_F32S) || defined(VARIANT_F64S)
#define USE_SUBGROUPS 1
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

#if defined(VARIANT_F64) || defined(VARIANT_F64S)
#define IS_F64 1
#define T double
#include "math64.glsl"
#define EXP(v) exp_d(v)
#define LOG(v) log_d(v)
#define NAN_T D_NAN
#define INF_T D_INF
#else
#define T float
#include "math.glsl"
#define EXP(v) exp_f(v)
#define LOG(v) log_f(v)
#define NAN_T F_NAN
#define INF_T F_INF
#endif

#ifndef NORM_WG
#define NORM_WG 256
#endif
layout(local_size_x = NORM_WG) in;

shared T red0[NORM_WG];
shared T red1[NORM_WG];

#ifdef USE_SUBGROUPS
// Sums a and b over the workgroup (call from uniform control flow); every invocation gets
// the totals, added in the same order.
void wg_sum2(inout T a, inout T b) {
  a = subgroupAdd(a);
  b = subgroupAdd(b);
  if (subgroupElect()) {
    red0[gl_SubgroupID] = a;
    red1[gl_SubgroupID] = b;
  }
  barrier();
  a = T(0);
  b = T(0);
  for (uint i = 0u; i < gl_NumSubgroups; i++) {
    a += red0[i];
    b += red1[i];
  }
  barrier();
}

T wg_max(T a) {
  a = subgroupMax(a);
  if (subgroupElect()) red0[gl_SubgroupID] = a;
  barrier();
  a = red0[0];
  for (uint i = 1u; i < gl_NumSubgroups; i++) a = max(a, red0[i]);
  barrier();
  return a;
}
#else
// Sums a and b over the workgroup (call from uniform control flow); every invocation gets
// the totals.
void wg_sum2(inout T a, inout T b) {
  uint t = gl_LocalInvocationID.x;
  red0[t] = a;
  red1[t] = b;
  barrier();
  for (uint s = NORM_WG / 2; s > 0u; s >>= 1) {
    if (t < s) {
      red0[t] += red0[t + s];
      red1[t] += red1[t + s];
    }
    barrier();
  }
  a = red0[0];
  b = red1[0];
  barrier();
}

T wg_max(T a) {
  uint t = gl_LocalInvocationID.x;
  red0[t] = a;
  barrier();
  for (uint s = NORM_WG / 2; s > 0u; s >>= 1) {
    if (t < s) red0[t] = max(red0[t], red0[t + s]);
    barrier();
  }
  a = red0[0];
  barrier();
  return a;
}
#endif

// Advances r, the remainder of an index i by d, as i grows by step, and returns how many
// times d was crossed (the quotient's increase): a division only when the index wraps, and
// none at all when d >= step. Hot loops over [N, C, S] use it instead of dividing per element.
uint advance(inout uint r, uint step, uint d) {
  r += step;
  if (r < d) return 0u;
  if (d >= step) {
    r -= d;
    return 1u;
  }
  uint k = r / d;
  r -= k * d;
  return k;
}

// The workgroup's linear index in a grid folded over x and y (the host splits large counts).
uint group_index() { return gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x; }

// A double argument in push constants: the float variant reads the float's bits, the double
// variant the double's two words, so the float variant needs no float64 support.
#ifdef IS_F64
#define ARG(f, d) packDouble2x32(d)
#else
#define ARG(f, d) uintBitsToFloat(f)
#endif
