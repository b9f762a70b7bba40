/*
 * test_diagnostics.c: em_runtime_info_get and em_device_plan_get through the C API alone, as
 * an embedder (or `ember doctor`) calls them: the figures agree with the calls and settings
 * they summarize (EMBER_VERSION, sysconf, the thread count, EMBER_CPU_BF16, EMBER_CACHE_DIR),
 * a Vulkan device's plan changes when it starts, and bad arguments are errors.
 */
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

static int has(const char *text, const char *part) { return strstr(text, part) != NULL; }

int main(void) {
  setenv("EMBER_CACHE_DIR", "/tmp/ember-test-diagnostics", 1); /* before discovery */
  em_runtime_info info;
  CHECK(em_runtime_info_get(&info) == 0);
  CHECK(strcmp(info.version, EMBER_VERSION) == 0);
  CHECK(info.cpu_cores == (int32_t)sysconf(_SC_NPROCESSORS_ONLN));
  CHECK(info.threads == em_get_num_threads());
  CHECK(strncmp(info.blas_config, "OpenBLAS", 8) == 0 && info.blas_core[0] != '\0');
  /* the note says why Vulkan found nothing, and only then */
  CHECK((em_device_count() == 1) == (info.vulkan_note[0] != '\0'));
  int saved = em_get_num_threads();
  em_set_num_threads(1);
  CHECK(em_runtime_info_get(&info) == 0 && info.threads == 1 && info.blas_threads == 1);
  em_set_num_threads(saved);

  em_device_plan plan;
  CHECK(em_device_plan_get(0, &plan) == 0);
  CHECK(has(plan.kernels, "matmul.float32=openblas; matmul.float64=openblas"));
  CHECK(has(plan.kernels, "matmul.float16=via-float32"));
  CHECK(plan.pipeline_cache[0] == '\0');
  setenv("EMBER_CPU_BF16", "0", 1); /* read on every product, and so on every plan */
  CHECK(em_device_plan_get(0, &plan) == 0 && has(plan.kernels, "matmul.bfloat16=via-float32"));
  unsetenv("EMBER_CPU_BF16");

  for (int d = 1; d < em_device_count(); d++) {
    em_device_info di;
    CHECK(em_device_info_get(d, &di) == 0);
    CHECK(em_device_plan_get(d, &plan) == 0);
    CHECK(has(plan.kernels, "matmul.float32=tiled"));
    CHECK(has(plan.kernels, "started=no") == (di.started == 0));
    CHECK(strncmp(plan.pipeline_cache, "/tmp/ember-test-diagnostics/vulkan-", 35) == 0);
    CHECK(has(plan.pipeline_cache, ".bin"));
    if (em_device_start(d) == 0) {
      CHECK(em_device_plan_get(d, &plan) == 0 && !has(plan.kernels, "started=no"));
      /* without tensor cores, 16-bit products take the tiled kernel */
      if (!(di.features & EM_FEATURE_COOPERATIVE_MATRIX))
        CHECK(has(plan.kernels, "matmul.float16=tiled"));
    }
  }

  CHECK_ERROR(em_runtime_info_get(NULL), "runtime_info: expected an output struct, got NULL");
  CHECK_ERROR(em_device_plan_get(0, NULL), "device_plan: expected an output struct, got NULL");
  CHECK_ERROR(em_device_plan_get(99, &plan), "device_plan: invalid device 99");
  CHECK_ERROR(em_device_plan_get(-1, &plan), "device_plan: invalid device -1");
  return check_report();
}
