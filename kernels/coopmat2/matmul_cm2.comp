#version 450
//
// matmul_cm2.comp: float16 gemm on workgroup-scope cooperative matrices (GL_NV_cooperative_matrix2),
// accumulated in float32: out[z] = beta * out[z] + alpha * a[z] @ b[z] for every batch element z
// (runtime/src/vulkan/vk_matmul_coop.c). Built only where glslang knows GL_NV_cooperative_matrix2
// (CMakeLists.txt); used only on a device with VK_NV_cooperative_matrix2's workgroup scope, tensor
// addressing and flexible dimensions.
//
// A workgroup of 256 invocations owns a BM x BN tile of out as one accumulator matrix and walks K
// in slices of BK: each slice is one coopMatLoadTensorNV per operand straight from global memory
// (the driver stages it through shared memory) and one coopMatMulAdd. Tensor layouts describe
// the operands: a row-major operand is an (rows x cols) tensor with row stride ld, a
// column-major one the transposed tensor read through a transposing view, so transposed views
// (x @ w:t(), the backward's a:t() @ g) cost no copy. Edges in M, N and K: tiles that cross an
// edge, and K's last partial slice, read through layouts clamped to a constant 0, and results
// are stored through a clamped layout that drops elements outside out; interior tiles' whole
// slices take unclamped layouts.
//
// Specializations: MODES bit 0 a is column-major (M contiguous), bit 1 b is column-major (K
// contiguous), bit 2 both operands' strides and bases are multiples of 8 elements (a hint the
// driver can use for 16-byte loads), bit 3 interior tiles load slice k + 1 before multiplying
// slice k (else they unroll UNROLL slices), bits 4-5 UNROLL; BM, BN, BK the tile.
//
// Batches: flat z in [0, nb1 * nb2) is (z / nb2, z % nb2), each operand with its own stride per
// batch dimension (0: broadcast); out is contiguous (o_sb per z).
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint MODES = 0u;
layout(constant_id = 1) const uint BM = 128u;
layout(constant_id = 2) const uint BN = 256u;
layout(constant_id = 3) const uint BK = 32u;
const bool A_COL = (MODES & 1u) != 0u, B_COL = (MODES & 2u) != 0u, ALIGNED = (MODES & 4u) != 0u;
const bool PREFETCH = (MODES & 8u) != 0u, OUT_F32 = (MODES & 64u) != 0u;
// bit 7: the added term is beta * c, c read from binding 3 with its own strides (addmm,
// baddbmm, Linear's bias in one dispatch) instead of beta * out; bit 8: c is bfloat16 (c is
// read as 32-bit words and decoded here, so the bfloat16 rewrite of this module leaves it be)
const bool HAS_C = (MODES & 128u) != 0u, C_BF16 = (MODES & 256u) != 0u;
// slices per iteration of the interior loop: MODES bits 4-5 = 0, 1, 2, 3 give 8, 2, 4, 16
// (more unrolling let the compiler overlap loads and products better on an H100: 8 beat 4, 2, 1)
const uint UNROLL_SEL = (MODES >> 4) & 3u;
const uint UNROLL = UNROLL_SEL == 0u ? 8u : UNROLL_SEL == 1u ? 2u : UNROLL_SEL == 2u ? 4u : 16u;

layout(push_constant) uniform Params {
  uint M, N, K;
  uint a_base, b_base, o_base;
  uint a_ld, b_ld;
  uint nb2;
  uint a_sb1, a_sb2, b_sb1, b_sb2;
  uint o_sb;
  uint m0, n0, batch0;
  float alpha, beta;
  uint c_base;
  int c_sb, c_rs, c_cs;
} p;

layout(std430, binding = 0) buffer O { float16_t data_o[]; };
layout(std430, binding = 0) buffer OF { float data_of[]; };  // the same buffer, when OUT_F32
layout(std430, binding = 1) readonly buffer A { float16_t data_a[]; };
layout(std430, binding = 2) readonly buffer B { float16_t data_b[]; };
layout(std430, binding = 3) readonly buffer CW { uint cw[]; };

#define CLAMP gl_CooperativeMatrixClampModeConstantNV
#define MAT_A coopmat<float16_t, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA>
#define MAT_B coopmat<float16_t, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB>
#define MAT_C coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>
#define MAT_H coopmat<float16_t, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>

// The slice at k into ma, mb: a's rows row0.., b's columns col0.., through layouts la, lb.
#define LOAD_AB(ma, mb, la, lb, k)                                                            \
  {                                                                                           \
    if (A_COL) coopMatLoadTensorNV(ma, data_a, abase, sliceTensorLayoutNV(la, k, BK, row0, BM), tview); \
    else coopMatLoadTensorNV(ma, data_a, abase, sliceTensorLayoutNV(la, row0, BM, k, BK));   \
    if (B_COL) coopMatLoadTensorNV(mb, data_b, bbase, sliceTensorLayoutNV(lb, col0, BN, k, BK), tview); \
    else coopMatLoadTensorNV(mb, data_b, bbase, sliceTensorLayoutNV(lb, k, BK, col0, BN));   \
  }
#define SLICE(la, lb, k)                                                                      \
  {                                                                                           \
    MAT_A ma;                                                                                 \
    MAT_B mb;                                                                                 \
    LOAD_AB(ma, mb, la, lb, k)                                                                \
    acc = coopMatMulAdd(ma, mb, acc);                                                         \
  }

