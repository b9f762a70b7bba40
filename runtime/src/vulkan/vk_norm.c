/*
 * vk_norm.c: the normalization and class-loss kernel-table functions (kernels/bn_*.comp,
 * chan_map.comp, group_norm*.comp, class_*.comp). Contracts are in backend.h and nn.h; the CPU
 * versions (cpu/norm.c, cpu/loss.c) are the reference.
 *
 * batch_norm's per-channel sums over [N, C, S] run in two passes, so a channel with a large
 * N * S spreads over many workgroups: bn_sums writes P partial sums per channel, bn_final
 * adds them. group_norm and layer_norm give each normalized row a workgroup. The class losses
 * give each row a workgroup, or an invocation when there are few classes.
 *
 * Nothing here reads results back: the cross entropy's mean denominator stays on the device
 * (a 0-d tensor) and an out-of-range class index is reported through the device's error flag
 * (vk_flag.c) at the next synchronization.
 */
#include <stdlib.h>
#include <string.h>

#include "../nn.h"
#include "vk.h"

enum { WG = 256 };

/* The modules by variant (kernels/norm.glsl): F32, F64, then for kernels that reduce, F32S and
 * F64S with subgroup arithmetic. Names must be string literals: em_vk_launch memoizes the
 * module lookup by the name's address. */
#define VARIANTS(file) ((const char *const[4]){file "_F32", file "_F64", NULL, NULL})
#define VARIANTS_SG(file)                                                                      \
  ((const char *const[4]){file "_F32", file "_F64", file "_F32S", file "_F64S"})

/* Whether compute shaders on D have subgroup arithmetic (asked once per device).
 * EMBER_VK_NO_SUBGROUPS=1 forces the shared-memory reductions, so tests reach both paths. */
static bool subgroups(vk_device *D) {
  static _Atomic int known[EM_MAX_DEVICES]; /* 0 unknown, 1 no, 2 yes */
  int id = D->id >= 0 && D->id < EM_MAX_DEVICES ? D->id : 0;
  if (known[id] == 0) {
    VkPhysicalDeviceSubgroupProperties sp = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                      .pNext = &sp};
    vkg.vkGetPhysicalDeviceProperties2(D->phys, &p2);
    const char *off_env = getenv("EMBER_VK_NO_SUBGROUPS");
    bool yes = (sp.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
               (sp.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) &&
               !(off_env && off_env[0] && strcmp(off_env, "0") != 0);
    known[id] = yes ? 2 : 1;
  }
  return known[id] == 2;
}

/* The module of a kernel for x, or -1 with NOT_IMPLEMENTED when the device lacks float64. */
static int module_for(vk_device *D, const char *fn, const char *const names[4],
                      const em_tensor *x, const char **mod) {
  bool f64 = x->dtype_id == EM_FLOAT64;
  if (x->dtype_id != EM_FLOAT32 && !f64)
    return em_error("%s: expected float32 or float64 on %s, got %s", fn, D->name,
                    em_dtype_name((em_dtype)x->dtype_id));
  if (f64 && !(D->features & EM_FEATURE_FLOAT64))
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED,
                             "%s: not implemented on %s for float64 (the device has no float64)",
                             fn, D->name);
  *mod = names[f64 + (names[2] && subgroups(D) ? 2 : 0)];
  return 0;
}

/* 32-bit indexing in the kernels: every tensor of the op holds fewer than 2^32 elements. */
static int check_size(vk_device *D, const char *fn, const em_tensor *x) {
  if (em_numel(x) + x->offset <= (int64_t)UINT32_MAX) return 0;
  return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED,
                           "%s: not implemented on %s for tensors of 2^32 or more elements", fn,
                           D->name);
}

static uint32_t off(const em_tensor *t) { return t ? (uint32_t)t->offset : 0; }

/* n workgroups folded over x and y (the kernels' group_index()). */
static void fold(vk_device *D, uint64_t n, uint32_t g[3]) {
  uint64_t lim = D->props.limits.maxComputeWorkGroupCount[0];
  g[0] = (uint32_t)(n < lim ? n : lim);
  g[1] = g[0] ? (uint32_t)((n + g[0] - 1) / g[0]) : 0;
  g[2] = 1;
}

static em_tensor *scratch(int64_t n, const em_tensor *like) {
  return em_empty(1, &n, (em_dtype)like->dtype_id, like->device_id);
}

static uint64_t cdiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

/* ---- per-channel sums over [N, C, S] (bn_sums + bn_final) -------------------------------- */

