/*
 * dtype.c: the dtype table, PyTorch's promotion rules, and 16-bit float conversions.
 */
#include <math.h>

#include "internal.h"

const em_dtype_info em_dtypes[EM_NUM_DTYPES] = {
  [EM_FLOAT32] = {"float32", 4, true, true},   [EM_FLOAT64] = {"float64", 8, true, true},
  [EM_FLOAT16] = {"float16", 2, true, true},   [EM_BFLOAT16] = {"bfloat16", 2, true, true},
  [EM_INT8] = {"int8", 1, false, true},        [EM_UINT8] = {"uint8", 1, false, false},
  [EM_INT16] = {"int16", 2, false, true},      [EM_INT32] = {"int32", 4, false, true},
  [EM_INT64] = {"int64", 8, false, true},      [EM_BOOL] = {"bool", 1, false, false},
  /* Block dtypes: the size is one block's bytes (runtime/src/quant/quant_blocks.c has the
   * layouts; em_quant_block_size computes the same figures, and test_quant_dtype checks the
   * two agree). */
  [EM_Q8_0] = {"q8_0", 34, false, false, 32},   [EM_Q4_0] = {"q4_0", 18, false, false, 32},
  [EM_Q4_1] = {"q4_1", 20, false, false, 32},   [EM_Q4_K] = {"q4_k", 144, false, false, 256},
  [EM_Q6_K] = {"q6_k", 210, false, false, 256},
  [EM_INT8_G32] = {"int8_g32", 36, false, false, 32},
  [EM_INT8_G32_SYM] = {"int8_g32_sym", 34, false, false, 32},
  [EM_INT8_G64] = {"int8_g64", 68, false, false, 64},
  [EM_INT8_G64_SYM] = {"int8_g64_sym", 66, false, false, 64},
  [EM_INT8_G128] = {"int8_g128", 132, false, false, 128},
  [EM_INT8_G128_SYM] = {"int8_g128_sym", 130, false, false, 128},
  [EM_INT4_G32] = {"int4_g32", 20, false, false, 32},
  [EM_INT4_G32_SYM] = {"int4_g32_sym", 18, false, false, 32},
  [EM_INT4_G64] = {"int4_g64", 36, false, false, 64},
  [EM_INT4_G64_SYM] = {"int4_g64_sym", 34, false, false, 64},
  [EM_INT4_G128] = {"int4_g128", 68, false, false, 128},
  [EM_INT4_G128_SYM] = {"int4_g128_sym", 66, false, false, 128},
};

static bool valid(em_dtype d) { return (unsigned)d < EM_NUM_DTYPES; }

const char *em_dtype_name(em_dtype dtype) { return valid(dtype) ? em_dtypes[dtype].name : "?"; }
size_t em_dtype_size(em_dtype dtype) { return valid(dtype) ? em_dtypes[dtype].size : 0; }
int em_dtype_is_floating(em_dtype dtype) { return valid(dtype) && em_dtypes[dtype].is_float; }
int64_t em_dtype_block_elems(em_dtype dtype) {
  if (!valid(dtype)) return 0;
  return em_dtypes[dtype].block_elems ? em_dtypes[dtype].block_elems : 1;
}
int em_dtype_is_block(em_dtype dtype) { return valid(dtype) && em_dtypes[dtype].block_elems > 0; }

int em_check_dense_dtype(const char *fn, em_dtype dtype) {
  if (!em_dtype_is_block(dtype)) return 0;
  return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: not implemented for %s (a quantized "
                           "block dtype: make one with ember.quant.quantize)", fn,
                           em_dtypes[dtype].name);
}

int em_check_not_block(const char *fn, const em_tensor *t) {
  if (t == NULL || !em_dtype_is_block((em_dtype)t->dtype_id)) return 0;
  return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: not implemented for %s (a quantized "
                           "block dtype: dequantize it first)", fn, em_dtypes[t->dtype_id].name);
}

