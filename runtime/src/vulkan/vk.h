/*
 * vk.h: what the Vulkan backend's files share. The backend is split by concern:
 *   vk_loader.c    dlopen("libvulkan.so.1") and the function tables (nothing links Vulkan)
 *   vk_instance.c  the instance, discovery of physical devices, their features, registration
 *   vk_device.c    starting a device: logical device, queue, command pool, test hooks
 *   vk_memory.c    the caching allocator: large VkDeviceMemory slabs cut into blocks
 *   vk_command.c   command-buffer batches, fences, barriers from per-block hazard tracking
 *   vk_transfer.c  host <-> device copies through host-visible staging buffers
 *   vk_pipeline.c  the shared descriptor-set layout, lazy pipelines, the on-disk cache
 *   vk_kernels.c   the kernel-table functions: push constants, dispatches
 *   vk_backend.c   the kernel table and the registry callbacks
 * Every entry point that touches a device takes its lock: recording and submission are
 * serialized per device (data-loader threads may create tensors too).
 */
#ifndef EMBER_VK_H
#define EMBER_VK_H

#define VK_NO_PROTOTYPES
#include <pthread.h>
#include <vulkan/vulkan.h>

#include "../backend.h"
#include "../device.h"

/* ---- function tables (vk_loader.c) ---------------------------------------------------------- */
#define VK_GLOBAL_FUNCS(X)                                                                     \
  X(vkCreateInstance) X(vkEnumerateInstanceExtensionProperties)                               \
  X(vkEnumerateInstanceLayerProperties) X(vkEnumerateInstanceVersion)

#define VK_INSTANCE_FUNCS(X)                                                                   \
  X(vkDestroyInstance) X(vkEnumeratePhysicalDevices) X(vkGetPhysicalDeviceProperties)         \
  X(vkGetPhysicalDeviceProperties2) X(vkGetPhysicalDeviceFeatures2)                           \
  X(vkGetPhysicalDeviceQueueFamilyProperties) X(vkGetPhysicalDeviceMemoryProperties)          \
  X(vkGetPhysicalDeviceMemoryProperties2) X(vkEnumerateDeviceExtensionProperties)             \
  X(vkCreateDevice) X(vkGetDeviceProcAddr)

#define VK_DEBUG_FUNCS(X) X(vkCreateDebugUtilsMessengerEXT) X(vkDestroyDebugUtilsMessengerEXT)

#define VK_DEVICE_FUNCS(X)                                                                     \
  X(vkDestroyDevice) X(vkGetDeviceQueue) X(vkDeviceWaitIdle) X(vkAllocateMemory)              \
  X(vkFreeMemory) X(vkMapMemory) X(vkUnmapMemory) X(vkInvalidateMappedMemoryRanges)           \
  X(vkFlushMappedMemoryRanges) X(vkCreateBuffer) X(vkDestroyBuffer)                           \
  X(vkGetBufferMemoryRequirements) X(vkBindBufferMemory) X(vkCreateCommandPool)               \
  X(vkAllocateCommandBuffers) X(vkBeginCommandBuffer) X(vkEndCommandBuffer)                   \
  X(vkResetCommandBuffer) X(vkCreateFence) X(vkResetFences) X(vkWaitForFences) X(vkGetFenceStatus)             \
  X(vkQueueSubmit) X(vkCmdPipelineBarrier) X(vkCmdCopyBuffer) X(vkCmdFillBuffer) X(vkCmdUpdateBuffer) X(vkCmdDispatch)                \
  X(vkCmdBindPipeline) X(vkCmdPushConstants) X(vkCmdBindDescriptorSets)                       \
  X(vkCreateShaderModule) X(vkDestroyShaderModule) X(vkCreateComputePipelines)                \
  X(vkCreatePipelineLayout) X(vkCreateDescriptorSetLayout) X(vkCreateDescriptorPool)          \
  X(vkResetDescriptorPool) X(vkAllocateDescriptorSets) X(vkUpdateDescriptorSets)              \
  X(vkCreatePipelineCache) X(vkGetPipelineCacheData) X(vkCreateQueryPool) X(vkCmdResetQueryPool)  \
  X(vkCmdWriteTimestamp) X(vkGetQueryPoolResults)                                             \
  X(vkDestroyFence) X(vkDestroyCommandPool) X(vkDestroyDescriptorPool) X(vkDestroyPipeline)   \
  X(vkDestroyPipelineLayout) X(vkDestroyDescriptorSetLayout) X(vkDestroyPipelineCache)        \
  X(vkDestroyQueryPool)

