/*
 * device.c: the device registry. Device 0 is the CPU; GPU backends register more when they are
 * first needed (device.h). Each device points at its kernel table (backend.h). The default
 * device is where creation functions allocate when the caller does not say.
 *
 * Choosing a device (docs/devices.md):
 *  - "auto" is the best GPU (discrete, then integrated, virtual, other), never a CPU-type
 *    Vulkan driver such as lavapipe; with no GPU it is the CPU. When that GPU fails to start,
 *    auto falls back to the CPU with one warning line, or fails in strict mode.
 *  - "vulkan" is the best Vulkan device of any type (CPU-type drivers last), "vulkan:N" the
 *    N-th; a named device that cannot start is an error.
 *  - EMBER_DEVICE sets the default device at start-up, EMBER_STRICT_DEVICE=1 strict mode.
 * Discovery and start-up happen lazily, under one lock, so a CPU-only run never loads Vulkan.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "backend.h"
#include "device.h"

typedef struct device_entry {
  const em_backend *backend;
  char name[32];
  em_device_desc desc;     /* GPUs only */
  int state;               /* 0 not started, 1 started, -1 failed to start */
  char error[256];         /* why it failed */
} device_entry;

static device_entry devices[EM_MAX_DEVICES] = {
  [EM_CPU] = {&em_cpu_backend, "cpu", {0}, 1, ""},
};
static int device_count = 1;
static int default_device = EM_CPU;

/* Discovery and starting devices may be reentered (a backend registers while it discovers). */
static pthread_mutex_t registry_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static int discovered;       /* atomic: GPU backends have been asked for their devices */
static int strict_mode = -1; /* -1 until EMBER_STRICT_DEVICE has been read */
static int fallback_warned;

