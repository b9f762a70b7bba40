/*
 * vk_matmul_coop.c: float16 (and bfloat16, below) products on tensor cores (cooperative
 * matrices), 16-bit inputs and output, float32 accumulation. Three kernels, best first:
 *  - "cm2": kernels/coopmat2/matmul_cm2.comp, workgroup-scope matrices with tensor addressing
 *    (VK_NV_cooperative_matrix2; the build has it when its glslang knows GL_NV_cooperative_matrix2,
 *    EMBER_VK_COOPMAT2);
 *  - "khr": kernels/coopmat/matmul_coop.comp built for GL_KHR_cooperative_matrix
 *    (EMBER_VK_COOPMAT_KHR), subgroup-scope 16x16x16 matrices staged in shared memory;
 *  - "nv": the same kernel built for GL_NV_cooperative_matrix (EMBER_VK_COOPMAT_NV), all Debian
 *    12's glslang 12 can compile.
 * Each needs the build to have compiled it and the device to offer its extension, 16x16x16
 * float16 x float16 + float32 matrices at subgroup scope (cm2: the workgroup-scope, flexible
 * dimensions and tensor addressing features, and Vulkan 1.3 for its SPIR-V 1.6), shaderFloat16,
 * storageBuffer16BitAccess, vulkanMemoryModel with its device scope (the SPIR-V uses both) and
 * 32-wide subgroups (NVIDIA's are always 32; the kernels assume it). em_vk_coop_setup checks this once when the
 * device starts and enables those extensions and features; anything else takes the tiled kernel
 * (vk_matmul.c), as every product does on lavapipe.
 *
 * EMBER_VK_COOPMAT selects (docs/devices.md): unset, "1" or "auto" the best kernel the device
 * has; "0" none (the tiled kernel); "cm2", "khr" or "nv" that kernel only (the tiled kernel where
 * it is missing). It is read on every product (so a script can compare kernels) and at device
 * start, where "nv" enables VK_NV_cooperative_matrix instead of the KHR extensions.
 * EMBER_VK_COOP_TILE and EMBER_VK_CM2_TILE force a tile configuration (for measurements).
 *
 * bfloat16 (bf16 inputs and output, float32 accumulation): the cm2 kernel's module rewritten by
 * tools/spirv_bf16.c at build time ("matmul_cm2_bf16", EMBER_VK_COOPMAT2_BF16; glslang 15.1 has
 * no GL_EXT_bfloat16, but the kernel's 16-bit floats only move, multiply on tensor cores and
 * convert to float32, which reads the same in either encoding). It runs where cm2 does and the
 * device has VK_KHR_shader_bfloat16 with shaderBFloat16Type and shaderBFloat16CooperativeMatrix,
 * and lists bf16 x bf16 + f32 = f32 at workgroup scope for 256 invocations among its flexible
 * shapes; EMBER_VK_COOPMAT=0, khr or nv leave bfloat16 to the tiled kernel.
 */
#include <stdio.h>
#include <stdlib.h>

#include "vk_matmul.h"

enum { FLAVOR_NONE, FLAVOR_NV, FLAVOR_KHR, FLAVOR_CM2 };
static const char *const flavor_names[] = {"none", "nv", "khr", "cm2"};
static uint32_t enabled_of[EM_MAX_DEVICES]; /* by Ember device id: bit f, flavor f enabled */
enum { BIT_CM2_BF16 = 1u << 8 };              /* ... and the bfloat16 cm2 kernel */

/* Names of VK_KHR_cooperative_matrix and VK_NV_cooperative_matrix2 (absent from Debian 12's
 * headers). */
#define STYPE_COOP_FEATURES_KHR ((VkStructureType)1000506000)
#define STYPE_COOP_PROPERTIES_KHR ((VkStructureType)1000506001)
#define STYPE_COOP2_FEATURES_NV ((VkStructureType)1000593000)
#define STYPE_COOP2_FLEX_PROPERTIES_NV ((VkStructureType)1000593001)
#define STYPE_COOP2_PROPERTIES_NV ((VkStructureType)1000593002)
#define STYPE_BF16_FEATURES_KHR ((VkStructureType)1000141000) /* VK_KHR_shader_bfloat16 */
typedef struct em_coop_props_khr {
  VkStructureType sType;
  void *pNext;
  uint32_t MSize, NSize, KSize;
  int32_t AType, BType, CType, ResultType;
  VkBool32 saturatingAccumulation;
  int32_t scope;
} em_coop_props_khr;
typedef struct em_coop2_props_nv {
  VkStructureType sType;
  void *pNext;
  uint32_t cooperativeMatrixWorkgroupScopeMaxWorkgroupSize;
  uint32_t cooperativeMatrixFlexibleDimensionsMaxDimension;
  uint32_t cooperativeMatrixWorkgroupScopeReservedSharedMemory;
} em_coop2_props_nv;
typedef struct em_coop2_flex_props_nv {
  VkStructureType sType;
  void *pNext;
  uint32_t MGranularity, NGranularity, KGranularity;
  int32_t AType, BType, CType, ResultType;
  VkBool32 saturatingAccumulation;
  int32_t scope;
  uint32_t workgroupInvocations;
} em_coop2_flex_props_nv;
typedef VkResult(VKAPI_PTR *coop_props_khr_fn)(VkPhysicalDevice, uint32_t *, em_coop_props_khr *);
typedef VkResult(VKAPI_PTR *coop2_flex_fn)(VkPhysicalDevice, uint32_t *, em_coop2_flex_props_nv *);
/* VkComponentTypeKHR/NV and VkScopeKHR/NV share their values. */
enum { COMPONENT_F16 = 0, COMPONENT_F32 = 1, SCOPE_WORKGROUP = 2, SCOPE_SUBGROUP = 3 };
#define COMPONENT_BF16 1000141000 /* VK_COMPONENT_TYPE_BFLOAT16_KHR */

