/*
 * vk_matmul.h: what the two matmul files share: vk_matmul.c (the gemm slot and the tiled
 * kernels) and vk_matmul_coop.c (the cooperative-matrix kernel and its device setup).
 */
#ifndef EMBER_VK_MATMUL_H
#define EMBER_VK_MATMUL_H

#include "vk.h"

/* The push constants of kernels/matmul.comp and kernels/coopmat/matmul_coop.comp, declared
 * once for the kernels in kernels/matmul_push.glsl: a flat batch z is (z / nb2, z % nb2), and
 * each operand has a stride for both batch dims (the gemm slot's 3-D or 4-D operands). */
typedef struct mm_push {
  uint32_t M, N, K, a_base, b_base, o_base; /* element offsets of the first elements */
  int32_t a_sm, a_sk, b_sk, b_sn;
  int32_t a_sb1, a_sb2, b_sb1, b_sb2; /* batch strides: outer (B1) and inner (B2) dim */
  uint32_t nb2;                       /* B2 */
  uint32_t o_sb, m0, batch0, n0;      /* first row tile, flat batch, column tile of a launch */
  uint32_t a_mode, b_mode, flags; /* matmul.comp's generic pipeline reads these */
  uint32_t ksplit;               /* matmul.comp: K per split (0: none) */
  uint32_t pad_;
  union {
    float f[2];
    double d[2]; /* float64 kernels */
    uint64_t u[2]; /* integer kernels: two's complement */
  } s;           /* alpha, beta */
  uint32_t c_base;                 /* matmul.comp with FLAGS bit 3 (gemm_add): c's offset, */
  int32_t c_sb, c_rs, c_cs;        /* ... and its batch, row and column strides */
} mm_push;
_Static_assert(sizeof(mm_push) == 128, "the matmul kernels' push constants");
/* Push bytes with float or with 8-byte alpha and beta, and with c (float32 and 16-bit only). */
enum { MM_PUSH_F32 = 104, MM_PUSH_WIDE = 112, MM_PUSH_C = 128 };

/* The matrix dims of a gemm operand, 3-D or 4-D (backend.h reads the batch dims). */
#define MM_ROWS(t) ((t)->sizes[(t)->ndim - 2])
#define MM_COLS(t) ((t)->sizes[(t)->ndim - 1])

/* The gemm slot (vk_matmul.c): out[z] = alpha * a[z] @ b[z] + beta * out[z]; takes the lock. */
int em_vk_gemm(em_tensor *out, const em_tensor *a, const em_tensor *b, double alpha,
               double beta);
bool em_vk_mm_fits_i32(int64_t v);
uint32_t em_vk_mm_layout(const em_tensor *t, int chunk);
int em_vk_mm_push_common(mm_push *p, const em_tensor *out, const em_tensor *a,
                         const em_tensor *b);
int em_vk_tile_grid(vk_device *D, vk_launch *L, const int64_t total[3], uint32_t *n0,
                    uint32_t *m0, uint32_t *batch0);
int em_vk_mm_grid(vk_device *D, vk_launch *L, mm_push *p, int64_t B, int64_t M, int64_t N,
                  int tile);

/* vk_matmul_coop.c. Whether this product goes to a tensor-core kernel (the one place that
 * decides), and that kernel; both with D->lock held. */
bool em_vk_coop_wanted(vk_device *D, const em_tensor *out, const em_tensor *a,
                       const em_tensor *b);
int em_vk_coop_gemm(vk_device *D, em_tensor *out, const em_tensor *a, const em_tensor *b,
                    double alpha, double beta);
/* out = beta * c + alpha * a @ b on the coopmat2 kernel (the gemm_add slot; c's strides as in
 * mm_push's c fields): 0 done, -1 error, 1 not taken (another kernel flavor: the caller copies
 * c and runs em_vk_coop_gemm). With D->lock held. */
int em_vk_coop_gemm_c(vk_device *D, em_tensor *out, const em_tensor *a, const em_tensor *b,
                      const em_tensor *c, double alpha, double beta);
/* Whether a tensor-core kernel takes dtype dt products on D now; with out_f32, products
 * with float32 results (the coopmat2 kernel only). */
