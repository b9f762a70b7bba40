#version 450
//
// flash_bwd_dkdv_cm2.comp: the attention backward's key/value gradients on workgroup-scope
// cooperative matrices (GL_NV_cooperative_matrix2), 16-bit q/k/v/gout, float32 accumulation
// (runtime/src/vulkan/vk_attention_cm2.c decides when it runs; kernels/attention/flash_bwd_dkdv.comp
// is the plain kernel it stands for, FlashAttention-2's algorithm 2).
//
// A workgroup owns BC = 64 keys of one (batch, k/v head) and walks the query rows of every q head
// that shares the k/v head in tiles of BR = 64 (causal: from the first tile that sees its keys).
// Everything runs transposed, keys as rows, so that the per-key sums are plain products:
//   S^T  = K Q^T                     (BC x BR; K loaded once as an A matrix)
//   P^T  = exp(score(S^T) - lse)     (per element: scale, mask, causal, lse of the query column)
//   dV  += P^T dO                    (P^T rounded to 16 bits, as FlashAttention does)
//   dP^T = V dO^T
//   dS^T = P^T * (dP^T - delta)      (delta = rowsum(dO * O) of the query column)
//   dK  += dS^T Q
// and at the end gk = dK * scale, gv = dV, rounded once to 16 bits. lse and delta come from
// flash_bwd_pre's stats (lse' = +inf for rows with no visible key, so their P is 0). Query
// columns past Tq and keys past Tk read clamped zeros and are given P = 0.
//
// HDIM (specialization constant 0) is D = Dv, a multiple of 16. Dropout is not read here (the
// host sends it to the plain kernels). Built as flash_bwd_dkdv_cm2 (float16) and, through
// tools/spirv_bf16.c, flash_bwd_dkdv_cm2_bf16.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#include "attention/attn.glsl"

layout(local_size_x = 128) in;
layout(constant_id = 0) const uint HDIM = 64u;
layout(constant_id = 1) const uint BR = 64u;  // query rows per tile
layout(constant_id = 2) const uint BC = 64u;  // keys per tile

layout(std430, binding = 0) writeonly buffer GK { float16_t gk[]; };
layout(std430, binding = 1) writeonly buffer GV { float16_t gv[]; };
layout(std430, binding = 2) readonly buffer Q16 { float16_t q16[]; };
layout(std430, binding = 3) readonly buffer K16 { float16_t k16[]; };
layout(std430, binding = 4) readonly buffer V16 { float16_t v16[]; };
layout(std430, binding = 6) readonly buffer G16 { float16_t g16[]; };

// Every load clamps to 0 at the edges (tensor layouts with the constant clamp mode). Dropping
// the clamp where every tile lies inside (the Undefined mode) ran the forward and backward 1.5-2x
// slower on an H200 (tests/gpu/attention_tiles.lua history in docs/performance.md).
#define CLAMP gl_CooperativeMatrixClampModeConstantNV
#define CLAMP_OUT gl_CooperativeMatrixClampModeConstantNV
#define ACC(R, C) coopmat<float, gl_ScopeWorkgroup, R, C, gl_MatrixUseAccumulator>
#define MA(R, C) coopmat<float16_t, gl_ScopeWorkgroup, R, C, gl_MatrixUseA>
#define MB(R, C) coopmat<float16_t, gl_ScopeWorkgroup, R, C, gl_MatrixUseB>

// P^T at (key row r, query column c) from the raw dot product.
float prob_t(const in uint r, const in uint c, const in float dot, const in uint b,
             const in uint h, const in uint i0, const in uint j0) {
  uint i = i0 + c, j = j0 + r;
  if (i >= pc.Tq) return 0.0;
  float x = score(dot, b, h, i, j);
  return x == NEG_INF ? 0.0 : exp(x - stats[(b * HQ + h) * pc.Tq + i].x);
}

// dS^T at (r, c) from dP^T and P^T.
float dscore_t(const in uint r, const in uint c, const in float dp, const in float p,
               const in uint b, const in uint h, const in uint i0) {
  uint i = i0 + c;
  return i >= pc.Tq ? 0.0 : p * (dp - stats[(b * HQ + h) * pc.Tq + i].y);
}

// The current query tile's lse' and delta (+inf and 0 past Tq), for tiles seen whole.
shared float lse_sh[BR], delta_sh[BR];
float prob_t_in(const in uint r, const in uint c, const in float dot) {
  return exp(dot * pc.scale - lse_sh[c]);
}
float dscore_t_in(const in uint r, const in uint c, const in float dp, const in float p) {
  return p * (dp - delta_sh[c]);
}

