/* Block quantization formats: quantize float32 rows into raw blocks and dequantize them back.
 *
 * The ggml formats (Q8_0, Q4_0, Q4_1, Q4_K, Q6_K) follow the GGUF byte layouts exactly, so
 * blocks read from a GGUF file dequantize here and blocks written here load in llama.cpp.
 * The quantizers for Q4_K and Q6_K pick scales with a plain min/max rule rather than ggml's
 * iterative search: the bytes are valid blocks of the format, the error a little larger.
 * The affine formats (AFFINE8, AFFINE4) are Ember's own per-group layout, documented in
 * docs/design.md: fp16 scale (+ fp16 minimum when asymmetric) followed by the packed codes.
 *
 * Non-finite inputs are rejected: a NaN or inf in a block has no faithful encoding (a scale of
 * inf would turn every other weight of the block into NaN on the way back). */
#include "../internal.h"

#include <math.h>
#include <string.h>

#define QK 32     /* weights per block of the 32-formats */
#define QKK 256   /* weights per super-block of the K-formats */

static int nearest(float x) { return (int)lrintf(x); }
static void put_half(uint8_t *p, float f) { uint16_t h = em_float_to_half(f); memcpy(p, &h, 2); }
/* A NaN scale (only in blocks read from elsewhere) decodes to the one quiet NaN: NaN payloads
 * copied into doubles can be mistaken for tagged values by LuaJIT when read back as numbers. */
static float get_half(const uint8_t *p) {
  uint16_t h;
  memcpy(&h, p, 2);
  float f = em_half_to_float(h);
  return isnan(f) ? NAN : f;
}

int em_quant_block_size(int format, int64_t group, int symmetric, int64_t *block_elems,
                        int64_t *block_bytes) {
  EM_NOT_NULL(-1, block_elems);
  EM_NOT_NULL(-1, block_bytes);
  int64_t e = 0, b = 0;
  switch (format) {
  case EM_QUANT_Q8_0: e = QK; b = 2 + QK; break;
  case EM_QUANT_Q4_0: e = QK; b = 2 + QK / 2; break;
  case EM_QUANT_Q4_1: e = QK; b = 4 + QK / 2; break;
  case EM_QUANT_Q4_K: e = QKK; b = 4 + 12 + QKK / 2; break;
  case EM_QUANT_Q6_K: e = QKK; b = QKK / 2 + QKK / 4 + QKK / 16 + 2; break;
  case EM_QUANT_AFFINE8: case EM_QUANT_AFFINE4:
    if (group != 32 && group != 64 && group != 128)
      return em_error("quant_block_size: expected a group of 32, 64 or 128, got %lld",
                      (long long)group);
    e = group;
    b = (symmetric ? 2 : 4) + (format == EM_QUANT_AFFINE8 ? group : group / 2);
    break;
  default: return em_error("quant_block_size: unknown format %d", format);
  }
  if (block_elems) *block_elems = e;
  if (block_bytes) *block_bytes = b;
  return 0;
}

/* ---- the 32-weight ggml formats ------------------------------------------------------------ */
static void q8_0_block(const float *x, uint8_t *y) {
  float amax = 0;
  for (int j = 0; j < QK; j++) amax = fmaxf(amax, fabsf(x[j]));
  float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
  put_half(y, d);
  for (int j = 0; j < QK; j++) y[2 + j] = (uint8_t)(int8_t)nearest(x[j] * id);
}
static void q4_0_block(const float *x, uint8_t *y) {
  float amax = 0, max = 0;  /* max keeps its sign: the extreme weight maps to code 0 exactly */
  for (int j = 0; j < QK; j++)
    if (fabsf(x[j]) > amax) { amax = fabsf(x[j]); max = x[j]; }
  float d = max / -8.0f, id = d != 0 ? 1.0f / d : 0.0f;
  put_half(y, d);
  for (int j = 0; j < QK / 2; j++) {
    int a = (int)(int8_t)(x[j] * id + 8.5f), b = (int)(int8_t)(x[QK / 2 + j] * id + 8.5f);
    a = a > 15 ? 15 : a; b = b > 15 ? 15 : b;
    y[2 + j] = (uint8_t)(a | (b << 4));
  }
}
static void q4_1_block(const float *x, uint8_t *y) {
  float min = x[0], max = x[0];
  for (int j = 1; j < QK; j++) { min = fminf(min, x[j]); max = fmaxf(max, x[j]); }
  float d = (max - min) / 15.0f, id = d != 0 ? 1.0f / d : 0.0f;
  put_half(y, d); put_half(y + 2, min);
  for (int j = 0; j < QK / 2; j++) {
    int a = (int)(int8_t)((x[j] - min) * id + 0.5f);
    int b = (int)(int8_t)((x[QK / 2 + j] - min) * id + 0.5f);
    a = a > 15 ? 15 : a; b = b > 15 ? 15 : b;
    y[4 + j] = (uint8_t)(a | (b << 4));
  }
}
static void dq_32(int format, const uint8_t *y, float *x) {
  float d = get_half(y);
  if (format == EM_QUANT_Q8_0) {
    for (int j = 0; j < QK; j++) x[j] = (float)(int8_t)y[2 + j] * d;
  } else if (format == EM_QUANT_Q4_0) {
    for (int j = 0; j < QK / 2; j++) {
      x[j] = (float)((y[2 + j] & 15) - 8) * d;
      x[QK / 2 + j] = (float)((y[2 + j] >> 4) - 8) * d;
    }
  } else {
    float m = get_half(y + 2);
    for (int j = 0; j < QK / 2; j++) {
      x[j] = (float)(y[4 + j] & 15) * d + m;
      x[QK / 2 + j] = (float)(y[4 + j] >> 4) * d + m;
    }
  }
}

