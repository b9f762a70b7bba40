#version 450
//
// matmul_coop.comp: float16 gemm on cooperative matrices (tensor cores), accumulated in float32:
// out[B,M,N] = beta * out + alpha * a[B,M,K] @ b[B,K,N] (runtime/src/vulkan/vk_matmul_coop.c).
//
// Built only in the flavors the build's glslang supports (CMakeLists.txt tests each):
// COOPMAT_KHR (GL_KHR_cooperative_matrix) and COOPMAT_NV (GL_NV_cooperative_matrix; Debian 12's
// glslang 12 has only this one). The runtime uses it only on a device that lists 16x16x16
// float16 x float16 + float32 matrices at subgroup scope and has 32-wide subgroups.
//
// A workgroup of 256 invocations (8 subgroups of 32) computes a 128 x 128 tile of out, walking
// K in slices of 32. The slices are staged in shared memory as float16 in the operand's own
// layout (row- or column-major, chosen by the host, so transposed views need no copy), padded
// by 8 halves per row against bank conflicts; each subgroup multiplies a 64 x 32 part of the
// tile (4 x 2 matrices of 16 x 16). The next slice's global loads are issued before the current
// slice's products. Global loads take chunks of 8 halves: one 128-bit load when the host proved
// them whole and aligned (A_MODE/B_MODE bit 1), else 8 bounds-checked 16-bit loads; elements
// outside the matrix load as 0. Results go through a per-subgroup 16 x 16 float scratch in
// shared memory, where alpha, beta and the rounding to float16 (nearest even) are applied.
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require

#ifdef COOPMAT_KHR
#extension GL_KHR_cooperative_matrix : require
#define MAT_A coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define MAT_B coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define MAT_C coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#define LOAD_ROW(m, buf, e, s) coopMatLoad(m, buf, e, s, gl_CooperativeMatrixLayoutRowMajor)
#define LOAD_COL(m, buf, e, s) coopMatLoad(m, buf, e, s, gl_CooperativeMatrixLayoutColumnMajor)
#define STORE_ROW(m, buf, e, s) coopMatStore(m, buf, e, s, gl_CooperativeMatrixLayoutRowMajor)
#define MMA(a, b, c) coopMatMulAdd(a, b, c)
#else
#extension GL_NV_cooperative_matrix : require
#define MAT_A fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define MAT_B fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define MAT_C fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>
#define LOAD_ROW(m, buf, e, s) coopMatLoadNV(m, buf, e, s, false)
#define LOAD_COL(m, buf, e, s) coopMatLoadNV(m, buf, e, s, true)
#define STORE_ROW(m, buf, e, s) coopMatStoreNV(m, buf, e, s, false)
#define MMA(a, b, c) coopMatMulAddNV(a, b, c)
#endif

#define BM 128
#define BN 128
#define BK 32
#define PAD 8
#define NT 256
#define CH 8                          // halves per chunk
#define LOADS (BM * BK / (CH * NT))   // chunks per invocation per operand: 2
#define SA (BK + PAD)                 // shared row strides, in halves
#define SM (BM + PAD)

layout(local_size_x = NT) in;

// As matmul.comp: A_MODE bit 0 set: a's chunks run along M (a is column-major), B_MODE bit 0
// set: b's chunks run along K (b is column-major); bit 1: whole aligned chunks. FLAGS bit 1:
// out rows hold whole 16-bit pairs (even N and offset).
layout(constant_id = 0) const uint A_MODE = 0u;
layout(constant_id = 1) const uint B_MODE = 0u;
layout(constant_id = 2) const uint FLAGS = 0u;

// The push constants and batch decomposition every matmul kernel shares (alpha, beta: float;
// a_mode, b_mode, flags and ksplit unused here: this kernel is always specialized, never split).
#define MM_SCALAR float
#include "matmul_push.glsl"

layout(std430, binding = 0) buffer OW { uint ow[]; };
layout(std430, binding = 1) readonly buffer AW { uint aw[]; };
layout(std430, binding = 1) readonly buffer AW4 { uvec4 aw4[]; };
layout(std430, binding = 2) readonly buffer BW { uint bw[]; };
layout(std430, binding = 2) readonly buffer BW4 { uvec4 bw4[]; };

