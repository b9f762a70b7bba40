/*
 * vk_pinned.c: pinned memory, the pin_alloc slot (backend.h): CPU tensors whose data lives in
 * a host-visible buffer of a Vulkan device, so that a copy to the device is one recorded
 * vkCmdCopyBuffer from that buffer, with no memcpy into a staging buffer and no wait (what
 * PyTorch's pin_memory plus non_blocking copies give). The DataLoader builds its batches there
 * when asked (em_prefetcher_new's pin_device).
 *
 * Each pinned storage has its own buffer. A released one goes to a cache (D->pinned, with the
 * live ones) and is reused for a later request of a similar size once the device has
 * finished the copies that read it (busy_until, as for staging buffers): a data loader's
 * batch-sized buffers cycle through it without new allocations. The cache keeps at most
 * PINNED_CACHE bytes of free buffers; memory.empty_cache releases it.
 */
#include <stdlib.h>

#include "vk.h"

static const uint64_t PINNED_CACHE = 256u << 20;

struct vk_pinned {
  em_pinned_head head;        /* first: how storage.c releases the storage */
  vk_device *D;
  VkDeviceMemory memory;
  VkBuffer buffer;
  void *mapped;
  uint64_t size;
  uint64_t busy_until;        /* the submission serial that must complete before reuse */
  bool in_use;
  struct vk_pinned *next;
};

static void destroy(vk_device *D, vk_pinned *p) {
  D->fn.vkUnmapMemory(D->dev, p->memory);
  D->fn.vkDestroyBuffer(D->dev, p->buffer, NULL);
  D->fn.vkFreeMemory(D->dev, p->memory, NULL);
  free(p);
}

/* Frees cached (released) buffers that no pending copy reads, oldest last, until at most
 * `keep` bytes of them remain. D->lock held. */
static void trim(vk_device *D, uint64_t keep) {
  uint64_t cached = 0;
  for (vk_pinned *p = D->pinned; p; p = p->next)
    if (!p->in_use) cached += p->size;
  for (vk_pinned **link = &D->pinned; *link && cached > keep;) {
    vk_pinned *p = *link;
    if (p->in_use || p->busy_until > D->completed_serial) {
      link = &p->next;
      continue;
    }
    *link = p->next;
    cached -= p->size;
    destroy(D, p);
  }
}

static void release(em_storage *s) {
  vk_pinned *p = s->backend_ctx;
  vk_device *D = p->D;
  pthread_mutex_lock(&D->lock);
  p->in_use = false;
  trim(D, PINNED_CACHE);
  pthread_mutex_unlock(&D->lock);
}

void em_vk_pinned_release_all(vk_device *D) { trim(D, 0); }

int em_vk_pin_alloc(em_storage *s, int device) {
  vk_device *D = em_vk_device(device);
  if (D == NULL || !__atomic_load_n(&D->started, __ATOMIC_ACQUIRE)) return em_error("pin_memory: the Vulkan device is not started");
  uint64_t size = s->nbytes ? (s->nbytes + 63) / 64 * 64 : 64;
  pthread_mutex_lock(&D->lock);
  vk_pinned *best = NULL;
  for (vk_pinned *p = D->pinned; p; p = p->next)
    if (!p->in_use && p->size >= size && p->size <= 2 * size &&
        p->busy_until <= D->completed_serial && (best == NULL || p->size < best->size))
      best = p;
  if (best == NULL) {
    best = calloc(1, sizeof *best);
    VkBufferUsageFlags usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    if (best == NULL ||
        em_vk_alloc_buffer(D, size, D->mem.staging_type, usage, &best->buffer, &best->memory) != 0) {
      if (best == NULL) em_error_kind_set(EM_ERR_OOM, "out of memory on cpu: a pinned-memory record");
      free(best);
      pthread_mutex_unlock(&D->lock);
      em_error_prefix("pin_memory");
      return -1;
    }
    VkResult r = D->fn.vkMapMemory(D->dev, best->memory, 0, VK_WHOLE_SIZE, 0, &best->mapped);
    if (r != VK_SUCCESS) {
      D->fn.vkDestroyBuffer(D->dev, best->buffer, NULL);
      D->fn.vkFreeMemory(D->dev, best->memory, NULL);
      free(best);
      pthread_mutex_unlock(&D->lock);
      return em_error("pin_memory: mapping memory of %s failed (%s)", D->name,
                      em_vk_result_name(r));
    }
    best->size = size;
    best->D = D;
    best->head = (em_pinned_head){release, D->id};
    best->next = D->pinned;
    D->pinned = best;
  }
  best->in_use = true;
  pthread_mutex_unlock(&D->lock);
  s->data = best->mapped;
  s->backend_ctx = best;
  return 0;
}

/* The live pinned buffer of D holding [src, src + nbytes), or NULL. D->lock held. */
vk_pinned *em_vk_pinned_find(vk_device *D, const void *src, size_t nbytes, uint64_t *offset) {
  const char *c = src;
  for (vk_pinned *p = D->pinned; p; p = p->next) {
    const char *m = p->mapped;
    if (p->in_use && c >= m && c + nbytes <= m + p->size) {
      *offset = (uint64_t)(c - m);
      return p;
    }
  }
  return NULL;
}

