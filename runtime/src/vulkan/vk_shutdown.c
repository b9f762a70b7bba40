/*
 * vk_shutdown.c: tearing the Vulkan backend down (em_shutdown, runtime/src/lifecycle.c).
 *
 * Each started device is waited for, then its objects go in the reverse order of their
 * creation: the buffers that borrow its memory (staging, pinned, the error flag), the
 * profiler's query pools, pipelines and layouts (the pipeline cache file is written first),
 * command buffers and fences, the memory slabs, and the logical device. The instance goes
 * last. Shutdown refuses while any storage still lives on a device, before destroying
 * anything, so a refusal leaves every device working.
 */
#include <stdio.h>
#include <stdlib.h>

#include "vk.h"

/* Waits for D's work; -1 with an error when it cannot, or when storages are alive on it. */
static int quiesce(vk_device *D) {
  pthread_mutex_lock(&D->lock);
  int rc = em_vk_wait_idle(D);
  if (rc == 0 && em_vk_has_live_memory(D))
    rc = em_error("shutdown: tensors are still alive on %s (release them first)", D->name);
  pthread_mutex_unlock(&D->lock);
  return rc;
}

static void destroy_device(vk_device *D) {
  pthread_mutex_lock(&D->lock);
  em_vk_staging_release_all(D);
  em_vk_pinned_destroy(D);
  em_vk_flag_destroy(D);
  em_vk_profile_destroy(D);
  em_vk_pipeline_destroy(D);
  em_vk_command_destroy(D);
  em_vk_memory_destroy(D);
  D->fn.vkDestroyDevice(D->dev, NULL);
  D->dev = VK_NULL_HANDLE;
  D->started = false;
  pthread_mutex_unlock(&D->lock);
}

int em_vk_shutdown_devices(vk_device **devices, int n) {
  for (int i = 0; i < n; i++)
    if (devices[i] && devices[i]->started && quiesce(devices[i]) != 0) return -1;
  for (int i = 0; i < n; i++) {
    vk_device *D = devices[i];
    if (D == NULL) continue;
    if (D->started) destroy_device(D);
    pthread_mutex_destroy(&D->lock);
    free(D);
    devices[i] = NULL;
  }
  return 0;
}
