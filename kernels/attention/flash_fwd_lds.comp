#version 450
// flash_fwd_lds.comp: flash_fwd.comp with its per-row state (the tile's scores, the output
// accumulator) in shared memory, one column per invocation, for CPU-type drivers: lavapipe's
// LLVM compiles barriers as coroutines and took about 100 s on flash_fwd.comp, whose state
// lives in registers across them (runtime/src/vulkan/vk_attention.c picks). Otherwise as
// below.
//
// flash_fwd.comp: the attention slot's plain kernel (FlashAttention-2's forward without tensor
// cores; runtime/src/vulkan/vk_attention.c). A workgroup of 64 invocations takes 64 query rows
// of one (batch, head), one row per invocation, and DVC = 64 columns of the output (more
// workgroups along x when Dv > 64: each recomputes the scores). It walks the keys in tiles of
// BC = 32: the scores q . k over D in chunks of 32 (the key tile's chunk staged in shared
// memory, the row's chunk in registers), then the online softmax (running max m and sum l,
// float32), then acc += p V with the value tile staged in shared memory. The row's state never
// leaves the invocation, so there are no reductions. Causal rows stop at their last visible
// key tile. At the end out = acc / l (0 for a row with every key masked) and
// lse = m + log(l) (-inf for such a row), written by the first column block only.
//
// The grid: x = row blocks * column blocks, y = q head, z = batch.
#extension GL_GOOGLE_include_directive : require
#include "attention/attn.glsl"

layout(local_size_x = 64) in;
// BC = 16 here (32 in flash_fwd): with the row state in shared memory a 32-key tile would need
// 36 KiB, over the 32 KiB a device must offer (lavapipe offers exactly that).
const uint BR = 64u, BC = 16u, DCH = 32u, DVC = 64u;

layout(std430, binding = 0) buffer BO { uint w[]; } ob;
layout(std430, binding = 1) writeonly buffer BL { float lse[]; };

shared vec4 Ks[BC][DCH / 4u];
shared vec4 Vs[BC][DVC / 4u];
shared float Sx[BC][64];    // the tile's scores, then p, of (key jj, row tid)
shared float Acc[DVC][64];  // the output accumulator of row tid

void main() {
  uint tid = gl_LocalInvocationID.x;
  uint nrb = (pc.Tq + BR - 1u) / BR;
  uint rb = gl_WorkGroupID.x % nrb, cblk = gl_WorkGroupID.x / nrb;
  uint h = gl_WorkGroupID.y, b = gl_WorkGroupID.z, kh = h / GROUP;
  uint i = rb * BR + tid, D = HD, Dv = HDV, c0 = cblk * DVC;
  bool row_ok = i < pc.Tq;
  uint row = (b * HQ + h) * pc.Tq + i;
  uint qrow = pc.q_base + b * pc.q_sb + h * pc.q_sh + i * pc.q_st;
  uint kbase = pc.k_base + b * pc.k_sb + kh * pc.k_sh;
  uint vbase = pc.v_base + b * pc.v_sb + kh * pc.v_sh;
  float inv_keep = DROPOUT ? 1.0 / (1.0 - float(pc.drop_below) / 16777216.0) : 1.0;

  uint kend = pc.Tk;
  if (CAUSAL) kend = min(kend, rb * BR + BR);  // rows of this block see keys j <= i only
  float m = NEG_INF, l = 0.0;
  for (uint c = 0u; c < DVC; c++) Acc[c][tid] = 0.0;

  for (uint j0 = 0u; j0 < kend; j0 += BC) {
    for (uint jj = 0u; jj < BC; jj++) Sx[jj][tid] = 0.0;
    for (uint d0 = 0u; d0 < D; d0 += DCH) {
      barrier();
      for (uint t = tid; t < BC * DCH; t += 64u) {
        uint jj = t / DCH, dd = t % DCH, j = j0 + jj, d = d0 + dd;
        Ks[jj][dd >> 2][dd & 3u] = (j < pc.Tk && d < D) ? LDX(kb, kbase + j * pc.k_st + d) : 0.0;
      }
      barrier();
      vec4 qr[DCH / 4u];
      for (uint x = 0u; x < DCH / 4u; x++)
        for (uint y = 0u; y < 4u; y++) {
          uint d = d0 + 4u * x + y;
          qr[x][y] = (row_ok && d < D) ? LDX(qb, qrow + d) : 0.0;
        }
      for (uint jj = 0u; jj < BC; jj++) {
        float t = 0.0;
        for (uint x = 0u; x < DCH / 4u; x++) t += dot(qr[x], Ks[jj][x]);
        Sx[jj][tid] += t;
      }
    }
    // online softmax over this tile
    float mt = NEG_INF;
    for (uint jj = 0u; jj < BC; jj++) {
      float x = row_ok ? score(Sx[jj][tid], b, h, i, j0 + jj) : NEG_INF;
      Sx[jj][tid] = x;
      mt = max(mt, x);
    }
    float mn = max(m, mt);
    float sh = mn == NEG_INF ? 0.0 : mn;  // every score so far -inf: keep p = 0, not NaN
    float alpha = exp(m - sh);
    l *= alpha;
    for (uint c = 0u; c < DVC; c++) Acc[c][tid] *= alpha;
    for (uint jj = 0u; jj < BC; jj++) {
      float p = exp(Sx[jj][tid] - sh);
      l += p;
      if (DROPOUT && p != 0.0) p = kept(row, j0 + jj) ? p * inv_keep : 0.0;
      Sx[jj][tid] = p;
    }
    m = mn;
    // acc += p V over this workgroup's columns
    barrier();
    for (uint t = tid; t < BC * DVC; t += 64u) {
      uint jj = t / DVC, cc = t % DVC, j = j0 + jj, c = c0 + cc;
      Vs[jj][cc >> 2][cc & 3u] = (j < pc.Tk && c < Dv) ? LDX(vb, vbase + j * pc.v_st + c) : 0.0;
    }
    barrier();
    for (uint c = 0u; c < DVC / 4u; c++) {
      vec4 a = vec4(0.0);
      for (uint jj = 0u; jj < BC; jj++) a += Sx[jj][tid] * Vs[jj][c];
      for (uint y = 0u; y < 4u; y++) Acc[4u * c + y][tid] += a[y];
    }
  }
  if (!row_ok) return;
  float inv = l > 0.0 ? 1.0 / l : 0.0;
  if (cblk == 0u) lse[row] = l > 0.0 ? m + log(l) : NEG_INF;
  if (c0 >= Dv) return;
  uint n = min(DVC, Dv - c0);
  float vals[DVC];
  for (uint c = 0u; c < DVC; c++) vals[c] = Acc[c][tid] * inv;
  STORE_SEG(ob, row * Dv + c0, vals, n)
}
