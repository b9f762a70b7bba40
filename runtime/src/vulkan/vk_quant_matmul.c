/*
 * vk_quant_matmul.c: the Linear of a float32 activation with a quantized weight on a Vulkan
 * device, out[m, n] = sum_k x[m, k] W[n, k], W held as blocks (every format of em_quant_format)
 * and never expanded into memory.
 *
 * x and out may also be float16 or bfloat16: x is widened into a float32 copy and the float32
 * result rounded into out (through_float32); the kernels themselves read and write float32.
 *
 * Two kernels, chosen by the number of activation rows:
 *   m <= 8  quant_matvec: token generation is bound by reading W once, so a workgroup streams a
 *           few weight rows (coalesced, 32 lanes per row) and applies each decoded weight to
 *           every activation row (kernels/quant_matvec.glsl);
 *   m > 8   quant_mm: a tiled product that dequantizes the weight's slice into shared memory as
 *           it stages it, float32 accumulation (kernels/quant_mm.comp); on a device whose
 *           float16 matmul runs on tensor cores, quant_mm_coop (kernels/coopmat/): the same
 *           staging in float16, products on subgroup-scope cooperative matrices, float32
 *           accumulation; EMBER_VK_QUANT_COOP=0 keeps quant_mm there.
 * The matrix-vector kernel takes up to 64 rows, 8 per pass (EMBER_VK_QUANT_MATVEC_MAX moves
 * that limit).
 * For Q8_0, Q4_0, Q4_K and Q6_K at m <= 8, where the build has GL_EXT_integer_dot_product
 * (EMBER_VK_GLSL_INT_DOT) and the device enabled shaderIntegerDotProduct (em_vk_quant_setup), the
 * activation rows are
 * first quantized to int8 per 32 (quant_act.comp) and the matrix-vector kernel multiplies packed
 * int8 codes (intdot/quant_matvec_dot.comp), as the CPU kernel does; its results then carry the
 * activation's int8 rounding (about 0.4% of a block's largest |x|), the plain kernel's only
 * float32 rounding. EMBER_VK_QUANT_DOT (read on every call) picks: unset or "auto" the integer
 * path where it exists, "0" the plain kernel always, "1" the integer path or an error (tests).
 */
#include <stdlib.h>
#include <string.h>

#include "vk.h"
#include "vk_matmul.h"
#include "vk_quant.h"
#include "../quant/quant.h"

enum { MATVEC_ROWS = 8, MATVEC_RPW = 4, MM_TILE = 64 };
/* Up to 64 rows the matrix-vector kernel, in 8-row passes, beat the tiles on an H200: at m = 64,
 * 4096 x 4096, 0.13 ms against 0.34 ms for the float16 tensor-core tiles and 0.44 ms for the
 * float32 ones (docs/performance.md). */
enum { MATVEC_MAX_DEFAULT = 64 };

/* Up to how many rows of x the matrix-vector kernel runs (it walks x in chunks of 8, one pass
 * over the weight each, which the cache may serve): 64, or EMBER_VK_QUANT_MATVEC_MAX (read on
 * every call), so a measurement can compare it with the tiled kernels at larger batches. */
static int64_t matvec_max(void) {
  const char *env = getenv("EMBER_VK_QUANT_MATVEC_MAX");
  long v = env && env[0] ? strtol(env, NULL, 10) : MATVEC_MAX_DEFAULT;
  return v >= 0 ? (int64_t)v : MATVEC_MAX_DEFAULT;
}

static bool dot_enabled[EM_MAX_DEVICES]; /* by Ember device id: shaderIntegerDotProduct enabled */

typedef struct qmm_push { uint32_t m, n, k, row_bytes, x_off, w_off, o_off; } qmm_push;
typedef struct act_push { uint32_t m, k, x_off; } act_push;

static bool has_ext(const VkExtensionProperties *e, uint32_t n, const char *name) {
  for (uint32_t i = 0; i < n; i++)
    if (strcmp(e[i].extensionName, name) == 0) return true;
  return false;
}

