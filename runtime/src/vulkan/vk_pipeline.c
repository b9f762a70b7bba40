/*
 * vk_pipeline.c: pipelines and descriptors.
 *
 * Every kernel shares one descriptor-set layout (binding k: operand k's storage buffer, for
 * VK_MAX_OPERANDS operands) and one pipeline layout (that set plus 128 bytes of push
 * constants), so a dispatch only pushes its buffer ranges (VK_KHR_push_descriptor) or, without
 * that extension, takes a set from the batch's descriptor pool.
 *
 * Pipelines are created on first use and kept in a map. A kernel reads its op, formats and
 * number of dimensions from the push constants unless specialization constants fix them
 * (kernels/common.glsl). Specialized pipelines (one per op, formats and "one dimension or
 * more") are what makes a kernel fast: a driver compiling for the CPU, like lavapipe, would
 * otherwise run every op of the switch with lanes masked off (measured on lavapipe: an add
 * over 8M floats took 1530 ms generic, 104 ms specialized). Each costs a compilation, about
 * 30-100 ms on lavapipe, where the generic pipelines are the better deal for what runs only
 * a few times (a test suite): so GPUs always specialize, and CPU-type drivers once a
 * combination has run VK_HOT_USES times (a training loop) or for 64K elements or more.
 * EMBER_VK_SPECIALIZE=0 never specializes, =1 always does.
 *
 * A VkPipelineCache, loaded from and saved to
 *   $EMBER_CACHE_DIR, else $XDG_CACHE_HOME/ember, else ~/.cache/ember
 * as vulkan-<vendor>-<device>-<pipelineCacheUUID>.bin (written atomically at exit and after
 * every 32 new pipelines), spares later runs the compilations where the driver caches.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vk.h"

static const char *kernel_modules[VK_NUM_KERNELS] = {
  [VK_KERNEL_COPY] = "copy",
  [VK_KERNEL_CAST] = "cast_BASE",
  [VK_KERNEL_CAST_F64] = "cast_F64",
  [VK_KERNEL_PW_F32] = "pointwise_F32",
  [VK_KERNEL_PW_I32] = "pointwise_I32",
  [VK_KERNEL_PW_F64] = "pointwise_F64",
  [VK_KERNEL_PW_I64] = "pointwise_I64",
  [VK_KERNEL_SPECIAL_F32] = "special_F32",
  [VK_KERNEL_SPECIAL_F64] = "special_F64",
};

bool em_vk_kernel_supported(const vk_device *D, vk_kernel_id k) {
  if (k == VK_KERNEL_CAST_F64 || k == VK_KERNEL_PW_F64 || k == VK_KERNEL_SPECIAL_F64) return (D->features & EM_FEATURE_FLOAT64) != 0;
  return true;
}

/* ---- the on-disk pipeline cache ---------------------------------------------------------- */

void em_vk_cache_file(const vk_device *D, char *buf, size_t n) {
  buf[0] = '\0';
  const char *dir = getenv("EMBER_CACHE_DIR");
  char base[400];
  if (dir && dir[0]) {
    snprintf(base, sizeof base, "%s", dir);
  } else if ((dir = getenv("XDG_CACHE_HOME")) && dir[0]) {
    snprintf(base, sizeof base, "%s/ember", dir);
  } else if ((dir = getenv("HOME")) && dir[0]) {
    snprintf(base, sizeof base, "%s/.cache/ember", dir);
  } else {
    return;
  }
  char uuid[2 * VK_UUID_SIZE + 1];
  for (unsigned i = 0; i < VK_UUID_SIZE; i++)
    snprintf(uuid + 2 * i, 3, "%02x", D->props.pipelineCacheUUID[i]);
  snprintf(buf, n, "%s/vulkan-%04x-%04x-%s.bin", base, D->props.vendorID, D->props.deviceID,
           uuid);
}

static void cache_path(vk_device *D) { em_vk_cache_file(D, D->cache_path, sizeof D->cache_path); }

/* The cache file's contents when its header matches this device (the driver would reject
 * others anyway, but a truncated or foreign file must never reach it). */
