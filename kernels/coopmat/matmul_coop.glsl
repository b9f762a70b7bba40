// matmul_coop.glsl: the body of kernels/coopmat/matmul_coop.comp (described there), shared with
// matmul_coop_fixed.comp, which fixes the tile configuration CFG at build time (FIXED_CFG).
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require

#ifdef COOPMAT_KHR
#extension GL_KHR_cooperative_matrix : require
#define MAT_A coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define MAT_B coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define MAT_C coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#define MAT_H coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#define LOAD_ROW(m, buf, e, s) coopMatLoad(m, buf, e, s, gl_CooperativeMatrixLayoutRowMajor)
#define LOAD_COL(m, buf, e, s) coopMatLoad(m, buf, e, s, gl_CooperativeMatrixLayoutColumnMajor)
#define STORE_ROW(m, buf, e, s) coopMatStore(m, buf, e, s, gl_CooperativeMatrixLayoutRowMajor)
#define MMA(a, b, c) coopMatMulAdd(a, b, c)
#else
#extension GL_NV_cooperative_matrix : require
#define MAT_A fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define MAT_B fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define MAT_C fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>
#define MAT_H fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define LOAD_ROW(m, buf, e, s) coopMatLoadNV(m, buf, e, s, false)
#define LOAD_COL(m, buf, e, s) coopMatLoadNV(m, buf, e, s, true)
#define STORE_ROW(m, buf, e, s) coopMatStoreNV(m, buf, e, s, false)
#define MMA(a, b, c) coopMatMulAddNV(a, b, c)
#endif

// MODES: bit 0 a is column-major (M contiguous), bit 1 b is column-major (K contiguous); bits
// 2 and 3: a's and b's 8-element chunks are whole and 16-byte aligned; bit 4: out's rows and
// base are multiples of 8 elements (whole 16 x 16 results may be stored directly).
layout(constant_id = 0) const uint MODES = 0u;
layout(constant_id = 1) const uint THREADS = 256u;  // 32 * WM * WN
// CFG: WM | WN << 4 | FM << 8 | FN << 12 | (BK / 16) << 16
#ifdef FIXED_CFG
const uint CFG = FIXED_CFG;
#else
layout(constant_id = 2) const uint CFG = 0x20442u;
#endif
layout(local_size_x_id = 1) in;

const uint WM = CFG & 15u, WN = (CFG >> 4) & 15u;
const uint FM = (CFG >> 8) & 15u, FN = (CFG >> 12) & 15u;
const uint BK = ((CFG >> 16) & 15u) * 16u;
const uint BM = WM * FM * 16u, BN = WN * FN * 16u;
const bool A_COL = (MODES & 1u) != 0u, B_COL = (MODES & 2u) != 0u;
const bool A_VEC = (MODES & 4u) != 0u, B_VEC = (MODES & 8u) != 0u, O_VEC = (MODES & 16u) != 0u;
// Shared memory in units of SU halves: f16vec4 (GL_NV_cooperative_matrix loads only from arrays
// of the component type: float16_t there), rows padded by 8 halves.
// SHARED_U4 (kernels/coopmat/matmul_coop_fixed.comp): uvec4 units, one 128-bit store per chunk.
#if defined(COOPMAT_NV)
#define SH_T float16_t
const uint SU = 1u;
#elif defined(SHARED_U4)
#define SH_T uvec4
const uint SU = 8u;
#else
#define SH_T f16vec4
const uint SU = 4u;
#endif
const uint SK4 = (BK + 8u) / SU, SM4 = (BM + 8u) / SU, SN4 = (BN + 8u) / SU;
const uint A_STAGE = A_COL ? BK * SM4 : BM * SK4;
const uint B_STAGE = B_COL ? BN * SK4 : BK * SN4;
const uint A_CHUNKS = BM * BK / 8u / THREADS, B_CHUNKS = BK * BN / 8u / THREADS;

layout(push_constant) uniform Params {
  uint M, N, K;
  uint a_base, b_base, o_base;  // element offsets of the first elements
  uint a_ld, b_ld;              // the strides of the non-contiguous dimensions
  uint nb2;                     // the inner batch count
  uint a_sb1, a_sb2, b_sb1, b_sb2;  // batch strides (0: broadcast)
  uint o_sb;
  uint m0, n0, batch0;          // where this launch's grid starts
  float alpha, beta;
} p;

