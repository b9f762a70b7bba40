/*
 * vk_reduce_plan.c: the line plan of the Vulkan reduction family (vk_reduce.h): x as [A, R, K]
 * with strides, found from x's layout or made so by a contiguous copy, and the workgroup shape
 * over the lines.
 */
#include <stdlib.h>

#include "../red_dims.h"
#include "vk_reduce.h"

bool vk_red_cpu_type(const vk_device *D) {
  return D->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
}

int vk_red_too_large(const vk_device *D, const char *fn) {
  return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED,
                           "%s: not implemented on %s for more than 2^32 elements or strides "
                           "beyond 2^31", fn, D->name);
}

const char *vk_red_variant(const vk_device *D, const char *fn, em_dtype d) {
  if (d == EM_FLOAT64) {
    if (!(D->features & EM_FEATURE_FLOAT64)) {
      em_error_kind_set(EM_ERR_NOT_IMPLEMENTED,
                        "%s: not implemented on %s for float64 (the device lacks shaderFloat64)",
                        fn, D->name);
      return NULL;
    }
    return "F64";
  }
  return em_dtypes[d].is_float ? "F32" : "I64";
}

const char *vk_scan_variant(const vk_device *D, const char *fn, em_dtype d) {
  if (em_dtypes[d].is_float && (D->features & EM_FEATURE_FLOAT64)) return "F64";
  return vk_red_variant(D, fn, d);
}

/* Tries x's own layout: true when the kept dims coalesce into at most two groups and the
 * reduced ones into one. */
static bool plan_direct(vk_lines *L, const em_tensor *out, const em_tensor *x, uint32_t mask) {
  em_red_dim kept[EM_MAX_DIMS], red[EM_MAX_DIMS];
  int nk, nr;
  em_red_dims_split(out, x, mask, 1, 1, kept, &nk, red, &nr); /* strides in elements */
  if (nk > 2 || nr > 1) return false;
  L->R = nr ? red[0].size : 1;
  L->sr = nr ? red[0].xs : 0;
  L->or_ = nr ? red[0].os : 0;
  L->A = nk == 2 ? kept[0].size : 1;
  L->sa = nk == 2 ? kept[0].xs : 0;
  L->oa = nk == 2 ? kept[0].os : 0;
  L->K = nk ? kept[nk - 1].size : 1;
  L->sk = nk ? kept[nk - 1].xs : 0;
  L->ok = nk ? kept[nk - 1].os : 0;
  return true;
}

/* The kernels index elements with 32-bit unsigned arithmetic (a binding holds less than 4 GiB)
 * and take strides as 32-bit signed integers. */
static bool fits(const vk_lines *L) {
  const int64_t s[6] = {L->sa, L->sr, L->sk, L->oa, L->or_, L->ok};
  for (int i = 0; i < 6; i++)
    if (s[i] > INT32_MAX || s[i] < -INT32_MAX) return false;
  return L->A * L->K <= UINT32_MAX && L->R <= UINT32_MAX && L->x->offset <= UINT32_MAX;
}

int vk_lines_plan(vk_lines *L, const char *fn, const em_tensor *out, const em_tensor *x,
                  uint32_t mask) {
  memset(L, 0, sizeof *L);
  L->D = em_vk_device(x->device_id);
  L->x = x;
  if (!plan_direct(L, out, x, mask)) {
    /* A contiguous copy with the kept dims first (in order, as out has them) and the reduced
     * dims last: the kept dims then coalesce into one group, the reduced into another. */
    em_tensor view;
    em_header_copy(&view, x);
    int n = 0;
    for (int pass = 0; pass < 2; pass++)
      for (int d = 0; d < x->ndim; d++)
        if (((mask >> d) & 1u) == (uint32_t)pass) {
          view.sizes[n] = x->sizes[d];
          view.strides[n++] = x->strides[d];
        }
    /* Scans and softmax write out in x's shape: keep x's order (one reduced dim) there. */
    bool same_shape = out->ndim == x->ndim;
    for (int d = 0; d < x->ndim && same_shape; d++) same_shape = out->sizes[d] == x->sizes[d];
    if (same_shape) em_header_copy(&view, x);
    L->tmp = em_empty(view.ndim, view.sizes, (em_dtype)x->dtype_id, x->device_id);
    if (L->tmp == NULL || em_vk_copy(L->tmp, &view) != 0) {
      vk_lines_done(L);
      return -1;
    }
    em_tensor tview = *L->tmp; /* the copy, seen in x's dim order again */
    if (!same_shape) {
      int k = 0;
      for (int pass = 0; pass < 2; pass++)
        for (int d = 0; d < x->ndim; d++)
          if (((mask >> d) & 1u) == (uint32_t)pass) {
            tview.sizes[d] = L->tmp->sizes[k];
            tview.strides[d] = L->tmp->strides[k++];
          }
    }
    L->x = L->tmp;
    if (!plan_direct(L, out, &tview, mask)) { /* cannot happen: both groups are dense */
      vk_lines_done(L);
      return em_error("%s: internal error: no line plan on %s", fn, L->D->name);
    }
  }
  if (!fits(L)) {
    vk_lines_done(L);
    return vk_red_too_large(L->D, fn);
  }
  return 0;
}

void vk_lines_done(vk_lines *L) {
  em_release(L->tmp);
  L->tmp = NULL;
}

/* The power of `base` (4 or 16) at least n, at most cap: lane counts are specialization
 * constants, and fewer of them means fewer pipelines to compile (tens of ms each on lavapipe). */
static uint32_t pow_at_least(int64_t n, uint32_t cap, int shift) {
  uint32_t p = 1;
  while (p < cap && (int64_t)p < n) p <<= shift;
  return p < cap ? p : cap;
}

int vk_lanes_pick(vk_lanes *P, const vk_device *D, const char *fn, int64_t nlines, int64_t R,
                  int64_t sr, int64_t K, int64_t sk, uint32_t max_tr) {
  /* COL when neighbouring lines are closer in memory than neighbouring elements of a line. */
  P->col = K > 1 && R > 1 && em_abs64(sk) < em_abs64(sr);
  uint32_t tr;
  if (P->col) {
    uint32_t lines = pow_at_least(K, 64, 2); /* 64 neighbours: 256 contiguous bytes of float32 */
    tr = 256 / lines;
  } else {
    tr = 256;
  }
  /* lanes for at most about 4 elements each (1, 16 or 256 along a line; 1, 4, 16, 64 across) */
  uint32_t need = P->col ? pow_at_least(R, 256, 2) : pow_at_least((R + 3) / 4, 256, 4);
  if (need < tr) tr = need;
  if (tr > max_tr) tr = max_tr;
  P->tr = tr;
  int64_t per = 256 / tr;
  int64_t groups = (nlines + per - 1) / per;
  uint32_t maxx = D->props.limits.maxComputeWorkGroupCount[0];
  uint32_t maxy = D->props.limits.maxComputeWorkGroupCount[1];
  if (maxx > 65535) maxx = 65535;
  int64_t gx = groups < maxx ? groups : maxx;
  int64_t gy = gx ? (groups + gx - 1) / gx : 0;
  if (gy > maxy || groups > UINT32_MAX) return vk_red_too_large(D, fn);
  P->groups = (uint32_t)groups;
  P->gx = (uint32_t)gx;
  P->gy = (uint32_t)gy;
  return 0;
}
