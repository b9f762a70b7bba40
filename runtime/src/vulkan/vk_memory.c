/*
 * vk_memory.c: the caching allocator of a Vulkan device.
 *
 * Tensors never get their own VkDeviceMemory: drivers limit the number of allocations (4096 is
 * common) and each one is slow. Memory comes in slabs, each a VkDeviceMemory with one storage
 * buffer over it, and a storage gets a block: a range of a slab, which kernels bind with an
 * offset. Blocks of freed storages return to their slab's free list (sorted, coalesced) and are
 * reused: that list is the cache. Small requests (under 1 MiB) share 8 MiB slabs; large ones
 * come from slabs of at least 64 MiB, or their own size rounded to 2 MiB. No block may exceed
 * maxStorageBufferRange (a kernel binds a whole block), and no slab maxMemoryAllocationSize.
 *
 * Statistics go through alloc.c: allocated = bytes of live storages, reserved = bytes of all
 * slabs (the rest is cached). An allocation that fails, or would pass the limit
 * (memory.set_limit), first frees the empty slabs, then runs the host's GC hook, then retries;
 * only then is it an out-of-memory error with the figures.
 *
 * A freed range remembers the epochs of its last accesses, so that the next storage placed
 * there waits (with a barrier) for work still reading or writing the old one (vk_command.c).
 */
#include <stdio.h>
#include <stdlib.h>

#include "vk.h"

struct vk_range {
  uint64_t offset, size, epoch;
  vk_range *next;
};

enum { SMALL_REQUEST = 1 << 20 };
static const uint64_t SMALL_SLAB = 8u << 20, LARGE_SLAB = 64u << 20, LARGE_ROUND = 2u << 20;

static uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

static bool find_type(const vk_device *D, VkMemoryPropertyFlags want, uint32_t heap, uint32_t *out) {
  for (uint32_t t = 0; t < D->memprops.memoryTypeCount; t++) {
    const VkMemoryType *mt = &D->memprops.memoryTypes[t];
    if ((mt->propertyFlags & want) == want && (heap == UINT32_MAX || mt->heapIndex == heap)) {
      *out = t;
      return true;
    }
  }
  return false;
}

int em_vk_memory_init(vk_device *D) {
  vk_memory *M = &D->mem;
  /* Tensors: a device-local type of the largest device-local heap. */
  uint32_t heap = 0;
  for (uint32_t h = 0; h < D->memprops.memoryHeapCount; h++)
    if ((D->memprops.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) &&
        D->memprops.memoryHeaps[h].size > D->memprops.memoryHeaps[heap].size)
      heap = h;
  if (!find_type(D, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, heap, &M->type_index) &&
      !find_type(D, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, UINT32_MAX, &M->type_index))
    return em_error("%s: no device-local memory type", D->name);
  M->heap_index = D->memprops.memoryTypes[M->type_index].heapIndex;
  /* Staging: host-visible and coherent, cached when possible (reads come back through it). */
  VkMemoryPropertyFlags hv = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  M->staging_coherent = true;
  if (!find_type(D, hv | VK_MEMORY_PROPERTY_HOST_CACHED_BIT, UINT32_MAX, &M->staging_type) &&
      !find_type(D, hv, UINT32_MAX, &M->staging_type)) {
    M->staging_coherent = false;
    if (!find_type(D, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT, UINT32_MAX, &M->staging_type))
      return em_error("%s: no host-visible memory type for transfers", D->name);
  }
  M->align = D->props.limits.minStorageBufferOffsetAlignment;
  if (M->align < 64) M->align = 64;
  M->max_slab = D->max_alloc ? D->max_alloc : ((uint64_t)1 << 30);
  uint64_t heap_size = D->memprops.memoryHeaps[M->heap_index].size;
  if (M->max_slab > heap_size) M->max_slab = heap_size;
  M->small_slab = SMALL_SLAB < M->max_slab ? SMALL_SLAB : M->max_slab;
  M->large_slab = LARGE_SLAB < M->max_slab ? LARGE_SLAB : M->max_slab;
  return 0;
}

