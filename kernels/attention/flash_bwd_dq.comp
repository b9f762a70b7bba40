#version 450
// flash_bwd_dq.comp: gq of the attention backward, plain kernel (runtime/src/vulkan/
// vk_attention.c; FlashAttention-2's dQ loop). A workgroup of 64 invocations takes 64 query
// rows of one (batch, head), one row each, and DQC = 64 columns of gq. Per key tile of BC = 32
// it recomputes the scores s = q . k (D in chunks of 32), p = exp(s - lse') (0 where masked),
// dp = gout . v (Dv in chunks of 32), the dropout's keep factor z, ds = p (z dp - delta), then
// gq += ds k over its columns (the key tile staged in shared memory), scaled at the end.
// stats (flash_bwd_pre.comp) holds (lse', delta) per row.
//
// The grid: x = row blocks * column blocks, y = q head, z = batch.
#extension GL_GOOGLE_include_directive : require
#include "attention/attn.glsl"

layout(local_size_x = 64) in;
const uint BR = 64u, BC = 32u, DCH = 32u, DQC = 64u;

layout(std430, binding = 0) buffer BO { uint w[]; } ob;

shared vec4 Ks[BC][DCH / 4u];
shared vec4 Kc[BC][DQC / 4u];

void main() {
  uint tid = gl_LocalInvocationID.x;
  uint nrb = (pc.Tq + BR - 1u) / BR;
  uint rb = gl_WorkGroupID.x % nrb, cblk = gl_WorkGroupID.x / nrb;
  uint h = gl_WorkGroupID.y, b = gl_WorkGroupID.z, kh = h / GROUP;
  uint i = rb * BR + tid, D = HD, Dv = HDV, c0 = cblk * DQC;
  bool row_ok = i < pc.Tq;
  uint row = (b * HQ + h) * pc.Tq + i;
  uint qrow = pc.q_base + b * pc.q_sb + h * pc.q_sh + i * pc.q_st;
  uint grow = pc.g_base + b * pc.g_sb + h * pc.g_sh + i * pc.g_st;
  uint kbase = pc.k_base + b * pc.k_sb + kh * pc.k_sh;
  uint vbase = pc.v_base + b * pc.v_sb + kh * pc.v_sh;
  float inv_keep = DROPOUT ? 1.0 / (1.0 - float(pc.drop_below) / 16777216.0) : 1.0;
  vec2 st = row_ok ? stats[row] : vec2(0.0);

  uint kend = pc.Tk;
  if (CAUSAL) kend = min(kend, rb * BR + BR);
  vec4 acc[DQC / 4u];
  for (uint c = 0u; c < DQC / 4u; c++) acc[c] = vec4(0.0);
  // D <= 64 (one column block): k's tile staged once per key tile into Kc, which both s (up
  // to the chunk of DCH holding the last dim) and the sums read
  bool whole = c0 == 0u && D <= DQC;
  uint xend = ((D + DCH - 1u) / DCH) * (DCH / 4u);

  for (uint j0 = 0u; j0 < kend; j0 += BC) {
    float s[BC], dp[BC];
    for (uint jj = 0u; jj < BC; jj++) s[jj] = 0.0, dp[jj] = 0.0;
    if (whole) {  // k's tile staged once, for s and for the sums (Kc)
      barrier();
      for (uint t = tid; t < BC * DQC; t += 64u) {
        uint jj = t / DQC, cc = t % DQC, j = j0 + jj;
        Kc[jj][cc >> 2][cc & 3u] = (j < pc.Tk && cc < D) ? LDX(kb, kbase + j * pc.k_st + cc) : 0.0;
      }
      barrier();
      for (uint x0 = 0u; x0 < xend; x0 += DCH / 4u) {  // s = q . k
        vec4 r[DCH / 4u];
        for (uint x = 0u; x < DCH / 4u; x++)
          for (uint y = 0u; y < 4u; y++) {
            uint d = 4u * (x0 + x) + y;
            r[x][y] = (row_ok && d < D) ? LDX(qb, qrow + d) : 0.0;
          }
        for (uint jj = 0u; jj < BC; jj++) {
          float t = 0.0;
          for (uint x = 0u; x < DCH / 4u; x++) t += dot(r[x], Kc[jj][x0 + x]);
          s[jj] += t;
        }
      }
    } else {
      for (uint d0 = 0u; d0 < D; d0 += DCH) {  // s = q . k
        barrier();
        for (uint t = tid; t < BC * DCH; t += 64u) {
          uint jj = t / DCH, dd = t % DCH, j = j0 + jj, d = d0 + dd;
          Ks[jj][dd >> 2][dd & 3u] = (j < pc.Tk && d < D) ? LDX(kb, kbase + j * pc.k_st + d) : 0.0;
        }
        barrier();
        vec4 r[DCH / 4u];
        for (uint x = 0u; x < DCH / 4u; x++)
          for (uint y = 0u; y < 4u; y++) {
            uint d = d0 + 4u * x + y;
            r[x][y] = (row_ok && d < D) ? LDX(qb, qrow + d) : 0.0;
          }
        for (uint jj = 0u; jj < BC; jj++) {
          float t = 0.0;
          for (uint x = 0u; x < DCH / 4u; x++) t += dot(r[x], Ks[jj][x]);
          s[jj] += t;
        }
      }
    }
    for (uint d0 = 0u; d0 < Dv; d0 += DCH) {  // dp = gout . v (Ks holds the value chunk)
      barrier();
      for (uint t = tid; t < BC * DCH; t += 64u) {
        uint jj = t / DCH, dd = t % DCH, j = j0 + jj, d = d0 + dd;
        Ks[jj][dd >> 2][dd & 3u] = (j < pc.Tk && d < Dv) ? LDX(vb, vbase + j * pc.v_st + d) : 0.0;
      }
      barrier();
      vec4 r[DCH / 4u];
      for (uint x = 0u; x < DCH / 4u; x++)
        for (uint y = 0u; y < 4u; y++) {
          uint d = d0 + 4u * x + y;
          r[x][y] = (row_ok && d < Dv) ? LDX(gb, grow + d) : 0.0;
        }
      for (uint jj = 0u; jj < BC; jj++) {
        float t = 0.0;
        for (uint x = 0u; x < DCH / 4u; x++) t += dot(r[x], Ks[jj][x]);
        dp[jj] += t;
      }
    }
    for (uint jj = 0u; jj < BC; jj++) {  // ds, into s
      float p = row_ok ? exp(score(s[jj], b, h, i, j0 + jj) - st.x) : 0.0;
      float z = (DROPOUT && p != 0.0) ? (kept(row, j0 + jj) ? inv_keep : 0.0) : 1.0;
      s[jj] = p * (z * dp[jj] - st.y);
    }
    if (!whole) {
      barrier();
      for (uint t = tid; t < BC * DQC; t += 64u) {
        uint jj = t / DQC, cc = t % DQC, j = j0 + jj, c = c0 + cc;
        Kc[jj][cc >> 2][cc & 3u] = (j < pc.Tk && c < D) ? LDX(kb, kbase + j * pc.k_st + c) : 0.0;
      }
      barrier();
    }
    for (uint jj = 0u; jj < BC; jj++)
      for (uint c = 0u; c < DQC / 4u; c++) acc[c] += s[jj] * Kc[jj][c];
  }
  if (!row_ok || c0 >= D) return;
  uint n = min(DQC, D - c0);
  float vals[DQC];
  for (uint c = 0u; c < DQC; c++) vals[c] = acc[c >> 2][c & 3u] * pc.scale;
  STORE_SEG(ob, row * D + c0, vals, n)
}
