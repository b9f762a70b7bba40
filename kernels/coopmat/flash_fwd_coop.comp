#version 450
//
// flash_fwd_coop.comp: the attention forward on tensor cores for float16 q/k/v (subgroup-scope
// 16x16x16 cooperative matrices, float32 accumulation; runtime/src/vulkan/vk_attention_coop.c
// decides when it runs, kernels/attention/flash_fwd.comp is the plain kernel it stands for).
//
// A workgroup of 4 subgroups of 32 takes 64 query rows of one (batch, head), 16 per subgroup,
// and walks the keys in tiles of BC = 64 (causal rows stop at their last visible tile):
//   - the key and value tiles [64, HDIM] are staged in shared memory as float16 (the query block
//     first went the same way into A matrices, kept in registers for the whole walk);
//   - S = Q K^T on tensor cores, per subgroup a 16 x 64 float32 result, stored to its scratch;
//   - the online softmax in float32: lanes 2r and 2r+1 share row r (32 columns each; the row's
//     max through a shuffle), with the scale, mask, causal and dropout of attn.glsl's score()
//     and kept(); P is written as float16 to the subgroup's P tile;
//   - T = P V on tensor cores (16 x HDIM), through the scratch into the lanes' float32 output
//     rows, which are rescaled by exp(m_old - m_new) first.
// At the end out = O / l and lse = m + log(l), as the plain kernel writes them.
// HDIM (specialization constant 0) is the head dim, D = Dv, a multiple of 16 up to 64. The host
// guarantees even bases and strides (32-bit word loads of element pairs) and 32-wide subgroups.
//
// Built per flavor as kernels/coopmat/*.comp are (COOPMAT_KHR, COOPMAT_NV).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#include "attention/attn.glsl"
#include "half16.glsl"

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

layout(local_size_x = 128) in;
layout(constant_id = 0) const uint HDIM = 64u;
const uint BR = 64u, BC = 64u, NF = HDIM / 16u, LDK = HDIM + 8u, LDS = BC + 4u, LDP = BC + 8u;
const uint HALF = HDIM / 2u;  // output columns per lane

layout(std430, binding = 0) buffer BO { uint w[]; } ob;
layout(std430, binding = 1) writeonly buffer BL { float lse[]; };

shared float16_t Ks[BR * LDK];  // the query block first, then each key tile
shared float16_t Vs[BC * LDK];
shared float Ss[4u * 16u * LDS];  // per subgroup: S, then T (HDIM <= BC columns)
shared float16_t Ps[4u * 16u * LDP];

// Stages rows [r0, r0 + 64) of a [*, HDIM] operand (rows at base + r * st, r < rows) as float16.
void stage(uint which, uint base, uint st, uint r0, uint rows) {
  for (uint t = gl_LocalInvocationID.x; t < 64u * HALF; t += 128u) {
    uint r = t / HALF, c = (t % HALF) * 2u;
    uint w = r0 + r < rows ? (which == 0u ? qb.w[(base + (r0 + r) * st + c) >> 1]
                            : which == 1u ? kb.w[(base + (r0 + r) * st + c) >> 1]
                                          : vb.w[(base + (r0 + r) * st + c) >> 1]) : 0u;
    f16vec2 h = unpackFloat2x16(w);
    if (which == 2u) {
      Vs[r * LDK + c] = h.x;
      Vs[r * LDK + c + 1u] = h.y;
    } else {
      Ks[r * LDK + c] = h.x;
      Ks[r * LDK + c + 1u] = h.y;
    }
  }
}

