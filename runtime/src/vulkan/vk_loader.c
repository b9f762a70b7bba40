/*
 * vk_loader.c: finds the Vulkan loader at run time (dlopen "libvulkan.so.1", or the path in
 * EMBER_VK_LOADER) and fills the function tables from vkGetInstanceProcAddr and
 * vkGetDeviceProcAddr. libember never links libvulkan, so it loads and runs on machines
 * without Vulkan: there, discovery just finds no devices.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "vk.h"

vk_global_fns vkg;
static void *loader_handle;

int em_vk_load_loader(char *why, size_t cap) {
  if (loader_handle != NULL) return 0;
  const char *path = getenv("EMBER_VK_LOADER");
  if (path == NULL || path[0] == '\0') path = "libvulkan.so.1";
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    snprintf(why, cap, "the Vulkan loader %s could not be loaded", path);
    return -1;
  }
  /* dlsym returns void *; converting it to a function pointer is what POSIX prescribes. */
  void *sym = dlsym(h, "vkGetInstanceProcAddr");
  if (sym == NULL) {
    snprintf(why, cap, "%s has no vkGetInstanceProcAddr", path);
    dlclose(h);
    return -1;
  }
  memcpy(&vkg.vkGetInstanceProcAddr, &sym, sizeof sym);
#define LOAD_GLOBAL(name) vkg.name = (PFN_##name)vkg.vkGetInstanceProcAddr(NULL, #name);
  VK_GLOBAL_FUNCS(LOAD_GLOBAL)
#undef LOAD_GLOBAL
  if (vkg.vkCreateInstance == NULL || vkg.vkEnumerateInstanceExtensionProperties == NULL) {
    snprintf(why, cap, "%s lacks the Vulkan 1.0 entry points", path);
    dlclose(h);
    return -1;
  }
  loader_handle = h;
  return 0;
}

int em_vk_load_instance_fns(VkInstance instance) {
#define LOAD_INSTANCE(name) vkg.name = (PFN_##name)vkg.vkGetInstanceProcAddr(instance, #name);
  VK_INSTANCE_FUNCS(LOAD_INSTANCE)
  VK_DEBUG_FUNCS(LOAD_INSTANCE)
#undef LOAD_INSTANCE
#define CHECK_INSTANCE(name) if (vkg.name == NULL) return em_error("vulkan: the loader lacks %s", #name);
  VK_INSTANCE_FUNCS(CHECK_INSTANCE)
#undef CHECK_INSTANCE
  return 0;
}

int em_vk_load_device_fns(VkDevice device, vk_device_fns *fn, bool push_descriptors) {
#define LOAD_DEVICE(name) fn->name = (PFN_##name)vkg.vkGetDeviceProcAddr(device, #name);
  VK_DEVICE_FUNCS(LOAD_DEVICE)
#undef LOAD_DEVICE
#define CHECK_DEVICE(name) if (fn->name == NULL) return em_error("vulkan: the driver lacks %s", #name);
  VK_DEVICE_FUNCS(CHECK_DEVICE)
#undef CHECK_DEVICE
  fn->vkCmdPushDescriptorSetKHR = NULL;
  if (push_descriptors)
    fn->vkCmdPushDescriptorSetKHR = (PFN_vkCmdPushDescriptorSetKHR)vkg.vkGetDeviceProcAddr(
        device, "vkCmdPushDescriptorSetKHR");
  return 0;
}

const char *em_vk_result_name(VkResult r) {
  switch (r) {
  case VK_SUCCESS: return "VK_SUCCESS";
  case VK_NOT_READY: return "VK_NOT_READY";
  case VK_TIMEOUT: return "VK_TIMEOUT";
  case VK_INCOMPLETE: return "VK_INCOMPLETE";
  case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
  case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
  case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
  case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
  case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
  case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
  case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
  case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
  case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
  case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
  case VK_ERROR_FORMAT_NOT_SUPPORTED: return "VK_ERROR_FORMAT_NOT_SUPPORTED";
  case VK_ERROR_FRAGMENTED_POOL: return "VK_ERROR_FRAGMENTED_POOL";
  case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
  default: return "VK_ERROR_UNKNOWN";
  }
}

unsigned em_vk_test_hooks(void) {
  static int cached = -1; /* relaxed atomics: threads may ask at once, all get the same answer */
  int c = __atomic_load_n(&cached, __ATOMIC_RELAXED);
  if (c >= 0) return (unsigned)c;
  unsigned hooks = 0;
  const char *env = getenv("EMBER_VK_TEST");
  if (env != NULL) {
    if (strstr(env, "fail-start")) hooks |= VK_TEST_FAIL_START;
    if (strstr(env, "software-as-gpu")) hooks |= VK_TEST_SOFTWARE_AS_GPU;
    if (strstr(env, "no-push-descriptors")) hooks |= VK_TEST_NO_PUSH_DESCRIPTORS;
    if (strstr(env, "small-grid")) hooks |= VK_TEST_SMALL_GRID;
    if (strstr(env, "gpu-copies")) hooks |= VK_TEST_GPU_COPIES;
  }
  __atomic_store_n(&cached, (int)hooks, __ATOMIC_RELAXED);
  return hooks;
}

int em_vk_test_empty_slots(em_backend *table) {
  static const char key[] = "empty-slot:";
  const char *env = getenv("EMBER_VK_TEST");
  for (const char *p = env ? strstr(env, key) : NULL; p != NULL; p = strstr(p, key)) {
    p += sizeof key - 1;
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)strcspn(p, ","), p);
    if (em_backend_slot_clear(table, name) != 0) {
      em_error_prefix("EMBER_VK_TEST");
      return -1;
    }
  }
  return 0;
}
