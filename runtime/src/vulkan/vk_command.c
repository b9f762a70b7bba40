/*
 * vk_command.c: command batches and synchronization.
 *
 * Ops are recorded into the current command buffer and submitted in batches: a synchronous
 * submit plus fence wait costs around 100 us, a recorded dispatch a couple of microseconds. A
 * batch is submitted when it holds VK_BATCH_DISPATCHES dispatches, or a few dispatches while the
 * device has nothing else to do (so it starts early), and when the host must wait: it reads data
 * (item, a copy to the CPU, printing) or calls synchronize. VK_FRAMES command buffers rotate,
 * each with its fence; recording into a buffer still executing first waits for it, which bounds
 * how far the host runs ahead.
 *
 * Barriers: every block (a storage's memory) remembers the epoch of its last read and last
 * write; the device's epoch advances at each barrier. A dispatch that reads a block written in
 * the current epoch, or writes one read or written in it, depends on work not yet ordered
 * before it, so one global memory barrier goes first; independent dispatches run without any.
 * Epochs only grow, across batches too: a barrier recorded in a later command buffer orders it
 * after earlier submissions, so the scheme holds across submissions and fence waits alike.
 */
#include <stdio.h>

#include "vk.h"

/* An idle device gets the batch early: after VK_EARLY_SUBMIT dispatches, or as soon as the
 * batch holds VK_EARLY_GROUPS workgroups (one large op: a millisecond of work that should not
 * wait for the host's next op or its garbage collection). */
enum { VK_EARLY_SUBMIT = 16, VK_EARLY_GROUPS = 2048 };

int em_vk_command_init(vk_device *D) {
  VkCommandPoolCreateInfo pi = {
    .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
    .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
    .queueFamilyIndex = D->queue_family,
  };
  VkResult r = D->fn.vkCreateCommandPool(D->dev, &pi, NULL, &D->cmd_pool);
  if (r != VK_SUCCESS) return em_error("%s: vkCreateCommandPool failed (%s)", D->name, em_vk_result_name(r));
  VkCommandBuffer cmds[VK_FRAMES];
  VkCommandBufferAllocateInfo ai = {
    .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
    .commandPool = D->cmd_pool,
    .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
    .commandBufferCount = VK_FRAMES,
  };
  r = D->fn.vkAllocateCommandBuffers(D->dev, &ai, cmds);
  if (r != VK_SUCCESS) return em_error("%s: vkAllocateCommandBuffers failed (%s)", D->name, em_vk_result_name(r));
  for (int i = 0; i < VK_FRAMES; i++) {
    vk_frame *f = &D->frames[i];
    f->cmd = cmds[i];
    VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    r = D->fn.vkCreateFence(D->dev, &fi, NULL, &f->fence);
    if (r != VK_SUCCESS) return em_error("%s: vkCreateFence failed (%s)", D->name, em_vk_result_name(r));
    if (!D->push_descriptors) {
      /* Without push descriptors, each batch allocates its sets from its own pool, reset when
       * the batch completes; a batch never holds more dispatches than the pool has sets. */
      VkDescriptorPoolSize size = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                   VK_MAX_OPERANDS * VK_BATCH_DISPATCHES};
      VkDescriptorPoolCreateInfo dpi = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
        .maxSets = VK_BATCH_DISPATCHES,
        .poolSizeCount = 1,
        .pPoolSizes = &size,
      };
      r = D->fn.vkCreateDescriptorPool(D->dev, &dpi, NULL, &f->pool);
      if (r != VK_SUCCESS)
        return em_error("%s: vkCreateDescriptorPool failed (%s)", D->name, em_vk_result_name(r));
    }
  }
  D->current = 0;
  D->next_serial = 1;
  D->completed_serial = 0;
  D->epoch = 1;
  return em_vk_profile_init(D);
}

/* Waits for a submitted frame and makes it reusable. */
static int retire(vk_device *D, vk_frame *f) {
  if (!f->pending) return 0;
  VkResult r = D->fn.vkWaitForFences(D->dev, 1, &f->fence, VK_TRUE, UINT64_MAX);
  if (r != VK_SUCCESS) return em_error("%s: waiting for the device failed (%s)", D->name, em_vk_result_name(r));
  if (D->profile) em_vk_profile_retire(D, (int)(f - D->frames));
  D->fn.vkResetFences(D->dev, 1, &f->fence);
  if (f->pool) D->fn.vkResetDescriptorPool(D->dev, f->pool, 0);
  f->pending = false;
  if (f->serial > D->completed_serial) D->completed_serial = f->serial;
  return 0;
}

VkCommandBuffer em_vk_cmd(vk_device *D) {
  vk_frame *f = &D->frames[D->current];
  if (f->recording) return f->cmd;
  if (retire(D, f) != 0) return NULL;
  VkCommandBufferBeginInfo bi = {
    .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
    .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
  };
  VkResult r = D->fn.vkBeginCommandBuffer(f->cmd, &bi);
  if (r != VK_SUCCESS) {
    em_error("%s: vkBeginCommandBuffer failed (%s)", D->name, em_vk_result_name(r));
    return NULL;
  }
  f->recording = true;
  em_vk_profile_begin(D, D->current, f->cmd);
  f->dispatches = 0;
  f->groups = 0;
  D->bound = VK_NULL_HANDLE;
  return f->cmd;
}