/* The kernels' push constants (kernels/coopmat/matmul_coop.comp, kernels/coopmat2/matmul_cm2.comp):
 * two batch dimensions, flat z in [0, nb1 * nb2) read as (z / nb2, z % nb2), each operand with
 * its own stride per batch dimension (0: broadcast). */
typedef struct coop_push {
  uint32_t M, N, K, a_base, b_base, o_base;
  uint32_t a_ld, b_ld; /* the strides of the non-contiguous dimensions */
  uint32_t nb2;
  uint32_t a_sb1, a_sb2, b_sb1, b_sb2, o_sb;
  uint32_t m0, n0, batch0;
  float alpha, beta;
  uint32_t c_base;             /* matmul_cm2's c (MODES bit 7): offset and batch, row, */
  int32_t c_sb, c_rs, c_cs;    /* column strides */
} coop_push;
_Static_assert(sizeof(coop_push) == 92, "the tensor-core kernels' push constants");

/* EMBER_VK_COOPMAT as a flavor: -1 auto, FLAVOR_NONE off, else that flavor. */
static int wanted_flavor(void) {
  const char *v = getenv("EMBER_VK_COOPMAT");
  if (v == NULL || v[0] == 0 || strcmp(v, "1") == 0 || strcmp(v, "auto") == 0) return -1;
  for (int f = FLAVOR_NV; f <= FLAVOR_CM2; f++)
    if (strcmp(v, flavor_names[f]) == 0) return f;
  return FLAVOR_NONE; /* "0" and anything else */
}

static bool has_ext(const VkExtensionProperties *e, uint32_t n, const char *name) {
  for (uint32_t i = 0; i < n; i++)
    if (strcmp(e[i].extensionName, name) == 0) return true;
  return false;
}

static bool f16_shape(uint32_t m, uint32_t n, uint32_t k, int32_t at, int32_t bt, int32_t ct,
                      int32_t rt, int32_t scope) {
  return m == 16 && n == 16 && k == 16 && at == COMPONENT_F16 && bt == COMPONENT_F16 &&
         ct == COMPONENT_F32 && rt == COMPONENT_F32 && scope == SCOPE_SUBGROUP;
}

/* The KHR list of shapes (n of them; NULL when the device has none). Free it. */
static em_coop_props_khr *khr_shapes(const vk_device *D, uint32_t *n) {
  coop_props_khr_fn get = (coop_props_khr_fn)vkg.vkGetInstanceProcAddr(
      em_vk_instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");
  *n = 0;
  if (get == NULL || get(D->phys, n, NULL) != VK_SUCCESS || *n == 0) return NULL;
  em_coop_props_khr *props = calloc(*n, sizeof *props);
  if (props == NULL) return NULL;
  for (uint32_t i = 0; i < *n; i++) props[i].sType = STYPE_COOP_PROPERTIES_KHR;
  if (get(D->phys, n, props) != VK_SUCCESS) *n = 0;
  return props;
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
        found = f16_shape(props[i].MSize, props[i].NSize, props[i].KSize, props[i].AType,
                          props[i].BType, props[i].CType, props[i].DType, props[i].scope);
    free(props);
    return found;
  }
  em_coop_props_khr *props = khr_shapes(D, &n);
  for (uint32_t i = 0; i < n && !found; i++)
    found = f16_shape(props[i].MSize, props[i].NSize, props[i].KSize, props[i].AType,
                      props[i].BType, props[i].CType, props[i].ResultType, props[i].scope);
  free(props);
  return found;
}

/* Whether the coopmat2 flexible-dimension list has bf16 x bf16 + f32 = f32 at workgroup scope
 * for the cm2 kernel's 256 invocations. */
