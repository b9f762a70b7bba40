/*
 * vk_matmul_coop.c: float16 products on cooperative matrices (tensor cores):
 * kernels/coopmat/matmul_coop.comp, float16 inputs and output, float32 accumulation.
 *
 * Three things must hold, checked once when the device starts (em_vk_coop_setup):
 *  - the build compiled a flavor of the kernel: CMakeLists.txt tests whether glslangValidator
 *    knows GL_KHR_cooperative_matrix and GL_NV_cooperative_matrix and defines
 *    EMBER_VK_COOPMAT_KHR / EMBER_VK_COOPMAT_NV for the flavors it built (Debian 12's glslang
 *    12 has only the NV one);
 *  - the device offers that flavor's extension with the cooperativeMatrix, shaderFloat16 and
 *    vulkanMemoryModel features (the SPIR-V of both flavors declares the Vulkan memory model),
 *    and lists 16x16x16 float16 x float16 + float32 matrices at subgroup scope;
 *  - its subgroups are 32 wide (the kernel's 256 invocations are 8 subgroups).
 * Then those extensions and features are enabled on the device. bfloat16 would need
 * VK_KHR_shader_bfloat16, which this glslang cannot target: bfloat16 takes the tiled kernel.
 *
 * EMBER_VK_COOPMAT=0 turns the path off (read at device start and on every product, so a
 * script can compare both paths).
 */
#include <stdio.h>
#include <stdlib.h>

#include "vk_matmul.h"

enum { FLAVOR_NONE, FLAVOR_NV, FLAVOR_KHR };
static int flavor_of[EM_MAX_DEVICES]; /* by Ember device id, set when the device starts */

/* VK_KHR_cooperative_matrix's names (absent from Debian 12's headers). */
#define STYPE_COOP_FEATURES_KHR ((VkStructureType)1000506000)
#define STYPE_COOP_PROPERTIES_KHR ((VkStructureType)1000506001)
typedef struct coop_props_khr {
  VkStructureType sType;
  void *pNext;
  uint32_t MSize, NSize, KSize;
  int32_t AType, BType, CType, ResultType;
  VkBool32 saturatingAccumulation;
  int32_t scope;
} coop_props_khr;
typedef VkResult(VKAPI_PTR *coop_props_khr_fn)(VkPhysicalDevice, uint32_t *, coop_props_khr *);
/* VkComponentTypeKHR/NV and VkScopeKHR/NV share their values. */
enum { COMPONENT_F16 = 0, COMPONENT_F32 = 1, SCOPE_SUBGROUP = 3 };

static bool coop_disabled(void) {
  const char *v = getenv("EMBER_VK_COOPMAT");
  return v && strcmp(v, "0") == 0;
}

static bool shape_ok(uint32_t m, uint32_t n, uint32_t k, int32_t at, int32_t bt, int32_t ct,
                     int32_t rt, int32_t scope) {
  return m == 16 && n == 16 && k == 16 && at == COMPONENT_F16 && bt == COMPONENT_F16 &&
         ct == COMPONENT_F32 && rt == COMPONENT_F32 && scope == SCOPE_SUBGROUP;
}

