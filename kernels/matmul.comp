#version 450
// variants: F32_L F32_S H16_L H16_S F64_S INT_S
//
// matmul.comp: the gemm slot, out[B,M,N] = beta * out + alpha * a[B,M,K] @ b[B,K,N]
// (runtime/src/vulkan/vk_matmul.c launches it; backend.h states the contract). The batch,
// one or two dims with any strides, is the grid's z (matmul_push.glsl), so a whole batched
// product is one dispatch.
//
// Tiled in shared memory: a workgroup of 256 invocations computes a BM x BM tile of out (128 for
// the _L variants, 64 for _S), walking K in slices of BK (8 or 16). Each invocation holds a TM x TM
// micro-tile (8x8 or 4x4) in registers, as rows (ty + 16 i) * 4 + 0..3 and columns
// (tx + 16 j) * 4 + 0..3, so its shared-memory reads are 128-bit and conflict-free. The slices
// are double-buffered: the next slice's global loads are issued before the current slice's
// multiply-adds and stored to the other buffer after them, one barrier per slice.
//
// Operands are views with any strides. Each is loaded in chunks of 4 consecutive elements along
// its contiguous dimension (specialization constants A_MODE / B_MODE, chosen by the host): one
// 128-bit load (F32) or 64-bit load (16-bit types) when the host proved the chunks aligned and
// whole, else 4 bounds-checked scalar loads. Out-of-range elements load as 0, so edge tiles and
// K tails need no other case. The shared tiles hold a as [k][m] and b as [k][n], padded by one
// vec4 per row against bank conflicts on the transposed stores.
//
// Variants: F32 (float), F64 (double: the small tile only, scalar loads and one shared buffer,
// so that its tiles fit 32 KiB of shared memory), H16 (float16 or bfloat16 words, unpacked to
// float32 and accumulated in float32, as the CPU does; stores are rounded to nearest even), INT
// (every integer dtype, widened to 64 bits and accumulated modulo 2^64 like the CPU's loop, then
// narrowed; small tile, scalar loads, one shared buffer like F64).
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require

#if defined(VARIANT_F32_L) || defined(VARIANT_H16_L)
#define BM 128
#else
#define BM 64
#endif
#if defined(VARIANT_F32_L) || defined(VARIANT_F32_S)
#define IS_F32 1
#elif defined(VARIANT_H16_L) || defined(VARIANT_H16_S)
#define IS_H16 1
#elif defined(VARIANT_INT_S)
#define IS_INT 1
#extension GL_ARB_gpu_shader_int64 : require
#else
#define IS_F64 1
#endif

// K slice: 8 for the large tile and 16 for the small ones, so that every variant's shared
// tiles fit 32 KiB (lavapipe's limit; the host checks the device's). float64 keeps one buffer.
#if BM == 128
#define BK 8
#else
#define BK 16
#endif
#if defined(IS_F64) || defined(IS_INT)
#define NBUF 1
#else
#define NBUF 2
#endif
#define NT 256
#define TM (BM / 16)                // rows (and columns) per invocation
#define TV (TM / 4)                 // ... in vec4s
// Every variant loads one 4-element chunk per invocation per operand and slice (BM * BK = 1024),
// held in plain variables (ra, rb) between the global load and the shared store.
#if BM * BK != 4 * NT
#error "one chunk per invocation"
#endif
#define RS (BM / 4 + 1)             // a shared row in vec4s, padded

layout(local_size_x = NT) in;

// A_MODE: bit 0 clear: chunks run along K (a is row-major), set: along M. Bit 1: vector loads.
// B_MODE: bit 0 clear: chunks run along N (b is row-major), set: along K. Bit 1: vector loads.
// FLAGS: bit 0: bfloat16 (H16); bit 1: out rows are whole aligned vec4s (F32) or 16-bit pairs
// (H16), so the epilogue stores whole words; bit 3 (F32, H16): the added term is beta * c, c
// read from binding 3 with its own strides (addmm, baddbmm, Linear's bias in one dispatch),
// instead of beta * out. INT: bits 4-7: the dtype (em_dtype: 4 int8,
// 5 uint8, 6 int16, 7 int32, 8 int64).
// Each is ~0u in the generic pipeline, which reads them from the push constants instead (the
// host specializes on GPUs; a CPU driver would spend more compiling the combinations than it
// gains on a test suite's small products).
layout(constant_id = 0) const uint SPEC_A_MODE = 0xffffffffu;
layout(constant_id = 1) const uint SPEC_B_MODE = 0xffffffffu;
layout(constant_id = 2) const uint SPEC_FLAGS = 0xffffffffu;
#define A_MODE (SPEC_A_MODE != 0xffffffffu ? SPEC_A_MODE : p.a_mode)
#define B_MODE (SPEC_B_MODE != 0xffffffffu ? SPEC_B_MODE : p.b_mode)
#define FLAGS (SPEC_FLAGS != 0xffffffffu ? SPEC_FLAGS : p.flags)

