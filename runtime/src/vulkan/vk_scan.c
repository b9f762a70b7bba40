/*
 * vk_scan.c: the Vulkan slots that walk lines and write them back in x's shape: scan (cumsum,
 * cumprod; kernels/scan.comp) and softmax (softmax, log_softmax; kernels/softmax.comp). The
 * lines are those of vk_reduce.h, with out's strides along them.
 */
#include "vk_reduce.h"

typedef struct line_push {
  uint32_t A, R, K, groups;
  int32_t sa, sr, sk, oa, or_, ok;
  uint32_t xbase, obase, gx;
} line_push;

/* The module of a kernel file and variant, as a literal: vk_pipeline.c remembers modules by
 * name pointer. */
static const char *module_name(const char *file, const char *variant) {
  bool scan = file[1] == 'c';
  if (variant[0] == 'I') return "scan_I64";
  if (variant[1] == '6') return scan ? "scan_F64" : "softmax_F64";
  return scan ? "scan_F32" : "softmax_F32";
}

/* softmax.comp's 128-bit path: float32 lines contiguous in x and out, their starts 16-byte
 * aligned in the bindings (blocks are), lanes along the lines. */
static bool vec4_lines(const vk_lines *L, const vk_lanes *P, const em_tensor *out) {
  if (P->col || L->x->dtype_id != EM_FLOAT32 || out->dtype_id != EM_FLOAT32) return false;
  if (L->sr != 1 || L->or_ != 1 || L->R < 16 || L->x->offset % 4 || out->offset % 4) return false;
  return (L->A == 1 || (L->sa % 4 == 0 && L->oa % 4 == 0)) &&
         (L->K == 1 || (L->sk % 4 == 0 && L->ok % 4 == 0));
}

static int run_lines(const char *fn, const char *file, uint32_t op, em_tensor *out,
                     const em_tensor *x, int dim) {
  vk_lines L;
  if (vk_lines_plan(&L, fn, out, x, x->ndim > 0 ? 1u << dim : 0) != 0) return -1;
  vk_device *D = L.D;
  const char *variant = vk_red_variant(D, fn, (em_dtype)L.x->dtype_id);
  vk_lanes P;
  int rc = variant ? vk_lanes_pick(&P, D, fn, L.A * L.K, L.R, L.sr, L.K, L.sk, 256) : -1;
  if (rc == 0) {
    line_push pc = {(uint32_t)L.A, (uint32_t)L.R, (uint32_t)L.K, P.groups,
                    (int32_t)L.sa, (int32_t)L.sr, (int32_t)L.sk,
                    (int32_t)L.oa, (int32_t)L.or_, (int32_t)L.ok,
                    (uint32_t)L.x->offset, (uint32_t)out->offset, P.gx};
    vk_launch V = {0};
    V.module = module_name(file, variant);
    V.push = &pc;
    V.push_size = sizeof pc;
    bool vec4 = file[1] != 'c' && vec4_lines(&L, &P, out);
    V.spec[0] = op | (vec4 ? 2u : 0u);
    V.spec[1] = (uint32_t)L.x->dtype_id | (uint32_t)out->dtype_id << 4;
    V.spec[2] = P.tr;
    V.spec[3] = P.col;
    V.ops[0] = out;
    V.ops[1] = L.x;
    V.writes = 1;
    V.groups[0] = P.gx;
    V.groups[1] = P.gy;
    V.groups[2] = 1;
    pthread_mutex_lock(&D->lock);
    rc = em_vk_launch(D, &V);
    pthread_mutex_unlock(&D->lock);
  }
  vk_lines_done(&L);
  return rc;
}

int em_vk_scan(int is_prod, em_tensor *out, const em_tensor *x, int dim) {
  return run_lines(is_prod ? "cumprod" : "cumsum", "scan", is_prod != 0, out, x, dim);
}

int em_vk_softmax(int is_log, em_tensor *out, const em_tensor *x, int dim) {
  const char *fn = is_log ? "log_softmax" : "softmax";
  if (!em_dtypes[x->dtype_id].is_float) /* the definition casts integers to float32 */
    return em_error("%s: expected a floating point tensor on %s, got %s", fn,
                    em_device_name(x->device_id), em_dtype_name((em_dtype)x->dtype_id));
  return run_lines(fn, "softmax", is_log != 0, out, x, dim);
}
