/*
 * diagnostics.c: what `ember doctor` (lua/ember/doctor.lua) asks the runtime: how this library
 * was built (the optional kernel builds, the shader compiler), the BLAS and thread settings it
 * runs with, why Vulkan found no device, and per device the kernels Ember picks there and its
 * pipeline cache file. The doctor turns these into a report and its warnings; nothing here
 * judges.
 */
#include <omp.h>
#include <stdio.h>
#include <unistd.h>

#include "device.h"
#include "diagnostics.h"

/* OpenBLAS's own introspection (cblas.h declares them in newer releases only). */
char *openblas_get_config(void);
char *openblas_get_corename(void);
int openblas_get_num_threads(void);

#define EM_STR2(x) #x
#define EM_STR(x) EM_STR2(x)

/* The optional kernel builds, from the defines the shader toolchain's probes set
 * (cmake/shader-toolchain.cmake). */
static const char shader_builds[] = ""
#ifdef EMBER_VK_COOPMAT_NV
                                    " coopmat-nv"
#endif
#ifdef EMBER_VK_COOPMAT_KHR
                                    " coopmat-khr"
#endif
#ifdef EMBER_VK_COOPMAT2
                                    " coopmat2"
#endif
#ifdef EMBER_VK_COOPMAT2_BF16
                                    " coopmat2-bf16"
#endif
#ifdef EMBER_VK_GLSL_BF16
                                    " glsl-bf16"
#endif
#ifdef EMBER_VK_GLSL_INT_DOT
                                    " int-dot"
#endif
    ;

int em_runtime_info_get(em_runtime_info *out) {
  if (out == NULL) return em_error("runtime_info: expected an output struct, got NULL");
  memset(out, 0, sizeof *out);
  int vulkan_devices = em_device_count() - 1; /* runs discovery */
  snprintf(out->version, sizeof out->version, "%s", EMBER_VERSION);
  snprintf(out->shader_builds, sizeof out->shader_builds, "%s",
           shader_builds[0] ? shader_builds + 1 : "");
#ifdef EMBER_GLSLANG_VERSION
  snprintf(out->glslang, sizeof out->glslang, "%s", EM_STR(EMBER_GLSLANG_VERSION));
#endif
  const char *config = openblas_get_config(), *core = openblas_get_corename();
  snprintf(out->blas_config, sizeof out->blas_config, "%s", config ? config : "");
  snprintf(out->blas_core, sizeof out->blas_core, "%s", core ? core : "");
  out->blas_threads = openblas_get_num_threads();
  out->threads = em_get_num_threads();
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  out->cpu_cores = cores > 0 ? (int32_t)cores : 1;
  if (vulkan_devices == 0)
    snprintf(out->vulkan_note, sizeof out->vulkan_note, "%s", em_vulkan_discovery_note());
  return 0;
}

int em_device_plan_get(int device, em_device_plan *out) {
  if (out == NULL) return em_error("device_plan: expected an output struct, got NULL");
  em_device_count(); /* discovery, so that vulkan:N ids are known */
  if (em_check_device("device_plan", device) != 0) return -1;
  memset(out, 0, sizeof *out);
  if (device == EM_CPU) em_cpu_plan(out);
  else em_vk_plan(em_device_ctx(device), out);
  return 0;
}
