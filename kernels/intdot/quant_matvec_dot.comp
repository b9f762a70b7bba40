#version 450
// quant_matvec_dot.comp: the quantized matrix-vector product through packed 8-bit integer dot
// products (GL_EXT_integer_dot_product), Q8_0, Q4_0, Q4_K and Q6_K weights (quant_matvec.glsl has the body).
// Built only where glslang knows the extension (EMBER_VK_GLSL_INT_DOT); runs only where the
// device enabled shaderIntegerDotProduct (vk_quant_matmul.c). Operands: 0 x's int8 codes and
// 3 their scales (quant_act.comp), 1 the weight's blocks, 2 out (float32 [m, n]).
#extension GL_EXT_integer_dot_product : require
#extension GL_GOOGLE_include_directive : require
#define QUANT_DOT 1
#include "../quant_matvec.glsl"