bool em_vk_coop_dtype(vk_device *D, em_dtype dt, bool out_f32);
/* out (float32) = a @ b of 16-bit operands on the coopmat2 kernel (alpha 1, beta 0): the
 * accumulator stored unrounded. Any batch layout em_vk_coop_gemm takes. With D->lock held. */
int em_vk_coop_gemm_f32(vk_device *D, em_tensor *out, const em_tensor *a, const em_tensor *b);

/* The feature structures of VK_KHR_cooperative_matrix and VK_NV_cooperative_matrix2, declared
 * here because Debian 12's headers (1.3.239) predate them. */
typedef struct vk_coop_features_khr {
  VkStructureType sType;
  void *pNext;
  VkBool32 cooperativeMatrix;
  VkBool32 cooperativeMatrixRobustBufferAccess;
} vk_coop_features_khr;
typedef struct vk_coop2_features_nv {
  VkStructureType sType;
  void *pNext;
  VkBool32 cooperativeMatrixWorkgroupScope;
  VkBool32 cooperativeMatrixFlexibleDimensions;
  VkBool32 cooperativeMatrixReductions;
  VkBool32 cooperativeMatrixConversions;
  VkBool32 cooperativeMatrixPerElementOperations;
  VkBool32 cooperativeMatrixTensorAddressing;
  VkBool32 cooperativeMatrixBlockLoads;
} vk_coop2_features_nv;

/* VK_KHR_shader_bfloat16's features (newer than Debian 12's and the cached 1.4.309 headers). */
typedef struct vk_bf16_features_khr {
  VkStructureType sType;
  void *pNext;
  VkBool32 shaderBFloat16Type;
  VkBool32 shaderBFloat16DotProduct;
  VkBool32 shaderBFloat16CooperativeMatrix;
} vk_bf16_features_khr;

/* The feature structures the tensor-core kernels enable (create_device owns them). */
typedef struct vk_coop_setup {
  VkPhysicalDeviceCooperativeMatrixFeaturesNV nv;
  vk_coop_features_khr khr;
  vk_coop2_features_nv nv2;
  vk_bf16_features_khr bf16;
  VkPhysicalDeviceShaderFloat16Int8Features f16;
  VkPhysicalDevice16BitStorageFeatures s16;
  VkPhysicalDeviceVulkanMemoryModelFeatures vmm;
} vk_coop_setup;

/* For vk_device.c's create_device: when a tensor-core kernel can run on D (the build has a
 * flavor the device offers, with 16x16x16 float16 matrices and float32 accumulators), appends
 * the extensions it needs to exts (room for VK_COOP_MAX_EXTS more) and returns the feature
 * chain to enable; NULL otherwise. EMBER_VK_COOPMAT=0 turns it off, =nv picks the
 * GL_NV_cooperative_matrix kernel (docs/devices.md). With the coopmat2 kernel, a device with
 * VK_KHR_shader_bfloat16 (bfloat16 cooperative matrices, bf16 x bf16 + f32 at workgroup scope
 * in its flexible-dimension list) also gets that extension for the bfloat16 kernel. */
enum { VK_COOP_MAX_EXTS = 7 };
const void *em_vk_coop_setup(vk_device *D, vk_coop_setup *s, const char **exts,
                             uint32_t *next);
/* The subgroup-scope cooperative-matrix flavor a float16 kernel may use on D now (EMBER_VK_COOPMAT
 * honoured; "cm2" implies the KHR extension): 2 KHR, 1 NV, 0 none. The fused attention's
 * tensor-core kernel asks (vk_attention_coop.c). */
int em_vk_coop_subgroup_flavor(const vk_device *D);
/* The tensor-core kernel float16 products take on D now ("cm2", "khr", "nv"), or NULL
 * (vk_plan.c reports it). */
const char *em_vk_coop_flavor_name(const vk_device *D);
/* Whether the coopmat2 kernels run now for 16-bit operands of dtype on D (float16; bfloat16
 * where its build and the device's bfloat16 matrices exist; EMBER_VK_COOPMAT honoured). The
 * fused attention's coopmat2 kernels ask (vk_attention_cm2.c). */
bool em_vk_coop_cm2_for(const vk_device *D, int dtype);
/* For em_vk_info: what the device reports about cooperative matrices (shapes, types, scopes,
 * the coopmat2 features) and which kernel Ember uses, as one line. */
void em_vk_coop_describe(const vk_device *D, char *buf, size_t n);

#endif
