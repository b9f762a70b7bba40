#version 450
// flash_bwd_dkdv.comp: gk and gv of the attention backward, plain kernel (runtime/src/vulkan/
// vk_attention.c; FlashAttention-2's outer loop over keys). A workgroup of 64 invocations takes
// 64 keys of one (batch, k/v head), one key each, and CC = 64 columns of gk and of gv. It walks
// every q head sharing that k/v head (grouped-query attention sums them here, no atomics) and
// their query rows in tiles of BQ = 16 (causal: from the first row that can see these keys):
// the scores s = q . k and dp = gout . v (chunks of 32 of D and Dv, the query tile's chunk in
// shared memory, the key's in registers), p = exp(s - lse') (0 where masked), the dropout's keep
// factor z, then gv += z p gout and gk += p (z dp - delta) q over its columns (the query tile
// staged in shared memory); gk is scaled at the end. With D, Dv <= 64 the query tile is
// staged once per tile for both (`whole`).
//
// The grid: x = key blocks * column blocks, y = k/v head, z = batch.
#extension GL_GOOGLE_include_directive : require
#include "attention/attn.glsl"

layout(local_size_x = 64) in;
const uint BK = 64u, BQ = 16u, DCH = 32u, CC = 64u;

layout(std430, binding = 0) buffer BOK { uint w[]; } okb;
layout(std430, binding = 1) buffer BOV { uint w[]; } ovb;

shared vec4 Qs[BQ][DCH / 4u];
shared vec4 Qc[BQ][CC / 4u];
shared vec4 Gc[BQ][CC / 4u];
shared vec2 Ss[BQ];

