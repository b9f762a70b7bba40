#version 450
// variants: COUNT SCAN WRITE
//
// nonzero_blocks.comp: nonzero over many workgroups (kernels/nonzero.comp does small inputs
// in one; runtime/src/cpu/index.c is the reference: row-major coordinates, NaN counts, -0.0
// does not). x is cut into blocks of 4096 elements in row-major order, 16 consecutive ones
// per invocation:
//   COUNT  each workgroup counts its blocks' nonzeros into cnt[block];
//   SCAN   one workgroup turns cnt into exclusive prefix sums in place (the first output row
//          of each block);
//   WRITE  each workgroup recounts its block, scans the invocations' counts in shared memory
//          and writes the coordinates of each nonzero at its row, so the order is row-major.
// Spec constant 0: DT, x's em_dtype.
#extension GL_ARB_gpu_shader_int64 : require

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint DT = 0u;

#ifdef VARIANT_WRITE
layout(std430, set = 0, binding = 0) buffer Out { uint o[]; };
layout(std430, set = 0, binding = 1) readonly buffer X { uint x[]; };
layout(std430, set = 0, binding = 2) readonly buffer Cnt { uint cnt[]; };
#elif defined(VARIANT_COUNT)
layout(std430, set = 0, binding = 0) buffer Cnt { uint cnt[]; };
layout(std430, set = 0, binding = 1) readonly buffer X { uint x[]; };
#else
layout(std430, set = 0, binding = 0) buffer Cnt { uint cnt[]; };
#endif

layout(push_constant) uniform Params {
  uint n, ndim, base, count, obase, blocks;
  uint size[8];   // x's sizes, innermost first
  int st[8];
} pc;

const uint PER = 16u, BLOCK = 4096u;
shared uint scan[256];

uint esize() {
  if (DT == 1u || DT == 8u) return 8u;
  if (DT == 0u || DT == 7u) return 4u;
  if (DT == 2u || DT == 3u || DT == 6u) return 2u;
  return 1u;
}

#ifndef VARIANT_SCAN
bool nonzero_at(uint id) {
  int e = int(pc.base);
  uint r = id;
  for (uint d = 0u; d < pc.ndim; d++) {
    e += int(r % pc.size[d]) * pc.st[d];
    r /= pc.size[d];
  }
  uint u = uint(e), s = esize();
  if (s == 8u) {
    uint hi = x[2u * u + 1u], lo = x[2u * u];
    return DT == 1u ? ((hi & 0x7fffffffu) | lo) != 0u : (hi | lo) != 0u;
  }
  if (s == 4u) return DT == 0u ? (x[u] & 0x7fffffffu) != 0u : x[u] != 0u;
  if (s == 2u) {
    uint h = (x[u >> 1] >> ((u & 1u) * 16u)) & 0xffffu;
    return DT == 6u ? h != 0u : (h & 0x7fffu) != 0u;
  }
  return ((x[u >> 2] >> ((u & 3u) * 8u)) & 0xffu) != 0u;
}

// The nonzero flags of this invocation's 16 elements of block `blk`.
uint flags_of(uint blk, uint lid) {
  uint first = blk * BLOCK + lid * PER, flags = 0u;
  for (uint q = 0u; q < PER; q++)
    if (first + q < pc.n && nonzero_at(first + q)) flags |= 1u << q;
  return flags;
}
#endif

// Inclusive scan of scan[0..256) (Hillis-Steele); every invocation takes part.
void scan_shared(uint lid) {
  for (uint off = 1u; off < 256u; off <<= 1) {
    uint v = lid >= off ? scan[lid - off] : 0u;
    barrier();
    scan[lid] += v;
    barrier();
  }
}

void main() {
  uint lid = gl_LocalInvocationID.x;
#ifdef VARIANT_COUNT
  for (uint blk = gl_WorkGroupID.x; blk < pc.blocks; blk += gl_NumWorkGroups.x) {
    scan[lid] = bitCount(flags_of(blk, lid));
    barrier();
    for (uint h = 128u; h > 0u; h >>= 1) {
      if (lid < h) scan[lid] += scan[lid + h];
      barrier();
    }
    if (lid == 0u) cnt[blk] = scan[0];
    barrier();
  }
#elif defined(VARIANT_SCAN)
  uint done = 0u;
  for (uint start = 0u; start < pc.blocks; start += 1024u) {
    uint first = start + 4u * lid, c[4], mine = 0u;
    for (uint q = 0u; q < 4u; q++) {
      c[q] = first + q < pc.blocks ? cnt[first + q] : 0u;
      mine += c[q];
    }
    scan[lid] = mine;
    barrier();
    scan_shared(lid);
    uint run = done + scan[lid] - mine;
    for (uint q = 0u; q < 4u; q++) {
      if (first + q < pc.blocks) cnt[first + q] = run;
      run += c[q];
    }
    done += scan[255];
    barrier();
  }
#else
  for (uint blk = gl_WorkGroupID.x; blk < pc.blocks; blk += gl_NumWorkGroups.x) {
    uint flags = flags_of(blk, lid), mine = bitCount(flags);
    scan[lid] = mine;
    barrier();
    scan_shared(lid);
    uint row = cnt[blk] + scan[lid] - mine;
    uint first = blk * BLOCK + lid * PER;
    for (uint q = 0u; q < PER; q++) {
      if ((flags & (1u << q)) == 0u) continue;
      if (row < pc.count) {
        uint r = first + q;
        for (uint d = 0u; d < pc.ndim; d++) {  // coordinates, innermost dimension last
          uint w = 2u * (pc.obase + row * pc.ndim + (pc.ndim - 1u - d));
          o[w] = r % pc.size[d];
          o[w + 1u] = 0u;
          r /= pc.size[d];
        }
      }
      row++;
    }
    barrier();  // scan is rewritten by the next block
  }
#endif
}