#define VK_DECLARE_FN(name) PFN_##name name;
typedef struct vk_global_fns {
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
  VK_GLOBAL_FUNCS(VK_DECLARE_FN)
  VK_INSTANCE_FUNCS(VK_DECLARE_FN)
  VK_DEBUG_FUNCS(VK_DECLARE_FN)
} vk_global_fns;

typedef struct vk_device_fns {
  VK_DEVICE_FUNCS(VK_DECLARE_FN)
  PFN_vkCmdPushDescriptorSetKHR vkCmdPushDescriptorSetKHR; /* NULL without the extension */
} vk_device_fns;

extern vk_global_fns vkg; /* valid once em_vk_load_loader() succeeded */

/* Loads the loader and its global functions: 0, or -1 with a reason in `why`. */
int em_vk_load_loader(char *why, size_t cap);
int em_vk_load_instance_fns(VkInstance instance);
int em_vk_load_device_fns(VkDevice device, vk_device_fns *fn, bool push_descriptors);

/* "VK_ERROR_OUT_OF_DEVICE_MEMORY" for error messages. */
const char *em_vk_result_name(VkResult r);

/* ---- test hooks (EMBER_VK_TEST, comma-separated; docs/devices.md) ---------------------------- */
enum {
  VK_TEST_FAIL_START = 1,        /* "fail-start": starting any Vulkan device fails */
  VK_TEST_SOFTWARE_AS_GPU = 2,   /* "software-as-gpu": CPU-type drivers rank as integrated GPUs */
  VK_TEST_NO_PUSH_DESCRIPTORS = 4, /* "no-push-descriptors": use descriptor pools instead */
  VK_TEST_SMALL_GRID = 8,         /* "small-grid": dispatch at most 2 workgroups */
  VK_TEST_GPU_COPIES = 16         /* "gpu-copies": dense copies take a GPU's path (a kernel) */
};
unsigned em_vk_test_hooks(void);
/* "empty-slot:NAME" (repeatable): discovery leaves kernel slot NAME of struct em_backend empty
 * on every Vulkan device, so the specs reach the "<op>: not implemented on vulkan:N" path now
 * that every slot has a kernel. -1 with an error for an unknown name. */
int em_vk_test_empty_slots(em_backend *table);

/* ---- line layouts (vk_lines.c) ---------------------------------------------------------------- */
/* The dims of `shape` other than `skip` (-1: none), innermost first, size-1 dims dropped and
 * neighbours merged where every operand steps evenly across them: size[k] and st[o][k] (ops[o]'s
 * stride; a NULL operand counts as stride 0). Returns the count; *lines gets the product. */
int vk_line_dims(const em_tensor *shape, int skip, int nops, const em_tensor *const ops[],
                 int64_t size[EM_MAX_DIMS], int64_t st[][EM_MAX_DIMS], int64_t *lines);
/* The lowest and highest element index a strided tensor reaches (the kernels index in 31 bits). */
void vk_span(const em_tensor *t, int64_t *lo, int64_t *hi);

/* ---- memory (vk_memory.c) --------------------------------------------------------------------- */
typedef struct vk_range vk_range;
typedef struct vk_slab {
  VkDeviceMemory memory;
  VkBuffer buffer;            /* one buffer over the whole slab; blocks bind sub-ranges */
  uint64_t size, used;
  bool large;                 /* from the pool of large blocks */
  vk_range *free;             /* free ranges sorted by offset */
  struct vk_slab *next;
} vk_slab;

/* A storage's memory (em_storage.backend_ctx). The epochs drive barriers (vk_command.c). */
typedef struct vk_block {
  vk_slab *slab;
  uint64_t offset, size;
  uint64_t read_epoch, write_epoch;
} vk_block;

typedef struct vk_memory {
  uint32_t type_index;        /* device-local memory type for tensors */
  uint32_t heap_index;
  uint32_t staging_type;      /* host-visible memory type for staging */
  bool staging_coherent;
  uint64_t align;             /* block alignment (minStorageBufferOffsetAlignment, at least 16) */
  uint64_t small_slab, large_slab, max_slab;
  vk_slab *slabs;
  int64_t reserved;
} vk_memory;

