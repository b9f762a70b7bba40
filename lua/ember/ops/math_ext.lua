-- ember.ops.math_ext: the rest of PyTorch's elementwise math and comparisons.
--
-- asin ... digamma are C unary ops (EM_ASIN onwards: runtime/src/cpu/pointwise_special.c,
-- kernels/special.comp, gradients in runtime/src/autograd/formulas_special.c). The others are
-- compositions of existing ops, so they run on every device the ops do and their gradients
-- come from the ops': logit, frac, hypot, copysign, logaddexp, xlogy, fmax, fmin,
-- nan_to_num, heaviside, gcd, lcm; isclose, allclose, equal, isin.
local core = require 'ember.core'
local tensor = require 'ember.tensor'
local pw = require 'ember.ops.pointwise'
local creation = require 'ember.creation'
local names = require 'ember.util.names'
local C, own, check = core.C, core.own, core.check
local methods, is_tensor = tensor.methods, tensor.is_tensor

local M = {}

-- ---- unary ops with kernels ---------------------------------------------------------------
local special = {
  asin = C.EM_ASIN, acos = C.EM_ACOS, atan = C.EM_ATAN, sinh = C.EM_SINH, cosh = C.EM_COSH,
  asinh = C.EM_ASINH, acosh = C.EM_ACOSH, atanh = C.EM_ATANH, log2 = C.EM_LOG2,
  log10 = C.EM_LOG10, exp2 = C.EM_EXP2, erfc = C.EM_ERFC, erfinv = C.EM_ERFINV,
  lgamma = C.EM_LGAMMA, digamma = C.EM_DIGAMMA,
}
for name, op in pairs(special) do
  local function f(x)
    if not is_tensor(x) then error(name .. ': expected a tensor, got ' .. type(x), 2) end
    return own(C.em_unary(op, x.ptr), C.em_unary, op, x.ptr)
  end
  methods[name] = f
  M[name] = f
  methods[name .. '_'] = function(x)
    check(C.em_unary_(op, x.ptr))
    return x
  end
end
-- NumPy's names, as PyTorch has them.
for alias, name in pairs({ arcsin = 'asin', arccos = 'acos', arctan = 'atan', arcsinh = 'asinh',
  arccosh = 'acosh', arctanh = 'atanh', special_erfinv = 'erfinv' }) do
  methods[alias] = methods[name]
  M[alias] = methods[name]
end

-- ---- helpers -------------------------------------------------------------------------------
local function need_tensor(fn, x, what)
  if not is_tensor(x) then
    error(('%s: expected a tensor%s, got %s'):format(fn, what and (' for ' .. what) or '',
      type(x)), 3)
  end
end

local function need_number(fn, what, v)
  if type(v) ~= 'number' then
    error(('%s: expected %s to be a number, got %s'):format(fn, what, type(v)), 3)
  end
end

local function is_float(x) return C.em_dtype_is_floating(x.ptr.dtype_id) ~= 0 end

-- Integer and bool tensors compute in the default float dtype, as PyTorch's float-only ops.
local function floating(x)
  if is_tensor(x) and not is_float(x) then return x:to(core.dtype_names[core.default_dtype]) end
  return x
end

-- A number operand becomes a wrapped-number tensor on like's device, which promotes as a
-- Python scalar does (a float32 tensor stays float32).
local function as_tensor(v, like)
  if is_tensor(v) then return v end
  if type(v) ~= 'number' then error('expected a tensor or a number, got ' .. type(v), 3) end
  local integral = v == math.floor(v) and math.abs(v) < 2 ^ 63
  local dtype = integral and C.EM_INT64 or C.EM_FLOAT64
  local dev = like.ptr.device_id
  return own(C.em_scalar_tensor(v, dtype, dev, 1), C.em_scalar_tensor, v, dtype, dev, 1)
end
M._as_tensor = as_tensor

-- The shared options check (ember.util.names): unknown keys name the closest valid one.
local function options(fn, opts, keys)
  return names.check_options(fn, opts, keys, 3)
end

-- ---- compositions --------------------------------------------------------------------------

-- logit(x [, eps]): log(x / (1 - x)), x clamped to [eps, 1 - eps] when eps is given.
function methods.logit(x, eps)
  need_tensor('logit', x)
  x = floating(x)
  if eps ~= nil then
    need_number('logit', 'eps', eps)
    x = x:clamp(eps, 1 - eps)
  end
  return (x / (1 - x)):log()
end

-- frac(x): x - trunc(x), with x's sign.
function methods.frac(x)
  need_tensor('frac', x)
  if not is_float(x) then error('frac: expected a floating-point tensor, got ' .. x:dtype(), 2) end
  return x - x:trunc()
end

