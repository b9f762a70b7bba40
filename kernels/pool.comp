#version 450
// variants: MAX_F32 MAX_F64 AVG_F32 AVG_F64 AVGB_F32 AVGB_F64
//
// pool.comp: 2-D pooling over N*C planes (nn.h's em_pool_geom says which input rows and
// columns each output's window covers; runtime/src/cpu/pool.c is the reference):
//   MAX   y = the window's maximum, and its int64 position h*W + w within the plane; NaN wins
//         and ties keep the first maximum in row-major order, as on the CPU.
//   AVG   y = the window's sum / its divisor (divisor override, padded or clipped size).
//   AVGB  the gradient of AVG in gather form: each gx element adds gy / divisor over the
//         outputs whose windows cover it, so no atomics are needed.
// One thread per output element (per input element for AVGB), a grid-stride loop.
#extension GL_ARB_gpu_shader_int64 : require
#if defined(VARIANT_MAX_F64) || defined(VARIANT_AVG_F64) || defined(VARIANT_AVGB_F64)
#extension GL_ARB_gpu_shader_fp64 : require
#define T double
bool is_nan(double v) {
  uvec2 u = unpackDouble2x32(v);
  return (u.y & 0x7fffffffu) > 0x7ff00000u || ((u.y & 0x7fffffffu) == 0x7ff00000u && u.x != 0u);
}
#else
#define T float
bool is_nan(float v) { return (floatBitsToUint(v) & 0x7fffffffu) > 0x7f800000u; }
#endif
#if defined(VARIANT_MAX_F32) || defined(VARIANT_MAX_F64)
#define MAX 1
#elif defined(VARIANT_AVG_F32) || defined(VARIANT_AVG_F64)
#define AVG 1
#else
#define AVGB 1
#endif

layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) buffer Out { T o[]; };
layout(std430, set = 0, binding = 1) readonly buffer In { T x[]; };
#ifdef MAX
layout(std430, set = 0, binding = 2) buffer Ind { int64_t ind[]; };
#endif

layout(push_constant) uniform Params {
  uint planes, H, W, OH, OW;
  int kh, kw, sh, sw, ph, pw, dh, dw;
  uint adaptive, count_include_pad, divisor;
  uint off_o, off_x, off_i;
  uint n;        // elements this dispatch computes
} p;

// The taps [lo, hi) of output o along one axis (pool.c's window() and clip()).
void window(uint o, uint in_, uint out_, int k, int s, int pd, int d, out int lo, out int hi) {
  if (p.adaptive != 0u) {
    lo = int(o * in_ / out_);
    hi = int(((o + 1u) * in_ + out_ - 1u) / out_);
  } else {
    lo = int(o) * s - pd;
    hi = lo + (k - 1) * d + 1;
  }
}
void clip(inout int lo, inout int hi, int d, int in_) {
  if (lo < 0) lo += ((-lo + d - 1) / d) * d;
  if (hi > in_) hi = in_;
}

// The divisor of an average window (0: empty window), clipping h0..w1 to the input.
float avg_window(uint oh, uint ow, out int h0, out int h1, out int w0, out int w1) {
  window(oh, p.H, p.OH, p.kh, p.sh, p.ph, 1, h0, h1);
  window(ow, p.W, p.OW, p.kw, p.sw, p.pw, 1, w0, w1);
  int padded = 0;
  if (p.adaptive == 0u)
    padded = (min(h1, int(p.H) + p.ph) - h0) * (min(w1, int(p.W) + p.pw) - w0);
  clip(h0, h1, 1, int(p.H));
  clip(w0, w1, 1, int(p.W));
  if (h1 <= h0 || w1 <= w0) return 0.0;
  if (p.divisor > 0u) return float(p.divisor);
  if (p.adaptive == 0u && p.count_include_pad != 0u) return float(padded);
  return float((h1 - h0) * (w1 - w0));
}

void main() {
  uint stride = gl_NumWorkGroups.x * 256u;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
#ifndef AVGB
    uint ohw = p.OH * p.OW, plane = i / ohw, s = i - plane * ohw, oh = s / p.OW, ow = s - oh * p.OW;
    uint xb = p.off_x + plane * p.H * p.W;
#endif
#ifdef MAX
    int dh = p.adaptive != 0u ? 1 : p.dh, dw = p.adaptive != 0u ? 1 : p.dw;
    int h0, h1, w0, w1;
    window(oh, p.H, p.OH, p.kh, p.sh, p.ph, dh, h0, h1);
    clip(h0, h1, dh, int(p.H));
    window(ow, p.W, p.OW, p.kw, p.sw, p.pw, dw, w0, w1);
    clip(w0, w1, dw, int(p.W));
    T best = T(-1.0 / 0.0);
    int at = h0 * int(p.W) + w0;
    bool found_nan = false;
    for (int h = h0; h < h1 && !found_nan; h += dh)
      for (int w = w0; w < w1; w += dw) {
        T v = x[xb + uint(h * int(p.W) + w)];
        bool nan = is_nan(v);
        if (v > best || nan) {
          best = v;
          at = h * int(p.W) + w;
          if (nan) { found_nan = true; break; }
        }
      }
    o[p.off_o + i] = best;
    ind[p.off_i + i] = int64_t(at);
#elif defined(AVG)
    int h0, h1, w0, w1;
    float div = avg_window(oh, ow, h0, h1, w0, w1);
    T sum = T(0);
    for (int h = h0; h < h1; h++)
      for (int w = w0; w < w1; w++) sum += x[xb + uint(h * int(p.W) + w)];
    o[p.off_o + i] = div == 0.0 ? T(0) : sum / T(div);
#else
    // i is an input element (plane, h, w); the outputs covering it, in row-major order.
    uint hw = p.H * p.W, plane = i / hw, s = i - plane * hw;
    int h = int(s / p.W), w = int(s - uint(h) * p.W);
    int oh0, oh1, ow0, ow1;  // candidate output rows / columns [oh0, oh1)
    if (p.adaptive != 0u) {
      oh0 = int(uint(h) * p.OH / p.H);
      oh1 = int(((uint(h) + 1u) * p.OH + p.H - 1u) / p.H);
      ow0 = int(uint(w) * p.OW / p.W);
      ow1 = int(((uint(w) + 1u) * p.OW + p.W - 1u) / p.W);
    } else {  // lo = o*s - pd <= h < lo + k  <=>  h + pd - k < o*s <= h + pd
      oh0 = max(0, (h + p.ph - p.kh + p.sh) / p.sh);
      oh1 = (h + p.ph) / p.sh + 1;
      ow0 = max(0, (w + p.pw - p.kw + p.sw) / p.sw);
      ow1 = (w + p.pw) / p.sw + 1;
    }
    oh1 = min(oh1, int(p.OH));
    ow1 = min(ow1, int(p.OW));
    uint yb = p.off_x + plane * p.OH * p.OW;
    T acc = T(0);
    for (int oh = oh0; oh < oh1; oh++)
      for (int ow = ow0; ow < ow1; ow++) {
        int h0, h1, w0, w1;
        float div = avg_window(uint(oh), uint(ow), h0, h1, w0, w1);
        if (div == 0.0 || h < h0 || h >= h1 || w < w0 || w >= w1) continue;
        acc += x[yb + uint(oh) * p.OW + uint(ow)] / T(div);
      }
    o[p.off_o + i] = acc;
#endif
  }
}