/* Records the copy of nbytes at `offset` of pinned buffer p into block b at dst. D->lock held. */
int em_vk_pinned_copy(vk_device *D, vk_pinned *p, uint64_t offset, vk_block *b, uint64_t dst,
                      size_t nbytes) {
  VkCommandBuffer cmd = em_vk_cmd(D);
  if (cmd == NULL) return -1;
  if (!D->mem.staging_coherent) {
    VkMappedMemoryRange range = {.sType = VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE,
                                 .memory = p->memory, .offset = 0, .size = VK_WHOLE_SIZE};
    D->fn.vkFlushMappedMemoryRanges(D->dev, 1, &range);
  }
  vk_block *w[1] = {b};
  em_vk_hazards(D, cmd, NULL, 0, w, 1);
  VkBufferCopy region = {offset, dst, nbytes};
  D->fn.vkCmdCopyBuffer(cmd, p->buffer, b->slab->buffer, 1, &region);
  if (D->profile) em_vk_profile_stamp(D, cmd, -1, 0, "copy_from_host");
  p->busy_until = D->next_serial; /* the serial the current batch will get */
  return em_vk_count_dispatch(D);
}

/* Reads nbytes at `src` of block b straight into pinned buffer p at `offset`: one recorded copy,
 * submitted and waited for, without a staging buffer or a memcpy (ember.distributed stages
 * device tensors this way). The barrier before the copy orders it after earlier copies that
 * read p (a pending copy to the device from the same range). D->lock held. */
/* Records the read (barriers, copy) into the current batch; returns its serial, 0 on error. */
static uint64_t record_read(vk_device *D, vk_pinned *p, uint64_t offset, vk_block *b,
                            uint64_t src, size_t nbytes) {
  VkCommandBuffer cmd = em_vk_cmd(D);
  if (cmd == NULL) return 0;
  vk_block *r[1] = {b};
  em_vk_hazards(D, cmd, r, 1, NULL, 0);
  VkMemoryBarrier before = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                            .srcAccessMask = VK_ACCESS_TRANSFER_READ_BIT,
                            .dstAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT};
  D->fn.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
                             0, 1, &before, 0, NULL, 0, NULL);
  VkBufferCopy region = {b->offset + src, offset, nbytes};
  D->fn.vkCmdCopyBuffer(cmd, b->slab->buffer, p->buffer, 1, &region);
  if (D->profile) em_vk_profile_stamp(D, cmd, -1, 0, "copy_to_host");
  VkMemoryBarrier after = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                           .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                           .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
  D->fn.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0,
                             1, &after, 0, NULL, 0, NULL);
  uint64_t serial = D->next_serial;
  p->busy_until = serial;
  return em_vk_submit(D) == 0 ? serial : 0;
}

int em_vk_pinned_read(vk_device *D, vk_pinned *p, uint64_t offset, vk_block *b, uint64_t src,
                      size_t nbytes) {
  uint64_t serial = record_read(D, p, offset, b, src, nbytes);
  int rc = serial ? em_vk_wait_serial(D, serial) : -1;
  if (rc == 0 && !D->mem.staging_coherent) {
    VkMappedMemoryRange range = {.sType = VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE,
                                 .memory = p->memory, .offset = 0, .size = VK_WHOLE_SIZE};
    D->fn.vkInvalidateMappedMemoryRanges(D->dev, 1, &range);
  }
  return rc;
}

/* The pinned_read_start slot: the read above, submitted but not waited for. Pinned memory that
 * is not host-coherent would need an invalidate after the copy, which the poll cannot do
 * without the buffer: there the read is synchronous, and the ticket is already complete. */
uint64_t em_vk_pinned_read_start(const em_storage *s, size_t offset, void *dst, size_t nbytes) {
  vk_device *D = em_vk_device(s->device_id);
  vk_block *b = s->backend_ctx;
  pthread_mutex_lock(&D->lock);
  uint64_t into, serial = 0;
  vk_pinned *p = em_vk_pinned_find(D, dst, nbytes, &into);
  if (p == NULL) {
    em_error("%s: a read into pinned memory needs a destination in that device's pinned memory",
             D->name);
  } else if (!D->mem.staging_coherent) {
    if (em_vk_pinned_read(D, p, into, b, offset, nbytes) == 0) serial = 1; /* done already */
  } else {
    serial = record_read(D, p, into, b, offset, nbytes);
  }
  pthread_mutex_unlock(&D->lock);
  return serial;
}

/* The pinned_read_poll slot: asks the fences, never waits. */
int em_vk_pinned_read_poll(int device, uint64_t ticket) {
  vk_device *D = em_vk_device(device);
  pthread_mutex_lock(&D->lock);
  int rc = em_vk_poll_serial(D, ticket);
  pthread_mutex_unlock(&D->lock);
  return rc;
}

bool em_vk_pinned_live(vk_device *D) {
  for (vk_pinned *p = D->pinned; p; p = p->next)
    if (p->in_use) return true;
  return false;
}

void em_vk_pinned_destroy(vk_device *D) {
  while (D->pinned) {
    vk_pinned *p = D->pinned;
    D->pinned = p->next;
    destroy(D, p);
  }
}