int em_vk_alloc_buffer(vk_device *D, uint64_t size, uint32_t type_index, VkBufferUsageFlags usage,
                       VkBuffer *buffer, VkDeviceMemory *memory) {
  VkBufferCreateInfo bi = {
    .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
    .size = size,
    .usage = usage,
    .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
  };
  VkResult r = D->fn.vkCreateBuffer(D->dev, &bi, NULL, buffer);
  if (r != VK_SUCCESS) goto fail;
  VkMemoryRequirements req;
  D->fn.vkGetBufferMemoryRequirements(D->dev, *buffer, &req);
  if (!(req.memoryTypeBits & (1u << type_index))) {
    D->fn.vkDestroyBuffer(D->dev, *buffer, NULL);
    return em_error("%s: the buffer cannot live in memory type %u", D->name, type_index);
  }
  VkMemoryAllocateInfo ai = {
    .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
    .allocationSize = req.size,
    .memoryTypeIndex = type_index,
  };
  r = D->fn.vkAllocateMemory(D->dev, &ai, NULL, memory);
  if (r != VK_SUCCESS) {
    D->fn.vkDestroyBuffer(D->dev, *buffer, NULL);
    goto fail;
  }
  r = D->fn.vkBindBufferMemory(D->dev, *buffer, *memory, 0);
  if (r != VK_SUCCESS) {
    D->fn.vkDestroyBuffer(D->dev, *buffer, NULL);
    D->fn.vkFreeMemory(D->dev, *memory, NULL);
    goto fail;
  }
  return 0;
fail:
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
    return em_error_kind_set(EM_ERR_OOM, "%s: out of memory (%s)", D->name, em_vk_result_name(r));
  return em_error("%s: creating a buffer of %llu bytes failed (%s)", D->name,
                  (unsigned long long)size, em_vk_result_name(r));
}

/* ---- slabs and their free lists (D->lock held) --------------------------------------------- */

static vk_slab *new_slab(vk_device *D, uint64_t size, bool large) {
  vk_slab *slab = calloc(1, sizeof *slab);
  vk_range *r = calloc(1, sizeof *r);
  if (slab == NULL || r == NULL) {
    free(slab);
    free(r);
    return NULL;
  }
  VkBufferUsageFlags usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                             VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  if (em_vk_alloc_buffer(D, size, D->mem.type_index, usage, &slab->buffer, &slab->memory) != 0) {
    free(slab);
    free(r);
    return NULL;
  }
  slab->size = size;
  slab->large = large;
  r->size = size;
  slab->free = r;
  slab->next = D->mem.slabs;
  D->mem.slabs = slab;
  D->mem.reserved += (int64_t)size;
  em_memory_note_cached(D->id, (int64_t)size);
  return slab;
}

/* Best fit among the slabs of one pool: the smallest free range that holds `need`. */
static vk_block *take_block(vk_device *D, uint64_t need, bool large) {
  vk_slab *best_slab = NULL;
  vk_range *best = NULL, *best_prev = NULL;
  for (vk_slab *slab = D->mem.slabs; slab; slab = slab->next) {
    if (slab->large != large) continue;
    vk_range *prev = NULL;
    for (vk_range *r = slab->free; r; prev = r, r = r->next) {
      if (r->size >= need && (best == NULL || r->size < best->size)) {
        best_slab = slab, best = r, best_prev = prev;
        if (r->size == need) goto found;
      }
    }
  }
  if (best == NULL) return NULL;
found:;
  vk_block *b = malloc(sizeof *b);
  if (b == NULL) return NULL;
  b->slab = best_slab;
  b->offset = best->offset;
  b->size = need;
  b->read_epoch = b->write_epoch = best->epoch;
  best->offset += need;
  best->size -= need;
  if (best->size == 0) {
    if (best_prev) best_prev->next = best->next;
    else best_slab->free = best->next;
    free(best);
  }
  best_slab->used += need;
  return b;
}

/* Returns a block's range to its slab, merging it with free neighbours. */
static void give_back(vk_block *b) {
  vk_slab *slab = b->slab;
  uint64_t epoch = b->read_epoch > b->write_epoch ? b->read_epoch : b->write_epoch;
  vk_range *prev = NULL, *next = slab->free;
  while (next && next->offset < b->offset) prev = next, next = next->next;
  slab->used -= b->size;
  if (prev && prev->offset + prev->size == b->offset) {
    prev->size += b->size;
    if (epoch > prev->epoch) prev->epoch = epoch;
    if (next && prev->offset + prev->size == next->offset) {
      prev->size += next->size;
      if (next->epoch > prev->epoch) prev->epoch = next->epoch;
      prev->next = next->next;
      free(next);
    }
    return;
  }
  if (next && b->offset + b->size == next->offset) {
    next->offset = b->offset;
    next->size += b->size;
    if (epoch > next->epoch) next->epoch = epoch;
    return;
  }
  vk_range *r = malloc(sizeof *r);
  if (r == NULL) return; /* the range is lost to the cache, never reused: safe */
  r->offset = b->offset;
  r->size = b->size;
  r->epoch = epoch;
  r->next = next;
  if (prev) prev->next = r;
  else slab->free = r;
}