/* Whether the device lists 16x16x16 float16 matrices with float32 accumulators. */
static bool has_shape(const vk_device *D, int flavor) {
  uint32_t n = 0;
  bool found = false;
  if (flavor == FLAVOR_NV) {
    PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV get =
        (PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV)vkg.vkGetInstanceProcAddr(
            em_vk_instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV");
    if (get == NULL || get(D->phys, &n, NULL) != VK_SUCCESS || n == 0) return false;
    VkCooperativeMatrixPropertiesNV *props = calloc(n, sizeof *props);
    if (props == NULL) return false;
    for (uint32_t i = 0; i < n; i++) props[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
    if (get(D->phys, &n, props) == VK_SUCCESS)
      for (uint32_t i = 0; i < n && !found; i++)
        found = shape_ok(props[i].MSize, props[i].NSize, props[i].KSize, props[i].AType,
                         props[i].BType, props[i].CType, props[i].DType, props[i].scope);
    free(props);
    return found;
  }
  coop_props_khr_fn get = (coop_props_khr_fn)vkg.vkGetInstanceProcAddr(
      em_vk_instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");
  if (get == NULL || get(D->phys, &n, NULL) != VK_SUCCESS || n == 0) return false;
  coop_props_khr *props = calloc(n, sizeof *props);
  if (props == NULL) return false;
  for (uint32_t i = 0; i < n; i++) props[i].sType = STYPE_COOP_PROPERTIES_KHR;
  if (get(D->phys, &n, props) == VK_SUCCESS)
    for (uint32_t i = 0; i < n && !found; i++)
      found = shape_ok(props[i].MSize, props[i].NSize, props[i].KSize, props[i].AType,
                       props[i].BType, props[i].CType, props[i].ResultType, props[i].scope);
  free(props);
  return found;
}

static bool has_ext(const VkExtensionProperties *e, uint32_t n, const char *name) {
  for (uint32_t i = 0; i < n; i++)
    if (strcmp(e[i].extensionName, name) == 0) return true;
  return false;
}

/* The flavor to use on D given its extensions: KHR first, when both were built. */
static int pick_flavor(const VkExtensionProperties *e, uint32_t n) {
#ifdef EMBER_VK_COOPMAT_KHR
  if (has_ext(e, n, "VK_KHR_cooperative_matrix")) return FLAVOR_KHR;
#endif
#ifdef EMBER_VK_COOPMAT_NV
  if (has_ext(e, n, "VK_NV_cooperative_matrix")) return FLAVOR_NV;
#endif
  (void)e, (void)n;
  return FLAVOR_NONE;
}

/* Chains s's structures for the flavor: the cooperative-matrix features, then float16, then
 * the memory model. */
static void *chain(vk_coop_setup *s, int flavor) {
  memset(s, 0, sizeof *s);
  s->vmm.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES;
  s->f16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES;
  s->f16.pNext = &s->vmm;
  if (flavor == FLAVOR_NV) {
    s->nv.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV;
    s->nv.pNext = &s->f16;
    return &s->nv;
  }
  s->khr.sType = STYPE_COOP_FEATURES_KHR;
  s->khr.pNext = &s->f16;
  return &s->khr;
}

const void *em_vk_coop_setup(vk_device *D, vk_coop_setup *s, const char **exts,
                             uint32_t *next) {
  flavor_of[D->id] = FLAVOR_NONE;
  if (coop_disabled() || !(D->features & EM_FEATURE_COOPERATIVE_MATRIX) ||
      D->subgroup_size != 32)
    return NULL;
  uint32_t n = 0;
  vkg.vkEnumerateDeviceExtensionProperties(D->phys, NULL, &n, NULL);
  VkExtensionProperties *e = calloc(n ? n : 1, sizeof *e);
  if (e == NULL) return NULL;
  vkg.vkEnumerateDeviceExtensionProperties(D->phys, NULL, &n, e);
  int flavor = pick_flavor(e, n);
  const void *enabled = NULL;
  if (flavor != FLAVOR_NONE) {
    /* what the device supports ... */
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                    .pNext = chain(s, flavor)};
    vkg.vkGetPhysicalDeviceFeatures2(D->phys, &f2);
    bool coop = flavor == FLAVOR_NV ? s->nv.cooperativeMatrix : s->khr.cooperativeMatrix;
    if (coop && s->f16.shaderFloat16 && s->vmm.vulkanMemoryModel && has_shape(D, flavor)) {
      /* ... and only what the kernel needs enabled */
      enabled = chain(s, flavor);
      s->nv.cooperativeMatrix = s->khr.cooperativeMatrix = VK_TRUE;
      s->f16.shaderFloat16 = VK_TRUE;
      s->vmm.vulkanMemoryModel = VK_TRUE;
      exts[(*next)++] = flavor == FLAVOR_NV ? "VK_NV_cooperative_matrix"
                                            : "VK_KHR_cooperative_matrix";
      /* core in Vulkan 1.2; named where the device lists them (1.1 devices need them) */
      if (has_ext(e, n, "VK_KHR_shader_float16_int8")) exts[(*next)++] = "VK_KHR_shader_float16_int8";
      if (has_ext(e, n, "VK_KHR_vulkan_memory_model")) exts[(*next)++] = "VK_KHR_vulkan_memory_model";
      flavor_of[D->id] = flavor;
    }
  }
  free(e);
  return enabled;
}

/* The one place that decides: float16, a device set up for it, not turned off, and a product
 * large enough for 128 x 128 tiles to pay. */
bool em_vk_coop_wanted(vk_device *D, const em_tensor *out, const em_tensor *a,
                       const em_tensor *b) {
  (void)b;
  if (out->dtype_id != EM_FLOAT16 || flavor_of[D->id] == FLAVOR_NONE || coop_disabled())
    return false;
  /* the kernel's shared memory: two 128 x 40 float16 slices and 8 16 x 16 float scratches */
  if (D->props.limits.maxComputeSharedMemorySize < 2 * 128 * 40 * 2 + 8 * 256 * 4) return false;
  return MM_ROWS(out) >= 64 && MM_COLS(out) >= 64 && MM_COLS(a) >= 32;
}

int em_vk_coop_gemm(vk_device *D, em_tensor *out, const em_tensor *a, const em_tensor *b,
                    double alpha, double beta) {
  int64_t B = em_gemm_batches(out), M = MM_ROWS(out), N = MM_COLS(out);
  mm_push p = {0};
  if (em_vk_mm_push_common(&p, out, a, b) != 0)
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "gemm: not implemented on %s for a "
                             "stride or offset beyond 2^31 elements", D->name);
  p.s.f[0] = (float)alpha;
  p.s.f[1] = (float)beta;
  /* chunks of 8 halves: one 128-bit load each when whole and aligned */
  uint32_t amode = em_vk_mm_layout(a, 8), bmode = em_vk_mm_layout(b, 8);
  bool pairs = N % 2 == 0 && out->offset % 2 == 0;
  vk_launch L = {
    .module = flavor_of[D->id] == FLAVOR_KHR ? "matmul_coop_KHR" : "matmul_coop_NV",
    .push = &p,
    .push_size = MM_PUSH_F32,
    .spec = {amode, bmode, pairs ? 2u : 0u, ~0u},
    .ops = {out, a, b},
    .writes = 1u,
  };
  return em_vk_mm_grid(D, &L, &p, B, M, N, 128);
}
