/*
 * device.h: how GPU backends join the device registry (device.c).
 *
 * The CPU is device 0 and always present. GPU backends are discovered lazily: the first time a
 * caller lists devices or names a GPU ("vulkan", "vulkan:1", "auto"), device.c asks each
 * backend to discover its devices, and the backend registers one entry per device with
 * em_device_register. Registering is cheap (no device is started); em_device_start starts one
 * (for Vulkan: the logical device, queues, allocator), which can fail, and the registry then
 * decides between the fallback to the CPU (auto) and an error (a named device, strict mode).
 */
#ifndef EMBER_DEVICE_H
#define EMBER_DEVICE_H

#include "internal.h"

/* What a backend tells the registry about one of its devices. Callbacks get `ctx` back. */
typedef struct em_device_desc {
  const em_backend *backend;     /* its kernel table; backend->name is the device's name */
  em_device_type type;           /* for the choice rules of "auto" and "vulkan" */
  void *ctx;
  /* Starts the device (idempotent): 0, or -1 with an error saying why it cannot start. */
  int (*start)(void *ctx);
  /* Fills what it knows beyond the name, type and started flag. */
  void (*info)(void *ctx, em_device_info *out);
  /* Waits for all queued work; frees the allocator's cached blocks. Called only once started. */
  int (*synchronize)(void *ctx);
  int (*empty_cache)(void *ctx);
  /* Starts recorded work without waiting for it (NULL: the device has nothing to start). */
  int (*flush)(void *ctx);
} em_device_desc;

/* Adds a device named desc->backend->name; returns its id, or -1 when the table is full. */
int em_device_register(const em_device_desc *desc);

/* The desc->ctx of a registered device (NULL for the CPU or a bad id). */
void *em_device_ctx(int device);
/* Frees the device's cached memory (the CPU's own cache is alloc.c's). */
int em_device_release_cache(int device);

/* Discovery entry point of the Vulkan backend (vulkan/vk_instance.c): registers every Vulkan
 * device with a compute queue. Returns the number registered (0 without a loader). */
int em_vulkan_discover(void);
/* Why discovery found nothing ("the Vulkan loader libvulkan.so.1 is not installed", ...), or
 * "" when it found devices. */
const char *em_vulkan_discovery_note(void);
/* Destroys the Vulkan devices and instance (vk_instance.c); -1 with nothing destroyed while
 * storages are alive on a device. */
int em_vulkan_shutdown(void);
/* em_shutdown's part in the registry (device.c): under the registry lock, shuts the Vulkan
 * backend down and forgets its devices, so that the next need discovers them again. */
int em_device_shutdown(void);

#endif
