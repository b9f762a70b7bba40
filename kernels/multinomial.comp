#version 450
//
// multinomial.comp: the `multinomial` slot (runtime/src/vulkan/vk_multinomial.c). One
// workgroup per row of float32 weights, following runtime/src/multinomial.h step for step so
// that the draws equal the CPU's: chunk sums (one lane per chunk, left to right) and the bases
// (lane 0, left to right) in shared memory, then per draw a Philox word, target = u * total,
// a binary search over the bases and a walk along the chosen chunk. `precise` keeps every
// addition and the multiplication single IEEE operations (no contraction or reassociation).
//
// With replacement the lanes draw in parallel, a row's draws spread over workgroups (grid y)
// in spans of 8192, each workgroup summing the row's chunks itself. Without replacement
// nothing is drawn here: each weight is replaced by its exponential-race key -log(u) / w (u in
// (0, 1] from word r K + i, +inf for a zero weight), and the definition takes the n smallest
// keys of each row (a stable sort), which is sampling without replacement exactly.
//
// Loops are kept short per invocation: lavapipe (llvmpipe) ends an invocation's loops after
// about 65535 iterations in all, so no lane walks a row alone or draws more than 32 times
// (rows of up to about 8 million weights stay within it).
//
// A row that fails multinomial.h's checks is reported through the device's error flag
// (runtime/src/vulkan/vk.h: VK_FLAG_MULTINOMIAL, words 11-15), raised by the host at its next
// synchronization; its draws are written as 0.
//
// Operands: 0 out (int64 [R, n]), 1 w (float32 [R, K]), 2 the error flag.

layout(local_size_x = 256) in;

layout(std430, set = 0, binding = 0) buffer O { uint o[]; };
layout(std430, set = 0, binding = 1) buffer W { float w[]; };
layout(std430, set = 0, binding = 2) buffer F { uint flag[]; };

layout(push_constant) uniform Params {
  uint R, K, n, chunk, nch, replacement;
  uint seed_lo, seed_hi, ctr_lo, ctr_hi;
  uint wbase, obase;
} p;

const uint MAX_CHUNKS = 2048u;  // EM_MN_MAX_CHUNKS
const uint SPAN = 8192u;        // draws of a row per workgroup (vk_multinomial.c's grid y)
shared float csum[MAX_CHUNKS];
shared float cbase[MAX_CHUNKS];
shared float s_total;
shared uint s_bad, s_nonzero, s_status;

