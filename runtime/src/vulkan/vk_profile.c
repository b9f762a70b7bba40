/*
 * vk_profile.c: per-kernel GPU times, for tuning (EMBER_VK_PROFILE=1).
 *
 * Each dispatch is bracketed by two timestamps written when all earlier work has finished
 * (VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT). Dispatches without a dependency normally overlap,
 * so profiling puts a barrier before every one (vk_command.c): each interval is then the time
 * of that kernel alone, and the sum is the GPU time of a serialized run. The timestamps of a
 * command buffer are read when it completes (retire), and a table, per kernel module and op,
 * goes to stderr at exit:
 *
 *   vulkan:0 profile (GPU time per kernel, dispatches serialized)
 *   kernel                        calls    total ms   mean us      %
 *   conv_gemm_F32                   120      41.210    343.42   38.1
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk.h"

enum { PROFILE_KEYS = 1024 };

typedef struct profile_stat {
  int module;
  uint32_t op;
  uint64_t calls;
  double ns;
} profile_stat;

struct vk_profile {
  VkQueryPool pool[VK_FRAMES];
  uint32_t used[VK_FRAMES];                 /* dispatches timed in the frame */
  int module[VK_FRAMES][VK_BATCH_DISPATCHES];
  uint32_t op[VK_FRAMES][VK_BATCH_DISPATCHES];
  int frame;                                /* the frame being recorded */
  double ns_per_tick;
  uint64_t mask;                            /* the valid timestamp bits */
  profile_stat stats[PROFILE_KEYS];
  int nstats;
  uint64_t dropped;                         /* dispatches beyond PROFILE_KEYS kinds */
};

static vk_device *profiled[16];
static int nprofiled;

static int by_time(const void *a, const void *b) {
  double x = ((const profile_stat *)a)->ns, y = ((const profile_stat *)b)->ns;
  return x < y ? 1 : x > y ? -1 : 0;
}

static void report_device(vk_device *D) {
  {
    struct vk_profile *P = D->profile;
    if (P == NULL || P->nstats == 0) return;
    qsort(P->stats, (size_t)P->nstats, sizeof P->stats[0], by_time);
    double total = 0;
    for (int i = 0; i < P->nstats; i++) total += P->stats[i].ns;
    fprintf(stderr, "%s profile (GPU time per kernel, dispatches serialized)\n", D->name);
    fprintf(stderr, "%-32s %8s %11s %9s %6s\n", "kernel", "calls", "total ms", "mean us", "%");
    for (int i = 0; i < P->nstats; i++) {
      const profile_stat *s = &P->stats[i];
      char name[64];
      if (s->op == UINT32_MAX)
        snprintf(name, sizeof name, "%s", em_spirv_modules[s->module].name);
      else if (s->op & 0x80000000u)
        snprintf(name, sizeof name, "%s spec %u", em_spirv_modules[s->module].name,
                 s->op & 0x7fffffffu);
      else
        snprintf(name, sizeof name, "%s op %u", em_spirv_modules[s->module].name, s->op);
      fprintf(stderr, "%-32s %8llu %11.3f %9.2f %6.1f\n", name, (unsigned long long)s->calls,
              s->ns * 1e-6, s->ns * 1e-3 / (double)s->calls, 100.0 * s->ns / total);
    }
    fprintf(stderr, "%-32s %8s %11.3f\n", "total", "", total * 1e-6);
    if (P->dropped) fprintf(stderr, "(%llu dispatches of further kinds not counted)\n",
                            (unsigned long long)P->dropped);
  }
}

static void report(void) {
  for (int d = 0; d < nprofiled; d++)
    if (profiled[d]) report_device(profiled[d]);
}

void em_vk_profile_destroy(vk_device *D) {
  struct vk_profile *P = D->profile;
  if (P == NULL) return;
  report_device(D); /* now: the device is gone by the time the process exits */
  for (int f = 0; f < VK_FRAMES; f++)
    if (P->pool[f]) D->fn.vkDestroyQueryPool(D->dev, P->pool[f], NULL);
  for (int d = 0; d < nprofiled; d++)
    if (profiled[d] == D) profiled[d] = NULL;
  free(P);
  D->profile = NULL;
}