static void discover(void) {
  if (__atomic_load_n(&discovered, __ATOMIC_ACQUIRE)) return;
  pthread_mutex_lock(&registry_lock);
  if (!discovered) {
    em_vulkan_discover();
    __atomic_store_n(&discovered, 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&registry_lock);
}

int em_device_register(const em_device_desc *desc) {
  /* The slots every other op builds on: without them a backend cannot hold a tensor. */
  const em_backend *be = desc->backend;
  if (!be->storage_alloc || !be->storage_free || !be->read || !be->write || !be->copy || !be->fill)
    return em_error("device: backend %s lacks one of the required slots (storage_alloc, "
                    "storage_free, read, write, copy, fill)", be->name);
  pthread_mutex_lock(&registry_lock);
  int id = -1;
  if (device_count < EM_MAX_DEVICES) {
    id = device_count;
    device_entry *e = &devices[id];
    e->backend = desc->backend;
    e->desc = *desc;
    e->state = 0;
    snprintf(e->name, sizeof e->name, "%s", desc->backend->name);
    __atomic_store_n(&device_count, id + 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&registry_lock);
  return id;
}

int em_device_count(void) {
  discover();
  return device_count;
}

const em_backend *em_device_backend(int device) {
  if (device < 0 || device >= __atomic_load_n(&device_count, __ATOMIC_ACQUIRE)) return NULL;
  return devices[device].backend;
}

const char *em_device_name(int device) {
  if (device < 0 || device >= __atomic_load_n(&device_count, __ATOMIC_ACQUIRE)) return "?";
  return devices[device].name;
}

void *em_device_ctx(int device) {
  if (device <= EM_CPU || device >= __atomic_load_n(&device_count, __ATOMIC_ACQUIRE)) return NULL;
  return devices[device].desc.ctx;
}

int em_check_device(const char *fn, int device) {
  int count = __atomic_load_n(&device_count, __ATOMIC_ACQUIRE); /* discovery may run meanwhile */
  if (device < 0 || device >= count)
    return em_error("%s: invalid device %d (this process has %d device%s)", fn, device,
                    count, count == 1 ? "" : "s");
  return 0;
}

/* ---- starting devices ---------------------------------------------------------------------- */

int em_device_start(int device) {
  if (em_check_device("device", device) != 0) return -1;
  device_entry *e = &devices[device];
  if (__atomic_load_n(&e->state, __ATOMIC_ACQUIRE) == 1) return 0;
  pthread_mutex_lock(&registry_lock);
  int rc = 0;
  if (e->state == 0) {
    if (e->desc.start(e->desc.ctx) == 0) {
      __atomic_store_n(&e->state, 1, __ATOMIC_RELEASE);
    } else {
      snprintf(e->error, sizeof e->error, "%s", em_last_error());
      e->state = -1;
    }
  }
  if (e->state == -1) rc = em_error("%s", e->error);
  pthread_mutex_unlock(&registry_lock);
  return rc;
}

int em_strict_device(void) {
  if (__atomic_load_n(&strict_mode, __ATOMIC_ACQUIRE) < 0) {
    const char *env = getenv("EMBER_STRICT_DEVICE");
    int strict = env != NULL && env[0] != '\0' && strcmp(env, "0") != 0 &&
                 strcmp(env, "false") != 0 && strcmp(env, "no") != 0;
    int expected = -1;
    __atomic_compare_exchange_n(&strict_mode, &expected, strict, false, __ATOMIC_ACQ_REL,
                                __ATOMIC_ACQUIRE);
  }
  return strict_mode;
}

int em_set_strict_device(int strict) {
  int old = em_strict_device();
  __atomic_store_n(&strict_mode, strict != 0, __ATOMIC_RELEASE);
  return old;
}

/* ---- choosing ------------------------------------------------------------------------------ */

/* Preference among GPUs; CPU-type drivers only when a Vulkan device was asked for by name. */
static int rank(em_device_type type, bool for_auto) {
  switch (type) {
  case EM_DEVICE_DISCRETE_GPU: return 5;
  case EM_DEVICE_INTEGRATED_GPU: return 4;
  case EM_DEVICE_VIRTUAL_GPU: return 3;
  case EM_DEVICE_OTHER_GPU: return 2;
  case EM_DEVICE_SOFTWARE_GPU: return for_auto ? -1 : 1;
  default: return -1;
  }
}

/* The best registered GPU (the first one among equals), or -1. */
static int best_gpu(bool for_auto) {
  int best = -1, best_rank = 0;
  for (int d = 1; d < device_count; d++) {
    int r = rank(devices[d].desc.type, for_auto);
    if (r > best_rank) best = d, best_rank = r;
  }
  return best;
}

/* "(this machine has 2 Vulkan devices: vulkan:0, vulkan:1)" or why it has none. */
static const char *inventory(char *buf, size_t cap) {
  int n = device_count - 1;
  if (n == 0) {
    const char *note = em_vulkan_discovery_note();
    snprintf(buf, cap, "(no Vulkan devices%s%s)", note[0] ? ": " : "", note);
    return buf;
  }
  size_t used = (size_t)snprintf(buf, cap, "(this machine has %d Vulkan device%s:", n,
                                 n == 1 ? "" : "s");
  for (int d = 1; d < device_count && used < cap; d++)
    used += (size_t)snprintf(buf + used, cap - used, " %s%s", devices[d].name,
                             d + 1 < device_count ? "," : ")");
  return buf;
}

static int start_named(int device) {
  if (em_device_start(device) == 0) return device;
  return em_error("device: %s cannot start: %s", devices[device].name, devices[device].error);
}

static int choose_auto(void) {
  int g = best_gpu(true);
  if (g < 0) return EM_CPU;
  if (em_device_start(g) == 0) return g;
  if (em_strict_device())
    return em_error("device: auto chose %s, which cannot start (strict mode): %s",
                    devices[g].name, devices[g].error);
  if (!__atomic_exchange_n(&fallback_warned, 1, __ATOMIC_ACQ_REL))
    fprintf(stderr, "ember: warning: %s cannot start (%s); using the cpu\n", devices[g].name,
            devices[g].error);
  return EM_CPU;
}

int em_device_parse(const char *spec) {
  if (spec == NULL) return em_error("device: expected a device name, got nil");
  if (strcmp(spec, "cpu") == 0) return EM_CPU;
  discover();
  if (strcmp(spec, "auto") == 0) return choose_auto();
  char buf[256];
  if (strcmp(spec, "vulkan") == 0) {
    int g = best_gpu(false);
    if (g < 0) return em_error("device: no Vulkan device %s", inventory(buf, sizeof buf));
    return start_named(g);
  }
  for (int d = 1; d < device_count; d++)
    if (strcmp(spec, devices[d].name) == 0) return start_named(d);
  if (strncmp(spec, "vulkan:", 7) == 0)
    return em_error("device: '%s' is not available %s", spec, inventory(buf, sizeof buf));
  return em_error("device: unknown device '%s' (expected cpu, auto, vulkan or vulkan:N)", spec);
}

/* ---- the default device -------------------------------------------------------------------- */

static int startup_state; /* 0 not run, 1 done, -1 failed (startup_error says why) */
static char startup_error[300];

int em_device_startup(void) {
  if (__atomic_load_n(&startup_state, __ATOMIC_ACQUIRE) == 0) {
    pthread_mutex_lock(&registry_lock);
    if (startup_state == 0) {
      int state = 1;
      em_strict_device();
      const char *env = getenv("EMBER_DEVICE");
      if (env != NULL && env[0] != '\0') {
        int id = em_device_parse(env);
        if (id >= 0) {
          __atomic_store_n(&default_device, id, __ATOMIC_RELAXED);
        } else {
          snprintf(startup_error, sizeof startup_error, "EMBER_DEVICE=%s: %s", env,
                   em_last_error());
          state = -1;
        }
      }
      __atomic_store_n(&startup_state, state, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&registry_lock);
  }
  if (startup_state < 0) return em_error("%s", startup_error);
  return 0;
}

int em_default_device(void) {
  if (__builtin_expect(__atomic_load_n(&startup_state, __ATOMIC_ACQUIRE) == 0, 0) &&
      em_device_startup() != 0)
    fprintf(stderr, "ember: warning: %s; using the cpu\n", startup_error);
  return __atomic_load_n(&default_device, __ATOMIC_RELAXED); /* process-wide */
}

int em_set_default_device(int device) {
  if (em_check_device("set_default_device", device) != 0) return -1;
  if (em_device_start(device) != 0) {
    em_error_prefix("set_default_device");
    return -1;
  }
  em_device_startup(); /* EMBER_DEVICE must not override this choice later */
  __atomic_store_n(&default_device, device, __ATOMIC_RELAXED);
  return 0;
}

/* ---- information and synchronization ------------------------------------------------------- */

/* The CPU's model name from /proc/cpuinfo, or "". */
static void cpu_model(char *buf, size_t cap) {
  buf[0] = '\0';
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f == NULL) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10) != 0) continue;
    const char *v = strchr(line, ':');
    if (v == NULL) break;
    v++;
    while (*v == ' ' || *v == '\t') v++;
    snprintf(buf, cap, "%s", v);
    buf[strcspn(buf, "\n")] = '\0';
    break;
  }
  fclose(f);
}