const void *em_vk_quant_setup(vk_device *D, vk_quant_setup *s, const void *chain,
                              const char **exts, uint32_t *next) {
  if (D->id >= 0 && D->id < EM_MAX_DEVICES) dot_enabled[D->id] = false;
#ifdef EMBER_VK_GLSL_INT_DOT
  uint32_t n = 0;
  vkg.vkEnumerateDeviceExtensionProperties(D->phys, NULL, &n, NULL);
  VkExtensionProperties *e = calloc(n ? n : 1, sizeof *e);
  if (e == NULL) return chain;
  vkg.vkEnumerateDeviceExtensionProperties(D->phys, NULL, &n, e);
  bool ext = has_ext(e, n, "VK_KHR_shader_integer_dot_product");
  free(e);
  if (!ext) return chain;
  memset(s, 0, sizeof *s);
  s->dot.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES;
  VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                  .pNext = &s->dot};
  vkg.vkGetPhysicalDeviceFeatures2(D->phys, &f2);
  if (!s->dot.shaderIntegerDotProduct) return chain;
  exts[(*next)++] = "VK_KHR_shader_integer_dot_product";
  s->dot.pNext = (void *)chain;
  if (D->id >= 0 && D->id < EM_MAX_DEVICES) dot_enabled[D->id] = true;
  return &s->dot;
#else
  (void)s; (void)exts; (void)next; (void)has_ext;
  return chain;
#endif
}

/* Whether this call takes the integer-dot kernel: 1 yes, 0 no, -1 error (forced but missing). */
static int use_dot(vk_device *D, int format, int64_t m) {
  const char *env = getenv("EMBER_VK_QUANT_DOT");
  bool off = env && strcmp(env, "0") == 0, force = env && strcmp(env, "1") == 0;
  bool fmt = format == EM_QUANT_Q8_0 || format == EM_QUANT_Q4_0 || format == EM_QUANT_Q4_K ||
             format == EM_QUANT_Q6_K;
  if (off || !fmt || m > matvec_max()) return 0;
  bool have = D->id >= 0 && D->id < EM_MAX_DEVICES && dot_enabled[D->id];
  if (have) return 1;
  if (!force) return 0;
  return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "quant_linear: the integer-dot kernel is not "
                           "implemented on %s (EMBER_VK_QUANT_DOT=1; it needs %s)", D->name,
#ifdef EMBER_VK_GLSL_INT_DOT
                           "the device's shaderIntegerDotProduct"
#else
                           "a glslang with GL_EXT_integer_dot_product at build time"
#endif
  );
}

static int fail_size(vk_device *D) {
  return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "quant_linear: not implemented on %s for "
                           "tensors of 2^32 or more elements or bytes", D->name);
}

/* x (rows of k floats, vec4-aligned) -> int8 codes [m, k / 4] words, and [m, k / 32, 2] floats:
 * each 32 values' scale and scale times code sum. */
static int quantize_act(vk_device *D, const em_tensor *x, int64_t m, int64_t k, em_tensor **xq,
                        em_tensor **xd) {
  int64_t qs = m * (k / 4), ds = m * (k / 32) * 2;
  *xq = em_empty(1, &qs, EM_INT32, x->device_id);
  *xd = *xq ? em_empty(1, &ds, EM_FLOAT32, x->device_id) : NULL;
  if (*xd == NULL) return -1;
  act_push p = {(uint32_t)m, (uint32_t)k, (uint32_t)(x->offset / 4)};
  uint64_t groups = ((uint64_t)(m * (k / 32)) + 63) / 64;
  if (groups > D->props.limits.maxComputeWorkGroupCount[0]) return fail_size(D);
  vk_launch L = {
      .module = "quant_act",
      .push = &p,
      .push_size = sizeof p,
      .spec = {~0u, ~0u, ~0u, ~0u},
      .ops = {x, *xq, *xd},
      .writes = 6u,
      .groups = {(uint32_t)groups, 1, 1},
  };
  return em_vk_launch_locked(&L);
}

/* The batched kernel: on tensor cores where the float16 matmul runs on subgroup-scope
 * cooperative matrices (vk_matmul_coop.c decides, EMBER_VK_COOPMAT honoured) unless
 * EMBER_VK_QUANT_COOP=0 (read on every call), else the float32 tile kernel. */
