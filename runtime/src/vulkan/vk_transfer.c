/*
 * vk_transfer.c: host <-> device copies (the `read` and `write` slots) through host-visible
 * staging buffers, the Vulkan form of pinned memory.
 *
 * A write of a few aligned bytes is recorded inline (vkCmdUpdateBuffer). A larger write copies
 * the host data into a free staging buffer and records a buffer copy into the current batch: it returns without waiting, and the staging buffer stays busy until that batch
 * completes. A read records the copy into a staging buffer, submits, waits for that batch (the
 * only place besides synchronize where the host waits), then copies out (a read into pinned
 * memory copies straight there instead). Transfers larger than
 * a staging piece go piece by piece. Staging buffers are kept for reuse, up to a bound, and
 * released by memory.empty_cache.
 */
#include <stdlib.h>

#include "vk.h"

static const uint64_t PIECE = 16u << 20;        /* bytes per staging copy */
static const uint64_t STAGING_CAP = 64u << 20;  /* staging bytes kept before waiting */
static const uint64_t STAGING_MIN = 1u << 20;
/* Small writes (a scalar, a hyperparameter, a few indices) travel inside the command buffer
 * (vkCmdUpdateBuffer allows 64 KiB): no staging buffer is held until the batch completes. */
enum { INLINE_WRITE = 4096 };

static vk_staging *new_staging(vk_device *D, uint64_t size) {
  vk_staging *st = calloc(1, sizeof *st);
  if (st == NULL) {
    em_error_kind_set(EM_ERR_OOM, "out of memory on cpu: a staging record");
    return NULL;
  }
  VkBufferUsageFlags usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  if (em_vk_alloc_buffer(D, size, D->mem.staging_type, usage, &st->buffer, &st->memory) != 0) {
    free(st);
    return NULL;
  }
  VkResult r = D->fn.vkMapMemory(D->dev, st->memory, 0, VK_WHOLE_SIZE, 0, &st->mapped);
  if (r != VK_SUCCESS) {
    D->fn.vkDestroyBuffer(D->dev, st->buffer, NULL);
    D->fn.vkFreeMemory(D->dev, st->memory, NULL);
    free(st);
    em_error("%s: mapping a staging buffer failed (%s)", D->name, em_vk_result_name(r));
    return NULL;
  }
  st->size = size;
  st->next = D->staging;
  D->staging = st;
  D->staging_bytes += size;
  return st;
}

static void destroy_staging(vk_device *D, vk_staging *st) {
  D->fn.vkUnmapMemory(D->dev, st->memory);
  D->fn.vkDestroyBuffer(D->dev, st->buffer, NULL);
  D->fn.vkFreeMemory(D->dev, st->memory, NULL);
  D->staging_bytes -= st->size;
  free(st);
}

/* A staging buffer of at least `size` bytes that no pending work uses. */
static vk_staging *get_staging(vk_device *D, uint64_t size) {
  for (;;) {
    vk_staging *best = NULL, *oldest = NULL;
    for (vk_staging *st = D->staging; st; st = st->next) {
      if (st->size < size || st->held) continue;
      if (st->busy_until <= D->completed_serial) {
        if (best == NULL || st->size < best->size) best = st;
      } else if (oldest == NULL || st->busy_until < oldest->busy_until) {
        oldest = st;
      }
    }
    if (best) return best;
    if (oldest && D->staging_bytes + size > STAGING_CAP) {
      if (em_vk_wait_serial(D, oldest->busy_until) != 0) return NULL;
      continue;
    }
    uint64_t want = size < STAGING_MIN ? STAGING_MIN : size;
    return new_staging(D, want);
  }
}

void em_vk_staging_release_all(vk_device *D) {
  vk_staging **link = &D->staging;
  while (*link) {
    vk_staging *st = *link;
    if (st->busy_until > D->completed_serial || st->held) {
      link = &st->next;
      continue;
    }
    *link = st->next;
    destroy_staging(D, st);
  }
}

/* Records, into cmd, the copy of n bytes at `offset` in block b into staging buffer st, after
 * whatever still writes b, with the barrier that makes the copy visible to the host's reads of
 * the mapped memory. Shared by the synchronous read and the asynchronous one (vk_read_async.c). */
void em_vk_record_readback(vk_device *D, VkCommandBuffer cmd, vk_block *b, uint64_t offset,
                           vk_staging *st, uint64_t n) {
  vk_block *r[1] = {b};
  em_vk_hazards(D, cmd, r, 1, NULL, 0);
  VkBufferCopy region = {b->offset + offset, 0, n};
  D->fn.vkCmdCopyBuffer(cmd, b->slab->buffer, st->buffer, 1, &region);
  if (D->profile) em_vk_profile_stamp(D, cmd, -1, 0, "copy_to_host");
  VkMemoryBarrier mb = {
    .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
    .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
    .dstAccessMask = VK_ACCESS_HOST_READ_BIT,
  };
  D->fn.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0,
                             1, &mb, 0, NULL, 0, NULL);
}