int em_dtype_from_name(const char *name) {
  static const struct { const char *alias; em_dtype d; } aliases[] = {
    {"float", EM_FLOAT32}, {"double", EM_FLOAT64}, {"half", EM_FLOAT16}, {"long", EM_INT64},
    {"int", EM_INT32},     {"short", EM_INT16},    {"byte", EM_UINT8},  {"char", EM_INT8},
  };
  if (name == NULL) return em_error("dtype: expected a dtype name, got nil");
  for (int d = 0; d < EM_NUM_DTYPES; d++)
    if (strcmp(name, em_dtypes[d].name) == 0) return d;
  for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
    if (strcmp(name, aliases[i].alias) == 0) return (int)aliases[i].d;
  return em_error("dtype: unknown dtype '%s' (expected float32, float64, float16, bfloat16, "
                  "int8, uint8, int16, int32, int64, bool, or a block dtype: q8_0, q4_0, q4_1, "
                  "q4_k, q6_k, int8_g32 ... int4_g128_sym)", name);
}

int em_check_dtype(const char *fn, int dtype) {
  if (dtype < 0 || dtype >= EM_NUM_DTYPES)
    return em_error("%s: invalid dtype %d", fn, dtype);
  return 0;
}

/* PyTorch's promotion lattice for two dtypes of the same priority. */
em_dtype em_promote_types(em_dtype a, em_dtype b) {
  if (a == b) return a;
  if (a == EM_BOOL) return b;
  if (b == EM_BOOL) return a;
  bool fa = em_dtypes[a].is_float, fb = em_dtypes[b].is_float;
  if (fa != fb) return fa ? a : b;
  if (fa) {
    if (a == EM_FLOAT64 || b == EM_FLOAT64) return EM_FLOAT64;
    if (a == EM_FLOAT32 || b == EM_FLOAT32) return EM_FLOAT32;
    return EM_FLOAT32; /* float16 with bfloat16 */
  }
  /* Integers: uint8 with a signed type needs the next wider signed type. */
  if (a == EM_UINT8 || b == EM_UINT8) {
    em_dtype other = a == EM_UINT8 ? b : a;
    return other == EM_INT8 ? EM_INT16 : other;
  }
  return em_dtypes[a].size >= em_dtypes[b].size ? a : b;
}

/* Category order: bool < integer < floating. */
static int category(em_dtype d) {
  if (d == EM_BOOL) return 0;
  return em_dtypes[d].is_float ? 2 : 1;
}

/* Priority: tensors with dimensions beat 0-dim tensors, which beat wrapped numbers; a lower
 * priority operand only matters when it is of a higher category. */
static int priority(const em_tensor *t) {
  if (em_is_wrapped(t)) return 0;
  return t->ndim > 0 ? 2 : 1;
}

em_dtype em_result_type(const em_tensor *a, const em_tensor *b) {
  EM_NOT_NULL(EM_NUM_DTYPES, a); EM_NOT_NULL(EM_NUM_DTYPES, b);
  em_dtype da = (em_dtype)a->dtype_id, db = (em_dtype)b->dtype_id;
  int pa = priority(a), pb = priority(b);
  if (pa == pb) return em_promote_types(da, db);
  const em_tensor *hi = pa > pb ? a : b, *lo = pa > pb ? b : a;
  em_dtype dh = (em_dtype)hi->dtype_id, dl = (em_dtype)lo->dtype_id;
  if (category(dl) <= category(dh)) return dh;
  /* The lower-priority operand lifts the category only: int tensor + 2.5 gives the default
   * float dtype, not float64. */
  if (em_is_wrapped(lo)) return category(dl) == 2 ? EM_FLOAT32 : EM_INT64;
  return dl;
}

float em_half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  union { uint32_t u; float f; } v;
  if (exp == 0) {
    /* zero or subnormal: mant * 2^-24 */
    float f = (float)mant * 5.9604644775390625e-8f;
    return sign ? -f : f;
  }
  if (exp == 31) v.u = sign | 0x7f800000u | (mant << 13);
  else v.u = sign | ((exp + 112) << 23) | (mant << 13);
  return v.f;
}

