#version 450
//
// flash_fwd_cm2.comp: the attention forward on workgroup-scope cooperative matrices
// (GL_NV_cooperative_matrix2), 16-bit q/k/v, float32 accumulation and softmax
// (runtime/src/vulkan/vk_attention_cm2.c decides when it runs; kernels/attention/flash_fwd.comp
// is the plain kernel it stands for).
//
// A workgroup owns BR = 64 query rows of one (batch, q head); Q is loaded once as an A matrix
// and the keys are walked in tiles of BC = 64 (causal: up to its last row):
//   S = Q K^T, scored per element (scale, mask, causal: -inf where hidden);
//   the online softmax on whole matrices: the row maxima by a row reduction, M = max(M, rowmax),
//   P = exp(S - M), the row sums by a row reduction, L = exp(M_old - M) L + rowsum;
//   O = exp(M_old - M) O + P V (P rounded to 16 bits).
// The row statistics are kept as BR x BC matrices whose rows repeat one value (the reductions
// broadcast), resized to BR x HDIM by a "smear" reduction where O needs them. M starts at
// -FLT_MAX / 2 rather than -inf, so M_old - M is never inf - inf. At the end out = O / L
// (0 for a row with no visible key) and lse = M + log(L) (-inf there), as the plain kernel
// writes them. HDIM (specialization constant 0) is D = Dv, a multiple of 16; no dropout.
// Built as flash_fwd_cm2 (float16) and flash_fwd_cm2_bf16 (tools/spirv_bf16.c).
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

layout(std430, binding = 0) writeonly buffer OUT { float16_t o16[]; };
layout(std430, binding = 1) writeonly buffer LSE { float lse[]; };
layout(std430, binding = 2) readonly buffer Q16 { float16_t q16[]; };
layout(std430, binding = 3) readonly buffer K16 { float16_t k16[]; };
layout(std430, binding = 4) readonly buffer V16 { float16_t v16[]; };

// Every load clamps to 0 at the edges (tensor layouts with the constant clamp mode). Dropping
// the clamp where every tile lies inside (the Undefined mode) ran the forward and backward 1.5-2x
// slower on an H200 (tests/gpu/attention_tiles.lua history in docs/performance.md).
#define CLAMP gl_CooperativeMatrixClampModeConstantNV
#define CLAMP_OUT gl_CooperativeMatrixClampModeConstantNV
#define ACC(R, C) coopmat<float, gl_ScopeWorkgroup, R, C, gl_MatrixUseAccumulator>
#define MA(R, C) coopmat<float16_t, gl_ScopeWorkgroup, R, C, gl_MatrixUseA>
#define MB(R, C) coopmat<float16_t, gl_ScopeWorkgroup, R, C, gl_MatrixUseB>

float max_of(const in float x, const in float y) { return max(x, y); }
float sum_of(const in float x, const in float y) { return x + y; }
float first_of(const in float x, const in float y) { return x; }

float scored(const in uint r, const in uint c, const in float dot, const in uint b,
             const in uint h, const in uint i0, const in uint j0) {
  uint i = i0 + r;
  return i >= pc.Tq ? NEG_INF : score(dot, b, h, i, j0 + c);
}
float max2(const in uint r, const in uint c, const in float x, const in float y) {
  return max(x, y);
}
float exp1(const in uint r, const in uint c, const in float x) { return exp(x); }

// Writes lse for the row (once, from column 0); returns m unchanged.
float put_lse(const in uint r, const in uint c, const in float m, const in float l,
              const in uint row0, const in uint i0) {
  if (c == 0u && i0 + r < pc.Tq) lse[row0 + r] = l > 0.0 ? m + log(l) : NEG_INF;
  return m;
}

