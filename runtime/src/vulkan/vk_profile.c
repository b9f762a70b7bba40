/*
 * vk_profile.c: GPU timestamps of dispatches, the one timing path for both the profiler
 * (ember.profiler's 'vulkan' activity, em_profiler_start's gpu option) and EMBER_VK_PROFILE=1
 * (a table per kernel on stderr at exit).
 *
 * A batch being timed has a query pool of its own (one per frame): a timestamp when its
 * command buffer begins and one after each dispatch or transfer, all at
 * VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, i.e. written once all earlier work of the queue has
 * completed. Dispatch k is charged the interval from stamp k to stamp k + 1: the time from
 * the completion of the work before it to the completion of itself. No barrier is added and
 * none is removed, so work that overlaps keeps overlapping, and the intervals tile the busy
 * time of the queue without double counting: a kernel that ran entirely beside a longer
 * earlier one gets (nearly) nothing, the one that finishes last gets the rest. The sum of the
 * intervals is the batch's GPU time. The stamps are read when the batch's fence has signalled
 * (retire), so reading them waits for nothing. docs/design.md, "GPU time attribution".
 *
 * Each dispatch also keeps the profiler's current event (em_prof_current) at recording time:
 * the op whose kernel slot recorded it.
 *
 *   vulkan:0 profile (GPU time per kernel, from the completion of the work before it)
 *   kernel                        calls    total ms   mean us      %
 *   conv_gemm_F32                   120      41.210    343.42   38.1
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../profiler/profiler.h"
#include "vk.h"

enum { PROFILE_KEYS = 1024, STAMPS = VK_BATCH_DISPATCHES + 1 };

typedef struct profile_stat {
  int module;          /* an index of em_spirv_modules, or -1 for a transfer */
  uint32_t op;
  const char *name;    /* a transfer's */
  uint64_t calls;
  double ns;
} profile_stat;

struct vk_profile {
  VkQueryPool pool[VK_FRAMES];
  bool timed[VK_FRAMES];                    /* the frame's batch writes stamps */
  uint32_t used[VK_FRAMES];                 /* dispatches timed in the frame */
  int module[VK_FRAMES][VK_BATCH_DISPATCHES];
  uint32_t op[VK_FRAMES][VK_BATCH_DISPATCHES];
  const char *name[VK_FRAMES][VK_BATCH_DISPATCHES];
  uint64_t key[VK_FRAMES][VK_BATCH_DISPATCHES];
  int64_t submit_ns[VK_FRAMES];             /* host time of the batch's submission */
  double ns_per_tick;
  uint64_t mask;                            /* the valid timestamp bits */
  bool have_offset;
  int64_t offset;                           /* host ns = GPU ns + offset */
  bool table;                               /* EMBER_VK_PROFILE: the table at exit */
  profile_stat stats[PROFILE_KEYS];
  int nstats;
  uint64_t dropped;                         /* dispatches beyond PROFILE_KEYS kinds */
};

static vk_device *tabled[16];
static int ntabled;

static int by_time(const void *a, const void *b) {
  double x = ((const profile_stat *)a)->ns, y = ((const profile_stat *)b)->ns;
  return x < y ? 1 : x > y ? -1 : 0;
}

static void stat_name(char *buf, size_t cap, const profile_stat *s) {
  if (s->module < 0)
    snprintf(buf, cap, "%s", s->name);
  else if (s->op == UINT32_MAX)
    snprintf(buf, cap, "%s", em_spirv_modules[s->module].name);
  else if (s->op & 0x80000000u)
    snprintf(buf, cap, "%s spec %u", em_spirv_modules[s->module].name, s->op & 0x7fffffffu);
  else
    snprintf(buf, cap, "%s op %u", em_spirv_modules[s->module].name, s->op);
}

