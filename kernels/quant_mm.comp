#version 450
// quant_mm.comp: the quantized Linear for larger batches, out[m, n] = sum_k x[m, k] W[n, k],
// float32 activations and accumulation, W quantized (quant_unit.glsl decodes it; the dense W is
// never written to memory). runtime/src/vulkan/vk_quant_matmul.c launches it for m > 8.
//
// Tiled: a workgroup of 256 invocations computes a 64 x 64 tile of out, walking K one unit (32)
// at a time. Each step stages the x slice [64 x 32] and the weight slice, dequantized on the way
// into shared memory by 64 invocations (one weight row's unit each), then every invocation adds a
// 4 x 4 micro-tile of products. Out-of-range rows stage as zeros.
// Operands: 0 x (float32 [m, k] from x_off), 1 the blocks, 2 out (float32 [m, n]).
// Specialization constants: 0 the format, 1 and 2 the affine group and symmetry.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 256) in;
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
shared float xs[32][BT + 1u];  // [k][m]
shared float ws[32][BT + 1u];  // [k][n]

void main() {
  uint t = gl_LocalInvocationID.x, tx = t % 16u, ty = t / 16u;
  uint n0 = gl_WorkGroupID.x * BT, mb = gl_WorkGroupID.y * BT, nu = p.k / 32u;
  float acc[4][4];
  for (uint i = 0u; i < 4u; i++)
    for (uint j = 0u; j < 4u; j++) acc[i][j] = 0.0;
  for (uint u = 0u; u < nu; u++) {
    uint r = t >> 2, c0 = (t & 3u) * 8u, gr = mb + r;
    for (uint j = 0u; j < 8u; j++)
      xs[c0 + j][r] = gr < p.m ? x[p.x_off + gr * p.k + u * 32u + c0 + j] : 0.0;
    if (t < BT) {
      float v[32];
      uint gn = n0 + t;
      if (gn < p.n) q_unit(p.w_off + gn * p.row_bytes, u, v);
      else for (uint j = 0u; j < 32u; j++) v[j] = 0.0;
      for (uint j = 0u; j < 32u; j++) ws[j][t] = v[j];
    }
    barrier();
    for (uint kk = 0u; kk < 32u; kk++) {
      float a[4], b[4];
      for (uint i = 0u; i < 4u; i++) { a[i] = xs[kk][ty * 4u + i]; b[i] = ws[kk][tx * 4u + i]; }
      for (uint i = 0u; i < 4u; i++)
        for (uint j = 0u; j < 4u; j++) acc[i][j] += a[i] * b[j];
    }
    barrier();
  }
  for (uint i = 0u; i < 4u; i++)
    for (uint j = 0u; j < 4u; j++) {
      uint r = mb + ty * 4u + i, c = n0 + tx * 4u + j;
      if (r < p.m && c < p.n) o[p.o_off + r * p.n + c] = acc[i][j];
    }
}
