/*
 * vk_instance.c: the Vulkan instance and discovery. Discovery runs once, the first time the
 * registry needs GPU devices (device.c): it loads the loader, creates an instance, and registers
 * every physical device that has a compute queue as "vulkan:N", with what the choice rules and
 * ember.devices() need (type, memory, features). Nothing is started here; a device is started
 * on first use (vk_device.c).
 *
 * Validation: with EMBER_VK_VALIDATION=1 the Khronos validation layer is enabled, with its
 * synchronization validation (which checks the barriers vk_command.c places), and with it
 * (or a layer named in VK_INSTANCE_LAYERS) a debug-utils messenger prints every message as one
 * line "ember: vulkan validation: ..." on stderr and counts it (em_device_info). The test suite
 * runs under it and requires zero messages.
 *
 * Debian 12's headers (1.3.239) predate VK_KHR_cooperative_matrix and VK_KHR_shader_bfloat16:
 * those are detected by extension name only, no structures needed.
 */
#include <stdio.h>
#include <stdlib.h>

#include "vk.h"

VkInstance em_vk_instance;
int64_t em_vk_validation_messages;
bool em_vk_validation_active;
static char discovery_note[256];
static VkDebugUtilsMessengerEXT messenger;
static vk_device *by_id[EM_MAX_DEVICES];

vk_device *em_vk_device(int device_id) {
  if (device_id <= 0 || device_id >= EM_MAX_DEVICES) return NULL;
  return by_id[device_id];
}

const char *em_vulkan_discovery_note(void) { return discovery_note; }

static VKAPI_ATTR VkBool32 VKAPI_CALL on_debug_message(
    VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT types,
    const VkDebugUtilsMessengerCallbackDataEXT *data, void *user) {
  (void)severity, (void)types, (void)user;
  __atomic_add_fetch(&em_vk_validation_messages, 1, __ATOMIC_RELAXED);
  fprintf(stderr, "ember: vulkan validation: %s\n", data && data->pMessage ? data->pMessage : "?");
  return VK_FALSE;
}

static bool has_instance_extension(const VkExtensionProperties *exts, uint32_t n, const char *name) {
  for (uint32_t i = 0; i < n; i++)
    if (strcmp(exts[i].extensionName, name) == 0) return true;
  return false;
}

static bool validation_layer_present(void) {
  uint32_t n = 0;
  if (vkg.vkEnumerateInstanceLayerProperties == NULL ||
      vkg.vkEnumerateInstanceLayerProperties(&n, NULL) != VK_SUCCESS || n == 0)
    return false;
  VkLayerProperties *layers = calloc(n, sizeof *layers);
  bool found = false;
  if (layers && vkg.vkEnumerateInstanceLayerProperties(&n, layers) == VK_SUCCESS)
    for (uint32_t i = 0; i < n && !found; i++)
      found = strcmp(layers[i].layerName, "VK_LAYER_KHRONOS_validation") == 0;
  free(layers);
  return found;
}

static bool layer_has_extension(const char *layer, const char *name) {
  uint32_t n = 0;
  if (vkg.vkEnumerateInstanceExtensionProperties(layer, &n, NULL) != VK_SUCCESS || n == 0) return false;
  VkExtensionProperties *exts = calloc(n, sizeof *exts);
  bool found = exts && vkg.vkEnumerateInstanceExtensionProperties(layer, &n, exts) == VK_SUCCESS &&
               has_instance_extension(exts, n, name);
  free(exts);
  return found;
}

