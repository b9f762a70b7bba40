/*
 * vk_random.c: the Vulkan `random` slot (kernels/random.comp). The same Philox-4x32-10 stream
 * as the CPU kernel (runtime/src/random.h has the layout), so one seed gives the same numbers
 * on both devices: bit-identical for uniform, bernoulli and integers, within a few ulp for
 * normal values (Box-Muller's log, sin and cos are computed differently).
 *
 * The host turns the op's (a, b) into what the kernel needs without floating-point work of
 * its own: the uniform cap (em_random_uniform_cap, shared with the CPU), Bernoulli's integer
 * threshold, the integer range. Kind and dtype are specialization constants: one pipeline per
 * (kind, dtype) with no branches on either in the hot loop.
 */
#include <math.h>
#include <stdlib.h>

#include "../random.h"
#include "vk.h"

/* kernels/random.comp's push constants. */
typedef struct random_push {
  uint32_t n, nblocks, base, seed_lo, seed_hi, ctr_lo, ctr_hi;
  uint32_t i0, i1, i2, i3;
  float fa, fr, fcap;
  double a, r, cap; /* variant D only */
} random_push;
_Static_assert(sizeof(random_push) == 80, "random_push must match random.comp's layout");

enum { WG = 256 };

/* Bernoulli keeps word x when x * 2^-32 < p, i.e. x < p 2^32 (exact: a power-of-two scale):
 * for integer x that is x < ceil(p 2^32). */
static uint64_t bernoulli_threshold(double p) {
  double t = ceil(p * 4294967296.0);
  return t <= 0 ? 0 : t >= 4294967296.0 ? UINT64_C(4294967296) : (uint64_t)t;
}

int em_vk_random(em_tensor *out, em_random_kind kind, uint64_t seed, uint64_t offset, double a,
                 double b) {
  vk_device *D = em_vk_device(out->device_id);
  em_dtype dt = (em_dtype)out->dtype_id;
  if (!em_is_contiguous(out)) return em_error("random: expected a contiguous output");
  bool real = kind == EM_RANDOM_UNIFORM || kind == EM_RANDOM_NORMAL;
  if (real && !em_dtypes[dt].is_float)
    return em_error("random: uniform and normal values need a floating dtype, got %s",
                    em_dtype_name(dt));
  /* EMBER_VK_RANDOM_FLOAT=1 takes the float path of a device without float64 (for tests). */
  const char *force_float = getenv("EMBER_VK_RANDOM_FLOAT");
  bool f64 = (D->features & EM_FEATURE_FLOAT64) != 0 && !(force_float && *force_float == '1');
  if (real && dt == EM_FLOAT64 && !f64)
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED,
                             "random: not implemented on %s for float64 uniform or normal values "
                             "(the device has no float64)", D->name);
  int64_t n = em_numel(out);
  uint64_t nblocks = em_random_blocks(kind, dt, n);
  if (n == 0) return 0;
  /* 32-bit element and word indices in the kernel */
  if (out->offset + n > INT32_MAX / 2 || nblocks > UINT32_MAX)
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED,
                             "random: not implemented on %s for more than %d elements (got %lld)",
                             D->name, INT32_MAX / 2, (long long)(out->offset + n));
  random_push p = {.n = (uint32_t)n, .nblocks = (uint32_t)nblocks, .base = (uint32_t)out->offset,
                   .seed_lo = (uint32_t)seed, .seed_hi = (uint32_t)(seed >> 32),
                   .ctr_lo = (uint32_t)offset, .ctr_hi = (uint32_t)(offset >> 32)};
  if (kind == EM_RANDOM_BERNOULLI) {
    uint64_t t = bernoulli_threshold(a);
    p.i0 = (uint32_t)t, p.i1 = (uint32_t)(t >> 32);
  } else if (kind == EM_RANDOM_INT) {
    /* the op checked |a|, |b| <= 2^53: exact integers */
    int64_t low = (int64_t)a;
    uint64_t range = (uint64_t)((int64_t)b - low);
    p.i0 = (uint32_t)(uint64_t)low, p.i1 = (uint32_t)((uint64_t)low >> 32);
    p.i2 = (uint32_t)range, p.i3 = (uint32_t)(range >> 32);
  } else {
    p.a = a;
    p.r = kind == EM_RANDOM_UNIFORM ? b - a : b; /* the CPU's (b - a), computed the same way */
    p.cap = kind == EM_RANDOM_UNIFORM ? em_random_uniform_cap(dt, a, b) : 0;
    p.fa = (float)p.a, p.fr = (float)p.r, p.fcap = (float)p.cap;
  }
  uint64_t groups = (nblocks + WG - 1) / WG;
  uint32_t max_groups = D->props.limits.maxComputeWorkGroupCount[0];
  vk_launch L = {
      .module = f64 ? "random_D" : "random_F",
      .push = &p,
      .push_size = f64 ? (uint32_t)sizeof p : (uint32_t)offsetof(random_push, a),
      .spec = {(uint32_t)kind, (uint32_t)dt, ~0u, ~0u},
      .ops = {out},
      .writes = 1u,
      .groups = {(uint32_t)(groups < max_groups ? groups : max_groups), 1, 1},
  };
  return em_vk_launch_locked(&L);
}
