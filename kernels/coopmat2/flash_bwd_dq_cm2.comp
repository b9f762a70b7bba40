#version 450
//
// flash_bwd_dq_cm2.comp: the attention backward's query gradient on workgroup-scope cooperative
// matrices (GL_NV_cooperative_matrix2), 16-bit q/k/v/gout, float32 accumulation
// (runtime/src/vulkan/vk_attention_cm2.c; kernels/attention/flash_bwd_dq.comp is the plain
// kernel it stands for).
//
// A workgroup owns BR = 64 query rows of one (batch, q head); Q and dO are loaded once as A
// matrices, and it walks the keys in tiles of BC = 64 (causal: up to its last row):
//   S  = Q K^T,  P = exp(score(S) - lse)   (per element, with the row's lse)
//   dP = dO V^T, dS = P * (dP - delta)     (the row's delta)
//   dQ += dS K                             (dS rounded to 16 bits)
// and gq = dQ * scale, rounded once. Rows past Tq and keys past Tk read clamped zeros and get
// P = 0. HDIM (specialization constant 0) is D = Dv, a multiple of 16; no dropout. Built as
// flash_bwd_dq_cm2 (float16) and flash_bwd_dq_cm2_bf16 (tools/spirv_bf16.c).
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

layout(std430, binding = 0) writeonly buffer GQ { float16_t gq[]; };
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

// P at (query row r, key column c) from the raw dot product.
float prob(const in uint r, const in uint c, const in float dot, const in uint b,
           const in uint h, const in uint i0, const in uint j0) {
  uint i = i0 + r, j = j0 + c;
  if (i >= pc.Tq) return 0.0;
  float x = score(dot, b, h, i, j);
  return x == NEG_INF ? 0.0 : exp(x - stats[(b * HQ + h) * pc.Tq + i].x);
}

// dS at (r, c) from dP and P.
float dscore(const in uint r, const in uint c, const in float dp, const in float p,
             const in uint b, const in uint h, const in uint i0) {
  uint i = i0 + r;
  return i >= pc.Tq ? 0.0 : p * (dp - stats[(b * HQ + h) * pc.Tq + i].y);
}

// This workgroup's rows' lse' and delta (+inf and 0 past Tq), for the tiles every row sees whole.
shared float lse_sh[BR], delta_sh[BR];
float prob_in(const in uint r, const in uint c, const in float dot) {
  return exp(dot * pc.scale - lse_sh[r]);
}
float dscore_in(const in uint r, const in uint c, const in float dp, const in float p) {
  return p * (dp - delta_sh[r]);
}

void main() {
  uint i0 = gl_WorkGroupID.x * BR;
  uint h = gl_WorkGroupID.y, b = gl_WorkGroupID.z, kh = h / GROUP;
  tensorViewNV<2, false, 1, 0> tview = createTensorViewNV(2, false, 1, 0);

  tensorLayoutNV<2, CLAMP> lq = createTensorLayoutNV(2, CLAMP);
  lq = setTensorLayoutDimensionNV(lq, pc.Tq, HDIM);
  tensorLayoutNV<2, CLAMP> lg = lq;
  lq = setTensorLayoutStrideNV(lq, pc.q_st, 1);
  lg = setTensorLayoutStrideNV(lg, pc.g_st, 1);
  tensorLayoutNV<2, CLAMP> lk = createTensorLayoutNV(2, CLAMP);
  lk = setTensorLayoutDimensionNV(lk, pc.Tk, HDIM);
  tensorLayoutNV<2, CLAMP> lv = lk;
  lk = setTensorLayoutStrideNV(lk, pc.k_st, 1);
  lv = setTensorLayoutStrideNV(lv, pc.v_st, 1);

  MA(BR, HDIM) qa, ga;
  coopMatLoadTensorNV(qa, q16, pc.q_base + b * pc.q_sb + h * pc.q_sh,
                      sliceTensorLayoutNV(lq, i0, BR, 0, HDIM));
  coopMatLoadTensorNV(ga, g16, pc.g_base + b * pc.g_sb + h * pc.g_sh,
                      sliceTensorLayoutNV(lg, i0, BR, 0, HDIM));
  uint kbase = pc.k_base + b * pc.k_sb + kh * pc.k_sh;
  uint vbase = pc.v_base + b * pc.v_sb + kh * pc.v_sh;
  ACC(BR, HDIM) dq = ACC(BR, HDIM)(0.0);

  for (uint t = gl_LocalInvocationID.x; t < BR; t += gl_WorkGroupSize.x) {
    uint i = i0 + t;
    vec2 st = i < pc.Tq ? stats[(b * HQ + h) * pc.Tq + i] : vec2(-NEG_INF, 0.0);
    lse_sh[t] = st.x;
    delta_sh[t] = st.y;
  }
  barrier();

  uint kend = CAUSAL ? min(pc.Tk, i0 + BR) : pc.Tk;
  [[dont_unroll]] for (uint j0 = 0u; j0 < kend; j0 += BC) {
    MB(HDIM, BC) kt;
    coopMatLoadTensorNV(kt, k16, kbase, sliceTensorLayoutNV(lk, j0, BC, 0, HDIM), tview);
    ACC(BR, BC) s = coopMatMulAdd(qa, kt, ACC(BR, BC)(0.0));
    // a tile every row sees whole (no mask, keys in range, below the causal diagonal) takes
    // the row statistics from shared memory and skips the masking
    bool whole = !HAS_MASK && j0 + BC <= pc.Tk && (!CAUSAL || j0 + BC <= i0 + 1u);
    ACC(BR, BC) p;
    if (whole) coopMatPerElementNV(p, s, prob_in);
    else coopMatPerElementNV(p, s, prob, b, h, i0, j0);

    MB(HDIM, BC) vt;
    coopMatLoadTensorNV(vt, v16, vbase, sliceTensorLayoutNV(lv, j0, BC, 0, HDIM), tview);
    ACC(BR, BC) dp = coopMatMulAdd(ga, vt, ACC(BR, BC)(0.0));
    ACC(BR, BC) ds;
    if (whole) coopMatPerElementNV(ds, dp, dscore_in, p);
    else coopMatPerElementNV(ds, dp, dscore, p, b, h, i0);

    MB(BC, HDIM) km;
    coopMatLoadTensorNV(km, k16, kbase, sliceTensorLayoutNV(lk, j0, BC, 0, HDIM));
    dq = coopMatMulAdd(MA(BR, BC)(ds), km, dq);
  }

  // gq: fresh [B, Hq, Tq, HDIM]
  tensorLayoutNV<2, CLAMP_OUT> lo = createTensorLayoutNV(2, CLAMP_OUT);
  lo = setTensorLayoutDimensionNV(lo, pc.Tq, HDIM);
  lo = setTensorLayoutStrideNV(lo, HDIM, 1);
  dq = dq * pc.scale;
  coopmat<float16_t, gl_ScopeWorkgroup, BR, HDIM, gl_MatrixUseAccumulator> hq =
      coopmat<float16_t, gl_ScopeWorkgroup, BR, HDIM, gl_MatrixUseAccumulator>(dq);
  coopMatStoreTensorNV(hq, gq, (b * HQ + h) * pc.Tq * HDIM,
                       sliceTensorLayoutNV(lo, i0, BR, 0, HDIM));
}