int em_vk_profile_init(vk_device *D) {
  const char *env = getenv("EMBER_VK_PROFILE");
  if (env == NULL || env[0] == '\0' || strcmp(env, "0") == 0) return 0;
  if (D->timestamp_bits == 0 || D->props.limits.timestampPeriod <= 0) {
    fprintf(stderr, "ember: EMBER_VK_PROFILE: %s has no timestamps on its compute queue; not "
                    "profiled\n", D->name);
    return 0;
  }
  if (nprofiled >= (int)(sizeof profiled / sizeof profiled[0])) return 0;
  struct vk_profile *P = calloc(1, sizeof *P);
  if (P == NULL) return em_error("%s: out of host memory for the profiler", D->name);
  VkQueryPoolCreateInfo qi = {
    .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
    .queryType = VK_QUERY_TYPE_TIMESTAMP,
    .queryCount = 2 * VK_BATCH_DISPATCHES,
  };
  for (int f = 0; f < VK_FRAMES; f++) {
    VkResult r = D->fn.vkCreateQueryPool(D->dev, &qi, NULL, &P->pool[f]);
    if (r != VK_SUCCESS) {
      free(P);
      return em_error("%s: vkCreateQueryPool failed (%s)", D->name, em_vk_result_name(r));
    }
  }
  P->ns_per_tick = D->props.limits.timestampPeriod;
  P->mask = D->timestamp_bits >= 64 ? UINT64_MAX : ((uint64_t)1 << D->timestamp_bits) - 1;
  D->profile = P;
  if (nprofiled++ == 0) atexit(report);
  profiled[nprofiled - 1] = D;
  return 0;
}

void em_vk_profile_begin(vk_device *D, int frame, VkCommandBuffer cmd) {
  struct vk_profile *P = D->profile;
  P->frame = frame;
  P->used[frame] = 0;
  D->fn.vkCmdResetQueryPool(cmd, P->pool[frame], 0, 2 * VK_BATCH_DISPATCHES);
}

void em_vk_profile_before(vk_device *D, VkCommandBuffer cmd, int module, uint32_t op) {
  struct vk_profile *P = D->profile;
  uint32_t k = P->used[P->frame];
  if (k >= VK_BATCH_DISPATCHES) return; /* a batch never holds more (vk_command.c) */
  P->module[P->frame][k] = module;
  P->op[P->frame][k] = op;
  D->fn.vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, P->pool[P->frame], 2 * k);
}

void em_vk_profile_after(vk_device *D, VkCommandBuffer cmd) {
  struct vk_profile *P = D->profile;
  uint32_t k = P->used[P->frame];
  if (k >= VK_BATCH_DISPATCHES) return;
  D->fn.vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, P->pool[P->frame],
                            2 * k + 1);
  P->used[P->frame] = k + 1;
}

static profile_stat *stat_for(struct vk_profile *P, int module, uint32_t op) {
  for (int i = 0; i < P->nstats; i++)
    if (P->stats[i].module == module && P->stats[i].op == op) return &P->stats[i];
  if (P->nstats >= PROFILE_KEYS) return NULL;
  P->stats[P->nstats] = (profile_stat){module, op, 0, 0};
  return &P->stats[P->nstats++];
}

void em_vk_profile_retire(vk_device *D, int frame) {
  struct vk_profile *P = D->profile;
  uint32_t n = P->used[frame];
  if (n == 0) return;
  uint64_t ticks[2 * VK_BATCH_DISPATCHES];
  VkResult r = D->fn.vkGetQueryPoolResults(D->dev, P->pool[frame], 0, 2 * n, sizeof ticks, ticks,
                                           sizeof ticks[0],
                                           VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
  P->used[frame] = 0;
  if (r != VK_SUCCESS) return;
  for (uint32_t k = 0; k < n; k++) {
    profile_stat *s = stat_for(P, P->module[frame][k], P->op[frame][k]);
    if (s == NULL) {
      P->dropped++;
      continue;
    }
    s->calls++;
    s->ns += (double)((ticks[2 * k + 1] - ticks[2 * k]) & P->mask) * P->ns_per_tick;
  }
}
