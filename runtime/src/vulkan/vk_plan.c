/*
 * vk_plan.c: a Vulkan device's entry of em_device_plan_get (diagnostics.c): which kernels its
 * products, convolutions and attention take, as the deciding code (vk_matmul_coop.c,
 * vk_conv_cols.c, vk_attention_coop.c, vk_pipeline.c) would choose now, and its pipeline cache
 * file. The tensor-core kernels are enabled when the device starts, so before that the plan
 * says "started=no" and lists the plain kernels.
 */
#include <stdlib.h>

#include "../diagnostics.h"
#include "vk.h"
#include "vk_conv.h"
#include "vk_matmul.h"

void em_vk_plan(void *ctx, em_device_plan *out) {
  vk_device *D = ctx;
  char coop[32] = "tiled";
  const char *flavor = D->started ? em_vk_coop_flavor_name(D) : NULL;
  if (flavor) snprintf(coop, sizeof coop, "coopmat-%s", flavor);
  bool bf16_coop = D->started && em_vk_coop_dtype(D, EM_BFLOAT16, false);
  if (!D->started) em_plan_add(out, "started", "no");
  em_plan_add(out, "matmul.float32", "tiled");
  em_plan_add(out, "matmul.float64", (D->features & EM_FEATURE_FLOAT64) ? "tiled" : "none");
  em_plan_add(out, "matmul.float16", coop);
  em_plan_add(out, "matmul.bfloat16", bf16_coop ? "coopmat2-bf16" : "tiled");
  em_plan_add(out, "matmul.integer", "tiled-int64");
  em_plan_add(out, "conv.float32", "implicit-gemm");
  /* 16-bit convolutions: column matrices and the products above, else float32 copies */
  em_plan_add(out, "conv.float16", !em_vk_conv_half(D->id, EM_FLOAT16) ? "via-float32"
                                   : flavor ? "im2col+coopmat" : "im2col+tiled");
  em_plan_add(out, "conv.bfloat16", !em_vk_conv_half(D->id, EM_BFLOAT16) ? "via-float32"
                                    : bf16_coop ? "im2col+coopmat" : "im2col+tiled");
  /* the fused attention: coopmat2 forward and backward (vk_attention_cm2.c), else the
   * subgroup-scope float16 forward (vk_attention_coop.c), else the plain kernels */
  const char *cm2_off = getenv("EMBER_VK_ATTENTION_CM2"), *coop_off = getenv("EMBER_VK_ATTENTION_COOP");
  bool cm2_on = D->started && !(cm2_off && strcmp(cm2_off, "0") == 0);
  bool attn_coop = D->started && em_vk_coop_subgroup_flavor(D) != 0 &&
                   !(coop_off && strcmp(coop_off, "0") == 0);
  em_plan_add(out, "attention.float16", cm2_on && em_vk_coop_cm2_for(D, EM_FLOAT16) ? "flash-cm2"
                                        : attn_coop ? "flash-coopmat-forward"
                                                    : "flash");
  em_plan_add(out, "attention.bfloat16",
              cm2_on && em_vk_coop_cm2_for(D, EM_BFLOAT16) ? "flash-cm2" : "flash");
  /* vk_pipeline.c: GPUs specialize every pipeline, CPU-type drivers only hot or large ones */
  const char *spec = getenv("EMBER_VK_SPECIALIZE");
  bool never = spec && strcmp(spec, "0") == 0, always = spec && strcmp(spec, "1") == 0;
  bool cpu_type = D->type == EM_DEVICE_SOFTWARE_GPU ||
                  D->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
  em_plan_add(out, "pipelines", never ? "generic" : cpu_type && !always ? "specialized-when-hot"
                                                                        : "specialized");
  em_plan_add(out, "descriptors",
              (D->started ? D->push_descriptors : D->has_push_ext) ? "push" : "pool");
  em_vk_cache_file(D, out->pipeline_cache, sizeof out->pipeline_cache);
}