#ifdef IS_F64
#define T double
#define V4 dvec4
#elif defined(IS_INT)
#define T uint64_t
#define V4 u64vec4
#else
#define T float
#define V4 vec4
#endif

#ifdef IS_F64
#define MM_SCALAR double
#elif defined(IS_INT)
#define MM_SCALAR uint64_t
#else
#define MM_SCALAR float
#endif
#include "matmul_push.glsl"

#ifdef IS_H16
layout(std430, binding = 0) buffer OW { uint ow[]; };
layout(std430, binding = 1) readonly buffer AW { uint aw[]; };
layout(std430, binding = 1) readonly buffer AW2 { uvec2 aw2[]; };
layout(std430, binding = 2) readonly buffer BW { uint bw[]; };
layout(std430, binding = 2) readonly buffer BW2 { uvec2 bw2[]; };
#elif defined(IS_INT)
layout(std430, binding = 0) buffer OW { uint ow[]; };
layout(std430, binding = 1) readonly buffer AW { uint aw[]; };
layout(std430, binding = 2) readonly buffer BW { uint bw[]; };
#else
layout(std430, binding = 0) buffer O { T o[]; };
layout(std430, binding = 1) readonly buffer A { T a[]; };
layout(std430, binding = 2) readonly buffer B { T b[]; };
#endif
#define HAS_C ((FLAGS & 8u) != 0u)
#ifdef IS_H16
layout(std430, binding = 3) readonly buffer CW { uint cw[]; };
#else
layout(std430, binding = 3) readonly buffer C { T c_in[]; };
#endif
// The c index of this invocation's current 4-element run of a row (store_at sets it) and the
// step between its elements.
uint c_at = 0u, c_step = 0u;
#ifdef IS_F32
layout(std430, binding = 0) buffer O4 { vec4 o4[]; };
layout(std430, binding = 1) readonly buffer A4 { vec4 a4[]; };
layout(std430, binding = 2) readonly buffer B4 { vec4 b4[]; };
#endif

shared V4 As[NBUF * BK * RS];
// The end of this workgroup's K range (p.K, or its split's end): loads past it read 0.
uint kend;
shared V4 Bs[NBUF * BK * RS];

#ifdef IS_H16
// float16/bfloat16 <-> float32. The stores are bit-exact with runtime/src/dtype.c (round to
// nearest even), copied from common.glsl, which cannot be included here: it declares the
// elementwise kernels' bindings and push constants.
float h16_to_float(uint h) {
  return (FLAGS & 1u) != 0u ? uintBitsToFloat(h << 16) : unpackHalf2x16(h).x;
}
vec4 h16x4_to_float(uvec2 q) {
  if ((FLAGS & 1u) != 0u)
    return vec4(uintBitsToFloat(q.x << 16), uintBitsToFloat(q.x & 0xffff0000u),
                uintBitsToFloat(q.y << 16), uintBitsToFloat(q.y & 0xffff0000u));
  return vec4(unpackHalf2x16(q.x), unpackHalf2x16(q.y));
}
#include "half16.glsl"
uint float_to_h16(float f) { return (FLAGS & 1u) != 0u ? float_to_bf16(f) : float_to_half(f); }
float ld_a(uint e) { return h16_to_float((aw[e >> 1] >> ((e & 1u) * 16u)) & 0xffffu); }
float ld_b(uint e) { return h16_to_float((bw[e >> 1] >> ((e & 1u) * 16u)) & 0xffffu); }
vec4 ld4_a(uint e) { return h16x4_to_float(aw2[e >> 2]); }
vec4 ld4_b(uint e) { return h16x4_to_float(bw2[e >> 2]); }
#elif defined(IS_INT)
#define IFMT ((FLAGS >> 4) & 15u)
// The element at e of a buffer of IFMT elements, sign- (or zero-) extended to 64 bits.
#define LD_INT(W, e)                                                                       \
  (IFMT == 8u ? packUint2x32(uvec2(W[2u * (e)], W[2u * (e) + 1u]))                        \
   : IFMT == 7u ? uint64_t(int64_t(int(W[e])))                                             \
   : IFMT == 6u ? uint64_t(int64_t(int(W[(e) >> 1] << (16u - ((e) & 1u) * 16u)) >> 16))    \
   : IFMT == 5u ? uint64_t((W[(e) >> 2] >> (((e) & 3u) * 8u)) & 0xffu)                     \
                : uint64_t(int64_t(int(W[(e) >> 2] << (24u - ((e) & 3u) * 8u)) >> 24)))