-- hypot(a, b): sqrt(a^2 + b^2) without overflow (the larger magnitude factored out); inf
-- when either is infinite, even against NaN (as C's hypot).
function methods.hypot(a, b)
  need_tensor('hypot', a)
  b = as_tensor(b, a)
  local aa, ab = a:abs(), b:abs()
  local hi, lo = pw.where(aa:ge(ab), aa, ab), pw.where(aa:ge(ab), ab, aa)
  local safe = pw.where(hi:gt(0), hi, 1)
  local r = lo / safe
  local h = hi * (r * r + 1):sqrt()
  local inf = aa:isinf():logical_or(ab:isinf())
  return pw.where(inf, math.huge, h)
end

-- The sign bit of b: negative numbers and -0.
local function signbit(b)
  return b:lt(0):logical_or(b:eq(0):logical_and((1 / b):lt(0)))
end

-- copysign(a, b): |a| with b's sign (-0 counts as negative).
function methods.copysign(a, b)
  need_tensor('copysign', a)
  a = floating(a)
  if not is_tensor(b) then
    need_number('copysign', 'the sign', b)
    local neg = b < 0 or (b == 0 and 1 / b < 0)
    return neg and -a:abs() or a:abs()
  end
  local m = a:abs()
  return pw.where(signbit(b), -m, m)
end

-- logaddexp(a, b): log(exp(a) + exp(b)) = max + log1p(exp(-|a - b|)).
function methods.logaddexp(a, b)
  need_tensor('logaddexp', a)
  b = as_tensor(b, a)
  local m = a:maximum(b)
  local r = m + (-(a - b):abs()):exp():log1p()
  -- equal infinities: a - b is NaN, the answer is a itself
  return pw.where(a:eq(b):logical_and(a:isinf()), m, r)
end

-- xlogy(x, y): x * log(y), 0 where x is 0 (unless y is NaN).
function methods.xlogy(x, y)
  if not is_tensor(x) then
    need_tensor('xlogy', y)
    x = as_tensor(x, y)
  end
  y = floating(as_tensor(y, x))
  x = floating(x)
  local r = x * y:log()
  return pw.where(x:eq(0):logical_and(y:isnan():logical_not()), 0, r)
end

-- fmax/fmin: maximum/minimum where NaN loses (NaN only when both are).
local function nan_losing(name, plain)
  return function(a, b)
    need_tensor(name, a)
    b = as_tensor(b, a)
    local r = plain(a, b)
    if not is_float(r) then return r end
    return pw.where(b:isnan(), a, pw.where(a:isnan(), b, r))
  end
end
methods.fmax = nan_losing('fmax', methods.maximum)
methods.fmin = nan_losing('fmin', methods.minimum)

-- Largest finite value of each float dtype (nan_to_num's defaults).
local float_max = {
  float32 = 3.4028234663852886e38, float64 = 1.7976931348623157e308, float16 = 65504,
  bfloat16 = 3.3895313892515355e38,
}

-- nan_to_num([nan [, posinf [, neginf]]]) or nan_to_num{nan=, posinf=, neginf=}: NaN becomes
-- nan (0), +inf posinf and -inf neginf (the dtype's largest and smallest finite values).
function methods.nan_to_num(x, nan, posinf, neginf)
  need_tensor('nan_to_num', x)
  if type(nan) == 'table' then
    local o = options('nan_to_num', nan, { nan = true, posinf = true, neginf = true })
    nan, posinf, neginf = o.nan, o.posinf, o.neginf
  end
  if not is_float(x) then return x:clone() end
  local big = float_max[x:dtype()]
  nan, posinf, neginf = nan or 0, posinf or big, neginf or -big
  need_number('nan_to_num', 'nan', nan)
  need_number('nan_to_num', 'posinf', posinf)
  need_number('nan_to_num', 'neginf', neginf)
  local r = pw.where(x:isnan(), nan, x)
  r = pw.where(x:eq(math.huge), posinf, r)
  return pw.where(x:eq(-math.huge), neginf, r)
end
function methods.nan_to_num_(x, ...) return x:copy_(methods.nan_to_num(x, ...)) end

-- heaviside(x, values): 0 below 0, 1 above, values at 0.
function methods.heaviside(x, values)
  need_tensor('heaviside', x)
  values = as_tensor(values, x)
  if values:dtype() ~= x:dtype() and is_tensor(values) and values:dim() > 0 then
    error(('heaviside: expected values of dtype %s, got %s'):format(x:dtype(), values:dtype()), 2)
  end
  return pw.where(x:eq(0), values:to(x:dtype()), x:gt(0):to(x:dtype()))
end

local function need_integer(fn, x)
  if is_float(x) or x:dtype() == 'bool' then
    error(('%s: expected integer tensors, got %s'):format(fn, x:dtype()), 3)
  end
end

-- gcd(a, b): Euclid's algorithm on whole tensors, a few steps between checks that any
-- element is still running (at most about 92 steps for int64).
function methods.gcd(a, b)
  need_tensor('gcd', a)
  b = as_tensor(b, a)
  need_integer('gcd', a)
  need_integer('gcd', b)
  local x, y = a:abs(), b:abs()
  x, y = x + y * 0, y + x * 0 -- broadcast both to the common shape and dtype
  while true do
    for _ = 1, 8 do
      local run = y:ne(0)
      local r = x:fmod(pw.where(run, y, 1))
      x, y = pw.where(run, y, x), pw.where(run, r, 0)
    end
    if not y:ne(0):any():item() then break end
  end
  return x
end

-- lcm(a, b): |a / gcd(a, b) * b|, 0 when either is 0.
function methods.lcm(a, b)
  need_tensor('lcm', a)
  b = as_tensor(b, a)
  local g = methods.gcd(a, b)
  local zero = g:eq(0)
  return pw.where(zero, 0, (a:floor_divide(pw.where(zero, 1, g)) * b):abs())
end

-- ---- comparisons ---------------------------------------------------------------------------
local close_keys = { rtol = true, atol = true, equal_nan = true }

-- isclose(a, b [, rtol [, atol [, equal_nan]]]) or isclose(a, b, {rtol=, atol=, equal_nan=}):
-- |a - b| <= atol + rtol * |b|, equal infinities included.
function methods.isclose(a, b, rtol, atol, equal_nan)
  need_tensor('isclose', a)
  b = as_tensor(b, a)
  if type(rtol) == 'table' then
    local o = options('isclose', rtol, close_keys)
    rtol, atol, equal_nan = o.rtol, o.atol, o.equal_nan
  end
  rtol, atol = rtol or 1e-5, atol or 1e-8
  need_number('isclose', 'rtol', rtol)
  need_number('isclose', 'atol', atol)
  if rtol < 0 or atol < 0 then
    error(('isclose: expected non-negative rtol and atol, got %g and %g'):format(rtol, atol), 2)
  end
  local eq = a:eq(b)
  if a:dtype() == 'bool' or b:dtype() == 'bool' then return eq end
  local fa, fb = a, b
  if not is_float(a) and not is_float(b) then fa, fb = a:to('float64'), b:to('float64') end
  local near = (fa - fb):abs():le((fb:abs() * rtol) + atol):logical_and(eq:logical_not())
  local close = eq:logical_or(near:logical_and(fa:isfinite()):logical_and(fb:isfinite()))
  if equal_nan then close = close:logical_or(fa:isnan():logical_and(fb:isnan())) end
  return close
end

-- allclose(a, b, ...): isclose everywhere, as a Lua boolean.
function methods.allclose(a, b, ...)
  need_tensor('allclose', a)
  return methods.isclose(a, b, ...):all():item() == true
end

-- equal(a, b): the same sizes and the same values, as a Lua boolean.
function methods.equal(a, b)
  need_tensor('equal', a)
  need_tensor('equal', b, 'the second argument')
  if a:dim() ~= b:dim() then return false end
  for d = 1, a:dim() do
    if a:size(d) ~= b:size(d) then return false end
  end
  return a:eq(b):all():item() == true
end

-- isin(elements, test_elements [, opts]): whether each element occurs in test_elements
-- (searchsorted in the sorted test elements); opts {invert = true} negates,
-- assume_unique is accepted and changes nothing.
function methods.isin(elements, test, opts)
  if type(opts) == 'boolean' then opts = { assume_unique = opts } end
  opts = options('isin', opts, { assume_unique = true, invert = true })
  local device = is_tensor(elements) and elements:device() or is_tensor(test) and test:device()
  if not device then error('isin: expected a tensor for elements or test_elements', 2) end
  if not is_tensor(elements) then elements = creation.full({}, elements, { dtype = test:dtype(), device = device }) end
  if not is_tensor(test) then test = creation.full({}, test, { dtype = elements:dtype(), device = device }) end
  -- NaN matches nothing (and sorts last, where the search would not look past it)
  if is_float(test) then test = test:reshape(-1):masked_select(test:reshape(-1):isnan():logical_not()) end
  local found
  if test:numel() == 0 then
    found = creation.zeros(elements:size(), { dtype = 'bool', device = device })
  else
    local seq = test:reshape(-1):sort()
    local pos = methods.searchsorted(seq, elements) - 1 -- 0-based insertion points
    local at = pos:clamp(0, seq:numel() - 1)
    local hit = own(C.em_index_select(seq.ptr, 0, at:reshape(-1).ptr))
    found = hit:reshape(elements:size()):eq(elements)
  end
  if opts.invert then found = found:logical_not() end
  return found
end

-- In-place forms of the compositions PyTorch has them for: the result copied into x (whose
-- dtype must hold it, as for every in-place op).
for _, name in ipairs({ 'logit', 'frac', 'hypot', 'copysign', 'xlogy', 'gcd', 'lcm', 'heaviside' }) do
  local f = methods[name]
  methods[name .. '_'] = function(x, ...) return x:copy_(f(x, ...)) end
end

local composed = { 'logit', 'frac', 'hypot', 'copysign', 'logaddexp', 'xlogy', 'fmax', 'fmin',
  'nan_to_num', 'heaviside', 'gcd', 'lcm', 'isclose', 'allclose', 'equal', 'isin' }
for _, name in ipairs(composed) do M[name] = methods[name] end
require('ember.ops.named').wrap(composed, methods, M)
require('ember.ops.named').wrap({ 'logit_', 'frac_', 'hypot_', 'copysign_', 'xlogy_', 'gcd_',
  'lcm_', 'heaviside_', 'nan_to_num_' }, methods)

return M