static void *read_cache(vk_device *D, size_t *size) {
  *size = 0;
  FILE *f = D->cache_path[0] ? fopen(D->cache_path, "rb") : NULL;
  if (f == NULL) return NULL;
  void *data = NULL;
  if (fseek(f, 0, SEEK_END) == 0) {
    long n = ftell(f);
    if (n >= 32 && n < (256L << 20) && fseek(f, 0, SEEK_SET) == 0 && (data = malloc((size_t)n)) &&
        fread(data, 1, (size_t)n, f) == (size_t)n) {
      uint32_t header[4];
      memcpy(header, data, sizeof header);
      const uint8_t *uuid = (const uint8_t *)data + 16;
      if (header[0] >= 32 && header[0] <= (uint32_t)n && header[1] == 1 &&
          header[2] == D->props.vendorID && header[3] == D->props.deviceID &&
          memcmp(uuid, D->props.pipelineCacheUUID, VK_UUID_SIZE) == 0) {
        *size = (size_t)n;
      }
    }
  }
  fclose(f);
  if (*size == 0) {
    free(data);
    return NULL;
  }
  return data;
}

static void mkdirs(const char *path) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) return;
    *p = '/';
  }
}

/* Best effort: a cache that cannot be written only costs compile time later. */
static void save_cache(vk_device *D) {
  if (D->cache_path[0] == '\0' || D->pipe_cache == VK_NULL_HANDLE) return;
  size_t n = 0;
  if (D->fn.vkGetPipelineCacheData(D->dev, D->pipe_cache, &n, NULL) != VK_SUCCESS || n == 0) return;
  void *data = malloc(n);
  if (data == NULL) return;
  if (D->fn.vkGetPipelineCacheData(D->dev, D->pipe_cache, &n, data) == VK_SUCCESS) {
    mkdirs(D->cache_path);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", D->cache_path, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    if (f) {
      bool ok = fwrite(data, 1, n, f) == n;
      ok = fclose(f) == 0 && ok;
      if (!ok || rename(tmp, D->cache_path) != 0) remove(tmp);
    }
  }
  free(data);
}

/* ---- layouts and pipelines ------------------------------------------------------------------ */

int em_vk_pipeline_init(vk_device *D) {
  if (D->props.limits.maxPerStageDescriptorStorageBuffers < VK_MAX_OPERANDS)
    return em_error("%s allows %u storage buffers per kernel; Ember's kernels need %d", D->name,
                    D->props.limits.maxPerStageDescriptorStorageBuffers, VK_MAX_OPERANDS);
  VkDescriptorSetLayoutBinding bindings[VK_MAX_OPERANDS];
  for (int i = 0; i < VK_MAX_OPERANDS; i++)
    bindings[i] = (VkDescriptorSetLayoutBinding){
      .binding = (uint32_t)i,
      .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
      .descriptorCount = 1,
      .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
    };
  VkDescriptorSetLayoutCreateInfo li = {
    .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
    .flags = D->push_descriptors ? VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR : 0,
    .bindingCount = VK_MAX_OPERANDS,
    .pBindings = bindings,
  };
  VkResult r = D->fn.vkCreateDescriptorSetLayout(D->dev, &li, NULL, &D->set_layout);
  if (r != VK_SUCCESS) return em_error("%s: vkCreateDescriptorSetLayout failed (%s)", D->name, em_vk_result_name(r));
  VkPushConstantRange range = {VK_SHADER_STAGE_COMPUTE_BIT, 0, VK_MAX_PUSH};
  VkPipelineLayoutCreateInfo pli = {
    .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
    .setLayoutCount = 1,
    .pSetLayouts = &D->set_layout,
    .pushConstantRangeCount = 1,
    .pPushConstantRanges = &range,
  };
  r = D->fn.vkCreatePipelineLayout(D->dev, &pli, NULL, &D->pipe_layout);
  if (r != VK_SUCCESS) return em_error("%s: vkCreatePipelineLayout failed (%s)", D->name, em_vk_result_name(r));
  const char *spec = getenv("EMBER_VK_SPECIALIZE");
  D->specialize = !(spec && strcmp(spec, "0") == 0);
  bool always = spec && strcmp(spec, "1") == 0;
  D->specialize_from = (D->type == EM_DEVICE_SOFTWARE_GPU ||
                        D->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU) && !always
                           ? 65536 : 0;
  cache_path(D);
  size_t size;
  void *data = read_cache(D, &size);
  VkPipelineCacheCreateInfo ci = {
    .sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
    .initialDataSize = size,
    .pInitialData = data,
  };
  if (D->fn.vkCreatePipelineCache(D->dev, &ci, NULL, &D->pipe_cache) != VK_SUCCESS) {
    ci.initialDataSize = 0; /* a cache the driver refuses is dropped, not fatal */
    ci.pInitialData = NULL;
    if (D->fn.vkCreatePipelineCache(D->dev, &ci, NULL, &D->pipe_cache) != VK_SUCCESS)
      D->pipe_cache = VK_NULL_HANDLE;
  }
  free(data);
  return 0;
}

