/*
 * vk_multinomial.c: the Vulkan `multinomial` slot (kernels/multinomial.comp), one workgroup per
 * row, multinomial.h's algorithm in float32, so one seed draws what the CPU draws. Rows whose
 * weights fail the checks are reported through the device's error flag (vk_flag.c) and raised
 * at the next synchronization: sampling never makes the host wait for the device.
 */
#include "../multinomial.h"
#include "vk.h"

int em_vk_multinomial(em_tensor *out, em_tensor *w, int64_t n, int replacement, uint64_t seed,
                      uint64_t offset);

enum { SPAN = 8192 }; /* draws of a row per workgroup: multinomial.comp's SPAN */

typedef struct mn_push {
  uint32_t R, K, n, chunk, nch, replacement;
  uint32_t seed_lo, seed_hi, ctr_lo, ctr_hi;
  uint32_t wbase, obase;
} mn_push;

int em_vk_multinomial(em_tensor *out, em_tensor *w, int64_t n, int replacement, uint64_t seed,
                      uint64_t offset) {
  vk_device *D = em_vk_device(w->device_id);
  if (w->dtype_id != EM_FLOAT32)
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "multinomial: not implemented on %s for %s "
                             "weights (float32 and 16-bit weights are)", D->name,
                             em_dtype_name((em_dtype)w->dtype_id));
  int64_t R = w->sizes[0], K = w->sizes[1];
  /* 32-bit word and element indices in the kernel */
  if (R * n > (int64_t)UINT32_MAX || w->offset + R * K > INT32_MAX ||
      (out && out->offset + R * n > INT32_MAX / 2))
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "multinomial: not implemented on %s for "
                             "more than %d weights or draws", D->name, INT32_MAX / 2);
  int64_t chunk = em_mn_chunk(K);
  mn_push p = {.R = (uint32_t)R, .K = (uint32_t)K, .n = (uint32_t)n, .chunk = (uint32_t)chunk,
               .nch = (uint32_t)((K + chunk - 1) / chunk), .replacement = replacement != 0,
               .seed_lo = (uint32_t)seed, .seed_hi = (uint32_t)(seed >> 32),
               .ctr_lo = (uint32_t)offset, .ctr_hi = (uint32_t)(offset >> 32),
               .wbase = (uint32_t)w->offset, .obase = out ? (uint32_t)out->offset : 0};
  uint32_t max = D->props.limits.maxComputeWorkGroupCount[0];
  if (max > 65535) max = 65535;
  /* with replacement a row's draws go in spans of SPAN over grid y (multinomial.comp) */
  int64_t span_count = replacement ? (n + SPAN - 1) / SPAN : 1;
  uint32_t spans = (uint32_t)(span_count < 65535 ? span_count : 65535);
  pthread_mutex_lock(&D->lock);
  const em_tensor *flag = em_vk_flag_tensor(D);
  int rc = -1;
  if (flag) {
    /* Without replacement nothing is drawn (the kernel writes keys into w), and w stands in
     * for the unused operand 0. The flag is declared read, as in vk_index_check.c: its words are claimed with an
     * atomic, and em_vk_flag_barrier makes them visible to the host at the batch's end. */
    vk_launch L = {.module = "multinomial", .push = &p, .push_size = sizeof p,
                   .spec = {~0u, ~0u, ~0u, ~0u}, .ops = {out ? out : w, w, flag}, .writes = out ? 3u : 2u,
                   .groups = {(uint32_t)(R < max ? R : max), spans, 1}};
    rc = em_vk_launch(D, &L);
    if (rc == 0) em_vk_flag_barrier(D);
  }
  pthread_mutex_unlock(&D->lock);
  if (rc != 0) em_error_prefix("multinomial");
  return rc;
}