static void report_device(vk_device *D) {
  {
    struct vk_profile *P = D->profile;
    if (P == NULL || !P->table || P->nstats == 0) return;
    qsort(P->stats, (size_t)P->nstats, sizeof P->stats[0], by_time);
    double total = 0;
    for (int i = 0; i < P->nstats; i++) total += P->stats[i].ns;
    fprintf(stderr, "%s profile (GPU time per kernel, from the completion of the work before it)\n",
            D->name);
    fprintf(stderr, "%-32s %8s %11s %9s %6s\n", "kernel", "calls", "total ms", "mean us", "%");
    for (int i = 0; i < P->nstats; i++) {
      const profile_stat *s = &P->stats[i];
      char name[64];
      stat_name(name, sizeof name, s);
      fprintf(stderr, "%-32s %8llu %11.3f %9.2f %6.1f\n", name, (unsigned long long)s->calls,
              s->ns * 1e-6, s->ns * 1e-3 / (double)s->calls,
              total > 0 ? 100.0 * s->ns / total : 0.0);
    }
    fprintf(stderr, "%-32s %8s %11.3f\n", "total", "", total * 1e-6);
    if (P->dropped) fprintf(stderr, "(%llu dispatches of further kinds not counted)\n",
                            (unsigned long long)P->dropped);
  }
}

static void report(void) {
  for (int d = 0; d < ntabled; d++)
    if (tabled[d]) report_device(tabled[d]);
}

/* em_shutdown: prints the device's EMBER_VK_PROFILE table now (the device is gone by the time
 * the process exits) and frees its timing state. */
void em_vk_profile_destroy(vk_device *D) {
  em_prof_unregister_gpu(D);
  struct vk_profile *P = D->profile;
  if (P == NULL) return;
  report_device(D);
  for (int f = 0; f < VK_FRAMES; f++)
    if (P->pool[f]) D->fn.vkDestroyQueryPool(D->dev, P->pool[f], NULL);
  for (int d = 0; d < ntabled; d++)
    if (tabled[d] == D) tabled[d] = NULL;
  free(P);
  D->profile = NULL;
}

/* The profiler's flush at start (submit, so that the next batch is timed from its start) and
 * at stop (wait, so that every timed batch has been read back). */
static int flush(void *ctx, int wait) {
  vk_device *D = ctx;
  if (!D->started) return 0;
  return wait ? em_vk_synchronize(D) : em_vk_flush(D);
}

static int create(vk_device *D) {
  struct vk_profile *P = calloc(1, sizeof *P);
  if (P == NULL) return em_error("%s: out of host memory for the profiler", D->name);
  VkQueryPoolCreateInfo qi = {
    .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
    .queryType = VK_QUERY_TYPE_TIMESTAMP,
    .queryCount = STAMPS,
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
  return 0;
}

static bool can_time(vk_device *D) {
  return D->timestamp_bits > 0 && D->props.limits.timestampPeriod > 0;
}

int em_vk_profile_init(vk_device *D) {
  em_prof_register_gpu(flush, D);
  const char *env = getenv("EMBER_VK_PROFILE");
  if (env == NULL || env[0] == '\0' || strcmp(env, "0") == 0) return 0;
  if (!can_time(D)) {
    fprintf(stderr, "ember: EMBER_VK_PROFILE: %s has no timestamps on its compute queue; not "
                    "profiled\n", D->name);
    return 0;
  }
  if (ntabled >= (int)(sizeof tabled / sizeof tabled[0])) return 0;
  if (create(D) != 0) return -1;
  D->profile->table = true;
  if (ntabled++ == 0) atexit(report);
  tabled[ntabled - 1] = D;
  return 0;
}

void em_vk_profile_begin(vk_device *D, int frame, VkCommandBuffer cmd) {
  bool want = em_prof_gpu_on || (D->profile && D->profile->table);
  if (D->profile) D->profile->timed[frame] = false;
  if (!want || !can_time(D)) return;
  if (D->profile == NULL && create(D) != 0) {
    em_clear_error(); /* the batch runs untimed: the profile then lacks its GPU times */
    return;
  }
  struct vk_profile *P = D->profile;
  P->timed[frame] = true;
  P->used[frame] = 0;
  D->fn.vkCmdResetQueryPool(cmd, P->pool[frame], 0, STAMPS);
  D->fn.vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, P->pool[frame], 0);
}

