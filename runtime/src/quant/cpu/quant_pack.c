/* quant_pack.c: decodes weight rows of any block format into the panels the quantized-Linear
 * kernels read (em_qc_block, runtime/src/quant/quant_cpu.h): per 32 weights, unsigned codes u
 * with value a * (u - z) + bm. Portable C; each format's bit layout is the one of
 * runtime/src/quant/quant_blocks.c (the GGUF layouts), read here 32 weights at a time. */
#include "../../internal.h"
#include "../quant_cpu.h"

#include <string.h>

static float half_at(const uint8_t *p) {
  uint16_t h;
  memcpy(&h, p, 2);
  return em_half_to_float(h);
}

/* Q4_K's 6-bit scale and minimum of sub-block j (as ggml's get_scale_min_k4). */
static void scale_min_k4(int j, const uint8_t *q, int *sc, int *m) {
  if (j < 4) { *sc = q[j] & 63; *m = q[j + 4] & 63; }
  else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

/* The b-th 32 weights of one row: codes u[32], scales of the two halves, minimum term. */
static void decode32(const em_qc_format *f, const uint8_t *row, int64_t b, uint8_t *u, float *alo,
                     float *ahi, float *bm) {
  *bm = 0;
  switch (f->format) {
  case EM_QUANT_Q8_0: {
    const uint8_t *blk = row + b * 34;
    *alo = *ahi = half_at(blk);
    for (int j = 0; j < 32; j++) u[j] = blk[2 + j] ^ 0x80;
    return;
  }
  case EM_QUANT_Q4_0: case EM_QUANT_Q4_1: {
    int off = f->format == EM_QUANT_Q4_0 ? 2 : 4;
    const uint8_t *blk = row + b * (off + 16);
    *alo = *ahi = half_at(blk);
    if (off == 4) *bm = half_at(blk + 2);
    for (int j = 0; j < 16; j++) { u[j] = blk[off + j] & 15; u[16 + j] = blk[off + j] >> 4; }
    return;
  }
  case EM_QUANT_Q4_K: {  /* sub-block s of the super-block: low nibbles if even, high if odd */
    const uint8_t *blk = row + (b / 8) * 144;
    int s = (int)(b % 8), sc, m;
    scale_min_k4(s, blk + 4, &sc, &m);
    *alo = *ahi = half_at(blk) * (float)sc;
    *bm = -half_at(blk + 2) * (float)m;
    const uint8_t *q = blk + 16 + 32 * (s / 2);
    for (int l = 0; l < 32; l++) u[l] = s & 1 ? q[l] >> 4 : q[l] & 15;
    return;
  }
  case EM_QUANT_Q6_K: {  /* 32-slice qi of the 128-half h; scales per 16 */
    const uint8_t *blk = row + (b / 8) * 210;
    int s = (int)(b % 8), h = s / 4, qi = s % 4;
    const uint8_t *ql = blk + 64 * h, *qh = blk + 128 + 32 * h;
    const int8_t *sc = (const int8_t *)(blk + 192) + 8 * h;
    float d = half_at(blk + 208);
    *alo = d * (float)sc[2 * qi];
    *ahi = d * (float)sc[2 * qi + 1];
    for (int l = 0; l < 32; l++) {
      int lo = qi & 1 ? ql[l + 32] : ql[l];
      lo = qi >= 2 ? lo >> 4 : lo & 15;
      u[l] = (uint8_t)(lo | (((qh[l] >> (2 * qi)) & 3) << 4));
    }
    return;
  }
  default: {  /* affine: [scale][min unless symmetric][codes], a group of 32, 64 or 128 */
    int64_t g = f->group, e0 = b * 32, gi = e0 / g, at = e0 % g;
    const uint8_t *blk = row + gi * f->block_bytes;
    const uint8_t *q = blk + (f->symmetric ? 2 : 4);
    *alo = *ahi = half_at(blk);
    if (!f->symmetric) *bm = half_at(blk + 2);
    if (f->format == EM_QUANT_AFFINE8) memcpy(u, q + at, 32);
    else
      for (int j = 0; j < 32; j++) {
        int64_t e = at + j;
        u[j] = e & 1 ? q[e / 2] >> 4 : q[e / 2] & 15;
      }
    return;
  }
  }
}

void em_qc_pack(const em_qc_format *f, const uint8_t *w, int64_t row_bytes, int64_t r0, int nr,
                int64_t kb0, int64_t nkb, em_qc_block *blk) {
  for (int64_t b = 0; b < nkb; b++) {
    em_qc_block *o = blk + b;
    for (int c = 0; c < EM_QC_NR; c++) {
      uint8_t u[32];
      float alo = 0, ahi = 0, bm = 0;
      if (c < nr) decode32(f, w + (r0 + c) * row_bytes, kb0 + b, u, &alo, &ahi, &bm);
      else memset(u, 0, sizeof u);
      for (int g = 0; g < 8; g++) memcpy(o->codes[g][c], u + 4 * g, 4);
      o->a_lo[c] = alo;
      o->a_hi[c] = ahi;
      o->bm[c] = bm;
    }
  }
}