/* ---- staging buffers (vk_transfer.c) ------------------------------------------------------------ */
typedef struct vk_staging {
  VkDeviceMemory memory;
  VkBuffer buffer;
  void *mapped;
  uint64_t size;
  uint64_t busy_until;        /* the submission serial that must complete before reuse */
  bool held;                  /* taken by an asynchronous read until it finishes */
  struct vk_staging *next;
} vk_staging;

/* ---- command batches (vk_command.c) -------------------------------------------------------------- */
enum { VK_FRAMES = 4, VK_BATCH_DISPATCHES = 256 };
typedef struct vk_frame {
  VkCommandBuffer cmd;
  VkFence fence;
  VkDescriptorPool pool;      /* descriptor sets when push descriptors are off */
  uint32_t pool_sets;
  bool recording, pending;
  uint64_t serial;            /* its submission number once pending */
  uint32_t dispatches;
  uint64_t groups;            /* workgroups recorded: large work starts early (vk_command.c) */
} vk_frame;

typedef struct vk_device vk_device;

/* ---- pipelines (vk_pipeline.c) ------------------------------------------------------------------- */
typedef enum vk_kernel_id {
  VK_KERNEL_COPY, VK_KERNEL_CAST, VK_KERNEL_CAST_F64,
  VK_KERNEL_PW_F32, VK_KERNEL_PW_I32, VK_KERNEL_PW_F64, VK_KERNEL_PW_I64,
  VK_KERNEL_SPECIAL_F32, VK_KERNEL_SPECIAL_F64, /* special.comp: unary ops from EM_ASIN on */
  VK_NUM_KERNELS
} vk_kernel_id;

/* The push constants every kernel receives (kernels/common.glsl). */
typedef struct vk_params {
  uint32_t n, ndim, op, fmt;
  uint32_t size[4];
  int32_t stride[16];
  uint32_t base[4];
  uint32_t arg[4];
} vk_params;
_Static_assert(sizeof(vk_params) == 128, "push constants must fit the guaranteed 128 bytes");

/* ---- general launches (vk_pipeline.c) ------------------------------------------------------------
 * The kernels beyond the elementwise ones (reductions, matmul, indexing, nn, optimizers) each
 * bring their own push constants, grid and specialization constants. Binding k of the shared
 * set layout is operand k; a kernel declares the operands it only reads `readonly`. */
enum { VK_MAX_OPERANDS = 8, VK_MAX_PUSH = 128 };
typedef struct vk_launch {
  const char *module;          /* the SPIR-V module: "<file>" or "<file>_<variant>" */
  const void *push;            /* push constants (at most VK_MAX_PUSH bytes; may be NULL) */
  uint32_t push_size;
  uint32_t spec[4];            /* specialization constants 0-3 (the module decides meaning) */
  const em_tensor *ops[VK_MAX_OPERANDS]; /* NULL entries are unused */
  uint32_t writes;             /* bit k: the kernel writes operand k (others are only read) */
  uint32_t groups[3];          /* workgroups in x, y, z (at most the device's limits) */
} vk_launch;
/* Records one dispatch, with a barrier first when an operand depends on unsynchronized earlier
 * work. Call with D->lock held. A zero group count records nothing. */
int em_vk_launch(vk_device *D, const vk_launch *L);
/* em_vk_launch for the device of L->ops[0], taking and releasing its lock. */
int em_vk_launch_locked(const vk_launch *L);

