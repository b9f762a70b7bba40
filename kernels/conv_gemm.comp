#version 450
// variants: F32 F64
//
// conv_gemm.comp: the three convolution ops (nn.h: forward F, input gradient T, weight
// gradient Wg) as one implicit GEMM, C[rows, cols] = A[rows, K] * B[K, cols], per group
// (workgroup z). No column matrix is ever stored: each tile of A and B is gathered from the
// tensors while it is staged into shared memory, with the im2col addressing computed on the
// fly. Rows are always the output's contiguous index, so the stores coalesce:
//
//   MODE 0 (F)   rows (n, oh, ow)  cols m   K (c, i, j)      A = x windows   B = w
//   MODE 1 (T)   rows (n, h, w)    cols c   K (m, i, j)      A = gy gathered B = w
//   MODE 2 (Wg)  rows (c, i, j)    cols m   K (n, oh, ow)    A = x windows   B = gy
//
// (m, c: channels within the group.) T is the gather form of the transposed convolution: gx
// at (h, w) takes gy at ((h + ph - i*dh) / sh, ...) where that divides exactly. Wg may split
// K over workgroups (z = group * splits + split); each split then writes its partial product
// to a scratch tensor that conv_sum.comp adds up in split order (deterministic, no atomics).
//
// Tiles: BM x BN outputs per workgroup of 256 threads (16 x 16), each thread a TM x TN
// register tile (rows tx*TM .., cols ty*TN ..); K advances BK = 16 at a time. The shared tiles
// are arrays of 128-bit vectors (vec4, or dvec2 for float64), so with TM = TN = 4 a thread
// reads its 4 A and 4 B values of a k with one 128-bit load each: shared-memory bandwidth, not
// arithmetic, is what bounds a register-tiled GEMM of this size. The next step's A and B
// elements are loaded into registers while the current tile is multiplied.
#extension GL_EXT_control_flow_attributes : enable

#ifdef VARIANT_F64
#extension GL_ARB_gpu_shader_fp64 : require
#define T double
#define VEC dvec2
#define VW 2u
#else
#define T float
#define VEC vec4
#define VW 4u
#endif

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint MODE = 0;
layout(constant_id = 1) const uint TM = 4;
layout(constant_id = 2) const uint TN = 4;
const uint BK = 16;
const uint BM = 16 * TM;
const uint BN = 16 * TN;

layout(std430, set = 0, binding = 0) buffer Out { T o[]; };
layout(std430, set = 0, binding = 1) readonly buffer InA { T a[]; };
layout(std430, set = 0, binding = 2) readonly buffer InB { T b[]; };
layout(std430, set = 0, binding = 3) readonly buffer Bias { T bias[]; };

layout(push_constant) uniform Params {
  uint N, C, H, W, M, OH, OW, kh, kw;
  int sh, sw, ph, pw, dh, dw;
  uint G;
  uint off_o, off_a, off_b, off_bias;  // element offsets in the bound buffers
  uint rows, cols, K;                  // per group
  uint ksplit;                         // K per split (a multiple of BK)
  uint splits;
  uint has_bias;
  uint part_stride;                    // Wg partials: elements between splits' outputs
} p;

// Element (k, r) of a tile is component r % VW of vector r / VW of row k; one vector of
// padding per row spreads the staging stores (16 k values at a time) over the banks.
shared VEC As[BK][BM / VW + 1];
shared VEC Bs[BK][BN / VW + 1];

// Per-row facts of the A gather, computed once per tile (rows do not change along K).
struct RowInfo { uint base; int y0; int x0; bool ok; };
// Per-k facts, computed once per step (one k per thread and step).
struct KInfo { uint off; int ky; int kx; bool ok; };

uint KHW() { return p.kh * p.kw; }

