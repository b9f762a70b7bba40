#version 450
// copy.comp: moves elements without looking at their values, so it serves every dtype and
// needs no 64-bit or 16-bit arithmetic from the device.
//   op 0  copy:  out = operand 1 (same dtype, any strides)
//   op 1  fill:  out = the element whose bytes are arg[0], arg[1]
//   op 2  where: out = operand 1 (a bool condition) ? operand 2 : operand 3
// The element size comes from operand 0's format.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#define DEFINE_LOAD_RAW(K)                                                               \
  uvec2 load_raw##K(uint e, uint size) {                                                \
    if (size == 4u) return uvec2(LD32(K, e), 0u);                                       \
    if (size == 8u) return LD64(K, e);                                                  \
    if (size == 2u) return uvec2(LD16(K, e), 0u);                                       \
    return uvec2(LD8(K, e), 0u);                                                        \
  }
DEFINE_LOAD_RAW(1)
DEFINE_LOAD_RAW(2)
DEFINE_LOAD_RAW(3)

uvec2 element_bits(uint i, uvec4 off) {
  uint size = fmt_size(fmt_of(0u));
  if (kop() == 0u) return load_raw1(off.y, size);
  if (kop() == 1u) return uvec2(pc.arg[0], pc.arg[1]);
  return LD8(1, off.y) != 0u ? load_raw2(off.z, size) : load_raw3(off.w, size);
}

// ---- the vec4 path (FLAG_VEC4, set by the host): a dense copy of pc.size[0] 32-bit words
// between 16-byte aligned ranges, 128 bits per access in a grid-stride loop; pc.base[0] and
// pc.base[1] are the ranges' first quads. What a GPU's copy engine (vkCmdCopyBuffer) does at a
// fraction of the bandwidth. ----
#define FLAG_VEC4 (1u << 21)
layout(std430, set = 0, binding = 0) buffer Quads0 { uvec4 q[]; } qbuf0;
layout(std430, set = 0, binding = 1) readonly buffer Quads1 { uvec4 q[]; } qbuf1;

void vec4_copy() {
  uint words = pc.size[0], nq = words >> 2;
  uint gid = gl_GlobalInvocationID.x, step_ = gl_NumWorkGroups.x * uint(WG_SIZE);
  // four quads per iteration, all loaded before any is stored (pointwise.comp's vec4 path
  // says why)
  uint v = gid;
  for (; nq >= 3u * step_ && v < nq - 3u * step_; v += 4u * step_) {
    uint v1 = v + step_, v2 = v1 + step_, v3 = v2 + step_;
    uvec4 a = qbuf1.q[pc.base[1] + v], b = qbuf1.q[pc.base[1] + v1];
    uvec4 c = qbuf1.q[pc.base[1] + v2], d = qbuf1.q[pc.base[1] + v3];
    qbuf0.q[pc.base[0] + v] = a;
    qbuf0.q[pc.base[0] + v1] = b;
    qbuf0.q[pc.base[0] + v2] = c;
    qbuf0.q[pc.base[0] + v3] = d;
  }
  for (; v < nq; v += step_) {
    qbuf0.q[pc.base[0] + v] = qbuf1.q[pc.base[1] + v];
    if (nq - v <= step_) break;
  }
  if (gid < (words & 3u)) {
    uint e = 4u * nq + gid;
    buf0.w[4u * pc.base[0] + e] = buf1.w[4u * pc.base[1] + e];
  }
}

KERNEL_MAIN_AS(general_main)
void main() {
  if ((kfmt() & FLAG_VEC4) != 0u) vec4_copy();
  else general_main();
}