void main() {
  uint tid = gl_LocalInvocationID.x;
  uint nkb = (pc.Tk + BK - 1u) / BK;
  uint kblk = gl_WorkGroupID.x % nkb, cblk = gl_WorkGroupID.x / nkb;
  uint kh = gl_WorkGroupID.y, b = gl_WorkGroupID.z, Hkv = HQ / GROUP;
  uint j = kblk * BK + tid, D = HD, Dv = HDV, c0 = cblk * CC;
  bool key_ok = j < pc.Tk;
  uint krow = pc.k_base + b * pc.k_sb + kh * pc.k_sh + j * pc.k_st;
  uint vrow = pc.v_base + b * pc.v_sb + kh * pc.v_sh + j * pc.v_st;
  float inv_keep = DROPOUT ? 1.0 / (1.0 - float(pc.drop_below) / 16777216.0) : 1.0;

  vec4 ak[CC / 4u], av[CC / 4u];
  for (uint c = 0u; c < CC / 4u; c++) ak[c] = vec4(0.0), av[c] = vec4(0.0);
  uint istart = CAUSAL ? (kblk * BK / BQ) * BQ : 0u;  // rows i < first key see none of them
  // D, Dv <= 64 (one column block): q's and gout's tile staged once per tile for both the
  // products (up to the chunk of DCH holding the last dim) and the sums
  bool whole = c0 == 0u && D <= CC && Dv <= CC;
  uint xend = ((max(D, Dv) + DCH - 1u) / DCH) * (DCH / 4u);

  for (uint hh = 0u; hh < GROUP; hh++) {
    uint h = kh * GROUP + hh;
    uint qbase = pc.q_base + b * pc.q_sb + h * pc.q_sh;
    uint gbase = pc.g_base + b * pc.g_sb + h * pc.g_sh;
    uint row0 = (b * HQ + h) * pc.Tq;
    for (uint i0 = istart; i0 < pc.Tq; i0 += BQ) {
      float s[BQ], dp[BQ];
      for (uint ii = 0u; ii < BQ; ii++) s[ii] = 0.0, dp[ii] = 0.0;
      if (whole) {  // q's and gout's tile staged once, for the products and for the sums
        barrier();
        for (uint t = tid; t < BQ * CC; t += 64u) {
          uint ii = t / CC, cc = t % CC, i = i0 + ii;
          bool in_ = i < pc.Tq;
          Qc[ii][cc >> 2][cc & 3u] = (in_ && cc < D) ? LDX(qb, qbase + i * pc.q_st + cc) : 0.0;
          Gc[ii][cc >> 2][cc & 3u] = (in_ && cc < Dv) ? LDX(gb, gbase + i * pc.g_st + cc) : 0.0;
        }
        if (tid < BQ) Ss[tid] = i0 + tid < pc.Tq ? stats[row0 + i0 + tid] : vec2(0.0);
        barrier();
        for (uint x0 = 0u; x0 < xend; x0 += DCH / 4u) {  // s = q . k
          vec4 r[DCH / 4u];
          for (uint x = 0u; x < DCH / 4u; x++)
            for (uint y = 0u; y < 4u; y++) {
              uint d = 4u * (x0 + x) + y;
              r[x][y] = (key_ok && d < D) ? LDX(kb, krow + d) : 0.0;
            }
          for (uint ii = 0u; ii < BQ; ii++) {
            float t = 0.0;
            for (uint x = 0u; x < DCH / 4u; x++) t += dot(r[x], Qc[ii][x0 + x]);
            s[ii] += t;
          }
        }
        for (uint x0 = 0u; x0 < xend; x0 += DCH / 4u) {  // dp = gout . v
          vec4 r[DCH / 4u];
          for (uint x = 0u; x < DCH / 4u; x++)
            for (uint y = 0u; y < 4u; y++) {
              uint d = 4u * (x0 + x) + y;
              r[x][y] = (key_ok && d < Dv) ? LDX(vb, vrow + d) : 0.0;
            }
          for (uint ii = 0u; ii < BQ; ii++) {
            float t = 0.0;
            for (uint x = 0u; x < DCH / 4u; x++) t += dot(r[x], Gc[ii][x0 + x]);
            dp[ii] += t;
          }
        }
      } else {
        for (uint d0 = 0u; d0 < D; d0 += DCH) {  // s = q . k
          barrier();
          for (uint t = tid; t < BQ * DCH; t += 64u) {
            uint ii = t / DCH, dd = t % DCH, i = i0 + ii, d = d0 + dd;
            Qs[ii][dd >> 2][dd & 3u] =
                (i < pc.Tq && d < D) ? LDX(qb, qbase + i * pc.q_st + d) : 0.0;
          }
          if (d0 == 0u && tid < BQ) Ss[tid] = i0 + tid < pc.Tq ? stats[row0 + i0 + tid] : vec2(0.0);
          barrier();
          vec4 r[DCH / 4u];
          for (uint x = 0u; x < DCH / 4u; x++)
            for (uint y = 0u; y < 4u; y++) {
              uint d = d0 + 4u * x + y;
              r[x][y] = (key_ok && d < D) ? LDX(kb, krow + d) : 0.0;
            }
          for (uint ii = 0u; ii < BQ; ii++) {
            float t = 0.0;
            for (uint x = 0u; x < DCH / 4u; x++) t += dot(r[x], Qs[ii][x]);
            s[ii] += t;
          }
        }
        if (D == 0u) {  // no chunk loaded the stats
          barrier();
          if (tid < BQ) Ss[tid] = i0 + tid < pc.Tq ? stats[row0 + i0 + tid] : vec2(0.0);
        }
        for (uint d0 = 0u; d0 < Dv; d0 += DCH) {  // dp = gout . v (Qs holds gout's chunk)
          barrier();
          for (uint t = tid; t < BQ * DCH; t += 64u) {
            uint ii = t / DCH, dd = t % DCH, i = i0 + ii, d = d0 + dd;
            Qs[ii][dd >> 2][dd & 3u] =
                (i < pc.Tq && d < Dv) ? LDX(gb, gbase + i * pc.g_st + d) : 0.0;
          }
          barrier();
          vec4 r[DCH / 4u];
          for (uint x = 0u; x < DCH / 4u; x++)
            for (uint y = 0u; y < 4u; y++) {
              uint d = d0 + 4u * x + y;
              r[x][y] = (key_ok && d < Dv) ? LDX(vb, vrow + d) : 0.0;
            }
          for (uint ii = 0u; ii < BQ; ii++) {
            float t = 0.0;
            for (uint x = 0u; x < DCH / 4u; x++) t += dot(r[x], Qs[ii][x]);
            dp[ii] += t;
          }
        }
        // the query tile's columns of this workgroup (and the stats, loaded above, made visible)
        barrier();
        for (uint t = tid; t < BQ * CC; t += 64u) {
          uint ii = t / CC, cc = t % CC, i = i0 + ii, c = c0 + cc;
          Qc[ii][cc >> 2][cc & 3u] = (i < pc.Tq && c < D) ? LDX(qb, qbase + i * pc.q_st + c) : 0.0;
          Gc[ii][cc >> 2][cc & 3u] = (i < pc.Tq && c < Dv) ? LDX(gb, gbase + i * pc.g_st + c) : 0.0;
        }
      }
      barrier();
      for (uint ii = 0u; ii < BQ; ii++) {
        uint i = i0 + ii;
        vec2 st = Ss[ii];
        float p = (key_ok && i < pc.Tq) ? exp(score(s[ii], b, h, i, j) - st.x) : 0.0;
        float z = (DROPOUT && p != 0.0) ? (kept(row0 + i, j) ? inv_keep : 0.0) : 1.0;
        float pv = p * z, ds = p * (z * dp[ii] - st.y);
        for (uint c = 0u; c < CC / 4u; c++) {
          av[c] += pv * Gc[ii][c];
          ak[c] += ds * Qc[ii][c];
        }
      }
    }
  }
  if (!key_ok) return;
  uint kr = (b * Hkv + kh) * pc.Tk + j;
  float vals[CC];
  if (c0 < D) {
    for (uint c = 0u; c < CC; c++) vals[c] = ak[c >> 2][c & 3u] * pc.scale;
    STORE_SEG(okb, kr * D + c0, vals, min(CC, D - c0))
  }
  if (c0 < Dv) {
    for (uint c = 0u; c < CC; c++) vals[c] = av[c >> 2][c & 3u];
    STORE_SEG(ovb, kr * Dv + c0, vals, min(CC, Dv - c0))
  }
}