/* ---- Q4_K: d, dmin (fp16), 12 bytes of 6-bit scales/mins for 8 sub-blocks, 128 bytes codes -- */
static void scale_min_k4(int j, const uint8_t *q, int *sc, int *m) {
  if (j < 4) { *sc = q[j] & 63; *m = q[j + 4] & 63; }
  else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}
static void q4_k_block(const float *x, uint8_t *y) {
  float scales[8], mins[8], max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; j++) {  /* x ~ scale * l - min, l in 0..15, min >= 0 */
    float lo = 0, hi = x[32 * j];
    for (int l = 0; l < 32; l++) { lo = fminf(lo, x[32 * j + l]); hi = fmaxf(hi, x[32 * j + l]); }
    scales[j] = (hi - lo) / 15.0f; mins[j] = -lo;
    max_scale = fmaxf(max_scale, scales[j]); max_min = fmaxf(max_min, mins[j]);
  }
  uint8_t *sc = y + 4, *qs = y + 16;
  memset(sc, 0, 12);
  float inv_s = max_scale > 0 ? 63.0f / max_scale : 0, inv_m = max_min > 0 ? 63.0f / max_min : 0;
  for (int j = 0; j < 8; j++) {
    int ls = nearest(inv_s * scales[j]), lm = nearest(inv_m * mins[j]);
    ls = ls > 63 ? 63 : ls; lm = lm > 63 ? 63 : lm;
    if (j < 4) { sc[j] = (uint8_t)ls; sc[j + 4] = (uint8_t)lm; }
    else {
      sc[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
      sc[j - 4] |= (uint8_t)((ls >> 4) << 6);
      sc[j] |= (uint8_t)((lm >> 4) << 6);
    }
  }
  put_half(y, max_scale / 63.0f); put_half(y + 2, max_min / 63.0f);
  float d = get_half(y), dmin = get_half(y + 2);
  uint8_t L[QKK];
  for (int j = 0; j < 8; j++) {
    int s, m; scale_min_k4(j, sc, &s, &m);
    float ds = d * (float)s, dm = dmin * (float)m;
    for (int l = 0; l < 32; l++) {
      int q = ds != 0 ? nearest((x[32 * j + l] + dm) / ds) : 0;
      L[32 * j + l] = (uint8_t)(q < 0 ? 0 : q > 15 ? 15 : q);
    }
  }
  for (int j = 0; j < QKK; j += 64)
    for (int l = 0; l < 32; l++) qs[j / 2 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
}
static void dq_q4_k(const uint8_t *y, float *x) {
  float d = get_half(y), dmin = get_half(y + 2);
  const uint8_t *sc = y + 4, *q = y + 16;
  for (int j = 0, is = 0; j < QKK; j += 64, is += 2, q += 32) {
    int s, m; scale_min_k4(is, sc, &s, &m);
    float d1 = d * (float)s, m1 = dmin * (float)m;
    scale_min_k4(is + 1, sc, &s, &m);
    float d2 = d * (float)s, m2 = dmin * (float)m;
    for (int l = 0; l < 32; l++) x[j + l] = d1 * (float)(q[l] & 0xF) - m1;
    for (int l = 0; l < 32; l++) x[j + 32 + l] = d2 * (float)(q[l] >> 4) - m2;
  }
}

/* ---- Q6_K: 128 bytes low nibbles, 64 bytes high 2-bit pairs, 16 int8 scales, fp16 d -------- */
static void q6_k_block(const float *x, uint8_t *y) {
  uint8_t *ql = y, *qh = y + 128;
  int8_t *scales = (int8_t *)(y + 192);
  float sub[16], max_scale = 0, amax_scale = 0;
  for (int ib = 0; ib < 16; ib++) {  /* the signed extreme of each 16 maps to code -32 */
    float amax = 0, max = 0;
    for (int l = 0; l < 16; l++)
      if (fabsf(x[16 * ib + l]) > amax) { amax = fabsf(x[16 * ib + l]); max = x[16 * ib + l]; }
    sub[ib] = max / -32.0f;
    if (fabsf(sub[ib]) > amax_scale) { amax_scale = fabsf(sub[ib]); max_scale = sub[ib]; }
  }
  float iscale = max_scale != 0 ? -128.0f / max_scale : 0;
  put_half(y + 208, iscale != 0 ? 1.0f / iscale : 0.0f);
  for (int ib = 0; ib < 16; ib++) {
    int s = nearest(iscale * sub[ib]);
    scales[ib] = (int8_t)(s > 127 ? 127 : s < -128 ? -128 : s);
  }
  float d0 = get_half(y + 208);
  uint8_t L[QKK];
  for (int j = 0; j < 16; j++) {
    float d = d0 * (float)scales[j];
    for (int l = 0; l < 16; l++) {
      int q = d != 0 ? nearest(x[16 * j + l] / d) : 0;
      L[16 * j + l] = (uint8_t)((q < -32 ? -32 : q > 31 ? 31 : q) + 32);
    }
  }
  for (int j = 0; j < QKK; j += 128, ql += 64, qh += 32)
    for (int l = 0; l < 32; l++) {
      const uint8_t *Lj = L + j;
      ql[l] = (uint8_t)((Lj[l] & 0xF) | ((Lj[l + 64] & 0xF) << 4));
      ql[l + 32] = (uint8_t)((Lj[l + 32] & 0xF) | ((Lj[l + 96] & 0xF) << 4));
      qh[l] = (uint8_t)((Lj[l] >> 4) | ((Lj[l + 32] >> 4) << 2) | ((Lj[l + 64] >> 4) << 4) |
                        ((Lj[l + 96] >> 4) << 6));
    }
}
static void dq_q6_k(const uint8_t *y, float *x) {
  const uint8_t *ql = y, *qh = y + 128;
  const int8_t *sc = (const int8_t *)(y + 192);
  float d = get_half(y + 208);
  for (int n = 0; n < QKK; n += 128, ql += 64, qh += 32, sc += 8)
    for (int l = 0; l < 32; l++) {
      int is = l / 16;
      int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      x[n + l] = d * (float)sc[is] * (float)q1;
      x[n + l + 32] = d * (float)sc[is + 2] * (float)q2;
      x[n + l + 64] = d * (float)sc[is + 4] * (float)q3;
      x[n + l + 96] = d * (float)sc[is + 6] * (float)q4;
    }
}

/* ---- affine per-group: [scale fp16][min fp16, asymmetric only][codes] ---------------------- *
 * asymmetric: x = q * scale + min, q in 0..2^b-1 (int4 codes packed low nibble first);
 * symmetric:  x = q * scale, q in -(2^(b-1)-1)..2^(b-1)-1, stored as q + 2^(b-1).            */
static void affine_block(int bits, int64_t g, int sym, const float *x, uint8_t *y) {
  int qmax = (1 << bits) - 1, half = 1 << (bits - 1);
  float lo = x[0], hi = x[0], amax = 0;
  for (int64_t j = 0; j < g; j++) { lo = fminf(lo, x[j]); hi = fmaxf(hi, x[j]); amax = fmaxf(amax, fabsf(x[j])); }
  float scale, min = 0;
  uint8_t *q = y + (sym ? 2 : 4);
  if (sym) { scale = amax / (float)(half - 1); put_half(y, scale); scale = get_half(y); }
  else {
    scale = (hi - lo) / (float)qmax;
    put_half(y, scale); put_half(y + 2, lo);
    scale = get_half(y); min = get_half(y + 2);
  }
  float inv = scale != 0 ? 1.0f / scale : 0;
  if (bits == 4) memset(q, 0, (size_t)(g / 2));
  for (int64_t j = 0; j < g; j++) {
    int c = sym ? nearest(x[j] * inv) + half : nearest((x[j] - min) * inv);
    int cmin = sym ? 1 : 0;
    c = c < cmin ? cmin : c > qmax ? qmax : c;
    if (bits == 8) q[j] = (uint8_t)c;
    else q[j / 2] |= (uint8_t)(j & 1 ? c << 4 : c);
  }
}
static void dq_affine(int bits, int64_t g, int sym, const uint8_t *y, float *x) {
  int half = 1 << (bits - 1);
  float scale = get_half(y), min = sym ? 0.0f : get_half(y + 2);
  const uint8_t *q = y + (sym ? 2 : 4);
  for (int64_t j = 0; j < g; j++) {
    int c = bits == 8 ? q[j] : (j & 1 ? q[j / 2] >> 4 : q[j / 2] & 15);
    x[j] = sym ? (float)(c - half) * scale : (float)c * scale + min;
  }
}

/* Whether the fp16 scale (and minimum) a block stored are finite: weights beyond fp16's range
 * (about 65504 times the largest code) would store an inf scale. */
static int halves_finite(int format, int sym, const uint8_t *y) {
  int at[2] = { 0, -1 };
  switch (format) {
  case EM_QUANT_Q4_1: case EM_QUANT_Q4_K: at[1] = 2; break;
  case EM_QUANT_Q6_K: at[0] = 208; break;
  case EM_QUANT_AFFINE8: case EM_QUANT_AFFINE4: if (!sym) at[1] = 2; break;
  default: break;
  }
  for (int i = 0; i < 2; i++)
    if (at[i] >= 0 && !isfinite(get_half(y + at[i]))) return 0;
  return 1;
}

int em_quant_quantize(int format, int64_t group, int symmetric, const float *src, int64_t n,
                      void *dst) {
  EM_NOT_NULL(-1, src);
  EM_NOT_NULL(-1, dst);
  int64_t be = 0, bb = 0;
  if (em_quant_block_size(format, group, symmetric, &be, &bb) != 0) return -1;
  if (n < 0 || n % be != 0)
    return em_error("quant_quantize: expected a multiple of the block (%lld weights), got %lld",
                    (long long)be, (long long)n);
  for (int64_t i = 0; i < n; i++)
    if (!isfinite(src[i]))
      return em_error("quant_quantize: expected finite weights, got %s at element %lld",
                      isnan(src[i]) ? "nan" : "inf", (long long)i + 1);
  uint8_t *y = dst;
  for (int64_t b = 0; b < n / be; b++) {
    const float *x = src + b * be;
    uint8_t *yb = y + b * bb;
    switch (format) {
    case EM_QUANT_Q8_0: q8_0_block(x, yb); break;
    case EM_QUANT_Q4_0: q4_0_block(x, yb); break;
    case EM_QUANT_Q4_1: q4_1_block(x, yb); break;
    case EM_QUANT_Q4_K: q4_k_block(x, yb); break;
    case EM_QUANT_Q6_K: q6_k_block(x, yb); break;
    case EM_QUANT_AFFINE8: affine_block(8, group, symmetric, x, yb); break;
    default: affine_block(4, group, symmetric, x, yb); break;
    }
    if (!halves_finite(format, symmetric, yb))
      return em_error("quant_quantize: expected weights within the fp16 range of the block's "
                      "scale, got a block (elements %lld to %lld) whose scale overflows fp16",
                      (long long)(b * be + 1), (long long)((b + 1) * be));
  }
  return 0;
}

int em_quant_dequantize(int format, int64_t group, int symmetric, const void *src, int64_t n,
                        float *dst) {
  EM_NOT_NULL(-1, src);
  EM_NOT_NULL(-1, dst);
  int64_t be = 0, bb = 0;
  if (em_quant_block_size(format, group, symmetric, &be, &bb) != 0) return -1;
  if (n < 0 || n % be != 0)
    return em_error("quant_dequantize: expected a multiple of the block (%lld weights), got %lld",
                    (long long)be, (long long)n);
  const uint8_t *y = src;
  for (int64_t b = 0; b < n / be; b++) {
    const uint8_t *yb = y + b * bb;
    float *x = dst + b * be;
    switch (format) {
    case EM_QUANT_Q8_0: case EM_QUANT_Q4_0: case EM_QUANT_Q4_1: dq_32(format, yb, x); break;
    case EM_QUANT_Q4_K: dq_q4_k(yb, x); break;
    case EM_QUANT_Q6_K: dq_q6_k(yb, x); break;
    case EM_QUANT_AFFINE8: dq_affine(8, group, symmetric, yb, x); break;
    default: dq_affine(4, group, symmetric, yb, x); break;
    }
  }
  return 0;
}