static bool has_bf16_wg_shape(const vk_device *D) {
  coop2_flex_fn get = (coop2_flex_fn)vkg.vkGetInstanceProcAddr(
      em_vk_instance, "vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV");
  uint32_t k = 0;
  bool found = false;
  if (get == NULL || get(D->phys, &k, NULL) != VK_SUCCESS || k == 0) return false;
  em_coop2_flex_props_nv *q = calloc(k, sizeof *q);
  if (q == NULL) return false;
  for (uint32_t i = 0; i < k; i++) q[i].sType = STYPE_COOP2_FLEX_PROPERTIES_NV;
  if (get(D->phys, &k, q) == VK_SUCCESS)
    for (uint32_t i = 0; i < k && !found; i++)
      found = q[i].AType == COMPONENT_BF16 && q[i].BType == COMPONENT_BF16 &&
              q[i].CType == COMPONENT_F32 && q[i].ResultType == COMPONENT_F32 &&
              q[i].scope == SCOPE_WORKGROUP && q[i].workgroupInvocations == 256;
  free(q);
  return found;
}

/* Chains s's structures: coopmat (NV or KHR, and coopmat2 when nv2), float16, 16-bit storage,
 * the memory model. */
static void *chain(vk_coop_setup *s, bool nv, bool nv2, bool bf16) {
  memset(s, 0, sizeof *s);
  s->vmm.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES;
  s->s16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES;
  s->s16.pNext = &s->vmm;
  s->f16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES;
  s->f16.pNext = &s->s16;
  if (bf16) {
    s->bf16.sType = STYPE_BF16_FEATURES_KHR;
    s->bf16.pNext = s->f16.pNext;
    s->f16.pNext = &s->bf16;
  }
  if (nv) {
    s->nv.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV;
    s->nv.pNext = &s->f16;
    return &s->nv;
  }
  s->khr.sType = STYPE_COOP_FEATURES_KHR;
  s->khr.pNext = &s->f16;
  if (!nv2) return &s->khr;
  s->nv2.sType = STYPE_COOP2_FEATURES_NV;
  s->nv2.pNext = &s->khr;
  return &s->nv2;
}

const void *em_vk_coop_setup(vk_device *D, vk_coop_setup *s, const char **exts,
                             uint32_t *next) {
  enabled_of[D->id] = 0;
  int want = wanted_flavor();
  if (want == FLAVOR_NONE || !(D->features & EM_FEATURE_COOPERATIVE_MATRIX) ||
      D->subgroup_size != 32)
    return NULL;
  uint32_t n = 0;
  vkg.vkEnumerateDeviceExtensionProperties(D->phys, NULL, &n, NULL);
  VkExtensionProperties *e = calloc(n ? n : 1, sizeof *e);
  if (e == NULL) return NULL;
  vkg.vkEnumerateDeviceExtensionProperties(D->phys, NULL, &n, e);
  bool khr = false, nv = false, nv2 = false, bf16 = false;
#ifdef EMBER_VK_COOPMAT_KHR
  khr = want != FLAVOR_NV && has_ext(e, n, "VK_KHR_cooperative_matrix");
#endif
#ifdef EMBER_VK_COOPMAT2
  nv2 = khr && D->props.apiVersion >= VK_API_VERSION_1_3 &&
        has_ext(e, n, "VK_NV_cooperative_matrix2");
#endif
#ifdef EMBER_VK_COOPMAT2_BF16
  bf16 = nv2 && has_ext(e, n, "VK_KHR_shader_bfloat16");
#endif
#ifdef EMBER_VK_COOPMAT_NV
  nv = !khr && has_ext(e, n, "VK_NV_cooperative_matrix");
#endif
  const void *enabled = NULL;
  if (khr || nv) {
    /* what the device supports ... */
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                    .pNext = chain(s, nv, nv2, bf16)};
    vkg.vkGetPhysicalDeviceFeatures2(D->phys, &f2);
    bool coop = nv ? s->nv.cooperativeMatrix : s->khr.cooperativeMatrix;
    em_coop2_props_nv p2 = {.sType = STYPE_COOP2_PROPERTIES_NV};
    if (nv2) {
      VkPhysicalDeviceProperties2 pp = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &p2};
      vkg.vkGetPhysicalDeviceProperties2(D->phys, &pp);
    }
    /* the kernel: 256 invocations, matrices up to 256 x 256 */
    nv2 = nv2 && s->nv2.cooperativeMatrixWorkgroupScope &&
          s->nv2.cooperativeMatrixFlexibleDimensions && s->nv2.cooperativeMatrixTensorAddressing &&
          p2.cooperativeMatrixWorkgroupScopeMaxWorkgroupSize >= 256 &&
          p2.cooperativeMatrixFlexibleDimensionsMaxDimension >= 256;
    bf16 = nv2 && bf16 && s->bf16.shaderBFloat16Type && s->bf16.shaderBFloat16CooperativeMatrix &&
           has_bf16_wg_shape(D);
    /* the kernels' SPIR-V uses the Device memory scope (the validation layer names it) */
    if (coop && s->f16.shaderFloat16 && s->s16.storageBuffer16BitAccess &&
        s->vmm.vulkanMemoryModel && s->vmm.vulkanMemoryModelDeviceScope &&
        has_shape(D, nv ? FLAVOR_NV : FLAVOR_KHR)) {
      /* ... and only what the kernels need enabled */
      enabled = chain(s, nv, nv2, bf16);
      s->nv.cooperativeMatrix = s->khr.cooperativeMatrix = VK_TRUE;
      if (nv2) {
        s->nv2.cooperativeMatrixWorkgroupScope = VK_TRUE;
        s->nv2.cooperativeMatrixFlexibleDimensions = VK_TRUE;
        s->nv2.cooperativeMatrixTensorAddressing = VK_TRUE;
      }
      if (bf16) {
        s->bf16.shaderBFloat16Type = VK_TRUE;
        s->bf16.shaderBFloat16CooperativeMatrix = VK_TRUE;
      }
      s->f16.shaderFloat16 = VK_TRUE;
      s->s16.storageBuffer16BitAccess = VK_TRUE;
      s->vmm.vulkanMemoryModel = VK_TRUE;
      s->vmm.vulkanMemoryModelDeviceScope = VK_TRUE;
      exts[(*next)++] = nv ? "VK_NV_cooperative_matrix" : "VK_KHR_cooperative_matrix";
      if (nv2) exts[(*next)++] = "VK_NV_cooperative_matrix2";
      if (bf16) exts[(*next)++] = "VK_KHR_shader_bfloat16";
      /* core since Vulkan 1.1/1.2; named where the device lists them (older devices need them) */
      static const char *const core[] = {"VK_KHR_shader_float16_int8", "VK_KHR_16bit_storage",
                                         "VK_KHR_vulkan_memory_model"};
      for (int i = 0; i < 3; i++)
        if (has_ext(e, n, core[i])) exts[(*next)++] = core[i];
      enabled_of[D->id] = nv ? 1u << FLAVOR_NV
                             : (1u << FLAVOR_KHR) | (nv2 ? 1u << FLAVOR_CM2 : 0u) |
                                   (bf16 ? BIT_CM2_BF16 : 0u);
    }
  }
  free(e);
  return enabled;
}