RowInfo row_info(uint r, uint g) {
  RowInfo ri;
  ri.ok = r < p.rows;
  uint rr = ri.ok ? r : 0u;
  if (MODE == 0u) {            // (n, oh, ow): the window's top-left corner in x
    uint ohw = p.OH * p.OW, n = rr / ohw, s = rr - n * ohw, oh = s / p.OW, ow = s - oh * p.OW;
    ri.base = p.off_a + (n * p.C + g * (p.C / p.G)) * p.H * p.W;
    ri.y0 = int(oh) * p.sh - p.ph;
    ri.x0 = int(ow) * p.sw - p.pw;
  } else if (MODE == 1u) {     // (n, h, w): gy rows that reach it are (h + ph - i*dh) / sh
    uint hw = p.H * p.W, n = rr / hw, s = rr - n * hw, h = s / p.W, w = s - h * p.W;
    ri.base = p.off_a + (n * p.M + g * (p.M / p.G)) * p.OH * p.OW;
    ri.y0 = int(h) + p.ph;
    ri.x0 = int(w) + p.pw;
  } else {                     // (c, i, j): the tap's offset from each window's corner
    uint khw = KHW(), c = rr / khw, ij = rr - c * khw, i = ij / p.kw, j = ij - i * p.kw;
    ri.base = p.off_a + (g * (p.C / p.G) + c) * p.H * p.W;
    ri.y0 = int(i) * p.dh - p.ph;
    ri.x0 = int(j) * p.dw - p.pw;
  }
  return ri;
}

// k's part of A's address, and (in kb) its part of B's.
KInfo k_info(uint k, uint kend, out uint kb) {
  KInfo ki;
  ki.ok = k < kend;
  uint kk = ki.ok ? k : 0u;
  if (MODE == 0u) {            // (c, i, j)
    uint khw = KHW(), c = kk / khw, ij = kk - c * khw, i = ij / p.kw, j = ij - i * p.kw;
    ki.off = c * p.H * p.W;
    ki.ky = int(i) * p.dh;
    ki.kx = int(j) * p.dw;
    kb = kk;
  } else if (MODE == 1u) {     // (m, i, j)
    uint khw = KHW(), m = kk / khw, ij = kk - m * khw, i = ij / p.kw, j = ij - i * p.kw;
    ki.off = m * p.OH * p.OW;
    ki.ky = int(i) * p.dh;
    ki.kx = int(j) * p.dw;
    kb = m * (p.C / p.G) * khw + ij;
  } else {                     // (n, oh, ow)
    uint ohw = p.OH * p.OW, n = kk / ohw, s = kk - n * ohw, oh = s / p.OW, ow = s - oh * p.OW;
    ki.off = n * p.C * p.H * p.W;
    ki.ky = int(oh) * p.sh;
    ki.kx = int(ow) * p.sw;
    kb = n * p.M * ohw + s;
  }
  return ki;
}

T load_a(RowInfo ri, KInfo ki) {
  if (!(ri.ok && ki.ok)) return T(0);
  if (MODE == 1u) {
    int oy = ri.y0 - ki.ky, ox = ri.x0 - ki.kx;
    if (oy < 0 || ox < 0) return T(0);
    if (p.sh != 1 || p.sw != 1) {   // uniform: the common stride 1 needs no divisions
      int qy = oy / p.sh, qx = ox / p.sw;
      if (qy * p.sh != oy || qx * p.sw != ox) return T(0);
      oy = qy;
      ox = qx;
    }
    if (oy >= int(p.OH) || ox >= int(p.OW)) return T(0);
    return a[ri.base + ki.off + uint(oy) * p.OW + uint(ox)];
  }
  int y = ri.y0 + ki.ky, x = ri.x0 + ki.kx;
  if (y < 0 || x < 0 || y >= int(p.H) || x >= int(p.W)) return T(0);
  return a[ri.base + ki.off + uint(y) * p.W + uint(x)];
}

// B's column base (the part of its address that depends on the column only).
uint col_base(uint c, uint g) {
  uint Mg = p.M / p.G, Cg = p.C / p.G;
  if (MODE == 0u) return p.off_b + (g * Mg + c) * Cg * KHW();        // w[m] row
  if (MODE == 1u) return p.off_b + (g * Mg * Cg + c) * KHW();        // w[g*Mg, c]
  return p.off_b + (g * Mg + c) * p.OH * p.OW;                        // gy[0, m]
}

