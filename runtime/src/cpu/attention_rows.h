/*
 * attention_rows.h: the float32 row loops of the attention kernel (cpu/attention.c) on AVX-512:
 * the online softmax's step and the backward's probabilities. They are most of the kernel's
 * time outside the products: a row's max and sum do not vectorize in plain C (a float
 * reduction's order is fixed without -ffast-math) and expf is a call per score. Here both run
 * 16 scores at a time, exp as a degree-6 polynomial after range reduction (Cephes' expf,
 * within 2 ulp). Compiled with a target attribute and chosen at run time, like sgemm.c; the
 * callers keep plain C loops for other CPUs.
 */
#ifndef EMBER_CPU_ATTENTION_ROWS_H
#define EMBER_CPU_ATTENTION_ROWS_H

#include <stdbool.h>
#include <stdint.h>

bool em_attn_rows_available(void);
/* S [br, bc] (rows bc apart): per row, m' = max(m, max S), alpha = exp(m - m'),
 * S <- exp(S - m'), l <- l * alpha + rowsum(S), m <- m'; a row still at -inf keeps S = 0 and
 * alpha = 1. */
void em_attn_online_f32(float *S, int64_t br, int64_t bc, double *m, double *l, double *alpha);
/* S <- exp(S - lse) per row; 0 for a row whose lse is -inf. */
void em_attn_probs_f32(float *S, int64_t br, int64_t bc, const double *lse);

#endif