/* Frees the slabs no storage uses, after the device has finished with them. */
static int release_empty_slabs(vk_device *D) {
  bool any = false;
  for (vk_slab *s = D->mem.slabs; s && !any; s = s->next) any = s->used == 0;
  if (!any) return 0;
  int rc = em_vk_wait_idle(D);
  vk_slab **link = &D->mem.slabs;
  while (*link) {
    vk_slab *s = *link;
    if (s->used != 0) {
      link = &s->next;
      continue;
    }
    *link = s->next;
    D->fn.vkDestroyBuffer(D->dev, s->buffer, NULL);
    D->fn.vkFreeMemory(D->dev, s->memory, NULL);
    while (s->free) {
      vk_range *r = s->free;
      s->free = r->next;
      free(r);
    }
    D->mem.reserved -= (int64_t)s->size;
    em_memory_note_cached(D->id, -(int64_t)s->size);
    free(s);
  }
  return rc;
}

/* One attempt: the cache, then a new slab. NULL with the error set. */
static vk_block *try_alloc(vk_device *D, size_t nbytes, uint64_t need) {
  if (em_memory_check_limit(D->id, nbytes) != 0) {
    em_error_kind_set(EM_ERR_OOM, "limit");
    return NULL;
  }
  bool large = need >= SMALL_REQUEST;
  vk_block *b = take_block(D, need, large);
  if (b) return b;
  uint64_t size = large ? round_up(need, LARGE_ROUND) : D->mem.small_slab;
  if (large && size < D->mem.large_slab) size = D->mem.large_slab;
  if (size > D->mem.max_slab) size = need;
  if (new_slab(D, size, large) == NULL) {
    /* A whole default slab may not fit where the request alone would. */
    if (size == need || new_slab(D, need, large) == NULL) return NULL;
  }
  return take_block(D, need, large);
}

static const char *human(char *buf, size_t cap, double b) {
  static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, u++;
  if (u == 0) snprintf(buf, cap, "%.0f B", b);
  else snprintf(buf, cap, "%.1f %s", b, units[u]);
  return buf;
}

int em_vk_storage_alloc(em_storage *s) {
  vk_device *D = em_vk_device(s->device_id);
  if (D == NULL) return em_error("storage: device %d is not a Vulkan device", s->device_id);
  if (!__atomic_load_n(&D->started, __ATOMIC_ACQUIRE) && em_device_start(s->device_id) != 0) return -1;
  uint64_t need = round_up(s->nbytes ? s->nbytes : 1, D->mem.align);
  if (need > D->max_range) {
    char want[32], limit[32];
    return em_error("%s: a tensor of %s exceeds the largest storage buffer the device allows "
                    "(%s, maxStorageBufferRange)", D->name, human(want, sizeof want, (double)s->nbytes),
                    human(limit, sizeof limit, (double)D->max_range));
  }
  pthread_mutex_lock(&D->lock);
  vk_block *b = try_alloc(D, s->nbytes, need);
  if (b == NULL && em_last_error_kind() == EM_ERR_OOM) {
    /* The three steps before giving up: empty the cache, let the host collect, retry. */
    release_empty_slabs(D);
    pthread_mutex_unlock(&D->lock);
    em_memory_run_gc_hook();
    pthread_mutex_lock(&D->lock);
    b = try_alloc(D, s->nbytes, need);
  }
  if (b) {
    em_memory_note_alloc(D->id, s->nbytes);
    em_memory_note_cached(D->id, -(int64_t)s->nbytes);
  }
  pthread_mutex_unlock(&D->lock);
  if (b == NULL) {
    if (em_last_error_kind() == EM_ERR_OOM) return em_memory_oom_error(D->id, s->nbytes);
    return -1;
  }
  s->data = NULL; /* device memory has no host address */
  s->backend_ctx = b;
  return 0;
}

void em_vk_storage_free(em_storage *s) {
  vk_device *D = em_vk_device(s->device_id);
  vk_block *b = s->backend_ctx;
  if (D == NULL || b == NULL) return;
  pthread_mutex_lock(&D->lock);
  give_back(b);
  em_memory_note_free(D->id, s->nbytes);
  em_memory_note_cached(D->id, (int64_t)s->nbytes);
  pthread_mutex_unlock(&D->lock);
  free(b);
}

int em_vk_empty_cache(void *ctx) {
  vk_device *D = ctx;
  pthread_mutex_lock(&D->lock);
  int rc = release_empty_slabs(D);
  if (rc == 0) rc = em_vk_wait_idle(D);
  if (rc == 0) em_vk_staging_release_all(D);
  if (rc == 0) em_vk_pinned_release_all(D);
  pthread_mutex_unlock(&D->lock);
  return rc;
}