void main() {
  uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
  uint nrb = (pc.Tq + BR - 1u) / BR;
  uint rb = gl_WorkGroupID.x % nrb;
  uint h = gl_WorkGroupID.y, b = gl_WorkGroupID.z, kh = h / GROUP;
  uint r = lane >> 1, half_ = lane & 1u;         // this lane's row of the subgroup's 16
  uint i = rb * BR + sg * 16u + r;
  bool row_ok = i < pc.Tq;
  uint row = (b * HQ + h) * pc.Tq + i;
  uint kbase = pc.k_base + b * pc.k_sb + kh * pc.k_sh;
  uint vbase = pc.v_base + b * pc.v_sb + kh * pc.v_sh;
  float inv_keep = DROPOUT ? 1.0 / (1.0 - float(pc.drop_below) / 16777216.0) : 1.0;
  uint sbase = sg * 16u * LDS, pbase = sg * 16u * LDP;

  stage(0u, pc.q_base + b * pc.q_sb + h * pc.q_sh, pc.q_st, rb * BR, pc.Tq);
  barrier();
  MAT_A qa[NF];
  [[unroll]] for (uint d = 0u; d < NF; d++) LOAD_ROW(qa[d], Ks, sg * 16u * LDK + d * 16u, LDK);

  uint kend = pc.Tk;
  if (CAUSAL) kend = min(kend, rb * BR + BR);
  float m = NEG_INF, l = 0.0;
  float o[HALF];
  [[unroll]] for (uint c = 0u; c < HALF; c++) o[c] = 0.0;

  for (uint j0 = 0u; j0 < kend; j0 += BC) {
    barrier();  // every subgroup is done with the previous tiles (and the query block)
    stage(1u, kbase, pc.k_st, j0, pc.Tk);
    stage(2u, vbase, pc.v_st, j0, pc.Tk);
    barrier();
    // S = Q K^T: B[k][n] = K[j0 + n][k], column-major in Ks
    [[unroll]] for (uint n = 0u; n < BC / 16u; n++) {
      MAT_C acc = MAT_C(0.0);
      [[unroll]] for (uint d = 0u; d < NF; d++) {
        MAT_B kbm;
        LOAD_COL(kbm, Ks, n * 16u * LDK + d * 16u, LDK);
        acc = MMA(qa[d], kbm, acc);
      }
      STORE_ROW(acc, Ss, sbase + n * 16u, LDS);
    }
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    // the online softmax of row r over columns [half_ * 32, half_ * 32 + 32)
    float s[BC / 2u];
    float mt = NEG_INF;
    [[unroll]] for (uint c = 0u; c < BC / 2u; c++) {
      uint cc = half_ * (BC / 2u) + c;
      s[c] = row_ok ? score(Ss[sbase + r * LDS + cc], b, h, i, j0 + cc) : NEG_INF;
      mt = max(mt, s[c]);
    }
    mt = max(mt, subgroupShuffleXor(mt, 1u));
    float mn = max(m, mt);
    float sh = mn == NEG_INF ? 0.0 : mn;
    float alpha = exp(m - sh);
    l *= alpha;
    [[unroll]] for (uint c = 0u; c < HALF; c++) o[c] *= alpha;
    [[unroll]] for (uint c = 0u; c < BC / 2u; c++) {
      uint cc = half_ * (BC / 2u) + c;
      float p = exp(s[c] - sh);
      l += p;
      if (DROPOUT && p != 0.0) p = kept(row, j0 + cc) ? p * inv_keep : 0.0;
      Ps[pbase + r * LDP + cc] = float16_t(p);
    }
    m = mn;
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    // T = P V: A = P (row-major), B[k][n] = V[j0 + k][n] (row-major in Vs)
    [[unroll]] for (uint n = 0u; n < NF; n++) {
      MAT_C acc = MAT_C(0.0);
      [[unroll]] for (uint kk = 0u; kk < BC / 16u; kk++) {
        MAT_A pa;
        MAT_B vbm;
        LOAD_ROW(pa, Ps, pbase + kk * 16u, LDP);
        LOAD_ROW(vbm, Vs, kk * 16u * LDK + n * 16u, LDK);
        acc = MMA(pa, vbm, acc);
      }
      STORE_ROW(acc, Ss, sbase + n * 16u, LDS);
    }
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    [[unroll]] for (uint c = 0u; c < HALF; c++) o[c] += Ss[sbase + r * LDS + half_ * HALF + c];
    subgroupMemoryBarrierShared();
    subgroupBarrier();  // the scratch is read before the next tile's S overwrites it
  }
  l += subgroupShuffleXor(l, 1u);
  if (!row_ok) return;
  float inv = l > 0.0 ? 1.0 / l : 0.0;
  if (half_ == 0u) lse[row] = l > 0.0 ? m + log(l) : NEG_INF;
  uint e0 = (row * HDIM + half_ * HALF) >> 1;
  [[unroll]] for (uint c = 0u; c < HALF; c += 2u)
    ob.w[e0 + c / 2u] = float_to_half(o[c] * inv) | (float_to_half(o[c + 1u] * inv) << 16);
}