int em_vk_submit(vk_device *D) {
  vk_frame *f = &D->frames[D->current];
  if (!f->recording) return 0;
  f->recording = false;
  em_vk_profile_submit(D, D->current); /* before: the GPU cannot start before this time */
  em_vk_flag_before_submit(D, f->cmd);
  VkResult r = D->fn.vkEndCommandBuffer(f->cmd);
  if (r == VK_SUCCESS) {
    VkSubmitInfo si = {
      .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
      .commandBufferCount = 1,
      .pCommandBuffers = &f->cmd,
    };
    r = D->fn.vkQueueSubmit(D->queue, 1, &si, f->fence);
  }
  if (r != VK_SUCCESS) return em_error("%s: submitting work failed (%s)", D->name, em_vk_result_name(r));
  f->pending = true;
  f->serial = D->next_serial++;
  D->current = (D->current + 1) % VK_FRAMES;
  return 0;
}

int em_vk_wait_serial(vk_device *D, uint64_t serial) {
  if (serial <= D->completed_serial) return 0;
  __atomic_add_fetch(&D->host_waits, 1, __ATOMIC_RELAXED);
  if (serial >= D->next_serial && em_vk_submit(D) != 0) return -1;
  for (int i = 0; i < VK_FRAMES; i++) {
    vk_frame *f = &D->frames[i];
    if (f->pending && f->serial <= serial && retire(D, f) != 0) return -1;
  }
  return D->flag ? em_vk_flag_check(D) : 0;
}

int em_vk_poll_serial(vk_device *D, uint64_t serial) {
  if (serial <= D->completed_serial) return 1;
  if (serial >= D->next_serial) return 0;
  /* one queue: batches complete in submission order, but each fence is asked */
  for (int i = 0; i < VK_FRAMES; i++) {
    vk_frame *f = &D->frames[i];
    if (!f->pending || f->serial > serial) continue;
    VkResult r = D->fn.vkGetFenceStatus(D->dev, f->fence);
    if (r == VK_NOT_READY) return 0;
    if (r != VK_SUCCESS)
      return em_error("%s: asking the device's progress failed (%s)", D->name, em_vk_result_name(r));
  }
  /* every one is signalled: retiring them waits for nothing */
  for (int i = 0; i < VK_FRAMES; i++) {
    vk_frame *f = &D->frames[i];
    if (f->pending && f->serial <= serial && retire(D, f) != 0) return -1;
  }
  if (D->flag && em_vk_flag_check(D) != 0) return -1;
  return 1;
}

int em_vk_wait_idle(vk_device *D) {
  if (!D->started && D->dev == VK_NULL_HANDLE) return 0;
  __atomic_add_fetch(&D->host_waits, 1, __ATOMIC_RELAXED);
  if (em_vk_submit(D) != 0) return -1;
  for (int i = 0; i < VK_FRAMES; i++)
    if (retire(D, &D->frames[i]) != 0) return -1;
  return D->flag ? em_vk_flag_check(D) : 0;
}

int em_vk_count_groups(vk_device *D, uint64_t groups) {
  D->frames[D->current].groups += groups;
  __atomic_add_fetch(&D->dispatches, 1, __ATOMIC_RELAXED);
  return em_vk_count_dispatch(D);
}

int em_vk_count_dispatch(vk_device *D) {
  vk_frame *f = &D->frames[D->current];
  f->dispatches++;
  if (f->dispatches >= VK_BATCH_DISPATCHES) return em_vk_submit(D);
  if (f->dispatches >= VK_EARLY_SUBMIT || f->groups >= VK_EARLY_GROUPS) {
    bool busy = false;
    for (int i = 0; i < VK_FRAMES && !busy; i++) busy = D->frames[i].pending;
    if (!busy) return em_vk_submit(D);
  }
  return 0;
}

void em_vk_hazards(vk_device *D, VkCommandBuffer cmd, vk_block *const *reads, int nreads,
                   vk_block *const *writes, int nwrites) {
  bool need = false;
  for (int i = 0; i < nreads && !need; i++)
    need = reads[i] && reads[i]->write_epoch == D->epoch;
  for (int i = 0; i < nwrites && !need; i++)
    need = writes[i] && (writes[i]->write_epoch == D->epoch || writes[i]->read_epoch == D->epoch);
  if (need) {
    VkMemoryBarrier mb = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
      .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
      .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                       VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
    };
    VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    D->fn.vkCmdPipelineBarrier(cmd, stages, stages, 0, 1, &mb, 0, NULL, 0, NULL);
    D->epoch++;
  }
  for (int i = 0; i < nreads; i++)
    if (reads[i]) reads[i]->read_epoch = D->epoch;
  for (int i = 0; i < nwrites; i++)
    if (writes[i]) writes[i]->write_epoch = D->epoch;
}

int em_vk_flush(void *ctx) {
  vk_device *D = ctx;
  pthread_mutex_lock(&D->lock);
  int rc = em_vk_submit(D);
  pthread_mutex_unlock(&D->lock);
  return rc;
}

int em_vk_synchronize(void *ctx) {
  vk_device *D = ctx;
  pthread_mutex_lock(&D->lock);
  int rc = em_vk_wait_idle(D);
  pthread_mutex_unlock(&D->lock);
  return rc;
}

void em_vk_command_destroy(vk_device *D) {
  for (int i = 0; i < VK_FRAMES; i++) {
    vk_frame *f = &D->frames[i];
    if (f->fence) D->fn.vkDestroyFence(D->dev, f->fence, NULL);
    if (f->pool) D->fn.vkDestroyDescriptorPool(D->dev, f->pool, NULL);
    *f = (vk_frame){0};
  }
  /* The command buffers go with their pool. */
  if (D->cmd_pool) D->fn.vkDestroyCommandPool(D->dev, D->cmd_pool, NULL);
  D->cmd_pool = VK_NULL_HANDLE;
}
