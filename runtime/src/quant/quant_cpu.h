/* quant_cpu.h: the CPU kernels of the quantized Linear, out[m, n] = x[m, k] W[n, k]^T, with W
 * held as blocks of any em_quant_format and never materialized as floats.
 *
 * How a product is computed (runtime/src/quant/cpu/):
 *   1. Activations: each row of x is quantized to int8 per 32 elements, as ggml's Q8_0:
 *      dx = amax / 127, q = round(x / dx) in -127..127, plus the block's code sums (per 16 too,
 *      for Q6_K's 16-element scales). A block with a NaN or inf gets a NaN scale, so the outputs
 *      it touches are NaN, as a dense product would make them.
 *   2. Weights: 16 rows of W at a time (a panel) are decoded, one chunk of K at a time, into a
 *      common form: unsigned 8-bit codes u with value a * (u - z) + bm per 32 (a per 16 for
 *      Q6_K), the codes laid out so that one 64-byte vector holds 4 consecutive k of the 16
 *      rows. Q8_0's signed codes are offset by 128 (u = q ^ 0x80, z = 128); the 4-bit, 6-bit and
 *      affine codes are unsigned already.
 *      With 1 to 4 activation rows and a ggml format on the VNNI path, the rows are
 *      read in place instead (lanes along k, quant_matvec_vnni.c): the product is a read of W.
 *   3. Products: u8 x s8 dot products of 4 summed into int32 (vpdpbusd with AVX-512 VNNI; the
 *      same C loops compiled for AVX2 or for the baseline otherwise), the zero point removed
 *      exactly in int32 through the activation code sums (-z * sum q), then one float
 *      multiply-add per block: acc += a * dx * idot + bm * dx * sum q.
 *
 * Activation quantization error: the codes are exact but x is rounded to the nearest multiple
 * of dx, so per block |x - dx q| <= dx / 2 = amax / 254 elementwise and one output is off by at
 * most sum over blocks of (amax_b / 254) * sum_j |w_j| (w the dequantized weights), plus float32
 * summation (one rounding per block). That is ggml's error; the tests check this bound against
 * dequantize-then-float64. Relative to |x| |w| it is about 0.4% per block at worst, typically
 * far less since the errors cancel.
 *
 * Paths: AVX-512 VNNI (avx512f+bw+vl+vnni), AVX2 (the portable loops compiled for AVX2+FMA),
 * portable. The best the CPU has is chosen at run time; EMBER_QUANT_CPU=vnni|avx2|portable forces
 * one (read on every call, so tests switch it; a forced path the CPU lacks is an error). */
#ifndef EMBER_QUANT_CPU_H
#define EMBER_QUANT_CPU_H

#include <stdint.h>

/* x contiguous [m, k] float32; w the n weight rows, each k / block_elems blocks in the GGUF (or
 * affine) byte layout, contiguous; out [m, n] = x W^T. format an em_quant_format id, group and
 * symmetric as em_quant_block_size. Returns 0, or -1 with em_error set (bad format or group,
 * k not whole blocks, negative sizes, a forced path the CPU lacks, out of memory). */
int em_quant_cpu_linear(const float *x, int64_t m, int64_t k, const uint8_t *w, int64_t n,
                        int format, int64_t group, int symmetric, float *out);
/* The path a call makes now ("vnni", "avx2", "portable"), or NULL with the error set when
 * EMBER_QUANT_CPU forces one the CPU lacks; and whether the CPU has a path's instructions. */
const char *em_quant_cpu_path(void);
int em_quant_cpu_has(const char *path);

/* ---- shared by the files of runtime/src/quant/cpu ---------------------------------------- */
enum { EM_QC_NR = 16,        /* weight rows (outputs) per panel: one 16-lane vector */
       EM_QC_KC = 1024 };    /* k per chunk: a multiple of every block (256, 128, 32) */

/* One 32-element block of a panel: codes[g][c][t] = u of row c at k = 32 b + 4 g + t. */
typedef struct em_qc_block {
  uint8_t codes[8][EM_QC_NR][4];
  float a_lo[EM_QC_NR], a_hi[EM_QC_NR]; /* scale of k 0..15 and 16..31 (equal but for Q6_K) */
  float bm[EM_QC_NR];                   /* the minimum's term (Q4_1, Q4_K, asymmetric affine) */
} em_qc_block;

/* What the compute kernels need to know about a format. */
typedef struct em_qc_format {
  int format;
  int64_t group, block_elems, block_bytes;
  int symmetric;
  int z;        /* zero point of the codes */
  int split;    /* a_lo != a_hi: two scales per 32 (Q6_K) */
  int has_min;  /* bm is not all zero */
} em_qc_format;

/* The quantized activations: codes [m, k], per 32-block scale and code sums (whole, first 16). */
typedef struct em_qc_act {
  const int8_t *q;
  const float *d;
  const int32_t *s, *s_lo;
  int64_t k, nb;
} em_qc_act;

/* Decodes rows r0 .. r0+nr-1 (nr <= 16; the rest of the panel gets zero codes and scales) of W
 * for k blocks kb0 .. kb0+nkb-1 (of 32) into blk[0 .. nkb-1]. Portable: quant_pack.c. */
void em_qc_pack(const em_qc_format *f, const uint8_t *w, int64_t row_bytes, int64_t r0, int nr,
                int64_t kb0, int64_t nkb, em_qc_block *blk);
/* The same with AVX-512 gathers for the ggml formats; returns 0 when it does not
 * handle f. */
int em_qc_pack_vnni(const em_qc_format *f, const uint8_t *w, int64_t row_bytes, int64_t r0,
                    int nr, int64_t kb0, int64_t nkb, em_qc_block *blk);

/* Activation rows 0 .. m-1 (m <= 4) against all n weight rows for the ggml formats, weight rows
 * read in place (quant_matvec_vnni.c): 1 when done, 0 when it does not handle the call, -1 out
 * of memory. */
int em_qc_matvec_vnni(const em_qc_format *f, const em_qc_act *a, int64_t m, const uint8_t *w,
                      int64_t n, float *out, int threads);

/* acc[i][c] += the products of activation rows i0 .. i0+ni-1 with the packed blocks (activation
 * blocks kb0 .. kb0+nkb-1); acc holds ni rows of 16 floats. */
typedef void (*em_qc_kernel)(const em_qc_format *f, const em_qc_act *a, int64_t i0, int64_t ni,
                             int64_t kb0, int64_t nkb, const em_qc_block *blk, float *acc);
void em_qc_kernel_portable(const em_qc_format *f, const em_qc_act *a, int64_t i0, int64_t ni,
                           int64_t kb0, int64_t nkb, const em_qc_block *blk, float *acc);
void em_qc_kernel_avx2(const em_qc_format *f, const em_qc_act *a, int64_t i0, int64_t ni,
                       int64_t kb0, int64_t nkb, const em_qc_block *blk, float *acc);
void em_qc_kernel_vnni(const em_qc_format *f, const em_qc_act *a, int64_t i0, int64_t ni,
                       int64_t kb0, int64_t nkb, const em_qc_block *blk, float *acc);

#endif
