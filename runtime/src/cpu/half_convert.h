/*
 * half_convert.h: bulk float16/bfloat16 <-> float32 conversion of contiguous runs, the inner
 * step of every 16-bit CPU kernel that computes in float32 (casts, elementwise, reductions).
 * Results are bit-identical to em_half_to_float / em_float_to_half / em_float_to_bf16
 * (round to nearest even; a NaN stays a quiet NaN of its sign).
 */
#ifndef EMBER_CPU_HALF_CONVERT_H
#define EMBER_CPU_HALF_CONVERT_H

#include <stdint.h>

void em_cvt_f16_to_f32(float *dst, const uint16_t *src, int64_t n);
void em_cvt_f32_to_f16(uint16_t *dst, const float *src, int64_t n);
void em_cvt_bf16_to_f32(float *dst, const uint16_t *src, int64_t n);
void em_cvt_f32_to_bf16(uint16_t *dst, const float *src, int64_t n);

#endif