uvec4 philox(uvec2 ctr, uvec2 key) {
  uint c0 = ctr.x, c1 = ctr.y, c2 = 0u, c3 = 0u, k0 = key.x, k1 = key.y;
  for (int round = 0; round < 10; round++) {
    uint hi0, lo0, hi1, lo1;
    umulExtended(0xD2511F53u, c0, hi0, lo0);
    umulExtended(0xCD9E8D57u, c2, hi1, lo1);
    uint n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c1 = lo1;
    c3 = lo0;
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return uvec4(c0, c1, c2, c3);
}

// The uniform of word k of the request: (x >> 8) 2^-24, exact in float.
float uniform_of(uint k) {
  uint blk = k >> 2u;
  uint lo = p.ctr_lo + blk;
  uvec4 x = philox(uvec2(lo, p.ctr_hi + (lo < blk ? 1u : 0u)), uvec2(p.seed_lo, p.seed_hi));
  return float(x[k & 3u] >> 8u) * (1.0 / 16777216.0);
}

uint chunk_end(uint c) { return min((c + 1u) * p.chunk, p.K); }

float chunk_sum(uint roff, uint c) {
  precise float s = 0.0;
  for (uint i = c * p.chunk; i < chunk_end(c); i++) s = s + w[roff + i];
  return s;
}

// cbase from csum, left to right; returns the total.
float bases() {
  cbase[0] = 0.0;
  for (uint c = 1u; c < p.nch; c++) {
    precise float b = cbase[c - 1u] + csum[c - 1u];
    cbase[c] = b;
  }
  precise float t = cbase[p.nch - 1u] + csum[p.nch - 1u];
  return t;
}

uint draw(uint roff, float total, float u) {
  precise float target = u * total;
  uint lo = 0u, hi = p.nch - 1u;  // the largest c with cbase[c] <= target
  while (lo < hi) {
    uint mid = (lo + hi + 1u) / 2u;
    if (cbase[mid] <= target) lo = mid;
    else hi = mid - 1u;
  }
  uint end = chunk_end(lo);
  precise float acc = cbase[lo];
  for (uint i = lo * p.chunk; i < end; i++) {
    float x = w[roff + i];
    if (x > 0.0) {
      acc = acc + x;
      if (acc > target) return i;
    }
  }
  for (uint i = end; i-- > 0u;)  // rounding left no such i: multinomial.h's fallback
    if (w[roff + i] > 0.0) return i;
  return 0u;
}

void store(uint r, uint j, uint i) {
  uint e = 2u * (p.obase + r * p.n + j);
  o[e] = i;
  o[e + 1u] = 0u;
}

void report(uint r, uint status, uint roff) {
  if (atomicCompSwap(flag[11], 0u, 1u) == 0u) {
    flag[12] = status;
    flag[13] = r;
    flag[14] = status == 1u ? s_bad : s_nonzero;
    flag[15] = status == 1u ? floatBitsToUint(w[roff + s_bad]) : p.n;
    atomicCompSwap(flag[0], 0u, 3u);  // VK_FLAG_MULTINOMIAL
  }
}

void main() {
  uint tid = gl_LocalInvocationID.x;
  for (uint r = gl_WorkGroupID.x; r < p.R; r += gl_NumWorkGroups.x) {
    uint roff = p.wbase + r * p.K;
    if (tid == 0u) {
      s_bad = p.K;
      s_nonzero = 0u;
    }
    barrier();
    uint nz = 0u;
    for (uint i = tid; i < p.K; i += 256u) {
      float x = w[roff + i];
      if (isnan(x) || isinf(x) || x < 0.0) atomicMin(s_bad, i);
      else if (x > 0.0) nz++;
    }
    atomicAdd(s_nonzero, nz);
    for (uint c = tid; c < p.nch; c += 256u) csum[c] = chunk_sum(roff, c);
    barrier();
    if (tid == 0u) {
      uint status = 0u;
      float total = 0.0;
      if (s_bad < p.K) {
        status = 1u;
      } else {
        total = bases();
        if (total == 0.0) status = 2u;
        else if (isinf(total)) status = 3u;
        else if (p.replacement == 0u && s_nonzero < p.n) status = 4u;
      }
      if (status != 0u && gl_WorkGroupID.y == 0u) report(r, status, roff);
      s_status = status;
      s_total = total;
    }
    barrier();
    // this workgroup's draws of the row: spans of SPAN (grid y), so no lane draws too many
    if (s_status != 0u) {
      for (uint j0 = gl_WorkGroupID.y * SPAN; j0 < p.n; j0 += gl_NumWorkGroups.y * SPAN)
        for (uint j = j0 + tid; j < min(j0 + SPAN, p.n); j += 256u) store(r, j, 0u);
    } else if (p.replacement != 0u) {
      for (uint j0 = gl_WorkGroupID.y * SPAN; j0 < p.n; j0 += gl_NumWorkGroups.y * SPAN)
        for (uint j = j0 + tid; j < min(j0 + SPAN, p.n); j += 256u)
          store(r, j, draw(roff, s_total, uniform_of(r * p.n + j)));
    } else if (gl_WorkGroupID.y == 0u) {
      // exponential-race keys, one word per weight (word r K + i): -log(u) / w, u in (0, 1]
      for (uint i = tid; i < p.K; i += 256u) {
        float x = w[roff + i];
        float u = uniform_of(r * p.K + i) + (1.0 / 16777216.0);
        w[roff + i] = x > 0.0 ? -log(u) / x : uintBitsToFloat(0x7f800000u);
      }
    }
    barrier();
  }
}
