#version 450
// variants: SCATTER LINK GATHER
//
// unpool.comp: max_unpool2d (also max_pool2d's gradient): gx [planes, H*W] = zeros, plus gy
// [planes, OH*OW] added at indices (positions within each plane). Overlapping pooling windows
// make indices collide, so the additions must not race:
//   SCATTER  float32: gx (already zeroed) += gy with a compare-and-swap loop on the float's
//            bits (32-bit atomics are core Vulkan; float atomics are not).
//   LINK     float64 (no 64-bit atomics needed): each gy element pushes itself onto a list
//            per gx element with a 32-bit atomic exchange: next[o] = heads[q]; heads[q] = o.
//   GATHER   float64: each gx element sums the gy elements on its list.
#extension GL_ARB_gpu_shader_int64 : require
#ifdef VARIANT_GATHER
#extension GL_ARB_gpu_shader_fp64 : require
#endif

layout(local_size_x = 256) in;
layout(push_constant) uniform Params {
  uint n;                   // elements this dispatch covers (gy's for SCATTER/LINK, gx's for GATHER)
  uint in_plane, out_plane; // H*W and OH*OW
  uint off_gx, off_gy, off_i;
} p;

#ifdef VARIANT_SCATTER
layout(std430, set = 0, binding = 0) buffer GX { uint gx[]; };
layout(std430, set = 0, binding = 1) readonly buffer GY { float gy[]; };
layout(std430, set = 0, binding = 2) readonly buffer Ind { int64_t ind[]; };
#elif defined(VARIANT_LINK)
layout(std430, set = 0, binding = 0) buffer Heads { int heads[]; };
layout(std430, set = 0, binding = 1) buffer Next { int next[]; };
layout(std430, set = 0, binding = 2) readonly buffer Ind { int64_t ind[]; };
#else
layout(std430, set = 0, binding = 0) buffer GX { double gx[]; };
layout(std430, set = 0, binding = 1) readonly buffer GY { double gy[]; };
layout(std430, set = 0, binding = 2) readonly buffer Heads { int heads[]; };
layout(std430, set = 0, binding = 3) readonly buffer Next { int next[]; };
#endif

void main() {
  uint stride = gl_NumWorkGroups.x * 256u;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
#ifdef VARIANT_GATHER
    double s = 0.0;
    for (int e = heads[i]; e >= 0; e = next[e]) s += gy[p.off_gy + uint(e)];
    gx[p.off_gx + i] = s;
#else
    uint plane = i / p.out_plane;
    uint q = plane * p.in_plane + uint(ind[p.off_i + i]);
#ifdef VARIANT_SCATTER
    float v = gy[p.off_gy + i];
    uint at = p.off_gx + q, old = gx[at];
    for (;;) {
      uint prev = atomicCompSwap(gx[at], old, floatBitsToUint(uintBitsToFloat(old) + v));
      if (prev == old) break;
      old = prev;
    }
#else
    next[i] = atomicExchange(heads[q], int(i));
#endif
#endif
  }
}