// a's slice: [m][k] (row-major, stride SA) or [k][m] (column-major, stride SM); b's slice:
// [k][n] (stride SM) or [n][k] (stride SA). BM * SA >= BK * SM, so one size fits both.
shared float16_t As[BM * SA];
shared float16_t Bs[BN * SA];
shared float Cs[(NT / 32) * 256];

#include "half16.glsl"

// chunk c of this invocation in the slice: (row, k) for a, (k, col) for b
uvec2 chunk_a(uint c) {
  uint i = gl_LocalInvocationID.x + c * NT;
  if ((A_MODE & 1u) == 0u) return uvec2(i / (BK / CH), (i % (BK / CH)) * CH);
  return uvec2((i % (BM / CH)) * CH, i / (BM / CH));
}
uvec2 chunk_b(uint c) {
  uint i = gl_LocalInvocationID.x + c * NT;
  if ((B_MODE & 1u) == 0u) return uvec2(i / (BN / CH), (i % (BN / CH)) * CH);
  return uvec2((i % (BK / CH)) * CH, i / (BK / CH));
}

uvec4 load_a(uint c, uint base, uint row0, uint k0) {
  uvec2 rk = chunk_a(c);
  uint r = row0 + rk.x, k = k0 + rk.y;
  uint sm = uint(p.a_sm), sk = uint(p.a_sk);
  uvec4 q = uvec4(0u);
  if ((A_MODE & 2u) != 0u) {
    if (r < p.M && k < p.K) q = aw4[(base + r * sm + k * sk) >> 3];
    return q;
  }
  bool along_k = (A_MODE & 1u) == 0u;
  [[unroll]] for (uint j = 0u; j < CH; j++) {
    uint rj = along_k ? r : r + j, kj = along_k ? k + j : k;
    if (rj < p.M && kj < p.K) {
      uint e = base + rj * sm + kj * sk;
      q[j >> 1] |= ((aw[e >> 1] >> ((e & 1u) * 16u)) & 0xffffu) << ((j & 1u) * 16u);
    }
  }
  return q;
}

uvec4 load_b(uint c, uint base, uint col0, uint k0) {
  uvec2 kn = chunk_b(c);
  uint k = k0 + kn.x, n = col0 + kn.y;
  uint sk = uint(p.b_sk), sn = uint(p.b_sn);
  uvec4 q = uvec4(0u);
  if ((B_MODE & 2u) != 0u) {
    if (k < p.K && n < p.N) q = bw4[(base + k * sk + n * sn) >> 3];
    return q;
  }
  bool along_n = (B_MODE & 1u) == 0u;
  [[unroll]] for (uint j = 0u; j < CH; j++) {
    uint kj = along_n ? k : k + j, nj = along_n ? n + j : n;
    if (kj < p.K && nj < p.N) {
      uint e = base + kj * sk + nj * sn;
      q[j >> 1] |= ((bw[e >> 1] >> ((e & 1u) * 16u)) & 0xffffu) << ((j & 1u) * 16u);
    }
  }
  return q;
}

// 8 halves to 8 consecutive shared elements, each component named (no dynamic indexing)
#define PUT8(S, at, q)                                                                      \
  {                                                                                         \
    f16vec2 h0 = unpackFloat2x16(q.x), h1 = unpackFloat2x16(q.y);                         \
    f16vec2 h2 = unpackFloat2x16(q.z), h3 = unpackFloat2x16(q.w);                         \
    S[at] = h0.x; S[at + 1u] = h0.y; S[at + 2u] = h1.x; S[at + 3u] = h1.y;                 \
    S[at + 4u] = h2.x; S[at + 5u] = h2.y; S[at + 6u] = h3.x; S[at + 7u] = h3.y;           \
  }

void store_a(uint c, uvec4 q) {
  uvec2 rk = chunk_a(c);
  uint at = (A_MODE & 1u) == 0u ? rk.x * SA + rk.y : rk.y * SM + rk.x;
  PUT8(As, at, q)
}

void store_b(uint c, uvec4 q) {
  uvec2 kn = chunk_b(c);
  uint at = (B_MODE & 1u) == 0u ? kn.x * SM + kn.y : kn.y * SA + kn.x;
  PUT8(Bs, at, q)
}

float blend(float acc, uint e) {
  float v = p.alpha * acc;
  if (p.beta != 0.0)
    v += p.beta * unpackHalf2x16((ow[e >> 1] >> ((e & 1u) * 16u)) & 0xffffu).x;
  return v;
}

