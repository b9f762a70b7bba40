// attn.glsl: what the plain fused-attention kernels share (flash_fwd.comp, flash_bwd_dq.comp,
// flash_bwd_dkdv.comp, flash_bwd_pre.comp; the host side is runtime/src/vulkan/vk_attention.c,
// the semantics runtime/src/nn.h's em_attn_geom).
//
//  - One push-constant block of 128 bytes for every attention kernel: the geometry, each
//    operand's base and strides (batch, head, row; the last dim has stride 1), the additive
//    float32 mask's strides (any, 0 where it broadcasts), and the dropout's Philox stream.
//  - float32 operands in buffers of 32-bit words, float32 math. (16-bit variants that widen
//    in registers were tried: lavapipe's LLVM took over ten minutes to compile their backward
//    kernels, whose barriers it turns into coroutines; so the host casts 16-bit operands.)
//  - The dropout's keep test, bit-exact with the CPU (random.h's layout, kernels/random.comp's
//    Philox): score (b, h, i, j) at flat e = ((b Hq + h) Tq + i) Tk + j reads lane e % 4 of
//    block offset + e / 4 and is kept when (word >> 8) >= drop_below.
#extension GL_GOOGLE_include_directive : require
#extension GL_ARB_gpu_shader_int64 : require

layout(push_constant) uniform PC {
  uint heads;                    // Hq | (Hq / Hkv) << 16
  uint Tq, Tk;
  uint dims;                     // D | Dv << 16
  uint q_base, q_sb, q_sh, q_st; // q [B, Hq, Tq, D]: element offset, batch/head/row strides
  uint k_base, k_sb, k_sh, k_st; // k [B, Hkv, Tk, D]
  uint v_base, v_sb, v_sh, v_st; // v [B, Hkv, Tk, Dv]
  uint g_base, g_sb, g_sh, g_st; // gout [B, Hq, Tq, Dv] (the backward; unused forward)
  uint m_base, m_sb, m_sh, m_si, m_sj; // the mask viewed [B, Hq, Tq, Tk]
  float scale;
  uint flags;                    // bit 0 causal, bit 1 mask, bit 2 dropout
  uint drop_below;               // keep when (word >> 8) >= drop_below
  uint seed_lo, seed_hi, off_lo, off_hi;
} pc;

#define HQ (pc.heads & 0xffffu)
#define GROUP (pc.heads >> 16)
#define HD (pc.dims & 0xffffu)
#define HDV (pc.dims >> 16)
#define CAUSAL ((pc.flags & 1u) != 0u)
#define HAS_MASK ((pc.flags & 2u) != 0u)
#define DROPOUT ((pc.flags & 4u) != 0u)

const float NEG_INF = -1.0 / 0.0;

// Operands: 0 and 1 are the kernel's outputs (declared by it); the inputs are fixed.
layout(std430, binding = 2) readonly buffer BQQ { uint w[]; } qb;
layout(std430, binding = 3) readonly buffer BKK { uint w[]; } kb;
layout(std430, binding = 4) readonly buffer BV { uint w[]; } vb;
layout(std430, binding = 5) readonly buffer BM { float mask[]; };
layout(std430, binding = 6) readonly buffer BG { uint w[]; } gb;
layout(std430, binding = 7) readonly buffer BS { vec2 stats[]; };  // per q row: (lse', delta)

// ---- loads and stores: tensors of float32 (16-bit ones are cast by the host, see
// vk_attention.c) in buffers seen as 32-bit words ----
#define LDX(buf, e) uintBitsToFloat((buf).w[e])
#define STORE_SEG(BUF, e0, vals, n)                                                         \
  for (uint c_ = 0u; c_ < (n); c_++) BUF.w[(e0) + c_] = floatBitsToUint(vals[c_]);

// ---- dropout ----
uvec4 philox(uvec2 ctr, uvec2 key) {
  uint c0 = ctr.x, c1 = ctr.y, c2 = 0u, c3 = 0u, k0 = key.x, k1 = key.y;
  for (int round = 0; round < 10; round++) {
    uint hi0, lo0, hi1, lo1;
    umulExtended(0xD2511F53u, c0, hi0, lo0);
    umulExtended(0xCD9E8D57u, c2, hi1, lo1);
    uint n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c1 = lo1;
    c3 = lo0;
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return uvec4(c0, c1, c2, c3);
}

// The last block computed by this invocation (consecutive scores of a row share blocks).
uint64_t drop_cached = ~0UL;
uvec4 drop_words = uvec4(0u);

// Whether score (row, j) survives dropout; row = (b Hq + h) Tq + i.
bool kept(uint row, uint j) {
  uint64_t e = uint64_t(row) * uint64_t(pc.Tk) + uint64_t(j);
  uint64_t blk = packUint2x32(uvec2(pc.off_lo, pc.off_hi)) + (e >> 2);
  if (blk != drop_cached) {
    drop_cached = blk;
    drop_words = philox(unpackUint2x32(blk), uvec2(pc.seed_lo, pc.seed_hi));
  }
  return (drop_words[uint(e & 3UL)] >> 8) >= pc.drop_below;
}

// The masked, scaled score of (b, h, row i, key j) from the raw dot product (-inf where the key
// is out of range or causally hidden).
float score(float dot, uint b, uint h, uint i, uint j) {
  if (j >= pc.Tk || (CAUSAL && j > i)) return NEG_INF;
  float x = dot * pc.scale;
  if (HAS_MASK) x += mask[pc.m_base + b * pc.m_sb + h * pc.m_sh + i * pc.m_si + j * pc.m_sj];
  return x;
}