/* The index of a SPIR-V module by name, or -1. Recent lookups are remembered by name (a
 * short string comparison, not a search of every module); names may live anywhere, a stack
 * buffer included, since the memo keeps the module's own name, not the caller's pointer. */
/* The memo is shared by every device, whose locks differ: it has its own (held for a few string
 * comparisons; nothing is called under it). */
static pthread_mutex_t memo_lock = PTHREAD_MUTEX_INITIALIZER;
static int module_index(const char *name) {
  enum { MEMO = 64 };
  static int memo[MEMO], used;
  int found = -1;
  pthread_mutex_lock(&memo_lock);
  for (int i = 0; i < used && found < 0; i++)
    if (strcmp(em_spirv_modules[memo[i]].name, name) == 0) found = memo[i];
  for (size_t i = 0; i < em_spirv_module_count && found < 0; i++) {
    if (strcmp(em_spirv_modules[i].name, name) != 0) continue;
    if (used < MEMO) memo[used++] = (int)i;
    found = (int)i;
  }
  pthread_mutex_unlock(&memo_lock);
  return found;
}

/* A pipeline: a module with its 4 specialization constants (~0u where the kernel reads the
 * value from its push constants instead). */
struct vk_pipe_entry {
  uint32_t module;                /* module index + 1, so that 0 marks an empty slot */
  uint32_t spec[4];
  VkPipeline pipeline;            /* VK_NULL_HANDLE while only counted */
  uint32_t uses;                  /* dispatches before it was specialized */
};

static uint32_t key_hash(uint32_t module, const uint32_t *spec) {
  uint32_t h = module * 0x9e3779b1u;
  for (int i = 0; i < 4; i++) h = (h ^ spec[i]) * 0x85ebca6bu + (uint32_t)i;
  return h ^ (h >> 15);
}

static struct vk_pipe_entry *slot(vk_device *D, uint32_t module, const uint32_t *spec) {
  uint32_t mask = D->pipe_cap - 1, i = key_hash(module, spec) & mask;
  for (;; i = (i + 1) & mask) {
    struct vk_pipe_entry *e = &D->pipes[i];
    if (e->module == 0 || (e->module == module && memcmp(e->spec, spec, sizeof e->spec) == 0))
      return e;
  }
}

/* Keeps the map at most half full. */
static int grow(vk_device *D) {
  if (D->pipes && 2 * (D->pipe_count + 1) <= D->pipe_cap) return 0;
  uint32_t old_cap = D->pipe_cap;
  struct vk_pipe_entry *old = D->pipes;
  uint32_t cap = old_cap ? 2 * old_cap : 64;
  struct vk_pipe_entry *fresh = calloc(cap, sizeof *fresh);
  if (fresh == NULL) return em_error_kind_set(EM_ERR_OOM, "out of memory on cpu: pipeline map");
  D->pipes = fresh;
  D->pipe_cap = cap;
  for (uint32_t i = 0; i < old_cap; i++)
    if (old[i].module) *slot(D, old[i].module, old[i].spec) = old[i];
  free(old);
  return 0;
}

static vk_device *devices_to_save[EM_MAX_DEVICES];
static int n_devices_to_save;