/* ---- a device ------------------------------------------------------------------------------------ */
struct vk_device {
  int id;                     /* Ember's device id */
  int index;                  /* N of vulkan:N */
  em_backend table;           /* em_vulkan_backend with this device's name */
  char name[32];
  /* discovery */
  VkPhysicalDevice phys;
  VkPhysicalDeviceProperties props;
  VkPhysicalDeviceMemoryProperties memprops;
  em_device_type type;
  uint32_t queue_family;
  uint32_t timestamp_bits;    /* the queue's timestampValidBits (0: no timestamps) */
  uint32_t features;          /* EM_FEATURE_* */
  uint32_t subgroup_size;
  uint64_t max_alloc;         /* maxMemoryAllocationSize */
  uint64_t max_range;         /* maxStorageBufferRange */
  char driver[128];
  bool has_budget_ext, has_push_ext;
  /* started */
  pthread_mutex_t lock;
  bool started;
  VkDevice dev;
  VkQueue queue;
  vk_device_fns fn;
  bool push_descriptors;      /* using VK_KHR_push_descriptor */
  VkCommandPool cmd_pool;
  vk_frame frames[VK_FRAMES];
  int current;                /* the frame being recorded */
  uint64_t next_serial, completed_serial;
  uint64_t epoch;             /* bumped by every barrier (vk_command.c) */
  VkPipeline bound;           /* last pipeline bound in the current command buffer */
  vk_memory mem;
  vk_staging *staging;
  uint64_t staging_bytes;
  VkDescriptorSetLayout set_layout;
  VkPipelineLayout pipe_layout;
  VkPipelineCache pipe_cache;
  bool specialize;            /* pipelines per op and formats (vk_pipeline.c) */
  uint32_t specialize_from;   /* ... for dispatches of this many elements on (0: all) */
  struct vk_pipe_entry *pipes; /* open-addressing map: (module, specialization) -> pipeline */
  uint32_t pipe_cap, pipe_count;
  uint32_t pipes_unsaved;     /* created since the cache file was last written */
  char cache_path[512];
  struct vk_flag *flag;       /* device-side error reports (vk_flag.c); NULL until needed */
  struct vk_pinned *pinned;   /* pinned host buffers, live and cached (vk_pinned.c) */
  struct vk_profile *profile; /* GPU timestamps (vk_profile.c); NULL until first asked for */
  uint64_t host_waits;        /* em_vk_wait_serial / em_vk_wait_idle calls that waited */
  uint64_t dispatches;        /* kernel dispatches recorded (em_vk_count_groups), ever */
};

extern VkInstance em_vk_instance;
extern int64_t em_vk_validation_messages;
extern bool em_vk_validation_active; /* a validation layer reports to our messenger */

/* Looks up the started device of an Ember device id (NULL if it is not a Vulkan device). */
vk_device *em_vk_device(int device_id);

/* vk_device.c */
int em_vk_start(void *ctx);
void em_vk_info(void *ctx, em_device_info *out);

/* vk_memory.c */
int em_vk_memory_init(vk_device *D);
int em_vk_storage_alloc(em_storage *s);
void em_vk_storage_free(em_storage *s);
int em_vk_empty_cache(void *ctx);
/* Allocates raw memory of a type for a buffer with the given usage (staging buffers). */
int em_vk_alloc_buffer(vk_device *D, uint64_t size, uint32_t type_index, VkBufferUsageFlags usage,
                       VkBuffer *buffer, VkDeviceMemory *memory);

/* vk_command.c: all with D->lock held. */
int em_vk_command_init(vk_device *D);
/* The command buffer being recorded (begun on demand), or NULL with an error. */
VkCommandBuffer em_vk_cmd(vk_device *D);
/* Records a barrier when an access to these blocks depends on an unsynchronized earlier one,
 * then marks the accesses: `reads` and `writes` are arrays of blocks (NULL entries skipped). */
void em_vk_hazards(vk_device *D, VkCommandBuffer cmd, vk_block *const *reads, int nreads,
                   vk_block *const *writes, int nwrites);
/* Ends and submits the current batch (no wait). */
int em_vk_submit(vk_device *D);
/* Submits, then waits until every submitted batch completes. */
int em_vk_wait_idle(vk_device *D);
/* Waits until submission `serial` has completed. */
int em_vk_wait_serial(vk_device *D, uint64_t serial);
/* Whether the batch of that serial has completed, without waiting (frames the device has
 * finished are retired): 1 yes, 0 not yet (or not submitted), -1 error. D->lock held. */
int em_vk_poll_serial(vk_device *D, uint64_t serial);
/* Notes one more dispatch; submits the batch when it is long enough. */
int em_vk_count_dispatch(vk_device *D);
/* The same for a dispatch of this many workgroups. */
int em_vk_count_groups(vk_device *D, uint64_t groups);
int em_vk_synchronize(void *ctx);
int em_vk_flush(void *ctx);

