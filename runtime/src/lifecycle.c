/*
 * lifecycle.c: em_init and em_shutdown, the optional ends of Ember's lazy start-up.
 *
 * Nothing needs initializing (devices start on first need: device.c), so em_init only moves
 * that start-up to a point the host chooses. em_shutdown gives back what the process holds
 * for Ember beyond live tensors: it waits for the devices, destroys the Vulkan devices and
 * instance (vulkan/vk_shutdown.c), forgets them in the registry so that a later need
 * discovers them again, and frees the CPU allocator's caches. It refuses, destroying nothing,
 * while storages live on a Vulkan device; CPU tensors stay valid throughout.
 */
#include "device.h"

int em_init(void) {
  if (em_device_startup() != 0) {
    em_error_prefix("init");
    return -1;
  }
  if (em_device_start(em_default_device()) != 0) {
    em_error_prefix("init");
    return -1;
  }
  return 0;
}

int em_shutdown(void) {
  if (em_device_shutdown() != 0) return -1;
  em_cpu_cache_release();
  return 0;
}