T ld_a(uint e) { return LD_INT(aw, e); }
T ld_b(uint e) { return LD_INT(bw, e); }
V4 ld4_a(uint e) { return V4(ld_a(e), ld_a(e + 1u), ld_a(e + 2u), ld_a(e + 3u)); }
V4 ld4_b(uint e) { return V4(ld_b(e), ld_b(e + 1u), ld_b(e + 2u), ld_b(e + 3u)); }
T ld_o(uint e) { return LD_INT(ow, e); }
// Narrowed to the dtype; 8- and 16-bit elements share words with other invocations' elements,
// so those are merged atomically.
void st_o(uint e, T v) {
  uint lo = uint(v);
  if (IFMT == 8u) {
    ow[2u * e] = lo;
    ow[2u * e + 1u] = uint(v >> 32);
  } else if (IFMT == 7u) {
    ow[e] = lo;
  } else if (IFMT == 6u) {
    uint s = (e & 1u) * 16u;
    atomicAnd(ow[e >> 1], ~(0xffffu << s));
    atomicOr(ow[e >> 1], (lo & 0xffffu) << s);
  } else {
    uint s = (e & 3u) * 8u;
    atomicAnd(ow[e >> 2], ~(0xffu << s));
    atomicOr(ow[e >> 2], (lo & 0xffu) << s);
  }
}
#else
T ld_a(uint e) { return a[e]; }
T ld_b(uint e) { return b[e]; }
T ld_o(uint e) { return o[e]; }
void st_o(uint e, T v) { o[e] = v; }
#ifdef IS_F32
vec4 ld4_a(uint e) { return a4[e >> 2]; }
vec4 ld4_b(uint e) { return b4[e >> 2]; }
#else
V4 ld4_a(uint e) { return V4(a[e], a[e + 1u], a[e + 2u], a[e + 3u]); }
V4 ld4_b(uint e) { return V4(b[e], b[e + 1u], b[e + 2u], b[e + 3u]); }
#endif
#endif

// This invocation's chunk: its tile coordinates. For a: (r, k) with r the row in the tile;
// the chunk covers (r, k..k+3) along K or (r..r+3, k) along M. For b: (k, n) likewise.
uvec2 chunk_a() {
  uint i = gl_LocalInvocationID.x;
  if ((A_MODE & 1u) == 0u) return uvec2(i / (BK / 4), (i % (BK / 4)) * 4u);
  return uvec2((i % (BM / 4)) * 4u, i / (BM / 4));
}
uvec2 chunk_b() {
  uint i = gl_LocalInvocationID.x;
  if ((B_MODE & 1u) == 0u) return uvec2(i / (BM / 4), (i % (BM / 4)) * 4u);
  return uvec2((i % (BK / 4)) * 4u, i / (BK / 4));
}

// The 4 elements of this invocation's chunk of a's slice starting at k0 (zeros outside the matrix).
V4 load_a(uint base, uint row0, uint k0) {
  uvec2 rk = chunk_a();
  uint r = row0 + rk.x, k = k0 + rk.y;
  uint sm = uint(p.a_sm), sk = uint(p.a_sk);
  V4 v = V4(0);
  if ((A_MODE & 2u) != 0u) {  // whole aligned chunks: all 4 in range or none
    if (r < p.M && k < kend) v = ld4_a(base + r * sm + k * sk);
    return v;
  }
  // one element at a time, each component named (no dynamic vector indexing)
  uint dr = (A_MODE & 1u) == 0u ? 0u : 1u, dk = 1u - dr;
#define LD_A(J, C) if (r + J * dr < p.M && k + J * dk < kend) v.C = ld_a(base + (r + J * dr) * sm + (k + J * dk) * sk);
  LD_A(0u, x) LD_A(1u, y) LD_A(2u, z) LD_A(3u, w)
  return v;
}

V4 load_b(uint base, uint col0, uint k0) {
  uvec2 kn = chunk_b();
  uint k = k0 + kn.x, n = col0 + kn.y;
  uint sk = uint(p.b_sk), sn = uint(p.b_sn);
  V4 v = V4(0);
  if ((B_MODE & 2u) != 0u) {
    if (k < kend && n < p.N) v = ld4_b(base + k * sk + n * sn);
    return v;
  }
  uint dk = (B_MODE & 1u) == 0u ? 0u : 1u, dn = 1u - dk;
#define LD_B(J, C) if (k + J * dk < kend && n + J * dn < p.N) v.C = ld_b(base + (k + J * dk) * sk + (n + J * dn) * sn);
  LD_B(0u, x) LD_B(1u, y) LD_B(2u, z) LD_B(3u, w)
  return v;
}