static int create_instance(void) {
  uint32_t version = VK_API_VERSION_1_0;
  if (vkg.vkEnumerateInstanceVersion) vkg.vkEnumerateInstanceVersion(&version);
  if (version < VK_API_VERSION_1_1) {
    snprintf(discovery_note, sizeof discovery_note,
             "the Vulkan loader supports version 1.0 only; Ember needs 1.1");
    return -1;
  }
  const char *want_validation = getenv("EMBER_VK_VALIDATION");
  bool validation = want_validation && want_validation[0] && strcmp(want_validation, "0") != 0;
  const char *env_layers = getenv("VK_INSTANCE_LAYERS");
  const char *layers[1];
  uint32_t nlayers = 0;
  if (validation) {
    if (validation_layer_present()) layers[nlayers++] = "VK_LAYER_KHRONOS_validation";
    else fprintf(stderr, "ember: warning: EMBER_VK_VALIDATION is set, but the Khronos "
                         "validation layer is not installed\n");
  }
  uint32_t next = 0;
  vkg.vkEnumerateInstanceExtensionProperties(NULL, &next, NULL);
  VkExtensionProperties *exts = calloc(next ? next : 1, sizeof *exts);
  if (exts) vkg.vkEnumerateInstanceExtensionProperties(NULL, &next, exts);
  bool debug = (nlayers > 0 || (env_layers && strstr(env_layers, "validation"))) && exts &&
               has_instance_extension(exts, next, VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
  free(exts);
  /* Under EMBER_VK_VALIDATION, synchronization validation too: it checks the barriers. */
  const char *ext_names[2] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME, NULL};
  uint32_t next_enabled = debug ? 1 : 0;
  VkValidationFeatureEnableEXT enables[1] = {VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
  VkValidationFeaturesEXT features = {
    .sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT,
    .enabledValidationFeatureCount = 1,
    .pEnabledValidationFeatures = enables,
  };
  bool sync_validation = nlayers > 0 && layer_has_extension("VK_LAYER_KHRONOS_validation",
                                                             VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME);
  if (sync_validation) ext_names[next_enabled++] = VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME;
  VkApplicationInfo app = {
    .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
    .pApplicationName = "ember",
    .pEngineName = "ember",
    /* 1.3 where the loader has it: the coopmat2 kernel is SPIR-V 1.6 */
    .apiVersion = version >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3
                  : version >= VK_API_VERSION_1_2 ? VK_API_VERSION_1_2 : VK_API_VERSION_1_1,
  };
  VkInstanceCreateInfo ci = {
    .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
    .pApplicationInfo = &app,
    .enabledLayerCount = nlayers,
    .ppEnabledLayerNames = layers,
    .enabledExtensionCount = next_enabled,
    .ppEnabledExtensionNames = ext_names,
  };
  if (sync_validation) ci.pNext = &features;
  VkResult r = vkg.vkCreateInstance(&ci, NULL, &em_vk_instance);
  if (r != VK_SUCCESS) {
    snprintf(discovery_note, sizeof discovery_note, "vkCreateInstance failed (%s)",
             em_vk_result_name(r));
    return -1;
  }
  if (em_vk_load_instance_fns(em_vk_instance) != 0) {
    snprintf(discovery_note, sizeof discovery_note, "%s", em_last_error());
    return -1;
  }
  if (debug && vkg.vkCreateDebugUtilsMessengerEXT) {
    VkDebugUtilsMessengerCreateInfoEXT mi = {
      .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
      .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                         VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
      .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
      .pfnUserCallback = on_debug_message,
    };
    if (vkg.vkCreateDebugUtilsMessengerEXT(em_vk_instance, &mi, NULL, &messenger) == VK_SUCCESS)
      em_vk_validation_active = true;
  }
  return 0;
}

/* ---- describing a physical device ---------------------------------------------------------- */

static bool has_extension(const VkExtensionProperties *exts, uint32_t n, const char *name) {
  return has_instance_extension(exts, n, name);
}

static em_device_type device_type(VkPhysicalDeviceType t) {
  switch (t) {
  case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return EM_DEVICE_DISCRETE_GPU;
  case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return EM_DEVICE_INTEGRATED_GPU;
  case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return EM_DEVICE_VIRTUAL_GPU;
  case VK_PHYSICAL_DEVICE_TYPE_CPU:
    return (em_vk_test_hooks() & VK_TEST_SOFTWARE_AS_GPU) ? EM_DEVICE_INTEGRATED_GPU
                                                          : EM_DEVICE_SOFTWARE_GPU;
  default: return EM_DEVICE_OTHER_GPU;
  }
}

/* Fills D from the physical device: false when it has no compute queue. */
static bool describe(vk_device *D, VkPhysicalDevice phys) {
  D->phys = phys;
  uint32_t nq = 0;
  vkg.vkGetPhysicalDeviceQueueFamilyProperties(phys, &nq, NULL);
  VkQueueFamilyProperties *qf = calloc(nq ? nq : 1, sizeof *qf);
  if (qf == NULL) return false;
  vkg.vkGetPhysicalDeviceQueueFamilyProperties(phys, &nq, qf);
  int family = -1;
  for (uint32_t i = 0; i < nq && family < 0; i++)
    if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) family = (int)i;
  if (family >= 0) D->timestamp_bits = qf[family].timestampValidBits;
  free(qf);
  if (family < 0) return false;
  D->queue_family = (uint32_t)family;

  uint32_t next = 0;
  vkg.vkEnumerateDeviceExtensionProperties(phys, NULL, &next, NULL);
  VkExtensionProperties *exts = calloc(next ? next : 1, sizeof *exts);
  if (exts == NULL) return false;
  vkg.vkEnumerateDeviceExtensionProperties(phys, NULL, &next, exts);
  D->has_push_ext = has_extension(exts, next, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
  D->has_budget_ext = has_extension(exts, next, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  bool has_driver_props = has_extension(exts, next, VK_KHR_DRIVER_PROPERTIES_EXTENSION_NAME);
  if (has_extension(exts, next, "VK_KHR_cooperative_matrix") ||
      has_extension(exts, next, "VK_NV_cooperative_matrix"))
    D->features |= EM_FEATURE_COOPERATIVE_MATRIX;
  if (has_extension(exts, next, "VK_KHR_shader_bfloat16")) D->features |= EM_FEATURE_BFLOAT16;
  free(exts);

  VkPhysicalDeviceDriverProperties driver = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  VkPhysicalDeviceSubgroupProperties subgroup = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceMaintenance3Properties m3 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
  subgroup.pNext = &m3;
  if (has_driver_props) m3.pNext = &driver;
  VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &subgroup};
  vkg.vkGetPhysicalDeviceProperties2(phys, &p2);
  D->props = p2.properties;
  D->subgroup_size = subgroup.subgroupSize;
  D->max_alloc = m3.maxMemoryAllocationSize;
  D->max_range = D->props.limits.maxStorageBufferRange;
  if (has_driver_props)
    snprintf(D->driver, sizeof D->driver, "%.60s %.60s", driver.driverName, driver.driverInfo);
  else
    snprintf(D->driver, sizeof D->driver, "driver version %u", D->props.driverVersion);
  D->type = device_type(D->props.deviceType);

  VkPhysicalDevice16BitStorageFeatures s16 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  VkPhysicalDeviceShaderFloat16Int8Features f16 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES, .pNext = &s16};
  VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f16};
  vkg.vkGetPhysicalDeviceFeatures2(phys, &f2);
  if (f2.features.shaderFloat64) D->features |= EM_FEATURE_FLOAT64;
  if (f2.features.shaderInt64) D->features |= EM_FEATURE_INT64;
  if (f16.shaderFloat16) D->features |= EM_FEATURE_FLOAT16;
  if (f16.shaderInt8) D->features |= EM_FEATURE_INT8;
  if (s16.storageBuffer16BitAccess) D->features |= EM_FEATURE_STORAGE16;
  if (D->has_push_ext) D->features |= EM_FEATURE_PUSH_DESCRIPTORS;
  if (D->has_budget_ext) D->features |= EM_FEATURE_MEMORY_BUDGET;
  vkg.vkGetPhysicalDeviceMemoryProperties(phys, &D->memprops);
  return true;
}

