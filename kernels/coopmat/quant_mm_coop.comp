#version 450
// quant_mm_coop.comp: the quantized Linear for larger batches on tensor cores, out[m, n] =
// sum_k x[m, k] W[n, k], W quantized (quant_unit.glsl), float16 products accumulated in
// float32 on subgroup-scope cooperative matrices (runtime/src/vulkan/vk_quant_matmul.c picks it
// over quant_mm.comp where the device runs the float16 tensor-core matmul; built per flavor,
// COOPMAT_KHR / COOPMAT_NV, as matmul_coop.comp).
//
// A workgroup of 4 subgroups (32 wide) computes a 64 x 64 tile of out, each subgroup 32 x 32 as
// 2 x 2 matrices of 16 x 16, walking K two units (64 weights) at a time: the x slice [64 x 64]
// is rounded to float16 into shared memory (row-major), the weight slice decoded by all 128
// invocations (one weight row's unit each) and rounded to float16 into shared memory as B
// column-major ([n][k]), rows padded by 8 halves. Then four 16-deep steps of MMA. The results go through a
// per-subgroup float scratch in shared memory, where the bounds of m and n are applied.
// Rounding x and the decoded weights to float16 costs about 2^-11 of each product, below a
// 4- or 8-bit weight's own rounding; EMBER_VK_QUANT_COOP=0 keeps the float32 tile kernel.
// Operands: 0 x (float32 [m, k] from x_off), 1 the blocks, 2 out (float32 [m, n]).
// Specialization constants: 0 the format, 1 and 2 the affine group and symmetry.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
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

layout(local_size_x = 128) in;
layout(constant_id = 0) const uint FORMAT = 0u;
layout(constant_id = 1) const uint GROUP = 32u;
layout(constant_id = 2) const uint SYMMETRIC = 0u;

layout(std430, set = 0, binding = 0) readonly buffer B0 { float x[]; };
layout(std430, set = 0, binding = 1) readonly buffer B1 { uint w[]; } qw;
layout(std430, set = 0, binding = 2) writeonly buffer B2 { float o[]; };
layout(push_constant) uniform Params {
  uint m, n, k, row_bytes;
  uint x_off;  // first element of x
  uint w_off;  // first byte of the blocks
  uint o_off;  // first element of out
} p;

#include "quant_unit.glsl"

#define BT 64u
#define BK 64u                    // two units of K per step: every invocation decodes one
#define LD 72u                    // 64 halves of K plus 8 of padding
shared float16_t xs[BT * LD];     // [m][k]
shared float16_t ws[BT * LD];     // [n][k]: B (k x n) column-major
shared float cs[4u * 256u];       // a 16 x 16 float scratch per subgroup

void main() {
  uint t = gl_LocalInvocationID.x, sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
  uint wm = sg & 1u, wn = sg >> 1;
  uint n0 = gl_WorkGroupID.x * BT, mb = gl_WorkGroupID.y * BT, nu = p.k / 32u;
  MAT_C acc[2][2];
  for (uint i = 0u; i < 2u; i++)
    for (uint j = 0u; j < 2u; j++) acc[i][j] = MAT_C(0.0);
  for (uint u0 = 0u; u0 < nu; u0 += 2u) {
    // x: invocation t stages 32 values of row t / 2 (zeros past K: an odd count of units)
    uint r = t >> 1, c0 = (t & 1u) * 32u, gr = mb + r;
    for (uint j = 0u; j < 32u; j++) {
      uint kx = u0 * 32u + c0 + j;
      xs[r * LD + c0 + j] = float16_t(gr < p.m && kx < p.k ? x[p.x_off + gr * p.k + kx] : 0.0);
    }
    // the weight: invocation t decodes unit u0 + t / 64 of row n0 + t % 64
    {
      float v[32];
      uint row = t % BT, u = u0 + t / BT, gn = n0 + row;
      if (gn < p.n && u < nu) q_unit(p.w_off + gn * p.row_bytes, u, v);
      else for (uint j = 0u; j < 32u; j++) v[j] = 0.0;
      for (uint j = 0u; j < 32u; j++) ws[row * LD + (t / BT) * 32u + j] = float16_t(v[j]);
    }
    barrier();
    for (uint kk = 0u; kk < BK; kk += 16u) {
      MAT_A a[2];
      MAT_B b[2];
      for (uint i = 0u; i < 2u; i++) LOAD_ROW(a[i], xs, (wm * 32u + i * 16u) * LD + kk, LD);
      for (uint j = 0u; j < 2u; j++) LOAD_COL(b[j], ws, (wn * 32u + j * 16u) * LD + kk, LD);
      for (uint i = 0u; i < 2u; i++)
        for (uint j = 0u; j < 2u; j++) acc[i][j] = MMA(a[i], b[j], acc[i][j]);
    }
    barrier();
  }
  for (uint i = 0u; i < 2u; i++)
    for (uint j = 0u; j < 2u; j++) {
      STORE_ROW(acc[i][j], cs, sg * 256u, 16u);
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      for (uint e = lane; e < 256u; e += gl_SubgroupSize) {
        uint row = mb + wm * 32u + i * 16u + e / 16u, col = n0 + wn * 32u + j * 16u + e % 16u;
        if (row < p.m && col < p.n) o[p.o_off + row * p.n + col] = cs[sg * 256u + e];
      }
      subgroupBarrier();  // the scratch is rewritten by the next matrix
    }
}