void store_a(uint buf, V4 v) {
  uvec2 rk = chunk_a();
  if ((A_MODE & 1u) == 0u) {  // 4 values of k for one row: transposed into [k][m]
    uint at = (buf * BK + rk.y) * RS + rk.x / 4u, c = rk.x % 4u;
    As[at][c] = v.x;
    As[at + RS][c] = v.y;
    As[at + 2u * RS][c] = v.z;
    As[at + 3u * RS][c] = v.w;
  } else {
    As[(buf * BK + rk.y) * RS + rk.x / 4u] = v;
  }
}

void store_b(uint buf, V4 v) {
  uvec2 kn = chunk_b();
  if ((B_MODE & 1u) == 0u) {
    Bs[(buf * BK + kn.x) * RS + kn.y / 4u] = v;
  } else {
    uint at = (buf * BK + kn.x) * RS + kn.y / 4u, c = kn.y % 4u;
    Bs[at][c] = v.x;
    Bs[at + RS][c] = v.y;
    Bs[at + 2u * RS][c] = v.z;
    Bs[at + 3u * RS][c] = v.w;
  }
}

// out element (row, col) of this batch: alpha * acc + beta * out (out unread when beta == 0).
#ifdef IS_H16
float ld_c(uint i) { return h16_to_float((cw[i >> 1] >> ((i & 1u) * 16u)) & 0xffffu); }
// element e of out, the i-th of the current run
float blend(float acc, uint e, uint i) {
  float v = p.alpha * acc;
  if (HAS_C) v += p.beta * ld_c(c_at + i * c_step);
  else if (p.beta != 0.0) v += p.beta * h16_to_float((ow[e >> 1] >> ((e & 1u) * 16u)) & 0xffffu);
  return v;
}
void store_one(uint e, float acc, uint i) {
  uint h = float_to_h16(blend(acc, e, i)), s = (e & 1u) * 16u;
  // a neighbour in the same word may belong to another invocation
  atomicAnd(ow[e >> 1], ~(0xffffu << s));
  atomicOr(ow[e >> 1], h << s);
}
// A whole word w holding two elements of this invocation, the i-th and (i+1)-th of the run.
void store_pair(uint w, float acc_lo, float acc_hi, uint i) {
  float lo = p.alpha * acc_lo, hi = p.alpha * acc_hi;
  if (HAS_C) {
    lo += p.beta * ld_c(c_at + i * c_step);
    hi += p.beta * ld_c(c_at + (i + 1u) * c_step);
  } else if (p.beta != 0.0) {
    uint old = ow[w];
    lo += p.beta * h16_to_float(old & 0xffffu);
    hi += p.beta * h16_to_float(old >> 16);
  }
  ow[w] = float_to_h16(lo) | (float_to_h16(hi) << 16);
}
// 4 elements of a row from column col (components named: no dynamic vector indexing)
void store_row(uint e, uint col, V4 acc) {
  if ((FLAGS & 2u) != 0u && col + 3u < p.N) {  // e even: two whole words
    store_pair(e >> 1, acc.x, acc.y, 0u);
    store_pair((e >> 1) + 1u, acc.z, acc.w, 2u);
    return;
  }
  if (col < p.N) store_one(e, acc.x, 0u);
  if (col + 1u < p.N) store_one(e + 1u, acc.y, 1u);
  if (col + 2u < p.N) store_one(e + 2u, acc.z, 2u);
  if (col + 3u < p.N) store_one(e + 3u, acc.w, 3u);
}
#else
void store_elem(uint e, T acc, uint i) {
  T v = p.alpha * acc;
#if defined(IS_F32)
  if (HAS_C) v += p.beta * c_in[c_at + i * c_step];
  else
#endif
  if (p.beta != T(0)) v += p.beta * ld_o(e);
  st_o(e, v);
}
void store_row(uint e, uint col, V4 acc) {
#ifdef IS_F32
  if ((FLAGS & 2u) != 0u && col + 3u < p.N) {
    vec4 v = p.alpha * acc;
    if (HAS_C)
      v += p.beta * vec4(c_in[c_at], c_in[c_at + c_step], c_in[c_at + 2u * c_step],
                         c_in[c_at + 3u * c_step]);
    else if (p.beta != 0.0) v += p.beta * o4[e >> 2];
    o4[e >> 2] = v;
    return;
  }
#endif
  if (col < p.N) store_elem(e, acc.x, 0u);
  if (col + 1u < p.N) store_elem(e + 1u, acc.y, 1u);
  if (col + 2u < p.N) store_elem(e + 2u, acc.z, 2u);
  if (col + 3u < p.N) store_elem(e + 3u, acc.w, 3u);
}
#endif