static void save_all_at_exit(void) {
  pthread_mutex_lock(&memo_lock);
  int n = n_devices_to_save;
  pthread_mutex_unlock(&memo_lock);
  for (int i = 0; i < n; i++) {
    vk_device *D = devices_to_save[i];
    if (pthread_mutex_trylock(&D->lock) != 0) continue; /* another thread is mid-dispatch */
    if (D->pipes_unsaved) save_cache(D);
    D->pipes_unsaved = 0;
    pthread_mutex_unlock(&D->lock);
  }
}

static VkPipeline create_pipeline(vk_device *D, int module, const uint32_t *spec_values) {
  const em_spirv_module *m = &em_spirv_modules[module];
  VkShaderModuleCreateInfo si = {
    .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
    .codeSize = m->size,
    .pCode = m->words,
  };
  VkShaderModule shader;
  VkResult r = D->fn.vkCreateShaderModule(D->dev, &si, NULL, &shader);
  if (r != VK_SUCCESS) {
    em_error("%s: loading the kernel %s failed (%s)", D->name, m->name, em_vk_result_name(r));
    return VK_NULL_HANDLE;
  }
  uint32_t values[4];
  memcpy(values, spec_values, sizeof values);
  VkSpecializationMapEntry entries[4];
  for (uint32_t i = 0; i < 4; i++)
    entries[i] = (VkSpecializationMapEntry){i, i * (uint32_t)sizeof(uint32_t), sizeof(uint32_t)};
  VkSpecializationInfo spec = {4, entries, sizeof values, values};
  VkComputePipelineCreateInfo ci = {
    .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
    .stage = {
      .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
      .stage = VK_SHADER_STAGE_COMPUTE_BIT,
      .module = shader,
      .pName = "main",
      .pSpecializationInfo = &spec,
    },
    .layout = D->pipe_layout,
  };
  VkPipeline p = VK_NULL_HANDLE;
  r = D->fn.vkCreateComputePipelines(D->dev, D->pipe_cache, 1, &ci, NULL, &p);
  D->fn.vkDestroyShaderModule(D->dev, shader, NULL);
  if (r != VK_SUCCESS) {
    em_error("%s: compiling the kernel %s failed (%s)", D->name, m->name, em_vk_result_name(r));
    return VK_NULL_HANDLE;
  }
  return p;
}

/* Records a new pipeline in map slot e and, now and then, the cache file. */
static VkPipeline remember(vk_device *D, struct vk_pipe_entry *e, int module, const uint32_t *spec) {
  VkPipeline pipeline = create_pipeline(D, module, spec);
  if (pipeline == VK_NULL_HANDLE) return VK_NULL_HANDLE;
  if (e->module == 0) D->pipe_count++;
  *e = (struct vk_pipe_entry){(uint32_t)module + 1, {spec[0], spec[1], spec[2], spec[3]}, pipeline, 0};
  if (D->pipes_unsaved++ == 0 && D->cache_path[0]) {
    static bool registered;
    pthread_mutex_lock(&memo_lock); /* the list is shared by every device (whose locks differ) */
    bool listed = false;
    for (int i = 0; i < n_devices_to_save; i++) listed = listed || devices_to_save[i] == D;
    if (!listed && n_devices_to_save < EM_MAX_DEVICES) devices_to_save[n_devices_to_save++] = D;
    if (!registered) registered = atexit(save_all_at_exit) == 0;
    pthread_mutex_unlock(&memo_lock);
  }
  if (D->pipes_unsaved >= 32) {
    save_cache(D);
    D->pipes_unsaved = 0;
  }
  return pipeline;
}

static int missing_module(vk_device *D, const char *name) {
  return em_error("%s: the kernel %s is not in this build", D->name, name);
}

/* The pipeline of a module with these specialization constants, created on first use. */
static VkPipeline pipeline_for(vk_device *D, int module, const uint32_t *spec) {
  if (grow(D) != 0) return VK_NULL_HANDLE;
  struct vk_pipe_entry *e = slot(D, (uint32_t)module + 1, spec);
  if (e->pipeline) return e->pipeline;
  return remember(D, e, module, spec);
}

/* The pipeline for an elementwise dispatch: specialized to its op, formats and dimensions, or
 * generic. On a CPU-type driver a combination is specialized once it is hot (VK_HOT_USES
 * dispatches) or large; until then it runs on the kernel's generic pipeline. */
