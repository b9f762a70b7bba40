#version 450
//
// nonzero.comp: the row-major coordinates of x's nonzero elements (NaN counts, -0.0 does not;
// runtime/src/cpu/index.c is the reference) as rows of the int64 [count, ndim] output.
// One workgroup walks x in chunks of 4 * 256 elements, each invocation 4 consecutive ones;
// a shared-memory exclusive scan of the invocations' counts gives each its output rows, so
// the order is row-major. (A single workgroup: simple and exact; the count came first.)
// Spec constant 0: DT, x's em_dtype.
#extension GL_ARB_gpu_shader_int64 : require

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint DT = 0u;

layout(std430, set = 0, binding = 0) buffer Out { uint o[]; };
layout(std430, set = 0, binding = 1) readonly buffer X { uint x[]; };

layout(push_constant) uniform Params {
  uint n, ndim, base, count, obase;
  uint size[8];   // x's sizes, innermost first
  int st[8];
} pc;

shared uint scan[256];

uint esize() {
  if (DT == 1u || DT == 8u) return 8u;
  if (DT == 0u || DT == 7u) return 4u;
  if (DT == 2u || DT == 3u || DT == 6u) return 2u;
  return 1u;
}

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

void main() {
  uint lid = gl_LocalInvocationID.x, done = 0u;
  for (uint start = 0u; start < pc.n; start += 1024u) {
    uint first = start + 4u * lid, mine = 0u, flags = 0u;
    for (uint q = 0u; q < 4u; q++)
      if (first + q < pc.n && nonzero_at(first + q)) {
        flags |= 1u << q;
        mine++;
      }
    scan[lid] = mine;
    barrier();
    for (uint off = 1u; off < 256u; off <<= 1) {  // inclusive Hillis-Steele scan
      uint v = lid >= off ? scan[lid - off] : 0u;
      barrier();
      scan[lid] += v;
      barrier();
    }
    uint row = done + scan[lid] - mine;
    for (uint q = 0u; q < 4u; q++) {
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
    done += scan[255];
    barrier();  // scan is rewritten by the next chunk
  }
}