typedef struct sums_pc {
  uint32_t N, C, S, P, chunk, G, Cg, ox, ogy, om, ors;
} sums_pc;

typedef struct final_pc {
  uint32_t C, S, P, M, has, o1, o2, ox, om, oi, ow;
} final_pc;

/* How bn_sums splits x [N, C, S]: P partials per channel of `chunk` elements (rows of x
 * [N, C] when S == 1), enough workgroups to fill a large GPU (~1024), each with at least 2048
 * elements. */
typedef struct sums_plan {
  bool cols;
  uint64_t P, chunk, cgroups;
} sums_plan;

static sums_plan plan_sums(const em_tensor *x) {
  uint64_t N = (uint64_t)x->sizes[0], C = (uint64_t)x->sizes[1], S = (uint64_t)x->sizes[2];
  sums_plan p = {.cols = S == 1};
  uint64_t span = p.cols ? N : N * S;
  p.cgroups = p.cols ? cdiv(C, 32) : C;
  uint64_t want = cdiv(1024, p.cgroups ? p.cgroups : 1), most = cdiv(span, p.cols ? 64 : 2048);
  p.P = want < most ? want : most;
  if (p.P < 1) p.P = 1;
  p.chunk = cdiv(span, p.P);
  p.P = p.chunk ? cdiv(span, p.chunk) : 1;
  return p;
}

/* The per-channel sums of `mode` (bn_sums.comp) into part [C * P * 2]. D->lock held. */
static int channel_sums(vk_device *D, const char *fn, uint32_t mode, const sums_plan *p,
                        em_tensor *part, const em_tensor *x, const em_tensor *gy,
                        const em_tensor *mean, const em_tensor *rstd, uint32_t G, uint32_t Cg) {
  const char *mod = NULL;
  if (module_for(D, fn, VARIANTS_SG("bn_sums"), x, &mod) != 0) return -1;
  sums_pc pc = {(uint32_t)x->sizes[0], (uint32_t)x->sizes[1], (uint32_t)x->sizes[2],
                (uint32_t)p->P, (uint32_t)p->chunk, G, Cg, off(x), off(gy), off(mean), off(rstd)};
  uint64_t ylim = D->props.limits.maxComputeWorkGroupCount[1];
  uint32_t gy_ = (uint32_t)(p->cgroups < ylim ? p->cgroups : ylim);
  vk_launch L = {.module = mod, .push = &pc, .push_size = sizeof pc,
                 .spec = {mode, p->cols ? 1u : 0u, ~0u, ~0u},
                 .ops = {part, x, gy, mean, rstd}, .writes = 1u,
                 .groups = {(uint32_t)p->P, gy_, (uint32_t)cdiv(p->cgroups, gy_)}};
  return em_vk_launch(D, &L);
}

static int channel_final(vk_device *D, const char *fn, uint32_t mode, const em_tensor *part,
                         uint32_t P, const em_tensor *x, em_tensor *out1, em_tensor *out2,
                         em_tensor *coef, const em_tensor *mean, const em_tensor *invstd,
                         const em_tensor *weight, bool training) {
  const char *mod = NULL;
  if (module_for(D, fn, VARIANTS_SG("bn_final"), x, &mod) != 0) return -1;
  uint32_t C = (uint32_t)x->sizes[1], S = (uint32_t)x->sizes[2];
  uint32_t has = (out1 ? 1u : 0) | (out2 ? 2u : 0) | (coef ? 4u : 0) | (weight ? 8u : 0) |
                 (training ? 16u : 0);
  final_pc pc = {C, S, P, (uint32_t)(x->sizes[0] * x->sizes[2]), has, off(out1), off(out2),
                 off(x), off(mean), off(invstd), off(weight)};
  vk_launch L = {.module = mod, .push = &pc, .push_size = sizeof pc,
                 .spec = {mode, ~0u, ~0u, ~0u},
                 .ops = {part, out1, out2, coef, x, mean, invstd, weight},
                 .writes = (out1 ? 2u : 0) | (out2 ? 4u : 0) | (coef ? 8u : 0)};
  fold(D, C, L.groups);
  return em_vk_launch(D, &L);
}

/* ---- batch_norm -------------------------------------------------------------------------- */