/* ---- what the device reports ---------------------------------------------------------------- */

static const char *type_name(int32_t t) {
  switch (t) {
  case 0: return "f16";
  case 1: return "f32";
  case 2: return "f64";
  case 3: return "s8";
  case 4: return "s16";
  case 5: return "s32";
  case 6: return "s64";
  case 7: return "u8";
  case 8: return "u16";
  case 9: return "u32";
  case 10: return "u64";
  case 1000141000: return "bf16";
  case 1000491000: return "s8x4";
  case 1000491001: return "u8x4";
  case 1000491002: return "e4m3";
  case 1000491003: return "e5m2";
  default: return "?";
  }
}

static const char *scope_name(int32_t s) {
  return s == SCOPE_SUBGROUP ? "sg" : s == SCOPE_WORKGROUP ? "wg" : s == 1 ? "dev" : "qf";
}

#define ADD(...) (at += (size_t)snprintf(buf + at, at < n ? n - at : 0, __VA_ARGS__))

void em_vk_coop_describe(const vk_device *D, char *buf, size_t n) {
  size_t at = 0;
  buf[0] = 0;
  if (!(D->features & EM_FEATURE_COOPERATIVE_MATRIX)) return;
  uint32_t on = D->started ? enabled_of[D->id] : 0;
  ADD("kernels:%s%s%s%s%s;", on & (1u << FLAVOR_CM2) ? " cm2" : "",
      on & BIT_CM2_BF16 ? " cm2-bf16" : "",
      on & (1u << FLAVOR_KHR) ? " khr" : "", on & (1u << FLAVOR_NV) ? " nv" : "",
      D->started ? (on ? "" : " none") : " (not started)");
  uint32_t ne = 0;
  vkg.vkEnumerateDeviceExtensionProperties(D->phys, NULL, &ne, NULL);
  VkExtensionProperties *e = calloc(ne ? ne : 1, sizeof *e);
  if (e == NULL) return;
  vkg.vkEnumerateDeviceExtensionProperties(D->phys, NULL, &ne, e);
  if (has_ext(e, ne, "VK_KHR_cooperative_matrix")) {
    uint32_t k = 0;
    em_coop_props_khr *p = khr_shapes(D, &k);
    ADD(" khr:");
    for (uint32_t i = 0; i < k; i++)
      ADD(" %s*%s+%s=%s %ux%ux%u%s %s;", type_name(p[i].AType), type_name(p[i].BType),
          type_name(p[i].CType), type_name(p[i].ResultType), p[i].MSize, p[i].NSize,
          p[i].KSize, p[i].saturatingAccumulation ? " sat" : "", scope_name(p[i].scope));
    free(p);
  }
  if (has_ext(e, ne, "VK_NV_cooperative_matrix")) ADD(" nv;");
  if (has_ext(e, ne, "VK_KHR_shader_bfloat16")) {
    vk_bf16_features_khr f = {.sType = STYPE_BF16_FEATURES_KHR};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f};
    vkg.vkGetPhysicalDeviceFeatures2(D->phys, &f2);
    ADD(" bf16: features%s%s%s;", f.shaderBFloat16Type ? " type" : "",
        f.shaderBFloat16DotProduct ? " dot-product" : "",
        f.shaderBFloat16CooperativeMatrix ? " cooperative-matrix" : "");
  }
  if (has_ext(e, ne, "VK_NV_cooperative_matrix2")) {
    vk_coop2_features_nv f = {.sType = STYPE_COOP2_FEATURES_NV};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f};
    vkg.vkGetPhysicalDeviceFeatures2(D->phys, &f2);
    em_coop2_props_nv p = {.sType = STYPE_COOP2_PROPERTIES_NV};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &p};
    vkg.vkGetPhysicalDeviceProperties2(D->phys, &p2);
    ADD(" nv2: features%s%s%s%s%s%s%s, max workgroup %u, max dimension %u, reserved shared %u B;",
        f.cooperativeMatrixWorkgroupScope ? " workgroup-scope" : "",
        f.cooperativeMatrixFlexibleDimensions ? " flexible-dimensions" : "",
        f.cooperativeMatrixReductions ? " reductions" : "",
        f.cooperativeMatrixConversions ? " conversions" : "",
        f.cooperativeMatrixPerElementOperations ? " per-element" : "",
        f.cooperativeMatrixTensorAddressing ? " tensor-addressing" : "",
        f.cooperativeMatrixBlockLoads ? " block-loads" : "",
        p.cooperativeMatrixWorkgroupScopeMaxWorkgroupSize,
        p.cooperativeMatrixFlexibleDimensionsMaxDimension,
        p.cooperativeMatrixWorkgroupScopeReservedSharedMemory);
    coop2_flex_fn get = (coop2_flex_fn)vkg.vkGetInstanceProcAddr(
        em_vk_instance, "vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV");
    uint32_t k = 0;
    if (get != NULL && get(D->phys, &k, NULL) == VK_SUCCESS && k > 0) {
      em_coop2_flex_props_nv *q = calloc(k, sizeof *q);
      if (q != NULL) {
        for (uint32_t i = 0; i < k; i++) q[i].sType = STYPE_COOP2_FLEX_PROPERTIES_NV;
        if (get(D->phys, &k, q) == VK_SUCCESS)
          for (uint32_t i = 0; i < k; i++)
            ADD(" %s*%s+%s=%s %ux%ux%u%s %s/%u;", type_name(q[i].AType), type_name(q[i].BType),
                type_name(q[i].CType), type_name(q[i].ResultType), q[i].MGranularity,
                q[i].NGranularity, q[i].KGranularity, q[i].saturatingAccumulation ? " sat" : "",
                scope_name(q[i].scope), q[i].workgroupInvocations);
        free(q);
      }
    }
  }
  free(e);
  if (at >= n && n > 4) memcpy(buf + n - 4, "...", 4); /* cut: say so */
}