void em_vk_profile_stamp(vk_device *D, VkCommandBuffer cmd, int module, uint32_t op,
                         const char *name) {
  struct vk_profile *P = D->profile;
  int f = D->current;
  if (!P->timed[f]) return;
  uint32_t k = P->used[f];
  if (k >= VK_BATCH_DISPATCHES) return; /* a batch never holds more (vk_command.c) */
  P->module[f][k] = module;
  P->op[f][k] = op;
  P->name[f][k] = name ? name : "dispatch"; /* (a module not found by name) */
  P->key[f][k] = em_prof_gpu_on ? em_prof_current() : 0;
  D->fn.vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, P->pool[f], k + 1);
  P->used[f] = k + 1;
}

bool em_vk_profile_timing(const vk_device *D) { return D->profile->timed[D->current]; }

void em_vk_profile_submit(vk_device *D, int frame) {
  if (D->profile && D->profile->timed[frame]) D->profile->submit_ns[frame] = em_prof_now();
}

static profile_stat *stat_for(struct vk_profile *P, int module, uint32_t op, const char *name) {
  for (int i = 0; i < P->nstats; i++) {
    profile_stat *s = &P->stats[i];
    if (s->module == module && s->op == op && (module >= 0 || s->name == name)) return s;
  }
  if (P->nstats >= PROFILE_KEYS) return NULL;
  P->stats[P->nstats] = (profile_stat){module, op, name, 0, 0};
  return &P->stats[P->nstats++];
}

/* Host time of GPU stamps: the GPU cannot start a batch before the host submitted it, so each
 * batch gives a lower bound for the offset; the largest so far is kept. A device on the host's
 * clock (lavapipe) gives bounds below 0 and keeps 0. */
static void align(struct vk_profile *P, int frame, int64_t first_ns) {
  int64_t bound = P->submit_ns[frame] - first_ns;
  if (!P->have_offset) {
    /* another clock altogether (more than 10 s apart): start from the bound */
    P->offset = (bound > 10000000000ll || bound < -10000000000ll) ? bound : 0;
    P->have_offset = true;
  }
  if (bound > P->offset) P->offset = bound;
}

void em_vk_profile_retire(vk_device *D, int frame) {
  struct vk_profile *P = D->profile;
  uint32_t n = P->used[frame];
  if (!P->timed[frame] || n == 0) return;
  P->timed[frame] = false;
  uint64_t ticks[STAMPS];
  VkResult r = D->fn.vkGetQueryPoolResults(D->dev, P->pool[frame], 0, n + 1, sizeof ticks,
                                           ticks, sizeof ticks[0],
                                           VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
  P->used[frame] = 0;
  if (r != VK_SUCCESS) return;
  double t0 = (double)(ticks[0] & P->mask) * P->ns_per_tick;
  align(P, frame, (int64_t)t0);
  for (uint32_t k = 0; k < n; k++) {
    double ns = (double)((ticks[k + 1] - ticks[k]) & P->mask) * P->ns_per_tick;
    if (P->table) {
      profile_stat *s = stat_for(P, P->module[frame][k], P->op[frame][k], P->name[frame][k]);
      if (s == NULL) {
        P->dropped++;
      } else {
        s->calls++;
        s->ns += ns;
      }
    }
    if (P->key[frame][k] != 0 || em_prof_gpu_on) {
      int64_t start = (int64_t)((double)(ticks[k] & P->mask) * P->ns_per_tick) + P->offset;
      const char *name = P->module[frame][k] >= 0 ? em_spirv_modules[P->module[frame][k]].name
                                                  : P->name[frame][k];
      em_prof_gpu_event(P->key[frame][k], name, D->id, start, start + (int64_t)ns);
    }
  }
}