int em_vk_batch_norm_stats(em_tensor *mean, em_tensor *var, const em_tensor *x) {
  const char *fn = "batch_norm";
  vk_device *D = em_vk_device(x->device_id);
  if (check_size(D, fn, x) != 0) return -1;
  if (em_numel(mean) == 0) return 0;
  sums_plan p = plan_sums(x);
  /* scratch tensors are made and dropped outside the lock: the allocator takes it */
  em_tensor *part = scratch((int64_t)(p.P * 2) * x->sizes[1], x);
  if (part == NULL) return -1;
  pthread_mutex_lock(&D->lock);
  int rc = channel_sums(D, fn, 0, &p, part, x, NULL, NULL, NULL, 1, 1);
  if (rc == 0)
    rc = channel_final(D, fn, 0, part, (uint32_t)p.P, x, mean, var, NULL, NULL, NULL, NULL, false);
  pthread_mutex_unlock(&D->lock);
  em_release(part);
  return rc;
}

typedef struct map_pc {
  uint32_t n, C, S, chunk, oy, ox, ogy, o3, o4;
} map_pc;

/* chan_map.comp over y [N, C, S]. */
static int channel_map(vk_device *D, const char *fn, uint32_t mode, em_tensor *y,
                       const em_tensor *x, const em_tensor *gy, const em_tensor *a,
                       const em_tensor *b) {
  const char *mod = NULL;
  if (module_for(D, fn, VARIANTS("chan_map"), x, &mod) != 0) return -1;
  uint64_t n = (uint64_t)em_numel(y);
  /* 16 elements per invocation, or fewer so that there are at least 512 workgroups */
  uint64_t chunk = WG * 16;
  while (chunk > WG && cdiv(n, chunk) < 512) chunk /= 2;
  map_pc pc = {(uint32_t)n, (uint32_t)y->sizes[1], (uint32_t)y->sizes[2], (uint32_t)chunk,
               off(y), off(x), off(gy), off(a), off(b)};
  vk_launch L = {.module = mod, .push = &pc, .push_size = sizeof pc,
                 .spec = {mode, ~0u, ~0u, ~0u}, .ops = {y, x, gy, a, b}, .writes = 1u};
  fold(D, cdiv(n, chunk), L.groups);
  return em_vk_launch(D, &L);
}

int em_vk_channel_affine(em_tensor *y, const em_tensor *x, const em_tensor *scale,
                         const em_tensor *shift) {
  const char *fn = "batch_norm";
  vk_device *D = em_vk_device(x->device_id);
  if (check_size(D, fn, x) != 0) return -1;
  pthread_mutex_lock(&D->lock);
  int rc = channel_map(D, fn, 0, y, x, NULL, scale, shift);
  pthread_mutex_unlock(&D->lock);
  return rc;
}

int em_vk_batch_norm_backward(em_tensor *gx, em_tensor *gw, em_tensor *gb, const em_tensor *gy,
                              const em_tensor *x, const em_tensor *mean, const em_tensor *invstd,
                              const em_tensor *weight, int training) {
  const char *fn = "batch_norm_backward";
  vk_device *D = em_vk_device(x->device_id);
  if (check_size(D, fn, x) != 0) return -1;
  int64_t C = x->sizes[1];
  if (em_numel(x) == 0) { /* no elements: zero sums, and gx has nothing to write */
    int rc = gw ? em_zero_(gw) : 0;
    return rc == 0 && gb ? em_zero_(gb) : rc;
  }
  sums_plan p = plan_sums(x);
  em_tensor *part = scratch((int64_t)(p.P * 2) * C, x), *coef = gx ? scratch(3 * C, x) : NULL;
  int rc = part && (coef || !gx) ? 0 : -1;
  pthread_mutex_lock(&D->lock);
  if (rc == 0) rc = channel_sums(D, fn, 1, &p, part, x, gy, mean, NULL, 1, 1);
  if (rc == 0)
    rc = channel_final(D, fn, 1, part, (uint32_t)p.P, x, gw, gb, coef, mean, invstd, weight,
                       training != 0);
  if (rc == 0 && gx) rc = channel_map(D, fn, 1, gx, x, gy, coef, NULL);
  pthread_mutex_unlock(&D->lock);
  em_release(part);
  em_release(coef);
  return rc;
}

/* ---- group_norm / layer_norm -------------------------------------------------------------- */

typedef struct gn_pc {
  uint32_t rows, D, G, Cg, S, has;
  uint32_t eps_d[2];
  uint32_t eps_f, oy, om, ors, ox, ow, ob;
} gn_pc;

typedef struct gn_back_pc {
  uint32_t rows, D, G, Cg, S, has, ogx, ogy, ox, om, ors, ow;
} gn_back_pc;

