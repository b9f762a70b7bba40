/*
 * attention_rows.h: the float32 row loops of the attention kernel (cpu/attention.c): the
 * online softmax's step and the backward's probabilities. Outside the tile products they are
 * most of the kernel's time, and in plain C they do not vectorize: a float reduction's order
 * is fixed without -ffast-math, and expf is a call per score. So each comes twice here:
 *  - on AVX-512 (simd), 16 scores at a time, compiled with a target attribute and chosen at run
 *    time like sgemm.c;
 *  - portable, written so that the compiler vectorizes it for the baseline instruction set:
 *    eight partial maxima and sums, and exp without a call.
 * Both compute exp as Cephes' expf: x = n ln2 + r with |r| <= ln2 / 2, a degree-6 polynomial
 * for e^r, times 2^n (within 1 ulp of e^x over [-87, 0]; smaller results may become 0, and
 * -inf gives 0).
 */
#ifndef EMBER_CPU_ATTENTION_ROWS_H
#define EMBER_CPU_ATTENTION_ROWS_H

#include <stdbool.h>
#include <stdint.h>

/* Whether the AVX-512 loops can run here. */
bool em_attn_rows_simd(void);
/* S [br, bc] (rows bc apart): per row, m' = max(m, max S), alpha = exp(m - m'),
 * S <- exp(S - m'), l <- l * alpha + rowsum(S), m <- m'; a row still at -inf keeps S = 0 and
 * alpha = 1. */
void em_attn_online_f32(bool simd, float *S, int64_t br, int64_t bc, double *m, double *l,
                        double *alpha);
/* S <- exp(S - lse) per row; 0 for a row whose lse is -inf. */
void em_attn_probs_f32(bool simd, float *S, int64_t br, int64_t bc, const double *lse);

#endif