layout(std430, binding = 0) buffer OH { float16_t oh[]; };
layout(std430, binding = 1) readonly buffer AH { float16_t ah[]; };
layout(std430, binding = 1) readonly buffer AW4 { uvec4 aw4[]; };
layout(std430, binding = 2) readonly buffer BH { float16_t bh[]; };
layout(std430, binding = 2) readonly buffer BW4 { uvec4 bw4[]; };

shared SH_T As[2u * A_STAGE];
shared SH_T Bs[2u * B_STAGE];
shared float Cs[WM * WN * 256u];

// Chunk c of this invocation: (row, k) of a's slice, (k, col) of b's; chunks run along the
// operand's contiguous dimension.
uvec2 chunk_a(uint c) {
  uint i = gl_LocalInvocationID.x + c * THREADS;
  if (!A_COL) return uvec2(i / (BK / 8u), (i % (BK / 8u)) * 8u);
  return uvec2((i % (BM / 8u)) * 8u, i / (BM / 8u));
}
uvec2 chunk_b(uint c) {
  uint i = gl_LocalInvocationID.x + c * THREADS;
  if (!B_COL) return uvec2(i / (BN / 8u), (i % (BN / 8u)) * 8u);
  return uvec2((i % (BK / 8u)) * 8u, i / (BK / 8u));
}

// The 8 halves of a chunk, as bits (elements outside the matrix read as 0).
uvec4 load_a(uint c, uint base, uint row0, uint k0) {
  uvec2 rk = chunk_a(c);
  uint r = row0 + rk.x, k = k0 + rk.y;
  uvec4 q = uvec4(0u);
  if (A_VEC) {
    if (r < p.M && k < p.K) q = aw4[(base + (A_COL ? k * p.a_ld + r : r * p.a_ld + k)) >> 3];
    return q;
  }
  [[unroll]] for (uint j = 0u; j < 8u; j++) {
    uint rj = A_COL ? r + j : r, kj = A_COL ? k : k + j;
    if (rj < p.M && kj < p.K)
      q[j >> 1] |= uint(float16BitsToUint16(ah[base + (A_COL ? kj * p.a_ld + rj : rj * p.a_ld + kj)])) << ((j & 1u) * 16u);
  }
  return q;
}

uvec4 load_b(uint c, uint base, uint col0, uint k0) {
  uvec2 kn = chunk_b(c);
  uint k = k0 + kn.x, n = col0 + kn.y;
  uvec4 q = uvec4(0u);
  if (B_VEC) {
    if (k < p.K && n < p.N) q = bw4[(base + (B_COL ? n * p.b_ld + k : k * p.b_ld + n)) >> 3];
    return q;
  }
  [[unroll]] for (uint j = 0u; j < 8u; j++) {
    uint kj = B_COL ? k + j : k, nj = B_COL ? n : n + j;
    if (kj < p.K && nj < p.N)
      q[j >> 1] |= uint(float16BitsToUint16(bh[base + (B_COL ? nj * p.b_ld + kj : kj * p.b_ld + nj)])) << ((j & 1u) * 16u);
  }
  return q;
}

// A chunk into shared array S at unit `at`.
#if defined(COOPMAT_NV)
#define PUT(S, at, q)                                                                         \
  [[unroll]] for (uint j = 0u; j < 8u; j++)                                                   \
    S[at + j] = uint16BitsToFloat16(uint16_t((q[j >> 1] >> ((j & 1u) * 16u)) & 0xffffu));
#elif defined(SHARED_U4)
#define PUT(S, at, q) S[at] = q;
#else
#define PUT(S, at, q)                                                                         \
  S[at] = f16vec4(unpackFloat2x16(q.x), unpackFloat2x16(q.y));                                \
  S[at + 1u] = f16vec4(unpackFloat2x16(q.z), unpackFloat2x16(q.w));
#endif
void store_a(uint stage, uint c, uvec4 q) {
  uvec2 rk = chunk_a(c);
  uint at = stage * A_STAGE + (A_COL ? rk.y * SM4 + rk.x / SU : rk.x * SK4 + rk.y / SU);
  PUT(As, at, q)
}

void store_b(uint stage, uint c, uvec4 q) {
  uvec2 kn = chunk_b(c);
  uint at = stage * B_STAGE + (B_COL ? kn.y * SK4 + kn.x / SU : kn.x * SN4 + kn.y / SU);
  PUT(Bs, at, q)
}