/* ---- the products ------------------------------------------------------------------------------ */

/* The flavor for a product on D now: EMBER_VK_COOPMAT's choice among those enabled. */
static int flavor_now(const vk_device *D) {
  uint32_t on = enabled_of[D->id];
  int want = wanted_flavor();
  if (want >= 0) return (on >> want) & 1u ? want : FLAVOR_NONE;
  for (int f = FLAVOR_CM2; f > FLAVOR_NONE; f--)
    if ((on >> f) & 1u) return f;
  return FLAVOR_NONE;
}

/* The tensor-core kernel float16 products take on D now ("cm2", "khr", "nv"), or NULL. */
const char *em_vk_coop_flavor_name(const vk_device *D) {
  int f = flavor_now(D);
  return f == FLAVOR_NONE ? NULL : flavor_names[f];
}

int em_vk_coop_subgroup_flavor(const vk_device *D) {
  int f = flavor_now(D);
  return f == FLAVOR_CM2 || f == FLAVOR_KHR ? 2 : f == FLAVOR_NV ? 1 : 0;
}

bool em_vk_coop_cm2_for(const vk_device *D, int dtype) {
  if (flavor_now(D) != FLAVOR_CM2) return false;
  return dtype == EM_FLOAT16 || (dtype == EM_BFLOAT16 && (enabled_of[D->id] & BIT_CM2_BF16));
}

