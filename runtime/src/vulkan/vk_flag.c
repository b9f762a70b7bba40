/*
 * vk_flag.c: device-side error reports (vk.h says why). Each device gets, on first use, a
 * 64-byte host-visible buffer wrapped as an int32 [16] tensor so kernels can bind it like any
 * operand; the host reads it through its mapping after waits, which costs nothing when no
 * kernel reported anything. The buffer lives as long as the device (as staging buffers do).
 * vk.h lists the words. Op names travel as numbers: a small table per device, filled as ops
 * first launch a check (a dozen indexing ops use it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../multinomial.h"
#include "vk.h"

enum { FLAG_WORDS = 16, FLAG_BYTES = 4 * FLAG_WORDS, FLAG_NAMES = 32, FLAG_NAME_LEN = 32 };

typedef struct vk_flag {
  VkBuffer buffer;
  VkDeviceMemory memory;
  volatile uint32_t *words;
  vk_slab slab;               /* a one-block slab, so em_vk_launch can bind it */
  vk_block block;
  em_storage storage;
  em_tensor tensor;
  bool barrier;               /* the batch being recorded has kernels writing the flag */
  int names;
  char name[FLAG_NAMES][FLAG_NAME_LEN]; /* word [8]'s numbers: name[k - 1] */
} vk_flag;

static int flag_create(vk_device *D) {
  vk_flag *f = calloc(1, sizeof *f);
  if (f == NULL) return em_error_kind_set(EM_ERR_OOM, "%s: out of host memory", D->name);
  if (em_vk_alloc_buffer(D, 256, D->mem.staging_type, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
                         &f->buffer, &f->memory) != 0) {
    free(f);
    return -1;
  }
  void *p = NULL;
  VkResult r = D->fn.vkMapMemory(D->dev, f->memory, 0, VK_WHOLE_SIZE, 0, &p);
  if (r != VK_SUCCESS) {
    D->fn.vkDestroyBuffer(D->dev, f->buffer, NULL);
    D->fn.vkFreeMemory(D->dev, f->memory, NULL);
    free(f);
    return em_error("%s: mapping the error-flag buffer failed (%s)", D->name, em_vk_result_name(r));
  }
  f->words = p;
  memset(p, 0, FLAG_BYTES);
  if (!D->mem.staging_coherent) {
    VkMappedMemoryRange mr = {.sType = VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE, .memory = f->memory,
                              .size = VK_WHOLE_SIZE};
    D->fn.vkFlushMappedMemoryRanges(D->dev, 1, &mr);
  }
  f->slab = (vk_slab){.buffer = f->buffer, .size = FLAG_BYTES, .used = FLAG_BYTES};
  f->block = (vk_block){.slab = &f->slab, .offset = 0, .size = FLAG_BYTES};
  f->storage = (em_storage){.refcount = 1, .device_id = D->id, .nbytes = FLAG_BYTES,
                            .backend_ctx = &f->block};
  f->tensor = (em_tensor){.sizes = {FLAG_WORDS}, .strides = {1}, .ndim = 1, .dtype_id = EM_INT32,
                          .device_id = D->id, .refcount = 1, .storage = &f->storage};
  D->flag = f;
  return 0;
}

const em_tensor *em_vk_flag_tensor(vk_device *D) {
  if (D->flag == NULL && flag_create(D) != 0) return NULL;
  return &D->flag->tensor;
}

void em_vk_flag_barrier(vk_device *D) {
  if (D->flag) D->flag->barrier = true;
}

void em_vk_flag_before_submit(vk_device *D, VkCommandBuffer cmd) {
  if (D->flag == NULL || !D->flag->barrier) return;
  D->flag->barrier = false;
  VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                        .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
  D->fn.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                             VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
}

uint32_t em_vk_flag_name(vk_device *D, const char *fn) {
  vk_flag *f = D->flag;
  if (f == NULL) return 0;
  for (int k = 0; k < f->names; k++)
    if (strcmp(f->name[k], fn) == 0) return (uint32_t)k + 1;
  if (f->names == FLAG_NAMES || strlen(fn) >= FLAG_NAME_LEN) return 0;
  snprintf(f->name[f->names], FLAG_NAME_LEN, "%s", fn);
  return (uint32_t)++f->names;
}

/* The message of an index report (words [5..10]). */
static int index_error(vk_device *D, volatile uint32_t *w) {
  int64_t value = (int64_t)((uint64_t)w[6] << 32 | w[5]);
  uint32_t name = w[8];
  const char *fn = name >= 1 && name <= (uint32_t)D->flag->names ? D->flag->name[name - 1]
                                                                  : "an indexing op";
  char msg[256];
  em_index_message(msg, sizeof msg, fn, (em_index_wording)w[9], (int)w[10], value, w[7]);
  return em_error("%s (found on %s, reported at its next synchronization)", msg, D->name);
}

/* The message of a multinomial report (words [12..15]; multinomial.h has the statuses). */
static int multinomial_error(vk_device *D, volatile uint32_t *w) {
  uint32_t st = w[12], bits = w[15];
  float value;
  memcpy(&value, &bits, sizeof value);
  char msg[256];
  em_multinomial_message(msg, sizeof msg, (em_mn_status)st, w[13], w[14], value,
                         st == EM_MN_TOO_FEW ? (int64_t)bits : 0, "float32");
  return em_error("%s (found on %s, reported at its next synchronization)", msg, D->name);
}

int em_vk_flag_check(vk_device *D) {
  vk_flag *f = D->flag;
  VkMappedMemoryRange mr = {.sType = VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE, .memory = f->memory,
                            .size = VK_WHOLE_SIZE};
  if (!D->mem.staging_coherent) D->fn.vkInvalidateMappedMemoryRanges(D->dev, 1, &mr);
  if (f->words[0] == 0) return 0;
  uint32_t what = f->words[0], a = f->words[1], b = f->words[2], lsm = f->words[3];
  int rc = what == VK_FLAG_INDEX         ? index_error(D, f->words)
           : what == VK_FLAG_MULTINOMIAL ? multinomial_error(D, f->words)
                                         : -1;
  /* cleared after reading: the next report (also a still-pending one) starts afresh */
  f->words[0] = 0;
  f->words[4] = 0;
  f->words[11] = 0;
  if (!D->mem.staging_coherent) D->fn.vkFlushMappedMemoryRanges(D->dev, 1, &mr);
  if (what == VK_FLAG_INDEX || what == VK_FLAG_MULTINOMIAL) return rc;
  if (what == VK_FLAG_CLASS_INDEX)
    return em_error("%s: class index %d (0-based) is out of range for %u classes (found on %s, "
                    "reported at its next synchronization)", lsm ? "cross_entropy" : "nll_loss",
                    (int)a, b, D->name);
  return em_error("%s: a kernel reported an error (code %u)", D->name, what);
}

void em_vk_flag_destroy(vk_device *D) {
  vk_flag *f = D->flag;
  if (f == NULL) return;
  D->fn.vkUnmapMemory(D->dev, f->memory);
  D->fn.vkDestroyBuffer(D->dev, f->buffer, NULL);
  D->fn.vkFreeMemory(D->dev, f->memory, NULL);
  free(f);
  D->flag = NULL;
}
