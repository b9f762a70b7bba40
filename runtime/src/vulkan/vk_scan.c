/*
 * vk_scan.c: the Vulkan slots that walk lines and write them back in x's shape: scan (cumsum,
 * cumprod; kernels/scan.comp) and softmax (softmax, log_softmax; kernels/softmax.comp). The
 * lines are those of vk_reduce.h, with out's strides along them.
 *
 * A scan of few long lines (a cumsum over a whole vocabulary) would run on a few workgroups:
 * such lines are cut into chunks; reduce.comp totals each chunk, scan.comp scans the totals
 * along each line, and the chunks are then scanned in parallel, each from its carry. A
 * softmax of few long lines takes each line's logsumexp from reduce.comp's chunked reductions,
 * then writes the chunks in parallel.
 */
#include "vk_reduce.h"

typedef struct line_push {
  uint32_t A, R, K, groups;
  int32_t sa, sr, sk, oa, or_, ok;
  uint32_t xbase, obase, gx;
  uint32_t chunk, cbase;
} line_push;

/* The module of a kernel file and variant, as a literal: vk_pipeline.c remembers modules by
 * name pointer. */
static const char *module_name(bool scan, const char *variant) {
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

/* One launch over the lines of L into out; carries (NULL: none) and chunks for scans. */
static int launch_lines(const char *fn, bool scan, uint32_t op, const vk_lines *L,
                        em_tensor *out, const em_tensor *carries, int64_t chunk,
                        uint32_t chunks) {
  vk_device *D = L->D;
  em_dtype xd = (em_dtype)L->x->dtype_id;
  const char *variant = scan ? vk_scan_variant(D, fn, xd) : vk_red_variant(D, fn, xd);
  vk_lanes P;
  if (variant == NULL || vk_lanes_pick(&P, D, fn, L->A * L->K, L->R, L->sr, L->K, L->sk, 256))
    return -1;
  line_push pc = {(uint32_t)L->A, (uint32_t)L->R, (uint32_t)L->K, P.groups,
                  (int32_t)L->sa, (int32_t)L->sr, (int32_t)L->sk,
                  (int32_t)L->oa, (int32_t)L->or_, (int32_t)L->ok,
                  (uint32_t)L->x->offset, (uint32_t)out->offset, P.gx,
                  (uint32_t)chunk, carries ? (uint32_t)carries->offset : 0};
  vk_launch V = {0};
  V.module = module_name(scan, variant);
  V.push = &pc;
  V.push_size = sizeof pc;
  bool vec4 = !scan && vec4_lines(L, &P, out);
  /* scan: has_carry in bit 1; softmax: vec4 in bit 1, has_lse in bit 2 */
  V.spec[0] = op | ((scan ? carries != NULL : vec4) ? 2u : 0u) | (!scan && carries ? 4u : 0u);
  V.spec[1] = (uint32_t)L->x->dtype_id | (uint32_t)out->dtype_id << 4;
  V.spec[2] = P.tr;
  V.spec[3] = P.col;
  V.ops[0] = out;
  V.ops[1] = L->x;
  V.ops[2] = carries;
  V.writes = 1;
  V.groups[0] = P.gx;
  V.groups[1] = P.gy;
  V.groups[2] = chunks;
  pthread_mutex_lock(&D->lock);
  int rc = em_vk_launch(D, &V);
  pthread_mutex_unlock(&D->lock);
  return rc;
}

/* How many chunks to cut each line of a scan or softmax into (1: none): enough workgroups to
 * fill the device, each at least 8192 elements. */
static uint32_t line_chunks(const vk_lines *L, int64_t *chunk) {
  vk_lanes P;
  *chunk = L->R;
  if (vk_lanes_pick(&P, L->D, "cumsum", L->A * L->K, L->R, L->sr, L->K, L->sk, 256) != 0)
    return 1;
  int64_t target = vk_red_cpu_type(L->D) ? 16 : 1024, least = 8192;
  if (P.groups >= target || L->R < 2 * least) return 1;
  int64_t s = (target + P.groups - 1) / P.groups;
  if (s > L->R / least) s = L->R / least;
  if (s > L->D->props.limits.maxComputeWorkGroupCount[2]) s = L->D->props.limits.maxComputeWorkGroupCount[2];
  if (s < 2) return 1;
  int64_t c = (L->R + s - 1) / s;
  *chunk = (c + 255) / 256 * 256;
  return (uint32_t)((L->R + *chunk - 1) / *chunk);
}

static int scan_chunked(const char *fn, int is_prod, const vk_lines *L, em_tensor *out,
                        int64_t chunk, uint32_t chunks) {
  const char *variant = vk_scan_variant(L->D, fn, (em_dtype)L->x->dtype_id);
  if (variant == NULL) return -1;
  em_dtype acc = variant[0] == 'I' ? EM_INT64 : variant[1] == '6' ? EM_FLOAT64 : EM_FLOAT32;
  int64_t nlines = L->A * L->K, total = nlines * chunks;
  em_tensor *part = em_empty(1, &total, acc, L->x->device_id);
  em_tensor *carries = part ? em_empty(1, &total, acc, L->x->device_id) : NULL;
  int rc = carries ? vk_red_chunk_totals(L, fn, is_prod, chunk, chunks, part) : -1;
  if (rc == 0) {
    /* the totals' inclusive scans along each line: lines of `chunks` at stride nlines */
    vk_lines T = *L;
    T.R = chunks;
    T.sa = T.oa = L->K;
    T.sk = T.ok = 1;
    T.sr = T.or_ = nlines;
    T.x = part;
    T.tmp = NULL;
    rc = launch_lines(fn, true, is_prod != 0, &T, carries, NULL, chunks, 1);
  }
  if (rc == 0) rc = launch_lines(fn, true, is_prod != 0, L, out, carries, chunk, chunks);
  em_release(part);
  em_release(carries);
  return rc;
}

int em_vk_scan(int is_prod, em_tensor *out, const em_tensor *x, int dim) {
  const char *fn = is_prod ? "cumprod" : "cumsum";
  vk_lines L;
  if (vk_lines_plan(&L, fn, out, x, x->ndim > 0 ? 1u << dim : 0) != 0) return -1;
  int64_t chunk;
  uint32_t chunks = line_chunks(&L, &chunk);
  int rc = chunks > 1 ? scan_chunked(fn, is_prod, &L, out, chunk, chunks)
                      : launch_lines(fn, true, is_prod != 0, &L, out, NULL, L.R, 1);
  vk_lines_done(&L);
  return rc;
}

int em_vk_softmax(int is_log, em_tensor *out, const em_tensor *x, int dim) {
  const char *fn = is_log ? "log_softmax" : "softmax";
  if (!em_dtypes[x->dtype_id].is_float) /* the definition casts integers to float32 */
    return em_error("%s: expected a floating point tensor on %s, got %s", fn,
                    em_device_name(x->device_id), em_dtype_name((em_dtype)x->dtype_id));
  vk_lines L;
  if (vk_lines_plan(&L, fn, out, x, x->ndim > 0 ? 1u << dim : 0) != 0) return -1;
  int64_t chunk;
  uint32_t chunks = line_chunks(&L, &chunk);
  int rc;
  if (chunks > 1) { /* few long lines: their logsumexps first, then chunks in parallel */
    em_tensor *lse = vk_red_line_lse(&L, fn);
    rc = lse ? launch_lines(fn, false, is_log != 0, &L, out, lse, chunk, chunks) : -1;
    em_release(lse);
  } else {
    rc = launch_lines(fn, false, is_log != 0, &L, out, NULL, L.R, 1);
  }
  vk_lines_done(&L);
  return rc;
}