// One element whose word may hold another invocation's element: merged atomically.
void store_one(uint e, float acc) {
  uint h = float_to_half(blend(acc, e)), s = (e & 1u) * 16u;
  atomicAnd(ow[e >> 1], ~(0xffffu << s));
  atomicOr(ow[e >> 1], h << s);
}

void main() {
  uint z = gl_WorkGroupID.z + p.batch0;
  uint row0 = (gl_WorkGroupID.y + p.m0) * BM, col0 = (gl_WorkGroupID.x + p.n0) * BN;
  uint abase = mm_a_base(z), bbase = mm_b_base(z);
  uint warp = gl_SubgroupID, wm = warp % 2u, wn = warp / 2u;

  MAT_C acc[8];
  [[unroll]] for (uint i = 0u; i < 8u; i++) acc[i] = MAT_C(0.0);
  uvec4 ra[LOADS], rb[LOADS];

  uint slices = (p.K + BK - 1u) / BK;
  if (slices > 0u) {
    [[unroll]] for (uint c = 0u; c < LOADS; c++) {
      store_a(c, load_a(c, abase, row0, 0u));
      store_b(c, load_b(c, bbase, col0, 0u));
    }
    barrier();
  }
  for (uint s = 0u; s < slices; s++) {
    bool more = s + 1u < slices;
    if (more) {
      [[unroll]] for (uint c = 0u; c < LOADS; c++) {
        ra[c] = load_a(c, abase, row0, (s + 1u) * BK);
        rb[c] = load_b(c, bbase, col0, (s + 1u) * BK);
      }
    }
    [[unroll]] for (uint kk = 0u; kk < BK; kk += 16u) {
      MAT_A fa[4];
      MAT_B fb[2];
      [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint r = wm * 64u + i * 16u;
        if ((A_MODE & 1u) == 0u) LOAD_ROW(fa[i], As, r * SA + kk, SA);
        else LOAD_COL(fa[i], As, kk * SM + r, SM);
      }
      [[unroll]] for (uint j = 0u; j < 2u; j++) {
        uint n = wn * 32u + j * 16u;
        if ((B_MODE & 1u) == 0u) LOAD_ROW(fb[j], Bs, kk * SM + n, SM);
        else LOAD_COL(fb[j], Bs, n * SA + kk, SA);
      }
      [[unroll]] for (uint i = 0u; i < 4u; i++)
        [[unroll]] for (uint j = 0u; j < 2u; j++)
          acc[i * 2u + j] = MMA(fa[i], fb[j], acc[i * 2u + j]);
    }
    barrier();  // every subgroup is done with this slice
    if (more) {
      [[unroll]] for (uint c = 0u; c < LOADS; c++) {
        store_a(c, ra[c]);
        store_b(c, rb[c]);
      }
      barrier();
    }
  }

  // Each 16 x 16 result through this subgroup's scratch: lane l writes row l / 2, 8 columns.
  uint lane = gl_SubgroupInvocationID, obase = mm_o_base(z);
  uint r = lane / 2u, c8 = (lane % 2u) * 8u, scratch = warp * 256u;
  [[unroll]] for (uint i = 0u; i < 4u; i++) {
    [[unroll]] for (uint j = 0u; j < 2u; j++) {
      STORE_ROW(acc[i * 2u + j], Cs, scratch, 16u);
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      uint row = row0 + wm * 64u + i * 16u + r, col = col0 + wn * 32u + j * 16u + c8;
      if (row < p.M) {
        [[unroll]] for (uint h = 0u; h < 4u; h++) {
          uint c = col + 2u * h, e = obase + row * p.N + c;
          float v0 = Cs[scratch + r * 16u + c8 + 2u * h], v1 = Cs[scratch + r * 16u + c8 + 2u * h + 1u];
          if ((FLAGS & 2u) != 0u && c + 1u < p.N) {  // e is even: one whole word
            float lo = p.alpha * v0, hi = p.alpha * v1;
            if (p.beta != 0.0) {
              vec2 old = unpackHalf2x16(ow[e >> 1]);
              lo += p.beta * old.x;
              hi += p.beta * old.y;
            }
            ow[e >> 1] = float_to_half(lo) | (float_to_half(hi) << 16);
          } else {
            if (c < p.N) store_one(e, v0);
            if (c + 1u < p.N) store_one(e + 1u, v1);
          }
        }
      }
      subgroupBarrier();  // the scratch is rewritten by the next matrix
    }
  }
}