uint16_t em_float_to_half(float f) {
  union { uint32_t u; float f; } v = {.f = f};
  uint32_t sign = (v.u >> 16) & 0x8000;
  uint32_t absu = v.u & 0x7fffffffu;
  if (absu >= 0x7f800000u) /* inf or nan */
    return (uint16_t)(sign | 0x7c00 | (absu > 0x7f800000u ? 0x200 : 0));
  if (absu >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds to inf */
  if (absu < 0x38800000u) {
    /* subnormal half: round absu's value to a multiple of 2^-24 */
    union { uint32_t u; float f; } a = {.u = absu};
    float scaled = a.f * 16777216.0f; /* 2^24 */
    uint32_t m = (uint32_t)lrintf(scaled);
    return (uint16_t)(sign | m);
  }
  uint32_t mant_odd = (absu >> 13) & 1;
  absu += 0xc8000fffu + mant_odd; /* rebias exponent (-112 << 23) and round to nearest even */
  return (uint16_t)(sign | (absu >> 13));
}


double em_load_as_double(const void *p, em_dtype dtype) {
  switch (dtype) {
  case EM_FLOAT32: return *(const float *)p;
  case EM_FLOAT64: return *(const double *)p;
  case EM_FLOAT16: return em_half_to_float(*(const uint16_t *)p);
  case EM_BFLOAT16: return em_bf16_to_float(*(const uint16_t *)p);
  case EM_INT8: return *(const int8_t *)p;
  case EM_UINT8: return *(const uint8_t *)p;
  case EM_INT16: return *(const int16_t *)p;
  case EM_INT32: return *(const int32_t *)p;
  case EM_INT64: return (double)*(const int64_t *)p;
  case EM_BOOL: return *(const uint8_t *)p ? 1.0 : 0.0;
  default: return 0;
  }
}

int64_t em_load_as_int64(const void *p, em_dtype dtype) {
  switch (dtype) {
  case EM_INT64: return *(const int64_t *)p;
  case EM_INT32: return *(const int32_t *)p;
  case EM_INT16: return *(const int16_t *)p;
  case EM_INT8: return *(const int8_t *)p;
  case EM_UINT8: return *(const uint8_t *)p;
  case EM_BOOL: return *(const uint8_t *)p != 0;
  default: {
    double d = em_load_as_double(p, dtype);
    return isfinite(d) ? (int64_t)d : 0;
  }
  }
}

/* Float to integer conversion is undefined in C when out of range; truncate what fits and
 * saturate the rest, so casts never trigger UB (PyTorch leaves such values unspecified). */
static int64_t double_to_int64(double v) {
  if (v != v) return 0;
  if (v >= 9.2233720368547758e18) return INT64_MAX;
  if (v <= -9.2233720368547758e18) return INT64_MIN;
  return (int64_t)v;
}

void em_store_from_double(void *p, em_dtype dtype, double v) {
  switch (dtype) {
  case EM_FLOAT32: *(float *)p = (float)v; break;
  case EM_FLOAT64: *(double *)p = v; break;
  case EM_FLOAT16: *(uint16_t *)p = em_float_to_half((float)v); break;
  case EM_BFLOAT16: *(uint16_t *)p = em_float_to_bf16((float)v); break;
  case EM_INT8: *(int8_t *)p = (int8_t)double_to_int64(v); break;
  case EM_UINT8: *(uint8_t *)p = (uint8_t)double_to_int64(v); break;
  case EM_INT16: *(int16_t *)p = (int16_t)double_to_int64(v); break;
  case EM_INT32: *(int32_t *)p = (int32_t)double_to_int64(v); break;
  case EM_INT64: *(int64_t *)p = double_to_int64(v); break;
  case EM_BOOL: *(uint8_t *)p = v != 0; break;
  default: break;
  }
}