static void put_double(double v, uint32_t d[2], uint32_t *f) {
  float fv = (float)v;
  memcpy(d, &v, sizeof v);
  memcpy(f, &fv, sizeof fv);
}

int em_vk_group_norm(em_tensor *y, em_tensor *mean, em_tensor *rstd, const em_tensor *x,
                     const em_tensor *weight, const em_tensor *bias, const em_norm_geom *g) {
  const char *fn = g->G == 1 && g->S == 1 ? "layer_norm" : "group_norm";
  vk_device *D = em_vk_device(x->device_id);
  const char *mod = NULL;
  if (check_size(D, fn, x) != 0 || module_for(D, fn, VARIANTS_SG("group_norm"), x, &mod) != 0)
    return -1;
  uint64_t rows = (uint64_t)(g->N * g->G);
  gn_pc pc = {(uint32_t)rows, (uint32_t)(g->Cg * g->S), (uint32_t)g->G, (uint32_t)g->Cg,
              (uint32_t)g->S, (weight ? 1u : 0) | (bias ? 2u : 0), {0, 0}, 0, off(y), off(mean),
              off(rstd), off(x), off(weight), off(bias)};
  put_double(g->eps, pc.eps_d, &pc.eps_f);
  vk_launch L = {.module = mod, .push = &pc, .push_size = sizeof pc,
                 .spec = {~0u, ~0u, ~0u, ~0u}, .ops = {y, mean, rstd, x, weight, bias},
                 .writes = 7u};
  fold(D, rows, L.groups);
  return em_vk_launch_locked(&L);
}

int em_vk_group_norm_backward(em_tensor *gx, em_tensor *gw, em_tensor *gb, const em_tensor *gy,
                              const em_tensor *x, const em_tensor *mean, const em_tensor *rstd,
                              const em_tensor *weight, const em_norm_geom *g) {
  const char *fn = g->G == 1 && g->S == 1 ? "layer_norm_backward" : "group_norm_backward";
  vk_device *D = em_vk_device(x->device_id);
  const char *mod = NULL;
  if (check_size(D, fn, x) != 0 || module_for(D, fn, VARIANTS_SG("group_norm_back"), x, &mod) != 0)
    return -1;
  uint64_t rows = (uint64_t)(g->N * g->G);
  em_tensor *part = NULL, *x3 = NULL, *gy3 = NULL;
  sums_plan p = {0};
  if (gw || gb) { /* per-channel sums over x viewed [N, C, S] */
    int64_t C = g->G * g->Cg, sizes[3] = {g->N, C, g->S}, strides[3] = {C * g->S, g->S, 1};
    x3 = em_tensor_view_of(x, 3, sizes, strides, x->offset);
    gy3 = em_tensor_view_of(gy, 3, sizes, strides, gy->offset);
    if (x3) p = plan_sums(x3);
    part = x3 && gy3 ? scratch((int64_t)(p.P * 2) * C, x) : NULL;
  }
  int rc = (gw || gb) && part == NULL ? -1 : 0;
  pthread_mutex_lock(&D->lock);
  if (rc == 0 && gx) {
    gn_back_pc pc = {(uint32_t)rows, (uint32_t)(g->Cg * g->S), (uint32_t)g->G, (uint32_t)g->Cg,
                     (uint32_t)g->S, weight ? 1u : 0, off(gx), off(gy), off(x), off(mean),
                     off(rstd), off(weight)};
    vk_launch L = {.module = mod, .push = &pc, .push_size = sizeof pc,
                   .spec = {~0u, ~0u, ~0u, ~0u}, .ops = {gx, gy, x, mean, rstd, weight},
                   .writes = 1u};
    fold(D, rows, L.groups);
    rc = em_vk_launch(D, &L);
  }
  if (rc == 0 && (gw || gb)) {
    rc = channel_sums(D, fn, 2, &p, part, x3, gy3, mean, rstd, (uint32_t)g->G, (uint32_t)g->Cg);
    if (rc == 0)
      rc = channel_final(D, fn, 2, part, (uint32_t)p.P, x3, gw, gb, NULL, NULL, NULL, NULL, false);
  }
  pthread_mutex_unlock(&D->lock);
  em_release(part);
  em_release(x3);
  em_release(gy3);
  return rc;
}

/* ---- class losses ------------------------------------------------------------------------- */

typedef struct loss_pc {
  uint32_t rows, C, S, has;
  int64_t ignore_index;
  uint32_t smooth_d[2];
  uint32_t smooth_f, oloss, olse, ox, ot, ow;
} loss_pc;

