#version 450
// ctc.comp: the CTC loss on Vulkan (runtime/src/vulkan/vk_ctc.c), the recursion of
// runtime/src/cpu/ctc.c in float32 log space.
//
// REC: one workgroup per batch element n. Lanes split the extended target's states
// s = 0 .. S-1 (S = 2L + 1: a blank around every label) and step through time together: the
// forward variables alpha[t][s] (and, when the gradient is wanted, the backward ones
// beta[t][s], from the last frame down) go to scratch buffers [N, T, Smax], one row per frame,
// each row read by the next step after a barrier. Lane 0 writes nll[n] = -log p(target) (0 for
// an impossible alignment under zero_infinity).
//
// GRAD: one invocation per (t, n, c) of the gradient [T, N, C]:
//   d nll / d lp[t][c] = -exp(logsumexp_{s: l'(s) = c} (alpha[t][s] + beta[t][s]) - lp[t][c] + nll)
// 0 past the input's length and where no alignment passes (then every alpha + beta is -inf).
//
// Operands: 0 lp (float32 [T, N, C]), 1 meta (int32 [N, 3]: input length, target length,
// offset of the labels), 2 labels (int32, 0-based classes), 3 alpha, 4 beta, 5 nll (float32
// [N]), 6 grad (float32 [T, N, C]).
//
// variants: REC GRAD
layout(local_size_x = 256) in;

layout(std430, set = 0, binding = 0) readonly buffer LP { float lp[]; };
layout(std430, set = 0, binding = 1) readonly buffer Meta { int meta[]; };
layout(std430, set = 0, binding = 2) readonly buffer Labels { int labels[]; };
layout(std430, set = 0, binding = 3) coherent buffer Alpha { float alpha[]; };
layout(std430, set = 0, binding = 4) coherent buffer Beta { float beta[]; };
layout(std430, set = 0, binding = 5) buffer Nll { float nll[]; };
layout(std430, set = 0, binding = 6) buffer Grad { float grad[]; };

layout(push_constant) uniform Params {
  uint T, N, C, Smax;
  int blank;
  uint lp_base, nll_base, grad_base;
  uint zero_infinity, want_grad;
  uint total;   // GRAD: T * N * C
  uint gx;      // GRAD: invocations per row of the grid (x groups * 256)
} p;

#define NEG uintBitsToFloat(0xff800000u) // -inf
#define POS uintBitsToFloat(0x7f800000u) // +inf

float lse2(float a, float b) {
  if (a == NEG) return b;
  if (b == NEG) return a;
  float m = max(a, b);
  return m + log(1.0 + exp(-abs(a - b)));
}

float lp_at(uint t, uint n, int c) { return lp[p.lp_base + (t * p.N + n) * p.C + uint(c)]; }

int label(uint lo, uint s) { return (s & 1u) == 0u ? p.blank : labels[lo + (s - 1u) / 2u]; }

#ifdef VARIANT_REC
void main() {
  uint n = gl_WorkGroupID.x, lane = gl_LocalInvocationID.x;
  uint Tn = uint(meta[3u * n]), L = uint(meta[3u * n + 1u]), lo = uint(meta[3u * n + 2u]);
  uint S = 2u * L + 1u, base = n * p.T * p.Smax;
  if (Tn == 0u) {
    if (lane == 0u) nll[p.nll_base + n] = (L == 0u || p.zero_infinity != 0u) ? 0.0 : POS;
    return;
  }
  for (uint s = lane; s < S; s += 256u)
    alpha[base + s] = s == 0u ? lp_at(0u, n, p.blank) : s == 1u ? lp_at(0u, n, label(lo, 1u)) : NEG;
  memoryBarrierBuffer();
  barrier();
  for (uint t = 1u; t < Tn; t++) {
    uint prev = base + (t - 1u) * p.Smax, cur = base + t * p.Smax;
    for (uint s = lane; s < S; s += 256u) {
      int c = label(lo, s);
      float a = alpha[prev + s];
      if (s >= 1u) a = lse2(a, alpha[prev + s - 1u]);
      if (s >= 3u && c != p.blank && c != labels[lo + (s - 3u) / 2u]) a = lse2(a, alpha[prev + s - 2u]);
      alpha[cur + s] = a == NEG ? NEG : a + lp_at(t, n, c);
    }
    memoryBarrierBuffer();
    barrier();
  }
  if (lane == 0u) {
    uint last = base + (Tn - 1u) * p.Smax;
    float r = -(S > 1u ? lse2(alpha[last + S - 1u], alpha[last + S - 2u]) : alpha[last]);
    nll[p.nll_base + n] = (isinf(r) && p.zero_infinity != 0u) ? 0.0 : r;
  }
  if (p.want_grad == 0u) return;
  uint lastb = base + (Tn - 1u) * p.Smax;
  for (uint s = lane; s < S; s += 256u)
    beta[lastb + s] = s + 2u >= S ? lp_at(Tn - 1u, n, label(lo, s)) : NEG;
  memoryBarrierBuffer();
  barrier();
  for (uint k = 1u; k < Tn; k++) {
    uint t = Tn - 1u - k;
    uint next = base + (t + 1u) * p.Smax, cur = base + t * p.Smax;
    for (uint s = lane; s < S; s += 256u) {
      int c = label(lo, s);
      float b = beta[next + s];
      if (s + 1u < S) b = lse2(b, beta[next + s + 1u]);
      if (s + 2u < S && (s & 1u) == 1u && labels[lo + (s + 1u) / 2u] != c) b = lse2(b, beta[next + s + 2u]);
      beta[cur + s] = b == NEG ? NEG : b + lp_at(t, n, c);
    }
    memoryBarrierBuffer();
    barrier();
  }
}
#endif

#ifdef VARIANT_GRAD
void main() {
  uint i = gl_GlobalInvocationID.y * p.gx + gl_GlobalInvocationID.x;
  if (i >= p.total) return;
  uint c = i % p.C, n = (i / p.C) % p.N, t = i / (p.C * p.N);
  uint Tn = uint(meta[3u * n]), L = uint(meta[3u * n + 1u]), lo = uint(meta[3u * n + 2u]);
  float d = 0.0;
  if (t < Tn) {
    uint S = 2u * L + 1u, row = n * p.T * p.Smax + t * p.Smax;
    float lcab = NEG;
    for (uint s = 0u; s < S; s++)
      if (label(lo, s) == int(c)) lcab = lse2(lcab, alpha[row + s] + beta[row + s]);
    if (lcab != NEG) d = -exp(lcab - lp_at(t, n, int(c)) + nll[p.nll_base + n]);
  }
  grad[p.grad_base + i] = d;
}
#endif
