/*
 * half_convert.c: bulk 16-bit float conversions (half_convert.h).
 *
 * Why a file of its own: a CPU step of a bfloat16 model spent a fifth of its time converting
 * one element per call through the scalar functions of dtype.c (a call through the PLT each).
 * Here bfloat16's loops are branch-free integer arithmetic that GCC vectorizes, built for
 * AVX-512, AVX2 and the baseline (target_clones picks one when the library loads); float16
 * uses the F16C instructions where the CPU has them, else a branch-free decode and the scalar
 * encode. Each function gives exactly the
 * bits of its scalar counterpart in dtype.c; tests/c/test_core.c checks every 16-bit pattern.
 */
#include "half_convert.h"

#include <stdlib.h>
#include <string.h>

#include "../internal.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define EM_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#define EM_HAVE_F16C_PATH 1
#else
#define EM_CLONES
#define EM_HAVE_F16C_PATH 0
#endif

static inline uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static inline float bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* cond ? a : b as masks: GCC keeps a ?: whose operands it sank into branches as control
 * flow, which stops vectorization of the decode. */
static inline uint32_t pick(int cond, uint32_t a, uint32_t b) {
  uint32_t mask = 0u - (uint32_t)(cond != 0);
  return (a & mask) | (b & ~mask);
}

/* ---- bfloat16: the upper half of a float32 ---- */

/* The clones are static, behind plain entry points: GCC gives a global target_clones
 * function's dispatcher (an ifunc) default visibility whatever -fvisibility says, which
 * would export these internals from libember.so. */
EM_CLONES static void bf16_to_f32(float *dst, const uint16_t *src, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = bits_f32((uint32_t)src[i] << 16);
}

EM_CLONES static void f32_to_bf16(uint16_t *dst, const float *src, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    uint32_t u = f32_bits(src[i]);
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t quiet = (u >> 16) | 0x40u;
    dst[i] = (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
  }
}

void em_cvt_bf16_to_f32(float *dst, const uint16_t *src, int64_t n) { bf16_to_f32(dst, src, n); }

void em_cvt_f32_to_bf16(uint16_t *dst, const float *src, int64_t n) { f32_to_bf16(dst, src, n); }

/* ---- float16 ---- */

/* Branch-free float16 -> float32: a normal number is rebiased by an integer add, a subnormal
 * is its integer mantissa times 2^-24 (exact, and no float denormal is involved, so the result
 * does not depend on the FPU's flush-to-zero modes), inf/NaN keep their payload. */
static inline float half_to_float_bits(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t rest = (uint32_t)(h & 0x7fffu) << 13;
  uint32_t normal = rest + ((127u - 15u) << 23);
  uint32_t sub = f32_bits((float)(h & 0x3ffu) * 0x1p-24f);
  uint32_t m = pick((h & 0x7c00u) == 0, sub, normal);
  m = pick((h & 0x7c00u) == 0x7c00u, 0x7f800000u | rest, m);
  return bits_f32(sign | m);
}

#if EM_HAVE_F16C_PATH
/* Whether to use F16C: the CPU has it, and EMBER_CPU_F16C=0 does not turn it off (the tests
 * run the software path that way). Read once. */
static int use_f16c(void) {
  static int use = -1; /* relaxed atomics: threads may ask at once, all get the same answer */
  int u = __atomic_load_n(&use, __ATOMIC_RELAXED);
  if (u < 0) {
    const char *env = getenv("EMBER_CPU_F16C");
    u = __builtin_cpu_supports("f16c") && !(env && strcmp(env, "0") == 0);
    __atomic_store_n(&use, u, __ATOMIC_RELAXED);
  }
  return u;
}

__attribute__((target("f16c,avx"))) static void f16_to_f32_f16c(float *dst, const uint16_t *src,
                                                                  int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
  for (; i < n; i++) dst[i] = half_to_float_bits(src[i]);
}
#endif

EM_CLONES static void f16_to_f32_soft(float *dst, const uint16_t *src, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = half_to_float_bits(src[i]);
}

void em_cvt_f16_to_f32(float *dst, const uint16_t *src, int64_t n) {
#if EM_HAVE_F16C_PATH
  /* F16C's conversion is exact and keeps NaN payloads, as the scalar version does */
  if (use_f16c()) {
    f16_to_f32_f16c(dst, src, n);
    return;
  }
#endif
  f16_to_f32_soft(dst, src, n);
}

#if EM_HAVE_F16C_PATH
/* VCVTPS2PH rounds to nearest even like the scalar rule; only NaNs differ (it keeps part of
 * the payload), so a block with a NaN gets the scalar rule's quiet NaN lane by lane. */
__attribute__((target("f16c,avx"))) static void f32_to_f16_f16c(uint16_t *dst, const float *src,
                                                                  int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 x = _mm256_loadu_ps(src + i);
    _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
    if (_mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q)) != 0)
      for (int j = 0; j < 8; j++) dst[i + j] = em_float_to_half(src[i + j]);
  }
  for (; i < n; i++) dst[i] = em_float_to_half(src[i]);
}
#endif

void em_cvt_f32_to_f16(uint16_t *dst, const float *src, int64_t n) {
#if EM_HAVE_F16C_PATH
  if (use_f16c()) {
    f32_to_f16_f16c(dst, src, n);
    return;
  }
#endif
  for (int64_t i = 0; i < n; i++) dst[i] = em_float_to_half(src[i]);
}