/* An operand viewed as rows x cols: its layout (column-major: rows contiguous) and the stride
 * of its other dimension; false when neither dimension is contiguous, or the lines overlap (a
 * stride shorter than a line: expanded views), or a stride does not fit (the tiled kernel's
 * cases). */
static bool operand_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, bool *col,
                           uint32_t *ld) {
  int64_t l;
  if (cs == 1 || cols == 1) *col = false, l = rows == 1 ? cols : rs;
  else if (rs == 1 || rows == 1) *col = true, l = cols == 1 ? rows : cs;
  else return false;
  if (l < (*col ? rows : cols) || l > INT32_MAX) return false;
  *ld = (uint32_t)l;
  return true;
}

/* The batch shape of out (up to two dimensions before the matrix) and t's stride along batch
 * dimension d (0 outer, 1 inner); 0 where t broadcasts or lacks the dimension. */
static int64_t batch_size(const em_tensor *out, int d) {
  int k = out->ndim - 4 + d;
  return k >= 0 ? out->sizes[k] : 1;
}
static int64_t batch_stride(const em_tensor *t, int d) {
  int k = t->ndim - 4 + d;
  return k >= 0 && t->sizes[k] > 1 ? t->strides[k] : 0;
}

/* Fills p from the operands; false where the kernels cannot read them (then the tiled kernel). */
static bool coop_push_for(coop_push *p, bool *acol, bool *bcol, const em_tensor *out,
                          const em_tensor *a, const em_tensor *b) {
  int nd = out->ndim;
  if (nd < 2 || nd > 4 || a->ndim < 2 || b->ndim < 2) return false;
  int64_t M = out->sizes[nd - 2], N = out->sizes[nd - 1], K = a->sizes[a->ndim - 1];
  if (!operand_layout(M, K, a->strides[a->ndim - 2], a->strides[a->ndim - 1], acol, &p->a_ld) ||
      !operand_layout(K, N, b->strides[b->ndim - 2], b->strides[b->ndim - 1], bcol, &p->b_ld))
    return false;
  int64_t v[] = {M, N, K, a->offset, b->offset, out->offset, batch_stride(a, 0),
                 batch_stride(a, 1), batch_stride(b, 0), batch_stride(b, 1), M * N,
                 batch_size(out, 1)};
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
    if (v[i] < 0 || v[i] > INT32_MAX) return false;
  p->M = (uint32_t)M, p->N = (uint32_t)N, p->K = (uint32_t)K;
  p->a_base = (uint32_t)a->offset, p->b_base = (uint32_t)b->offset;
  p->o_base = (uint32_t)out->offset;
  p->a_sb1 = (uint32_t)v[6], p->a_sb2 = (uint32_t)v[7];
  p->b_sb1 = (uint32_t)v[8], p->b_sb2 = (uint32_t)v[9];
  p->o_sb = (uint32_t)(M * N);
  p->nb2 = (uint32_t)batch_size(out, 1);
  return true;
}

/* The one place that decides: float16 (any kernel) or bfloat16 (cm2 with its bf16 build), a
 * kernel enabled and chosen, operands it can read, and a product large enough for its tiles to
 * pay. */
bool em_vk_coop_wanted(vk_device *D, const em_tensor *out, const em_tensor *a,
                       const em_tensor *b) {
  int flavor = flavor_now(D);
  if (flavor == FLAVOR_NONE) return false;
  if (out->dtype_id == EM_BFLOAT16) {
    if (flavor != FLAVOR_CM2 || !(enabled_of[D->id] & BIT_CM2_BF16)) return false;
  } else if (out->dtype_id != EM_FLOAT16) {
    return false;
  }
  if (a->dtype_id != out->dtype_id || b->dtype_id != out->dtype_id) return false;
  /* the subgroup-scope kernel's default tile: two stages of 128 x 40 halves per operand and a
   * 16 x 16 float scratch per subgroup */
  if (flavor != FLAVOR_CM2 && D->props.limits.maxComputeSharedMemorySize < 4 * 2 * 128 * 40 * 2 / 2 + 4096)
    return false;
  coop_push p;
  bool acol, bcol;
  if (!coop_push_for(&p, &acol, &bcol, out, a, b)) return false;
  return p.M >= 64 && p.N >= 64 && p.K >= 32;
}

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* The grid of bm x bn tiles over nb batch elements (em_vk_tile_grid splits it at the limits). */
static int grid(vk_device *D, vk_launch *L, coop_push *p, int64_t nb, int64_t bm, int64_t bn) {
  int64_t total[3] = {cdiv(p->N, bn), cdiv(p->M, bm), nb};
  return em_vk_tile_grid(D, L, total, &p->n0, &p->m0, &p->batch0);
}

/* Whether x and the batch strides are multiples of 8 elements (16-byte chunks). */
static bool aligned8(uint32_t x, uint32_t s1, uint32_t s2) { return (x | s1 | s2) % 8 == 0; }