void main() {
  uint i0 = gl_WorkGroupID.x * BR;
  uint h = gl_WorkGroupID.y, b = gl_WorkGroupID.z, kh = h / GROUP;
  tensorViewNV<2, false, 1, 0> tview = createTensorViewNV(2, false, 1, 0);

  tensorLayoutNV<2, CLAMP> lq = createTensorLayoutNV(2, CLAMP);
  lq = setTensorLayoutDimensionNV(lq, pc.Tq, HDIM);
  lq = setTensorLayoutStrideNV(lq, pc.q_st, 1);
  tensorLayoutNV<2, CLAMP> lk = createTensorLayoutNV(2, CLAMP);
  lk = setTensorLayoutDimensionNV(lk, pc.Tk, HDIM);
  tensorLayoutNV<2, CLAMP> lv = lk;
  lk = setTensorLayoutStrideNV(lk, pc.k_st, 1);
  lv = setTensorLayoutStrideNV(lv, pc.v_st, 1);

  MA(BR, HDIM) qa;
  coopMatLoadTensorNV(qa, q16, pc.q_base + b * pc.q_sb + h * pc.q_sh,
                      sliceTensorLayoutNV(lq, i0, BR, 0, HDIM));
  uint kbase = pc.k_base + b * pc.k_sb + kh * pc.k_sh;
  uint vbase = pc.v_base + b * pc.v_sb + kh * pc.v_sh;

  const float NEG_BIG = uintBitsToFloat(0xFEFFFFFFu);  // -FLT_MAX / 2
  ACC(BR, HDIM) o = ACC(BR, HDIM)(0.0);
  ACC(BR, BC) m = ACC(BR, BC)(NEG_BIG), l = ACC(BR, BC)(0.0);

  uint kend = CAUSAL ? min(pc.Tk, i0 + BR) : pc.Tk;
  [[dont_unroll]] for (uint j0 = 0u; j0 < kend; j0 += BC) {
    MB(HDIM, BC) kt;
    coopMatLoadTensorNV(kt, k16, kbase, sliceTensorLayoutNV(lk, j0, BC, 0, HDIM), tview);
    ACC(BR, BC) s = coopMatMulAdd(qa, kt, ACC(BR, BC)(0.0));
    // a tile that every query row sees whole (no mask, keys in range, below the causal
    // diagonal) only scales; the others are scored per element (half the kernel's time when
    // every tile went that way)
    if (!HAS_MASK && j0 + BC <= pc.Tk && (!CAUSAL || j0 + BC <= i0 + 1u)) s = s * pc.scale;
    else coopMatPerElementNV(s, s, scored, b, h, i0, j0);

    ACC(BR, BC) rowmax, p, rowsum, em, m_old = m;
    coopMatReduceNV(rowmax, s, gl_CooperativeMatrixReduceRowNV, max_of);
    coopMatPerElementNV(m, rowmax, max2, m_old);
    coopMatPerElementNV(p, s - m, exp1);
    coopMatPerElementNV(em, m_old - m, exp1);
    coopMatReduceNV(rowsum, p, gl_CooperativeMatrixReduceRowNV, sum_of);
    l = em * l + rowsum;

    ACC(BR, HDIM) em_wide;
    coopMatReduceNV(em_wide, em, gl_CooperativeMatrixReduceRowNV, first_of);
    o = o * em_wide;
    MB(BC, HDIM) vm;
    coopMatLoadTensorNV(vm, v16, vbase, sliceTensorLayoutNV(lv, j0, BC, 0, HDIM));
    o = coopMatMulAdd(MA(BR, BC)(p), vm, o);
  }

  uint row0 = (b * HQ + h) * pc.Tq + i0;
  ACC(BR, BC) unused;
  coopMatPerElementNV(unused, m, put_lse, l, row0, i0);
  ACC(BR, HDIM) l_wide;
  coopMatReduceNV(l_wide, l, gl_CooperativeMatrixReduceRowNV, first_of);
  [[unroll]] for (int e = 0; e < l_wide.length(); e++)
    l_wide[e] = l_wide[e] > 0.0 ? 1.0 / l_wide[e] : 0.0;
  o = o * l_wide;

  // out: fresh [B, Hq, Tq, HDIM]
  tensorLayoutNV<2, CLAMP_OUT> lo = createTensorLayoutNV(2, CLAMP_OUT);
  lo = setTensorLayoutDimensionNV(lo, pc.Tq, HDIM);
  lo = setTensorLayoutStrideNV(lo, HDIM, 1);
  coopmat<float16_t, gl_ScopeWorkgroup, BR, HDIM, gl_MatrixUseAccumulator> ho =
      coopmat<float16_t, gl_ScopeWorkgroup, BR, HDIM, gl_MatrixUseAccumulator>(o);
  coopMatStoreTensorNV(ho, o16, (b * HQ + h) * pc.Tq * HDIM,
                       sliceTensorLayoutNV(lo, i0, BR, 0, HDIM));
}
