#version 450
//
// index_check.comp: checks on the device that every element of an int64 index tensor lies in
// [0, size), for the indexing ops of a device that queues its checks instead of reading the
// index on the host (runtime/src/ops/index.c says why). A bad value is reported through the
// device's error flag (runtime/src/vulkan/vk.h lists its words): the first invocation to claim
// word [4] with an atomic writes the value, the size and the op's name, wording and dimension,
// then marks the flag set unless an earlier report holds it. The host raises the error at its
// next synchronization. The indexing kernels skip bad indices themselves; this one only
// reports. An int64 is two words: in range exactly when the high one is 0 and the low one is
// below size (negative values have the high word's top bit set), so no 64-bit arithmetic.
// The walk: the index's dimensions coalesced by the host (at most 8, innermost first).

layout(local_size_x = 256) in;

layout(std430, set = 0, binding = 0) buffer F { uint flag[]; };
layout(std430, set = 0, binding = 1) readonly buffer I { uint ix[]; };

layout(push_constant) uniform Params {
  uint n;          // elements of the index
  uint ndim;       // coalesced dimensions
  uint base;       // the index's first element
  uint size;       // the bound
  uint name;       // the report's op name, wording and dimension (flag words 8, 9, 10)
  uint wording;
  int dim;
  uint sizes[8];
  int st[8];
} pc;

void main() {
  uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint id = gl_GlobalInvocationID.x; id < pc.n; id += step) {
    int e = int(pc.base);
    uint r = id;
    for (uint d = 0u; d < pc.ndim; d++) {
      uint c = r % pc.sizes[d];
      r /= pc.sizes[d];
      e += int(c) * pc.st[d];
    }
    uint lo = ix[2u * uint(e)], hi = ix[2u * uint(e) + 1u];
    if (hi == 0u && lo < pc.size) continue;
    if (atomicCompSwap(flag[4], 0u, 1u) == 0u) {
      flag[5] = lo;
      flag[6] = hi;
      flag[7] = pc.size;
      flag[8] = pc.name;
      flag[9] = pc.wording;
      flag[10] = uint(pc.dim);
      atomicCompSwap(flag[0], 0u, 2u);  // VK_FLAG_INDEX
    }
    return;  // one bad index per invocation is enough to know
  }
}