void main() {
  uint t = gl_LocalInvocationID.x, tx = t % 16u, ty = t / 16u;
  uint row0 = gl_WorkGroupID.x * BM, col0 = gl_WorkGroupID.y * BN;
  uint g = gl_WorkGroupID.z / p.splits, split = gl_WorkGroupID.z - g * p.splits;
  uint kbeg = split * p.ksplit, kend = min(p.K, kbeg + p.ksplit);

  // This thread stages A rows lr*TM + q and B columns lr*TN + q, at k offset t % 16.
  uint lk = t % 16u, lr = t / 16u;
  RowInfo ri[TM];
  [[unroll]] for (uint q = 0; q < TM; q++) ri[q] = row_info(row0 + lr * TM + q, g);
  uint cb[TN];
  bool cok[TN];
  [[unroll]] for (uint q = 0; q < TN; q++) {
    cok[q] = col0 + lr * TN + q < p.cols;
    cb[q] = col_base(cok[q] ? col0 + lr * TN + q : 0u, g);
  }

  T acc[TM][TN];
  [[unroll]] for (uint i = 0; i < TM; i++)
    [[unroll]] for (uint j = 0; j < TN; j++) acc[i][j] = T(0);

  T ra[TM], rb[TN];
  uint kb;
  KInfo ki = k_info(kbeg + lk, kend, kb);
  [[unroll]] for (uint q = 0; q < TM; q++) ra[q] = load_a(ri[q], ki);
  [[unroll]] for (uint q = 0; q < TN; q++) rb[q] = (ki.ok && cok[q]) ? b[cb[q] + kb] : T(0);

  for (uint k0 = kbeg; k0 < kend; k0 += BK) {
    [[unroll]] for (uint q = 0; q < TM; q++) As[lk][(lr * TM + q) / VW][(lr * TM + q) % VW] = ra[q];
    [[unroll]] for (uint q = 0; q < TN; q++) Bs[lk][(lr * TN + q) / VW][(lr * TN + q) % VW] = rb[q];
    barrier();
    if (k0 + BK < kend) {   // the next step's loads overlap this step's products
      ki = k_info(k0 + BK + lk, kend, kb);
      [[unroll]] for (uint q = 0; q < TM; q++) ra[q] = load_a(ri[q], ki);
      [[unroll]] for (uint q = 0; q < TN; q++) rb[q] = (ki.ok && cok[q]) ? b[cb[q] + kb] : T(0);
    }
    [[unroll]] for (uint kk = 0; kk < BK; kk++) {
      T av[TM], bv[TN];
      if (TM % VW == 0u) {    // whole vectors: TM / VW 128-bit loads
        [[unroll]] for (uint v = 0; v < TM / VW; v++) {
          VEC q = As[kk][tx * (TM / VW) + v];
          [[unroll]] for (uint c = 0; c < VW; c++) av[v * VW + c] = q[c];
        }
      } else {
        [[unroll]] for (uint i = 0; i < TM; i++) av[i] = As[kk][(tx * TM + i) / VW][(tx * TM + i) % VW];
      }
      if (TN % VW == 0u) {
        [[unroll]] for (uint v = 0; v < TN / VW; v++) {
          VEC q = Bs[kk][ty * (TN / VW) + v];
          [[unroll]] for (uint c = 0; c < VW; c++) bv[v * VW + c] = q[c];
        }
      } else {
        [[unroll]] for (uint j = 0; j < TN; j++) bv[j] = Bs[kk][(ty * TN + j) / VW][(ty * TN + j) % VW];
      }
      [[unroll]] for (uint i = 0; i < TM; i++)
        [[unroll]] for (uint j = 0; j < TN; j++) acc[i][j] = fma(av[i], bv[j], acc[i][j]);
    }
    barrier();
  }

  uint Mg = p.M / p.G, Cg = p.C / p.G;
  [[unroll]] for (uint i = 0; i < TM; i++) {
    uint r = row0 + tx * TM + i;
    if (r >= p.rows) continue;
    uint rbase;
    if (MODE == 0u) {
      uint ohw = p.OH * p.OW, n = r / ohw;
      rbase = p.off_o + n * p.M * ohw + (r - n * ohw) + g * Mg * ohw;
    } else if (MODE == 1u) {
      uint hw = p.H * p.W, n = r / hw;
      rbase = p.off_o + n * p.C * hw + (r - n * hw) + g * Cg * hw;
    } else {
      rbase = p.off_o + split * p.part_stride + g * Mg * p.rows + r;
    }
    [[unroll]] for (uint j = 0; j < TN; j++) {
      uint c = col0 + ty * TN + j;
      if (c >= p.cols) continue;
      T v = acc[i][j];
      if (MODE == 0u) {
        if (p.has_bias != 0u) v += bias[p.off_bias + g * Mg + c];
        o[rbase + c * p.OH * p.OW] = v;
      } else if (MODE == 1u) {
        if (p.has_bias != 0u) v += bias[p.off_bias + g * Cg + c];
        o[rbase + c * p.H * p.W] = v;
      } else {
        o[rbase + c * p.rows] = v;
      }
    }
  }
}
