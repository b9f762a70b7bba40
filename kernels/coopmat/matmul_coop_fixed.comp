#version 450
//
// matmul_coop_fixed.comp: kernels/coopmat/matmul_coop.comp with its tile configuration fixed at
// build time instead of specialized: 2 x 2 subgroups of 4 x 4 matrices (128 x 128 tiles), slices
// of 32 (CFG as there), and its shared memory in 16-byte units (one 128-bit store per chunk; the
// GL_KHR_cooperative_matrix flavor only: GL_NV_cooperative_matrix loads need float16_t arrays).
// The runtime takes it for that configuration (vk_matmul_coop.c).
#extension GL_GOOGLE_include_directive : require
#define FIXED_CFG 0x24422u
#ifdef COOPMAT_KHR
#define SHARED_U4
#endif
#include "coopmat/matmul_coop.glsl"
