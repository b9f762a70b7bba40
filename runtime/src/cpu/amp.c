/*
 * amp.c: the CPU amp_unscale kernel (ops/amp.c defines em_amp_unscale_): each gradient is
 * multiplied by inv_scale in place and checked for inf / NaN in the same pass.
 *
 * The arithmetic follows PyTorch's _amp_foreach_non_finite_check_and_unscale_: inv_scale is a
 * float32 value, 16-bit and float32 elements are multiplied in float, float64 ones in double;
 * the check looks at each element as it was read (before the multiply), and an inv_scale of
 * exactly 1 leaves the values untouched. The iterator splits large gradients across threads;
 * they all may set the shared verdict, so it is written atomically (any order gives 1).
 */
#include "cpu.h"

typedef struct amp_ctx {
  float inv;
  int found; /* set to 1 (atomically) by any run that read a non-finite element */
} amp_ctx;

static inline bool finite_f(float v) { return isfinite(v); }
static inline bool finite_d(double v) { return isfinite(v); }

static void note_found(amp_ctx *c) { __atomic_store_n(&c->found, 1, __ATOMIC_RELAXED); }

static void unscale_f32(char **ptrs, const int64_t *strides, int64_t n, void *arg) {
  amp_ctx *c = arg;
  char *p = ptrs[0];
  bool bad = false;
  for (int64_t i = 0; i < n; i++, p += strides[0]) {
    float v = *(float *)p;
    bad |= !finite_f(v);
    *(float *)p = v * c->inv;
  }
  if (bad) note_found(c);
}

static void unscale_f64(char **ptrs, const int64_t *strides, int64_t n, void *arg) {
  amp_ctx *c = arg;
  const double inv = (double)c->inv;
  char *p = ptrs[0];
  bool bad = false;
  for (int64_t i = 0; i < n; i++, p += strides[0]) {
    double v = *(double *)p;
    bad |= !finite_d(v);
    *(double *)p = v * inv;
  }
  if (bad) note_found(c);
}

/* 16-bit: widened to float (exact), multiplied, rounded back to nearest even. */
#define UNSCALE16(S, TO, FROM)                                                                 \
  static void unscale_##S(char **ptrs, const int64_t *strides, int64_t n, void *arg) {        \
    amp_ctx *c = arg;                                                                         \
    char *p = ptrs[0];                                                                        \
    bool bad = false;                                                                         \
    for (int64_t i = 0; i < n; i++, p += strides[0]) {                                        \
      float v = TO(*(uint16_t *)p);                                                           \
      bad |= !finite_f(v);                                                                    \
      *(uint16_t *)p = FROM(v * c->inv);                                                      \
    }                                                                                         \
    if (bad) note_found(c);                                                                   \
  }
UNSCALE16(f16, em_half_to_float, em_float_to_half)
UNSCALE16(bf16, em_bf16_to_float, em_float_to_bf16)

/* Check only (inv_scale == 1): nothing is written. */
#define CHECK_ONLY(S, LD)                                                                      \
  static void check_##S(char **ptrs, const int64_t *strides, int64_t n, void *arg) {          \
    char *p = ptrs[0];                                                                        \
    bool bad = false;                                                                         \
    for (int64_t i = 0; i < n; i++, p += strides[0]) bad |= !finite_d(LD(p));                 \
    if (bad) note_found(arg);                                                                 \
  }
CHECK_ONLY(f32, em_ld_f32)
CHECK_ONLY(f64, em_ld_f64)
CHECK_ONLY(f16, em_ld_f16)
CHECK_ONLY(bf16, em_ld_bf16)

int em_cpu_amp_unscale(em_tensor *const *grads, int n, em_tensor *found_inf, double inv_scale) {
  amp_ctx c = {.inv = (float)inv_scale, .found = 0};
  const bool one = c.inv == 1.0f;
  for (int i = 0; i < n; i++) {
    em_cpu_loop loop;
    switch (grads[i]->dtype_id) {
    case EM_FLOAT32: loop = one ? check_f32 : unscale_f32; break;
    case EM_FLOAT64: loop = one ? check_f64 : unscale_f64; break;
    case EM_FLOAT16: loop = one ? check_f16 : unscale_f16; break;
    case EM_BFLOAT16: loop = one ? check_bf16 : unscale_bf16; break;
    default:
      return em_error("amp_unscale_: expected floating-point gradients, got %s",
                      em_dtype_name((em_dtype)grads[i]->dtype_id));
    }
    const em_tensor *ts[1] = {grads[i]};
    em_cpu_for_each(1, ts, loop, &c);
  }
  if (c.found) *(float *)em_cpu_ptr(found_inf) = 1.0f;
  return 0;
}