void main() {
  uint j0 = gl_WorkGroupID.x * BC;
  uint kh = gl_WorkGroupID.y, b = gl_WorkGroupID.z;
  tensorViewNV<2, false, 1, 0> tview = createTensorViewNV(2, false, 1, 0);

  tensorLayoutNV<2, CLAMP> lk = createTensorLayoutNV(2, CLAMP);
  lk = setTensorLayoutDimensionNV(lk, pc.Tk, HDIM);
  tensorLayoutNV<2, CLAMP> lv = lk;
  lk = setTensorLayoutStrideNV(lk, pc.k_st, 1);
  lv = setTensorLayoutStrideNV(lv, pc.v_st, 1);
  tensorLayoutNV<2, CLAMP> lq = createTensorLayoutNV(2, CLAMP);
  lq = setTensorLayoutDimensionNV(lq, pc.Tq, HDIM);
  tensorLayoutNV<2, CLAMP> lg = lq;
  lq = setTensorLayoutStrideNV(lq, pc.q_st, 1);
  lg = setTensorLayoutStrideNV(lg, pc.g_st, 1);

  MA(BC, HDIM) ka, va;
  coopMatLoadTensorNV(ka, k16, pc.k_base + b * pc.k_sb + kh * pc.k_sh,
                      sliceTensorLayoutNV(lk, j0, BC, 0, HDIM));
  coopMatLoadTensorNV(va, v16, pc.v_base + b * pc.v_sb + kh * pc.v_sh,
                      sliceTensorLayoutNV(lv, j0, BC, 0, HDIM));
  ACC(BC, HDIM) dk = ACC(BC, HDIM)(0.0), dv = ACC(BC, HDIM)(0.0);

  // causal: query rows i < j0 see none of these keys
  uint first = CAUSAL ? (j0 / BR) * BR : 0u;
  for (uint g = 0u; g < GROUP; g++) {
    uint h = kh * GROUP + g;
    uint qbase = pc.q_base + b * pc.q_sb + h * pc.q_sh;
    uint gbase = pc.g_base + b * pc.g_sb + h * pc.g_sh;
    [[dont_unroll]] for (uint i0 = first; i0 < pc.Tq; i0 += BR) {
      // a tile whose keys every query sees (no mask, keys in range, below the causal
      // diagonal) takes the query statistics from shared memory and skips the masking
      bool whole = !HAS_MASK && j0 + BC <= pc.Tk && (!CAUSAL || j0 + BC <= i0 + 1u);
      if (whole) {
        barrier();  // the previous tile's reads are done
        for (uint t = gl_LocalInvocationID.x; t < BR; t += gl_WorkGroupSize.x) {
          uint i = i0 + t;
          vec2 s2 = i < pc.Tq ? stats[(b * HQ + h) * pc.Tq + i] : vec2(-NEG_INF, 0.0);
          lse_sh[t] = s2.x;
          delta_sh[t] = s2.y;
        }
        barrier();
      }
      MB(HDIM, BR) qt;
      coopMatLoadTensorNV(qt, q16, qbase, sliceTensorLayoutNV(lq, i0, BR, 0, HDIM), tview);
      ACC(BC, BR) st = coopMatMulAdd(ka, qt, ACC(BC, BR)(0.0));
      ACC(BC, BR) pt;
      if (whole) coopMatPerElementNV(pt, st, prob_t_in);
      else coopMatPerElementNV(pt, st, prob_t, b, h, i0, j0);

      MB(BR, HDIM) go;
      coopMatLoadTensorNV(go, g16, gbase, sliceTensorLayoutNV(lg, i0, BR, 0, HDIM));
      dv = coopMatMulAdd(MA(BC, BR)(pt), go, dv);

      MB(HDIM, BR) got;
      coopMatLoadTensorNV(got, g16, gbase, sliceTensorLayoutNV(lg, i0, BR, 0, HDIM), tview);
      ACC(BC, BR) dpt = coopMatMulAdd(va, got, ACC(BC, BR)(0.0));
      ACC(BC, BR) dst;
      if (whole) coopMatPerElementNV(dst, dpt, dscore_t_in, pt);
      else coopMatPerElementNV(dst, dpt, dscore_t, pt, b, h, i0);

      MB(BR, HDIM) qm;
      coopMatLoadTensorNV(qm, q16, qbase, sliceTensorLayoutNV(lq, i0, BR, 0, HDIM));
      dk = coopMatMulAdd(MA(BC, BR)(dst), qm, dk);
    }
  }

  // gk, gv: fresh [B, Hkv, Tk, HDIM]
  tensorLayoutNV<2, CLAMP_OUT> lo = createTensorLayoutNV(2, CLAMP_OUT);
  lo = setTensorLayoutDimensionNV(lo, pc.Tk, HDIM);
  lo = setTensorLayoutStrideNV(lo, HDIM, 1);
  uint obase = (b * (HQ / GROUP) + kh) * pc.Tk * HDIM;
  dk = dk * pc.scale;
  coopmat<float16_t, gl_ScopeWorkgroup, BC, HDIM, gl_MatrixUseAccumulator> hk =
      coopmat<float16_t, gl_ScopeWorkgroup, BC, HDIM, gl_MatrixUseAccumulator>(dk);
  coopMatStoreTensorNV(hk, gk, obase, sliceTensorLayoutNV(lo, j0, BC, 0, HDIM));
  coopmat<float16_t, gl_ScopeWorkgroup, BC, HDIM, gl_MatrixUseAccumulator> hv =
      coopmat<float16_t, gl_ScopeWorkgroup, BC, HDIM, gl_MatrixUseAccumulator>(dv);
  coopMatStoreTensorNV(hv, gv, obase, sliceTensorLayoutNV(lo, j0, BC, 0, HDIM));
}
