#version 450
// quant_matvec.comp: the quantized matrix-vector product, float32 activations, every format
// (the body and its layout: quant_matvec.glsl; runtime/src/vulkan/vk_quant_matmul.c launches
// it). Operands: 0 x (float32 [m, k]), 1 the weight's blocks, 2 out (float32 [m, n]).
// Specialization constants: 0 the format (em_quant_format), 1 and 2 the affine group and symmetry.
#extension GL_GOOGLE_include_directive : require
#include "quant_matvec.glsl"
