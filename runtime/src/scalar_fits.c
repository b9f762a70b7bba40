/*
 * scalar_fits.c: whether a fill value fits the dtype it is stored into. A fill (full, fill_,
 * index_fill, masked_fill) stores a Lua number into every element; a value the dtype cannot
 * hold is refused rather than wrapped, with PyTorch's rule (c10::checked_convert):
 *   - bool takes anything;
 *   - a floating dtype takes NaN and the infinities, and finite values up to its largest
 *     finite one (70000 into float16 is refused);
 *   - an integer dtype refuses NaN and the infinities. A whole number must lie in the
 *     dtype's range, except that uint8 also takes -255 .. -1 (PyTorch wraps them, as C does
 *     for a negative int stored as unsigned); a fractional one must lie between the lowest and
 *     the largest value (it then truncates toward zero), so -0.5 into uint8 is refused.
 */
#include "internal.h"
#include <math.h>

static int too_big(const char *fn, double v, em_dtype dtype) {
  return em_error("%s: value %.17g cannot be converted to %s without overflow", fn, v,
                  em_dtypes[dtype].name);
}

int em_check_fill_value(const char *fn, em_dtype dtype, double v) {
  double lo, hi;
  if (em_dtype_is_block(dtype))
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: not implemented for %s (a quantized "
                             "block dtype: make one with ember.quant.quantize)", fn,
                             em_dtype_name(dtype));
  switch (dtype) {
  case EM_BOOL: case EM_FLOAT64: return 0;
  case EM_FLOAT32: hi = 3.4028234663852886e38; break;
  case EM_FLOAT16: hi = 65504.0; break;
  case EM_BFLOAT16: hi = 3.3895313892515355e38; break;
  case EM_INT8: lo = -128.0, hi = 127.0; goto integer;
  case EM_UINT8: lo = 0.0, hi = 255.0; goto integer;
  case EM_INT16: lo = -32768.0, hi = 32767.0; goto integer;
  case EM_INT32: lo = -2147483648.0, hi = 2147483647.0; goto integer;
  case EM_INT64: lo = -9223372036854775808.0, hi = 9223372036854775807.0; goto integer;
  default: return 0;
  }
  if (isfinite(v) && fabs(v) > hi) return too_big(fn, v, dtype);
  return 0;
integer:
  if (!isfinite(v)) return too_big(fn, v, dtype);
  /* 2^63 is the double nearest INT64_MAX: the comparisons are strict where it matters */
  if (dtype == EM_INT64) {
    if (v >= 9223372036854775808.0 || v < lo) return too_big(fn, v, dtype);
    return 0;
  }
  if (v == floor(v) && dtype == EM_UINT8) lo = -hi;
  if (v < lo || v > hi) return too_big(fn, v, dtype);
  return 0;
}