// The micro-tile's accumulators are named variables, c<r>_<j> for row r (ty + 16 (r / 4)) * 4 +
// r % 4 and columns (tx + 16 j) * 4 + 0..3, never an array: written with arrays indexed in
// unrolled loops, the kernel ran at 2-4 TFLOP/s on an H100, as if the array lived in local
// memory. (The a and b vectors of a k step come from shared memory: a0/a1 hold rows, b0/b1
// columns.)
#if TV == 2
#define ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
#define DECLARE(r) V4 c##r##_0 = V4(0), c##r##_1 = V4(0);
#define MAC(r, av) c##r##_0 += (av) * b0; c##r##_1 += (av) * b1;
#define STORE(r) store_at(r, 0u, c##r##_0, row0, col0, obase, tx, ty); \
                 store_at(r, 1u, c##r##_1, row0, col0, obase, tx, ty);
#else
#define ROWS(X) X(0) X(1) X(2) X(3)
#define DECLARE(r) V4 c##r##_0 = V4(0);
#define MAC(r, av) c##r##_0 += (av) * b0;
#define STORE(r) store_at(r, 0u, c##r##_0, row0, col0, obase, tx, ty);
#endif

// c's element offset of this batch's matrix (main sets it when HAS_C)
uint c_zbase = 0u;
void store_at(uint r, uint j, V4 acc, uint row0, uint col0, uint obase, uint tx, uint ty) {
  uint row = row0 + (ty + 16u * (r / 4u)) * 4u + r % 4u, col = col0 + (tx + 16u * j) * 4u;
  if (HAS_C) c_at = c_zbase + row * uint(p.c_rs) + col * uint(p.c_cs);
  if (row < p.M && col < p.N) store_row(obase + row * p.N + col, col, acc);
}

void main() {
  uint z = gl_WorkGroupID.z + p.batch0;
  uint row0 = (gl_WorkGroupID.y + p.m0) * BM, col0 = (gl_WorkGroupID.x + p.n0) * BM;
  uint abase = mm_a_base(z), bbase = mm_b_base(z);
  uint tid = gl_LocalInvocationID.x, tx = tid % 16u, ty = tid / 16u;

  ROWS(DECLARE)
  V4 ra, rb;

  // a split (p.ksplit, a multiple of BK) takes its own K range; its z picks the partial
  // product it writes (the batch strides are 0 and nb2 1: split products have one matrix)
  uint kbeg = 0u;
  kend = p.K;
  if (p.ksplit != 0u) {
    kbeg = z * p.ksplit;
    kend = min(p.K, kbeg + p.ksplit);
  }
  uint slices = (kend - kbeg + BK - 1u) / BK;
  if (slices > 0u) {
    store_a(0u, load_a(abase, row0, kbeg));
    store_b(0u, load_b(bbase, col0, kbeg));
    barrier();
  }
  for (uint s = 0u; s < slices; s++) {
    uint buf = NBUF == 2 ? s & 1u : 0u;
    bool more = s + 1u < slices;
    if (more) {
      ra = load_a(abase, row0, kbeg + (s + 1u) * BK);
      rb = load_b(bbase, col0, kbeg + (s + 1u) * BK);
    }
    [[unroll]] for (uint k = 0u; k < BK; k++) {
      uint at = (buf * BK + k) * RS;
      V4 a0 = As[at + ty], b0 = Bs[at + tx];
#if TV == 2
      V4 a1 = As[at + ty + 16u], b1 = Bs[at + tx + 16u];
      MAC(0, a0.x) MAC(1, a0.y) MAC(2, a0.z) MAC(3, a0.w)
      MAC(4, a1.x) MAC(5, a1.y) MAC(6, a1.z) MAC(7, a1.w)
#else
      MAC(0, a0.x) MAC(1, a0.y) MAC(2, a0.z) MAC(3, a0.w)
#endif
    }
    if (NBUF == 1) barrier();  // one buffer: everyone is done reading it before it is refilled
    if (more) {
      store_a((buf + 1u) % NBUF, ra);
      store_b((buf + 1u) % NBUF, rb);
    }
    barrier();
  }

  uint obase = mm_o_base(z);
  if (HAS_C) {
    c_zbase = p.c_base + z * uint(p.c_sb);
    c_step = uint(p.c_cs);
  }
  ROWS(STORE)
}