enum { VK_HOT_USES = 16 };
static VkPipeline get_pipeline(vk_device *D, vk_kernel_id k, const vk_params *p) {
  /* index + 1, 0 until looked up; relaxed atomics: devices' threads may look up at once */
  static int modules[VK_NUM_KERNELS];
  int module = __atomic_load_n(&modules[k], __ATOMIC_RELAXED) - 1;
  if (module < 0) {
    module = module_index(kernel_modules[k]);
    if (module < 0) {
      missing_module(D, kernel_modules[k]);
      return VK_NULL_HANDLE;
    }
    __atomic_store_n(&modules[k], module + 1, __ATOMIC_RELAXED);
  }
  if (grow(D) != 0) return VK_NULL_HANDLE;
  if (D->specialize) {
    uint32_t spec[4] = {p->op, p->fmt, p->ndim == 1 ? 1 : 0, ~0u};
    struct vk_pipe_entry *e = slot(D, (uint32_t)module + 1, spec);
    if (e->pipeline) return e->pipeline;
    bool now = D->specialize_from == 0 || p->n >= D->specialize_from || e->uses + 1 >= VK_HOT_USES;
    if (now) return remember(D, e, module, spec);
    if (e->module == 0) {  /* count the uses of a combination not yet specialized */
      *e = (struct vk_pipe_entry){(uint32_t)module + 1, {spec[0], spec[1], spec[2], spec[3]},
                                  VK_NULL_HANDLE, 0};
      D->pipe_count++;
      if (grow(D) != 0) return VK_NULL_HANDLE;
      e = slot(D, (uint32_t)module + 1, spec);
    }
    e->uses++;
  }
  static const uint32_t generic[4] = {~0u, ~0u, 0, ~0u};
  return pipeline_for(D, module, generic);
}

/* Binds the pipeline and the operands' buffers, pushes the constants and records the
 * dispatch. blocks[k] is operand k's memory (NULL: unused, bound to operand 0's so that every
 * binding is valid). */
static int record(vk_device *D, VkPipeline pipeline, vk_block *const *blocks, const void *push,
                  uint32_t push_size, const uint32_t *groups, int module, uint32_t op) {
  VkCommandBuffer cmd = em_vk_cmd(D);
  if (cmd == NULL) return -1;
  if (D->bound != pipeline) {
    D->fn.vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
    D->bound = pipeline;
  }
  VkDescriptorBufferInfo infos[VK_MAX_OPERANDS];
  VkWriteDescriptorSet writes[VK_MAX_OPERANDS];
  for (int i = 0; i < VK_MAX_OPERANDS; i++) {
    const vk_block *b = blocks[i] ? blocks[i] : blocks[0];
    infos[i] = (VkDescriptorBufferInfo){b->slab->buffer, b->offset, b->size};
    writes[i] = (VkWriteDescriptorSet){
      .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
      .dstBinding = (uint32_t)i,
      .descriptorCount = 1,
      .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
      .pBufferInfo = &infos[i],
    };
  }
  if (D->push_descriptors) {
    D->fn.vkCmdPushDescriptorSetKHR(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, D->pipe_layout, 0,
                                    VK_MAX_OPERANDS, writes);
  } else {
    vk_frame *f = &D->frames[D->current];
    VkDescriptorSetAllocateInfo ai = {
      .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
      .descriptorPool = f->pool,
      .descriptorSetCount = 1,
      .pSetLayouts = &D->set_layout,
    };
    VkDescriptorSet set;
    VkResult r = D->fn.vkAllocateDescriptorSets(D->dev, &ai, &set);
    if (r != VK_SUCCESS)
      return em_error("%s: vkAllocateDescriptorSets failed (%s)", D->name, em_vk_result_name(r));
    for (int i = 0; i < VK_MAX_OPERANDS; i++) writes[i].dstSet = set;
    D->fn.vkUpdateDescriptorSets(D->dev, VK_MAX_OPERANDS, writes, 0, NULL);
    D->fn.vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, D->pipe_layout, 0, 1, &set,
                                  0, NULL);
  }
  if (push_size > 0)
    D->fn.vkCmdPushConstants(cmd, D->pipe_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_size, push);
  if (D->profile) em_vk_profile_before(D, cmd, module, op);
  D->fn.vkCmdDispatch(cmd, groups[0], groups[1], groups[2]);
  if (D->profile) em_vk_profile_after(D, cmd);
  return em_vk_count_groups(D, (uint64_t)groups[0] * groups[1] * groups[2]);
}

