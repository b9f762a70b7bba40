/*
 * vk_device.c: starting a Vulkan device (the logical device, its queue, the allocator, the
 * command batches and the pipeline layout) and describing it for em_device_info_get.
 *
 * Starting is what can fail on a machine whose GPU is unusable (a broken driver, a device lost,
 * no memory); the registry (device.c) then falls back or reports it. The test hook
 * EMBER_VK_TEST=fail-start makes every start fail, so that the fallback and strict mode can be
 * tested on machines whose GPU works.
 */
#include <stdio.h>
#include <stdlib.h>

#include "vk.h"
#include "vk_matmul.h"
#include "vk_quant.h"

static int fail(vk_device *D, const char *what, VkResult r) {
  return em_error("%s: %s failed (%s)", D->name, what, em_vk_result_name(r));
}

static int create_device(vk_device *D) {
  float priority = 1.0f;
  VkDeviceQueueCreateInfo qi = {
    .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
    .queueFamilyIndex = D->queue_family,
    .queueCount = 1,
    .pQueuePriorities = &priority,
  };
  VkPhysicalDeviceFeatures features = {0};
  features.shaderInt64 = VK_TRUE;
  features.shaderFloat64 = (D->features & EM_FEATURE_FLOAT64) ? VK_TRUE : VK_FALSE;
  const char *exts[2 + VK_COOP_MAX_EXTS + VK_QUANT_MAX_EXTS];
  uint32_t next = 0;
  D->push_descriptors = D->has_push_ext && !(em_vk_test_hooks() & VK_TEST_NO_PUSH_DESCRIPTORS);
  if (D->push_descriptors) exts[next++] = VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME;
  if (D->has_budget_ext) exts[next++] = VK_EXT_MEMORY_BUDGET_EXTENSION_NAME;
  /* the tensor-core matmuls' extensions and features, where they can run (vk_matmul_coop.c) */
  vk_coop_setup coop;
  const void *chain = em_vk_coop_setup(D, &coop, exts, &next);
  /* the quantized matrix-vector kernel's packed int8 dot products (vk_quant_matmul.c) */
  vk_quant_setup quant;
  chain = em_vk_quant_setup(D, &quant, chain, exts, &next);
  VkDeviceCreateInfo ci = {
    .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
    .queueCreateInfoCount = 1,
    .pQueueCreateInfos = &qi,
    .enabledExtensionCount = next,
    .ppEnabledExtensionNames = exts,
    .pEnabledFeatures = &features,
    .pNext = chain,
  };
  VkResult r = vkg.vkCreateDevice(D->phys, &ci, NULL, &D->dev);
  if (r != VK_SUCCESS) return fail(D, "vkCreateDevice", r);
  if (em_vk_load_device_fns(D->dev, &D->fn, D->push_descriptors) != 0) return -1;
  if (D->push_descriptors && D->fn.vkCmdPushDescriptorSetKHR == NULL) D->push_descriptors = false;
  D->fn.vkGetDeviceQueue(D->dev, D->queue_family, 0, &D->queue);
  return 0;
}

int em_vk_start(void *ctx) {
  vk_device *D = ctx;
  pthread_mutex_lock(&D->lock);
  int rc = 0;
  if (D->started) goto done;
  rc = -1;
  if (em_vk_test_hooks() & VK_TEST_FAIL_START) {
    em_error("%s: start failed on purpose (the test hook EMBER_VK_TEST=fail-start is set)",
             D->name);
    goto done;
  }
  if (!(D->features & EM_FEATURE_INT64)) {
    em_error("%s (%s) lacks shaderInt64, which Ember's kernels need", D->name,
             D->props.deviceName);
    goto done;
  }
  if (create_device(D) != 0 || em_vk_memory_init(D) != 0 || em_vk_command_init(D) != 0 ||
      em_vk_pipeline_init(D) != 0)
    goto done;
  __atomic_store_n(&D->started, true, __ATOMIC_RELEASE); /* read without the lock: vk_memory.c */
  rc = 0;
done:
  pthread_mutex_unlock(&D->lock);
  return rc;
}

/* The heap that holds tensors: the memory allocator's, or else the largest device-local one. */
static uint32_t tensor_heap(const vk_device *D) {
  if (D->started) return D->mem.heap_index;
  uint32_t best = 0;
  for (uint32_t h = 0; h < D->memprops.memoryHeapCount; h++) {
    const VkMemoryHeap *heap = &D->memprops.memoryHeaps[h];
    if ((heap->flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) &&
        heap->size > D->memprops.memoryHeaps[best].size)
      best = h;
  }
  return best;
}

void em_vk_info(void *ctx, em_device_info *out) {
  vk_device *D = ctx;
  snprintf(out->description, sizeof out->description, "%s", D->props.deviceName);
  snprintf(out->driver, sizeof out->driver, "%s", D->driver);
  out->features = D->features;
  out->subgroup_size = D->subgroup_size;
  uint32_t heap = tensor_heap(D);
  out->memory_total = (int64_t)D->memprops.memoryHeaps[heap].size;
  out->memory_budget = out->memory_total;
  out->memory_usage = -1;
  if (D->has_budget_ext) {
    VkPhysicalDeviceMemoryBudgetPropertiesEXT budget = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
    VkPhysicalDeviceMemoryProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2, .pNext = &budget};
    vkg.vkGetPhysicalDeviceMemoryProperties2(D->phys, &p2);
    out->memory_budget = (int64_t)budget.heapBudget[heap];
    out->memory_usage = (int64_t)budget.heapUsage[heap];
  }
  out->max_tensor_bytes = (int64_t)D->max_range;
  out->validation_messages =
      em_vk_validation_active ? __atomic_load_n(&em_vk_validation_messages, __ATOMIC_RELAXED) : -1;
  out->host_waits = (int64_t)__atomic_load_n(&D->host_waits, __ATOMIC_RELAXED);
  out->dispatches = (int64_t)__atomic_load_n(&D->dispatches, __ATOMIC_RELAXED);
  em_vk_coop_describe(D, out->tensor_cores, sizeof out->tensor_cores);
}