// acc's element (r, c) of the tile at (row0, col0) plus beta * c there (0 outside out).
float add_c(const in uint r, const in uint c, const in float v, const in uint cbase,
            const in uint row0, const in uint col0) {
  uint row = row0 + r, col = col0 + c;
  if (row >= p.M || col >= p.N) return v;
  uint i = cbase + row * uint(p.c_rs) + col * uint(p.c_cs);
  uint h = (cw[i >> 1] >> ((i & 1u) * 16u)) & 0xffffu;
  return v + p.beta * (C_BF16 ? uintBitsToFloat(h << 16) : unpackHalf2x16(h).x);
}

void main() {
  uint z = gl_WorkGroupID.z + p.batch0;
  uint z1 = z / p.nb2, z2 = z % p.nb2;
  uint row0 = (gl_WorkGroupID.y + p.m0) * BM, col0 = (gl_WorkGroupID.x + p.n0) * BN;
  uint abase = p.a_base + z1 * p.a_sb1 + z2 * p.a_sb2;
  uint bbase = p.b_base + z1 * p.b_sb1 + z2 * p.b_sb2;
  uint obase = p.o_base + z * p.o_sb;
  uint a_ld = p.a_ld, b_ld = p.b_ld;
  if (ALIGNED) {  // tells the compiler what the host checked
    a_ld &= ~7u;
    b_ld &= ~7u;
    abase &= ~7u;
    bbase &= ~7u;
  }
  // the operands as stored: a is (M x K), or (K x M) when column-major; b (K x N) or (N x K)
  uint ar = A_COL ? p.K : p.M, ac = A_COL ? p.M : p.K;
  uint br = B_COL ? p.N : p.K, bc = B_COL ? p.K : p.N;
  tensorViewNV<2, false, 1, 0> tview = createTensorViewNV(2, false, 1, 0);

  MAT_C acc = MAT_C(0.0);
  // Whole slices of a tile inside out read through unclamped layouts: UNROLL at a time, then one
  // at a time; what is left (a tile crossing an edge, or K's last partial slice) goes through
  // the clamped ones.
  uint k = 0u;
  if (row0 + BM <= p.M && col0 + BN <= p.N) {
    tensorLayoutNV<2> la = createTensorLayoutNV(2);
    tensorLayoutNV<2> lb = createTensorLayoutNV(2);
    la = setTensorLayoutDimensionNV(la, ar, ac);
    lb = setTensorLayoutDimensionNV(lb, br, bc);
    la = setTensorLayoutStrideNV(la, a_ld, 1);
    lb = setTensorLayoutStrideNV(lb, b_ld, 1);
    if (PREFETCH && p.K >= BK) {  // slice k + BK's loads issued before slice k's product
      MAT_A ma;
      MAT_B mb;
      LOAD_AB(ma, mb, la, lb, 0u)
      for (; k + BK <= p.K; k += BK) {
        MAT_A na;
        MAT_B nb;
        if (k + 2u * BK <= p.K) LOAD_AB(na, nb, la, lb, k + BK)
        acc = coopMatMulAdd(ma, mb, acc);
        ma = na;
        mb = nb;
      }
    } else {
      for (; k + BK * UNROLL <= p.K; k += BK * UNROLL) {
        [[unroll]] for (uint u = 0u; u < UNROLL; u++) SLICE(la, lb, k + u * BK)
      }
      for (; k + BK <= p.K; k += BK) SLICE(la, lb, k)
    }
  }
  if (k < p.K) {
    tensorLayoutNV<2, CLAMP> la = createTensorLayoutNV(2, CLAMP);
    tensorLayoutNV<2, CLAMP> lb = createTensorLayoutNV(2, CLAMP);
    la = setTensorLayoutDimensionNV(la, ar, ac);
    lb = setTensorLayoutDimensionNV(lb, br, bc);
    la = setTensorLayoutStrideNV(la, a_ld, 1);
    lb = setTensorLayoutStrideNV(lb, b_ld, 1);
    for (; k < p.K; k += BK) SLICE(la, lb, k)
  }

  tensorLayoutNV<2, CLAMP> lo = createTensorLayoutNV(2, CLAMP);
  lo = setTensorLayoutDimensionNV(lo, p.M, p.N);
  lo = setTensorLayoutStrideNV(lo, p.N, 1);
  acc = acc * p.alpha;
  if (HAS_C) {
    coopMatPerElementNV(acc, acc, add_c, p.c_base + z * uint(p.c_sb), row0, col0);
    MAT_H h = MAT_H(acc);
    coopMatStoreTensorNV(h, data_o, obase, sliceTensorLayoutNV(lo, row0, BM, col0, BN));
    return;
  }
  if (OUT_F32) {
    if (p.beta != 0.0) {
      MAT_C old;
      coopMatLoadTensorNV(old, data_of, obase, sliceTensorLayoutNV(lo, row0, BM, col0, BN));
      acc = acc + old * p.beta;
    }
    coopMatStoreTensorNV(acc, data_of, obase, sliceTensorLayoutNV(lo, row0, BM, col0, BN));
    return;
  }
  if (p.beta != 0.0) {
    MAT_H old;
    coopMatLoadTensorNV(old, data_o, obase, sliceTensorLayoutNV(lo, row0, BM, col0, BN));
    acc = acc + MAT_C(old) * p.beta;
  }
  MAT_H h = MAT_H(acc);
  coopMatStoreTensorNV(h, data_o, obase, sliceTensorLayoutNV(lo, row0, BM, col0, BN));
}