static const char *mm_module(vk_device *D) {
  const char *env = getenv("EMBER_VK_QUANT_COOP");
  if (env && strcmp(env, "0") == 0) return "quant_mm";
  switch (em_vk_coop_subgroup_flavor(D)) {
#ifdef EMBER_VK_COOPMAT_KHR
  case 2: return "quant_mm_coop_KHR";
#endif
#ifdef EMBER_VK_COOPMAT_NV
  case 1: return "quant_mm_coop_NV";
#endif
  default: return "quant_mm";
  }
}

static int launch(vk_device *D, const em_tensor *x, const em_tensor *blocks, int format,
                  int64_t group, int symmetric, em_tensor *out, int64_t row_bytes) {
  int64_t m = x->sizes[0], k = x->sizes[1], n = out->sizes[1];
  int dot = use_dot(D, format, m);
  if (dot < 0) return -1;
  qmm_push p = {(uint32_t)m, (uint32_t)n, (uint32_t)k, (uint32_t)row_bytes,
                (uint32_t)(m <= matvec_max() ? x->offset / 4 : x->offset),
                (uint32_t)blocks->offset, (uint32_t)out->offset};
  uint32_t max_x = D->props.limits.maxComputeWorkGroupCount[0];
  uint32_t spec[4] = {(uint32_t)format, group > 0 ? (uint32_t)group : 32u, symmetric ? 1u : 0u, ~0u};
  if (m > matvec_max()) {
    uint64_t gx = ((uint64_t)n + MM_TILE - 1) / MM_TILE, gy = ((uint64_t)m + MM_TILE - 1) / MM_TILE;
    if (gx > max_x || gy > D->props.limits.maxComputeWorkGroupCount[1]) return fail_size(D);
    vk_launch L = {.module = mm_module(D), .push = &p, .push_size = sizeof p,
                   .spec = {spec[0], spec[1], spec[2], spec[3]}, .ops = {x, blocks, out},
                   .writes = 4u, .groups = {(uint32_t)gx, (uint32_t)gy, 1}};
    return em_vk_launch_locked(&L);
  }
  uint64_t gx = ((uint64_t)n + MATVEC_RPW - 1) / MATVEC_RPW; /* the kernel strides past max_x */
  if (em_vk_test_hooks() & VK_TEST_SMALL_GRID) max_x = 2; /* exercises that loop */
  uint64_t gy = ((uint64_t)m + MATVEC_ROWS - 1) / MATVEC_ROWS; /* chunks of 8 rows of x */
  if (gy > D->props.limits.maxComputeWorkGroupCount[1]) return fail_size(D);
  vk_launch L = {.module = "quant_matvec", .push = &p, .push_size = sizeof p,
                 .spec = {spec[0], spec[1], spec[2], spec[3]}, .ops = {x, blocks, out},
                 .writes = 4u, .groups = {(uint32_t)(gx < max_x ? gx : max_x), (uint32_t)gy, 1}};
  if (!dot) return em_vk_launch_locked(&L);
#ifdef EMBER_VK_GLSL_INT_DOT
  em_tensor *xq = NULL, *xd = NULL;
  int rc = quantize_act(D, x, m, k, &xq, &xd);
  if (rc == 0) {
    p.x_off = 0;
    L.module = "quant_matvec_dot";
    L.ops[0] = xq;
    L.ops[3] = xd;
    rc = em_vk_launch_locked(&L);
  }
  em_release(xq);
  em_release(xd);
  return rc;
#else
  (void)quantize_act;
  return em_error("quant_linear: internal error: no integer-dot kernel in this build");
#endif
}

static bool float_dtype(int d) { return d == EM_FLOAT32 || d == EM_FLOAT16 || d == EM_BFLOAT16; }

/* 16-bit x or out: the kernels read and write float32, so x is widened into a float32 copy and
 * the float32 result rounded into out (the arithmetic is the float32 path's either way). */
