#version 450
// variants: W1 W4
//
// index_rows.comp: index_select of whole contiguous rows, the embedding lookup's shape (the
// general kernel is index.comp's GATHER, which walks every element's coordinates). With x
// seen as [outer, X, row] and out as [outer, m, row], both contiguous:
//   out[o, r, :] = x[o, index[r], :]
// copied as raw 32-bit words (W1) or 128-bit ones (W4), whatever the dtype: rows are `words`
// words long and start word-aligned (the host checks), so no element is split. Invocations run
// along the row (coalesced), workgroups in y over the m rows and in z over outer, with
// grid-stride loops beyond the grid's limits.
#extension GL_ARB_gpu_shader_int64 : require

layout(local_size_x = 256) in;

#ifdef VARIANT_W4
#define WORD uvec4
#else
#define WORD uint
#endif

layout(std430, set = 0, binding = 0) buffer Out { WORD o[]; };
layout(std430, set = 0, binding = 1) readonly buffer X { WORD x[]; };
layout(std430, set = 0, binding = 2) readonly buffer I { uint ix[]; };

layout(push_constant) uniform Params {
  uint words;     // one row, in WORDs
  uint m;         // rows selected
  uint outer;
  uint X;         // rows of x per outer
  uint obase;     // out's first WORD
  uint xbase;     // x's first WORD
  uint ibase;     // index's first element
  int istride;    // index's stride
} pc;

void main() {
  for (uint q = gl_WorkGroupID.z; q < pc.outer; q += gl_NumWorkGroups.z) {
    for (uint r = gl_WorkGroupID.y; r < pc.m; r += gl_NumWorkGroups.y) {
      uint k = 2u * uint(int(pc.ibase) + int(r) * pc.istride);
      uint row = ix[k];
      // an index outside [0, X) (the int64's high word set, or the low one too large) gives a
      // row of zeros: a device that checks on the device reports it at its next sync
      bool ok = ix[k + 1u] == 0u && row < pc.X;
      uint src = pc.xbase + (q * pc.X + (ok ? row : 0u)) * pc.words;
      uint dst = pc.obase + (q * pc.m + r) * pc.words;
      for (uint c = gl_GlobalInvocationID.x; c < pc.words;
           c += gl_NumWorkGroups.x * gl_WorkGroupSize.x)
        o[dst + c] = ok ? x[src + c] : WORD(0);
    }
  }
}