int em_device_info_get(int device, em_device_info *out) {
  if (out == NULL) return em_error("device_info: expected an output struct, got NULL");
  if (device >= device_count) discover();
  if (em_check_device("device_info", device) != 0) return -1;
  memset(out, 0, sizeof *out);
  device_entry *e = &devices[device];
  snprintf(out->name, sizeof out->name, "%s", e->name);
  out->started = __atomic_load_n(&e->state, __ATOMIC_ACQUIRE);
  out->memory_usage = -1;
  out->max_tensor_bytes = -1;
  if (device == EM_CPU) {
    out->type = EM_DEVICE_CPU;
    cpu_model(out->description, sizeof out->description);
    out->features = EM_FEATURE_FLOAT64 | EM_FEATURE_INT64 | EM_FEATURE_STORAGE16 | EM_FEATURE_INT8;
    long page = sysconf(_SC_PAGESIZE);
    out->memory_total = (int64_t)sysconf(_SC_PHYS_PAGES) * page;
    out->memory_budget = (int64_t)sysconf(_SC_AVPHYS_PAGES) * page;
    return 0;
  }
  out->type = e->desc.type;
  if (out->started < 0) snprintf(out->error, sizeof out->error, "%s", e->error);
  e->desc.info(e->desc.ctx, out);
  return 0;
}

int em_synchronize(int device) {
  if (device != -1 && em_check_device("synchronize", device) != 0) return -1;
  for (int d = 1; d < device_count; d++) {
    if ((device != -1 && d != device) || __atomic_load_n(&devices[d].state, __ATOMIC_ACQUIRE) != 1)
      continue;
    if (devices[d].desc.synchronize(devices[d].desc.ctx) != 0) return -1;
  }
  return 0;
}

int em_flush(int device) {
  if (device != -1 && em_check_device("flush", device) != 0) return -1;
  for (int d = 1; d < device_count; d++) {
    if ((device != -1 && d != device) || __atomic_load_n(&devices[d].state, __ATOMIC_ACQUIRE) != 1 ||
        devices[d].desc.flush == NULL)
      continue;
    if (devices[d].desc.flush(devices[d].desc.ctx) != 0) return -1;
  }
  return 0;
}

int em_device_release_cache(int device) {
  if (device <= EM_CPU || device >= device_count) return 0;
  if (__atomic_load_n(&devices[device].state, __ATOMIC_ACQUIRE) != 1) return 0;
  return devices[device].desc.empty_cache(devices[device].desc.ctx);
}