/* The coopmat2 tile: 128 x 256 (what ggml's large tile is) where there are enough of them to
 * fill the GPU, else 128 x 128; EMBER_VK_CM2_TILE=BMxBNxBK forces one, optionally followed by
 * "p" (prefetch) and "u2", "u4" or "u16" (unroll; 8 by default): t[3] holds those MODES bits. */
static void cm2_tile(const coop_push *p, int64_t nb, uint32_t t[4]) {
  const char *force = getenv("EMBER_VK_CM2_TILE");
  unsigned bm, bn, bk, u = 8;
  char opts[8] = "";
  int got = force ? sscanf(force, "%ux%ux%u%7s", &bm, &bn, &bk, opts) : 0;
  if (got >= 3 && bm % 16 == 0 && bn % 16 == 0 && bk % 16 == 0 && bm && bn && bk) {
    /* options after BK: "p" prefetch, "u2", "u4", "u16" unroll */
    const char *up = strchr(opts, 'u');
    if (up) u = (unsigned)atoi(up + 1);
    t[0] = bm, t[1] = bn, t[2] = bk;
    t[3] = (strchr(opts, 'p') ? 8u : 0u) | (u == 2 ? 1u : u == 4 ? 2u : u == 16 ? 3u : 0u) << 4;
    return;
  }
  bool large = cdiv(p->M, 128) * cdiv(p->N, 256) * nb >= 256;
  t[0] = 128, t[1] = large ? 256 : 128, t[2] = 32, t[3] = 0;
  /* 64 rows or fewer (a convolution's 64 filters, its weight gradient's rows): a 128-row tile
   * would compute half zeros */
  if (p->M <= 64) t[0] = 64, t[1] = 128;
}

/* The subgroup-scope kernel's configuration (kernels/coopmat/matmul_coop.comp's CFG): WM x WN
 * subgroups of FM x FN 16 x 16 matrices, slices of BK. 2 x 2 subgroups of 4 x 4 (128 x 128
 * tiles, BK 32) by default, which kernels/coopmat/matmul_coop_fixed.comp has built in (*fixed);
 * EMBER_VK_COOP_TILE=WMxWN:FMxFN:BK forces one (its chunks must divide among the invocations
 * and its shared memory fit), with a trailing "s" the specialized kernel even for the default. */
enum { COOP_FIXED_CFG = 0x24422 };
static uint32_t coop_cfg(const vk_device *D, uint32_t *threads, uint32_t *bm, uint32_t *bn,
                         bool *fixed) {
  unsigned wm = 2, wn = 2, fm = 4, fn = 4, bk = 32;
  const char *force = getenv("EMBER_VK_COOP_TILE");
  unsigned v[5];
  char spec = 0;
  if (force && sscanf(force, "%ux%u:%ux%u:%u%c", &v[0], &v[1], &v[2], &v[3], &v[4], &spec) >= 5 &&
      v[0] && v[0] < 16 && v[1] && v[1] < 16 && v[2] && v[2] < 16 && v[3] && v[3] < 16 &&
      v[4] >= 16 && v[4] <= 240 && v[4] % 16 == 0) {
    unsigned t = 32 * v[0] * v[1], m = v[0] * v[2] * 16, n = v[1] * v[3] * 16, k = v[4];
    /* two stages of padded slices and the per-subgroup scratch */
    uint64_t sa = m * (k + 8) > k * (m + 8) ? m * (k + 8) : k * (m + 8);
    uint64_t sb = n * (k + 8) > k * (n + 8) ? n * (k + 8) : k * (n + 8);
    uint64_t shared = 2 * 2 * (sa + sb) + (uint64_t)v[0] * v[1] * 1024;
    if (t <= D->props.limits.maxComputeWorkGroupInvocations && (m * k / 8) % t == 0 &&
        (n * k / 8) % t == 0 && shared <= D->props.limits.maxComputeSharedMemorySize)
      wm = v[0], wn = v[1], fm = v[2], fn = v[3], bk = v[4];
  }
  *threads = 32 * wm * wn, *bm = wm * fm * 16, *bn = wn * fn * 16;
  uint32_t cfg = wm | wn << 4 | fm << 8 | fn << 12 | (bk / 16) << 16;
  *fixed = cfg == COOP_FIXED_CFG && spec != 's';
  return cfg;
}

static int coop_gemm(vk_device *D, em_tensor *out, const em_tensor *a, const em_tensor *b,
                     double alpha, double beta, bool out_f32, const em_tensor *c,
                     const int32_t cs[4]);

int em_vk_coop_gemm(vk_device *D, em_tensor *out, const em_tensor *a, const em_tensor *b,
                    double alpha, double beta) {
  return coop_gemm(D, out, a, b, alpha, beta, false, NULL, NULL);
}