int em_vk_dispatch(vk_device *D, vk_kernel_id k, const vk_params *p, const em_tensor *const *ops,
                   int nops) {
  VkPipeline pipeline = get_pipeline(D, k, p);
  if (pipeline == VK_NULL_HANDLE) return -1;
  VkCommandBuffer cmd = em_vk_cmd(D);
  if (cmd == NULL) return -1;
  vk_block *blocks[VK_MAX_OPERANDS] = {NULL};
  for (int i = 0; i < nops && i < 4; i++)
    if (ops[i]) blocks[i] = ops[i]->storage->backend_ctx;
  em_vk_hazards(D, cmd, blocks + 1, 3, blocks, 1);
  uint64_t groups = ((uint64_t)p->n + 255) / 256;
  /* at most 2^23 groups of 256, so that the kernels' grid stride (groups x 256) fits 32 bits */
  uint64_t max_groups = D->props.limits.maxComputeWorkGroupCount[0];
  if (max_groups > (1u << 23)) max_groups = 1u << 23;
  if (em_vk_test_hooks() & VK_TEST_SMALL_GRID) max_groups = 2; /* exercises the grid-stride loop */
  if (groups > max_groups) groups = max_groups;
  uint32_t grid[3] = {(uint32_t)groups, 1, 1};
  int module = D->profile ? module_index(kernel_modules[k]) : -1;
  return record(D, pipeline, blocks, p, sizeof *p, grid, module, p->op);
}

int em_vk_launch(vk_device *D, const vk_launch *L) {
  if (L->groups[0] == 0 || L->groups[1] == 0 || L->groups[2] == 0) return 0;
  for (int d = 0; d < 3; d++)
    if (L->groups[d] > D->props.limits.maxComputeWorkGroupCount[d])
      return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED,
                               "%s: not implemented on %s for a grid of %u workgroups in "
                               "dimension %d (the device allows %u)", L->module, D->name,
                               L->groups[d], d, D->props.limits.maxComputeWorkGroupCount[d]);
  if (L->push_size > VK_MAX_PUSH)
    return em_error("%s: %u bytes of push constants (at most %d)", L->module, L->push_size,
                    VK_MAX_PUSH);
  int module = module_index(L->module);
  if (module < 0) return missing_module(D, L->module);
  VkPipeline pipeline = pipeline_for(D, module, L->spec);
  if (pipeline == VK_NULL_HANDLE) return -1;
  VkCommandBuffer cmd = em_vk_cmd(D);
  if (cmd == NULL) return -1;
  vk_block *blocks[VK_MAX_OPERANDS] = {NULL}, *reads[VK_MAX_OPERANDS] = {NULL},
           *writes[VK_MAX_OPERANDS] = {NULL};
  for (int i = 0; i < VK_MAX_OPERANDS; i++) {
    if (L->ops[i] == NULL) continue;
    blocks[i] = L->ops[i]->storage->backend_ctx;
    if (L->writes & (1u << i)) writes[i] = blocks[i];
    else reads[i] = blocks[i];
  }
  if (blocks[0] == NULL) return em_error("%s: operand 0 is missing", L->module);
  em_vk_hazards(D, cmd, reads, VK_MAX_OPERANDS, writes, VK_MAX_OPERANDS);
  /* the profile tells launches apart by their first specialization constant (a mode) */
  return record(D, pipeline, blocks, L->push, L->push_size, L->groups, module,
                L->spec[0] == ~0u ? UINT32_MAX : 0x80000000u | L->spec[0]);
}

int em_vk_launch_locked(const vk_launch *L) {
  vk_device *D = em_vk_device(L->ops[0]->device_id);
  pthread_mutex_lock(&D->lock);
  int rc = em_vk_launch(D, L);
  pthread_mutex_unlock(&D->lock);
  return rc;
}
