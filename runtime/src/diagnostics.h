/*
 * diagnostics.h: how each backend describes the kernels it picks for em_device_plan_get
 * (diagnostics.c). The CPU's plan is cpu/plan.c, Vulkan's vulkan/vk_plan.c; both append
 * "key=value" entries with em_plan_add, so the format lives in one place.
 */
#ifndef EMBER_DIAGNOSTICS_H
#define EMBER_DIAGNOSTICS_H

#include <stdio.h>

#include "internal.h"

/* Appends "key=value" to out->kernels, "; "-separated; a full buffer ends in "...". */
static inline void em_plan_add(em_device_plan *out, const char *key, const char *value) {
  size_t cap = sizeof out->kernels, at = strlen(out->kernels);
  if (at + 4 >= cap) return;
  int n = snprintf(out->kernels + at, cap - at, "%s%s=%s", at ? "; " : "", key, value);
  if (n < 0 || (size_t)n >= cap - at) memcpy(out->kernels + cap - 4, "...", 4);
}

void em_cpu_plan(em_device_plan *out);
/* ctx: the device's vk_device (em_device_ctx). */
void em_vk_plan(void *ctx, em_device_plan *out);

#endif