int em_vk_coop_gemm_c(vk_device *D, em_tensor *out, const em_tensor *a, const em_tensor *b,
                      const em_tensor *c, double alpha, double beta) {
  if (flavor_now(D) != FLAVOR_CM2 || c->dtype_id != out->dtype_id || c->ndim != 3) return 1;
  int32_t cs[4];
  int64_t v[4] = {c->offset, c->sizes[0] > 1 ? c->strides[0] : 0,
                  c->sizes[1] > 1 ? c->strides[1] : 0, c->sizes[2] > 1 ? c->strides[2] : 0};
  for (int i = 0; i < 4; i++) {
    if (v[i] < 0 || v[i] > INT32_MAX) return 1;
    cs[i] = (int32_t)v[i];
  }
  return coop_gemm(D, out, a, b, alpha, beta, false, c, cs);
}

bool em_vk_coop_dtype(vk_device *D, em_dtype dt, bool out_f32) {
  int flavor = flavor_now(D);
  if (flavor == FLAVOR_NONE || (out_f32 && flavor != FLAVOR_CM2)) return false;
  if (dt == EM_BFLOAT16) return flavor == FLAVOR_CM2 && (enabled_of[D->id] & BIT_CM2_BF16);
  return dt == EM_FLOAT16;
}

int em_vk_coop_gemm_f32(vk_device *D, em_tensor *out, const em_tensor *a, const em_tensor *b) {
  if (!em_vk_coop_dtype(D, (em_dtype)a->dtype_id, true) || out->dtype_id != EM_FLOAT32 ||
      b->dtype_id != a->dtype_id)
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "gemm: float32 results of %s products "
                             "need the coopmat2 kernel, which %s lacks",
                             em_dtype_name((em_dtype)a->dtype_id), D->name);
  return coop_gemm(D, out, a, b, 1.0, 0.0, true, NULL, NULL);
}

/* c (with cs: its offset and batch, row, column strides) only on the coopmat2 kernel. */
static int coop_gemm(vk_device *D, em_tensor *out, const em_tensor *a, const em_tensor *b,
                     double alpha, double beta, bool out_f32, const em_tensor *c,
                     const int32_t cs[4]) {
  coop_push p = {0};
  bool acol, bcol;
  if (!coop_push_for(&p, &acol, &bcol, out, a, b))
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "gemm: operands the tensor-core kernels "
                             "cannot read on %s", D->name);
  int64_t nb = batch_size(out, 0) * batch_size(out, 1);
  p.alpha = (float)alpha;
  p.beta = (float)beta;
  int flavor = flavor_now(D);
  uint32_t modes = (acol ? 1u : 0u) | (bcol ? 2u : 0u);
  vk_launch L = {.push = &p, .push_size = sizeof p, .ops = {out, a, b}, .writes = 1u};
  if (flavor == FLAVOR_CM2) {
    uint32_t t[4];
    cm2_tile(&p, nb, t);
    modes |= t[3] | (out_f32 ? 64u : 0u);
    if (c) {
      modes |= 128u | (c->dtype_id == EM_BFLOAT16 ? 256u : 0u);
      p.c_base = (uint32_t)cs[0], p.c_sb = cs[1], p.c_rs = cs[2], p.c_cs = cs[3];
      L.ops[3] = c;
    }
    if (aligned8(p.a_ld | p.a_base, p.a_sb1, p.a_sb2) && aligned8(p.b_ld | p.b_base, p.b_sb1, p.b_sb2))
      modes |= 4u;
    L.module = a->dtype_id == EM_BFLOAT16 ? "matmul_cm2_bf16" : "matmul_cm2";
    L.spec[0] = modes, L.spec[1] = t[0], L.spec[2] = t[1], L.spec[3] = t[2];
    return grid(D, &L, &p, nb, t[0], t[1]);
  }
  /* chunks of 8 halves along the contiguous dimension: one 128-bit load when whole and aligned */
  uint32_t alen = acol ? p.M : p.K, blen = bcol ? p.K : p.N;
  if (alen % 8 == 0 && aligned8(p.a_ld | p.a_base, p.a_sb1, p.a_sb2)) modes |= 4u;
  if (blen % 8 == 0 && aligned8(p.b_ld | p.b_base, p.b_sb1, p.b_sb2)) modes |= 8u;
  if (p.N % 8 == 0 && p.o_base % 8 == 0) modes |= 16u;
  uint32_t threads, bm, bn;
  bool fixed;
  uint32_t cfg = coop_cfg(D, &threads, &bm, &bn, &fixed);
  L.module = flavor == FLAVOR_KHR ? (fixed ? "matmul_coop_fixed_KHR" : "matmul_coop_KHR")
                                  : (fixed ? "matmul_coop_fixed_NV" : "matmul_coop_NV");
  L.spec[0] = modes, L.spec[1] = threads, L.spec[2] = cfg, L.spec[3] = ~0u;
  return grid(D, &L, &p, nb, bm, bn);
}