/* vk_flag.c: device-side error reports. A kernel that meets bad input it cannot refuse up
 * front without a host round trip (a class index or an index out of range) writes a few words
 * into a small host-visible buffer and carries on; the host looks at them after each wait for
 * the device and raises the error there, as CUDA's device-side asserts surface at the next
 * synchronization. Words (uint32): [0] nonzero when set: which report came first;
 * VK_FLAG_CLASS_INDEX: [1] the target, [2] the classes, [3] cross entropy (1) or NLL (0);
 * VK_FLAG_INDEX (index_check.comp): [4] claimed by the first reporter (an atomic), [5] and
 * [6] the value's low and high words, [7] the size, [8] the op's name (em_vk_flag_name),
 * [9] the em_index_wording, [10] the dimension.
 * VK_FLAG_MULTINOMIAL (multinomial.comp): [11] claimed by the first reporter, [12] the
 * em_mn_status, [13] the row, [14] the bad position or the count of nonzero weights, [15] the
 * bad weight's float32 bits or the number of draws. */
enum { VK_FLAG_CLASS_INDEX = 1, VK_FLAG_INDEX = 2, VK_FLAG_MULTINOMIAL = 3 };
/* The flag buffer as an int32 operand for em_vk_launch (D->lock held); NULL on failure. */
const em_tensor *em_vk_flag_tensor(vk_device *D);
/* Notes that the batch being recorded has kernels writing the flag: em_vk_submit then records
 * the barrier that makes their writes visible to the host, once, at the batch's end. */
void em_vk_flag_barrier(vk_device *D);
/* Records that barrier when the batch being ended needs it (em_vk_submit calls it). */
void em_vk_flag_before_submit(vk_device *D, VkCommandBuffer cmd);
/* A number standing for the op name fn in flag word [8] (D->lock held); 0 when the table of
 * names is full (the report then says "an indexing op"). */
uint32_t em_vk_flag_name(vk_device *D, const char *fn);
/* After a wait: raises (returns -1 with the message) and clears a set flag. D->lock held. */
int em_vk_flag_check(vk_device *D);

/* vk_profile.c: GPU timestamps after each dispatch of a timed batch, for the profiler
 * (ember.profiler) and EMBER_VK_PROFILE=1 (a table per kernel at exit). All with D->lock held.
 * init registers the device with the profiler and reads EMBER_VK_PROFILE. */
int em_vk_profile_init(vk_device *D);
/* A frame's command buffer was begun: it is timed when the profiler or the table asks. */
void em_vk_profile_begin(vk_device *D, int frame, VkCommandBuffer cmd);
/* After one dispatch of module `module` (an index of em_spirv_modules) and `op` (the
 * elementwise op, 0x80000000 | a launch's first specialization constant, or UINT32_MAX), or a
 * transfer (module -1, name a literal). Call only when D->profile is set. */
void em_vk_profile_stamp(vk_device *D, VkCommandBuffer cmd, int module, uint32_t op,
                         const char *name);
/* Whether the batch being recorded is timed (D->profile set). */
bool em_vk_profile_timing(const vk_device *D);
/* The frame was submitted (its host time aligns the GPU's clock with the host's). */
void em_vk_profile_submit(vk_device *D, int frame);
/* A frame completed: its stamps go to the table and the profiler. */
void em_vk_profile_retire(vk_device *D, int frame);

/* vk_pinned.c: pinned memory (the pin_alloc slot). All but em_vk_pin_alloc with D->lock held. */
typedef struct vk_pinned vk_pinned;
int em_vk_pin_alloc(em_storage *s, int device);
/* The live pinned buffer of D holding [src, src + nbytes) (its offset there), or NULL. */
vk_pinned *em_vk_pinned_find(vk_device *D, const void *src, size_t nbytes, uint64_t *offset);
/* Records the copy of nbytes at `offset` of pinned buffer p into block b at byte dst. */
int em_vk_pinned_copy(vk_device *D, vk_pinned *p, uint64_t offset, vk_block *b, uint64_t dst,
                      size_t nbytes);
/* The pinned_read_start / pinned_read_poll slots (vk_pinned.c; backend.h). */
uint64_t em_vk_pinned_read_start(const em_storage *s, size_t offset, void *dst, size_t nbytes);
int em_vk_pinned_read_poll(int device, uint64_t ticket);
/* A read from block b straight into pinned memory (vk_pinned.c). D->lock held. */
int em_vk_pinned_read(vk_device *D, vk_pinned *p, uint64_t offset, vk_block *b, uint64_t src,
                      size_t nbytes);
/* Frees the cached pinned buffers no pending copy reads (memory.empty_cache). */
void em_vk_pinned_release_all(vk_device *D);

