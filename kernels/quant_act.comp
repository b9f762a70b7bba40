#version 450
// quant_act.comp: quantizes float32 activation rows to int8 per 32 values for the integer-dot
// matrix-vector kernel (intdot/quant_matvec_dot.comp), as the CPU's quantized Linear does
// (quant_matmul.c's quantize_act): scale = amax / 127, code = round-to-nearest-even(x / scale),
// written as 4 codes per word (first code in the low byte), and per 32 values two floats: the
// scale and the scale times the codes' sum (the K-quants' minimum term needs sum x).
// Operands: 0 x (float32 [m, k], read as vec4 from x_off), 1 the codes (int32 [m, k / 4]),
// 2 the scales (float32 [m, k / 32, 2]). One invocation per 32 values.
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer B0 { vec4 x4[]; };
layout(std430, set = 0, binding = 1) writeonly buffer B1 { int xq[]; };
layout(std430, set = 0, binding = 2) writeonly buffer B2 { float xd[]; };
layout(push_constant) uniform Params { uint m, k, x_off; } p;

void main() {
  uint nu = p.k / 32u, i = gl_GlobalInvocationID.x;
  if (i >= p.m * nu) return;
  uint row = i / nu, u = i % nu, xb = p.x_off + row * (p.k / 4u) + u * 8u;
  vec4 v[8];
  float amax = 0.0;
  for (uint j = 0u; j < 8u; j++) {
    v[j] = x4[xb + j];
    vec4 a = abs(v[j]);
    amax = max(amax, max(max(a.x, a.y), max(a.z, a.w)));
  }
  float s = amax / 127.0, inv = s != 0.0 ? 1.0 / s : 0.0;
  int sum = 0;
  for (uint j = 0u; j < 8u; j++) {
    ivec4 q = ivec4(roundEven(v[j] * inv));
    sum += q.x + q.y + q.z + q.w;
    xq[row * (p.k / 4u) + u * 8u + j] = (q.x & 255) | ((q.y & 255) << 8) | ((q.z & 255) << 16) | (q.w << 24);
  }
  xd[2u * i] = s;
  xd[2u * i + 1u] = s * float(sum);
}