static int through_float32(const em_tensor *x, const em_tensor *blocks, int format, int64_t group,
                           int symmetric, em_tensor *out) {
  em_tensor *xf = NULL, *of = NULL;
  int rc = -1;
  if (x->dtype_id != EM_FLOAT32) {
    if ((xf = em_empty(2, x->sizes, EM_FLOAT32, x->device_id)) == NULL || em_vk_copy(xf, x) != 0)
      goto done;
  }
  if (out->dtype_id != EM_FLOAT32 &&
      (of = em_empty(2, out->sizes, EM_FLOAT32, out->device_id)) == NULL)
    goto done;
  rc = em_vk_quant_linear(xf ? xf : x, blocks, format, group, symmetric, of ? of : out);
  if (rc == 0 && of) rc = em_vk_copy(out, of);
done:
  em_release(xf);
  em_release(of);
  return rc;
}

int em_vk_quant_linear(const em_tensor *x, const em_tensor *blocks, int format, int64_t group,
                       int symmetric, em_tensor *out) {
  EM_NOT_NULL(-1, x);
  EM_NOT_NULL(-1, blocks);
  EM_NOT_NULL(-1, out);
  vk_device *D = em_vk_device(x->device_id);
  if (D == NULL || blocks->device_id != x->device_id || out->device_id != x->device_id)
    return em_error("quant_linear: expected x, the blocks and out on one Vulkan device, got "
                    "devices %d, %d and %d", x->device_id, blocks->device_id, out->device_id);
  int64_t be, bb;
  if (format < EM_QUANT_Q8_0 || format > EM_QUANT_AFFINE4)
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "quant_linear: not implemented on %s for "
                             "format %d", D->name, format);
  if (em_quant_block_size(format, group, symmetric, &be, &bb) != 0) return -1;
  if (!float_dtype(x->dtype_id) || !float_dtype(out->dtype_id))
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "quant_linear: not implemented on %s for "
                             "%s activations (float32, float16 or bfloat16 x and out)", D->name,
                             em_dtype_name((em_dtype)(!float_dtype(x->dtype_id) ? x->dtype_id
                                                                                 : out->dtype_id)));
  if (x->ndim != 2 || out->ndim != 2 || !em_is_contiguous(x) || !em_is_contiguous(out) ||
      blocks->dtype_id != EM_UINT8 || !em_is_contiguous(blocks))
    return em_error("quant_linear: expected contiguous x [M, K] and out [M, N], and "
                    "contiguous uint8 blocks");
  if (x->dtype_id != EM_FLOAT32 || out->dtype_id != EM_FLOAT32)
    return through_float32(x, blocks, format, group, symmetric, out);
  int64_t m = x->sizes[0], k = x->sizes[1], n = out->sizes[1];
  if (out->sizes[0] != m || k % be != 0 || em_numel(blocks) != n * (k / be) * bb)
    return em_error("quant_linear: expected x [M, K] (K whole blocks of %lld), out [M, N] and "
                    "N * K / %lld blocks of %lld bytes; got x [%lld, %lld], out [%lld, %lld], "
                    "%lld bytes", (long long)be, (long long)be, (long long)bb, (long long)m,
                    (long long)k, (long long)out->sizes[0], (long long)n,
                    (long long)em_numel(blocks));
  if (m == 0 || n == 0) return 0;
  if (k == 0) return em_vk_fill(out, 0.0);
  if (em_numel(x) + x->offset > (int64_t)UINT32_MAX || em_numel(out) + out->offset > (int64_t)UINT32_MAX ||
      em_numel(blocks) + blocks->offset > (int64_t)UINT32_MAX - 8)
    return fail_size(D);
  /* the matrix-vector kernels read x as vec4: a view starting off a vec4 goes through a copy */
  if (m <= matvec_max() && x->offset % 4 != 0) {
    em_tensor *tmp = em_empty(2, x->sizes, EM_FLOAT32, x->device_id);
    int rc = tmp ? em_vk_copy(tmp, x) : -1;
    if (rc == 0) rc = launch(D, tmp, blocks, format, group, symmetric, out, n ? em_numel(blocks) / n : 0);
    em_release(tmp);
    return rc;
  }
  return launch(D, x, blocks, format, group, symmetric, out, em_numel(blocks) / n);
}