/* vk_transfer.c */
int em_vk_read(const em_storage *s, size_t offset, void *dst, size_t nbytes);
int em_vk_write(em_storage *s, size_t offset, const void *src, size_t nbytes);
void em_vk_staging_release_all(vk_device *D);
/* A staging buffer of at least size bytes that no pending work uses (vk_transfer.c; D->lock
 * held); NULL on error. */
void em_vk_record_readback(vk_device *D, VkCommandBuffer cmd, vk_block *b, uint64_t offset,
                           vk_staging *st, uint64_t n);
vk_staging *em_vk_staging_get(vk_device *D, uint64_t size);
/* Makes the device's writes to st visible to the host (non-coherent memory). */
void em_vk_staging_invalidate(vk_device *D, vk_staging *st);
/* vk_read_async.c: the read_start / read_finish / read_free slots. */
void *em_vk_read_start(const em_storage *s, size_t offset, size_t nbytes);
int em_vk_read_finish(void *h, void *dst, size_t nbytes, int wait);
void em_vk_read_free(void *h);

/* vk_pipeline.c */
int em_vk_pipeline_init(vk_device *D);
/* The pipeline cache file of D ($EMBER_CACHE_DIR, $XDG_CACHE_HOME/ember or ~/.cache/ember, then
 * vulkan-<vendor>-<device>-<uuid>.bin), or "" when no folder is known. */
void em_vk_cache_file(const vk_device *D, char *buf, size_t n);
/* Records one dispatch of kernel k over n elements (the push constants say how) with up to 4
 * operands (operand 0 is written, NULL operands are unused). */
int em_vk_dispatch(vk_device *D, vk_kernel_id k, const vk_params *p, const em_tensor *const *ops,
                   int nops);
/* Whether the device can run kernel k (its SPIR-V needs features the device may lack). */
bool em_vk_kernel_supported(const vk_device *D, vk_kernel_id k);

/* vk_kernels.c: the kernel-table functions. */
int em_vk_copy(em_tensor *dst, const em_tensor *src);
int em_vk_fill(em_tensor *dst, double value);
int em_vk_arange(em_tensor *out, double start, double step);
int em_vk_linspace(em_tensor *out, double start, double end);
int em_vk_unary(em_unary_op op, em_tensor *out, const em_tensor *x);
int em_vk_binary(em_binary_op op, em_tensor *out, const em_tensor *a, const em_tensor *b,
                 double alpha);
int em_vk_where(em_tensor *out, const em_tensor *cond, const em_tensor *a, const em_tensor *b);
int em_vk_clamp(em_tensor *out, const em_tensor *x, const em_tensor *lo, const em_tensor *hi);
int em_vk_lerp(em_tensor *out, const em_tensor *start, const em_tensor *end,
               const em_tensor *weight);
int em_vk_addc(int divide, em_tensor *out, const em_tensor *x, const em_tensor *t1,
               const em_tensor *t2, double value);

/* ---- shutdown (vk_shutdown.c: em_vulkan_shutdown, device.h) ----------------------------------
 * Each file that creates objects for a started device destroys them, D->lock held, after the
 * device is idle (the order is vk_shutdown.c's). */
void em_vk_command_destroy(vk_device *D);   /* fences, descriptor pools, the command pool */
void em_vk_pipeline_destroy(vk_device *D);  /* saves the cache file; pipelines and layouts */
void em_vk_memory_destroy(vk_device *D);    /* every slab (none may hold a live storage) */
void em_vk_flag_destroy(vk_device *D);
void em_vk_pinned_destroy(vk_device *D);    /* every cached pinned buffer (none live) */
void em_vk_profile_destroy(vk_device *D);   /* prints the device's table now */
/* Whether live storages remain on D (tensors, or pinned CPU tensors): shutdown refuses. */
bool em_vk_has_live_memory(vk_device *D);
/* Waits for, checks (all first), then destroys and frees the n devices (NULL entries skipped). */
int em_vk_shutdown_devices(vk_device **devices, int n);

/* The embedded SPIR-V (generated by CMake from the kernels directory: spirv.c). */
typedef struct em_spirv_module {
  const char *name;           /* "pointwise_F32": file name, then the variant */
  const uint32_t *words;
  size_t size;                /* bytes */
} em_spirv_module;
extern const em_spirv_module em_spirv_modules[];
extern const size_t em_spirv_module_count;

#endif
