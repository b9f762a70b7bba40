#version 450
// flash_bwd_dq_lds.comp: the shared-memory-state twin of flash_bwd_dq.comp for CPU-type drivers
// (runtime/src/vulkan/vk_attention.c picks; see below).
//
// flash_bwd_dq.comp: gq of the attention backward, plain kernel (runtime/src/vulkan/
// vk_attention.c; FlashAttention-2's dQ loop). A workgroup of 64 invocations takes 64 query
// rows of one (batch, head), one row each, and DQC = 64 columns of gq. Per key tile of BC = 32
// it recomputes the scores s = q . k (D in chunks of 32), p = exp(s - lse') (0 where masked),
// dp = gout . v (Dv in chunks of 32), the dropout's keep factor z, ds = p (z dp - delta), then
// gq += ds k over its columns (the key tile staged in shared memory), scaled at the end.
// stats (flash_bwd_pre.comp) holds (lse', delta) per row.
//
// Every per-row value that outlives a barrier (the tile's s and dp, the gq accumulator) lives
// in shared memory, one column per invocation, not in registers: lavapipe's LLVM turns
// barriers into coroutines and took minutes to compile this kernel with 130 floats per
// invocation live across them (the forward, with fewer, keeps its in registers).
//
// The grid: x = row blocks * column blocks, y = q head, z = batch.
#extension GL_GOOGLE_include_directive : require
#include "attention/attn.glsl"

layout(local_size_x = 64) in;
const uint BR = 64u, BC = 16u, DCH = 32u, DQC = 64u;

layout(std430, binding = 0) buffer BO { uint w[]; } ob;

shared vec4 Ks[BC][DCH / 4u];
shared vec4 Kc[BC][DQC / 4u];
shared float Sx[BC][64];    // s, then ds, of (key jj, row tid)
shared float Dx[BC][64];    // dp
shared float Acc[DQC][64];  // gq's columns of row tid

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

  uint kend = pc.Tk;
  if (CAUSAL) kend = min(kend, rb * BR + BR);
  for (uint c = 0u; c < DQC; c++) Acc[c][tid] = 0.0;

  for (uint j0 = 0u; j0 < kend; j0 += BC) {
    for (uint jj = 0u; jj < BC; jj++) Sx[jj][tid] = 0.0, Dx[jj][tid] = 0.0;
    for (uint d0 = 0u; d0 < D + Dv; d0 += DCH) {  // s = q . k over D, then dp = gout . v over Dv
      bool isk = d0 < D;
      uint e0 = isk ? d0 : d0 - D, n = isk ? D : Dv;
      if (isk && d0 + DCH > D) d0 = D - DCH;   // the next chunk starts Dv at 0
      barrier();
      for (uint t = tid; t < BC * DCH; t += 64u) {
        uint jj = t / DCH, dd = t % DCH, j = j0 + jj, e = e0 + dd;
        float x = 0.0;
        if (j < pc.Tk && e < n)
          x = isk ? LDX(kb, kbase + j * pc.k_st + e) : LDX(vb, vbase + j * pc.v_st + e);
        Ks[jj][dd >> 2][dd & 3u] = x;
      }
      barrier();
      vec4 r[DCH / 4u];
      for (uint x = 0u; x < DCH / 4u; x++)
        for (uint y = 0u; y < 4u; y++) {
          uint e = e0 + 4u * x + y;
          r[x][y] = (row_ok && e < n) ? (isk ? LDX(qb, qrow + e) : LDX(gb, grow + e)) : 0.0;
        }
      for (uint jj = 0u; jj < BC; jj++) {
        float t = 0.0;
        for (uint x = 0u; x < DCH / 4u; x++) t += dot(r[x], Ks[jj][x]);
        if (isk) Sx[jj][tid] += t; else Dx[jj][tid] += t;
      }
    }
    float inv_keep = DROPOUT ? 1.0 / (1.0 - float(pc.drop_below) / 16777216.0) : 1.0;
    vec2 st = row_ok ? stats[row] : vec2(0.0);
    for (uint jj = 0u; jj < BC; jj++) {  // ds, into Sx
      float p = row_ok ? exp(score(Sx[jj][tid], b, h, i, j0 + jj) - st.x) : 0.0;
      float z = (DROPOUT && p != 0.0) ? (kept(row, j0 + jj) ? inv_keep : 0.0) : 1.0;
      Sx[jj][tid] = p * (z * Dx[jj][tid] - st.y);
    }
    barrier();
    for (uint t = tid; t < BC * DQC; t += 64u) {
      uint jj = t / DQC, cc = t % DQC, j = j0 + jj, c = c0 + cc;
      Kc[jj][cc >> 2][cc & 3u] = (j < pc.Tk && c < D) ? LDX(kb, kbase + j * pc.k_st + c) : 0.0;
    }
    barrier();
    for (uint c = 0u; c < DQC / 4u; c++) {
      vec4 a = vec4(0.0);
      for (uint jj = 0u; jj < BC; jj++) a += Sx[jj][tid] * Kc[jj][c];
      for (uint y = 0u; y < 4u; y++) Acc[4u * c + y][tid] += a[y];
    }
  }
  if (!row_ok || c0 >= D) return;
  uint n = min(DQC, D - c0);
  float vals[DQC];
  for (uint c = 0u; c < DQC; c++) vals[c] = Acc[c][tid] * pc.scale;
  STORE_SEG(ob, row * D + c0, vals, n)
}