typedef struct loss_back_pc {
  uint32_t rows, C, S, has;
  int64_t ignore_index;
  uint32_t smooth_d[2];
  uint32_t smooth_f, ogx, ogl, ox, olse, ot, ow;
} loss_back_pc;

/* Few classes: an invocation per row beats a mostly idle workgroup per row. */
static bool per_thread(const em_class_loss *L) { return L->C <= 64; }

static void loss_groups(vk_device *D, const em_class_loss *L, uint32_t g[3]) {
  uint64_t rows = (uint64_t)(L->N * L->S);
  fold(D, per_thread(L) ? cdiv(rows, WG) : rows, g);
}

int em_vk_class_loss(int log_softmax, em_tensor *loss, em_tensor *lse, em_tensor *total_weight,
                     const em_tensor *x, const em_tensor *target, const em_tensor *weight,
                     const em_class_loss *L) {
  const char *fn = log_softmax ? "cross_entropy" : "nll_loss";
  vk_device *D = em_vk_device(x->device_id);
  const char *mod = NULL, *tmod = NULL;
  if (check_size(D, fn, x) != 0 || module_for(D, fn, VARIANTS_SG("class_loss"), x, &mod) != 0 ||
      module_for(D, fn, VARIANTS_SG("class_total"), x, &tmod) != 0)
    return -1;
  int64_t rows = L->N * L->S;
  em_tensor *wrow = scratch(rows, x);
  if (wrow == NULL) return -1;
  loss_pc pc = {(uint32_t)rows, (uint32_t)L->C, (uint32_t)L->S, weight ? 1u : 0, L->ignore_index,
                {0, 0}, 0, off(loss), off(lse), off(x), off(target), off(weight)};
  put_double(L->smoothing, pc.smooth_d, &pc.smooth_f);
  pthread_mutex_lock(&D->lock);
  const em_tensor *flag = em_vk_flag_tensor(D);
  int rc = flag ? 0 : -1;
  if (rc == 0) {
    vk_launch A = {.module = mod, .push = &pc, .push_size = sizeof pc,
                   .spec = {log_softmax ? 1u : 0u, per_thread(L) ? 1u : 0u, ~0u, ~0u},
                   .ops = {loss, lse, wrow, flag, x, target, weight},
                   .writes = 1u | (lse ? 2u : 0) | 4u | 8u};
    loss_groups(D, L, A.groups);
    rc = em_vk_launch(D, &A);
  }
  if (rc == 0) {
    em_vk_flag_barrier(D);
    uint32_t tpc[2] = {(uint32_t)rows, off(total_weight)};
    vk_launch B = {.module = tmod, .push = tpc, .push_size = sizeof tpc,
                   .spec = {~0u, ~0u, ~0u, ~0u}, .ops = {total_weight, wrow}, .writes = 1u,
                   .groups = {1, 1, 1}};
    rc = em_vk_launch(D, &B);
  }
  pthread_mutex_unlock(&D->lock);
  em_release(wrow);
  return rc;
}

int em_vk_class_loss_backward(int log_softmax, em_tensor *gx, const em_tensor *gloss,
                              const em_tensor *x, const em_tensor *lse, const em_tensor *target,
                              const em_tensor *weight, const em_class_loss *L) {
  const char *fn = log_softmax ? "cross_entropy_backward" : "nll_loss_backward";
  vk_device *D = em_vk_device(x->device_id);
  const char *mod = NULL;
  if (check_size(D, fn, x) != 0 || module_for(D, fn, VARIANTS_SG("class_loss_back"), x, &mod) != 0)
    return -1;
  loss_back_pc pc = {(uint32_t)(L->N * L->S), (uint32_t)L->C, (uint32_t)L->S, weight ? 1u : 0,
                     L->ignore_index, {0, 0}, 0, off(gx), off(gloss), off(x), off(lse),
                     off(target), off(weight)};
  put_double(log_softmax ? L->smoothing : 0, pc.smooth_d, &pc.smooth_f);
  vk_launch A = {.module = mod, .push = &pc, .push_size = sizeof pc,
                 .spec = {log_softmax ? 1u : 0u, per_thread(L) ? 1u : 0u, ~0u, ~0u},
                 .ops = {gx, gloss, x, lse, target, weight}, .writes = 1u};
  loss_groups(D, L, A.groups);
  return em_vk_launch_locked(&A);
}
