/*
 * device.c: the device registry. Device 0 is the CPU; GPU backends register more at start-up.
 * Each device points at its kernel table (backend.h). The default device is where creation
 * functions allocate when the caller does not say.
 */
#include <stdio.h>
#include <stdlib.h>

#include "backend.h"

typedef struct device_entry {
  const em_backend *backend;
  char name[32];
} device_entry;

static device_entry devices[EM_MAX_DEVICES] = {
  [EM_CPU] = {&em_cpu_backend, "cpu"},
};
static int device_count = 1;
static int default_device = EM_CPU;

int em_device_count(void) { return device_count; }

const em_backend *em_device_backend(int device) {
  if (device < 0 || device >= device_count) return NULL;
  return devices[device].backend;
}

const char *em_device_name(int device) {
  if (device < 0 || device >= device_count) return "?";
  return devices[device].name;
}

int em_check_device(const char *fn, int device) {
  if (device < 0 || device >= device_count)
    return em_error("%s: invalid device %d (this process has %d device%s)", fn, device,
                    device_count, device_count == 1 ? "" : "s");
  return 0;
}

int em_device_parse(const char *spec) {
  if (spec == NULL) return em_error("device: expected a device name, got nil");
  if (strcmp(spec, "auto") == 0) {
    /* The best GPU once GPU backends exist; until then, the CPU. */
    return device_count > 1 ? 1 : EM_CPU;
  }
  for (int d = 0; d < device_count; d++)
    if (strcmp(spec, devices[d].name) == 0) return d;
  if (strncmp(spec, "vulkan", 6) == 0)
    return em_error("device: '%s' is not available (this build has no Vulkan devices yet)",
                    spec);
  return em_error("device: unknown device '%s' (expected cpu, auto or vulkan:N)", spec);
}

int em_default_device(void) { return default_device; }

int em_set_default_device(int device) {
  if (em_check_device("set_default_device", device) != 0) return -1;
  default_device = device;
  return 0;
}