void main() {
  uint z = gl_WorkGroupID.z + p.batch0;
  uint z1 = z / p.nb2, z2 = z % p.nb2;
  uint row0 = (gl_WorkGroupID.y + p.m0) * BM, col0 = (gl_WorkGroupID.x + p.n0) * BN;
  uint abase = p.a_base + z1 * p.a_sb1 + z2 * p.a_sb2;
  uint bbase = p.b_base + z1 * p.b_sb1 + z2 * p.b_sb2;
  uint warp = gl_SubgroupID, wm = warp % WM, wn = warp / WM;

  MAT_C acc[FM * FN];
  [[unroll]] for (uint i = 0u; i < FM * FN; i++) acc[i] = MAT_C(0.0);
  uvec4 ra[A_CHUNKS], rb[B_CHUNKS];

  uint slices = (p.K + BK - 1u) / BK;
  [[unroll]] for (uint c = 0u; c < A_CHUNKS; c++) store_a(0u, c, load_a(c, abase, row0, 0u));
  [[unroll]] for (uint c = 0u; c < B_CHUNKS; c++) store_b(0u, c, load_b(c, bbase, col0, 0u));
  barrier();
  for (uint s = 0u; s < slices; s++) {
    uint cur = s & 1u;
    bool more = s + 1u < slices;
    if (more) {  // slice s+1 into registers while slice s is multiplied
      [[unroll]] for (uint c = 0u; c < A_CHUNKS; c++) ra[c] = load_a(c, abase, row0, (s + 1u) * BK);
      [[unroll]] for (uint c = 0u; c < B_CHUNKS; c++) rb[c] = load_b(c, bbase, col0, (s + 1u) * BK);
    }
    [[unroll]] for (uint kk = 0u; kk < BK; kk += 16u) {
      MAT_A fa[FM];
      MAT_B fb[FN];
      [[unroll]] for (uint i = 0u; i < FM; i++) {
        uint r = (wm * FM + i) * 16u;
        if (A_COL) LOAD_COL(fa[i], As, cur * A_STAGE + kk * SM4 + r / SU, SM4);
        else LOAD_ROW(fa[i], As, cur * A_STAGE + r * SK4 + kk / SU, SK4);
      }
      [[unroll]] for (uint j = 0u; j < FN; j++) {
        uint n = (wn * FN + j) * 16u;
        if (B_COL) LOAD_COL(fb[j], Bs, cur * B_STAGE + n * SK4 + kk / SU, SK4);
        else LOAD_ROW(fb[j], Bs, cur * B_STAGE + kk * SN4 + n / SU, SN4);
      }
      [[unroll]] for (uint i = 0u; i < FM; i++)
        [[unroll]] for (uint j = 0u; j < FN; j++)
          acc[i * FN + j] = MMA(fa[i], fb[j], acc[i * FN + j]);
    }
    if (more) {  // the other stage was last read before the previous barrier
      [[unroll]] for (uint c = 0u; c < A_CHUNKS; c++) store_a(cur ^ 1u, c, ra[c]);
      [[unroll]] for (uint c = 0u; c < B_CHUNKS; c++) store_b(cur ^ 1u, c, rb[c]);
    }
    barrier();
  }

  uint lane = gl_SubgroupInvocationID, obase = p.o_base + z * p.o_sb;
  uint r = lane / 2u, c8 = (lane % 2u) * 8u, scratch = warp * 256u;
  [[unroll]] for (uint i = 0u; i < FM; i++) {
    [[unroll]] for (uint j = 0u; j < FN; j++) {
      uint row = row0 + (wm * FM + i) * 16u, col = col0 + (wn * FN + j) * 16u;
      if (O_VEC && p.beta == 0.0 && row + 16u <= p.M && col + 16u <= p.N) {
        MAT_H h = MAT_H(acc[i * FN + j] * p.alpha);
        STORE_ROW(h, oh, obase + row * p.N + col, p.N);
        continue;
      }
      STORE_ROW(acc[i * FN + j], Cs, scratch, 16u);
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      // lane l: row l / 2 of the result, 8 columns
      if (row + r < p.M) {
        [[unroll]] for (uint h = 0u; h < 8u; h++) {
          uint cc = col + c8 + h;
          if (cc < p.N) {
            uint e = obase + (row + r) * p.N + cc;
            float v = p.alpha * Cs[scratch + r * 16u + c8 + h];
            if (p.beta != 0.0) v += p.beta * float(oh[e]);
            oh[e] = float16_t(v);
          }
        }
      }
      subgroupBarrier();  // the scratch is rewritten by the next matrix
    }
  }
}