vk_staging *em_vk_staging_get(vk_device *D, uint64_t size) { return get_staging(D, size); }

static void flush_range(vk_device *D, vk_staging *st, uint64_t n, bool to_device) {
  if (D->mem.staging_coherent) return;
  VkMappedMemoryRange range = {
    .sType = VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE,
    .memory = st->memory,
    .offset = 0,
    .size = VK_WHOLE_SIZE,
  };
  (void)n;
  if (to_device) D->fn.vkFlushMappedMemoryRanges(D->dev, 1, &range);
  else D->fn.vkInvalidateMappedMemoryRanges(D->dev, 1, &range);
}

void em_vk_staging_invalidate(vk_device *D, vk_staging *st) { flush_range(D, st, st->size, false); }

int em_vk_write(em_storage *s, size_t offset, const void *src, size_t nbytes) {
  vk_device *D = em_vk_device(s->device_id);
  vk_block *b = s->backend_ctx;
  int rc = 0;
  pthread_mutex_lock(&D->lock);
  uint64_t dst = b->offset + offset;
  if (nbytes <= INLINE_WRITE && nbytes % 4 == 0 && dst % 4 == 0) {
    VkCommandBuffer cmd = nbytes ? em_vk_cmd(D) : NULL;
    if (cmd != NULL) {
      vk_block *w[1] = {b};
      em_vk_hazards(D, cmd, NULL, 0, w, 1);
      D->fn.vkCmdUpdateBuffer(cmd, b->slab->buffer, dst, nbytes, src);
      if (D->profile) em_vk_profile_stamp(D, cmd, -1, 0, "copy_from_host");
    }
    rc = nbytes == 0 ? 0 : cmd ? em_vk_count_dispatch(D) : -1;
    pthread_mutex_unlock(&D->lock);
    return rc;
  }
  uint64_t from;
  vk_pinned *pinned = em_vk_pinned_find(D, src, nbytes, &from);
  if (pinned != NULL) { /* straight from pinned memory: no staging copy */
    rc = em_vk_pinned_copy(D, pinned, from, b, dst, nbytes);
    pthread_mutex_unlock(&D->lock);
    return rc;
  }
  for (size_t done = 0; done < nbytes && rc == 0;) {
    uint64_t n = nbytes - done < PIECE ? nbytes - done : PIECE;
    vk_staging *st = get_staging(D, n);
    VkCommandBuffer cmd = st ? em_vk_cmd(D) : NULL;
    if (cmd == NULL) {
      rc = -1;
      break;
    }
    memcpy(st->mapped, (const char *)src + done, n);
    flush_range(D, st, n, true);
    vk_block *w[1] = {b};
    em_vk_hazards(D, cmd, NULL, 0, w, 1);
    VkBufferCopy region = {0, b->offset + offset + done, n};
    D->fn.vkCmdCopyBuffer(cmd, st->buffer, b->slab->buffer, 1, &region);
    if (D->profile) em_vk_profile_stamp(D, cmd, -1, 0, "copy_from_host");
    st->busy_until = D->next_serial; /* the serial the current batch will get */
    rc = em_vk_count_dispatch(D);
    done += n;
  }
  pthread_mutex_unlock(&D->lock);
  return rc;
}

int em_vk_read(const em_storage *s, size_t offset, void *dst, size_t nbytes) {
  vk_device *D = em_vk_device(s->device_id);
  vk_block *b = s->backend_ctx;
  int rc = 0;
  pthread_mutex_lock(&D->lock);
  uint64_t into;
  vk_pinned *pinned = nbytes ? em_vk_pinned_find(D, dst, nbytes, &into) : NULL;
  if (pinned != NULL) { /* straight into pinned memory: no staging copy */
    rc = em_vk_pinned_read(D, pinned, into, b, offset, nbytes);
    pthread_mutex_unlock(&D->lock);
    return rc;
  }
  for (size_t done = 0; done < nbytes && rc == 0;) {
    uint64_t n = nbytes - done < PIECE ? nbytes - done : PIECE;
    vk_staging *st = get_staging(D, n);
    VkCommandBuffer cmd = st ? em_vk_cmd(D) : NULL;
    if (cmd == NULL) {
      rc = -1;
      break;
    }
    em_vk_record_readback(D, cmd, b, offset + done, st, n);
    uint64_t serial = D->next_serial;
    st->busy_until = serial;
    rc = em_vk_submit(D);
    if (rc == 0) rc = em_vk_wait_serial(D, serial);
    if (rc == 0) {
      flush_range(D, st, n, false);
      memcpy((char *)dst + done, st->mapped, n);
    }
    done += n;
  }
  pthread_mutex_unlock(&D->lock);
  return rc;
}
