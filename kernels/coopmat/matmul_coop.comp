#version 450
//
// matmul_coop.comp: float16 gemm on subgroup-scope cooperative matrices (tensor cores),
// accumulated in float32: out[z] = beta * out[z] + alpha * a[z] @ b[z] for every batch element
// z (runtime/src/vulkan/vk_matmul_coop.c).
//
// Built in the flavors the build's glslang supports (CMakeLists.txt tests each): COOPMAT_KHR
// (GL_KHR_cooperative_matrix) and COOPMAT_NV (GL_NV_cooperative_matrix, all Debian 12's glslang
// 12 knows). The runtime uses it on a device that lists 16x16x16 float16 x float16 + float32
// matrices at subgroup scope, has 32-wide subgroups and 16-bit storage.
//
// The tile is a specialization (CFG): WM x WN subgroups, each computing FM x FN matrices of
// 16 x 16, so a workgroup computes a (WM*FM*16) x (WN*FN*16) tile of out, walking K in slices of
// BK. Two stages of shared memory: while the subgroups multiply slice s out of one stage, each
// invocation holds slice s+1's global loads in registers and writes them to the other stage
// afterwards; one barrier per slice. Operands are staged in their own layout (row- or
// column-major: MODES bits 0 and 1, so a transposed view costs no copy), rows padded by 8
// halves (16 bytes) so the matrix loads from shared memory hit distinct banks. Global loads take
// chunks of 8 halves along the contiguous dimension: one 128-bit load when the host proved
// chunks whole and aligned (MODES bits 2, 3), else 8 bounds-checked 16-bit loads; elements
// outside the matrix read as 0, which is how edges in M, N and K are handled.
//
// The epilogue: a 16 x 16 result wholly inside out, with beta = 0 and 8-aligned rows (MODES bit
// 4), is scaled, rounded to float16 and stored straight from the matrix; any other goes through a
// per-subgroup float scratch in shared memory where beta and the bounds are applied.
//
// Batches: flat z in [0, nb1 * nb2) is (z / nb2, z % nb2), each operand with its own stride per
// batch dimension (0: broadcast); out is contiguous (o_sb per z).
#extension GL_GOOGLE_include_directive : require
#include "coopmat/matmul_coop.glsl"