int em_vulkan_discover(void) {
  if (em_vk_load_loader(discovery_note, sizeof discovery_note) != 0) return 0;
  if (create_instance() != 0) return 0;
  uint32_t n = 0;
  VkResult r = vkg.vkEnumeratePhysicalDevices(em_vk_instance, &n, NULL);
  if (r != VK_SUCCESS || n == 0) {
    snprintf(discovery_note, sizeof discovery_note, "the Vulkan loader found no devices");
    return 0;
  }
  VkPhysicalDevice *phys = calloc(n, sizeof *phys);
  if (phys == NULL) return 0;
  vkg.vkEnumeratePhysicalDevices(em_vk_instance, &n, phys);
  int registered = 0;
  for (uint32_t i = 0; i < n; i++) {
    vk_device *D = calloc(1, sizeof *D);
    if (D == NULL) break;
    if (!describe(D, phys[i])) {
      free(D);
      continue;
    }
    D->index = registered;
    snprintf(D->name, sizeof D->name, "vulkan:%d", registered);
    D->table = em_vulkan_backend;
    D->table.name = D->name;
    if (em_vk_test_empty_slots(&D->table) != 0) { /* a misspelt hook must not pass unseen */
      snprintf(discovery_note, sizeof discovery_note, "%s", em_last_error());
      free(D);
      break;
    }
    pthread_mutex_init(&D->lock, NULL);
    em_device_desc desc = {
      .backend = &D->table,
      .type = D->type,
      .ctx = D,
      .start = em_vk_start,
      .info = em_vk_info,
      .synchronize = em_vk_synchronize,
      .flush = em_vk_flush,
      .empty_cache = em_vk_empty_cache,
    };
    int id = em_device_register(&desc);
    if (id < 0) {
      free(D);
      break;
    }
    D->id = id;
    by_id[id] = D;
    registered++;
  }
  free(phys);
  if (registered == 0 && discovery_note[0] == '\0')
    snprintf(discovery_note, sizeof discovery_note, "no Vulkan device has a compute queue");
  return registered;
}

/* Destroys every device (vk_shutdown.c), then the messenger and the instance; discovery can
 * then run again. 0 when nothing was discovered. The loader stays loaded: unloading a driver
 * that registered exit handlers is not safe, and a later discovery reuses it. */
int em_vulkan_shutdown(void) {
  if (em_vk_shutdown_devices(by_id, EM_MAX_DEVICES) != 0) return -1;
  if (messenger != VK_NULL_HANDLE && vkg.vkDestroyDebugUtilsMessengerEXT)
    vkg.vkDestroyDebugUtilsMessengerEXT(em_vk_instance, messenger, NULL);
  messenger = VK_NULL_HANDLE;
  em_vk_validation_active = false;
  if (em_vk_instance != VK_NULL_HANDLE) vkg.vkDestroyInstance(em_vk_instance, NULL);
  em_vk_instance = VK_NULL_HANDLE;
  discovery_note[0] = '\0';
  return 0;
}
